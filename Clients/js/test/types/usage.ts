// Compiled with tsc --strict --noEmit by test/types.test.js against the package's declarations
// (resolved through package.json's "exports"/"types", as an app's bundler would).
import {
  Gatehouse, GatehouseError, MemoryStorage, createNonce, createPKCE, sha256Hex, SERVER_ERROR_CODES,
  type GatehouseErrorCode, type Session, type User, type DeviceSession, type Identity, type StoredSession,
} from 'gatehouse-js';

async function main(): Promise<void> {
  const gatehouse = new Gatehouse({ url: 'https://auth.example.com', appKey: 'pk_live_example', storage: new MemoryStorage(), mode: 'cookie' });
  const session: Session = await gatehouse.signUp({ email: 'ada@example.com', password: 'correct horse battery', firstName: 'Ada' });
  const refresh: string | null = session.refreshToken;
  const user: User = session.user;
  const email: string | null = user.email;
  const nonce = await createNonce();
  await gatehouse.signInWithApple({ identityToken: 'x', nonce: nonce.raw, authorizationCode: 'c' });
  await gatehouse.signInWithGoogle({ idToken: 'x', nonce: nonce.raw });
  await gatehouse.signInWithFirebase({ provider: 'apple', firebaseIdToken: 'x' });
  const pkce = await createPKCE();
  const method: 'S256' = pkce.method;
  const url: string = await gatehouse.startAppleWebFlow({ redirectURI: 'https://app.example.com/cb', redirect: false });
  if (gatehouse.isAppleWebFlowReturn(url)) await gatehouse.finishAppleWebFlow(url);
  const sessions: DeviceSession[] = await gatehouse.getSessions();
  const identities: Identity[] = await gatehouse.getIdentities();
  const stored: StoredSession | null = await gatehouse.session();
  await gatehouse.withRecentLogin(() => gatehouse.deleteAccount({ reason: 'bye' }), () => gatehouse.reauthenticate({ password: 'p' }));
  await gatehouse.reauthenticate({ provider: 'google', idToken: 'x', nonce: 'n' });
  const stop: () => void = gatehouse.onAuthStateChange((u: User | null) => console.log(u?.id));
  stop();
  try {
    await gatehouse.getUser();
  } catch (error) {
    if (error instanceof GatehouseError) {
      const code: GatehouseErrorCode = error.code;
      if (error.requiresRecentLogin || error.isSignedOut || code === 'auth/session-revoked') console.log(error.status, error.retryAfter);
    }
  }
  console.log(refresh, email, method, sessions.length, identities.length, stored?.expiresAt, SERVER_ERROR_CODES.length, await sha256Hex('x'));
}
void main();
