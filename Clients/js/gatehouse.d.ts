// Types of gatehouse.js (hand-written; test/types checks them with tsc --strict).

/** Every `code` the server answers (docs/errors.md). */
export type ServerErrorCode =
  | 'request/validation-failed' | 'request/malformed' | 'request/not-found' | 'request/method-not-allowed'
  | 'request/payload-too-large' | 'request/uri-too-long' | 'request/unsupported-media-type' | 'request/headers-too-large' | 'request/timeout'
  | 'app/missing-key' | 'app/invalid-key' | 'admin/app-key-taken' | 'admin/hash-export-disabled'
  | 'auth/missing-token' | 'auth/invalid-token' | 'auth/token-expired' | 'auth/session-revoked'
  | 'auth/invalid-refresh-token' | 'auth/refresh-token-reused' | 'auth/invalid-credential' | 'auth/email-already-in-use'
  | 'auth/weak-password' | 'auth/signup-disabled' | 'auth/sign-in-method-disabled' | 'auth/credential-already-in-use'
  | 'auth/account-exists-with-different-credential' | 'auth/last-sign-in-method' | 'auth/provider-not-configured'
  | 'auth/invalid-redirect-uri' | 'auth/invalid-flow' | 'auth/invalid-login-code' | 'provider/unavailable'
  | 'auth/requires-recent-login' | 'auth/invalid-code' | 'auth/code-expired' | 'auth/user-disabled'
  | 'auth/email-not-verified' | 'auth/mfa-required' | 'auth/invalid-mfa-token' | 'auth/anonymous-user' | 'auth/too-many-attempts' | 'auth/too-many-requests' | 'files/unsupported-type'
  | 'files/quota-exceeded' | 'outbox/not-dead' | 'outbox/payload-erased' | 'email/test-failed' | 'server/internal' | 'server/unavailable' | 'server/busy';

/** Codes the client raises itself. */
export type ClientErrorCode =
  | 'client/network' | 'client/signed-out' | 'client/invalid-response' | 'client/web-flow-state-mismatch'
  | 'client/web-flow-cancelled' | 'client/web-flow-denied' | 'client/web-flow-server-error'
  | 'client/passkey-unsupported' | 'client/passkey-cancelled' | 'client/passkey-already-registered' | 'client/passkey-failed';

export type GatehouseErrorCode = ServerErrorCode | ClientErrorCode;

export declare const SERVER_ERROR_CODES: readonly ServerErrorCode[];
export declare const CLIENT_ERROR_CODES: readonly ClientErrorCode[];

export interface FieldError { field: string; message: string }

export declare class GatehouseError extends Error {
  readonly name: 'GatehouseError' | 'MfaRequiredError';
  readonly code: GatehouseErrorCode;
  /** The HTTP status; 0 for errors raised by the client. */
  readonly status: number;
  readonly title: string | null;
  readonly detail: string | null;
  readonly requestId: string | null;
  readonly errors: FieldError[];
  /** Seconds, on 429 and 503 answers that say. */
  readonly retryAfter: number | null;
  readonly sanctionCode: string | null;
  readonly suspendedUntil: string | null;
  /** `auth/requires-recent-login`: reauthenticate, then retry. */
  readonly requiresRecentLogin: boolean;
  /** The session has ended or there is none: sign in again. */
  readonly isSignedOut: boolean;
  constructor(code: GatehouseErrorCode, status: number, problem?: Record<string, unknown>);
}

/** What answers a second step (`methods` of an MfaRequiredError); when enrolling: what may be enrolled. */
export type MfaMethod = 'totp' | 'recovery_code' | 'passkey';

/** A web flow's provider: `'apple'`, or the id of one of the app's `oidc_providers` (any kind). */
export type WebFlowProvider = 'apple' | (string & {});

/** 401 `auth/mfa-required`: the sign-in needs its second step (`verifyMfa`), or with `enroll` an enrolment first. */
export declare class MfaRequiredError extends GatehouseError {
  readonly name: 'MfaRequiredError';
  readonly code: 'auth/mfa-required';
  /** `mfa_…`: single use, for `verifyMfa` (and, with `enroll`, the enrolment calls). */
  readonly mfaToken: string | null;
  readonly methods: Array<MfaMethod | string>;
  /** The app requires a second factor and the user has none: enrol one with `mfaToken`, then `verifyMfa({mfaToken})`. */
  readonly enroll: boolean;
  /** Seconds the mfaToken stays valid (300). */
  readonly expiresIn: number | null;
  constructor(status: number, problem?: Record<string, unknown>);
}

/** localStorage's shape; the methods may also return promises (an async store). */
export interface SessionStorageLike {
  getItem(key: string): string | null | Promise<string | null>;
  setItem(key: string, value: string): void | Promise<void>;
  removeItem(key: string): void | Promise<void>;
}

export declare class MemoryStorage implements SessionStorageLike {
  getItem(key: string): string | null;
  setItem(key: string, value: string): void;
  removeItem(key: string): void;
}

/** Anything that runs `fn` exclusively; `contended`: whether another holder was waited for. */
export interface RefreshLock { run<T>(fn: (contended: boolean) => Promise<T>): Promise<T>; close(): void }

export declare class BroadcastLock implements RefreshLock {
  constructor(name: string, options?: { settleMs?: number; leaseMs?: number });
  readonly settleMs: number;
  readonly leaseMs: number;
  run<T>(fn: (contended: boolean) => Promise<T>): Promise<T>;
  close(): void;
}

export interface GatehouseOptions {
  /** The Gatehouse base URL, e.g. `https://auth.example.com`. */
  url: string;
  /** The app key (`pk_…`). */
  appKey: string;
  /** `token` (default): the refresh token is kept in `storage`. `cookie`: the app sets `refresh_cookie: "only"` and the browser keeps it in an HttpOnly cookie. */
  mode?: 'token' | 'cookie';
  /** Where the session is kept; default localStorage (shared by tabs), else memory. */
  storage?: SessionStorageLike;
  /** Where a web flow's state and PKCE verifier wait for the redirect; default sessionStorage. */
  flowStorage?: SessionStorageLike;
  fetch?: typeof fetch;
  /** `auto` (default): Web Locks, else BroadcastChannel, else this client only. */
  lock?: 'auto' | 'web-locks' | 'broadcast' | 'local' | RefreshLock;
  /** Refresh when the access token expires within this many seconds (default 30). */
  refreshLeewaySeconds?: number;
  /** The server's refresh grace window (`GATEHOUSE_REFRESH_GRACE_SECONDS`, default 10): a refresh whose answer was lost is sent again only well within it. */
  refreshGraceSeconds?: number;
  /** The storage key of the session (default `gatehouse:<appKey>:session`). */
  storageKey?: string;
  /** Where passkeys are created and used; default `navigator.credentials`. */
  credentials?: Pick<CredentialsContainer, 'create' | 'get'>;
  /** Refresh in the background `refreshLeewaySeconds` before the access token expires (default true); see `startAutoRefresh`. */
  autoRefresh?: boolean;
  /** The background refresh's clock and timers (tests); default Date.now, setTimeout, clearTimeout. */
  clock?: { now?: () => number; setTimeout?: (fn: () => void, ms: number) => unknown; clearTimeout?: (id: any) => void };
  /** The page whose `visibilityState` pauses the background refresh (default `globalThis.document`; null: never paused). */
  document?: Pick<Document, 'visibilityState' | 'addEventListener' | 'removeEventListener'> | null;
}

export interface User {
  id: string;
  email: string | null;
  emailVerified: boolean;
  firstName: string | null;
  lastName: string | null;
  photoUrl: string | null;
  /** The user's language (a BCP 47 tag such as `ja` or `ko-KR`): the language of their mail. */
  locale: string | null;
  /** The name the user chose to be shown by. */
  displayName: string | null;
  /** Custom data only the app's admin sets (also in the access token), keys as the admin wrote them; `{}` when none. */
  appMetadata: Record<string, unknown>;
  /** Custom data the user sets (`updateUser({ userMetadata })`), keys as written; never in a token; `{}` when none. */
  userMetadata: Record<string, unknown>;
  /** Made by `signInAnonymously()` and not upgraded yet: no email, no sign-in method (the token says `is_anonymous: true`). */
  isAnonymous: boolean;
  createdAt: string;
  lastSignInAt: string;
  identities: Array<'password' | 'apple' | 'google' | string>;
}

/** A sign-in's answer. `refreshToken` is null in cookie mode. */
export interface Session {
  accessToken: string;
  tokenType: 'Bearer';
  expiresIn: number;
  refreshToken: string | null;
  isNewUser: boolean;
  isRestored?: boolean;
  user: User;
}

/** What the client keeps in storage. `expiresAt` is in milliseconds since the epoch. */
export interface StoredSession {
  /** Changes with every new token answer (sign-in, refresh, reauthentication). */
  rev: string;
  accessToken: string;
  refreshToken: string | null;
  expiresAt: number;
  /** Kept under `<storageKey>:user`. */
  user: User | null;
}

export interface AppInfo {
  id: string;
  name: string;
  requireVerifiedEmail: boolean;
  signInMethods: string[];
  passwordMinLength: number;
  files: { maxBytes: number; photoTypes: string[] };
}

export interface Identity { provider: 'password' | 'apple' | 'google'; email: string | null; createdAt: string }

export interface DeviceSession {
  id: string;
  current: boolean;
  method: 'password' | 'email_code' | 'apple' | 'google' | 'passkey';
  createdAt: string;
  lastUsedAt: string;
  ip: string | null;
  userAgent: string | null;
}

export type ReauthenticationProof =
  | { password: string }
  | { provider: 'apple'; identityToken: string; nonce: string }
  | { provider: 'google'; idToken: string; nonce: string }
  /** One of the app's own providers (its `oidc_providers` id) with an ID token. */
  | { provider: string; idToken: string; nonce: string }
  | { code: string }
  | { passkey: true; signal?: AbortSignal };

/** The second step's proof: exactly one of `code`, `recoveryCode`, `passkey: true`; none finishes an enrolment. */
export type MfaVerification =
  | { mfaToken: string; code: string; recoveryCode?: never; passkey?: never }
  | { mfaToken: string; recoveryCode: string; code?: never; passkey?: never }
  | { mfaToken: string; passkey: true; signal?: AbortSignal; code?: never; recoveryCode?: never }
  | { mfaToken: string; code?: never; recoveryCode?: never; passkey?: never };

export interface MfaFactor { id: string; type: 'totp'; name: string | null; createdAt: string; lastUsedAt: string | null }

/** `GET /v1/me/export`: what the server holds about the user. */
export interface AccountExport {
  profile: User;
  identities: Identity[];
  sessions: DeviceSession[];
  /** Metadata only: nothing here grants access to a file. */
  files: { id: string; name: string; contentType: string; size: number; visibility: 'private' | 'public'; createdAt: string }[];
  /** Authenticator apps and passkeys. */
  factors: { id: string; type: 'totp' | 'passkey'; name: string | null; createdAt: string; lastUsedAt: string | null }[];
  /** The user's audit events, newest first (at most 1,000); `data` as the server wrote it. */
  events: {
    id: string; type: string; userId: string | null; sessionId: string | null; ip: string | null; userAgent: string | null; createdAt: string;
    data: Record<string, unknown>;
  }[];
}

/** `GET /v1/me/mfa`. */
export interface MfaStatus {
  policy: 'off' | 'optional' | 'required';
  factors: MfaFactor[];
  /** How many passkeys the account has. */
  passkeys: number;
  recoveryCodesLeft: number;
}

export interface TotpEnrollment {
  id: string;
  /** base32, no padding: for typing into an authenticator app. */
  secret: string;
  /** `otpauth://totp/…`: for a QR code. */
  otpauthUrl: string;
}

export interface Passkey {
  id: string;
  name: string | null;
  createdAt: string;
  lastUsedAt: string | null;
  /** Synced by its provider (a backed-up, multi-device passkey). */
  backedUp: boolean;
  /** The authenticator model's AAGUID (all zeros when it does not say). */
  aaguid: string | null;
}

/** WebAuthn's JSON forms (base64url strings for binary fields), as the server sends and takes them. */
export type CreationOptionsJSON = Record<string, unknown> & { challenge: string; user: { id: string; name: string; displayName: string } };
export type RequestOptionsJSON = Record<string, unknown> & { challenge: string };
export type CredentialJSON = Record<string, unknown> & { id: string; rawId: string; type: string; response: Record<string, unknown> };

export declare function base64urlToBuffer(text: string): ArrayBuffer;
export declare function bufferToBase64url(buffer: ArrayBuffer | ArrayBufferView): string;
export declare function decodeCreationOptions(json: CreationOptionsJSON): PublicKeyCredentialCreationOptions;
export declare function decodeRequestOptions(json: RequestOptionsJSON): PublicKeyCredentialRequestOptions;
export declare function encodeCredential(credential: Credential | PublicKeyCredential): CredentialJSON;

export declare function sha256Hex(text: string): Promise<string>;
export declare function createNonce(): Promise<{ raw: string; hashed: string }>;
export declare function createPKCE(): Promise<{ verifier: string; challenge: string; method: 'S256' }>;

export type FileVisibility = 'private' | 'public';

/** A file of the user (`GET /v1/files/{id}`). */
export interface StoredFile {
  id: string;
  name: string;
  /** Sniffed from the bytes (the four image types), else `application/octet-stream`. */
  contentType: string;
  size: number;
  sha256: string;
  visibility: FileVisibility;
  /** Public files only: anyone can fetch it. */
  url?: string | null;
  createdAt: string;
}

/** What `onAuthStateChange` reports. */
export type AuthChangeEvent = 'initialSession' | 'signedIn' | 'tokenRefreshed' | 'userUpdated' | 'signedOut';

/** Why a `signedOut` happened: `signOut()`/`endSession` of this device, `deleteAccount()`, or the server ended the session (`code` says why). */
export type SignOutReason = 'signedOut' | 'accountDeleted' | 'sessionEnded';

/** `{reason, code?}` with `signedOut`; empty with the other events. */
export interface AuthChangeDetails { reason?: SignOutReason; code?: GatehouseErrorCode }

export type AuthStateListener = (event: AuthChangeEvent, session: StoredSession | null, details: AuthChangeDetails) => void;

export declare class Gatehouse {
  constructor(options: GatehouseOptions);
  readonly url: string;
  readonly appKey: string;
  readonly mode: 'token' | 'cookie';
  readonly storage: SessionStorageLike;
  readonly flowStorage: SessionStorageLike;
  /** Also stops the background refresh. */
  close(): void;
  /** Starts the background refresh (paused while the page is hidden; on by default). */
  startAutoRefresh(): void;
  stopAutoRefresh(): void;
  /** Whether a background refresh is waiting for its turn. */
  readonly autoRefreshScheduled: boolean;

  session(): Promise<StoredSession | null>;
  /** The stored session's user, from memory (null when signed out); reading it never calls a listener. */
  readonly currentUser: User | null;
  /**
   * `listener(event, session, details)`: `'initialSession'` once, asynchronously, right after
   * subscribing; then each change here or in another tab. Returns an unsubscribe function.
   */
  onAuthStateChange(listener: AuthStateListener): () => void;
  getAccessToken(): Promise<string>;
  refresh(): Promise<StoredSession>;

  /** `locale`: the user's language (a BCP 47 tag, e.g. `navigator.language`), for their mail. */
  signUp(input: { email: string; password: string; firstName?: string; lastName?: string; locale?: string; displayName?: string }): Promise<Session>;
  /** A new anonymous account and its session (the app's `allow_anonymous`); upgrade it later in place. */
  signInAnonymously(input?: { locale?: string }): Promise<Session>;
  signIn(input: { email: string; password: string }): Promise<Session>;
  /** Mails a 6-digit sign-in code (answered the same whether or not the address has an account). */
  sendSignInCode(email: string): Promise<void>;
  /** Signs in (or up: `isNewUser`) with the mailed code. */
  verifySignInCode(input: { email: string; code: string }): Promise<Session>;
  /** @deprecated Renamed `sendSignInCode`. */
  sendEmailCode(email: string): Promise<void>;
  /** @deprecated Renamed `verifySignInCode`. */
  verifyEmailCode(input: { email: string; code: string }): Promise<Session>;
  sendPasswordReset(email: string): Promise<void>;
  confirmPasswordReset(input: { email: string; code: string; password: string }): Promise<void>;
  signInWithApple(input: { identityToken: string; nonce?: string; authorizationCode?: string; firstName?: string; lastName?: string }): Promise<Session>;
  signInWithGoogle(input: { idToken: string; nonce?: string }): Promise<Session>;
  /** One of the app's own providers (`oidc_providers` id): an ID token and its raw nonce, or an access token (naver, github). */
  signInWithProvider(id: string, input: { idToken: string; nonce: string } | { accessToken: string }): Promise<Session>;
  signInWithFirebase(input: { provider: 'apple' | 'google'; firebaseIdToken: string }): Promise<Session>;

  /**
   * Starts a web sign-in: `provider` is `'apple'` or one of the app's `oidc_providers` ids; keeps the
   * state and PKCE verifier in `flowStorage` and (unless `redirect: false`) sends the browser to
   * Gatehouse. Resolves to the authorize URL.
   */
  startWebFlow(input: { provider: WebFlowProvider; redirectURI: string; redirect?: boolean }): Promise<string>;
  /** Whether `url` (default: this page) is a web flow coming back (`state` with `login_code` or `error`). */
  isWebFlowReturn(url?: string): boolean;
  /** Checks the state against this tab's flow, then exchanges the login code with the PKCE verifier. */
  finishWebFlow(url?: string): Promise<Session>;
  /** @deprecated Use `startWebFlow({ provider: 'apple', … })`. */
  startAppleWebFlow(input: { redirectURI: string; redirect?: boolean }): Promise<string>;
  /** @deprecated Use `isWebFlowReturn(url)`. */
  isAppleWebFlowReturn(url?: string): boolean;
  /** @deprecated Use `finishWebFlow(url)`. */
  finishAppleWebFlow(url?: string): Promise<Session>;

  getApp(): Promise<AppInfo>;
  getUser(): Promise<User>;
  updateUser(input: {
    firstName?: string | null;
    lastName?: string | null;
    locale?: string | null;
    displayName?: string | null;
    /** Replaces the whole `user_metadata` (a JSON object, at most 4 KiB, 5 levels deep); null empties it. */
    userMetadata?: Record<string, unknown> | null;
    photoFileId?: string;
  }): Promise<User>;
  uploadPhoto(photo: Blob, filename?: string): Promise<User>;
  deletePhoto(): Promise<User>;
  changePassword(input: { currentPassword: string; password: string }): Promise<void>;
  changeEmail(email: string): Promise<void>;
  confirmEmailChange(input: { email: string; code: string }): Promise<User>;
  sendEmailVerification(): Promise<void>;
  confirmEmailVerification(code: string): Promise<User>;

  getIdentities(): Promise<Identity[]>;
  /** An anonymous account gives `email` with its password and is upgraded in place. */
  addPassword(password: string, options?: { email?: string }): Promise<Identity[]>;
  linkApple(input: { identityToken: string; nonce: string; authorizationCode: string }): Promise<Identity[]>;
  linkGoogle(input: { idToken: string; nonce: string }): Promise<Identity[]>;
  linkProvider(id: string, input: { idToken: string; nonce: string } | { accessToken: string }): Promise<Identity[]>;
  unlink(provider: 'password' | 'apple' | 'google' | string): Promise<Identity[]>;

  /** `GET /v1/me/export`: the user's own data (no secret); a few an hour. */
  exportMyData(): Promise<AccountExport>;

  /** `POST /v1/files`: `visibility` `'private'` (default) or `'public'` (images, by their bytes). */
  uploadFile(file: Blob, options?: { filename?: string; visibility?: FileVisibility }): Promise<StoredFile>;
  /** One page, newest first; `nextCursor` is null on the last. */
  listFiles(options?: { limit?: number; cursor?: string }): Promise<{ files: StoredFile[]; nextCursor: string | null }>;
  getFile(id: string): Promise<StoredFile>;
  /** The bytes (`type`: the sniffed content type); `range` asks for a part (inclusive offsets). */
  getFileContent(id: string, options?: { range?: { start: number; end?: number } }): Promise<Blob>;
  deleteFile(id: string): Promise<void>;

  getSessions(): Promise<DeviceSession[]>;
  endSession(id: string): Promise<void>;

  verifyMfa(input: MfaVerification): Promise<Session>;
  listFactors(): Promise<MfaStatus>;
  enrollTotp(input?: { name?: string; mfaToken?: string }): Promise<TotpEnrollment>;
  confirmTotp(id: string, code: string, options?: { mfaToken?: string }): Promise<{ recoveryCodes: string[] }>;
  removeTotp(id: string): Promise<void>;

  registerPasskey(input?: { name?: string; mfaToken?: string; signal?: AbortSignal }): Promise<Passkey>;
  signInWithPasskey(options?: { mediation?: 'optional' | 'required' | 'silent' | 'conditional'; signal?: AbortSignal }): Promise<Session>;
  listPasskeys(): Promise<Passkey[]>;
  renamePasskey(id: string, name: string): Promise<Passkey>;
  removePasskey(id: string): Promise<void>;

  reauthenticate(proof: ReauthenticationProof): Promise<void>;
  sendReauthenticationCode(): Promise<void>;
  withRecentLogin<T>(action: () => Promise<T>, reauthenticate: () => Promise<void>): Promise<T>;

  signOut(options?: { scope?: 'current' | 'others' | 'all' }): Promise<void>;
  deleteAccount(options?: { reason?: string; appleAuthorizationCode?: string }): Promise<void>;
}
