// The client side of second factors and passkeys without a server: error typing, the requests the
// client sends (recorded by the `fetch` option and answered with the shapes docs/API.md and the
// issue 32 contract give), WebAuthn's JSON conversion, and the browser's refusals. The same calls
// against the real server are in mfa.test.js and, in Chromium with a virtual authenticator,
// passkeys.test.js.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { webcrypto } from 'node:crypto';
import {
  Gatehouse, GatehouseError, MfaRequiredError, MemoryStorage,
  base64urlToBuffer, bufferToBase64url, decodeCreationOptions, decodeRequestOptions, encodeCredential,
} from '../gatehouse.js';
import { totp, base32Decode } from './support/totp.js';

if (!globalThis.crypto) globalThis.crypto = webcrypto;

const URL_ = 'http://127.0.0.1:9';
const b64 = (bytes) => Buffer.from(bytes).toString('base64url');
const bytesOf = (buffer) => [...new Uint8Array(buffer)];

const USER = { id: 'usr_1', email: 'ada@example.com', email_verified: true, first_name: 'Ada', last_name: null, photo_url: null, locale: null, created_at: '2026-12-05T00:00:00Z', last_sign_in_at: '2026-12-05T00:00:00Z', identities: ['password'] };
const SESSION = { data: { access_token: 'eyJhbGciOiJub25lIn0.eyJzaWQiOiJzZXNfMSJ9.', token_type: 'Bearer', expires_in: 900, refresh_token: 'rt_1', is_new_user: false, user: USER } };
const MFA_REQUIRED = {
  type: 'https://gatehouse.dev/errors/auth/mfa-required', title: 'Second factor required', status: 401, code: 'auth/mfa-required',
  detail: 'Answer with a second factor.', request_id: 'req_7', mfa_token: 'mfa_abc', methods: ['totp', 'recovery_code', 'passkey'], enroll: false, expires_in: 300,
};

/** A `fetch` that records each request and answers from `routes` ("METHOD /path" → [status, json] or a function of the call). */
function recorder(routes) {
  const calls = [];
  const fetch = async (url, init) => {
    const call = {
      method: init.method, path: new URL(url).pathname, authorization: init.headers.Authorization ?? null,
      appKey: init.headers['X-App-Key'], body: typeof init.body === 'string' ? JSON.parse(init.body) : init.body,
    };
    calls.push(call);
    const answer = routes[`${call.method} ${call.path}`];
    const [status, json] = !answer ? [404, { code: 'request/not-found', title: 'Not found', status: 404 }] : typeof answer === 'function' ? answer(call) : answer;
    return new Response(status === 204 ? null : JSON.stringify(json), { status, headers: { 'Content-Type': status >= 400 ? 'application/problem+json' : 'application/json' } });
  };
  return { calls, fetch };
}

function client(fetch, options = {}) {
  return new Gatehouse({ url: URL_, appKey: 'pk_test', storage: new MemoryStorage(), lock: 'local', fetch, ...options });
}

async function signedIn(routes, options) {
  const rec = recorder({ 'POST /v1/auth/signin': [200, SESSION], ...routes });
  const web = client(rec.fetch, options);
  await web.signIn({ email: 'ada@example.com', password: 'pw' });
  rec.calls.length = 0;
  return { web, calls: rec.calls };
}

/** What navigator.credentials.create/get return, without toJSON (as in browsers before WebAuthn L3). */
function fakeCredential(kind) {
  const buf = (...bytes) => new Uint8Array(bytes).buffer;
  const response = kind === 'create'
    ? {
      clientDataJSON: buf(1, 2, 3), attestationObject: buf(4, 5, 6),
      getAuthenticatorData: () => buf(7, 8), getTransports: () => ['internal', 'hybrid'], getPublicKeyAlgorithm: () => -7, getPublicKey: () => buf(9),
    }
    : { clientDataJSON: buf(1, 2, 3), authenticatorData: buf(7, 8), signature: buf(250, 251, 252, 253), userHandle: buf(255, 254) };
  return { id: b64([0xfb, 0xff, 0x01]), rawId: buf(0xfb, 0xff, 0x01), type: 'public-key', authenticatorAttachment: 'platform', response, getClientExtensionResults: () => ({ credProps: { rk: true } }) };
}

/** A CredentialsContainer that records what it was given and answers with `answer` (or throws it). */
function container(answer) {
  const seen = [];
  const run = (kind) => async (options) => {
    seen.push({ kind, options });
    if (answer instanceof Error) throw answer;
    return answer ?? fakeCredential(kind);
  };
  return { seen, create: run('create'), get: run('get') };
}

const CREATION = {
  challenge: b64([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16]), rp: { id: 'localhost', name: 'Test' },
  user: { id: b64([200, 201, 202]), name: 'ada@example.com', displayName: 'Ada' },
  pubKeyCredParams: [{ type: 'public-key', alg: -7 }, { type: 'public-key', alg: -257 }], timeout: 300000,
  excludeCredentials: [{ type: 'public-key', id: b64([0xfb, 0xff]) }],
  authenticatorSelection: { residentKey: 'required', requireResidentKey: true, userVerification: 'required' }, attestation: 'none',
};
const REQUEST = { challenge: b64([9, 9, 9, 0xff, 0xfe]), rpId: 'localhost', timeout: 300000, userVerification: 'required', allowCredentials: [] };

test('a 401 auth/mfa-required becomes an MfaRequiredError (a GatehouseError) with its token, methods, enroll and expiry; nothing is stored', async () => {
  const rec = recorder({ 'POST /v1/auth/signin': [401, MFA_REQUIRED] });
  const web = client(rec.fetch);
  const error = await web.signIn({ email: 'ada@example.com', password: 'pw' }).then(() => null, (e) => e);
  assert.ok(error instanceof MfaRequiredError, `got ${error}`);
  assert.ok(error instanceof GatehouseError);
  assert.equal(error.name, 'MfaRequiredError');
  assert.equal(error.code, 'auth/mfa-required');
  assert.equal(error.status, 401);
  assert.equal(error.mfaToken, 'mfa_abc');
  assert.deepEqual(error.methods, ['totp', 'recovery_code', 'passkey']);
  assert.equal(error.enroll, false);
  assert.equal(error.expiresIn, 300);
  assert.equal(error.requestId, 'req_7');
  assert.equal(error.isSignedOut, false);
  assert.equal(await web.session(), null);

  const enrolling = new MfaRequiredError(401, { ...MFA_REQUIRED, enroll: true, methods: ['totp', 'passkey'] });
  assert.equal(enrolling.enroll, true);
  // Other codes stay plain GatehouseErrors, and a problem without the members does not invent them.
  const invalid = await client(recorder({ 'POST /v1/auth/mfa/verify': [401, { code: 'auth/invalid-mfa-token', status: 401, title: 'Invalid' }] }).fetch)
    .verifyMfa({ mfaToken: 'mfa_old', code: '123456' }).then(() => null, (e) => e);
  assert.equal(invalid.code, 'auth/invalid-mfa-token');
  assert.ok(!(invalid instanceof MfaRequiredError));
  const bare = new MfaRequiredError(401, { code: 'auth/mfa-required' });
  assert.deepEqual([bare.mfaToken, bare.methods, bare.enroll, bare.expiresIn], [null, [], false, null]);
});

test('verifyMfa sends the mfa token and exactly one proof, without a bearer, and stores the session', async () => {
  const rec = recorder({ 'POST /v1/auth/mfa/verify': [200, SESSION] });
  const web = client(rec.fetch);
  const session = await web.verifyMfa({ mfaToken: 'mfa_abc', code: '123456' });
  assert.equal(session.user.email, 'ada@example.com');
  assert.equal((await web.session()).refreshToken, 'rt_1');
  await web.verifyMfa({ mfaToken: 'mfa_abc', recoveryCode: 'abcde-fghij' });
  await web.verifyMfa({ mfaToken: 'mfa_abc' });
  assert.deepEqual(rec.calls.map((c) => [c.method, c.path, c.authorization, c.appKey, c.body]), [
    ['POST', '/v1/auth/mfa/verify', null, 'pk_test', { mfa_token: 'mfa_abc', code: '123456' }],
    ['POST', '/v1/auth/mfa/verify', null, 'pk_test', { mfa_token: 'mfa_abc', recovery_code: 'abcde-fghij' }],
    ['POST', '/v1/auth/mfa/verify', null, 'pk_test', { mfa_token: 'mfa_abc' }],
  ]);
  await assert.rejects(web.verifyMfa({ mfaToken: 'mfa_abc', code: '1', recoveryCode: '2' }), TypeError);
  await assert.rejects(web.verifyMfa({ mfaToken: 'mfa_abc', code: '1', passkey: true }), TypeError);
  await assert.rejects(web.verifyMfa({ code: '123456' }), TypeError);
  await assert.rejects(web.verifyMfa({ mfaToken: 'mfa_abc', passkey: { id: 'not how' } }), TypeError);
  assert.equal(rec.calls.length, 3, 'a refused call sends nothing');
});

test('TOTP enrolment: signed in it uses the access token; while enrolling, the mfa token is the bearer', async () => {
  const routes = {
    'POST /v1/me/mfa/totp': [201, { data: { id: 'mfa_f1', secret: 'JBSWY3DPEHPK3PXP', otpauth_url: 'otpauth://totp/Test:ada@example.com?secret=JBSWY3DPEHPK3PXP' } }],
    'POST /v1/me/mfa/totp/mfa_f1/confirm': [200, { data: { recovery_codes: ['aaaaa-bbbbb'] } }],
    'DELETE /v1/me/mfa/totp/mfa_f1': [204, null],
    'GET /v1/me/mfa': [200, { data: { policy: 'optional', factors: [{ id: 'mfa_f1', type: 'totp', name: 'Phone', created_at: 'x', last_used_at: null }], passkeys: 1, recovery_codes_left: 10 } }],
  };
  const { web, calls } = await signedIn(routes);
  const enrolment = await web.enrollTotp({ name: 'Phone' });
  assert.deepEqual(enrolment, { id: 'mfa_f1', secret: 'JBSWY3DPEHPK3PXP', otpauthUrl: 'otpauth://totp/Test:ada@example.com?secret=JBSWY3DPEHPK3PXP' });
  assert.deepEqual(await web.confirmTotp('mfa_f1', '123456'), { recoveryCodes: ['aaaaa-bbbbb'] });
  assert.deepEqual(await web.listFactors(), { policy: 'optional', factors: [{ id: 'mfa_f1', type: 'totp', name: 'Phone', createdAt: 'x', lastUsedAt: null }], passkeys: 1, recoveryCodesLeft: 10 });
  await web.removeTotp('mfa_f1');
  const bearer = `Bearer ${SESSION.data.access_token}`;
  assert.deepEqual(calls.map((c) => [c.method, c.path, c.authorization, c.body]), [
    ['POST', '/v1/me/mfa/totp', bearer, { name: 'Phone' }],
    ['POST', '/v1/me/mfa/totp/mfa_f1/confirm', bearer, { code: '123456' }],
    ['GET', '/v1/me/mfa', bearer, undefined],
    ['DELETE', '/v1/me/mfa/totp/mfa_f1', bearer, undefined],
  ]);

  // Not signed in: the enrolling mfa token alone.
  const rec = recorder(routes);
  const enrolling = client(rec.fetch);
  await enrolling.enrollTotp({ mfaToken: 'mfa_enrol' });
  await enrolling.confirmTotp('mfa_f1', '654321', { mfaToken: 'mfa_enrol' });
  assert.deepEqual(rec.calls.map((c) => [c.path, c.authorization, c.body]), [
    ['/v1/me/mfa/totp', 'Bearer mfa_enrol', {}],
    ['/v1/me/mfa/totp/mfa_f1/confirm', 'Bearer mfa_enrol', { code: '654321' }],
  ]);
  await assert.rejects(enrolling.enrollTotp({ mfaToken: 'eyJ.access.token' }), TypeError, 'an access token is not an mfa token');
  await assert.rejects(enrolling.listFactors(), (e) => e.code === 'client/signed-out');
});

test('passkey sign-in: options, then navigator.credentials.get with the binary fields decoded, then the assertion as JSON', async () => {
  const rec = recorder({ 'POST /v1/auth/passkey/options': [200, { data: REQUEST }], 'POST /v1/auth/passkey/verify': [200, SESSION] });
  const credentials = container();
  const web = client(rec.fetch, { credentials });
  const session = await web.signInWithPasskey();
  assert.equal(session.user.id, 'usr_1');
  assert.ok(await web.session());
  const { publicKey } = credentials.seen[0].options;
  assert.equal(credentials.seen[0].kind, 'get');
  assert.deepEqual(bytesOf(publicKey.challenge), [9, 9, 9, 0xff, 0xfe]);
  assert.equal(publicKey.rpId, 'localhost');
  assert.equal(publicKey.userVerification, 'required');
  assert.deepEqual(publicKey.allowCredentials, []);
  assert.deepEqual(rec.calls.map((c) => [c.path, c.authorization, c.body]), [
    ['/v1/auth/passkey/options', null, {}],
    ['/v1/auth/passkey/verify', null, { credential: {
      id: '-_8B', rawId: '-_8B', type: 'public-key', authenticatorAttachment: 'platform', clientExtensionResults: { credProps: { rk: true } },
      response: { clientDataJSON: 'AQID', authenticatorData: 'Bwg', signature: '-vv8_Q', userHandle: '__4' },
    } }],
  ]);
});

test('registering a passkey: creation options decoded for navigator.credentials.create, the attestation sent as RegistrationResponseJSON', async () => {
  const routes = {
    'POST /v1/me/passkeys/options': [200, { data: CREATION }],
    'POST /v1/me/passkeys': [201, { data: { id: 'pk_1', name: 'Laptop', created_at: 'x', last_used_at: null, backed_up: false, aaguid: '01020304-0506-0708-0102-030405060708' } }],
  };
  const credentials = container();
  const { web, calls } = await signedIn(routes, { credentials });
  const passkey = await web.registerPasskey({ name: 'Laptop' });
  assert.deepEqual(passkey, { id: 'pk_1', name: 'Laptop', createdAt: 'x', lastUsedAt: null, backedUp: false, aaguid: '01020304-0506-0708-0102-030405060708' });
  const { publicKey } = credentials.seen[0].options;
  assert.equal(credentials.seen[0].kind, 'create');
  assert.deepEqual(bytesOf(publicKey.challenge), [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16]);
  assert.deepEqual(bytesOf(publicKey.user.id), [200, 201, 202]);
  assert.equal(publicKey.user.name, 'ada@example.com');
  assert.deepEqual(bytesOf(publicKey.excludeCredentials[0].id), [0xfb, 0xff]);
  assert.deepEqual(publicKey.authenticatorSelection, CREATION.authenticatorSelection);
  assert.deepEqual(publicKey.pubKeyCredParams, CREATION.pubKeyCredParams);
  const bearer = `Bearer ${SESSION.data.access_token}`;
  assert.deepEqual(calls.map((c) => [c.path, c.authorization, c.body]), [
    ['/v1/me/passkeys/options', bearer, undefined],
    ['/v1/me/passkeys', bearer, { name: 'Laptop', credential: {
      id: '-_8B', rawId: '-_8B', type: 'public-key', authenticatorAttachment: 'platform', clientExtensionResults: { credProps: { rk: true } },
      response: { clientDataJSON: 'AQID', attestationObject: 'BAUG', authenticatorData: 'Bwg', transports: ['internal', 'hybrid'], publicKeyAlgorithm: -7, publicKey: 'CQ' },
    } }],
  ]);

  // While enrolling (policy required, no factor yet): the mfa token is the bearer of both calls.
  const rec = recorder(routes);
  await client(rec.fetch, { credentials: container() }).registerPasskey({ mfaToken: 'mfa_enrol' });
  assert.deepEqual(rec.calls.map((c) => [c.path, c.authorization]), [['/v1/me/passkeys/options', 'Bearer mfa_enrol'], ['/v1/me/passkeys', 'Bearer mfa_enrol']]);
});

test('the passkey as the second step: the options carry the mfa token, and so does the verification', async () => {
  const rec = recorder({
    'POST /v1/auth/passkey/options': [200, { data: { ...REQUEST, allowCredentials: [{ type: 'public-key', id: b64([0xfb, 0xff, 0x01]), transports: ['internal'] }] } }],
    'POST /v1/auth/mfa/verify': [200, SESSION],
  });
  const credentials = container();
  const web = client(rec.fetch, { credentials });
  await web.verifyMfa({ mfaToken: 'mfa_abc', passkey: true });
  assert.deepEqual(bytesOf(credentials.seen[0].options.publicKey.allowCredentials[0].id), [0xfb, 0xff, 0x01]);
  assert.deepEqual(credentials.seen[0].options.publicKey.allowCredentials[0].transports, ['internal']);
  assert.deepEqual(rec.calls.map((c) => c.path), ['/v1/auth/passkey/options', '/v1/auth/mfa/verify']);
  assert.deepEqual(rec.calls[0].body, { mfa_token: 'mfa_abc' });
  assert.equal(rec.calls[1].body.mfa_token, 'mfa_abc');
  assert.equal(rec.calls[1].body.passkey.response.signature, '-vv8_Q');
  assert.equal(rec.calls[1].body.code, undefined);
});

test('reauthenticate({passkey: true}): a reauthentication challenge under the access token, then the assertion', async () => {
  const { web, calls } = await signedIn({
    'POST /v1/auth/passkey/options': [200, { data: REQUEST }],
    'POST /v1/auth/reauthenticate': [200, { data: { access_token: 'eyJhbGciOiJub25lIn0.eyJzaWQiOiJzZXNfMSIsIm4iOjJ9.', expires_in: 900 } }],
  }, { credentials: container() });
  await web.reauthenticate({ passkey: true });
  const bearer = `Bearer ${SESSION.data.access_token}`;
  assert.deepEqual(calls.map((c) => [c.path, c.authorization]), [['/v1/auth/passkey/options', bearer], ['/v1/auth/reauthenticate', bearer]]);
  assert.deepEqual(Object.keys(calls[1].body), ['passkey']);
  assert.equal(calls[1].body.passkey.rawId, '-_8B');
  assert.equal((await web.session()).accessToken, 'eyJhbGciOiJub25lIn0.eyJzaWQiOiJzZXNfMSIsIm4iOjJ9.');
  assert.equal((await web.session()).refreshToken, 'rt_1');
});

test("the browser's refusals are typed client codes, and nothing is sent after them", async () => {
  const routes = { 'POST /v1/auth/passkey/options': [200, { data: REQUEST }], 'POST /v1/me/passkeys/options': [200, { data: CREATION }] };
  const cases = [
    [new DOMException('The operation either timed out or was not allowed.', 'NotAllowedError'), 'client/passkey-cancelled'],
    [new DOMException('aborted', 'AbortError'), 'client/passkey-cancelled'],
    [new DOMException('The user attempted to register an authenticator that contains one of the credentials already registered.', 'InvalidStateError'), 'client/passkey-already-registered'],
    [new DOMException('no', 'NotSupportedError'), 'client/passkey-unsupported'],
    [new DOMException('The relying party ID is not a registrable domain suffix of, nor equal to the current domain.', 'SecurityError'), 'client/passkey-failed'],
  ];
  for (const [exception, code] of cases) {
    const rec = recorder(routes);
    const web = client(rec.fetch, { credentials: container(exception) });
    const error = await web.signInWithPasskey().then(() => null, (e) => e);
    assert.ok(error instanceof GatehouseError, `${exception.name}: ${error}`);
    assert.equal(error.code, code, exception.name);
    assert.equal(error.status, 0);
    assert.equal(error.cause, exception);
    assert.ok(error.detail.includes(exception.name));
    assert.deepEqual(rec.calls.map((c) => c.path), ['/v1/auth/passkey/options'], 'no verification after a refusal');
  }
  const { web, calls } = await signedIn(routes, { credentials: container(cases[2][0]) });
  assert.equal((await web.registerPasskey().then(() => null, (e) => e)).code, 'client/passkey-already-registered');
  assert.deepEqual(calls.map((c) => c.path), ['/v1/me/passkeys/options']);

  // No WebAuthn at all (Node has no navigator.credentials): refused before any request.
  const rec = recorder(routes);
  assert.equal(globalThis.navigator?.credentials, undefined);
  const none = await client(rec.fetch).signInWithPasskey().then(() => null, (e) => e);
  assert.equal(none.code, 'client/passkey-unsupported');
  assert.equal(rec.calls.length, 0);

  // Options the browser could not take are the server's fault, typed as such.
  const broken = recorder({ 'POST /v1/auth/passkey/options': [200, { data: { ...REQUEST, challenge: 'not base64url!' } }] });
  const error = await client(broken.fetch, { credentials: container() }).signInWithPasskey().then(() => null, (e) => e);
  assert.equal(error.code, 'client/invalid-response');
});

test('base64url: every length round-trips against Node\'s encoder; padding is accepted; anything else is refused', () => {
  for (let length = 0; length < 70; length++) {
    const bytes = webcrypto.getRandomValues(new Uint8Array(length));
    const text = bufferToBase64url(bytes);
    assert.equal(text, Buffer.from(bytes).toString('base64url'));
    assert.deepEqual(bytesOf(base64urlToBuffer(text)), [...bytes]);
    assert.deepEqual(bytesOf(base64urlToBuffer(Buffer.from(bytes).toString('base64').replace(/\+/g, '-').replace(/\//g, '_'))), [...bytes]);
  }
  // A view of part of a buffer encodes only its part.
  assert.equal(bufferToBase64url(new Uint8Array([0, 0xfb, 0xff, 0]).subarray(1, 3)), '-_8');
  assert.equal(bufferToBase64url(new DataView(new Uint8Array([7, 0xfb, 0xff]).buffer, 1)), '-_8');
  for (const bad of ['a', 'ab+c', 'ab/c', 'a b', 'ab=c', 'abcde', 42, null, undefined]) assert.throws(() => base64urlToBuffer(bad), TypeError, String(bad));
  assert.throws(() => bufferToBase64url('text'), TypeError);
});

test('decodeCreationOptions and decodeRequestOptions turn exactly the binary fields into buffers; encodeCredential uses toJSON() when there is one', () => {
  const creation = decodeCreationOptions(CREATION);
  assert.ok(creation.challenge instanceof ArrayBuffer);
  assert.deepEqual(bytesOf(creation.user.id), [200, 201, 202]);
  assert.deepEqual({ ...creation, challenge: null, user: { ...creation.user, id: null }, excludeCredentials: null },
    { ...CREATION, challenge: null, user: { ...CREATION.user, id: null }, excludeCredentials: null });
  assert.equal(CREATION.challenge, b64([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16]), 'the input is not changed');
  assert.equal(decodeCreationOptions({ ...CREATION, excludeCredentials: undefined }).excludeCredentials, undefined);
  const request = decodeRequestOptions({ ...REQUEST, allowCredentials: [{ type: 'public-key', id: 'AQ' }] });
  assert.deepEqual(bytesOf(request.allowCredentials[0].id), [1]);
  assert.equal(request.rpId, 'localhost');
  assert.throws(() => decodeRequestOptions({ ...REQUEST, allowCredentials: 'x' }), (e) => e.code === 'client/invalid-response');
  const own = { toJSON: () => ({ id: 'own' }) };
  assert.deepEqual(encodeCredential(own), { id: 'own' });
});

test('the test authenticator app (support/totp.js) gives RFC 6238\'s SHA-1 vectors', () => {
  const secret = 'GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ'; // "12345678901234567890"
  assert.equal(base32Decode(secret).toString(), '12345678901234567890');
  // RFC 6238 appendix B (8 digits there; the last 6 here).
  for (const [seconds, code] of [[59, '287082'], [1111111109, '081804'], [1111111111, '050471'], [1234567890, '005924'], [2000000000, '279037']]) {
    assert.equal(totp(secret, seconds * 1000), code, `T = ${seconds}`);
  }
});
