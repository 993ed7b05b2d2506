// The client's error codes against docs/errors.md (the server's catalogue) and gatehouse.d.ts.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { fileURLToPath } from 'node:url';
import { CLIENT_ERROR_CODES, GatehouseError, SERVER_ERROR_CODES } from '../gatehouse.js';

const read = (relative) => fs.readFileSync(fileURLToPath(new URL(relative, import.meta.url)), 'utf8');

/** The codes of the table in docs/errors.md: its rows start with | `code` | status |. */
function catalogue() {
  return [...read('../../../docs/errors.md').matchAll(/^\| `([a-z]+\/[a-z-]+)` \| [0-9 /]+ \|/gm)].map((m) => m[1]);
}

/** The string literals of one `export type Name = | '…' | '…';` in the declarations. */
function declared(name) {
  const match = read('../gatehouse.d.ts').match(new RegExp(`export type ${name} =([^;]*);`));
  assert.ok(match, `gatehouse.d.ts declares ${name}`);
  return [...match[1].matchAll(/'([^']+)'/g)].map((m) => m[1]);
}

test('SERVER_ERROR_CODES is exactly the table of docs/errors.md', () => {
  const documented = catalogue();
  assert.ok(documented.length >= 40, `read ${documented.length} codes from docs/errors.md`);
  assert.deepEqual([...SERVER_ERROR_CODES].sort(), [...new Set(documented)].sort());
});

test('the declarations list the same codes as the module', () => {
  assert.deepEqual(declared('ServerErrorCode').sort(), [...SERVER_ERROR_CODES].sort());
  assert.deepEqual(declared('ClientErrorCode').sort(), [...CLIENT_ERROR_CODES].sort());
});

test('client codes never collide with server codes, and the README names each', () => {
  const readme = read('../README.md');
  for (const code of CLIENT_ERROR_CODES) {
    assert.ok(code.startsWith('client/'));
    assert.ok(!SERVER_ERROR_CODES.includes(code));
    assert.ok(readme.includes(`\`${code}\``), `README.md documents ${code}`);
  }
});

test('a problem document becomes a GatehouseError with its details', () => {
  const error = new GatehouseError('auth/requires-recent-login', 403, {
    title: 'Recent login required', detail: 'Sign in again.', request_id: 'req_1', retry_after: 3,
    errors: [{ field: 'email', message: 'x' }], sanction_code: 'spam', suspended_until: null,
  });
  assert.equal(error.requiresRecentLogin, true);
  assert.equal(error.isSignedOut, false);
  assert.equal(error.message, 'Sign in again.');
  assert.equal(error.requestId, 'req_1');
  assert.equal(error.retryAfter, 3);
  assert.equal(error.errors[0].field, 'email');
  assert.equal(error.sanctionCode, 'spam');
  assert.equal(new GatehouseError('auth/refresh-token-reused', 401).isSignedOut, true);
});
