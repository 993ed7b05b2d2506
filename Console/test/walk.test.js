// The console walked in headless Chromium as its two kinds of users would, every step checked
// against the server through the admin API: the operator creates an app (and disables and enables
// it, and reads the health page); the app's admin signs in with the secret key, configures Apple
// (a .p8 made by openssl, uploaded through the file input), Google and SMTP, seeing the server's
// field errors in place; finds a user made through the public API, bans and lifts, signs them out
// everywhere, deletes them; reads the audit log; retries a dead outbox item. Each page passes the
// accessibility check and is saved as a screenshot in .build/test-artifacts/console/. Then the
// CSP: a script element put into the page does not run, and the browser reports the violation.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { Browser, Driver, GatehouseServer, PasswordSMTPSink, artifacts, makeP8 } from './support.js';

let server;
let browser;
let sink;
let scratch;
let receiver;
const deliveries = [];
const shots = [];

before(async () => {
  scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'gatehouse-console-'));
  fs.rmSync(artifacts, { recursive: true, force: true });
  sink = await new PasswordSMTPSink('walk', 'sink-password-1').start();
  // The app's own SMTP server is the sink on loopback: private addresses allowed for this server.
  server = await new GatehouseServer({ env: { GATEHOUSE_ALLOW_PRIVATE_OUTBOUND: 'true' } }).start();
  browser = await Browser.launch();
  // A webhook receiver on loopback: keeps each delivery's headers and body.
  receiver = http.createServer((req, res) => {
    let body = '';
    req.on('data', (d) => { body += d; });
    req.on('end', () => { deliveries.push({ headers: req.headers, body }); res.writeHead(204).end(); });
  });
  await new Promise((resolve) => receiver.listen(0, '127.0.0.1', resolve));
});

after(async () => {
  try { await browser?.close(); } finally {
    await server?.stop();
    sink?.stop();
    receiver?.close();
    receiver?.closeAllConnections?.();
    if (scratch) fs.rmSync(scratch, { recursive: true, force: true });
  }
});

/** The page's accessibility check passes, and the page is kept as a screenshot. */
async function checkpoint(tab, name, selector) {
  assert.deepEqual(await tab.accessibilityProblems(), [], `${name}: accessibility`);
  await tab.screenshot(name, selector);
  shots.push(name);
}

async function publicCall(appKey, pathname, body, bearer) {
  const response = await fetch(server.url + pathname, {
    method: 'POST',
    headers: { 'X-App-Key': appKey, 'Content-Type': 'application/json', ...(bearer ? { Authorization: `Bearer ${bearer}` } : {}) },
    body: JSON.stringify(body),
  });
  const text = await response.text();
  return { status: response.status, body: text ? JSON.parse(text) : null };
}

/** Whether a delivery's `webhook-signature` holds the Standard Webhooks signature made with `secret`. */
function signedWith(delivery, secret) {
  const signed = `${delivery.headers['webhook-id']}.${delivery.headers['webhook-timestamp']}.${delivery.body}`;
  const expected = crypto.createHmac('sha256', Buffer.from(secret.slice('whsec_'.length), 'base64')).update(signed).digest('base64');
  return (delivery.headers['webhook-signature'] ?? '').split(' ').includes(`v1,${expected}`);
}

const announced = (text) => `document.getElementById('status').textContent.includes(${JSON.stringify(text)})`;
const onPage = (page) => `document.getElementById('main').dataset.page === ${JSON.stringify(page)}`;

test('the console walk: operator, then the app\'s admin', async () => {
  const tab = await Driver.open(browser, `${server.url}/console/`);
  await tab.waitFor("document.querySelector('input[name=token]')", 'the sign-in form');
  await checkpoint(tab, '01-sign-in.png');

  // From the keyboard alone: Tab goes from the skip link through the role, the key and the button.
  await tab.evaluate('document.activeElement.blur()');
  const order = [];
  for (let i = 0; i < 4; i++) {
    await tab.press('Tab');
    order.push(await tab.evaluate("document.activeElement.id || document.activeElement.name || document.activeElement.textContent.trim()"));
  }
  assert.deepEqual(order.slice(0, 2), ['Skip to content', 'role-tenant'], order.join());
  assert.ok(order.includes('token') || order.some((o) => /^token-/.test(o)), `the key field in the tab order: ${order}`);

  // A wrong token is refused in place, by the field.
  await tab.check('#role-operator');
  await tab.type('input[name=token]', 'not-the-platform-token-at-all-0000000');
  await tab.press('Enter');
  await tab.waitFor("document.querySelector('input[name=token]').getAttribute('aria-invalid') === 'true'", 'the refusal');
  assert.equal(await tab.evaluate("document.getElementById(document.querySelector('input[name=token]').getAttribute('aria-describedby').split(' ').at(-1)).textContent"),
    'This is not the platform token.');

  // The operator signs in from the keyboard; the token is in sessionStorage and never in the address.
  await tab.type('input[name=token]', server.adminToken);
  await tab.press('Enter');
  await tab.waitFor(onPage('apps'), 'the apps page');
  assert.equal(JSON.parse(await tab.evaluate("sessionStorage.getItem('gatehouse-console:credential')")).token, server.adminToken);
  assert.equal(await tab.evaluate('localStorage.length'), 0);
  assert.ok(!(await tab.evaluate('location.href')).includes(server.adminToken));

  // Creating an app: its name refused in place first (empty), then made.
  await tab.type('#app-create [name=name]', '   ');
  await tab.activate('#app-create button[type=submit]');
  await tab.waitFor("document.querySelector('#app-create [name=name]').getAttribute('aria-invalid') === 'true'", 'the name error');
  await tab.type('#app-create [name=name]', 'Console walk');
  await tab.type('#app-create [name=allowed_origins]', 'https://walk.example.com');
  await tab.activate('#app-create button[type=submit]');
  await tab.waitFor("document.getElementById('created-secret-key')", 'the new app');
  const secretKey = await tab.evaluate("document.getElementById('created-secret-key').textContent");
  const appKey = await tab.evaluate("document.getElementById('created-app-key').textContent");
  assert.match(secretKey, /^sk_/);
  const apps = (await server.admin('GET', '/v1/admin/apps')).data;
  const app = apps.find((a) => a.name === 'Console walk');
  assert.ok(app, 'the app exists');
  assert.equal(app.app_key, appKey);
  assert.deepEqual(app.allowed_origins, ['https://walk.example.com']);
  await tab.waitFor(`[...document.querySelectorAll('#apps-list td code')].some((c) => c.textContent === ${JSON.stringify(app.id)})`, 'the app listed');
  await checkpoint(tab, '02-operator-apps.png');

  // Disable, then enable: the server says so each time.
  await tab.activate(`#apps-list button[data-app="${app.id}"]`);
  await tab.waitFor(`document.querySelector('#apps-list button[data-app="${app.id}"]')?.textContent === 'Enable'`, 'disabled');
  assert.equal((await server.admin('GET', '/v1/admin/apps')).data.find((a) => a.id === app.id).disabled, true);
  await tab.activate(`#apps-list button[data-app="${app.id}"]`);
  await tab.waitFor(`document.querySelector('#apps-list button[data-app="${app.id}"]')?.textContent === 'Disable'`, 'enabled');
  assert.equal((await server.admin('GET', '/v1/admin/apps')).data.find((a) => a.id === app.id).disabled, false);

  await tab.evaluate("location.hash = '#/health'");
  await tab.waitFor("document.getElementById('health-status')", 'the health page');
  assert.equal(await tab.evaluate("document.querySelectorAll('#health-status .badge.good').length"), 3);
  await checkpoint(tab, '03-operator-health.png');

  await tab.activate('#sign-out');
  await tab.waitFor("document.querySelector('input[name=token]')", 'signed out');
  assert.equal(await tab.evaluate("sessionStorage.getItem('gatehouse-console:credential')"), null);

  // The app's admin signs in with the secret key.
  await tab.type('input[name=token]', secretKey);
  await tab.press('Enter');
  await tab.waitFor(onPage('settings'), 'the settings page');
  await checkpoint(tab, '04-settings.png');

  // Every settings form saved as loaded changes nothing: the forms carry each value back as it was.
  const unchanged = (await server.admin('GET', '/v1/admin/app', undefined, secretKey)).data;
  const formIDs = await tab.evaluate("[...document.querySelectorAll('main form')].map((f) => f.id)");
  assert.deepEqual(formIDs, ['settings-general', 'settings-accounts', 'settings-apple', 'settings-google', 'settings-email', 'email-test',
    'settings-mfa', 'settings-passkeys', 'settings-limits', 'settings-files', 'settings-webhooks', 'webhook-test', 'settings-advanced']);
  for (const id of formIDs.filter((f) => f.startsWith('settings-'))) {
    await tab.evaluate("document.getElementById('status').textContent = ''");
    await tab.activate(`#${id} button[type=submit]`);
    await tab.waitFor(`document.getElementById('status').textContent.endsWith('saved.') || document.querySelector('#${id} .alert')?.textContent`, `${id} saved`);
    assert.equal(await tab.evaluate(`document.querySelector('#${id} .alert').textContent`), '', `${id}: no error`);
  }
  const { updated_at: _before, ...was } = unchanged;
  const { updated_at: _after, ...is } = (await server.admin('GET', '/v1/admin/app', undefined, secretKey)).data;
  assert.deepEqual(is, was);

  // Accounts: a grace period out of range refused in place; then saved, with separate accounts on an email collision.
  await tab.type('#settings-accounts [name=deletion_grace_days]', '400');
  await tab.activate('#settings-accounts button[type=submit]');
  await tab.waitFor("document.querySelector('#settings-accounts [name=deletion_grace_days]').getAttribute('aria-invalid') === 'true'", 'the grace error');
  await tab.type('#settings-accounts [name=deletion_grace_days]', '7');
  await tab.evaluate("document.querySelector('#settings-accounts [name=email_collision]').value = 'separate'");
  await tab.activate('#settings-accounts button[type=submit]');
  await tab.waitFor(announced('Account settings saved.'), 'accounts saved');
  let saved = (await server.admin('GET', '/v1/admin/app', undefined, secretKey)).data;
  assert.equal(saved.deletion_grace_days, 7);
  assert.equal(saved.email_collision, 'separate');

  // Files: no GIF for public files.
  await tab.check('#settings-files [name="public_image/gif"]', false);
  await tab.activate('#settings-files button[type=submit]');
  await tab.waitFor(announced('File settings saved.'), 'files saved');
  saved = (await server.admin('GET', '/v1/admin/app', undefined, secretKey)).data;
  assert.deepEqual(saved.files.public_types, ['image/jpeg', 'image/png', 'image/webp']);

  // Apple: a wrong team id is refused by the server and shown beside its field; nothing is saved.
  const p8 = makeP8(scratch);
  await tab.type('#settings-apple [name=apple_team_id]', 'abc');
  await tab.type('#settings-apple [name=apple_key_id]', 'ABCDE12345');
  await tab.chooseFile('#settings-apple [name=apple_private_key]', p8);
  await tab.type('#settings-apple [name=apple_services_id]', 'com.example.walk.web');
  await tab.type('#settings-apple [name=apple_client_ids]', 'com.example.walk\ncom.example.walk.web');
  await tab.type('#settings-apple [name=redirect_uris]', 'https://walk.example.com/auth/callback');
  await tab.activate('#settings-apple button[type=submit]');
  await tab.waitFor("document.querySelector('#settings-apple [name=apple_team_id]').getAttribute('aria-invalid') === 'true'", 'the team id error');
  const teamError = await tab.evaluate("document.getElementById(document.querySelector('#settings-apple [name=apple_team_id]').getAttribute('aria-describedby').split(' ').at(-1)).textContent");
  assert.match(teamError, /10/);
  assert.equal(await tab.evaluate("document.activeElement.name"), 'apple_team_id', 'the focus is on the first bad field');
  assert.equal((await server.admin('GET', '/v1/admin/app', undefined, secretKey)).data.apple.team_id, null);
  await checkpoint(tab, '05-settings-apple-error.png');

  await tab.type('#settings-apple [name=apple_team_id]', 'ABCDE12345');
  await tab.activate('#settings-apple button[type=submit]');
  await tab.waitFor(announced('Apple settings saved.'), 'Apple saved');
  let settings = (await server.admin('GET', '/v1/admin/app', undefined, secretKey)).data;
  assert.equal(settings.apple.team_id, 'ABCDE12345');
  assert.equal(settings.apple.key_id, 'ABCDE12345');
  assert.deepEqual(settings.apple.private_key, { set: true }, 'the .p8 read in the browser was stored');
  assert.equal(settings.apple.services_id, 'com.example.walk.web');
  assert.deepEqual(settings.apple.client_ids, ['com.example.walk', 'com.example.walk.web']);
  assert.deepEqual(settings.redirect_uris, ['https://walk.example.com/auth/callback']);

  // Google.
  await tab.type('#settings-google [name=google_client_ids]', '1234-walk.apps.googleusercontent.com');
  await tab.type('#settings-google [name=firebase_project_id]', 'walk-project');
  await tab.activate('#settings-google button[type=submit]');
  await tab.waitFor(announced('Google settings saved.'), 'Google saved');
  settings = (await server.admin('GET', '/v1/admin/app', undefined, secretKey)).data;
  assert.deepEqual(settings.google.client_ids, ['1234-walk.apps.googleusercontent.com']);
  assert.equal(settings.firebase.project_id, 'walk-project');

  // No SMTP server of the app's own yet: a test is refused by the server, in place.
  await tab.type('#email-test [name=email_test_to]', 'walk.admin@example.com');
  await tab.activate('#email-test button[type=submit]');
  await tab.waitFor("document.querySelector('#email-test .alert').textContent", 'the test refused');
  assert.match(await tab.evaluate("document.querySelector('#email-test .alert').textContent"), /smtp_url|SMTP/);

  // SMTP: an http URL is refused in place; then the sink, with a user name and password.
  await tab.type('#settings-email [name=smtp_url]', 'http://mail.example.com');
  await tab.activate('#settings-email button[type=submit]');
  await tab.waitFor("document.querySelector('#settings-email [name=smtp_url]').getAttribute('aria-invalid') === 'true'", 'the SMTP URL error');
  await tab.type('#settings-email [name=smtp_url]', sink.url);
  await tab.type('#settings-email [name=smtp_username]', 'walk');
  await tab.type('#settings-email [name=smtp_password]', 'sink-password-1');
  await tab.type('#settings-email [name=email_from]', 'Console Walk <walk@example.com>');
  await tab.activate('#settings-email button[type=submit]');
  await tab.waitFor(announced('Email settings saved.'), 'SMTP saved');
  settings = (await server.admin('GET', '/v1/admin/app', undefined, secretKey)).data;
  assert.equal(settings.email.smtp_url, sink.url);
  assert.equal(settings.email.smtp_username, 'walk');
  assert.deepEqual(settings.email.smtp_password, { set: true });
  assert.equal(settings.email.from, 'Console Walk <walk@example.com>');

  // A test message through the sink: a bad address refused in place, then sent and received.
  await tab.type('#email-test [name=email_test_to]', 'not an address');
  await tab.activate('#email-test button[type=submit]');
  await tab.waitFor("document.querySelector('#email-test [name=email_test_to]').getAttribute('aria-invalid') === 'true'", 'the address error');
  await tab.type('#email-test [name=email_test_to]', 'walk.admin@example.com');
  await tab.activate('#email-test button[type=submit]');
  await tab.waitFor("document.getElementById('email-test-result').className === 'good'", 'the test sent');
  assert.equal(await tab.evaluate("document.getElementById('email-test-result').textContent"), 'Sent: the SMTP server took the test message.');
  assert.ok(sink.envelopes().some((e) => e.rcpt_tos.includes('walk.admin@example.com') && e.mail_from === 'walk@example.com'), 'the sink has the test message');
  // The sink refuses every recipient: the reason is shown in place, and nothing secret.
  sink.mode('refuse-permanently');
  await tab.activate('#email-test button[type=submit]');
  await tab.waitFor("document.getElementById('email-test-result').className === 'bad'", 'the test refused by the server');
  const refusal = await tab.evaluate("document.getElementById('email-test-result').textContent");
  assert.match(refusal, /^Not sent \(recipient\): /);
  assert.ok(!refusal.includes('sink-password-1'), 'no password in the answer');
  sink.mode('accept');
  await checkpoint(tab, '06a-settings-email-test.png', '#settings-email');
  // Limits: out of range refused in place, then saved.
  await tab.type('#settings-limits [name=limit_auth_per_minute_per_ip]', '0');
  await tab.activate('#settings-limits button[type=submit]');
  await tab.waitFor("document.querySelector('#settings-limits [name=limit_auth_per_minute_per_ip]').getAttribute('aria-invalid') === 'true'", 'the limit error');
  await tab.type('#settings-limits [name=limit_auth_per_minute_per_ip]', '100');
  await tab.activate('#settings-limits button[type=submit]');
  await tab.waitFor(announced('Limits saved.'), 'limits saved');
  assert.equal((await server.admin('GET', '/v1/admin/app', undefined, secretKey)).data.rate_limits.auth_per_minute_per_ip, 100);

  // A webhook: a bad URL refused in place, then the receiver with user.banned; its secret is made in the browser and shown once.
  await tab.activate('#webhook-add');
  await tab.type('#settings-webhooks [name=webhook_url_0]', 'not a url');
  await tab.activate('#settings-webhooks button[type=submit]');
  await tab.waitFor("document.querySelector('#settings-webhooks [name=webhook_url_0]').getAttribute('aria-invalid') === 'true'", 'the webhook URL error');
  const hookURL = `http://127.0.0.1:${receiver.address().port}/hook`;
  await tab.type('#settings-webhooks [name=webhook_url_0]', hookURL);
  await tab.check('#settings-webhooks [name="webhook_0_user.banned"]');
  await tab.activate('#settings-webhooks button[type=submit]');
  await tab.waitFor("document.querySelector('#webhook-secrets .secret')", 'the webhook secret');
  const hookSecret = await tab.evaluate("document.querySelector('#webhook-secrets .secret').textContent");
  assert.match(hookSecret, /^whsec_[A-Za-z0-9+/]{43}=$/);
  settings = (await server.admin('GET', '/v1/admin/app', undefined, secretKey)).data;
  assert.deepEqual(settings.webhooks.map((h) => [h.url, [...h.events].sort(), h.secret]), [[hookURL, ['user.banned', 'user.created', 'user.deleted'], { set: true }]]);
  await checkpoint(tab, '06-settings-saved.png');

  // A test delivery to the receiver: signed with the secret shown once, listed as delivered with the receiver's 204.
  await tab.evaluate(`document.querySelector('#webhook-test [name=webhook_test_url]').value = ${JSON.stringify(hookURL)}`);
  await tab.activate('#webhook-test button[type=submit]');
  await tab.waitFor(announced('Test delivery queued (1).'), 'the test queued');
  for (let i = 0; i < 100 && !deliveries.some((d) => JSON.parse(d.body).type === 'webhook.test'); i++) await new Promise((r) => setTimeout(r, 100));
  const testDelivery = deliveries.find((d) => JSON.parse(d.body).type === 'webhook.test');
  assert.ok(testDelivery, 'the receiver got the test delivery');
  assert.ok(signedWith(testDelivery, hookSecret), 'signed with the webhook secret');
  assert.ok(!signedWith(testDelivery, `whsec_${Buffer.alloc(32, 7).toString('base64')}`), 'the check can fail');
  assert.equal(JSON.parse(testDelivery.body).app_id, app.id);
  let listed;
  for (let i = 0; i < 50; i++) {
    await tab.activate('#webhook-deliveries-refresh');
    await new Promise((r) => setTimeout(r, 100));
    listed = await tab.evaluate("[...document.querySelectorAll('#webhook-deliveries tbody tr')].map((tr) => [...tr.children].map((td) => td.textContent))");
    if (listed.some((row) => row[1] === 'webhook.test' && row[3] === 'delivered')) break;
  }
  const row = listed.find((r) => r[1] === 'webhook.test');
  assert.ok(row, `the test delivery listed: ${JSON.stringify(listed)}`);
  assert.deepEqual([row[2], row[3], row[4], row[5]], [hookURL, 'delivered', '1', '204']);
  const api = (await server.admin('GET', '/v1/admin/webhooks/deliveries?event_type=webhook.test', undefined, secretKey)).data;
  assert.deepEqual(api.map((d) => [d.url, d.state, d.last_status]), [[hookURL, 'delivered', 204]]);
  assert.ok(!JSON.stringify(api).includes(hookSecret.slice('whsec_'.length)), 'no secret in the list');
  await checkpoint(tab, '06b-settings-webhook-deliveries.png', '#settings-webhooks');

  // A user made through the public API, with a session.
  const email = 'ada.walk@example.com';
  const password = 'correct horse battery staple';
  const signedUp = await publicCall(appKey, '/v1/auth/signup', { email, password, first_name: 'Ada', last_name: 'Walk' });
  assert.equal(signedUp.status, 201, JSON.stringify(signedUp.body));
  const userID = signedUp.body.data.user.id;

  await tab.evaluate("location.hash = '#/users'");
  await tab.waitFor(onPage('users'), 'the users page');
  await tab.type('#user-search [name=query]', 'ada.walk');
  await tab.press('Enter');
  await tab.waitFor(`[...document.querySelectorAll('#user-results a')].some((a) => a.textContent === ${JSON.stringify(email)})`, 'the user found');
  assert.equal(await tab.evaluate("document.querySelectorAll('#user-results tbody tr').length"), 1);
  await checkpoint(tab, '07-users.png');
  await tab.activate('#user-results a');
  await tab.waitFor(onPage('users/detail'), 'the user page');
  assert.equal(await tab.evaluate('location.hash'), `#/users/${userID}`);
  await tab.waitFor("[...document.querySelectorAll('main td code')].some((c) => c.textContent === 'user.signed_up')", 'the user\'s events');
  assert.deepEqual(await tab.evaluate("[...document.querySelectorAll('#user-identities li')].map((li) => li.textContent)"), ['password']);
  // Their open session (the one the sign-up opened), from GET /v1/admin/users/{id}/sessions.
  const sessionMethods = "[...[...document.querySelectorAll('main table')].find((t) => t.caption?.textContent === 'The user’s signed-in devices')?.querySelectorAll('td code') ?? []].map((c) => c.textContent)";
  assert.deepEqual(await tab.evaluate(sessionMethods), ['password']);
  // The confirmation of a deletion is not on screen until asked for.
  assert.equal(await tab.evaluate("document.getElementById('delete-confirm').getClientRects().length"), 0);
  await checkpoint(tab, '08-user.png');

  // Custom data: JSON that does not parse is refused in place; then saved.
  await tab.type('#user-custom-data [name=app_metadata]', '{"plan": ');
  await tab.activate('#user-custom-data button[type=submit]');
  await tab.waitFor("document.querySelector('#user-custom-data [name=app_metadata]').getAttribute('aria-invalid') === 'true'", 'the JSON error');
  await tab.type('#user-custom-data [name=app_metadata]', '{"plan": "pro"}');
  await tab.activate('#user-custom-data button[type=submit]');
  await tab.waitFor(announced('The custom data is saved.'), 'custom data saved');
  assert.deepEqual((await server.admin('GET', `/v1/admin/users/${userID}`, undefined, secretKey)).data.app_metadata, { plan: 'pro' });

  // Ban: sign-ins are refused; lift: they work again.
  await tab.type('#user-ban [name=sanction_code]', 'spam');
  await tab.type('#user-ban [name=reason]', 'Posted spam (console walk)');
  await tab.activate('#user-ban button[type=submit]');
  await tab.waitFor("document.getElementById('lift-ban')", 'banned');
  let signIn = await publicCall(appKey, '/v1/auth/signin', { email, password });
  assert.equal(signIn.status, 403);
  assert.equal(signIn.body.code, 'auth/user-disabled');
  assert.equal(signIn.body.sanction_code, 'spam');
  await checkpoint(tab, '09-user-banned.png');
  for (let i = 0; i < 100 && !deliveries.some((d) => JSON.parse(d.body).type === 'user.banned'); i++) await new Promise((r) => setTimeout(r, 100));
  const banned = deliveries.find((d) => JSON.parse(d.body).type === 'user.banned');
  assert.ok(banned && signedWith(banned, hookSecret) && JSON.parse(banned.body).data.user.id === userID, 'the receiver got user.banned, signed');
  await tab.activate('#lift-ban');
  await tab.waitFor("document.querySelector('#user-ban [name=sanction_code]')", 'the ban lifted');
  signIn = await publicCall(appKey, '/v1/auth/signin', { email, password });
  assert.equal(signIn.status, 200, JSON.stringify(signIn.body));
  const refreshToken = signIn.body.data.refresh_token;
  assert.equal((await publicCall(appKey, '/v1/auth/refresh', { refresh_token: refreshToken })).status, 200);
  const fresh = (await publicCall(appKey, '/v1/auth/signin', { email, password })).body.data.refresh_token;

  // Sign out everywhere: the session's refresh token is refused.
  await tab.activate('#sign-out-everywhere');
  await tab.waitFor(announced('Every session of the user has ended.'), 'signed out everywhere');
  assert.equal((await publicCall(appKey, '/v1/auth/refresh', { refresh_token: fresh })).status, 401);

  // Delete, confirmed in a second step.
  await tab.activate('#delete-user');
  await tab.waitFor("!document.getElementById('delete-confirm').closest('[hidden]') && document.activeElement.id === 'delete-confirm'", 'the confirmation');
  await tab.press('Enter');
  await tab.waitFor(onPage('users'), 'back to the users');
  const gone = await fetch(`${server.url}/v1/admin/users/${userID}`, { headers: { Authorization: `Bearer ${secretKey}` } });
  assert.equal(gone.status, 404);

  // Import: an NDJSON file of three lines, one of them wrong; then the export, saved by the browser.
  const ndjson = path.join(scratch, 'users.ndjson');
  fs.writeFileSync(ndjson, [
    JSON.stringify({ email: 'imported.one@example.com', email_verified: true, first_name: 'Imported' }),
    JSON.stringify({ email: 'not an address' }),
    JSON.stringify({ email: 'imported.two@example.com' }),
  ].join('\n') + '\n');
  await tab.chooseFile('#user-import [name=import_file]', ndjson);
  await tab.activate('#user-import button[type=submit]');
  await tab.waitFor("document.querySelector('#import-report .notice')", 'the import report');
  assert.equal(await tab.evaluate("document.querySelector('#import-report .notice').textContent"), 'Imported 2, skipped 0, failed 1.');
  assert.equal(await tab.evaluate("document.querySelector('#import-report td').textContent"), '2', 'the failed line is named');
  assert.equal((await server.admin('GET', '/v1/admin/users?query=imported.', undefined, secretKey)).data.length, 2);
  const downloads = path.join(scratch, 'downloads');
  fs.mkdirSync(downloads);
  await browser.send('Browser.setDownloadBehavior', { behavior: 'allow', downloadPath: downloads });
  await tab.activate('#user-export button');
  await tab.waitFor(announced('The export is saved as users.ndjson.'), 'the export');
  for (let i = 0; i < 100 && !fs.existsSync(path.join(downloads, 'users.ndjson')); i++) await new Promise((r) => setTimeout(r, 100));
  const exported = fs.readFileSync(path.join(downloads, 'users.ndjson'), 'utf8').trim().split('\n').map((line) => JSON.parse(line).email).sort();
  assert.deepEqual(exported, ['imported.one@example.com', 'imported.two@example.com'], 'the deleted user is not exported');

  // The audit log shows what was done, and filters by type.
  await tab.evaluate("location.hash = '#/audit'");
  await tab.waitFor(onPage('audit'), 'the audit log');
  const types = await tab.evaluate("[...document.querySelectorAll('#audit-results td:nth-child(2) code')].map((c) => c.textContent)");
  for (const type of ['user.signed_up', 'user.banned', 'user.unbanned', 'session.revoked', 'user.deleted']) assert.ok(types.includes(type), `${type} in ${types}`);
  await checkpoint(tab, '10-audit-log.png');
  await tab.type('#audit-filter [name=type]', 'user.banned');
  await tab.press('Enter');
  await tab.waitFor("[...document.querySelectorAll('#audit-results td:nth-child(2) code')].every((c) => c.textContent === 'user.banned')", 'the filtered log');
  assert.equal(await tab.evaluate("document.querySelectorAll('#audit-results tbody tr').length"), 1);

  // A dead mail (the app's SMTP server refuses the address), queued again from the console once it accepts.
  const other = 'grace.walk@example.com';
  assert.equal((await publicCall(appKey, '/v1/auth/signup', { email: other, password })).status, 201);
  sink.mode('refuse-permanently');
  assert.equal((await publicCall(appKey, '/v1/auth/password-reset/send', { email: other })).status, 202);
  let dead;
  for (let i = 0; i < 100 && !dead; i++) {
    dead = (await server.admin('GET', '/v1/admin/outbox?state=dead', undefined, secretKey)).data[0];
    if (!dead) await new Promise((r) => setTimeout(r, 100));
  }
  assert.ok(dead, 'the mail died');
  sink.mode('accept');
  await tab.evaluate("location.hash = '#/outbox'");
  await tab.waitFor(`document.querySelector('#outbox-results button[data-item="${dead.id}"]')`, 'the dead item');
  await checkpoint(tab, '11-outbox.png');
  await tab.activate(`#outbox-results button[data-item="${dead.id}"]`);
  await tab.waitFor(announced('Queued again.'), 'the retry');
  for (let i = 0; i < 100 && !sink.envelopes().some((e) => e.rcpt_tos.includes(other)); i++) await new Promise((r) => setTimeout(r, 100));
  assert.ok(sink.envelopes().some((e) => e.rcpt_tos.includes(other) && e.mail_from === 'walk@example.com'), 'the retried mail was delivered by the app\'s SMTP server');

  // Keys: a new secret key, which the console then uses.
  await tab.evaluate("location.hash = '#/keys'");
  await tab.waitFor(onPage('keys'), 'the keys page');
  await tab.activate('#main form button[type=submit]');
  await tab.waitFor("document.querySelector('#keys-output .secret')", 'the new secret key');
  const newKey = await tab.evaluate("document.querySelector('#keys-output .secret').textContent");
  assert.notEqual(newKey, secretKey);
  assert.equal((await server.admin('GET', '/v1/admin/app', undefined, newKey)).data.id, app.id);
  assert.equal(JSON.parse(await tab.evaluate("sessionStorage.getItem('gatehouse-console:credential')")).token, newKey);
  await checkpoint(tab, '12-keys.png');

  // Nothing went wrong in the page.
  assert.deepEqual(tab.page.console.filter((line) => line.startsWith('exception')), []);
  assert.deepEqual(tab.page.log.filter((entry) => entry.level === 'error' && entry.source !== 'network'), []);
});

test('the CSP holds: a script element put into the console does not run, and the browser reports it', async () => {
  // Without the console's policy (about:blank), the same injection runs: the check can fail.
  const control = await browser.newPage('about:blank');
  assert.equal(await control.evaluate("(() => { const s = document.createElement('script'); s.textContent = 'window.injected = 1'; document.body.append(s); return window.injected === 1; })()"), true);

  const tab = await Driver.open(browser, `${server.url}/console/`);
  await tab.waitFor("document.querySelector('input[name=token]')", 'the console');
  const outcome = await tab.evaluate(`new Promise((resolve) => {
    const seen = [];
    document.addEventListener('securitypolicyviolation', (e) => seen.push(e.effectiveDirective));
    const script = document.createElement('script');
    script.textContent = 'window.injected = 1';
    document.body.append(script);
    const styled = document.createElement('div');
    styled.setAttribute('style', 'display: none');
    document.body.append(styled);
    const handler = document.createElement('img');
    handler.setAttribute('onerror', 'window.injected = 2');
    handler.src = 'data:,broken';
    document.body.append(handler);
    setTimeout(() => resolve({ ran: window.injected ?? null, seen, hidden: getComputedStyle(styled).display === 'none' }), 500);
  })`);
  assert.equal(outcome.ran, null, 'no injected script ran');
  assert.ok(outcome.seen.includes('script-src-elem'), `a script-src-elem violation: ${outcome.seen}`);
  assert.ok(outcome.seen.includes('style-src-attr'), `a style-src-attr violation: ${outcome.seen}`);
  assert.equal(outcome.hidden, false, 'the inline style was not applied');
  await tab.waitFor("true");
  const reported = tab.page.log.filter((entry) => entry.level === 'error' && /Content Security Policy/.test(entry.text));
  assert.ok(reported.length >= 2, `the browser's console reports the violations: ${JSON.stringify(tab.page.log)}`);
});

after(() => {
  if (shots.length) console.log(`console screenshots in ${artifacts}: ${shots.join(', ')}`);
});
