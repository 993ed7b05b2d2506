// One test environment: the fake providers, the SMTP sink and the real server, started together.
import fs from 'node:fs';
import { webcrypto } from 'node:crypto';
import { FakeApple, FakeFirebase, FakeGoogle, FakeKakao } from './providers.js';
import { GatehouseServer, SMTPSink } from './server.js';

// Browsers have WebCrypto as globalThis.crypto; Node 18 (Debian 12's) only under node:crypto.
if (!globalThis.crypto) globalThis.crypto = webcrypto;

export const GOOGLE_CLIENT_ID = '1234-web.apps.googleusercontent.com';
export const APPLE_BUNDLE_ID = 'com.example.app';
export const APPLE_SERVICES_ID = 'com.example.web';
export const FIREBASE_PROJECT = 'gatehouse-js-test';
export const KAKAO_APP_KEY = 'kakao-js-app-key';

export async function startEnvironment({ serverEnv = {} } = {}) {
  const apple = await new FakeApple().start();
  const google = await new FakeGoogle().start();
  const firebase = await new FakeFirebase().start();
  const kakao = await new FakeKakao().start();
  const smtp = await new SMTPSink().start();
  const server = await new GatehouseServer({ apple, google, firebase, smtp, env: { GATEHOUSE_PROVIDER_URL_KAKAO: kakao.url, ...serverEnv } }).start();
  return {
    apple, google, firebase, kakao, smtp, server,
    /** An app with every sign-in method, the providers configured, and `settings` merged over. */
    async createApp(settings = {}) {
      return server.createApp({
        sign_in_methods: ['password', 'email_code', 'apple', 'google', 'kakao'],
        oidc_providers: [{ id: 'kakao', kind: 'kakao', client_ids: [KAKAO_APP_KEY] }],
        apple: { client_ids: [APPLE_BUNDLE_ID, APPLE_SERVICES_ID], services_id: APPLE_SERVICES_ID, ...apple.makeCredentials() },
        google: { client_ids: [GOOGLE_CLIENT_ID] },
        firebase: { project_id: FIREBASE_PROJECT },
        ...settings,
      });
    },
    async stop() {
      await server.stop();
      for (const part of [apple, google, firebase, kakao, smtp]) part.stop();
    },
  };
}

/** A storage shared by threads through one file (what localStorage is to a browser's tabs). */
export class FileStorage {
  constructor(dir) { this.dir = dir; }
  #file(key) { return `${this.dir}/${encodeURIComponent(key)}`; }
  getItem(key) {
    try { return fs.readFileSync(this.#file(key), 'utf8'); } catch { return null; }
  }
  setItem(key, value) {
    const temporary = `${this.#file(key)}.${process.pid}.${Math.random().toString(36).slice(2)}`;
    fs.writeFileSync(temporary, value);
    fs.renameSync(temporary, this.#file(key));
  }
  removeItem(key) { fs.rmSync(this.#file(key), { force: true }); }
}
