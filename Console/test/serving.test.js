// /console/ as the server answers it: every file of Console/ served byte for byte from the fixed
// table with its type, the strict CSP and nosniff; revalidation by ETag; nothing but the table's
// names found (no path reaches the file system); GATEHOUSE_CONSOLE=off removes the routes.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { GatehouseServer, repoRoot } from './support.js';

const folder = path.join(repoRoot, 'Console');
const types = { '.html': 'text/html; charset=utf-8', '.css': 'text/css; charset=utf-8', '.js': 'text/javascript; charset=utf-8' };
let server;

before(async () => { server = await new GatehouseServer().start(); });
after(async () => { await server?.stop(); });

function checkPolicy(response) {
  const csp = response.headers.get('content-security-policy');
  assert.ok(csp, 'a Content-Security-Policy');
  const directives = Object.fromEntries(csp.split(';').map((d) => d.trim().split(/\s+/)).map(([name, ...values]) => [name, values]));
  assert.deepEqual(directives['default-src'], ["'none'"]);
  assert.deepEqual(directives['script-src'], ["'self'"]);
  assert.deepEqual(directives['style-src'], ["'self'"]);
  assert.deepEqual(directives['connect-src'], ["'self'"]);
  assert.deepEqual(directives['frame-ancestors'], ["'none'"]);
  assert.ok(!csp.includes('unsafe-inline') && !csp.includes('unsafe-eval') && !csp.includes('http'), csp);
  assert.equal(response.headers.get('x-content-type-options'), 'nosniff');
  assert.equal(response.headers.get('x-frame-options'), 'DENY');
  assert.equal(response.headers.get('referrer-policy'), 'no-referrer');
  assert.equal(response.headers.get('cache-control'), 'no-cache');
}

test('every file of Console/ is served, byte for byte, with its type and the policy', async () => {
  const files = fs.readdirSync(folder).filter((name) => types[path.extname(name)]);
  assert.ok(files.includes('index.html') && files.includes('console.js') && files.length >= 5, files.join());
  for (const name of files) {
    const response = await fetch(`${server.url}/console/${name}`);
    assert.equal(response.status, 200, name);
    assert.equal(response.headers.get('content-type'), types[path.extname(name)], name);
    checkPolicy(response);
    assert.deepEqual(Buffer.from(await response.arrayBuffer()), fs.readFileSync(path.join(folder, name)), `${name}: the repository's bytes`);
  }
  const index = await fetch(`${server.url}/console/`);
  assert.equal(index.status, 200);
  checkPolicy(index);
  assert.equal(await index.text(), fs.readFileSync(path.join(folder, 'index.html'), 'utf8'));
});

test('the files name nothing outside this origin, and no inline script or style', () => {
  for (const name of fs.readdirSync(folder).filter((n) => types[path.extname(n)])) {
    const text = fs.readFileSync(path.join(folder, name), 'utf8');
    assert.ok(!/(?:src|href)\s*=\s*["']?(?:https?:)?\/\//i.test(text), `${name} loads from elsewhere`);
    assert.ok(!/@import|url\(\s*["']?(?:https?:)?\/\//i.test(text), `${name} imports from elsewhere`);
    assert.ok(!/innerHTML|outerHTML|insertAdjacentHTML|document\.write|eval\(|new Function/.test(text), `${name} builds markup or code from strings`);
    if (name.endsWith('.html')) {
      assert.ok(!/<script(?![^>]*\bsrc=)[^>]*>/i.test(text), `${name}: an inline script`);
      assert.ok(!/<style|\sstyle=/i.test(text), `${name}: an inline style`);
    }
  }
});

test('an unchanged file is revalidated with its ETag: 304 without a body', async () => {
  const first = await fetch(`${server.url}/console/console.css`);
  const etag = first.headers.get('etag');
  assert.match(etag, /^"[0-9a-f]{24}"$/);
  const again = await fetch(`${server.url}/console/console.css`, { headers: { 'If-None-Match': etag } });
  assert.equal(again.status, 304);
  assert.equal((await again.arrayBuffer()).byteLength, 0);
  const other = await fetch(`${server.url}/console/console.css`, { headers: { 'If-None-Match': '"0000"' } });
  assert.equal(other.status, 200);
});

test('only the table\'s names are found: no path leads into the repository or the disk', async () => {
  for (const probe of [
    '/console/ConsoleFiles.swift', '/console/test/run', '/console/..%2FPackage.swift', '/console/%2e%2e%2fPackage.swift',
    '/console/..', '/console/.%2e/.%2e/etc/passwd', '/console/index.html%00.js', '/console/nothing.js', '/console/INDEX.HTML',
  ]) {
    // Sent as written: fetch would resolve the dot segments before sending.
    const response = await rawGet(probe);
    // A NUL in the path is refused before routing (400); every other name is simply not in the table.
    assert.equal(response.status, probe.includes('%00') ? 400 : 404, probe);
    assert.match(response.type, /problem\+json/, probe);
  }
  const bare = await fetch(`${server.url}/console`, { redirect: 'manual' });
  assert.equal(bare.status, 308);
  assert.equal(bare.headers.get('location'), '/console/');
  const post = await fetch(`${server.url}/console/`, { method: 'POST' });
  assert.equal(post.status, 405);
});

function rawGet(pathname) {
  const { hostname, port } = new URL(server.url);
  return new Promise((resolve, reject) => {
    http.get({ hostname, port, path: pathname }, (response) => {
      response.resume();
      response.on('end', () => resolve({ status: response.statusCode, type: response.headers['content-type'] ?? '' }));
    }).on('error', reject);
  });
}

test('GATEHOUSE_CONSOLE=off: no console, the admin API unchanged', async () => {
  const off = await new GatehouseServer({ env: { GATEHOUSE_CONSOLE: 'off' } }).start();
  try {
    for (const probe of ['/console/', '/console/console.js', '/console']) assert.equal((await fetch(off.url + probe, { redirect: 'manual' })).status, 404, probe);
    const apps = await off.admin('GET', '/v1/admin/apps');
    assert.deepEqual(apps.data, []);
  } finally {
    await off.stop();
  }
});
