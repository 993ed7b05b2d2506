// The web flow through one of the app's own providers, end to end against the real server
// (.build/debug/gatehouse): an `oidc` provider played by support/providers.js's FakeOIDC on
// 127.0.0.1 (hence GATEHOUSE_ALLOW_PRIVATE_OUTBOUND), the test playing the browser with fetch
// (redirects followed by hand, the flow's cookie carried), and gatehouse-js making the authorize
// URL, checking the redirect and exchanging the login code with its PKCE verifier.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Gatehouse, GatehouseError, MemoryStorage } from '../gatehouse.js';
import { startEnvironment } from './support/env.js';
import { FakeOIDC } from './support/providers.js';

const CLIENT_ID = 'gatehouse-js-corp';
const CLIENT_SECRET = 'corp-secret-for-tests';
const REDIRECT = 'https://app.example.com/auth/callback';

let env;
let corp;
let app;

before(async () => {
  corp = await new FakeOIDC().start();
  corp.registerClient(CLIENT_ID, CLIENT_SECRET);
  env = await startEnvironment({ serverEnv: { GATEHOUSE_ALLOW_PRIVATE_OUTBOUND: 'true' } });
  app = await env.createApp({
    sign_in_methods: ['password', 'corp'],
    oidc_providers: [{ id: 'corp', kind: 'oidc', client_ids: [CLIENT_ID], client_secret: CLIENT_SECRET, issuer: corp.issuer }],
    redirect_uris: [REDIRECT],
  });
});
after(async () => {
  await env?.stop();
  corp?.stop();
});

function client() {
  return new Gatehouse({ url: env.server.url, appKey: app.appKey, storage: new MemoryStorage(), flowStorage: new MemoryStorage(), lock: 'local' });
}

/** What a browser does between `startWebFlow` and the page at `redirectURI`: the URL it lands on. */
async function browse(authorizeURL) {
  const toProvider = await fetch(authorizeURL, { redirect: 'manual' });
  assert.equal(toProvider.status, 302, await toProvider.text());
  const cookie = (toProvider.headers.get('set-cookie') ?? '').split(';')[0];
  assert.match(cookie, /^gh_flow=/, 'the flow is bound to this browser');
  const atProvider = new URL(toProvider.headers.get('location'));
  const toGatehouse = await fetch(atProvider, { redirect: 'manual' });
  assert.equal(toGatehouse.status, 302);
  const callback = toGatehouse.headers.get('location');
  const toApp = await fetch(callback, { redirect: 'manual', headers: { Cookie: cookie } });
  assert.equal(toApp.status, 303, await toApp.text());
  return { atProvider, callback, landing: toApp.headers.get('location') };
}

test("signing in through an app's oidc provider: Gatehouse, the provider, back with a login code, exchanged with PKCE", async () => {
  const web = client();
  const authorizeURL = await web.startWebFlow({ provider: 'corp', redirectURI: REDIRECT, redirect: false });
  assert.equal(new URL(authorizeURL).pathname, '/v1/auth/oidc/corp/authorize');
  const started = await web.flowStorage.getItem(`gatehouse:${app.appKey}:web-flow`);
  const { state } = JSON.parse(started);
  const { atProvider, callback, landing } = await browse(authorizeURL);

  // Gatehouse sent the browser to the provider's authorization endpoint as its client, with a
  // state and a nonce of its own (the page's state and verifier never leave the page's side).
  assert.equal(`${atProvider.origin}${atProvider.pathname}`, `${corp.url}/authorize`);
  const asked = atProvider.searchParams;
  assert.equal(asked.get('client_id'), CLIENT_ID);
  assert.equal(asked.get('response_type'), 'code');
  assert.equal(asked.get('redirect_uri'), `${env.server.url}/v1/auth/oidc/corp/callback`);
  assert.ok(asked.get('scope').split(' ').includes('openid'));
  assert.ok(asked.get('nonce'));
  assert.ok(asked.get('state') && asked.get('state') !== state);
  // Gatehouse's own PKCE pair with the provider (it lists S256); the page's stays between the page and Gatehouse.
  assert.equal(asked.get('code_challenge_method'), 'S256');
  assert.match(asked.get('code_challenge'), /^[A-Za-z0-9_-]{43}$/);
  assert.notEqual(asked.get('code_challenge'), new URL(authorizeURL).searchParams.get('code_challenge'));
  assert.ok(callback.startsWith(`${env.server.url}/v1/auth/oidc/corp/callback?`));

  // Back on the page: a one-time login code and the page's own state.
  const back = new URL(landing);
  assert.equal(`${back.origin}${back.pathname}`, REDIRECT);
  assert.equal(back.searchParams.get('state'), state);
  assert.ok(back.searchParams.get('login_code'));
  assert.equal(web.isWebFlowReturn(landing), true);
  const session = await web.finishWebFlow(landing);
  assert.equal(session.isNewUser, true);
  assert.deepEqual(session.user.identities, ['corp']);
  assert.equal(session.user.email, corp.nextUser.email);
  assert.equal((await web.getUser()).id, session.user.id);
  // Gatehouse redeemed the code once, as the client it is at the provider.
  assert.equal(corp.tokenCalls.length, 1);

  // The same landing page again: the flow is used up here, and the code at the server.
  await assert.rejects(web.finishWebFlow(landing), (error) => error instanceof GatehouseError && error.code === 'client/web-flow-state-mismatch');
  const replay = client(); // the same flow, verifier and all, in another tab
  await replay.flowStorage.setItem(`gatehouse:${app.appKey}:web-flow`, started);
  await assert.rejects(replay.finishWebFlow(landing), (error) => error instanceof GatehouseError && error.code === 'auth/invalid-login-code');

  // A second sign-in through the provider finds the same account.
  const again = client();
  const second = await again.finishWebFlow((await browse(await again.startWebFlow({ provider: 'corp', redirectURI: REDIRECT, redirect: false }))).landing);
  assert.equal(second.isNewUser, false);
  assert.equal(second.user.id, session.user.id);
  assert.deepEqual(corp.errors, []);
});

test('the provider refusing comes back as client/web-flow-denied, naming the provider', async () => {
  const web = client();
  corp.deny = true;
  try {
    const { landing } = await browse(await web.startWebFlow({ provider: 'corp', redirectURI: REDIRECT, redirect: false }));
    assert.equal(new URL(landing).searchParams.get('error'), 'access_denied');
    const error = await web.finishWebFlow(landing).then(() => null, (e) => e);
    assert.ok(error instanceof GatehouseError);
    assert.equal(error.code, 'client/web-flow-denied');
    assert.equal(error.detail, 'Sign in with "corp" ended with access_denied.');
    assert.equal(await web.session(), null);
  } finally {
    corp.deny = false;
  }
});
