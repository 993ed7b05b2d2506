// The web flow's client side with no server: the authorize URL per provider, what waits in
// flowStorage, the state check, the error redirects, the exchange request, and the Apple functions
// as wrappers of the generic ones (including a flow an older version kept under its Apple key).
// The end-to-end flows against the real server are in client.test.js and browser.test.js.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, webcrypto } from 'node:crypto';
import { Gatehouse, GatehouseError, MemoryStorage } from '../gatehouse.js';

if (!globalThis.crypto) globalThis.crypto = webcrypto;

const URL_BASE = 'https://auth.example.test';
const APP_KEY = 'pk_test_webflow';
const REDIRECT = 'https://app.example.com/auth/callback';
const FLOW_KEY = `gatehouse:${APP_KEY}:web-flow`;
const APPLE_FLOW_KEY = `gatehouse:${APP_KEY}:apple-web-flow`;

const part = (value) => Buffer.from(JSON.stringify(value)).toString('base64url');
const SESSION = {
  access_token: `${part({ alg: 'ES256', typ: 'JWT' })}.${part({ sub: 'usr_1', sid: 'ses_1' })}.c2ln`, token_type: 'Bearer',
  expires_in: 900, refresh_token: 'rt_1', is_new_user: true,
  user: { id: 'usr_1', email: 'ada@example.com', email_verified: true, identities: ['github'], created_at: '2026-12-07T00:00:00Z' },
};

/** A client whose fetch records each request and answers the exchange with a session. */
function client() {
  const requests = [];
  const fetch = async (url, init) => {
    requests.push({ url, method: init.method, headers: init.headers, body: init.body ? JSON.parse(init.body) : null });
    return new Response(JSON.stringify({ data: SESSION }), { status: 201, headers: { 'Content-Type': 'application/json' } });
  };
  const web = new Gatehouse({ url: URL_BASE, appKey: APP_KEY, storage: new MemoryStorage(), flowStorage: new MemoryStorage(), fetch, lock: 'local' });
  return { web, requests };
}

const stored = async (web, key = FLOW_KEY) => JSON.parse((await web.flowStorage.getItem(key)) ?? 'null');
const back = (query) => `${REDIRECT}?${new URLSearchParams(query)}`;

async function rejects(promise, code) {
  const error = await promise.then(() => null, (e) => e);
  assert.ok(error instanceof GatehouseError, `expected a GatehouseError ${code}, got ${error}`);
  assert.equal(error.code, code, `${error.code}: ${error.detail}`);
  return error;
}

test("the authorize URL: Apple's path for 'apple', the app's provider path for any other id, percent-encoded", async () => {
  const { web, requests } = client();
  const cases = [
    ['apple', '/v1/auth/oauth/apple/authorize'],
    ['github', '/v1/auth/oidc/github/authorize'],
    ['corp-sso', '/v1/auth/oidc/corp-sso/authorize'],
    ['a/b?c#d e', '/v1/auth/oidc/a%2Fb%3Fc%23d%20e/authorize'],
  ];
  for (const [provider, path] of cases) {
    const url = new URL(await web.startWebFlow({ provider, redirectURI: REDIRECT, redirect: false }));
    assert.equal(url.origin, URL_BASE);
    assert.equal(url.pathname, path, provider);
    assert.deepEqual([...url.searchParams.keys()].sort(), ['app_key', 'code_challenge', 'code_challenge_method', 'redirect_uri', 'state']);
    assert.equal(url.searchParams.get('app_key'), APP_KEY);
    assert.equal(url.searchParams.get('redirect_uri'), REDIRECT);
    assert.equal(url.searchParams.get('code_challenge_method'), 'S256');
    const flow = await stored(web);
    assert.deepEqual(Object.keys(flow).sort(), ['provider', 'redirectURI', 'state', 'verifier']);
    assert.equal(flow.provider, provider);
    assert.equal(flow.redirectURI, REDIRECT);
    assert.equal(url.searchParams.get('state'), flow.state);
    assert.match(flow.state, /^[A-Za-z0-9_-]{22}$/);
    assert.match(flow.verifier, /^[A-Za-z0-9_-]{43}$/);
    // S256 as node:crypto computes it; only the challenge leaves the page.
    assert.equal(url.searchParams.get('code_challenge'), createHash('sha256').update(flow.verifier).digest('base64url'));
    assert.ok(!url.href.includes(flow.verifier));
  }
  assert.equal(await web.flowStorage.getItem(APPLE_FLOW_KEY), null, 'one key per app, whichever the provider');
  assert.equal(requests.length, 0, 'starting sends nothing to the server');
  await assert.rejects(web.startWebFlow({ redirectURI: REDIRECT }), TypeError);
  await assert.rejects(web.startWebFlow({ provider: '', redirectURI: REDIRECT }), TypeError);
  await assert.rejects(web.startWebFlow({ provider: 'github' }), TypeError);
});

test('by default the browser is sent to the authorize URL', async () => {
  const { web } = client();
  const assigned = [];
  const saved = Object.getOwnPropertyDescriptor(globalThis, 'location');
  Object.defineProperty(globalThis, 'location', { value: { assign: (url) => assigned.push(url) }, configurable: true });
  try {
    const url = await web.startWebFlow({ provider: 'line', redirectURI: REDIRECT });
    assert.deepEqual(assigned, [url]);
    assert.ok(url.startsWith(`${URL_BASE}/v1/auth/oidc/line/authorize?`));
  } finally {
    if (saved) Object.defineProperty(globalThis, 'location', saved);
    else delete globalThis.location;
  }
});

test('finishing: the state is checked first, then the login code and the verifier go to /v1/auth/exchange', async () => {
  const { web, requests } = client();
  const url = new URL(await web.startWebFlow({ provider: 'github', redirectURI: REDIRECT, redirect: false }));
  const { state, verifier } = await stored(web);
  assert.equal(web.isWebFlowReturn(back({ login_code: 'lc_1', state })), true);
  assert.equal(web.isWebFlowReturn(back({ error: 'access_denied', state })), true);
  assert.equal(web.isWebFlowReturn(back({ login_code: 'lc_1' })), false, 'no state: not a web flow');
  assert.equal(web.isWebFlowReturn(`${REDIRECT}?code=x&state=${state}`), false, "a provider's own redirect is not ours");
  assert.equal(url.searchParams.get('state'), state);

  const session = await web.finishWebFlow(back({ login_code: 'lc_1', state }));
  assert.equal(session.user.id, 'usr_1');
  assert.equal(session.isNewUser, true);
  assert.equal(requests.length, 1);
  assert.equal(requests[0].url, `${URL_BASE}/v1/auth/exchange`);
  assert.equal(requests[0].method, 'POST');
  assert.equal(requests[0].headers['X-App-Key'], APP_KEY);
  assert.deepEqual(requests[0].body, { login_code: 'lc_1', code_verifier: verifier });
  assert.equal((await web.session()).accessToken, SESSION.access_token, 'the session is kept as a sign-in keeps it');
  assert.equal(await web.flowStorage.getItem(FLOW_KEY), null, 'the flow is used up');
  // The same redirect again: no flow any more, refused here.
  const again = await rejects(web.finishWebFlow(back({ login_code: 'lc_1', state })), 'client/web-flow-state-mismatch');
  assert.equal(again.status, 0);
  assert.equal(requests.length, 1);
});

test("a state this tab did not start is refused before any request, and names the flow's provider", async () => {
  const { web, requests } = client();
  await web.startWebFlow({ provider: 'kakao', redirectURI: REDIRECT, redirect: false });
  const { state } = await stored(web);
  const forged = await rejects(web.finishWebFlow(back({ login_code: 'lc_1', state: 'forged' })), 'client/web-flow-state-mismatch');
  assert.match(forged.detail, /"kakao"/);
  // Used up: even its own state is refused now.
  await rejects(web.finishWebFlow(back({ login_code: 'lc_1', state })), 'client/web-flow-state-mismatch');
  // A newer start replaces the older flow: the older state no longer finishes.
  await web.startWebFlow({ provider: 'kakao', redirectURI: REDIRECT, redirect: false });
  const older = (await stored(web)).state;
  await web.startWebFlow({ provider: 'naver', redirectURI: REDIRECT, redirect: false });
  const replaced = await rejects(web.finishWebFlow(back({ login_code: 'lc_2', state: older })), 'client/web-flow-state-mismatch');
  assert.match(replaced.detail, /"naver"/);
  // Garbage in flowStorage is no flow.
  await web.flowStorage.setItem(FLOW_KEY, '{not json');
  await rejects(web.finishWebFlow(back({ login_code: 'lc_3', state: 'x' })), 'client/web-flow-state-mismatch');
  assert.equal(requests.length, 0);
});

test("the flow's error redirects: typed errors that name the provider, no request", async () => {
  const { web, requests } = client();
  const cases = [
    ['microsoft', 'access_denied', 'client/web-flow-denied', 'Sign in with "microsoft" ended with access_denied.'],
    ['microsoft', 'server_error', 'client/web-flow-server-error', 'Sign in with "microsoft" ended with server_error.'],
    ['microsoft', 'something_new', 'client/web-flow-denied', 'Sign in with "microsoft" ended with something_new.'],
    ['apple', 'user_cancelled_authorize', 'client/web-flow-cancelled', 'Sign in with Apple ended with user_cancelled_authorize.'],
    ['github', 'user_disabled', 'auth/user-disabled', 'Signed in with "github", but this account is disabled.'],
  ];
  for (const [provider, error, code, detail] of cases) {
    await web.startWebFlow({ provider, redirectURI: REDIRECT, redirect: false });
    const { state } = await stored(web);
    const thrown = await rejects(web.finishWebFlow(back({ error, state })), code);
    assert.equal(thrown.detail, detail);
    assert.equal(await web.flowStorage.getItem(FLOW_KEY), null);
  }
  assert.equal(requests.length, 0);
});

test('the Apple functions are the generic ones for Apple, and finish a flow an older version kept under its Apple key', async () => {
  const { web, requests } = client();
  const url = new URL(await web.startAppleWebFlow({ redirectURI: REDIRECT, redirect: false }));
  assert.equal(url.pathname, '/v1/auth/oauth/apple/authorize');
  const flow = await stored(web);
  assert.equal(flow.provider, 'apple');
  assert.equal(web.isAppleWebFlowReturn(back({ login_code: 'lc_a', state: flow.state })), true);
  await web.finishAppleWebFlow(back({ login_code: 'lc_a', state: flow.state }));
  assert.deepEqual(requests.at(-1).body, { login_code: 'lc_a', code_verifier: flow.verifier });

  // Started by the Apple wrapper, finished by the generic function (and the other way round).
  await web.startAppleWebFlow({ redirectURI: REDIRECT, redirect: false });
  await web.finishWebFlow(back({ login_code: 'lc_b', state: (await stored(web)).state }));
  await web.startWebFlow({ provider: 'apple', redirectURI: REDIRECT, redirect: false });
  await web.finishAppleWebFlow(back({ login_code: 'lc_c', state: (await stored(web)).state }));
  assert.deepEqual(requests.map((r) => r.body.login_code), ['lc_a', 'lc_b', 'lc_c']);

  // What an older version stored before the redirect: {state, verifier, redirectURI} under the Apple key.
  await web.flowStorage.setItem(APPLE_FLOW_KEY, JSON.stringify({ state: 'old-state', verifier: 'old-verifier', redirectURI: REDIRECT }));
  const mismatch = await rejects(web.finishAppleWebFlow(back({ login_code: 'lc_d', state: 'other' })), 'client/web-flow-state-mismatch');
  assert.match(mismatch.detail, /Apple/);
  assert.equal(await web.flowStorage.getItem(APPLE_FLOW_KEY), null, 'used up too');
  await web.flowStorage.setItem(APPLE_FLOW_KEY, JSON.stringify({ state: 'old-state', verifier: 'old-verifier', redirectURI: REDIRECT }));
  await web.finishAppleWebFlow(back({ login_code: 'lc_e', state: 'old-state' }));
  assert.deepEqual(requests.at(-1).body, { login_code: 'lc_e', code_verifier: 'old-verifier' });
  // A new start replaces an older version's flow as well.
  await web.flowStorage.setItem(APPLE_FLOW_KEY, JSON.stringify({ state: 'old-state', verifier: 'old-verifier', redirectURI: REDIRECT }));
  await web.startWebFlow({ provider: 'github', redirectURI: REDIRECT, redirect: false });
  assert.equal(await web.flowStorage.getItem(APPLE_FLOW_KEY), null);
  await rejects(web.finishWebFlow(back({ login_code: 'lc_f', state: 'old-state' })), 'client/web-flow-state-mismatch');
  assert.equal(requests.length, 4);
});
