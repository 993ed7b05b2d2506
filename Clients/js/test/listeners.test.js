// onAuthStateChange and currentUser against the real server: the initial state on subscribe,
// named events, no event from a read (so "reload the profile on every change" cannot loop), and
// another tab's changes (a second client on the same storage and BroadcastChannel).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Gatehouse, MemoryStorage } from '../gatehouse.js';
import { startEnvironment } from './support/env.js';

let env;
let app;
let counter = 0;
const unique = (name) => `${name}.${process.pid}.${++counter}@example.com`;
const PASSWORD = 'correct horse battery';

function client(options = {}) {
  return new Gatehouse({ url: env.server.url, appKey: app.appKey, storage: new MemoryStorage(), lock: 'local', ...options });
}

const settle = () => new Promise((resolve) => setTimeout(resolve, 150));

before(async () => {
  env = await startEnvironment();
  app = await env.createApp();
});
after(async () => { await env?.stop(); });

test('initialSession comes once, asynchronously, with the stored session; then each event by name', async () => {
  const web = client();
  const heard = [];
  web.onAuthStateChange((event, session, details) => heard.push({ event, email: session?.user?.email ?? null, details }));
  assert.deepEqual(heard, [], 'not during the call: asynchronously');
  await settle();
  assert.deepEqual(heard, [{ event: 'initialSession', email: null, details: {} }]);
  assert.equal(web.currentUser, null);

  const email = unique('events');
  const { user } = await web.signUp({ email, password: PASSWORD });
  assert.equal(web.currentUser.id, user.id, 'currentUser is synchronous and current');
  await web.refresh();
  await web.updateUser({ firstName: 'Grace' });
  assert.equal(web.currentUser.firstName, 'Grace');
  await web.updateUser({ firstName: 'Grace' }); // the same user: no userUpdated
  await web.signOut();
  assert.equal(web.currentUser, null);
  assert.deepEqual(heard.map((h) => h.event), ['initialSession', 'signedIn', 'tokenRefreshed', 'userUpdated', 'signedOut']);
  assert.deepEqual(heard.at(-1).details, { reason: 'signedOut' });

  // A late subscriber starts from the state as it is now.
  await web.signIn({ email, password: PASSWORD });
  const late = [];
  web.onAuthStateChange((event, session) => late.push([event, session?.user?.id ?? null]));
  await settle();
  assert.deepEqual(late, [['initialSession', user.id]]);
  // Unsubscribed before the initial delivery: nothing at all.
  const never = [];
  web.onAuthStateChange(() => never.push(1))();
  await settle();
  assert.deepEqual(never, []);
  web.close();
});

test('reading the user never fires a listener: reloading the profile on each change does not loop', async () => {
  const web = client();
  await web.signUp({ email: unique('reader'), password: PASSWORD, firstName: 'Ada' });
  const heard = [];
  let reads = 0;
  web.onAuthStateChange(async (event) => {
    heard.push(event);
    reads += 1;
    await web.getUser(); // the usual "reload the profile on auth change"
    void web.currentUser;
  });
  await settle();
  await web.getUser();
  await settle();
  assert.deepEqual(heard, ['initialSession']);
  assert.equal(reads, 1);

  // A change made elsewhere (an admin) that getUser reads: kept as currentUser, quietly.
  const id = web.currentUser.id;
  await env.server.admin('PATCH', `/v1/admin/users/${id}`, { app_metadata: { plan: 'pro' } }, app.secretKey);
  const fresh = await web.getUser();
  assert.deepEqual(fresh.appMetadata, { plan: 'pro' });
  assert.deepEqual(web.currentUser.appMetadata, { plan: 'pro' });
  await settle();
  assert.deepEqual(heard, ['initialSession']);
  web.close();
});

test("another tab's sign-in, update, refresh and sign-out reach this tab as the same events", async () => {
  const storage = new MemoryStorage();
  const mine = client({ storage });
  const theirs = client({ storage });
  const heard = [];
  mine.onAuthStateChange((event, session, details) => heard.push([event, session?.user?.firstName ?? null, details.reason ?? null]));
  await settle();
  await theirs.signUp({ email: unique('tabs'), password: PASSWORD, firstName: 'Ada' });
  await settle();
  assert.equal(mine.currentUser?.firstName, 'Ada', "the other tab's sign-in is this tab's currentUser");
  await theirs.updateUser({ firstName: 'Grace' });
  await settle();
  assert.equal(mine.currentUser.firstName, 'Grace');
  await theirs.refresh();
  await settle();
  await theirs.signOut();
  await settle();
  assert.equal(mine.currentUser, null);
  assert.deepEqual(heard, [
    ['initialSession', null, null], ['signedIn', 'Ada', null], ['userUpdated', 'Grace', null],
    ['tokenRefreshed', 'Grace', null], ['signedOut', null, 'signedOut'],
  ]);
  mine.close(); theirs.close();
});

test('currentUser is read from a synchronous storage at construction; the server ending the session is sessionEnded', async () => {
  const storage = new MemoryStorage();
  const first = client({ storage });
  const { user } = await first.signUp({ email: unique('restore'), password: PASSWORD });
  const reloaded = client({ storage });
  assert.equal(reloaded.currentUser?.id, user.id, 'no await: the page can render it at once');
  const heard = [];
  reloaded.onAuthStateChange((event, session, details) => heard.push([event, details.reason ?? null, details.code ?? null]));
  await first.signOut({ scope: 'all' });
  await settle();
  // `first` cleared the shared storage and told `reloaded` over the channel.
  assert.deepEqual(heard.at(-1), ['signedOut', 'signedOut', null]);

  // The server ends a session on its own: the next call finds it revoked.
  const solo = client();
  await solo.signUp({ email: unique('ended'), password: PASSWORD });
  const events = [];
  solo.onAuthStateChange((event, session, details) => events.push([event, details.reason ?? null, details.code ?? null]));
  await settle();
  await env.server.admin('DELETE', `/v1/admin/users/${solo.currentUser.id}/sessions`, null, app.secretKey);
  await assert.rejects(solo.getUser(), (error) => error.code === 'auth/session-revoked');
  assert.equal(solo.currentUser, null);
  assert.deepEqual(events, [['initialSession', null, null], ['signedOut', 'sessionEnded', 'auth/session-revoked']]);
  first.close(); reloaded.close(); solo.close();
});

test('a client on another storage (same app key, same channel) hears nothing of the other storage', async () => {
  const mine = client({ storage: new MemoryStorage() });
  const elsewhere = client({ storage: new MemoryStorage() });
  const heard = [];
  mine.onAuthStateChange((event) => heard.push(event));
  await settle();
  await elsewhere.signUp({ email: unique('elsewhere'), password: PASSWORD });
  await elsewhere.updateUser({ firstName: 'Other' });
  await elsewhere.signOut();
  await settle();
  assert.deepEqual(heard, ['initialSession']);
  assert.equal(mine.currentUser, null);
  mine.close(); elsewhere.close();
});
