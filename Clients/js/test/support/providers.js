// Fake Apple, Google and Firebase over real HTTP on 127.0.0.1, with real RSA keys and real signed
// JWTs (node:crypto), as Sources/GatehouseTesting/FakeApple.swift etc. do for the Swift tests.
// Gatehouse is pointed at them with GATEHOUSE_APPLE_URL, GATEHOUSE_GOOGLE_JWKS_URL and
// GATEHOUSE_FIREBASE_JWKS_URL; the issuers stay the real ones.
import http from 'node:http';
import crypto from 'node:crypto';

const b64url = (input) => Buffer.from(input).toString('base64url');

/**
 * A new key pair, as PEM text and as key objects read back from it. Node 20 can deadlock when a
 * key object straight from generateKeyPairSync is exported while a garbage collection frees the
 * generation job that shares its key: CI hung that way, the main thread waiting forever in
 * ~KeyGenJob for the key's mutex that ExportJWKRsaKey held. Keys read back from PEM share nothing
 * with the job.
 */
function generateKeyPair(type, options) {
  const pem = crypto.generateKeyPairSync(type, {
    ...options, publicKeyEncoding: { type: 'spki', format: 'pem' }, privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
  });
  return { pem, privateKey: crypto.createPrivateKey(pem.privateKey), publicKey: crypto.createPublicKey(pem.publicKey) };
}

/** An RS256 signing key published as a JWKS. */
export class KeyRing {
  constructor(kid) {
    this.kid = `${kid}-${crypto.randomBytes(4).toString('hex')}`;
    const { privateKey, publicKey } = generateKeyPair('rsa', { modulusLength: 2048 });
    this.privateKey = privateKey;
    this.jwks = { keys: [{ ...publicKey.export({ format: 'jwk' }), kid: this.kid, alg: 'RS256', use: 'sig' }] };
  }

  mint(claims) {
    const header = b64url(JSON.stringify({ alg: 'RS256', kid: this.kid, typ: 'JWT' }));
    const payload = b64url(JSON.stringify(claims));
    const signature = crypto.sign('sha256', Buffer.from(`${header}.${payload}`), this.privateKey).toString('base64url');
    return `${header}.${payload}.${signature}`;
  }
}

function listen(handler) {
  return new Promise((resolve, reject) => {
    const server = http.createServer((req, res) => {
      const chunks = [];
      req.on('data', (c) => chunks.push(c));
      req.on('end', () => {
        Promise.resolve(handler(req, Buffer.concat(chunks).toString('utf8'), res)).catch((error) => {
          res.writeHead(500).end(String(error));
        });
      });
    });
    server.listen(0, '127.0.0.1', () => resolve(server));
    server.on('error', reject);
  });
}

const now = () => Math.floor(Date.now() / 1000);
const json = (res, status, value) => res.writeHead(status, { 'Content-Type': 'application/json' }).end(JSON.stringify(value));

/**
 * Sign in with Apple: `/auth/keys`, `/auth/token` (checks the ES256 client secret by a key given
 * to `registerClient`, redeems each code once), `/auth/revoke`, and `/auth/authorize`, a page with
 * a "Continue" button that form-posts `state`, `code`, `id_token` and `user` to the
 * `redirect_uri`, as Apple's `response_mode=form_post` does.
 */
export class FakeApple {
  static issuer = 'https://appleid.apple.com';
  keys = new KeyRing('apple');
  clients = new Map(); // key id → {teamID, publicKey}
  codes = new Map(); // code → {user, clientID, nonce}
  tokenCalls = [];
  authorizeCalls = [];
  errors = [];

  async start() {
    this.server = await listen((req, text, res) => this.#route(req, text, res));
    this.url = `http://127.0.0.1:${this.server.address().port}`;
    return this;
  }

  stop() { this.server?.close(); this.server?.closeAllConnections?.(); }

  /** A `.p8` key for the app's Apple settings, registered here (a new key id each time: one per app). */
  makeCredentials({ teamID = 'TEAM123456', keyID = crypto.randomBytes(5).toString('hex').toUpperCase() } = {}) {
    const { pem, publicKey } = generateKeyPair('ec', { namedCurve: 'P-256' });
    this.clients.set(keyID, { teamID, publicKey });
    return { team_id: teamID, key_id: keyID, private_key: pem.privateKey };
  }

  /** An identity token as Apple's native SDKs hand it over (`nonce` verbatim: pass the hash). */
  identityToken({ sub, aud, email = `${sub}@example.com`, nonce } = {}) {
    const iat = now();
    return this.keys.mint({
      iss: FakeApple.issuer, aud, sub, iat, exp: iat + 600, auth_time: iat, nonce_supported: true,
      ...(nonce ? { nonce } : {}), ...(email ? { email, email_verified: 'true' } : {}),
    });
  }

  /** A single-use authorization code for `user`, redeemable by `clientID` (a native or Apple JS sign-in's `code`). */
  issueCode(user, clientID, nonce) {
    const code = `c${crypto.randomBytes(16).toString('hex')}.0.fake`;
    this.codes.set(code, { user, clientID, nonce });
    return code;
  }

  /** The user whom the next `/auth/authorize` page signs in. */
  nextUser = { sub: '001234.fakeappleuser.0001', email: 'apple.user@example.com', firstName: 'Ada', lastName: 'Lovelace' };

  #route(req, text, res) {
    const url = new URL(req.url, this.url);
    if (req.method === 'GET' && url.pathname === '/auth/keys') return json(res, 200, this.keys.jwks);
    if (req.method === 'POST' && url.pathname === '/auth/token') return this.#token(new URLSearchParams(text), res);
    if (req.method === 'POST' && url.pathname === '/auth/revoke') return res.writeHead(200).end();
    if (req.method === 'GET' && url.pathname === '/auth/authorize') return this.#authorize(url.searchParams, res);
    this.errors.push(`unexpected ${req.method} ${url.pathname}`);
    res.writeHead(404).end();
  }

  #authorize(query, res) {
    this.authorizeCalls.push(Object.fromEntries(query));
    const user = this.nextUser;
    const code = `c${crypto.randomBytes(16).toString('hex')}.0.fake`;
    this.codes.set(code, { user, clientID: query.get('client_id'), nonce: query.get('nonce') });
    const field = (name, value) => `<input type="hidden" name="${name}" value="${String(value).replace(/&/g, '&amp;').replace(/"/g, '&quot;')}">`;
    const idToken = this.keys.mint({
      iss: FakeApple.issuer, aud: query.get('client_id'), sub: user.sub, iat: now(), exp: now() + 600, auth_time: now(),
      nonce: query.get('nonce'), email: user.email, email_verified: 'true',
    });
    const page = `<!doctype html><html><body><h1>Sign in with Apple (fake)</h1>
<form method="POST" action="${query.get('redirect_uri')}">
${field('state', query.get('state'))}${field('code', code)}${field('id_token', idToken)}
${field('user', JSON.stringify({ name: { firstName: user.firstName, lastName: user.lastName }, email: user.email }))}
<button id="continue" type="submit">Continue</button></form></body></html>`;
    res.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8' }).end(page);
  }

  #token(form, res) {
    this.tokenCalls.push(Object.fromEntries(form));
    if (form.get('grant_type') !== 'authorization_code') return json(res, 400, { error: 'unsupported_grant_type' });
    const clientID = form.get('client_id');
    if (!this.#clientSecretValid(form.get('client_secret'), clientID)) return json(res, 400, { error: 'invalid_client' });
    const grant = this.codes.get(form.get('code'));
    this.codes.delete(form.get('code'));
    if (!grant || grant.clientID !== clientID) return json(res, 400, { error: 'invalid_grant' });
    const iat = now();
    const idToken = this.keys.mint({
      iss: FakeApple.issuer, aud: clientID, sub: grant.user.sub, iat, exp: iat + 600, auth_time: iat, nonce_supported: true,
      ...(grant.nonce ? { nonce: grant.nonce } : {}), email: grant.user.email, email_verified: 'true',
    });
    json(res, 200, {
      access_token: `a${crypto.randomBytes(8).toString('hex')}`, token_type: 'Bearer', expires_in: 3600,
      refresh_token: `r${crypto.randomBytes(8).toString('hex')}`, id_token: idToken,
    });
  }

  /** Apple's rule: an ES256 JWT by a registered key, `iss` team, `sub` client id, `aud` Apple, unexpired. */
  #clientSecretValid(secret, clientID) {
    try {
      const [h, p, s] = secret.split('.');
      const header = JSON.parse(Buffer.from(h, 'base64url'));
      const claims = JSON.parse(Buffer.from(p, 'base64url'));
      const client = this.clients.get(header.kid);
      if (header.alg !== 'ES256' || !client) {
        this.errors.push(`client secret by unregistered key ${header.kid}`);
        return false;
      }
      const ok = crypto.verify('sha256', Buffer.from(`${h}.${p}`), { key: client.publicKey, dsaEncoding: 'ieee-p1363' }, Buffer.from(s, 'base64url'));
      return ok && claims.iss === client.teamID && claims.sub === clientID && claims.aud === FakeApple.issuer && claims.exp > now();
    } catch {
      return false;
    }
  }
}

/** Google's JWKS and tokens as Google Identity Services hands them to a web page. */
export class FakeGoogle {
  keys = new KeyRing('google');

  async start() {
    this.server = await listen((req, text, res) => json(res, 200, this.keys.jwks));
    this.jwksURL = `http://127.0.0.1:${this.server.address().port}/oauth2/v3/certs`;
    return this;
  }

  stop() { this.server?.close(); this.server?.closeAllConnections?.(); }

  idToken({ sub, aud, email = `${sub}@gmail.example.com`, nonce }) {
    const iat = now();
    return this.keys.mint({ iss: 'https://accounts.google.com', aud, sub, iat, exp: iat + 3600, email, email_verified: true, ...(nonce ? { nonce } : {}) });
  }
}

/**
 * Kakao Login's discovery document and keys (Gatehouse reads them from GATEHOUSE_PROVIDER_URL_KAKAO),
 * and ID tokens as the Kakao SDK hands them over: Kakao's real issuer, the app key as `aud`.
 */
export class FakeKakao {
  static issuer = 'https://kauth.kakao.com';
  keys = new KeyRing('kakao');

  async start() {
    this.server = await listen((req, text, res) => {
      if (req.url === '/.well-known/openid-configuration') return json(res, 200, { issuer: FakeKakao.issuer, jwks_uri: `${this.url}/keys` });
      if (req.url === '/keys') return json(res, 200, this.keys.jwks);
      return json(res, 404, {});
    });
    this.url = `http://127.0.0.1:${this.server.address().port}`;
    return this;
  }

  stop() { this.server?.close(); this.server?.closeAllConnections?.(); }

  idToken({ sub, aud, nonce }) {
    const iat = now();
    return this.keys.mint({ iss: FakeKakao.issuer, aud, sub, iat, exp: iat + 3600, nonce });
  }
}

/**
 * Any OpenID Connect issuer (an app's provider of kind `oidc`) with the web flow's endpoints: its
 * issuer is its own URL, its discovery document names `/authorize`, `/token` and `/keys`.
 * `/authorize` signs `nextUser` in at once (or refuses, when `deny` is set) and redirects to the
 * `redirect_uri` with `code` and `state`, as a provider's consent page does once the user agrees;
 * `/token` authenticates the client (`client_secret_basic` or `client_secret_post`, secrets given
 * to `registerClient`), checks the redirect URI and the PKCE verifier when the authorization had a
 * challenge, and redeems each code once for an ID token with the authorization's nonce. Anything
 * else, or a refused call, is recorded in `errors`.
 */
export class FakeOIDC {
  keys = new KeyRing('oidc');
  clients = new Map(); // client id → secret
  codes = new Map(); // code → {user, clientID, redirectURI, nonce, challenge}
  authorizeCalls = [];
  tokenCalls = [];
  errors = [];
  deny = false;
  /** The user whom the next `/authorize` signs in. */
  nextUser = { sub: 'oidc-user-0001', email: 'oidc.user@example.com', name: 'Grace Hopper' };

  async start() {
    this.server = await listen((req, text, res) => this.#route(req, text, res));
    this.url = `http://127.0.0.1:${this.server.address().port}`;
    return this;
  }

  stop() { this.server?.close(); this.server?.closeAllConnections?.(); }

  get issuer() { return this.url; }

  registerClient(id, secret) { this.clients.set(id, secret); }

  #route(req, text, res) {
    const url = new URL(req.url, this.url);
    if (req.method === 'GET' && url.pathname === '/.well-known/openid-configuration') {
      return json(res, 200, {
        issuer: this.issuer, jwks_uri: `${this.url}/keys`, authorization_endpoint: `${this.url}/authorize`, token_endpoint: `${this.url}/token`,
        response_types_supported: ['code'], subject_types_supported: ['public'], id_token_signing_alg_values_supported: ['RS256'],
        token_endpoint_auth_methods_supported: ['client_secret_basic', 'client_secret_post'], code_challenge_methods_supported: ['S256'],
      });
    }
    if (req.method === 'GET' && url.pathname === '/keys') return json(res, 200, this.keys.jwks);
    if (req.method === 'GET' && url.pathname === '/authorize') return this.#authorize(url.searchParams, res);
    if (req.method === 'POST' && url.pathname === '/token') return this.#token(req, new URLSearchParams(text), res);
    this.errors.push(`unexpected ${req.method} ${url.pathname}`);
    res.writeHead(404).end();
  }

  #authorize(query, res) {
    this.authorizeCalls.push(Object.fromEntries(query));
    const redirectURI = query.get('redirect_uri');
    if (!this.clients.has(query.get('client_id')) || !redirectURI) {
      this.errors.push(`authorize for client ${query.get('client_id')} to ${redirectURI}`);
      return json(res, 400, { error: 'invalid_request' });
    }
    const back = new URL(redirectURI);
    if (this.deny) {
      back.searchParams.set('error', 'access_denied');
    } else {
      const code = `oc${crypto.randomBytes(16).toString('hex')}`;
      this.codes.set(code, {
        user: this.nextUser, clientID: query.get('client_id'), redirectURI, nonce: query.get('nonce'),
        challenge: query.get('code_challenge_method') === 'S256' ? query.get('code_challenge') : null,
      });
      back.searchParams.set('code', code);
    }
    if (query.has('state')) back.searchParams.set('state', query.get('state'));
    res.writeHead(302, { Location: back.href }).end();
  }

  #token(req, form, res) {
    this.tokenCalls.push({ ...Object.fromEntries(form), authorization: req.headers.authorization ?? null });
    let clientID = form.get('client_id');
    let secret = form.get('client_secret');
    const basic = /^Basic (.+)$/i.exec(req.headers.authorization ?? '');
    if (basic) {
      // RFC 6749 §2.3.1: each part form-urlencoded, then joined with ':' and base64-encoded.
      const [id, pass] = Buffer.from(basic[1], 'base64').toString('utf8').split(':');
      clientID = decodeURIComponent(id.replace(/\+/g, ' '));
      secret = decodeURIComponent((pass ?? '').replace(/\+/g, ' '));
    }
    const refuse = (error, why) => {
      this.errors.push(`token: ${why}`);
      return json(res, 400, { error });
    };
    if (form.get('grant_type') !== 'authorization_code') return refuse('unsupported_grant_type', `grant_type ${form.get('grant_type')}`);
    if (!this.clients.has(clientID) || this.clients.get(clientID) !== secret) return refuse('invalid_client', `client ${clientID} with a wrong secret`);
    const grant = this.codes.get(form.get('code'));
    this.codes.delete(form.get('code'));
    if (!grant || grant.clientID !== clientID) return refuse('invalid_grant', 'an unknown or used code');
    if (form.get('redirect_uri') !== grant.redirectURI) return refuse('invalid_grant', `redirect_uri ${form.get('redirect_uri')}`);
    if (grant.challenge !== null) {
      const computed = crypto.createHash('sha256').update(form.get('code_verifier') ?? '').digest('base64url');
      if (computed !== grant.challenge) return refuse('invalid_grant', 'a code_verifier that does not match');
    }
    const iat = now();
    const idToken = this.keys.mint({
      iss: this.issuer, aud: clientID, sub: grant.user.sub, iat, exp: iat + 600,
      ...(grant.nonce ? { nonce: grant.nonce } : {}), email: grant.user.email, email_verified: true, name: grant.user.name,
    });
    json(res, 200, { access_token: `oa${crypto.randomBytes(8).toString('hex')}`, token_type: 'Bearer', expires_in: 3600, id_token: idToken });
  }
}

/** Firebase's securetoken keys (served as a JWKS) and Firebase ID tokens. */
export class FakeFirebase {
  keys = new KeyRing('firebase');

  async start() {
    this.server = await listen((req, text, res) => json(res, 200, this.keys.jwks));
    this.jwksURL = `http://127.0.0.1:${this.server.address().port}/service_accounts/v1/jwk/securetoken@system.gserviceaccount.com`;
    return this;
  }

  stop() { this.server?.close(); this.server?.closeAllConnections?.(); }

  idToken({ projectID, provider, providerSubject, email }) {
    const iat = now();
    const providerID = provider === 'apple' ? 'apple.com' : 'google.com';
    return this.keys.mint({
      iss: `https://securetoken.google.com/${projectID}`, aud: projectID, sub: `firebase-${providerSubject}`, iat, exp: iat + 3600, auth_time: iat,
      user_id: `firebase-${providerSubject}`, email, email_verified: true,
      firebase: { sign_in_provider: providerID, identities: { [providerID]: [providerSubject], email: [email] } },
    });
  }
}
