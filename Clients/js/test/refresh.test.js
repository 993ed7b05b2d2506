// Single-flight refresh, counted on the server's side: /metrics'
// gatehouse_http_requests_total{route="/v1/auth/refresh"} says how many refreshes reached it.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Worker } from 'node:worker_threads';
import { Gatehouse, GatehouseError, MemoryStorage } from '../gatehouse.js';
import { FileStorage, startEnvironment } from './support/env.js';

let env;
let app;
let counter = 0;
const PASSWORD = 'correct horse battery';
const unique = (name) => `${name}.${process.pid}.${++counter}@example.com`;

before(async () => {
  // A 2 s grace window, so that the reuse test need not wait 10 s past a rotation.
  env = await startEnvironment({ serverEnv: { GATEHOUSE_REFRESH_GRACE_SECONDS: '2' } });
  app = await env.createApp();
});
after(async () => { await env?.stop(); });

const refreshes = () => env.server.metric('gatehouse_http_requests_total', { route: '/v1/auth/refresh' });

async function signedIn(storage = new MemoryStorage(), options = {}) {
  const web = new Gatehouse({ url: env.server.url, appKey: app.appKey, storage, ...options });
  await web.signUp({ email: unique('racer'), password: PASSWORD });
  return web;
}

/** Marks the stored access token as expired (the client's clock says so; the server would still take it). */
async function expireLocally(web) {
  const session = await web.session();
  await web.storage.setItem(web.storageKey, JSON.stringify({ ...session, expiresAt: Date.now() - 1000 }));
}

test('50 concurrent calls with an expiring token: one refresh reaches the server', async () => {
  const web = await signedIn();
  const old = await web.session();
  await expireLocally(web);
  const before = await refreshes();
  const users = await Promise.all(Array.from({ length: 50 }, () => web.getUser()));
  assert.equal(users.length, 50);
  assert.ok(users.every((u) => u.id === old.user.id));
  assert.equal(await refreshes(), before + 1);
  const now = await web.session();
  assert.notEqual(now.refreshToken, old.refreshToken, 'rotated');
  assert.ok(now.expiresAt > Date.now() + 60_000);
  web.close();
});

test('50 concurrent calls answered 401 auth/invalid-token by the server: one refresh, every call retried once', async () => {
  // The stored token's signature is spoiled, so the server (not the client's clock) refuses it,
  // as it refuses a token signed by a key the app no longer publishes. (A real key rotation is
  // limited to once a minute per app, creation included: too slow for this suite.)
  const web = await signedIn();
  const session = await web.session();
  const [header, payload, signature] = session.accessToken.split('.');
  const spoiled = `${header}.${payload}.${signature[0] === 'A' ? 'B' : 'A'}${signature.slice(1)}`;
  await web.storage.setItem(web.storageKey, JSON.stringify({ ...session, accessToken: spoiled }));
  const before = await refreshes();
  const meBefore = await env.server.metric('gatehouse_http_requests_total', { route: '/v1/me', status: '401' });
  const users = await Promise.all(Array.from({ length: 50 }, () => web.getUser()));
  assert.equal(users.length, 50);
  assert.ok(users.every((u) => u.id === session.user.id));
  assert.equal(await refreshes(), before + 1);
  assert.equal(await env.server.metric('gatehouse_http_requests_total', { route: '/v1/me', status: '401' }), meBefore + 50, 'every call met the 401 first');
  web.close();
});

test('two clients holding the same refresh token refresh at once: the grace window gives both the same pair', async () => {
  const first = await signedIn();
  const copy = new MemoryStorage();
  copy.setItem(first.storageKey, first.storage.getItem(first.storageKey));
  const second = new Gatehouse({ url: env.server.url, appKey: app.appKey, storage: copy, lock: 'local' });
  const reusesBefore = await env.server.metric('gatehouse_refresh_reuse_total');
  const [a, b] = await Promise.all([first.refresh(), second.refresh()]);
  assert.equal(a.refreshToken, b.refreshToken);
  assert.equal(await env.server.metric('gatehouse_refresh_reuse_total'), reusesBefore);
  assert.equal((await second.getUser()).id, (await first.getUser()).id);
  first.close(); second.close();
});

test('a rotated refresh token presented after the grace window: signed out with auth/refresh-token-reused', async () => {
  const victim = await signedIn();
  const stolen = new MemoryStorage();
  stolen.setItem(victim.storageKey, victim.storage.getItem(victim.storageKey));
  const thief = new Gatehouse({ url: env.server.url, appKey: app.appKey, storage: stolen, lock: 'local' });
  await victim.refresh();
  await new Promise((resolve) => setTimeout(resolve, 2500));
  const heard = [];
  thief.onAuthStateChange((event, session, details) => heard.push([event, details.reason ?? null, details.code ?? null]));
  const error = await thief.refresh().then(() => null, (e) => e);
  assert.ok(error instanceof GatehouseError);
  assert.equal(error.code, 'auth/refresh-token-reused');
  assert.equal(error.status, 401);
  assert.equal(error.isSignedOut, true);
  assert.equal(await thief.session(), null);
  assert.deepEqual(heard.at(-1), ['signedOut', 'sessionEnded', 'auth/refresh-token-reused']);
  // Reuse ends the whole session: the victim's next call finds it revoked and signs out too.
  const revoked = await victim.getUser().then(() => null, (e) => e);
  assert.equal(revoked?.code, 'auth/session-revoked');
  assert.equal(await victim.session(), null);
  const refused = await victim.refresh().then(() => null, (e) => e);
  assert.equal(refused?.code, 'client/signed-out');
  victim.close(); thief.close();
});

/**
 * "Tabs": worker threads, each with its own Gatehouse client, sharing one storage (a folder, as
 * localStorage is shared by an origin's tabs) and BroadcastChannel. Each fires `calls` getUser()
 * at once after the go signal; returns how many refreshes reached the server.
 */
async function tabsRace({ tabs, calls, lock }) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gatehouse-js-tabs-'));
  try {
    const web = await signedIn(new FileStorage(dir));
    const userID = (await web.session()).user.id;
    await expireLocally(web);
    web.close();
    const before = await refreshes();
    const workers = Array.from({ length: tabs }, () => new Worker(new URL('./support/tab-worker.js', import.meta.url), {
      workerData: { url: env.server.url, appKey: app.appKey, dir, calls, lock },
    }));
    const ready = workers.map((w) => new Promise((resolve, reject) => { w.once('message', resolve); w.once('error', reject); }));
    await Promise.all(ready);
    const done = workers.map((w) => new Promise((resolve, reject) => { w.once('message', resolve); w.once('error', reject); }));
    for (const w of workers) w.postMessage('go');
    const results = await Promise.all(done);
    for (const w of workers) await w.terminate();
    for (const result of results) {
      assert.equal(result.error, undefined, result.error);
      assert.equal(result.ids.length, calls);
      assert.ok(result.ids.every((id) => id === userID));
    }
    return (await refreshes()) - before;
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

test('across tabs: 4 tabs × 10 calls with an expired token, one shared storage: one refresh reaches the server', async () => {
  assert.equal(await tabsRace({ tabs: 4, calls: 10, lock: 'auto' }), 1);
});

test('the control: without the cross-tab lock the same race sends more than one refresh', async () => {
  // Shows that the test above can fail: each tab's own single-flight is not enough.
  assert.ok(await tabsRace({ tabs: 4, calls: 10, lock: 'local' }) > 1);
});

test('cookie mode without a cookie (Node has no cookie jar): refresh says signed out, typed', async () => {
  const cookieApp = await env.createApp({ refresh_cookie: 'only' });
  const web = new Gatehouse({ url: env.server.url, appKey: cookieApp.appKey, storage: new MemoryStorage(), mode: 'cookie' });
  const session = await web.signUp({ email: unique('cookie'), password: PASSWORD });
  assert.equal(session.refreshToken, null, 'the body carries no refresh token in cookie mode');
  assert.equal((await web.session()).refreshToken, null, 'nothing to steal in storage');
  const error = await web.refresh().then(() => null, (e) => e);
  assert.equal(error?.code, 'client/signed-out');
  web.close();
});

/** A fetch that loses the answer of the first refresh after the server has rotated: the real
 * request is sent and answered, then, `delayMs` later, the caller sees a network failure. */
function losingFirstRefreshAnswer(delayMs) {
  let lost = false;
  return async (input, init) => {
    const answer = await fetch(input, init);
    if (!lost && String(input).endsWith('/v1/auth/refresh')) {
      lost = true;
      await answer.arrayBuffer();
      await new Promise((resolve) => setTimeout(resolve, delayMs));
      throw new TypeError('fetch failed (the answer was lost)');
    }
    return answer;
  };
}

test('a refresh answer lost at once is sent again within the grace window: the same new pair, no reuse', async () => {
  const web = await signedIn(new MemoryStorage(), { fetch: losingFirstRefreshAnswer(0), refreshGraceSeconds: 2 });
  const old = await web.session();
  const before = await refreshes();
  const reusesBefore = await env.server.metric('gatehouse_refresh_reuse_total');
  const next = await web.refresh();
  assert.notEqual(next.refreshToken, old.refreshToken);
  assert.equal(await refreshes(), before + 2, 'sent twice: the lost answer and the retry');
  assert.equal(await env.server.metric('gatehouse_refresh_reuse_total'), reusesBefore);
  await web.getUser();
  web.close();
});

test('a refresh answer lost late (past half the grace window) is not sent again, as GatehouseKit does: the caller gets client/network', async () => {
  // The server's grace window is 2 s here: a failure seen 1.2 s after sending is past half of it.
  const web = await signedIn(new MemoryStorage(), { fetch: losingFirstRefreshAnswer(1200), refreshGraceSeconds: 2 });
  const old = await web.session();
  const before = await refreshes();
  const reusesBefore = await env.server.metric('gatehouse_refresh_reuse_total');
  await assert.rejects(web.refresh(), (error) => error instanceof GatehouseError && error.code === 'client/network');
  assert.equal(await refreshes(), before + 1, 'not sent again');
  assert.equal(await env.server.metric('gatehouse_refresh_reuse_total'), reusesBefore);
  assert.equal((await web.session())?.refreshToken, old.refreshToken, 'the stored session is left as it was');
  web.close();
});

test('the base URL must be https, but for this machine', () => {
  assert.throws(() => new Gatehouse({ url: 'http://auth.example.com', appKey: 'pk_x' }), TypeError);
  for (const url of ['https://auth.example.com', 'http://localhost:8080', 'http://127.0.0.1:8080', 'http://[::1]:8080']) {
    new Gatehouse({ url, appKey: 'pk_x', storage: new MemoryStorage(), lock: 'local' }).close();
  }
});
