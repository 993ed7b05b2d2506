// gatehouse-js against the real server (.build/debug/gatehouse) with fake Apple, Google and
// Firebase over HTTP and a real SMTP sink. Run with `node --test` (Clients/js/test/run).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Gatehouse, GatehouseError, MemoryStorage, createNonce, sha256Hex } from '../gatehouse.js';
import { startEnvironment, APPLE_BUNDLE_ID, GOOGLE_CLIENT_ID, FIREBASE_PROJECT, KAKAO_APP_KEY } from './support/env.js';

let env;
let app;
let counter = 0;
const unique = (name) => `${name}.${process.pid}.${++counter}@example.com`;
const PASSWORD = 'correct horse battery';

function client(options = {}) {
  return new Gatehouse({ url: env.server.url, appKey: app.appKey, storage: new MemoryStorage(), ...options });
}

async function rejects(promise, code, status) {
  const error = await promise.then(() => null, (e) => e);
  assert.ok(error instanceof GatehouseError, `expected a GatehouseError ${code}, got ${error}`);
  assert.equal(error.code, code);
  if (status !== undefined) assert.equal(error.status, status);
  return error;
}

before(async () => {
  env = await startEnvironment();
  app = await env.createApp();
});
after(async () => { await env?.stop(); });

test('sign-up, sign-in, /me, profile, sessions and sign-out', async () => {
  const email = unique('ada');
  const web = client();
  const changes = [];
  web.onAuthStateChange((event, session) => changes.push([event, session?.user?.email ?? null]));
  const created = await web.signUp({ email, password: PASSWORD, firstName: 'Ada', locale: 'ko-kr' });
  assert.equal(created.isNewUser, true);
  assert.equal(created.user.locale, 'ko-KR');
  assert.equal(created.tokenType, 'Bearer');
  assert.equal(created.user.email, email);
  assert.equal(created.user.firstName, 'Ada');
  assert.deepEqual(created.user.identities, ['password']);
  assert.equal(web.currentUser.id, created.user.id);

  await rejects(client().signUp({ email, password: PASSWORD }), 'auth/email-already-in-use', 409);
  const wrong = await rejects(client().signIn({ email, password: 'not the password' }), 'auth/invalid-credential', 400);
  assert.ok(wrong.requestId, 'the problem carries the request id');
  assert.ok(!wrong.message.includes('not the password'));

  const other = client();
  const signedIn = await other.signIn({ email, password: PASSWORD });
  assert.equal(signedIn.isNewUser, false);

  const updated = await web.updateUser({ lastName: 'Lovelace', locale: null });
  assert.equal(updated.lastName, 'Lovelace');
  assert.equal(updated.locale, null);
  assert.equal((await other.getUser()).lastName, 'Lovelace');
  assert.equal(web.currentUser.lastName, 'Lovelace', 'the stored user follows the answer');

  // Custom data: the app's own keys come back as written, not camel-cased.
  assert.equal(created.user.displayName, null);
  assert.deepEqual(created.user.userMetadata, {});
  const custom = await web.updateUser({ displayName: 'Ada L.', userMetadata: { seen_tour: true, pinned_ids: [1, 2] } });
  assert.equal(custom.displayName, 'Ada L.');
  assert.deepEqual(custom.userMetadata, { seen_tour: true, pinned_ids: [1, 2] });
  const tooDeep = await rejects(web.updateUser({ userMetadata: { a: { b: { c: { d: { e: { f: 1 } } } } } } }), 'request/validation-failed', 400);
  assert.deepEqual(tooDeep.errors.map((e) => e.field), ['user_metadata']);
  await env.server.admin('PATCH', `/v1/admin/users/${created.user.id}`, { app_metadata: { plan_tier: 'pro' } }, app.secretKey);
  const withAppData = await web.getUser();
  assert.deepEqual(withAppData.appMetadata, { plan_tier: 'pro' });
  assert.deepEqual(withAppData.userMetadata, { seen_tour: true, pinned_ids: [1, 2] });
  const emptied = await web.updateUser({ userMetadata: null, displayName: null });
  assert.deepEqual(emptied.userMetadata, {});
  assert.equal(emptied.displayName, null);

  const sessions = await web.getSessions();
  assert.equal(sessions.length, 2);
  assert.equal(sessions.filter((s) => s.current).length, 1);
  assert.equal(sessions[0].method, 'password');

  // Ending the other device's session signs it out: its next call ends its local session.
  const otherID = sessions.find((s) => !s.current).id;
  await web.endSession(otherID);
  const revoked = await rejects(other.getUser(), 'auth/session-revoked', 401);
  assert.equal(revoked.isSignedOut, true);
  assert.equal(await other.session(), null);

  await web.signOut();
  assert.equal(await web.session(), null);
  await rejects(web.getUser(), 'client/signed-out', 0);
  // Listeners hear this client's changes (and, over the BroadcastChannel, other clients' of the app).
  assert.deepEqual(changes[0], ['initialSession', null]);
  assert.deepEqual(changes[1], ['signedIn', email]);
  assert.deepEqual(changes.at(-1), ['signedOut', null]);
  assert.ok(changes.some(([event]) => event === 'userUpdated'), 'updateUser changed the user');
  assert.equal(web.currentUser, null);
  web.close(); other.close();
});

test('GET /v1/app, and a typed error for an unknown app key', async () => {
  const info = await client().getApp();
  assert.equal(info.id, app.id);
  assert.ok(info.signInMethods.includes('apple'));
  assert.equal(typeof info.files.maxBytes, 'number');
  const error = await rejects(new Gatehouse({ url: env.server.url, appKey: 'pk_unknown', storage: new MemoryStorage() }).getApp(), 'app/invalid-key', 401);
  assert.equal(error.requiresRecentLogin, false);
});

test('emailed code: send, then verify signs up a new address; a wrong code is typed', async () => {
  const email = unique('code');
  const web = client();
  await web.sendSignInCode(email);
  const code = await env.smtp.code(email);
  await rejects(web.verifySignInCode({ email, code: code === '000000' ? '111111' : '000000' }), 'auth/invalid-code', 400);
  const session = await web.verifySignInCode({ email, code });
  assert.equal(session.isNewUser, true);
  assert.equal(session.user.emailVerified, true);
  assert.equal((await web.getSessions())[0].method, 'email_code');
  web.close();
});

test('password reset by mailed code ends every session', async () => {
  const email = unique('reset');
  const web = client();
  await web.signUp({ email, password: PASSWORD });
  await env.smtp.code(email); // the verification mail sent at sign-up comes first (the outbox is asynchronous)
  const mailsBefore = env.smtp.mails(email).length;
  await web.sendPasswordReset(email);
  const code = await env.smtp.code(email, { after: mailsBefore });
  await web.confirmPasswordReset({ email, code, password: 'a brand new password' });
  await rejects(web.getUser(), 'auth/session-revoked', 401);
  await rejects(web.signIn({ email, password: PASSWORD }), 'auth/invalid-credential', 400);
  assert.equal((await web.signIn({ email, password: 'a brand new password' })).user.email, email);
  web.close();
});

test('email verification: the mailed code, then a refresh puts email_verified in the token', async () => {
  const email = unique('verify');
  const web = client();
  await web.signUp({ email, password: PASSWORD });
  const code = await env.smtp.code(email);
  const user = await web.confirmEmailVerification(code);
  assert.equal(user.emailVerified, true);
  const claims = JSON.parse(Buffer.from((await web.session()).accessToken.split('.')[1], 'base64url'));
  assert.equal(claims.email_verified, true);
  web.close();
});

test('Apple native: the client makes the nonce, Apple gets its SHA-256, Gatehouse the raw one; a replay is refused', async () => {
  const { raw, hashed } = await createNonce();
  assert.equal(hashed, await sha256Hex(raw));
  assert.match(hashed, /^[0-9a-f]{64}$/);
  const identityToken = env.apple.identityToken({ sub: `apple.${process.pid}.1`, aud: APPLE_BUNDLE_ID, nonce: hashed, email: unique('apple') });
  const web = client();
  const session = await web.signInWithApple({ identityToken, nonce: raw, firstName: 'Grace', lastName: 'Hopper' });
  assert.equal(session.isNewUser, true);
  assert.equal(session.user.firstName, 'Grace');
  assert.deepEqual(session.user.identities, ['apple']);
  await rejects(client().signInWithApple({ identityToken, nonce: raw }), 'auth/invalid-credential', 401);
  const other = await createNonce();
  const mismatched = env.apple.identityToken({ sub: `apple.${process.pid}.1`, aud: APPLE_BUNDLE_ID, nonce: other.hashed });
  await rejects(client().signInWithApple({ identityToken: mismatched, nonce: raw }), 'auth/invalid-credential', 401);
  web.close();
});

test('Google and Firebase token exchange; the Firebase provider pin is a typed 401', async () => {
  const { raw } = await createNonce();
  const google = await client().signInWithGoogle({ idToken: env.google.idToken({ sub: `g${process.pid}`, aud: GOOGLE_CLIENT_ID, nonce: raw }), nonce: raw });
  assert.equal(google.isNewUser, true);
  assert.deepEqual(google.user.identities, ['google']);

  // The same Google user through Firebase is the same account.
  const firebaseToken = env.firebase.idToken({ projectID: FIREBASE_PROJECT, provider: 'google', providerSubject: `g${process.pid}`, email: google.user.email });
  const viaFirebase = await client().signInWithFirebase({ provider: 'google', firebaseIdToken: firebaseToken });
  assert.equal(viaFirebase.user.id, google.user.id);
  assert.equal(viaFirebase.isNewUser, false);

  const appleViaFirebase = env.firebase.idToken({ projectID: FIREBASE_PROJECT, provider: 'apple', providerSubject: `a${process.pid}`, email: unique('fbapple') });
  assert.equal((await client().signInWithFirebase({ provider: 'apple', firebaseIdToken: appleViaFirebase })).isNewUser, true);
  const pinned = await rejects(client().signInWithFirebase({ provider: 'google', firebaseIdToken: appleViaFirebase }), 'auth/invalid-credential', 401);
  assert.equal(pinned.detail, 'Expected a google.com token but received apple.com');
});

test('anonymous sign-in, then a password with an email upgrades the same user in place', async () => {
  await rejects(client().signInAnonymously(), 'auth/sign-in-method-disabled', 403);
  const guests = await env.createApp({ allow_anonymous: true });
  const web = new Gatehouse({ url: env.server.url, appKey: guests.appKey, storage: new MemoryStorage() });
  const session = await web.signInAnonymously({ locale: 'ko-KR' });
  assert.equal(session.isNewUser, true);
  assert.equal(session.user.isAnonymous, true);
  assert.equal(session.user.email, null);
  assert.deepEqual(session.user.identities, []);
  const claims = JSON.parse(Buffer.from(session.accessToken.split('.')[1], 'base64url').toString());
  assert.equal(claims.is_anonymous, true);
  assert.deepEqual(claims.amr, ['anon']);
  assert.equal((await web.getApp()).allowAnonymous, true);

  const email = unique('guest');
  const identities = await web.addPassword(PASSWORD, { email });
  assert.deepEqual(identities.map((i) => i.provider), ['password']);
  const upgraded = await web.getUser();
  assert.equal(upgraded.id, session.user.id);
  assert.equal(upgraded.isAnonymous, false);
  assert.equal(upgraded.email, email);
  await rejects(web.addPassword(PASSWORD, { email: unique('again') }), 'request/validation-failed', 400);
  const again = new Gatehouse({ url: env.server.url, appKey: guests.appKey, storage: new MemoryStorage() });
  assert.equal((await again.signIn({ email, password: PASSWORD })).user.id, session.user.id);
  web.close(); again.close();
});

test('linking Google and unlinking it; linking another user\'s account is typed', async () => {
  const web = client();
  await web.signUp({ email: unique('linker'), password: PASSWORD });
  const { raw } = await createNonce();
  const identities = await web.linkGoogle({ idToken: env.google.idToken({ sub: `link${process.pid}`, aud: GOOGLE_CLIENT_ID, nonce: raw }), nonce: raw });
  assert.deepEqual(identities.map((i) => i.provider).sort(), ['google', 'password']);
  assert.deepEqual((await web.getIdentities()).map((i) => i.provider).sort(), ['google', 'password']);

  const taken = client();
  const n1 = await createNonce();
  await taken.signInWithGoogle({ idToken: env.google.idToken({ sub: `taken${process.pid}`, aud: GOOGLE_CLIENT_ID, nonce: n1.raw }), nonce: n1.raw });
  const third = client();
  await third.signUp({ email: unique('third'), password: PASSWORD });
  const n2 = await createNonce();
  await rejects(third.linkGoogle({ idToken: env.google.idToken({ sub: `taken${process.pid}`, aud: GOOGLE_CLIENT_ID, nonce: n2.raw }), nonce: n2.raw }), 'auth/credential-already-in-use', 409);

  assert.deepEqual((await web.unlink('google')).map((i) => i.provider), ['password']);
  await rejects(web.unlink('password'), 'auth/last-sign-in-method', 409);
  web.close(); taken.close(); third.close();
});

test('one of the app\'s own providers: sign-in by its id, linking, reauthentication, unlinking', async () => {
  const { raw } = await createNonce();
  const kakao = await client().signInWithProvider('kakao', { idToken: env.kakao.idToken({ sub: `k${process.pid}`, aud: KAKAO_APP_KEY, nonce: raw }), nonce: raw });
  assert.equal(kakao.isNewUser, true);
  assert.deepEqual(kakao.user.identities, ['kakao']);
  await rejects(client().signInWithProvider('kakao', { idToken: env.kakao.idToken({ sub: `k${process.pid}`, aud: 'another-app-key', nonce: raw }), nonce: raw }),
    'auth/invalid-credential', 401);
  await rejects(client().signInWithProvider('nobody', { idToken: 'x.y.z', nonce: raw }), 'request/not-found', 404);

  const web = client();
  await web.signUp({ email: unique('kakao-linker'), password: PASSWORD });
  const n1 = await createNonce();
  const identities = await web.linkProvider('kakao', { idToken: env.kakao.idToken({ sub: `kl${process.pid}`, aud: KAKAO_APP_KEY, nonce: n1.raw }), nonce: n1.raw });
  assert.deepEqual(identities.map((i) => i.provider).sort(), ['kakao', 'password']);
  const n2 = await createNonce();
  await web.reauthenticate({ provider: 'kakao', idToken: env.kakao.idToken({ sub: `kl${process.pid}`, aud: KAKAO_APP_KEY, nonce: n2.raw }), nonce: n2.raw });
  assert.deepEqual((await web.unlink('kakao')).map((i) => i.provider), ['password']);
  web.close();
});

test('recent login: requiresRecentLogin, then withRecentLogin reauthenticates and deletes the account', async () => {
  const strict = await env.createApp({ recent_login_seconds: 1 });
  const email = unique('leaving');
  const web = new Gatehouse({ url: env.server.url, appKey: strict.appKey, storage: new MemoryStorage() });
  await web.signUp({ email, password: PASSWORD });
  await new Promise((resolve) => setTimeout(resolve, 2100));
  const refused = await rejects(web.deleteAccount(), 'auth/requires-recent-login', 403);
  assert.equal(refused.requiresRecentLogin, true);
  const refreshToken = (await web.session()).refreshToken;
  let asked = 0;
  await web.withRecentLogin(() => web.deleteAccount({ reason: 'testing' }), async () => {
    asked++;
    await web.reauthenticate({ password: PASSWORD });
    assert.equal((await web.session()).refreshToken, refreshToken, 'reauthentication keeps the refresh token');
  });
  assert.equal(asked, 1);
  assert.equal(await web.session(), null);
  await rejects(web.signIn({ email, password: PASSWORD }), 'auth/invalid-credential', 400);
  assert.equal((await web.signUp({ email, password: PASSWORD })).isNewUser, true, 'the email can sign up again');
  web.close();
});

test('reauthentication by mailed code', async () => {
  const email = unique('reauth');
  const web = client();
  await web.signUp({ email, password: PASSWORD });
  await env.smtp.code(email); // the verification mail sent at sign-up
  const before = env.smtp.mails(email).length;
  await web.sendReauthenticationCode();
  await web.reauthenticate({ code: await env.smtp.code(email, { after: before }) });
  const claims = JSON.parse(Buffer.from((await web.session()).accessToken.split('.')[1], 'base64url'));
  assert.ok(Math.abs(claims.auth_time - Date.now() / 1000) < 10);
  web.close();
});

test('the web flow coming back with a state this tab did not start is refused before any request', async () => {
  const web = client({ flowStorage: new MemoryStorage() });
  const url = await web.startAppleWebFlow({ redirectURI: 'http://127.0.0.1:9/callback', redirect: false });
  const query = new URL(url).searchParams;
  assert.equal(query.get('code_challenge_method'), 'S256');
  assert.match(query.get('code_challenge'), /^[A-Za-z0-9_-]{43}$/);
  assert.equal(query.get('app_key'), app.appKey);
  const stored = JSON.parse(await web.flowStorage.getItem(`gatehouse:${app.appKey}:web-flow`));
  assert.notEqual(stored.verifier, query.get('code_challenge'), 'only the challenge leaves the page');
  const exchangesBefore = await env.server.metric('gatehouse_http_requests_total', { route: '/v1/auth/exchange' });
  assert.equal(web.isAppleWebFlowReturn('http://127.0.0.1:9/callback?login_code=x&state=forged'), true);
  await rejects(web.finishAppleWebFlow('http://127.0.0.1:9/callback?login_code=x&state=forged'), 'client/web-flow-state-mismatch', 0);
  // The flow is used up: even its own state is refused afterwards.
  await rejects(web.finishAppleWebFlow(`http://127.0.0.1:9/callback?login_code=x&state=${query.get('state')}`), 'client/web-flow-state-mismatch', 0);
  assert.equal(await env.server.metric('gatehouse_http_requests_total', { route: '/v1/auth/exchange' }), exchangesBefore);
  web.close();
});

test('a network failure is a typed client/network error', async () => {
  const web = new Gatehouse({ url: 'http://127.0.0.1:9', appKey: app.appKey, storage: new MemoryStorage() });
  const error = await rejects(web.signIn({ email: 'a@example.com', password: PASSWORD }), 'client/network', 0);
  assert.ok(error.cause);
});

test('linking Apple (identity token, raw nonce, authorization code redeemed at Apple), then unlinking it', async () => {
  const web = client();
  await web.signUp({ email: unique('applelinker'), password: PASSWORD });
  const { raw, hashed } = await createNonce();
  const appleUser = { sub: `apple.link.${process.pid}`, email: unique('applelinked') };
  const tokenCalls = env.apple.tokenCalls.length;
  const identities = await web.linkApple({
    identityToken: env.apple.identityToken({ sub: appleUser.sub, aud: APPLE_BUNDLE_ID, nonce: hashed, email: appleUser.email }),
    nonce: raw,
    authorizationCode: env.apple.issueCode(appleUser, APPLE_BUNDLE_ID, hashed),
  });
  assert.deepEqual(identities.map((i) => i.provider).sort(), ['apple', 'password']);
  assert.equal(env.apple.tokenCalls.length, tokenCalls + 1, 'the code was redeemed at Apple');
  assert.equal(env.apple.tokenCalls.at(-1).client_id, APPLE_BUNDLE_ID);
  assert.deepEqual((await web.unlink('apple')).map((i) => i.provider), ['password']);
  assert.deepEqual(env.apple.errors, []);
  web.close();
});

test('exportMyData: the user\'s own data, no secret, a few an hour', async () => {
  const web = client();
  const email = unique('exporter');
  const created = await web.signUp({ email, password: PASSWORD, displayName: 'Ada L.' });
  assert.equal(created.user.displayName, 'Ada L.', 'display_name at sign-up');
  await env.server.admin('PATCH', `/v1/admin/users/${created.user.id}`, { app_metadata: { plan_tier: 'pro' } }, app.secretKey);
  const mine = await web.exportMyData();
  assert.equal(mine.profile.id, created.user.id);
  assert.equal(mine.profile.displayName, 'Ada L.');
  assert.deepEqual(mine.profile.appMetadata, { plan_tier: 'pro' }, 'the app\'s keys as written');
  assert.deepEqual(mine.identities.map((i) => i.provider), ['password']);
  assert.equal(mine.sessions.length, 1);
  assert.equal(mine.sessions[0].current, true);
  assert.deepEqual(mine.files, []);
  assert.ok(mine.events.some((e) => e.type === 'user.exported'), 'this export is recorded');
  const updated = mine.events.find((e) => e.type === 'user.updated');
  assert.deepEqual(updated.data, { fields: ['app_metadata'], by: 'admin' }, 'event data as the server wrote it');
  const text = JSON.stringify(mine);
  assert.ok(!text.includes(created.refreshToken) && !text.includes(created.accessToken), 'no token in the export');
  for (let i = 1; i < 5; i++) await web.exportMyData();
  await rejects(web.exportMyData(), 'auth/too-many-requests', 429);
  web.close();
});

test('profile photo: upload (multipart, checked by content), then delete', async () => {
  const web = client();
  await web.signUp({ email: unique('photo'), password: PASSWORD });
  const png = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==', 'base64');
  const user = await web.uploadPhoto(new Blob([png], { type: 'image/png' }), 'me.png');
  assert.ok(user.photoUrl.startsWith(env.server.url), user.photoUrl);
  const served = await fetch(user.photoUrl);
  assert.equal(served.status, 200);
  // Decoded and encoded anew by the server (metadata stripped): a PNG of the same 1x1 pixel, not the same bytes.
  assert.equal(served.headers.get('content-type'), 'image/png');
  const body = Buffer.from(await served.arrayBuffer());
  assert.deepEqual(body.subarray(0, 8), png.subarray(0, 8));
  assert.deepEqual([body.readUInt32BE(16), body.readUInt32BE(20)], [1, 1]);
  assert.equal(web.currentUser.photoUrl, user.photoUrl);
  await rejects(web.uploadPhoto(new Blob(['not an image'], { type: 'image/png' }), 'fake.png'), 'files/unsupported-type', 415);
  assert.equal((await web.deletePhoto()).photoUrl, null);
  web.close();
});

test('sign-out scopes: others keeps this device, all ends every session', async () => {
  const email = unique('scopes');
  const [a, b, c] = [client(), client(), client()];
  await a.signUp({ email, password: PASSWORD });
  await b.signIn({ email, password: PASSWORD });
  await a.signOut({ scope: 'others' });
  assert.ok(await a.session(), 'this device stays signed in');
  assert.equal((await a.getUser()).email, email);
  await rejects(b.getUser(), 'auth/session-revoked', 401);
  await c.signIn({ email, password: PASSWORD });
  await a.signOut({ scope: 'all' });
  assert.equal(await a.session(), null);
  await rejects(c.getUser(), 'auth/session-revoked', 401);
  a.close(); b.close(); c.close();
});
