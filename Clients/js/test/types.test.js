// The hand-written declarations, checked by Debian's TypeScript (tsc, package node-typescript)
// with --strict on a usage example that imports the package by name (package.json "exports" and
// "types"), and a control that must fail.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const packageDir = path.resolve(here, '..');

function tsc(file) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gatehouse-js-tsc-'));
  try {
    fs.mkdirSync(path.join(dir, 'node_modules'));
    fs.symlinkSync(packageDir, path.join(dir, 'node_modules', 'gatehouse-js'), 'dir');
    fs.writeFileSync(path.join(dir, 'package.json'), '{"type": "module"}');
    fs.copyFileSync(path.join(here, 'types', file), path.join(dir, file.replace('.ts', '.mts')));
    const result = spawnSync(process.env.TSC_BIN ?? 'tsc', [
      '--strict', '--noEmit', '--target', 'es2022', '--module', 'node16', '--moduleResolution', 'node16',
      '--lib', 'es2022,dom', path.join(dir, file.replace('.ts', '.mts')),
    ], { cwd: dir, encoding: 'utf8' });
    if (result.error) throw new Error(`tsc could not run (${result.error.message}): scripts/install-deps --test installs node-typescript`);
    return { status: result.status, output: result.stdout + result.stderr };
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

test('the usage example compiles with tsc --strict against gatehouse.d.ts', () => {
  const { status, output } = tsc('usage.ts');
  assert.equal(status, 0, output);
});

test('the control: wrong field types and unknown error codes do not compile', () => {
  const { status, output } = tsc('wrong.ts');
  assert.notEqual(status, 0);
  assert.match(output, /TS2322/);
  assert.match(output, /auth\/no-such-code/);
  assert.match(output, /not assignable to parameter of type 'MfaVerification'/, 'two proofs at once are refused');
  assert.match(output, /Property 'provider' is missing/, 'a web flow without its provider is refused');
});
