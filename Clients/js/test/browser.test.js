// The Apple web flow end to end in headless Chromium: a page on its own local origin uses the
// module (its code is the README's `js browser` blocks), is sent through Gatehouse to the fake
// Apple's authorize page, comes back with a login code, and exchanges it with PKCE. The app is in
// cookie mode, so the refresh token lives in an HttpOnly cookie. Then two tabs race a refresh
// under Web Locks.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import { fileURLToPath } from 'node:url';
import { Browser } from './support/chromium.js';
import { startEnvironment, APPLE_SERVICES_ID } from './support/env.js';
import { freePort } from './support/server.js';
import { localise, readmeBlocks } from './support/readme.js';

const MODULE = fileURLToPath(new URL('../gatehouse.js', import.meta.url));

let env;
let app;
let browser;
let pages;
let pageOrigin;

function page(blocks, { setup = true } = {}) {
  const code = blocks.map((block) => localise(block, { url: env.server.url, appKey: app.appKey, pageOrigin })).join('\n');
  return `<!doctype html><html><head><meta charset="utf-8"><title>gatehouse-js test page</title></head><body>
<button id="apple">Sign in with Apple</button><pre id="out"></pre>
<script type="module">
import { Gatehouse, GatehouseError } from '/gatehouse.js';
window.shown = [];
const show = (text) => { window.shown.push(text); document.querySelector('#out').textContent += text + '\\n'; };
${setup ? `const gatehouse = new Gatehouse({ url: ${JSON.stringify(env.server.url)}, appKey: ${JSON.stringify(app.appKey)}, mode: 'cookie' });
window.gatehouse = gatehouse;` : ''}
try {
${code}
} catch (error) {
  window.failed = (error && error.code ? error.code + ': ' : '') + String(error && error.message);
}
window.ready = true;
</script></body></html>`;
}

before(async () => {
  env = await startEnvironment();
  const port = await freePort();
  pageOrigin = `http://127.0.0.1:${port}`;
  app = await env.createApp({ refresh_cookie: 'only', allowed_origins: [pageOrigin], redirect_uris: [`${pageOrigin}/auth/callback`] });
  const [webFlow, cookie] = readmeBlocks('js browser');
  assert.ok(webFlow && cookie, 'the README has the two browser blocks');
  pages = http.createServer((req, res) => {
    const path = new URL(req.url, pageOrigin).pathname;
    if (path === '/gatehouse.js') return res.writeHead(200, { 'Content-Type': 'text/javascript' }).end(fs.readFileSync(MODULE));
    if (path === '/' || path === '/auth/callback') return res.writeHead(200, { 'Content-Type': 'text/html' }).end(page([webFlow]));
    if (path === '/restore') return res.writeHead(200, { 'Content-Type': 'text/html' }).end(page([cookie], { setup: false }));
    res.writeHead(404).end();
  });
  await new Promise((resolve) => pages.listen(port, '127.0.0.1', resolve));
  browser = await Browser.launch();
});

after(async () => {
  try { await browser?.close(); } finally {
    pages?.close();
    pages?.closeAllConnections?.();
    await env?.stop();
  }
});

const metric = (route, status) => env.server.metric('gatehouse_http_requests_total', { route, ...(status ? { status } : {}) });

test('Sign in with Apple, web flow: redirect to Apple, back with a login code, exchange with PKCE, signed in (cookie mode)', async () => {
  const tab = await browser.newPage(`${pageOrigin}/`);
  await tab.waitFor('window.ready === true', { what: 'the sign-in page' });
  await tab.evaluate("document.querySelector('#apple').click()");
  await tab.waitFor(`location.href.startsWith(${JSON.stringify(env.apple.url + '/auth/authorize')})`, { what: "the fake Apple's authorize page" });

  // Gatehouse sent the browser to Apple with the Services ID, form_post and its own nonce and state.
  const authorize = env.apple.authorizeCalls.at(-1);
  assert.equal(authorize.client_id, APPLE_SERVICES_ID);
  assert.equal(authorize.response_mode, 'form_post');
  assert.equal(authorize.redirect_uri, `${env.server.url}/v1/auth/oauth/apple/callback`);
  assert.ok(authorize.nonce && authorize.state);

  const exchangesBefore = await metric('/v1/auth/exchange', '201');
  await tab.evaluate("document.querySelector('#continue').click()");
  await tab.waitFor(`location.origin === ${JSON.stringify(pageOrigin)} && window.ready === true && (window.shown.length > 0 || window.failed)`, { what: 'the callback page' });
  assert.equal(await tab.evaluate('window.failed ?? null'), null);
  assert.deepEqual(await tab.evaluate('window.shown'), ['Signed in as Ada Lovelace (new account)']);
  assert.equal(await tab.evaluate('location.search'), '', 'the used login code is out of the address bar');
  assert.equal(await metric('/v1/auth/exchange', '201'), exchangesBefore + 1);
  assert.equal(await tab.evaluate(`sessionStorage.getItem('gatehouse:${app.appKey}:web-flow')`), null, 'the flow is used up');

  // Cookie mode: no refresh token in storage or in document.cookie; the browser holds it HttpOnly.
  const stored = JSON.parse(await tab.evaluate(`localStorage.getItem('gatehouse:${app.appKey}:session')`));
  assert.equal(stored.refreshToken, null);
  assert.equal(typeof stored.accessToken, 'string');
  const storedUser = JSON.parse(await tab.evaluate(`localStorage.getItem('gatehouse:${app.appKey}:session:user')`));
  assert.equal(storedUser.email, env.apple.nextUser.email);
  assert.ok(!(await tab.evaluate('document.cookie')).includes('gh_refresh'));
  const { cookies } = await browser.send('Storage.getCookies');
  const refreshCookie = cookies.find((c) => c.name === `gh_refresh_${app.id}`);
  assert.ok(refreshCookie, `the browser keeps gh_refresh_${app.id}`);
  assert.equal(refreshCookie.httpOnly, true);
  assert.equal(refreshCookie.path, '/v1/auth');
});

test('cookie mode after a reload: the cookie alone refreshes the session (README snippet)', async () => {
  const refreshesBefore = await metric('/v1/auth/refresh', '200');
  const tab = await browser.newPage(`${pageOrigin}/restore`);
  await tab.waitFor('window.ready === true', { what: 'the restore page' });
  assert.equal(await tab.evaluate('window.failed ?? null'), null);
  assert.deepEqual(await tab.evaluate('window.shown'), ['Welcome back, Ada']);
  assert.equal(await metric('/v1/auth/refresh', '200'), refreshesBefore + 1);
});

test('two tabs, 10 calls each, with an expired token: Web Locks let one refresh reach the server', async () => {
  const [a, b] = [await browser.newPage(`${pageOrigin}/`), await browser.newPage(`${pageOrigin}/`)];
  await a.waitFor('window.ready === true');
  await b.waitFor('window.ready === true');
  assert.equal(await a.evaluate("typeof navigator.locks?.request === 'function'"), true, 'Chromium has Web Locks');
  const key = `gatehouse:${app.appKey}:session`;
  await a.evaluate(`(() => { const s = JSON.parse(localStorage.getItem('${key}')); s.expiresAt = Date.now() - 1000; localStorage.setItem('${key}', JSON.stringify(s)); })()`);
  const before = await metric('/v1/auth/refresh');
  const race = 'Promise.all(Array.from({ length: 10 }, () => window.gatehouse.getUser())).then((users) => users.map((u) => u.email))';
  const [fromA, fromB] = await Promise.all([a.evaluate(race), b.evaluate(race)]);
  assert.equal(fromA.length, 10);
  assert.equal(fromB.length, 10);
  assert.ok([...fromA, ...fromB].every((email) => email === env.apple.nextUser.email));
  assert.equal(await metric('/v1/auth/refresh'), before + 1);
});
