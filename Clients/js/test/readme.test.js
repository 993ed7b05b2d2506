// Runs the README's `js` blocks, in order, as one module against the real server. `askUser`,
// `appleJS` and `googleJS` (the app's UI and the providers' SDKs in the README) are played by the
// SMTP sink and the fake providers.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { startEnvironment, APPLE_SERVICES_ID, GOOGLE_CLIENT_ID } from './support/env.js';
import { localise, readmeBlocks } from './support/readme.js';

let env;
let app;
before(async () => {
  env = await startEnvironment();
  app = await env.createApp();
});
after(async () => { await env?.stop(); });

test('the README\'s snippets run against the server and do what they say', async () => {
  const blocks = readmeBlocks('js');
  assert.ok(blocks.length >= 8, `found ${blocks.length} js blocks`);
  const mailsSeen = new Map();
  globalThis.askUser = async (question) => {
    const address = { 'The code we mailed you?': 'grace@example.com', 'The code sent to your new address?': 'ada.lovelace@example.com' }[question];
    if (question === 'Your password, please') return 'correct horse battery';
    assert.ok(address, `the README asks something the test does not know: ${question}`);
    const code = await env.smtp.code(address, { after: mailsSeen.get(address) ?? 0 });
    mailsSeen.set(address, env.smtp.mails(address).length);
    return code;
  };
  const appleUser = { sub: '001111.readme.0001', email: 'readme.apple@example.com' };
  globalThis.appleJS = {
    async signIn({ nonce }) {
      return {
        authorization: {
          id_token: env.apple.identityToken({ sub: appleUser.sub, aud: APPLE_SERVICES_ID, nonce, email: appleUser.email }),
          code: env.apple.issueCode(appleUser, APPLE_SERVICES_ID, nonce),
        },
        user: { name: { firstName: 'Grace', lastName: 'Hopper' } },
      };
    },
  };
  globalThis.googleJS = { async signIn({ nonce }) { return env.google.idToken({ sub: 'readme-google', aud: GOOGLE_CLIENT_ID, nonce }); } };

  const moduleURL = pathToFileURL(path.resolve('gatehouse.js')).href;
  const source = blocks.map((b) => localise(b, { url: env.server.url, appKey: app.appKey, moduleURL })).join('\n');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gatehouse-js-readme-'));
  const file = path.join(dir, 'readme.mjs');
  fs.writeFileSync(file, source);
  const logged = [];
  const log = console.log;
  console.log = (...args) => logged.push(args.join(' '));
  const tokenCallsBefore = env.apple.tokenCalls.length;
  try {
    await import(pathToFileURL(file).href);
  } finally {
    console.log = log;
    fs.rmSync(dir, { recursive: true, force: true });
  }
  assert.deepEqual(logged, [
    'Ada signed up: true',
    'welcome',
    'readme-google@gmail.example.com google',
    'Wrong email or password',
    // currentUser at once (synchronous); the listener's initialSession, then the sign-out and its reason.
    'ada.lovelace@example.com',
    'initialSession ada.lovelace@example.com',
    'signed out: signedOut',
  ]);
  // The snippet leaves Apple JS's authorization code out (the README says why): nothing redeemed at Apple.
  assert.equal(env.apple.tokenCalls.length, tokenCallsBefore, 'no Apple authorization code was sent');
  assert.deepEqual(env.apple.errors, []);
  // The email change went through: the Google user now has the new, verified address.
  const users = await env.server.admin('GET', '/v1/admin/users?query=ada.lovelace', null, app.secretKey);
  assert.equal(users.data.length, 1);
  assert.equal(users.data[0].email_verified, true);
});
