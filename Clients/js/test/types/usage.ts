// Compiled with tsc --strict --noEmit by test/types.test.js against the package's declarations
// (resolved through package.json's "exports"/"types", as an app's bundler would).
import {
  Gatehouse, GatehouseError, MemoryStorage, createNonce, createPKCE, sha256Hex, SERVER_ERROR_CODES,
  MfaRequiredError, bufferToBase64url, base64urlToBuffer, decodeRequestOptions, encodeCredential,
  type GatehouseErrorCode, type Session, type User, type DeviceSession, type Identity, type StoredSession,
  type MfaStatus, type Passkey, type TotpEnrollment, type AccountExport, type WebFlowProvider, type StoredFile,
} from 'gatehouse-js';

async function main(): Promise<void> {
  const gatehouse = new Gatehouse({ url: 'https://auth.example.com', appKey: 'pk_live_example', storage: new MemoryStorage(), mode: 'cookie' });
  const session: Session = await gatehouse.signUp({ email: 'ada@example.com', password: 'correct horse battery', firstName: 'Ada' });
  const refresh: string | null = session.refreshToken;
  const user: User = session.user;
  const email: string | null = user.email;
  const guest: Session = await gatehouse.signInAnonymously();
  const anonymous: boolean = guest.user.isAnonymous;
  await gatehouse.signInAnonymously({ locale: 'ko-KR' });
  await gatehouse.addPassword('correct horse battery', { email: 'guest@example.com' });
  const nonce = await createNonce();
  await gatehouse.signInWithApple({ identityToken: 'x', nonce: nonce.raw, authorizationCode: 'c' });
  await gatehouse.signInWithGoogle({ idToken: 'x', nonce: nonce.raw });
  await gatehouse.signInWithFirebase({ provider: 'apple', firebaseIdToken: 'x' });
  const pkce = await createPKCE();
  const method: 'S256' = pkce.method;
  // The deprecated aliases still type-check (an app on an earlier version still builds).
  const url: string = await gatehouse.startAppleWebFlow({ redirectURI: 'https://app.example.com/cb', redirect: false });
  if (gatehouse.isAppleWebFlowReturn(url)) await gatehouse.finishAppleWebFlow(url);
  await gatehouse.sendEmailCode('grace@example.com');
  const viaOldName: Session = await gatehouse.verifyEmailCode({ email: 'grace@example.com', code: '123456' });
  await gatehouse.sendSignInCode('grace@example.com');
  const viaCode: Session = await gatehouse.verifySignInCode({ email: 'grace@example.com', code: '123456' });
  console.log(viaOldName.isNewUser, viaCode.isNewUser);
  await gatehouse.confirmPasswordReset({ email: 'grace@example.com', code: '123456', password: 'a new password' });
  const provider: WebFlowProvider = 'github';
  const viaGitHub: string = await gatehouse.startWebFlow({ provider, redirectURI: 'https://app.example.com/cb', redirect: false });
  await gatehouse.startWebFlow({ provider: 'apple', redirectURI: 'https://app.example.com/cb' });
  if (gatehouse.isWebFlowReturn(viaGitHub)) { const back: Session = await gatehouse.finishWebFlow(viaGitHub); void back; }
  const sessions: DeviceSession[] = await gatehouse.getSessions();
  const identities: Identity[] = await gatehouse.getIdentities();
  const mine: AccountExport = await gatehouse.exportMyData();
  const exportedEmail: string | null = mine.profile.email;
  const fileSizes: number[] = mine.files.map((f) => f.size);
  const eventData: Record<string, unknown> | undefined = mine.events[0]?.data;
  await gatehouse.signUp({ email: 'grace@example.com', password: 'correct horse battery', displayName: 'Grace' });
  const stored: StoredSession | null = await gatehouse.session();
  await gatehouse.withRecentLogin(() => gatehouse.deleteAccount({ reason: 'bye' }), () => gatehouse.reauthenticate({ password: 'p' }));
  await gatehouse.reauthenticate({ provider: 'google', idToken: 'x', nonce: 'n' });
  const stop: () => void = gatehouse.onAuthStateChange((event, session, details) => console.log(event, session?.user?.id, details.reason));
  const now: User | null = gatehouse.currentUser;
  gatehouse.stopAutoRefresh();
  gatehouse.startAutoRefresh();
  const scheduled: boolean = gatehouse.autoRefreshScheduled;
  console.log(scheduled);
  new Gatehouse({ url: 'https://auth.example.com', appKey: 'pk_x', autoRefresh: false, document: null, clock: { now: () => 0 } }).close();
  const upload: StoredFile = await gatehouse.uploadFile(new Blob(['x']), { visibility: 'private', filename: 'x.txt' });
  const listed: { files: StoredFile[]; nextCursor: string | null } = await gatehouse.listFiles({ limit: 10 });
  const blob: Blob = await gatehouse.getFileContent(upload.id, { range: { start: 0 } });
  console.log(listed.files.length, blob.size, (await gatehouse.getFile(upload.id)).sha256);
  await gatehouse.deleteFile(upload.id);
  console.log(now?.id);
  stop();
  // The second step: a sign-in throws MfaRequiredError; verifyMfa takes one proof.
  let second: Session | null = null;
  try {
    second = await gatehouse.signIn({ email: 'ada@example.com', password: 'correct horse battery' });
  } catch (error) {
    if (!(error instanceof MfaRequiredError) || error.mfaToken === null) throw error;
    const mfaToken: string = error.mfaToken;
    if (error.enroll) {
      const totp: TotpEnrollment = await gatehouse.enrollTotp({ name: 'Phone', mfaToken });
      const { recoveryCodes } = await gatehouse.confirmTotp(totp.id, '123456', { mfaToken });
      console.log(totp.otpauthUrl, recoveryCodes.length);
      second = await gatehouse.verifyMfa({ mfaToken });
    } else if (error.methods.includes('passkey')) {
      second = await gatehouse.verifyMfa({ mfaToken, passkey: true });
    } else {
      second = await gatehouse.verifyMfa({ mfaToken, code: '123456' });
    }
    const expiresIn: number | null = error.expiresIn;
    console.log(expiresIn, error.code === 'auth/mfa-required');
  }
  const mfa: MfaStatus = await gatehouse.listFactors();
  if (mfa.policy === 'required') await gatehouse.removeTotp(mfa.factors[0].id);
  const passkey: Passkey = await gatehouse.registerPasskey({ name: 'This laptop' });
  const passkeys: Passkey[] = await gatehouse.listPasskeys();
  await gatehouse.renamePasskey(passkey.id, 'Work laptop');
  await gatehouse.removePasskey(passkeys[0].id);
  const bypasskey: Session = await gatehouse.signInWithPasskey({ mediation: 'conditional' });
  await gatehouse.reauthenticate({ passkey: true });
  const b64: string = bufferToBase64url(base64urlToBuffer('AQID'));
  const publicKey: PublicKeyCredentialRequestOptions = decodeRequestOptions({ challenge: b64 });
  const credential = await navigator.credentials.get({ publicKey });
  if (credential) console.log(encodeCredential(credential).rawId);
  console.log(second?.user.id, bypasskey.isNewUser, passkey.backedUp, mfa.recoveryCodesLeft);
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
