// The background refresh against the real server, on a fake clock and a fake page: it refreshes
// `refreshLeewaySeconds` before the access token expires, pauses while the page is hidden and
// catches up when it shows, and stops on close() and stopAutoRefresh().
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Gatehouse, MemoryStorage } from '../gatehouse.js';
import { startEnvironment } from './support/env.js';

let env;
let app;
let counter = 0;
const unique = (name) => `${name}.${process.pid}.${++counter}@example.com`;
const PASSWORD = 'correct horse battery';

/** A clock whose time moves only when told, and whose timers fire only when told. */
class FakeClock {
  time = Date.now();
  timers = new Map();
  cleared = [];
  #next = 0;
  now = () => this.time;
  setTimeout = (fn, ms) => { const id = { n: ++this.#next }; this.timers.set(id, { fn, ms, at: this.time + ms }); return id; };
  clearTimeout = (id) => { if (this.timers.delete(id)) this.cleared.push(id); };
  /** The one pending timer (there is never more than one). */
  pending() { assert.ok(this.timers.size <= 1, `${this.timers.size} timers`); return [...this.timers.values()][0] ?? null; }
  /** Moves the time to the pending timer's and fires it. */
  fire() {
    const [id, timer] = [...this.timers.entries()][0];
    this.timers.delete(id);
    this.time = Math.max(this.time, timer.at);
    timer.fn();
  }
}

/** A page whose visibility the test sets. */
class FakePage extends EventTarget {
  visibilityState = 'visible';
  show(state) { this.visibilityState = state; this.dispatchEvent(new Event('visibilitychange')); }
}

const settle = () => new Promise((resolve) => setTimeout(resolve, 100));

function client(clock, options = {}) {
  return new Gatehouse({ url: env.server.url, appKey: app.appKey, storage: new MemoryStorage(), lock: 'local', clock, document: new FakePage(), ...options });
}

/** Waits for the listener to hear `event`. */
function next(web, wanted) {
  return new Promise((resolve) => {
    const stop = web.onAuthStateChange((event, session) => { if (event === wanted) { stop(); resolve(session); } });
  });
}

before(async () => {
  env = await startEnvironment();
  app = await env.createApp();
});
after(async () => { await env?.stop(); });

test('refreshes refreshLeewaySeconds before the access token expires, then schedules the next', async () => {
  const clock = new FakeClock();
  const web = client(clock);
  const { expiresIn } = await web.signUp({ email: unique('timer'), password: PASSWORD });
  await settle();
  const timer = clock.pending();
  assert.ok(timer, 'a refresh is scheduled after the sign-in');
  assert.equal(timer.ms, expiresIn * 1000 - 30_000, 'leeway (30 s) before expiry');
  const before = await web.session();
  const refreshed = next(web, 'tokenRefreshed');
  clock.fire();
  const session = await refreshed;
  assert.notEqual(session.rev, before.rev);
  assert.notEqual(session.refreshToken, before.refreshToken, 'the server rotated the refresh token');
  await settle();
  assert.equal(clock.pending().at, session.expiresAt - 30_000, 'the next one, for the new token');
  await web.signOut();
  await settle();
  assert.equal(clock.pending(), null, 'signed out: nothing to refresh');
  assert.equal(web.autoRefreshScheduled, false);
  web.close();
});

test('paused while the page is hidden; on showing again it refreshes at once when due', async () => {
  const clock = new FakeClock();
  const page = new FakePage();
  const web = client(clock, { document: page });
  const { expiresIn } = await web.signUp({ email: unique('hidden'), password: PASSWORD });
  await settle();
  assert.ok(clock.pending());
  page.show('hidden');
  await settle();
  assert.equal(clock.pending(), null, 'no timer while hidden');
  assert.equal(web.autoRefreshScheduled, false);
  const before = await web.session();
  clock.time += expiresIn * 1000; // the token expired while the page was hidden
  const refreshed = next(web, 'tokenRefreshed');
  page.show('visible');
  await settle();
  assert.equal(clock.pending().ms, 0, 'due: at once');
  clock.fire();
  assert.notEqual((await refreshed).rev, before.rev);

  // Shown again before the token is due: the timer waits for the remaining time only.
  await settle();
  page.show('hidden');
  await settle();
  clock.time += 60_000;
  page.show('visible');
  await settle();
  const current = await web.session();
  assert.equal(clock.pending().ms, current.expiresAt - 30_000 - clock.time);
  web.close();
});

test('close() and stopAutoRefresh() stop it; autoRefresh: false leaves it off until startAutoRefresh()', async () => {
  const clock = new FakeClock();
  const web = client(clock);
  await web.signUp({ email: unique('close'), password: PASSWORD });
  await settle();
  assert.ok(clock.pending());
  web.close();
  assert.equal(clock.pending(), null);
  assert.equal(clock.cleared.length, 1, 'its timer was cleared');

  const storage = new MemoryStorage();
  const manual = client(clock, { storage, autoRefresh: false });
  await manual.signUp({ email: unique('manual'), password: PASSWORD });
  await settle();
  assert.equal(clock.pending(), null);
  manual.startAutoRefresh();
  await settle();
  assert.ok(clock.pending());
  manual.stopAutoRefresh();
  assert.equal(clock.pending(), null);
  manual.close();
});

test('a failed background refresh (server unreachable) keeps the session and tries again later', async () => {
  const clock = new FakeClock();
  let offline = false;
  const fetch = (...args) => (offline ? Promise.reject(new TypeError('offline')) : globalThis.fetch(...args));
  const web = client(clock, { fetch, refreshGraceSeconds: 0 });
  await web.signUp({ email: unique('offline'), password: PASSWORD });
  await settle();
  offline = true;
  clock.fire();
  await settle();
  assert.ok(await web.session(), 'kept');
  assert.equal(clock.pending().ms, 1000, 'again in a second');
  offline = false;
  const refreshed = next(web, 'tokenRefreshed');
  clock.fire();
  await refreshed;
  web.close();
});
