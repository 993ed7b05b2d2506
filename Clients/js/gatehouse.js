// gatehouse-js: the web client of Gatehouse. One dependency-free ES module for browsers (and any
// runtime with fetch, WebCrypto and, for cross-tab refresh, BroadcastChannel or Web Locks).
// The contract it speaks is the server's /v1 API (docs/openapi.json); the types are in
// gatehouse.d.ts; README.md shows how to use it.

/** Every `code` the server answers, as docs/errors.md lists them (a test keeps the two equal). */
export const SERVER_ERROR_CODES = Object.freeze([
  'request/validation-failed', 'request/malformed', 'request/not-found', 'request/method-not-allowed',
  'request/payload-too-large', 'request/uri-too-long', 'request/unsupported-media-type', 'request/headers-too-large', 'request/timeout',
  'app/missing-key', 'app/invalid-key', 'admin/app-key-taken', 'admin/hash-export-disabled',
  'auth/missing-token', 'auth/invalid-token', 'auth/token-expired', 'auth/session-revoked',
  'auth/invalid-refresh-token', 'auth/refresh-token-reused', 'auth/invalid-credential', 'auth/email-already-in-use',
  'auth/weak-password', 'auth/signup-disabled', 'auth/sign-in-method-disabled', 'auth/credential-already-in-use',
  'auth/account-exists-with-different-credential', 'auth/last-sign-in-method', 'auth/provider-not-configured',
  'auth/invalid-redirect-uri', 'auth/invalid-flow', 'auth/invalid-login-code', 'provider/unavailable',
  'auth/requires-recent-login', 'auth/invalid-code', 'auth/code-expired', 'auth/user-disabled',
  'auth/email-not-verified', 'auth/mfa-required', 'auth/invalid-mfa-token', 'auth/anonymous-user', 'auth/too-many-attempts', 'auth/too-many-requests', 'files/unsupported-type',
  'files/quota-exceeded', 'outbox/not-dead', 'outbox/payload-erased', 'email/test-failed', 'server/internal', 'server/unavailable', 'server/busy',
]);

/** Codes the client itself raises (never sent by the server). */
export const CLIENT_ERROR_CODES = Object.freeze([
  'client/network',             // fetch failed: offline, DNS, CORS refused, connection reset
  'client/signed-out',          // a signed-in call with no session stored
  'client/invalid-response',    // the server answered something that is not Gatehouse JSON
  'client/web-flow-state-mismatch', // the web flow came back with a state this browser did not start
  'client/web-flow-cancelled',  // the user cancelled at Apple (error=user_cancelled_authorize)
  'client/web-flow-denied',     // the provider refused, or its answer did not verify (error=access_denied)
  'client/web-flow-server-error', // Gatehouse could not finish the flow (error=server_error)
  'client/passkey-unsupported', // no WebAuthn here (navigator.credentials, PublicKeyCredential): not a secure context, or an old browser
  'client/passkey-cancelled',   // the browser's passkey prompt was dismissed, timed out, or no passkey matched (NotAllowedError)
  'client/passkey-already-registered', // this authenticator already holds a passkey of the user (InvalidStateError)
  'client/passkey-failed',      // any other WebAuthn failure (the DOMException is the error's cause)
]);

/** Codes after which the stored session is gone for good (the client clears it). */
const SESSION_ENDING_CODES = new Set(['auth/invalid-refresh-token', 'auth/refresh-token-reused', 'auth/session-revoked']);

/** A failed call. Branch on `code` (see docs/errors.md and CLIENT_ERROR_CODES), never on the message. */
export class GatehouseError extends Error {
  constructor(code, status, problem = {}) {
    super(problem.detail || problem.title || code);
    this.name = 'GatehouseError';
    this.code = code;
    this.status = status;
    this.title = problem.title ?? null;
    this.detail = problem.detail ?? null;
    this.requestId = problem.request_id ?? null;
    this.errors = Array.isArray(problem.errors) ? problem.errors : [];
    this.retryAfter = typeof problem.retry_after === 'number' ? problem.retry_after : null;
    this.sanctionCode = problem.sanction_code ?? null;
    this.suspendedUntil = problem.suspended_until ?? null;
  }

  /** The call needs a recent sign-in: reauthenticate, then retry (see `withRecentLogin`). */
  get requiresRecentLogin() { return this.code === 'auth/requires-recent-login'; }

  /** The session has ended (or there was none): the user must sign in again. */
  get isSignedOut() { return this.code === 'client/signed-out' || SESSION_ENDING_CODES.has(this.code); }
}

/**
 * A sign-in that needs its second step (401 `auth/mfa-required`): answer with `verifyMfa({mfaToken,
 * code | recoveryCode | passkey: true})` within `expiresIn` seconds. `methods` are what the user can
 * answer with (`totp`, `recovery_code`, `passkey`); with `enroll: true` (the app requires a second
 * factor and the user has none) they are what the user may enrol, with `mfaToken` as the credential
 * (`enrollTotp`/`confirmTotp`/`registerPasskey` with `{mfaToken}`), then `verifyMfa({mfaToken})`.
 */
export class MfaRequiredError extends GatehouseError {
  constructor(status, problem = {}) {
    super('auth/mfa-required', status, problem);
    this.name = 'MfaRequiredError';
    this.mfaToken = typeof problem.mfa_token === 'string' ? problem.mfa_token : null;
    this.methods = Array.isArray(problem.methods) ? problem.methods.filter((m) => typeof m === 'string') : [];
    this.enroll = problem.enroll === true;
    this.expiresIn = typeof problem.expires_in === 'number' ? problem.expires_in : null;
  }
}

/** The problem document as the error it stands for. */
function problemError(status, problem) {
  if (problem.code === 'auth/mfa-required') return new MfaRequiredError(status, problem);
  return new GatehouseError(problem.code, status, problem);
}

// MARK: - Storage

/** Keeps the session in this JavaScript context only (gone on reload). */
export class MemoryStorage {
  #items = new Map();
  getItem(key) { return this.#items.has(key) ? this.#items.get(key) : null; }
  setItem(key, value) { this.#items.set(key, String(value)); }
  removeItem(key) { this.#items.delete(key); }
}

/** The browser's localStorage (shared by the origin's tabs), or null where it is unusable. */
function defaultStorage() {
  try {
    const storage = globalThis.localStorage;
    if (!storage) return null;
    const probe = '__gatehouse_probe__';
    storage.setItem(probe, '1');
    storage.removeItem(probe);
    return storage;
  } catch {
    return null; // disabled storage, opaque origins
  }
}

function defaultFlowStorage(fallback) {
  try {
    if (globalThis.sessionStorage) return globalThis.sessionStorage;
  } catch { /* disabled */ }
  return fallback;
}

// MARK: - Locks: one refresh in flight per origin

/** Web Locks (`navigator.locks`): exclusive across the origin's tabs and workers. */
class WebLock {
  constructor(name) { this.name = name; }
  /** Calls `fn(contended)`: `contended` says whether another holder had to be waited for. */
  async run(fn) {
    const locks = globalThis.navigator.locks;
    const free = Symbol('taken');
    const first = await locks.request(this.name, { mode: 'exclusive', ifAvailable: true }, (lock) => (lock ? fn(false) : free));
    if (first !== free) return first;
    return locks.request(this.name, { mode: 'exclusive' }, () => fn(true));
  }
  close() {}
}

/** A lock only within this client (no cross-tab primitive available). */
class LocalLock {
  #tail = Promise.resolve();
  run(fn) {
    const result = this.#tail.then(() => fn(false));
    this.#tail = result.catch(() => {});
    return result;
  }
  close() {}
}

/**
 * A lock over BroadcastChannel for runtimes without Web Locks. A contender broadcasts a claim and
 * listens for `settleMs`; the oldest claim (then the smallest id) wins, and the holder answers
 * later claims with `held` until it broadcasts `released`. A holder that disappears loses the lock
 * after `leaseMs` (8 s: less than the server's 10 s refresh grace window, so a tab frozen in a
 * refresh has not lost its answer to reuse when another takes over). It assumes messages arrive
 * within `settleMs`; should two holders ever overlap,
 * the server's refresh grace window gives both the same new pair, so nobody is signed out.
 */
export class BroadcastLock {
  #channel; #id; #local = new LocalLock(); #holder = null; #mine = false; #claims = []; #wake = [];
  constructor(name, { settleMs = 60, leaseMs = 8000 } = {}) {
    this.settleMs = settleMs;
    this.leaseMs = leaseMs;
    this.#id = randomID();
    this.#channel = new BroadcastChannel(name);
    this.#channel.unref?.(); // Node: an idle channel must not keep the process alive
    this.#channel.onmessage = (event) => this.#receive(event.data);
  }

  run(fn) {
    return this.#local.run(async () => {
      const contended = await this.#acquire();
      try {
        return await fn(contended);
      } finally {
        this.#mine = false;
        this.#post({ type: 'released', id: this.#id });
      }
    });
  }

  close() { this.#channel.close(); }

  #post(message) { this.#channel.postMessage(message); }

  #receive(message) {
    if (!message || typeof message !== 'object') return;
    const now = Date.now();
    if (message.type === 'claim') {
      if (this.#mine) this.#post({ type: 'held', id: this.#id, until: now + this.leaseMs });
      else this.#claims = [...this.#claims.filter((c) => c.id !== message.id), { id: message.id, ts: message.ts, at: now }];
    } else if (message.type === 'held') {
      this.#holder = { id: message.id, until: Math.min(message.until, now + this.leaseMs) };
    } else if (message.type === 'released') {
      if (this.#holder?.id === message.id) this.#holder = null;
      this.#claims = this.#claims.filter((c) => c.id !== message.id);
    }
    const waiting = this.#wake;
    this.#wake = [];
    for (const wake of waiting) wake();
  }

  #changeOr(ms) {
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, ms);
      this.#wake.push(() => { clearTimeout(timer); resolve(); });
    });
  }

  /** Resolves when this lock is held, with whether someone else held it or contended for it meanwhile. */
  async #acquire() {
    let contended = false;
    for (;;) {
      while (this.#holder && this.#holder.until > Date.now()) {
        contended = true;
        await this.#changeOr(Math.min(200, this.#holder.until - Date.now()));
      }
      this.#holder = null;
      const ts = Date.now();
      this.#post({ type: 'claim', id: this.#id, ts });
      await sleep(this.settleMs);
      // A thread that was busy past the timer runs it before the messages that arrived
      // meanwhile (Node runs timers before it polls): let those in before deciding.
      await nextTurn();
      await nextTurn();
      if (this.#holder) { contended = true; continue; }
      // Claims heard from a little before ours up to now: anyone still contending.
      const horizon = ts - 2 * this.settleMs;
      this.#claims = this.#claims.filter((c) => c.at >= horizon);
      const rival = this.#claims.find((c) => c.ts < ts || (c.ts === ts && c.id < this.#id));
      if (rival) {
        contended = true;
        await this.#changeOr(2 * this.settleMs + Math.floor(Math.random() * this.settleMs));
        continue;
      }
      this.#mine = true;
      this.#post({ type: 'held', id: this.#id, until: Date.now() + this.leaseMs });
      return contended;
    }
  }
}

function makeLock(kind, name) {
  const hasWebLocks = typeof globalThis.navigator?.locks?.request === 'function';
  const hasBroadcast = typeof globalThis.BroadcastChannel === 'function';
  if (kind === 'web-locks' || (kind === 'auto' && hasWebLocks)) {
    if (!hasWebLocks) throw new TypeError('lock: "web-locks" needs navigator.locks');
    return new WebLock(name);
  }
  if (kind === 'broadcast' || (kind === 'auto' && hasBroadcast)) {
    if (!hasBroadcast) throw new TypeError('lock: "broadcast" needs BroadcastChannel');
    return new BroadcastLock(name);
  }
  if (kind === 'auto' || kind === 'local') return new LocalLock();
  if (kind && typeof kind.run === 'function') return kind;
  throw new TypeError(`lock: unknown kind ${String(kind)}`);
}

// MARK: - Crypto helpers (WebCrypto)

function webCrypto() {
  const crypto = globalThis.crypto;
  if (!crypto?.subtle || typeof crypto.getRandomValues !== 'function') {
    throw new TypeError('gatehouse-js needs WebCrypto (globalThis.crypto with subtle): a secure context in browsers');
  }
  return crypto;
}

function base64url(bytes) {
  let binary = '';
  for (const byte of bytes) binary += String.fromCharCode(byte);
  return btoa(binary).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

function randomBytes(count) { return webCrypto().getRandomValues(new Uint8Array(count)); }
function randomID() { return base64url(randomBytes(12)); }

async function sha256(text) {
  return new Uint8Array(await webCrypto().subtle.digest('SHA-256', new TextEncoder().encode(text)));
}

/** Lowercase hex SHA-256 of `text` (what Apple's `nonce` claim holds). */
export async function sha256Hex(text) {
  return Array.from(await sha256(text), (b) => b.toString(16).padStart(2, '0')).join('');
}

/**
 * A fresh nonce for a provider sign-in: give Apple `hashed` (its SHA-256, lowercase hex) and
 * Gatehouse `raw`. Google puts the nonce in its token verbatim: give Google and Gatehouse `raw`.
 */
export async function createNonce() {
  const raw = base64url(randomBytes(32));
  return { raw, hashed: await sha256Hex(raw) };
}

/** A PKCE pair (RFC 7636): a 43-character verifier and its S256 challenge. */
export async function createPKCE() {
  const verifier = base64url(randomBytes(32));
  return { verifier, challenge: base64url(await sha256(verifier)), method: 'S256' };
}

function sameString(a, b) {
  if (typeof a !== 'string' || typeof b !== 'string' || a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a.charCodeAt(i) ^ b.charCodeAt(i);
  return diff === 0;
}

/** How an error names a web flow's provider: Apple, or the app's own provider by its id. */
function providerName(provider) {
  return provider === 'apple' ? 'Apple' : `"${provider}"`;
}

/** The `sid` claim of an access token (read, not verified: only to recognise our own session). */
function sessionID(accessToken) {
  try {
    const payload = accessToken.split('.')[1].replace(/-/g, '+').replace(/_/g, '/');
    return JSON.parse(atob(payload + '='.repeat((4 - (payload.length % 4)) % 4))).sid ?? null;
  } catch {
    return null;
  }
}

function parseJSON(text) {
  if (!text) return null;
  try { return JSON.parse(text); } catch { return null; }
}

function nextTurn() { return new Promise((resolve) => (globalThis.setImmediate ?? setTimeout)(resolve, 0)); }

function sleep(ms) { return new Promise((resolve) => setTimeout(resolve, ms)); }

// MARK: - Passkeys: WebAuthn's JSON encodings

// The server speaks WebAuthn Level 3's JSON forms (binary fields as base64url without padding);
// navigator.credentials speaks ArrayBuffers. Browsers that have PublicKeyCredential's
// parseCreationOptionsFromJSON / parseRequestOptionsFromJSON and the credential's toJSON() do the
// conversion themselves; for the others these functions do it.

/** base64url (with or without padding) to an ArrayBuffer; a TypeError for anything else. */
export function base64urlToBuffer(text) {
  if (typeof text !== 'string' || !/^[A-Za-z0-9_-]*={0,2}$/.test(text) || text.replace(/=+$/, '').length % 4 === 1) {
    throw new TypeError('not base64url');
  }
  const plain = text.replace(/=+$/, '').replace(/-/g, '+').replace(/_/g, '/');
  const binary = atob(plain + '='.repeat((4 - (plain.length % 4)) % 4));
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return bytes.buffer;
}

/** An ArrayBuffer or a view of one (a TypedArray, a DataView) to base64url without padding. */
export function bufferToBase64url(buffer) {
  // By tag, not instanceof: a buffer from another realm (an iframe) is an ArrayBuffer too.
  if (Object.prototype.toString.call(buffer) === '[object ArrayBuffer]') return base64url(new Uint8Array(buffer));
  if (ArrayBuffer.isView(buffer)) return base64url(new Uint8Array(buffer.buffer, buffer.byteOffset, buffer.byteLength));
  throw new TypeError('not an ArrayBuffer or a view of one');
}

function invalidOptions(what, error) {
  return new GatehouseError('client/invalid-response', 200, { detail: `The server's passkey options are not usable (${what}: ${error.message}).` });
}

function decodeDescriptors(list, what) {
  if (list === undefined) return undefined;
  if (!Array.isArray(list)) throw invalidOptions(what, new TypeError('not a list'));
  return list.map((d) => ({ ...d, id: base64urlToBuffer(d.id) }));
}

/** PublicKeyCredentialCreationOptionsJSON (the server's answer) to what navigator.credentials.create takes as `publicKey`. */
export function decodeCreationOptions(json) {
  const parse = globalThis.PublicKeyCredential?.parseCreationOptionsFromJSON;
  try {
    if (typeof parse === 'function') return parse.call(globalThis.PublicKeyCredential, json);
    return {
      ...json,
      challenge: base64urlToBuffer(json.challenge),
      user: { ...json.user, id: base64urlToBuffer(json.user?.id) },
      excludeCredentials: decodeDescriptors(json.excludeCredentials, 'excludeCredentials'),
    };
  } catch (error) {
    if (error instanceof GatehouseError) throw error;
    throw invalidOptions('creation options', error);
  }
}

/** PublicKeyCredentialRequestOptionsJSON to what navigator.credentials.get takes as `publicKey`. */
export function decodeRequestOptions(json) {
  const parse = globalThis.PublicKeyCredential?.parseRequestOptionsFromJSON;
  try {
    if (typeof parse === 'function') return parse.call(globalThis.PublicKeyCredential, json);
    return {
      ...json,
      challenge: base64urlToBuffer(json.challenge),
      allowCredentials: decodeDescriptors(json.allowCredentials, 'allowCredentials'),
    };
  } catch (error) {
    if (error instanceof GatehouseError) throw error;
    throw invalidOptions('request options', error);
  }
}

/**
 * A PublicKeyCredential (from create or get) as RegistrationResponseJSON or
 * AuthenticationResponseJSON: its own toJSON() where the browser has it, else built here.
 */
export function encodeCredential(credential) {
  if (typeof credential?.toJSON === 'function') return credential.toJSON();
  const response = credential.response;
  const out = {
    id: credential.id,
    rawId: bufferToBase64url(credential.rawId),
    type: credential.type,
    clientExtensionResults: typeof credential.getClientExtensionResults === 'function' ? credential.getClientExtensionResults() : {},
    response: { clientDataJSON: bufferToBase64url(response.clientDataJSON) },
  };
  if (credential.authenticatorAttachment) out.authenticatorAttachment = credential.authenticatorAttachment;
  if (response.attestationObject !== undefined) {
    // A registration (AuthenticatorAttestationResponse).
    out.response.attestationObject = bufferToBase64url(response.attestationObject);
    const authenticatorData = typeof response.getAuthenticatorData === 'function' ? response.getAuthenticatorData() : null;
    if (authenticatorData) out.response.authenticatorData = bufferToBase64url(authenticatorData);
    const transports = typeof response.getTransports === 'function' ? response.getTransports() : null;
    if (transports) out.response.transports = [...transports];
    const algorithm = typeof response.getPublicKeyAlgorithm === 'function' ? response.getPublicKeyAlgorithm() : null;
    if (typeof algorithm === 'number') out.response.publicKeyAlgorithm = algorithm;
    const publicKey = typeof response.getPublicKey === 'function' ? response.getPublicKey() : null;
    if (publicKey) out.response.publicKey = bufferToBase64url(publicKey);
  } else {
    // An assertion (AuthenticatorAssertionResponse).
    out.response.authenticatorData = bufferToBase64url(response.authenticatorData);
    out.response.signature = bufferToBase64url(response.signature);
    if (response.userHandle) out.response.userHandle = bufferToBase64url(response.userHandle);
  }
  return out;
}

/** A WebAuthn DOMException as the client's typed error (the exception is its `cause`). */
function passkeyError(error, action) {
  if (error instanceof GatehouseError) return error;
  const code = {
    NotAllowedError: 'client/passkey-cancelled', AbortError: 'client/passkey-cancelled',
    InvalidStateError: 'client/passkey-already-registered', NotSupportedError: 'client/passkey-unsupported',
  }[error?.name] ?? 'client/passkey-failed';
  const wrapped = new GatehouseError(code, 0, { detail: `${action}: ${error?.name ?? 'Error'}: ${error?.message ?? String(error)}` });
  wrapped.cause = error;
  return wrapped;
}

// MARK: - JSON shapes

/** The user's custom data: the app's own keys, left as the app wrote them. */
const verbatimKeys = new Set(['app_metadata', 'user_metadata']);

/** snake_case keys to camelCase, recursively (values are left as they are; custom data is not renamed inside). */
function camel(value) {
  if (Array.isArray(value)) return value.map(camel);
  if (value === null || typeof value !== 'object') return value;
  const out = {};
  for (const [key, v] of Object.entries(value)) out[key.replace(/_([a-z])/g, (_, c) => c.toUpperCase())] = verbatimKeys.has(key) ? v : camel(v);
  return out;
}

/** Drops the keys whose value is undefined (so optional fields are left out of the body). */
function body(fields) {
  const out = {};
  for (const [key, value] of Object.entries(fields)) if (value !== undefined) out[key] = value;
  return out;
}

// MARK: - The client

/**
 * A Gatehouse client for one app. Keeps the session in `storage`, refreshes the access token
 * before it expires and on a 401, with one refresh in flight per origin (every tab sharing the
 * storage), and raises `GatehouseError`s.
 */
export class Gatehouse {
  #fetch; #lock; #channel = null; #listeners = new Set(); #inflight = null; #credentials;
  /** The stored session's user, kept in memory for the synchronous `currentUser`. */
  #user = null;
  /** The background refresh: its clock, its timer, whether it runs, and the page whose visibility pauses it. */
  #clock; #timer = null; #autoRefresh; #closed = false; #document; #onVisibility = null; #retryMs = 0;

  constructor(options) {
    const {
      url, appKey, mode = 'token', storage, flowStorage, fetch, lock = 'auto', refreshLeewaySeconds = 30, refreshGraceSeconds = 10, storageKey, credentials,
      autoRefresh = true, clock, document,
    } = options ?? {};
    if (typeof url !== 'string' || !/^https?:\/\//.test(url)) throw new TypeError('url: the Gatehouse base URL, e.g. https://auth.example.com');
    // Tokens travel in the clear over http: only to this machine (development).
    if (url.startsWith('http:') && !/^http:\/\/(localhost|127\.0\.0\.1|\[::1\])(:\d+)?(\/|$)/.test(url)) {
      throw new TypeError('url: https is required (http only for localhost, 127.0.0.1 and [::1])');
    }
    if (typeof appKey !== 'string' || !appKey) throw new TypeError('appKey: the app key (pk_…)');
    if (mode !== 'token' && mode !== 'cookie') throw new TypeError('mode: "token" or "cookie"');
    this.url = url.replace(/\/+$/, '');
    this.appKey = appKey;
    this.mode = mode;
    this.storage = storage ?? defaultStorage() ?? new MemoryStorage();
    this.flowStorage = flowStorage ?? defaultFlowStorage(this.storage);
    this.refreshLeewaySeconds = refreshLeewaySeconds;
    this.refreshGraceSeconds = refreshGraceSeconds;
    this.storageKey = storageKey ?? `gatehouse:${appKey}:session`;
    this.#fetch = fetch ?? globalThis.fetch.bind(globalThis);
    this.#credentials = credentials ?? null;
    this.#clock = {
      now: clock?.now ?? (() => Date.now()),
      setTimeout: clock?.setTimeout ?? ((fn, ms) => setTimeout(fn, ms)),
      clearTimeout: clock?.clearTimeout ?? ((id) => clearTimeout(id)),
    };
    this.#document = document === undefined ? globalThis.document ?? null : document;
    this.#lock = makeLock(lock, `gatehouse:${appKey}:refresh`);
    if (typeof globalThis.BroadcastChannel === 'function') {
      this.#channel = new BroadcastChannel(`gatehouse:${appKey}:session`);
      this.#channel.unref?.();
      this.#channel.onmessage = (message) => this.#heard(message.data);
    }
    this.#loadUser();
    if (autoRefresh) this.startAutoRefresh();
  }

  // MARK: The background refresh

  /**
   * Refreshes the access token in the background `refreshLeewaySeconds` before it expires (on by
   * default; `autoRefresh: false` leaves it off until this is called). In a browser it pauses
   * while the page is hidden (`document.visibilityState`) and, when the page shows again,
   * refreshes at once if the token is due. Other tabs' refreshes move the timer (the storage is
   * shared), and a refresh already done by another tab is adopted instead of repeated.
   */
  startAutoRefresh() {
    if (this.#closed || this.#autoRefresh) return;
    this.#autoRefresh = true;
    const page = this.#document;
    if (page && typeof page.addEventListener === 'function' && !this.#onVisibility) {
      this.#onVisibility = () => this.#schedule();
      page.addEventListener('visibilitychange', this.#onVisibility);
    }
    this.#schedule();
  }

  /** Stops the background refresh (calls still refresh a token that is about to expire when they need it). */
  stopAutoRefresh() {
    this.#autoRefresh = false;
    this.#cancelTimer();
    if (this.#onVisibility) this.#document.removeEventListener('visibilitychange', this.#onVisibility);
    this.#onVisibility = null;
  }

  /** Whether the background refresh is waiting for its next turn (false while paused, stopped or signed out). */
  get autoRefreshScheduled() { return this.#timer !== null; }

  #cancelTimer() {
    if (this.#timer !== null) this.#clock.clearTimeout(this.#timer);
    this.#timer = null;
  }

  #hidden() { return this.#document?.visibilityState === 'hidden'; }

  /** Sets the timer for the stored session's refresh (at once when it is due), or none. */
  async #schedule() {
    this.#cancelTimer();
    if (!this.#autoRefresh || this.#closed || this.#hidden()) return;
    let session = null;
    try { session = await this.session(); } catch { return; }
    this.#cancelTimer(); // another #schedule may have run meanwhile
    if (!session || !this.#autoRefresh || this.#closed || this.#hidden()) return;
    const due = session.expiresAt - this.refreshLeewaySeconds * 1000 - this.#clock.now();
    const wait = Math.min(Math.max(due, this.#retryMs, 0), 2 ** 31 - 1);
    const timer = this.#clock.setTimeout(() => {
      if (this.#timer === timer) this.#timer = null;
      this.#tick();
    }, wait);
    timer?.unref?.(); // Node: a pending refresh must not keep the process alive
    this.#timer = timer;
  }

  async #tick() {
    if (!this.#autoRefresh || this.#closed || this.#hidden()) return;
    const session = await this.session().catch(() => null);
    if (!session) return;
    if (this.#fresh(session)) { this.#schedule(); return; } // another tab refreshed: its answer is ours
    try {
      await this.#refresh(session.rev); // its event reschedules
      this.#retryMs = 0;
    } catch (error) {
      // Offline or the server busy: try again later (doubling, up to a minute); a session the
      // server ended is already forgotten (signedOut), and then there is nothing to schedule.
      if (error instanceof GatehouseError && error.isSignedOut) return;
      this.#retryMs = Math.min(Math.max(this.#retryMs * 2, 1000), 60000);
      this.#schedule();
    }
  }

  /** Reads the stored user into memory: at once from a synchronous storage (localStorage), else when it answers. */
  #loadUser() {
    let text;
    try {
      text = this.storage.getItem(this.#userKey);
    } catch {
      return;
    }
    const apply = (value) => {
      const tokens = this.storage.getItem(this.storageKey);
      const keep = (t) => { this.#user = parseJSON(t)?.accessToken ? parseJSON(value) : null; };
      if (tokens && typeof tokens.then === 'function') return tokens.then(keep, () => {});
      return keep(tokens);
    };
    if (text && typeof text.then === 'function') text.then(apply, () => {});
    else apply(text);
  }

  /** Closes the client's channels (tests, or a page that drops the client). */
  close() {
    this.stopAutoRefresh();
    this.#closed = true;
    this.#lock.close();
    this.#channel?.close();
    this.#listeners.clear();
  }

  // MARK: Session state

  /** The stored session (`{rev, accessToken, refreshToken, expiresAt, user}`), or null. Reading it fires no listener. */
  async session() {
    const tokens = parseJSON(await this.storage.getItem(this.storageKey));
    if (!tokens || typeof tokens.accessToken !== 'string') return null;
    return { ...tokens, user: parseJSON(await this.storage.getItem(this.#userKey)) };
  }

  /**
   * The signed-in user as last seen (null when signed out), from memory: synchronous, and kept up
   * to date on every change here and in other tabs. `getUser()` asks the server. With an
   * asynchronous storage it is null until the storage has answered (the `initialSession` event).
   */
  get currentUser() { return this.#user; }

  // The user is kept apart from the tokens, so that storing a fresher user (after /me) can
  // never write back tokens that a refresh in another tab has just replaced.
  get #userKey() { return `${this.storageKey}:user`; }

  /**
   * Calls `listener(event, session, details)` on each change of the session, here or in another tab
   * sharing the storage, and returns an unsubscribe function. `event` is `'initialSession'` (once,
   * asynchronously, right after subscribing: the session as stored now, or null), `'signedIn'`,
   * `'tokenRefreshed'`, `'userUpdated'` (the user changed: a profile update, a confirmed email) or
   * `'signedOut'` (`details.reason`: `'signedOut'`, `'accountDeleted'` or `'sessionEnded'` with
   * `details.code`, the server's reason). `session` is `session()`'s value (null after a sign-out).
   * Reading (`getUser()`, `currentUser`, `session()`) never calls a listener.
   */
  onAuthStateChange(listener) {
    if (typeof listener !== 'function') throw new TypeError('onAuthStateChange: a function (event, session, details)');
    const entry = { listener, ready: false, queue: [] };
    this.#listeners.add(entry);
    const initial = async () => {
      let session = null;
      try { session = await this.session(); } catch { /* an unreadable storage: no session */ }
      if (!this.#listeners.has(entry)) return;
      this.#user = session?.user ?? null;
      this.#call(entry, 'initialSession', session, {});
      entry.ready = true;
      for (const [event, s, details] of entry.queue.splice(0)) this.#call(entry, event, s, details);
    };
    initial();
    return () => { this.#listeners.delete(entry); };
  }

  #call(entry, event, session, details) {
    try { entry.listener(event, session, details); } catch { /* a listener's fault is its own */ }
  }

  /** Tells the listeners (and, with `broadcast`, the other tabs) about `event`. */
  async #emit(event, { broadcast = true, details = {} } = {}) {
    if (broadcast) this.#channel?.postMessage({ event, details });
    const session = await this.session();
    this.#user = session?.user ?? null;
    if (event !== 'userUpdated') this.#schedule();
    for (const entry of this.#listeners) {
      if (entry.ready) this.#call(entry, event, session, details);
      else entry.queue.push([event, session, details]);
    }
  }

  /** Another tab's change: the storage is shared, so re-read it and tell this tab's listeners. */
  async #heard(message) {
    const known = ['signedIn', 'tokenRefreshed', 'userUpdated', 'signedOut'];
    if (!message || typeof message !== 'object' || !known.includes(message.event)) return;
    const details = message.event === 'signedOut' && message.details && typeof message.details.reason === 'string'
      ? { reason: message.details.reason, ...(typeof message.details.code === 'string' ? { code: message.details.code } : {}) } : {};
    // Only what this tab's storage shows (a client on another storage, with the same app key,
    // hears the channel too): a sign-out while a session is still here (or when there was none),
    // a sign-in or refresh with none, or an update to the user this tab already has, is not this
    // tab's change.
    const session = await this.session().catch(() => null);
    if (message.event === 'signedOut' ? session !== null || this.#user === null : session === null) return;
    if (message.event === 'userUpdated' && JSON.stringify(session.user) === JSON.stringify(this.#user)) return;
    await this.#emit(message.event, { broadcast: false, details });
  }

  /**
   * Stores `session` and reports `event` (`signedIn` or `tokenRefreshed`; a refresh that finds no
   * session before, a cookie-mode reload, is a `signedIn`), then `userUpdated` if the user changed.
   */
  async #save(session, event) {
    const { user, ...tokens } = session;
    const before = await this.session();
    await this.storage.setItem(this.storageKey, JSON.stringify(tokens));
    if (user) await this.storage.setItem(this.#userKey, JSON.stringify(user));
    if (event === 'signedIn' || !before) {
      await this.#emit('signedIn');
    } else {
      await this.#emit('tokenRefreshed');
      if (user && before.user && JSON.stringify(before.user) !== JSON.stringify(user)) await this.#emit('userUpdated');
    }
  }

  /**
   * Forgets the session, but only if it is still the one `isStale` recognises (another tab may
   * have signed in since), and reports `signedOut` with `details` (`{reason, code?}`).
   */
  async #clear(details, isStale = () => true) {
    const current = await this.session();
    if (current && !isStale(current)) return;
    await this.storage.removeItem(this.storageKey);
    await this.storage.removeItem(this.#userKey);
    this.#user = null;
    if (current) await this.#emit('signedOut', { details });
  }

  #fromSessionResponse(data) {
    return {
      // Which answer this is: a refresh within the same second can answer a byte-identical
      // access token, so tokens cannot tell a new session state from the old one.
      rev: randomID(),
      accessToken: data.access_token,
      refreshToken: this.mode === 'cookie' ? null : data.refresh_token ?? null,
      expiresAt: this.#clock.now() + data.expires_in * 1000,
      user: camel(data.user),
    };
  }

  async #signedIn(data) {
    await this.#save(this.#fromSessionResponse(data), 'signedIn');
    const result = camel(data);
    if (this.mode === 'cookie') result.refreshToken = null;
    return result;
  }

  #fresh(session) { return session.expiresAt - this.#clock.now() > this.refreshLeewaySeconds * 1000; }

  // MARK: HTTP

  async #send(method, path, { json, form, token, query, raw = false, headers: extra } = {}) {
    const headers = { 'X-App-Key': this.appKey, Accept: raw ? '*/*' : 'application/json', ...extra };
    if (token) headers.Authorization = `Bearer ${token}`;
    let requestBody;
    if (json !== undefined) {
      headers['Content-Type'] = 'application/json';
      requestBody = JSON.stringify(json);
    } else if (form !== undefined) {
      requestBody = form;
    }
    const search = query ? new URLSearchParams(query).toString() : '';
    const target = this.url + path + (search ? `?${search}` : '');
    let response;
    try {
      response = await this.#fetch(target, {
        method, headers, body: requestBody, credentials: this.mode === 'cookie' ? 'include' : 'same-origin', cache: 'no-store',
      });
    } catch (cause) {
      const error = new GatehouseError('client/network', 0, { detail: `${method} ${path} did not reach the server.` });
      error.cause = cause;
      throw error;
    }
    if (response.status === 204) return null;
    if (raw && response.ok) return response;
    const text = await response.text();
    if (response.status === 202) return null; // accepted: a code is on its way; nothing to read
    let parsed = null;
    try { parsed = text ? JSON.parse(text) : null; } catch { /* below */ }
    if (!response.ok) {
      if (parsed && typeof parsed.code === 'string') throw problemError(response.status, parsed);
      throw new GatehouseError('client/invalid-response', response.status, { detail: `${method} ${path} answered ${response.status}.` });
    }
    if (!parsed || typeof parsed !== 'object' || !('data' in parsed)) {
      throw new GatehouseError('client/invalid-response', response.status, { detail: `${method} ${path} answered no data.` });
    }
    return parsed;
  }

  /** A signed-in call: a valid access token, and on a 401 about the token one refresh and one retry. */
  async #authorized(method, path, options = {}) {
    const used = await this.#validSession();
    try {
      return await this.#send(method, path, { ...options, token: used.accessToken });
    } catch (error) {
      if (!(error instanceof GatehouseError) || error.status !== 401) throw error;
      if (error.code === 'auth/token-expired' || error.code === 'auth/invalid-token') {
        const next = await this.#refresh(used.rev);
        return await this.#send(method, path, { ...options, token: next.accessToken });
      }
      if (error.code === 'auth/session-revoked') await this.#clear({ reason: 'sessionEnded', code: error.code }, (s) => s.rev === used.rev);
      throw error;
    }
  }

  // MARK: Tokens

  /** A valid access token, refreshed first when it expires within `refreshLeewaySeconds`. */
  async getAccessToken() { return (await this.#validSession()).accessToken; }

  async #validSession() {
    const session = await this.session();
    if (session && this.#fresh(session)) return session;
    if (!session && this.mode !== 'cookie') throw new GatehouseError('client/signed-out', 0, { detail: 'No session: sign in first.' });
    return this.#refresh(session?.rev ?? null);
  }

  /** Refreshes now (cookie mode: also to pick up a session after a reload), and returns the stored session. */
  refresh() { return this.#refresh(undefined); }

  /**
   * One refresh in flight: calls in this client share one promise, and other tabs wait on the
   * lock, then find the new session in the shared storage instead of refreshing again.
   * `stale` is the `rev` of the session the caller found wanting (null: none; undefined:
   * refresh regardless).
   */
  #refresh(stale) {
    if (this.#inflight) return this.#inflight;
    const run = this.#lock.run(async (contended) => {
      const adoptable = (s) => s && stale !== undefined && s.rev !== stale && this.#fresh(s);
      let session = await this.session();
      if (adoptable(session)) return session;
      if (contended && stale !== undefined) {
        // Another tab held the lock, most likely to refresh, and its write may reach this tab a
        // moment after the lock does (Chromium's localStorage is eventually consistent across
        // processes): look again for a short while before refreshing a second time.
        for (const until = Date.now() + 300; Date.now() < until;) {
          await sleep(20);
          session = await this.session();
          if (adoptable(session)) return session;
        }
      }
      if (!session && this.mode !== 'cookie') throw new GatehouseError('client/signed-out', 0, { detail: 'No session: sign in first.' });
      return this.#refreshNow(session);
    });
    this.#inflight = run.finally(() => { this.#inflight = null; });
    return this.#inflight;
  }

  async #refreshNow(session) {
    const sent = session?.refreshToken ?? null;
    const json = this.mode === 'cookie' ? {} : { refresh_token: sent };
    let answer;
    const sentAt = Date.now();
    try {
      answer = await this.#send('POST', '/v1/auth/refresh', { json });
    } catch (error) {
      // The answer may have been lost after the server rotated the token: within the grace
      // window the same token gets the same new pair, so one retry is safe — but only well
      // within it. A failure that took longer (a connection that hung, then broke) keeps the
      // session for a later try instead: past the window, the same token would count as reuse
      // and end the session everywhere.
      if (error.code === 'client/network' && Date.now() - sentAt + 250 < (this.refreshGraceSeconds * 1000) / 2) {
        await sleep(250);
        answer = await this.#send('POST', '/v1/auth/refresh', { json });
      } else if (SESSION_ENDING_CODES.has(error.code) || (this.mode === 'cookie' && error.code === 'request/validation-failed')) {
        await this.#clear({ reason: 'sessionEnded', code: error.code }, (s) => s.refreshToken === sent);
        if (error.code === 'request/validation-failed') throw new GatehouseError('client/signed-out', 0, { detail: 'No refresh cookie: sign in first.' });
        throw error;
      } else {
        throw error;
      }
    }
    const next = this.#fromSessionResponse(answer.data);
    await this.#save(next, 'tokenRefreshed');
    return next;
  }

  // MARK: Sign-up and sign-in

  /** `POST /v1/auth/signup`: 201, a verification code mailed (in `locale`, the user's language, when given). */
  async signUp({ email, password, firstName, lastName, locale, displayName }) {
    const json = body({ email, password, first_name: firstName, last_name: lastName, locale, display_name: displayName });
    const { data } = await this.#send('POST', '/v1/auth/signup', { json });
    return this.#signedIn(data);
  }

  /**
   * `POST /v1/auth/anonymous`: a new anonymous account (no email, no sign-in method; the user's
   * `isAnonymous` is true) and its session, for an app with `allow_anonymous`. Upgrade it in place
   * with `addPassword(password, { email })`, `changeEmail` + `confirmEmailChange`, or a `link…`.
   */
  async signInAnonymously({ locale } = {}) {
    const { data } = await this.#send('POST', '/v1/auth/anonymous', { json: body({ locale }) });
    return this.#signedIn(data);
  }

  /** `POST /v1/auth/signin` with email and password. */
  async signIn({ email, password }) {
    const { data } = await this.#send('POST', '/v1/auth/signin', { json: { email, password } });
    return this.#signedIn(data);
  }

  /** Mails a 6-digit sign-in code (202 whether or not the address has an account). */
  async sendSignInCode(email) { await this.#send('POST', '/v1/auth/email-code/send', { json: { email } }); }

  /** Signs in (or up: `isNewUser`) with the mailed code. */
  async verifySignInCode({ email, code }) {
    const { data } = await this.#send('POST', '/v1/auth/email-code/verify', { json: { email, code } });
    return this.#signedIn(data);
  }

  /** @deprecated Renamed `sendSignInCode(email)` (the name GatehouseKit and the API use). */
  async sendEmailCode(email) { return this.sendSignInCode(email); }

  /** @deprecated Renamed `verifySignInCode({ email, code })` (the name GatehouseKit and the API use). */
  async verifyEmailCode(input) { return this.verifySignInCode(input); }

  async sendPasswordReset(email) { await this.#send('POST', '/v1/auth/password-reset/send', { json: { email } }); }

  /** Sets a new password with the mailed code; every session of the user ends (sign in again). */
  async confirmPasswordReset({ email, code, password }) {
    await this.#send('POST', '/v1/auth/password-reset/confirm', { json: { email, code, password } });
  }

  /** Apple's identity token (from Sign in with Apple JS or a native SDK) and the RAW nonce whose hash you gave Apple. */
  async signInWithApple({ identityToken, nonce, authorizationCode, firstName, lastName }) {
    const json = body({ identity_token: identityToken, nonce, authorization_code: authorizationCode, first_name: firstName, last_name: lastName });
    const { data } = await this.#send('POST', '/v1/auth/oauth/apple', { json });
    return this.#signedIn(data);
  }

  /** Google's ID token (Google Identity Services), and the nonce you gave Google, if any. */
  async signInWithGoogle({ idToken, nonce }) {
    const { data } = await this.#send('POST', '/v1/auth/oauth/google', { json: body({ id_token: idToken, nonce }) });
    return this.#signedIn(data);
  }

  /**
   * One of the app's own providers (its `oidc_providers` id): `{idToken, nonce}` for the kinds with
   * ID tokens (oidc, kakao, line, microsoft; the RAW nonce the token carries), `{accessToken}` for
   * naver and github.
   */
  async signInWithProvider(id, { idToken, nonce, accessToken }) {
    const json = accessToken !== undefined ? { access_token: accessToken } : { id_token: idToken, nonce };
    const { data } = await this.#send('POST', `/v1/auth/oidc/${encodeURIComponent(id)}`, { json });
    return this.#signedIn(data);
  }

  /** A Firebase ID token of an Apple or Google sign-in (`provider` pins which). */
  async signInWithFirebase({ provider, firebaseIdToken }) {
    if (provider !== 'apple' && provider !== 'google') throw new TypeError('provider: "apple" or "google"');
    const { data } = await this.#send('POST', `/v1/auth/oauth/${provider}`, { json: { firebase_id_token: firebaseIdToken } });
    return this.#signedIn(data);
  }

  // MARK: The web flow (Apple, or one of the app's own providers)

  /**
   * Starts a web sign-in in this browser with `provider`: `'apple'` (Sign in with Apple) or the id
   * of one of the app's `oidc_providers`. Makes a state and a PKCE pair, keeps them in
   * `flowStorage` (sessionStorage by default; one flow per app at a time, a new start replaces the
   * last), and sends the browser to Gatehouse, which sends it to the provider and back to
   * `redirectURI` (one of the app's `redirect_uris`). Returns the URL; with `{redirect: false}` it
   * only returns it.
   */
  async startWebFlow({ provider, redirectURI, redirect = true } = {}) {
    if (typeof provider !== 'string' || !provider) throw new TypeError("startWebFlow: provider ('apple' or one of the app's oidc_providers ids)");
    if (typeof redirectURI !== 'string' || !redirectURI) throw new TypeError('startWebFlow: redirectURI (one of the app\'s redirect_uris)');
    const pkce = await createPKCE();
    const state = base64url(randomBytes(16));
    await this.flowStorage.setItem(this.#flowKey, JSON.stringify({ provider, state, verifier: pkce.verifier, redirectURI }));
    await this.flowStorage.removeItem(this.#appleFlowKey); // an older version's flow is replaced too
    const query = new URLSearchParams({
      app_key: this.appKey, redirect_uri: redirectURI, state, code_challenge: pkce.challenge, code_challenge_method: 'S256',
    });
    const path = provider === 'apple' ? '/v1/auth/oauth/apple/authorize' : `/v1/auth/oidc/${encodeURIComponent(provider)}/authorize`;
    const target = `${this.url}${path}?${query}`;
    if (redirect) globalThis.location.assign(target);
    return target;
  }

  /** Whether `url` (default: this page) is a web flow coming back (a `login_code` or an `error` with a `state`). */
  isWebFlowReturn(url = globalThis.location?.href) {
    const params = new URL(url).searchParams;
    return params.has('state') && (params.has('login_code') || params.has('error'));
  }

  /**
   * On the redirect page: checks the state against the flow this tab started, then trades the
   * login code and the PKCE verifier for a session. The flow is used up whatever happens.
   */
  async finishWebFlow(url = globalThis.location.href) {
    const params = new URL(url).searchParams;
    // A flow started before this version kept Apple's under its own key: finish it the same way.
    const [text, legacy] = [await this.flowStorage.getItem(this.#flowKey), await this.flowStorage.getItem(this.#appleFlowKey)];
    await this.flowStorage.removeItem(this.#flowKey); // single use, whatever happens next
    await this.flowStorage.removeItem(this.#appleFlowKey);
    let flow = null;
    try { flow = JSON.parse(text ?? legacy ?? 'null'); } catch { /* below */ }
    if (flow && typeof flow === 'object' && flow.provider === undefined) flow.provider = 'apple';
    if (!flow || typeof flow.state !== 'string' || typeof flow.verifier !== 'string') {
      throw new GatehouseError('client/web-flow-state-mismatch', 0, { detail: 'No sign-in was started in this browser tab. Start again.' });
    }
    const name = providerName(flow.provider);
    if (!sameString(params.get('state') ?? '', flow.state)) {
      throw new GatehouseError('client/web-flow-state-mismatch', 0, { detail: `This is not the sign-in with ${name} this browser tab started. Start again.` });
    }
    const error = params.get('error');
    if (error) {
      if (error === 'user_disabled') throw new GatehouseError('auth/user-disabled', 0, { detail: `Signed in with ${name}, but this account is disabled.` });
      const code = { user_cancelled_authorize: 'client/web-flow-cancelled', server_error: 'client/web-flow-server-error' }[error] ?? 'client/web-flow-denied';
      throw new GatehouseError(code, 0, { detail: `Sign in with ${name} ended with ${error}.` });
    }
    const { data } = await this.#send('POST', '/v1/auth/exchange', { json: { login_code: params.get('login_code') ?? '', code_verifier: flow.verifier } });
    return this.#signedIn(data);
  }

  /** @deprecated Use `startWebFlow({ provider: 'apple', … })`. */
  async startAppleWebFlow({ redirectURI, redirect = true } = {}) {
    return this.startWebFlow({ provider: 'apple', redirectURI, redirect });
  }

  /** @deprecated Use `isWebFlowReturn(url)`. */
  isAppleWebFlowReturn(url = globalThis.location?.href) { return this.isWebFlowReturn(url); }

  /** @deprecated Use `finishWebFlow(url)`, which finishes the tab's web flow (started by `startAppleWebFlow` or `startWebFlow`). */
  async finishAppleWebFlow(url = globalThis.location.href) { return this.finishWebFlow(url); }

  get #flowKey() { return `gatehouse:${this.appKey}:web-flow`; }
  /** Where versions before `startWebFlow` kept an Apple web flow. */
  get #appleFlowKey() { return `gatehouse:${this.appKey}:apple-web-flow`; }

  // MARK: The second step

  /**
   * Finishes a sign-in that threw `MfaRequiredError`, with exactly one proof: `code` (from the
   * authenticator app), `recoveryCode`, or `passkey: true` (the browser's passkey prompt, limited
   * to the user's passkeys). With no proof, finishes an enrolment (`enroll: true`) after
   * `confirmTotp` or `registerPasskey` with the same `mfaToken`. Stores the session as a sign-in does.
   */
  async verifyMfa({ mfaToken, code, recoveryCode, passkey, signal } = {}) {
    if (typeof mfaToken !== 'string' || !mfaToken) throw new TypeError("verifyMfa: mfaToken (the MfaRequiredError's)");
    const proofs = [code !== undefined, recoveryCode !== undefined, passkey === true].filter(Boolean).length;
    if (proofs > 1 || (passkey !== undefined && typeof passkey !== 'boolean')) {
      throw new TypeError('verifyMfa: one of code, recoveryCode or passkey: true (none: finish an enrolment)');
    }
    let json;
    if (passkey === true) {
      const { data: options } = await this.#send('POST', '/v1/auth/passkey/options', { json: { mfa_token: mfaToken } });
      json = { mfa_token: mfaToken, passkey: await this.#getPasskey(options, { signal }) };
    } else {
      json = body({ mfa_token: mfaToken, code, recovery_code: recoveryCode });
    }
    const { data } = await this.#send('POST', '/v1/auth/mfa/verify', { json });
    return this.#signedIn(data);
  }

  // MARK: Second factors (TOTP)

  /** `GET /v1/me/mfa`: `{policy, factors: [{id, type, name, createdAt, lastUsedAt}], passkeys, recoveryCodesLeft}` (no secrets). */
  async listFactors() { return camel((await this.#authorized('GET', '/v1/me/mfa')).data); }

  /**
   * Starts an authenticator app (recent login, or `mfaToken` of an `enroll: true` MfaRequiredError):
   * `{id, secret, otpauthUrl}` — show `otpauthUrl` as a QR code, then `confirmTotp(id, code)`.
   */
  async enrollTotp({ name, mfaToken } = {}) {
    return camel((await this.#userOrEnrolling('POST', '/v1/me/mfa/totp', { json: body({ name }) }, mfaToken)).data);
  }

  /** Confirms the factor with a code from the app: `{recoveryCodes}` (10, shown once; replaces any earlier set). */
  async confirmTotp(id, code, { mfaToken } = {}) {
    return camel((await this.#userOrEnrolling('POST', `/v1/me/mfa/totp/${encodeURIComponent(id)}/confirm`, { json: { code } }, mfaToken)).data);
  }

  /** Removes an authenticator app (recent login). */
  async removeTotp(id) { await this.#authorized('DELETE', `/v1/me/mfa/totp/${encodeURIComponent(id)}`); }

  /** A signed-in call, or with `mfaToken` one of the calls an enrolling mfa_token may make. */
  #userOrEnrolling(method, path, options, mfaToken) {
    if (mfaToken === undefined || mfaToken === null) return this.#authorized(method, path, options);
    if (typeof mfaToken !== 'string' || !mfaToken.startsWith('mfa_')) throw new TypeError("mfaToken: the MfaRequiredError's mfaToken (mfa_…)");
    return this.#send(method, path, { ...options, token: mfaToken });
  }

  // MARK: Passkeys

  /**
   * Creates a passkey on this device and adds it to the account (recent login, or `mfaToken` of an
   * `enroll: true` MfaRequiredError): the server's options → navigator.credentials.create → the
   * server checks and stores it. Returns the passkey `{id, name, createdAt, lastUsedAt, backedUp, aaguid}`.
   */
  async registerPasskey({ name, mfaToken, signal } = {}) {
    const container = this.#credentialsContainer();
    const { data: options } = await this.#userOrEnrolling('POST', '/v1/me/passkeys/options', {}, mfaToken);
    const publicKey = decodeCreationOptions(options);
    let credential;
    try {
      credential = await container.create({ publicKey, ...(signal ? { signal } : {}) });
    } catch (error) {
      throw passkeyError(error, 'Creating the passkey');
    }
    if (!credential) throw new GatehouseError('client/passkey-cancelled', 0, { detail: 'Creating the passkey: no credential.' });
    const json = body({ credential: this.#encode(credential, 'Creating the passkey'), name });
    return camel((await this.#userOrEnrolling('POST', '/v1/me/passkeys', { json }, mfaToken)).data);
  }

  /**
   * Signs in with a passkey, no email asked (the browser offers the passkeys it holds for the app's
   * rp_id). `mediation: 'conditional'` waits for the user to pick one in an autofill field
   * (`autocomplete="username webauthn"`). A passkey sign-in is itself two factors: no second step.
   */
  async signInWithPasskey({ mediation, signal } = {}) {
    this.#credentialsContainer();
    const { data: options } = await this.#send('POST', '/v1/auth/passkey/options', { json: {} });
    const credential = await this.#getPasskey(options, { mediation, signal });
    const { data } = await this.#send('POST', '/v1/auth/passkey/verify', { json: { credential } });
    return this.#signedIn(data);
  }

  /** The account's passkeys, `[{id, name, createdAt, lastUsedAt, backedUp, aaguid}]`. */
  async listPasskeys() { return camel((await this.#authorized('GET', '/v1/me/passkeys')).data); }

  async renamePasskey(id, name) {
    return camel((await this.#authorized('PATCH', `/v1/me/passkeys/${encodeURIComponent(id)}`, { json: { name } })).data);
  }

  /** Removes a passkey from the account (recent login). The device still holds it; it no longer signs in. */
  async removePasskey(id) { await this.#authorized('DELETE', `/v1/me/passkeys/${encodeURIComponent(id)}`); }

  #credentialsContainer() {
    const container = this.#credentials ?? globalThis.navigator?.credentials;
    if (!container || typeof container.create !== 'function' || typeof container.get !== 'function') {
      throw new GatehouseError('client/passkey-unsupported', 0, { detail: 'Passkeys need WebAuthn (navigator.credentials) in a secure context (https:// or localhost).' });
    }
    return container;
  }

  /** navigator.credentials.get with the server's request options; the assertion as AuthenticationResponseJSON. */
  async #getPasskey(options, { mediation, signal } = {}) {
    const container = this.#credentialsContainer();
    const publicKey = decodeRequestOptions(options);
    let credential;
    try {
      credential = await container.get({ publicKey, ...(mediation ? { mediation } : {}), ...(signal ? { signal } : {}) });
    } catch (error) {
      throw passkeyError(error, 'Using the passkey');
    }
    if (!credential) throw new GatehouseError('client/passkey-cancelled', 0, { detail: 'Using the passkey: no credential.' });
    return this.#encode(credential, 'Using the passkey');
  }

  #encode(credential, action) {
    try {
      return encodeCredential(credential);
    } catch (error) {
      throw passkeyError(error, action);
    }
  }

  // MARK: The app

  /** `GET /v1/app`: the app's public settings (sign-in methods, password minimum, file limits). */
  async getApp() { return camel((await this.#send('GET', '/v1/app')).data); }

  // MARK: Account

  /** `GET /v1/me`: the user as the server has it now. Keeps it as `currentUser`, but a read never calls a listener. */
  async getUser() {
    const user = camel((await this.#authorized('GET', '/v1/me')).data);
    await this.#updateUser(user, { quiet: true });
    return user;
  }

  /**
   * `firstName`/`lastName`/`locale` (a BCP 47 tag)/`displayName`: a string, or null to clear; `userMetadata`: a JSON object that
   * replaces the user's whole (at most 4 KiB, 5 levels deep), or null to empty it; `photoFileId`: one of the user's image files
   * (the photo is made from it; the file stays as it was).
   */
  async updateUser({ firstName, lastName, locale, displayName, userMetadata, photoFileId }) {
    const json = body({
      first_name: firstName, last_name: lastName, locale, display_name: displayName, user_metadata: userMetadata, photo_file_id: photoFileId,
    });
    return this.#userAnswer(this.#authorized('PATCH', '/v1/me', { json }));
  }

  /** Uploads a profile photo (JPEG, PNG, WebP or GIF, by content). */
  async uploadPhoto(photo, filename = 'photo') {
    const form = new FormData();
    form.append('photo', photo, filename);
    return this.#userAnswer(this.#authorized('POST', '/v1/me/photo', { form }));
  }

  async deletePhoto() { return this.#userAnswer(this.#authorized('DELETE', '/v1/me/photo')); }

  async #userAnswer(promise) {
    const user = camel((await promise).data);
    await this.#updateUser(user);
    return user;
  }

  /** Keeps the server's newest user; reports `userUpdated` when it differs from the stored one (unless `quiet`: a read). */
  async #updateUser(user, { quiet = false } = {}) {
    const session = await this.session();
    if (!session || (session.user && session.user.id !== user.id)) return;
    if (session.user && JSON.stringify(session.user) === JSON.stringify(user)) return;
    await this.storage.setItem(this.#userKey, JSON.stringify(user));
    this.#user = user;
    if (!quiet) await this.#emit('userUpdated');
  }

  /** Changes the password; the user's other sessions end. */
  async changePassword({ currentPassword, password }) {
    await this.#authorized('PUT', '/v1/me/password', { json: { current_password: currentPassword, password } });
  }

  /** Mails a code to the new address (recent login). */
  async changeEmail(email) { await this.#authorized('POST', '/v1/me/email', { json: { email } }); }

  async confirmEmailChange({ email, code }) {
    return this.#userAnswer(this.#authorized('POST', '/v1/me/email/confirm', { json: { email, code } }));
  }

  async sendEmailVerification() { await this.#authorized('POST', '/v1/auth/email/verification/send'); }

  /** Verifies the email with the mailed code, then refreshes so the token says `email_verified: true`. */
  async confirmEmailVerification(code) {
    const user = camel((await this.#authorized('POST', '/v1/auth/email/verification/confirm', { json: { code } })).data);
    await this.#updateUser(user);
    await this.refresh();
    return user;
  }

  // MARK: Identities

  async getIdentities() { return camel((await this.#authorized('GET', '/v1/me/identities')).data); }

  /** Adds a password; an anonymous account gives its new `email` with it and is upgraded in place (the same user id). */
  async addPassword(password, { email } = {}) {
    return camel((await this.#authorized('POST', '/v1/me/identities/password', { json: body({ password, email }) })).data);
  }

  /** Links Apple (recent login): the identity token, the raw nonce and the authorization code. */
  async linkApple({ identityToken, nonce, authorizationCode }) {
    const json = { identity_token: identityToken, nonce, authorization_code: authorizationCode };
    return camel((await this.#authorized('POST', '/v1/me/identities/apple', { json })).data);
  }

  /** Links Google (recent login). */
  async linkGoogle({ idToken, nonce }) {
    return camel((await this.#authorized('POST', '/v1/me/identities/google', { json: { id_token: idToken, nonce } })).data);
  }

  /** Links one of the app's own providers by its id (recent login): `{idToken, nonce}` or `{accessToken}`. */
  async linkProvider(id, { idToken, nonce, accessToken }) {
    const json = accessToken !== undefined ? { access_token: accessToken } : { id_token: idToken, nonce };
    return camel((await this.#authorized('POST', `/v1/me/identities/${encodeURIComponent(id)}`, { json })).data);
  }

  /** Unlinks `password`, `apple`, `google` or one of the app's own providers (recent login; never the last sign-in method). */
  async unlink(provider) {
    return camel((await this.#authorized('DELETE', `/v1/me/identities/${encodeURIComponent(provider)}`)).data);
  }

  /**
   * `GET /v1/me/export`: what the server holds about the user, to keep or take elsewhere (profile, identities, sessions, files'
   * metadata, factors, the newest 1,000 events); never a secret. A few an hour (then `auth/too-many-requests`). Keys are
   * camel-cased but those of `profile.appMetadata`, `profile.userMetadata` and each event's `data`, which come as written.
   */
  async exportMyData() {
    const { data } = await this.#authorized('GET', '/v1/me/export');
    const mine = camel(data);
    mine.events = mine.events.map((event, i) => ({ ...event, data: data.events[i].data }));
    return mine;
  }

  // MARK: Files

  /**
   * `POST /v1/files` (multipart): uploads `file` (a Blob or File) under `filename` (a File's own
   * name by default), `visibility` `'private'` (the default) or `'public'` (one of the app's
   * `files.public_types` by its bytes; served byte for byte at its `url`). Returns the file.
   */
  async uploadFile(file, { filename, visibility } = {}) {
    if (!(file instanceof Blob)) throw new TypeError('uploadFile: a Blob or File');
    if (visibility !== undefined && visibility !== 'private' && visibility !== 'public') throw new TypeError('visibility: "private" or "public"');
    const form = new FormData();
    form.append('file', file, filename ?? (typeof file.name === 'string' && file.name ? file.name : 'file'));
    if (visibility !== undefined) form.append('visibility', visibility);
    return camel((await this.#authorized('POST', '/v1/files', { form })).data);
  }

  /** `GET /v1/files`: one page of the user's files, newest first: `{files, nextCursor}` (null on the last page). */
  async listFiles({ limit, cursor } = {}) {
    const query = body({ limit: limit === undefined ? undefined : String(limit), cursor });
    const answer = await this.#authorized('GET', '/v1/files', { query });
    return { files: camel(answer.data), nextCursor: answer.next_cursor ?? null };
  }

  /** `GET /v1/files/{id}`: the file's metadata. Another user's id is `request/not-found`. */
  async getFile(id) { return camel((await this.#authorized('GET', `/v1/files/${encodeURIComponent(id)}`)).data); }

  /**
   * `GET /v1/files/{id}/content`: the bytes as a Blob (its `type` the sniffed content type). `range`
   * (`{start, end}`, inclusive byte offsets; `end` optional) asks for a part (206).
   */
  async getFileContent(id, { range } = {}) {
    const headers = {};
    if (range !== undefined) {
      const { start, end } = range;
      if (!Number.isInteger(start) || start < 0 || (end !== undefined && (!Number.isInteger(end) || end < start))) {
        throw new TypeError('range: {start, end?}, integer byte offsets, end >= start');
      }
      headers.Range = `bytes=${start}-${end ?? ''}`;
    }
    const response = await this.#authorized('GET', `/v1/files/${encodeURIComponent(id)}/content`, { raw: true, headers });
    return response.blob();
  }

  /** `DELETE /v1/files/{id}`. */
  async deleteFile(id) { await this.#authorized('DELETE', `/v1/files/${encodeURIComponent(id)}`); }

  // MARK: Sessions

  async getSessions() { return camel((await this.#authorized('GET', '/v1/me/sessions')).data); }

  /** Signs one of the user's devices out (this one too, if it is `current`). */
  async endSession(id) {
    await this.#authorized('DELETE', `/v1/me/sessions/${encodeURIComponent(id)}`);
    const session = await this.session();
    if (session && sessionID(session.accessToken) === id) await this.#clear({ reason: 'signedOut' }, (s) => s.rev === session.rev);
  }

  // MARK: Recent login

  /**
   * Renews `auth_time` for calls that need a recent sign-in. One of `{password}`,
   * `{provider: 'apple', identityToken, nonce}`, `{provider: 'google', idToken, nonce}`,
   * `{provider: <the id of one of the app's oidc_providers>, idToken, nonce}`,
   * `{code}` after `sendReauthenticationCode()`, or `{passkey: true}` (the browser's passkey
   * prompt, for one of the user's passkeys). The refresh token stays.
   */
  async reauthenticate(proof) {
    let json;
    if (proof.password !== undefined) json = { password: proof.password };
    else if (proof.provider === 'apple') json = { provider: 'apple', identity_token: proof.identityToken, nonce: proof.nonce };
    else if (proof.provider === 'google') json = { provider: 'google', id_token: proof.idToken, nonce: proof.nonce };
    else if (typeof proof.provider === 'string' && proof.idToken !== undefined) json = { provider: proof.provider, id_token: proof.idToken, nonce: proof.nonce };
    else if (proof.code !== undefined) json = { code: proof.code };
    else if (proof.passkey === true) {
      const { data: options } = await this.#authorized('POST', '/v1/auth/passkey/options', { json: {} });
      json = { passkey: await this.#getPasskey(options, { signal: proof.signal }) };
    } else throw new TypeError('reauthenticate: {password}, {provider, identityToken|idToken, nonce}, {code} or {passkey: true}');
    const { data } = await this.#authorized('POST', '/v1/auth/reauthenticate', { json });
    // Under the refresh lock, on the session as it is now: a refresh in another tab meanwhile
    // must keep its new refresh token (the session, and so the new access token, is the same).
    await this.#lock.run(async () => {
      const session = await this.session();
      if (session) await this.#save({ ...session, user: undefined, rev: randomID(), accessToken: data.access_token, expiresAt: this.#clock.now() + data.expires_in * 1000 }, 'tokenRefreshed');
    });
  }

  async sendReauthenticationCode() { await this.#authorized('POST', '/v1/auth/reauthenticate/send-code'); }

  /**
   * Runs `action`; if it needs a recent login, awaits `reauthenticate()` (your UI asks the user and
   * calls `client.reauthenticate(…)`) and runs `action` once more.
   */
  async withRecentLogin(action, reauthenticate) {
    try {
      return await action();
    } catch (error) {
      if (!(error instanceof GatehouseError) || !error.requiresRecentLogin) throw error;
      await reauthenticate();
      return action();
    }
  }

  // MARK: Leaving

  /** Signs out (`scope`: current (default), others or all). The local session is forgotten unless `others`. */
  async signOut({ scope = 'current' } = {}) {
    try {
      await this.#authorized('POST', '/v1/auth/signout', { json: { scope } });
    } catch (error) {
      if (!(error instanceof GatehouseError) || !error.isSignedOut) throw error;
    }
    if (scope !== 'others') await this.#clear({ reason: 'signedOut' });
  }

  /** Deletes the account (recent login). `appleAuthorizationCode` lets Gatehouse revoke at Apple when it holds no Apple token. */
  async deleteAccount({ reason, appleAuthorizationCode } = {}) {
    await this.#authorized('DELETE', '/v1/me', { json: body({ reason, apple_authorization_code: appleAuthorizationCode }) });
    await this.#clear({ reason: 'accountDeleted' });
  }
}
