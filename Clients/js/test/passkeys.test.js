// Passkeys end to end in headless Chromium: a page on http://localhost:<port> (a secure context)
// uses the module; DevTools' WebAuthn domain gives its tab a virtual platform authenticator
// (CTAP2, internal, resident keys, user verification, presence simulated), so navigator.credentials
// runs the real ceremony: the server's options, the authenticator's signature, the server's checks.
// Every step takes a screenshot into the artifacts folder (GATEHOUSE_TEST_ARTIFACTS, default
// .build/test-artifacts/gatehouse-js-passkeys), and a failed step says what the page, the
// authenticator and the server saw.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Browser } from './support/chromium.js';
import { startEnvironment } from './support/env.js';
import { freePort, repoRoot } from './support/server.js';
import { localise, readmeBlocks } from './support/readme.js';
import { totp } from './support/totp.js';

const MODULE = fileURLToPath(new URL('../gatehouse.js', import.meta.url));
const ARTIFACTS = path.join(process.env.GATEHOUSE_TEST_ARTIFACTS ?? path.join(repoRoot, '.build/test-artifacts'), 'gatehouse-js-passkeys');
const PASSWORD = 'correct horse battery';
/** The AAGUID of Chromium's virtual authenticator (01020304-0506-0708-0102-030405060708). */
const VIRTUAL_AAGUID = '01020304050607080102030405060708';
const AUTHENTICATOR = {
  protocol: 'ctap2', transport: 'internal', hasResidentKey: true, hasUserVerification: true, isUserVerified: true, automaticPresenceSimulation: true,
};

let env;
let app;
let browser;
let pages;
let pageOrigin;
let shots = 0;
/** The tab of the ceremony and its authenticator. */
let tab;
let authenticatorId;
/** What the steps learn, for the later ones. */
const account = { email: `passkey.${process.pid}@example.com`, id: null, passkey: null, totpSecret: null };

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const claims = (token) => JSON.parse(Buffer.from(token.split('.')[1], 'base64url'));
const hex = (base64) => Buffer.from(base64, 'base64').toString('hex');

function html({ title, script }) {
  return `<!doctype html><html><head><meta charset="utf-8"><title>${title}</title>
<style>body { font: 14px/1.4 sans-serif; margin: 0 } header { position: sticky; top: 0; background: #eef; padding: 8px 16px }
h1 { font-size: 18px; margin: 0 } #state { font-weight: bold } #out { white-space: pre-wrap; font: 12px monospace; padding: 0 16px }</style>
</head><body><header><h1>${title}</h1><div id="state">signed out</div></header><pre id="out"></pre>
<script type="module">
import * as module from '/gatehouse.js';
window.module = module;
const out = document.querySelector('#out');
window.shown = [];
window.show = (text) => { window.shown.push(text); out.textContent += text + '\\n'; window.scrollTo(0, document.body.scrollHeight); };
/** Runs one step; its value or its error, as plain data for the test. */
window.attempt = async (label, fn) => {
  show('> ' + label);
  try {
    const value = await fn();
    show('  ok');
    return { ok: true, value: value === undefined ? null : JSON.parse(JSON.stringify(value)) };
  } catch (e) {
    show('  refused: ' + (e && e.code ? e.code + ': ' : '') + (e && e.message));
    return { ok: false, error: {
      name: e?.name ?? null, code: e?.code ?? null, status: e?.status ?? null, detail: e?.detail ?? null, message: String(e?.message ?? e),
      errors: e?.errors ?? null, cause: e?.cause ? (e.cause.name + ': ' + e.cause.message) : null,
      mfaToken: e?.mfaToken ?? null, methods: e?.methods ?? null, enroll: e?.enroll ?? null, expiresIn: e?.expiresIn ?? null,
      isMfaRequired: e instanceof module.MfaRequiredError, isGatehouseError: e instanceof module.GatehouseError,
    } };
  }
};
${script}
window.ready = true;
</script></body></html>`;
}

/** The ceremony page for `appKey` (default: the test's app). */
function ceremonyPage(appKey = app.appKey) {
  return html({ title: 'gatehouse-js passkeys', script: `
const gatehouse = new module.Gatehouse({ url: ${JSON.stringify(env.server.url)}, appKey: ${JSON.stringify(appKey)}, storage: new module.MemoryStorage() });
window.gatehouse = gatehouse;
gatehouse.onAuthStateChange((event, session) => { document.querySelector('#state').textContent = session ? 'signed in as ' + session.user.email : 'signed out'; });` });
}

/** The README's `js passkeys` block, run once the test has attached an authenticator (window.go). */
function readmePage() {
  const [block] = readmeBlocks('js passkeys');
  const code = localise(block, { url: env.server.url, appKey: app.appKey });
  return html({ title: "gatehouse-js passkeys: the README's snippet", script: `
const gatehouse = new module.Gatehouse({ url: ${JSON.stringify(env.server.url)}, appKey: ${JSON.stringify(app.appKey)}, storage: new module.MemoryStorage() });
window.gatehouse = gatehouse;
await new Promise((resolve) => { window.go = resolve; });
try {
  await gatehouse.signUp({ email: ${JSON.stringify(`readme.passkey.${process.pid}@example.com`)}, password: ${JSON.stringify(PASSWORD)} });
${code}
} catch (error) {
  window.failed = (error && error.code ? error.code + ': ' : '') + String(error && error.message);
}
window.done = true;` });
}

before(async () => {
  fs.rmSync(ARTIFACTS, { recursive: true, force: true });
  fs.mkdirSync(ARTIFACTS, { recursive: true });
  env = await startEnvironment();
  const port = await freePort();
  pageOrigin = `http://localhost:${port}`;
  // No passkeys setting yet: the second test sets it through the admin API.
  app = await env.createApp({ allowed_origins: [pageOrigin] });
  pages = http.createServer((req, res) => {
    const { pathname, searchParams } = new URL(req.url, pageOrigin);
    if (pathname === '/gatehouse.js') return res.writeHead(200, { 'Content-Type': 'text/javascript' }).end(fs.readFileSync(MODULE));
    if (pathname === '/') return res.writeHead(200, { 'Content-Type': 'text/html' }).end(ceremonyPage(searchParams.get('app') ?? undefined));
    if (pathname === '/readme') return res.writeHead(200, { 'Content-Type': 'text/html' }).end(readmePage());
    res.writeHead(404).end();
  });
  await new Promise((resolve) => pages.listen(port, '127.0.0.1', resolve));
  browser = await Browser.launch();
  tab = await browser.newPage(`${pageOrigin}/`);
  await tab.waitFor('window.ready === true', { what: 'the ceremony page' });
  authenticatorId = await attachAuthenticator(tab, AUTHENTICATOR);
});

after(async () => {
  try { await browser?.close(); } finally {
    pages?.close();
    pages?.closeAllConnections?.();
    await env?.stop();
  }
});

/** WebAuthn.enable and a virtual authenticator on `page` (one internal authenticator per tab). */
async function attachAuthenticator(page, options) {
  await page.send('WebAuthn.enable', { enableUI: false });
  // WebAuthn needs a focused page; a second tab takes the focus from the first.
  await page.send('Emulation.setFocusEmulationEnabled', { enabled: true });
  return (await page.send('WebAuthn.addVirtualAuthenticator', { options })).authenticatorId;
}

/** The authenticator's credentials (CDP encodes ids and handles in standard base64). */
async function credentials(page = tab, id = authenticatorId) {
  return (await page.send('WebAuthn.getCredentials', { authenticatorId: id })).credentials;
}

async function screenshot(page, label) {
  const file = path.join(ARTIFACTS, `${String(++shots).padStart(2, '0')}-${label.toLowerCase().replace(/[^a-z0-9]+/g, '-').replace(/^-|-$/g, '').slice(0, 60)}.png`);
  try { return await page.screenshot(file); } catch (error) { return `(no screenshot: ${error.message})`; }
}

function serverLog(lines = 30) {
  try {
    return fs.readFileSync(path.join(env.server.dir, 'server.log'), 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
  } catch (error) {
    return `(no server log: ${error.message})`;
  }
}

function hint(error) {
  if (!error) return '';
  if (error.code === 'request/not-found' || error.code === 'request/method-not-allowed') {
    return 'hint: this server build has no such route: the passkey/MFA endpoints come from i32-passkeys and i32-mfa (merged?)';
  }
  if (error.code === 'client/network') {
    return `hint: the page's fetch failed: CORS (is ${pageOrigin} in the app's allowed_origins?), or a server without the route answered the preflight without CORS headers (the passkey/MFA endpoints come from i32-passkeys and i32-mfa: merged?)`;
  }
  if (error.code === 'auth/provider-not-configured') return "hint: the app's passkeys setting is missing or did not take (PATCH /v1/admin/app)";
  if (error.code === 'auth/invalid-credential') return 'hint: the server refused the WebAuthn response; its detail names the check (origin, rpIdHash, challenge, flags, signature, sign count)';
  if (error.code === 'request/validation-failed') return `hint: the server could not read the request: ${JSON.stringify(error.errors)}`;
  if (error.code === 'client/passkey-failed' && /SecurityError/.test(error.detail ?? '')) return `hint: Chromium refused the rp id for ${pageOrigin}: the options' rp.id / rpId must be "localhost"`;
  if (error.code === 'client/passkey-cancelled') return "hint: no credential of the authenticator matched the options (allowCredentials, rpId), or the page had no focus";
  if (error.code === 'client/passkey-already-registered') return 'hint: the options listed this credential in excludeCredentials';
  return '';
}

/** Everything a failed step leaves behind, for its assertion message. */
async function diagnosis(page, label, result, expectation) {
  const file = await screenshot(page, `FAILED ${label}`);
  let held = '(could not read)';
  try {
    held = JSON.stringify((await credentials(page, page === tab ? authenticatorId : page.authenticatorId))
      .map((c) => ({ credentialId: c.credentialId, rpId: c.rpId, userHandle: c.userHandle, signCount: c.signCount, backupEligibility: c.backupEligibility })));
  } catch { /* no authenticator on that page */ }
  return [
    `step "${label}": ${expectation}`,
    `error: ${JSON.stringify(result.error ?? null)}`,
    hint(result.error),
    `screenshot: ${file}`,
    `authenticator holds: ${held}`,
    `page console:\n${page.console.slice(-20).join('\n') || '(empty)'}`,
    `server log (last lines):\n${serverLog()}`,
  ].filter(Boolean).join('\n');
}

/** Runs `body` (the inside of an async function in the page), screenshots, and returns its result. */
async function step(label, body, page = tab) {
  await page.send('Page.bringToFront');
  const result = await page.evaluate(`window.attempt(${JSON.stringify(label)}, async () => { ${body} })`);
  await screenshot(page, label);
  return result;
}

/** A step that must succeed; its value. */
async function ok(label, body, page = tab) {
  const result = await step(label, body, page);
  if (!result.ok) assert.fail(await diagnosis(page, label, result, 'expected to succeed'));
  return result.value;
}

/** A step that must fail with `code` (and `status`); the error. */
async function refused(label, body, code, status, page = tab) {
  const result = await step(label, body, page);
  if (result.ok || result.error.code !== code || (status !== undefined && result.error.status !== status)) {
    assert.fail(await diagnosis(page, label, result, `expected ${code}${status !== undefined ? ` (${status})` : ''}, got ${result.ok ? `success: ${JSON.stringify(result.value)}` : result.error.code}`));
  }
  return result.error;
}

/** The server's own answer to a signed-in call, with the page's access token (not through the module). */
async function serverView(method, pathname, page = tab) {
  const token = await page.evaluate('window.gatehouse.getAccessToken()');
  const response = await fetch(env.server.url + pathname, { method, headers: { 'X-App-Key': app.appKey, Authorization: `Bearer ${token}` } });
  const text = await response.text();
  assert.equal(response.status, 200, `${method} ${pathname}: ${response.status} ${text}`);
  return JSON.parse(text);
}

async function accessClaims(page = tab) { return claims(await page.evaluate('window.gatehouse.getAccessToken()')); }

async function signCount() {
  const held = await credentials();
  assert.equal(held.length, 1, `the authenticator holds one credential: ${JSON.stringify(held.map((c) => c.rpId))}`);
  return held[0].signCount;
}

function requires(...names) {
  for (const name of names) {
    const value = account[name];
    assert.ok(Array.isArray(value) ? value.length > 0 : value, `needs ${name} from an earlier step (that step failed: see above)`);
  }
}

test("WebAuthn's JSON forms: the module's own base64url conversion and Chromium's (parse…FromJSON, toJSON) agree, through the authenticator", async () => {
  const result = await ok('conversion: create and get with the fallback, compared with the native forms', `
    const { decodeCreationOptions, decodeRequestOptions, encodeCredential, bufferToBase64url } = window.module;
    const random = (n) => bufferToBase64url(crypto.getRandomValues(new Uint8Array(n)));
    const binary = (value) => value instanceof ArrayBuffer || ArrayBuffer.isView(value) ? 'b64:' + bufferToBase64url(value)
      : Array.isArray(value) ? value.map(binary) : value && typeof value === 'object' ? Object.fromEntries(Object.entries(value).map(([k, v]) => [k, binary(v)])) : value;
    const bare = (c) => ({ id: c.id, rawId: c.rawId, type: c.type, authenticatorAttachment: c.authenticatorAttachment, response: c.response,
      getClientExtensionResults: () => c.getClientExtensionResults() });
    const fallback = async (fn) => {
      const saved = [PublicKeyCredential.parseCreationOptionsFromJSON, PublicKeyCredential.parseRequestOptionsFromJSON];
      PublicKeyCredential.parseCreationOptionsFromJSON = undefined;
      PublicKeyCredential.parseRequestOptionsFromJSON = undefined;
      try { return await fn(); } finally { [PublicKeyCredential.parseCreationOptionsFromJSON, PublicKeyCredential.parseRequestOptionsFromJSON] = saved; }
    };
    if (typeof PublicKeyCredential.parseCreationOptionsFromJSON !== 'function') throw new Error('this Chromium has no parseCreationOptionsFromJSON to compare with');
    const creationJSON = { challenge: random(32), rp: { id: 'localhost', name: 'conversion check' }, user: { id: random(16), name: 'conversion@example.com', displayName: 'Conversion' },
      pubKeyCredParams: [{ type: 'public-key', alg: -7 }, { type: 'public-key', alg: -257 }], timeout: 60000,
      excludeCredentials: [{ type: 'public-key', id: random(32) }], authenticatorSelection: { residentKey: 'required', requireResidentKey: true, userVerification: 'required' }, attestation: 'none' };
    const nativeCreation = decodeCreationOptions(creationJSON);
    const ownCreation = await fallback(() => decodeCreationOptions(creationJSON));
    const created = await navigator.credentials.create({ publicKey: ownCreation });
    const requestJSON = { challenge: random(32), rpId: 'localhost', timeout: 60000, userVerification: 'required', allowCredentials: [{ type: 'public-key', id: created.id }] };
    const nativeRequest = decodeRequestOptions(requestJSON);
    const ownRequest = await fallback(() => decodeRequestOptions(requestJSON));
    const asserted = await navigator.credentials.get({ publicKey: ownRequest });
    return {
      creationJSON, requestJSON,
      nativeCreation: binary(nativeCreation), ownCreation: binary(ownCreation), nativeRequest: binary(nativeRequest), ownRequest: binary(ownRequest),
      created: { native: created.toJSON(), own: encodeCredential(bare(created)) },
      asserted: { native: asserted.toJSON(), own: encodeCredential(bare(asserted)) },
    };`);
  try {
    const b = (text) => `b64:${text}`;
    // The fallback decoded exactly the binary fields...
    assert.deepEqual(result.ownCreation, {
      ...result.creationJSON, challenge: b(result.creationJSON.challenge), user: { ...result.creationJSON.user, id: b(result.creationJSON.user.id) },
      excludeCredentials: [{ type: 'public-key', id: b(result.creationJSON.excludeCredentials[0].id) }],
    });
    assert.deepEqual(result.ownRequest, { ...result.requestJSON, challenge: b(result.requestJSON.challenge), allowCredentials: [{ type: 'public-key', id: b(result.created.native.rawId) }] });
    // ... into the same bytes as Chromium's parser (which adds its defaults, such as hints: []).
    for (const key of Object.keys(result.ownCreation)) assert.deepEqual(result.nativeCreation[key], result.ownCreation[key], `creation options: ${key}`);
    for (const key of Object.keys(result.ownRequest)) assert.deepEqual(result.nativeRequest[key], result.ownRequest[key], `request options: ${key}`);
    // The authenticator signed the challenge the fallback decoded.
    const clientData = (credential) => JSON.parse(Buffer.from(credential.response.clientDataJSON, 'base64url'));
    assert.equal(clientData(result.created.native).challenge, result.creationJSON.challenge);
    assert.equal(clientData(result.created.native).origin, pageOrigin);
    assert.equal(clientData(result.asserted.native).challenge, result.requestJSON.challenge);
    // The module's encoding of the credentials is Chromium's toJSON(), field for field.
    assert.deepEqual(result.created.own, result.created.native);
    assert.deepEqual(result.asserted.own, result.asserted.native);
    assert.ok(result.asserted.own.response.signature && result.asserted.own.response.userHandle === result.creationJSON.user.id);
  } finally {
    await tab.send('WebAuthn.clearCredentials', { authenticatorId });
  }
});

test('passkey calls answer 503 auth/provider-not-configured until the app has a passkeys setting; then it is set through the admin API', async () => {
  const session = await ok('sign up with a password', `return gatehouse.signUp({ email: ${JSON.stringify(account.email)}, password: ${JSON.stringify(PASSWORD)}, firstName: 'Pat' });`);
  account.id = session.user.id;
  await refused('register a passkey before the app has the setting', "return gatehouse.registerPasskey({ name: 'too early' });", 'auth/provider-not-configured', 503);
  await refused('passkey sign-in before the app has the setting', 'return gatehouse.signInWithPasskey();', 'auth/provider-not-configured', 503);
  assert.equal((await credentials()).length, 0, 'no credential was made');

  const patched = await env.server.admin('PATCH', '/v1/admin/app', { passkeys: { rp_id: 'localhost', origins: [pageOrigin] } }, app.secretKey);
  assert.equal(patched.data.passkeys.rp_id, 'localhost', JSON.stringify(patched.data));
  assert.deepEqual(patched.data.passkeys.origins, [pageOrigin]);
});

test('register a passkey, sign out, sign in with it (no email): the same user, method passkey, amr hwk + mfa; the sign count advances', async () => {
  requires('id');
  const passkey = await ok('register a passkey', "return gatehouse.registerPasskey({ name: 'Chromium virtual authenticator' });");
  account.passkey = passkey;
  assert.match(passkey.id, /\S/);
  assert.equal(passkey.name, 'Chromium virtual authenticator');
  assert.equal(passkey.backedUp, false, 'the virtual authenticator is not backup eligible');
  assert.equal(String(passkey.aaguid).replace(/-/g, '').toLowerCase(), VIRTUAL_AAGUID, `aaguid: ${passkey.aaguid}`);
  assert.equal(passkey.lastUsedAt, null);

  // The authenticator: one discoverable credential for rp "localhost", whose user handle is opaque (not the user id).
  const [held] = await credentials();
  assert.equal((await credentials()).length, 1);
  assert.equal(held.rpId, 'localhost');
  assert.equal(held.isResidentCredential, true);
  assert.notEqual(Buffer.from(held.userHandle, 'base64').toString('utf8'), account.id, 'user.id is not the Gatehouse user id');
  assert.ok(!Buffer.from(held.userHandle, 'base64').toString('utf8').includes(account.id));
  const countAtRegistration = held.signCount;

  // The server's view, straight from the API: the passkey and no key material.
  const listed = await serverView('GET', '/v1/me/passkeys');
  assert.equal(listed.data.length, 1, JSON.stringify(listed));
  assert.equal(listed.data[0].id, passkey.id);
  assert.deepEqual(Object.keys(listed.data[0]).sort(), ['aaguid', 'backed_up', 'created_at', 'id', 'last_used_at', 'name']);
  const events = await env.server.admin('GET', `/v1/admin/events?user_id=${account.id}`, null, app.secretKey);
  assert.ok(events.data.some((e) => e.type === 'passkey.added'), `passkey.added among ${events.data.map((e) => e.type)}`);

  // excludeCredentials: the same authenticator cannot register a second passkey of the user.
  await refused('register again on the same authenticator', 'return gatehouse.registerPasskey();', 'client/passkey-already-registered', 0);
  assert.equal((await serverView('GET', '/v1/me/passkeys')).data.length, 1);

  await ok('sign out', 'return gatehouse.signOut();');
  const session = await ok('sign in with the passkey', 'return gatehouse.signInWithPasskey();');
  assert.equal(session.user.id, account.id, 'the passkey signs in its own user');
  assert.equal(session.user.email, account.email);
  assert.equal(session.isNewUser, false);
  const amr = (await accessClaims()).amr;
  assert.ok(amr.includes('hwk') && amr.includes('mfa') && !amr.includes('swk'), `amr ${JSON.stringify(amr)}`);
  const sessions = await ok('list the sessions', 'return gatehouse.getSessions();');
  assert.equal(sessions.find((s) => s.current)?.method, 'passkey', JSON.stringify(sessions));
  assert.equal(await signCount(), countAtRegistration + 1, 'the authenticator signed once more');
  const used = (await serverView('GET', '/v1/me/passkeys')).data[0];
  assert.ok(used.last_used_at, `last_used_at after the sign-in: ${JSON.stringify(used)}`);
});

test("the admin's view: the user object lists the passkey among its factors, without key material", async () => {
  requires('passkey');
  const admin = await env.server.admin('GET', `/v1/admin/users/${account.id}`, null, app.secretKey);
  const factors = JSON.stringify(admin.data.factors ?? null);
  assert.ok(factors.includes(account.passkey.id), `the admin user object's factors: ${factors}`);
  const [held] = await credentials();
  assert.ok(!factors.includes(held.privateKey.slice(0, 16)) && !/public_?key/i.test(factors), 'no key material');
});

test('reauthenticate with the passkey renews auth_time', async () => {
  requires('passkey');
  const before = (await accessClaims()).auth_time;
  const count = await signCount();
  await sleep(1100);
  await ok('reauthenticate with the passkey', 'return gatehouse.reauthenticate({ passkey: true });');
  const after = await accessClaims();
  assert.ok(after.auth_time > before, `auth_time ${before} → ${after.auth_time}`);
  assert.equal(await signCount(), count + 1);
});

test('the passkey as the second step: with an authenticator app enrolled, a password sign-in asks for a second factor, and the passkey answers it', async () => {
  requires('passkey');
  // Second factors on (the default policy, off, allows no enrolment).
  const patched = await env.server.admin('PATCH', '/v1/admin/app', { mfa: { policy: 'optional', methods: ['totp', 'passkey'] } }, app.secretKey);
  assert.equal(patched.data.mfa.policy, 'optional', JSON.stringify(patched.data.mfa));
  const enrolment = await ok('add an authenticator app', "return gatehouse.enrollTotp({ name: 'Phone' });");
  account.totpSecret = enrolment.secret;
  assert.match(enrolment.otpauthUrl, /^otpauth:\/\/totp\//);
  const { recoveryCodes } = await ok('confirm it with a code', `return gatehouse.confirmTotp(${JSON.stringify(enrolment.id)}, ${JSON.stringify(totp(enrolment.secret))});`);
  assert.equal(recoveryCodes.length, 10);

  await ok('sign out', 'return gatehouse.signOut();');
  const asked = await refused('sign in with the password', `return gatehouse.signIn({ email: ${JSON.stringify(account.email)}, password: ${JSON.stringify(PASSWORD)} });`, 'auth/mfa-required', 401);
  assert.equal(asked.isMfaRequired, true, 'an MfaRequiredError');
  assert.equal(asked.isGatehouseError, true);
  assert.match(asked.mfaToken, /^mfa_/);
  assert.ok(asked.methods.includes('passkey') && asked.methods.includes('totp'), `methods ${JSON.stringify(asked.methods)}`);
  assert.equal(asked.enroll, false);
  assert.equal(asked.expiresIn, 300);
  assert.equal(await tab.evaluate('window.gatehouse.session()'), null, 'not signed in before the second step');

  const count = await signCount();
  const session = await ok('answer the second step with the passkey', `return gatehouse.verifyMfa({ mfaToken: ${JSON.stringify(asked.mfaToken)}, passkey: true });`);
  assert.equal(session.user.id, account.id);
  const amr = (await accessClaims()).amr;
  for (const value of ['pwd', 'hwk', 'mfa']) assert.ok(amr.includes(value), `amr ${JSON.stringify(amr)} has ${value}`);
  assert.equal(await signCount(), count + 1);
  await refused('the used mfa token again', `return gatehouse.verifyMfa({ mfaToken: ${JSON.stringify(asked.mfaToken)}, code: '000000' });`, 'auth/invalid-mfa-token', 401);

  // A passkey sign-in is two factors already: no second step after it, even with TOTP enrolled.
  await ok('sign out', 'return gatehouse.signOut();');
  const direct = await ok('sign in with the passkey (TOTP enrolled)', 'return gatehouse.signInWithPasskey();');
  assert.equal(direct.user.id, account.id);
});

test('a synced passkey (backup eligible) on a browser without the JSON helpers: registered and used through the module\'s own conversion; backedUp, amr swk', async () => {
  requires('id');
  // Another tab: its own authenticator, backup eligible and backed up, as a synced passkey provider's.
  const synced = await browser.newPage(`${pageOrigin}/`);
  await synced.waitFor('window.ready === true', { what: 'the second ceremony page' });
  synced.authenticatorId = await attachAuthenticator(synced, { ...AUTHENTICATOR, defaultBackupEligibility: true, defaultBackupState: true });
  await synced.evaluate(`(() => {
    PublicKeyCredential.parseCreationOptionsFromJSON = undefined;
    PublicKeyCredential.parseRequestOptionsFromJSON = undefined;
    PublicKeyCredential.prototype.toJSON = undefined;
  })()`);
  assert.equal(await synced.evaluate('typeof PublicKeyCredential.parseRequestOptionsFromJSON'), 'undefined');
  // The account has an authenticator app when the second-step test passed: answer with its next code.
  const code = account.totpSecret ? totp(account.totpSecret, Date.now() + 30000) : null;
  await ok('sign in with the password (and the second step by TOTP, when enrolled)', `
    try {
      return await gatehouse.signIn({ email: ${JSON.stringify(account.email)}, password: ${JSON.stringify(PASSWORD)} });
    } catch (error) {
      if (!(error instanceof window.module.MfaRequiredError) || ${JSON.stringify(code)} === null) throw error;
      return gatehouse.verifyMfa({ mfaToken: error.mfaToken, code: ${JSON.stringify(code)} });
    }`, synced);
  const passkey = await ok('register a synced passkey', "return gatehouse.registerPasskey({ name: 'Synced' });", synced);
  assert.equal(passkey.backedUp, true, JSON.stringify(passkey));
  await ok('sign out', 'return gatehouse.signOut();', synced);
  const session = await ok('sign in with the synced passkey', 'return gatehouse.signInWithPasskey();', synced);
  assert.equal(session.user.id, account.id);
  const amr = (await accessClaims(synced)).amr;
  assert.ok(amr.includes('swk') && amr.includes('mfa') && !amr.includes('hwk'), `amr ${JSON.stringify(amr)}`);
  assert.equal((await serverView('GET', '/v1/me/passkeys', synced)).data.length, 2);
  const [held] = await credentials(synced, synced.authenticatorId);
  assert.equal(held.backupEligibility, true);
  await ok('remove the synced passkey', `return gatehouse.removePasskey(${JSON.stringify(passkey.id)});`, synced);
});

test('a cloned authenticator (its sign count gone backwards) is refused and audited', async () => {
  requires('passkey');
  const [held] = await credentials();
  // The same key, with a counter behind the one the server has seen: what a copy of the key would send.
  await tab.send('WebAuthn.removeCredential', { authenticatorId, credentialId: held.credentialId });
  await tab.send('WebAuthn.addCredential', { authenticatorId, credential: { ...held, signCount: 0 } });
  await ok('sign out', 'return gatehouse.signOut();');
  const error = await refused('sign in with the cloned passkey', 'return gatehouse.signInWithPasskey();', 'auth/invalid-credential', 400);
  assert.ok(error.detail, 'the refusal says why');
  const events = await env.server.admin('GET', `/v1/admin/events?user_id=${account.id}`, null, app.secretKey);
  assert.ok(events.data.some((e) => e.type === 'passkey.clone_suspected'), `passkey.clone_suspected among ${events.data.map((e) => e.type)}`);
  // Put the authenticator's counter ahead again for the steps after this one.
  await tab.send('WebAuthn.removeCredential', { authenticatorId, credentialId: held.credentialId });
  await tab.send('WebAuthn.addCredential', { authenticatorId, credential: { ...held, signCount: held.signCount + 100 } });
});

test('rename and remove the passkey; the removed passkey no longer signs in', async () => {
  requires('passkey');
  await ok('sign in with the passkey (its counter ahead again)', 'return gatehouse.signInWithPasskey();');
  const renamed = await ok('rename the passkey', `return gatehouse.renamePasskey(${JSON.stringify(account.passkey.id)}, 'Renamed');`);
  assert.equal(renamed.name, 'Renamed');
  assert.deepEqual((await ok('list the passkeys', 'return gatehouse.listPasskeys();')).map((p) => p.name), ['Renamed']);
  await ok('remove the passkey', `return gatehouse.removePasskey(${JSON.stringify(account.passkey.id)});`);
  assert.deepEqual((await serverView('GET', '/v1/me/passkeys')).data, []);
  const events = await env.server.admin('GET', `/v1/admin/events?user_id=${account.id}`, null, app.secretKey);
  assert.ok(events.data.some((e) => e.type === 'passkey.removed'), `passkey.removed among ${events.data.map((e) => e.type)}`);
  await ok('sign out', 'return gatehouse.signOut();');
  assert.equal((await credentials()).length, 1, 'the device still holds the key');
  await refused('sign in with the removed passkey', 'return gatehouse.signInWithPasskey();', 'auth/invalid-credential', 400);
});

test('policy required, passkeys only: the sign-up enrols a passkey with the mfa token, verifyMfa({mfaToken}) finishes it; later the passkey is the second step', async () => {
  const strict = await env.createApp({
    allowed_origins: [pageOrigin], passkeys: { rp_id: 'localhost', origins: [pageOrigin] }, mfa: { policy: 'required', methods: ['passkey'] },
  });
  const page = await browser.newPage(`${pageOrigin}/?app=${encodeURIComponent(strict.appKey)}`);
  await page.waitFor('window.ready === true', { what: 'the ceremony page of the required app' });
  page.authenticatorId = await attachAuthenticator(page, AUTHENTICATOR);
  const email = `required.passkey.${process.pid}@example.com`;
  const asked = await refused('sign up (the app requires a second factor)', `return gatehouse.signUp({ email: ${JSON.stringify(email)}, password: ${JSON.stringify(PASSWORD)} });`, 'auth/mfa-required', 401, page);
  assert.equal(asked.enroll, true);
  assert.deepEqual(asked.methods, ['passkey'], 'what the app lets them enrol');
  assert.match(asked.mfaToken, /^mfa_/);
  const passkey = await ok('enrol a passkey with the mfa token', `return gatehouse.registerPasskey({ name: 'Enrolled', mfaToken: ${JSON.stringify(asked.mfaToken)} });`, page);
  assert.equal(passkey.name, 'Enrolled');
  const session = await ok('finish the sign-up (no proof: the enrolment was it)', `return gatehouse.verifyMfa({ mfaToken: ${JSON.stringify(asked.mfaToken)} });`, page);
  assert.equal(session.user.email, email);
  assert.equal(session.isNewUser, true);
  const amr = (await accessClaims(page)).amr;
  for (const value of ['pwd', 'hwk', 'mfa']) assert.ok(amr.includes(value), `amr ${JSON.stringify(amr)} has ${value}`);

  await ok('sign out', 'return gatehouse.signOut();', page);
  const again = await refused('sign in with the password', `return gatehouse.signIn({ email: ${JSON.stringify(email)}, password: ${JSON.stringify(PASSWORD)} });`, 'auth/mfa-required', 401, page);
  assert.equal(again.enroll, false);
  assert.ok(again.methods.includes('passkey'), `methods ${JSON.stringify(again.methods)}`);
  const second = await ok('answer with the passkey', `return gatehouse.verifyMfa({ mfaToken: ${JSON.stringify(again.mfaToken)}, passkey: true });`, page);
  assert.equal(second.user.id, session.user.id);
  await ok('sign out', 'return gatehouse.signOut();', page);
  const direct = await ok('sign in with the passkey (no second step after it)', 'return gatehouse.signInWithPasskey();', page);
  assert.equal(direct.user.id, session.user.id);
});

test("the README's passkey snippet runs in a page and does what it says", async () => {
  const readme = await browser.newPage(`${pageOrigin}/readme`);
  await readme.waitFor('typeof window.go === "function"', { what: "the README page's start" });
  readme.authenticatorId = await attachAuthenticator(readme, AUTHENTICATOR);
  await readme.send('Page.bringToFront');
  await readme.evaluate('window.go()');
  await readme.waitFor('window.done === true', { what: "the README's snippet" });
  await screenshot(readme, 'the README snippet');
  const failed = await readme.evaluate('window.failed ?? null');
  if (failed) assert.fail(await diagnosis(readme, "the README's passkey snippet", { error: { message: failed, code: failed.split(':')[0] } }, 'expected to run'));
  assert.deepEqual(await readme.evaluate('window.shown'), [`Signed in with a passkey as readme.passkey.${process.pid}@example.com`, 'Work laptop']);
});
