// The Files API of gatehouse-js against the real server: upload (multipart, private and public),
// list (pages), metadata, content (whole and a range), delete; a user sees only their own.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Gatehouse, GatehouseError, MemoryStorage } from '../gatehouse.js';
import { startEnvironment } from './support/env.js';

let env;
let app;
let counter = 0;
const unique = (name) => `${name}.${process.pid}.${++counter}@example.com`;
const PASSWORD = 'correct horse battery';
const PNG = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==', 'base64');

async function signedIn() {
  const web = new Gatehouse({ url: env.server.url, appKey: app.appKey, storage: new MemoryStorage(), lock: 'local' });
  await web.signUp({ email: unique('files'), password: PASSWORD });
  return web;
}

async function code(promise) {
  const error = await promise.then(() => null, (e) => e);
  assert.ok(error instanceof GatehouseError, `expected a GatehouseError, got ${error}`);
  return error.code;
}

before(async () => {
  env = await startEnvironment();
  app = await env.createApp();
});
after(async () => { await env?.stop(); });

test('upload, list, get, content, range and delete', async () => {
  const web = await signedIn();
  const text = 'hello, files\n'.repeat(10);
  const notes = await web.uploadFile(new Blob([text], { type: 'text/plain' }), { filename: '../notes.txt' });
  assert.match(notes.id, /^fil_/);
  assert.equal(notes.name, 'notes.txt', 'only the last path component');
  assert.equal(notes.contentType, 'application/octet-stream', 'the type comes from the bytes');
  assert.equal(notes.size, text.length);
  assert.equal(notes.visibility, 'private');
  assert.equal(notes.url ?? null, null);

  const photo = await web.uploadFile(new File([PNG], 'dot.png', { type: 'image/png' }), { visibility: 'public' });
  assert.equal(photo.name, 'dot.png', "a File's own name");
  assert.equal(photo.contentType, 'image/png');
  assert.equal(photo.visibility, 'public');
  const served = await fetch(photo.url);
  assert.equal(served.status, 200);
  assert.deepEqual(Buffer.from(await served.arrayBuffer()), PNG, 'public: byte for byte, no key');

  assert.equal(await code(web.uploadFile(new Blob(['not an image']), { visibility: 'public' })), 'files/unsupported-type');
  await assert.rejects(web.uploadFile('not a blob'), TypeError);

  const first = await web.listFiles({ limit: 1 });
  assert.deepEqual(first.files.map((f) => f.id), [photo.id], 'newest first');
  assert.ok(first.nextCursor);
  const second = await web.listFiles({ limit: 1, cursor: first.nextCursor });
  assert.deepEqual(second.files.map((f) => f.id), [notes.id]);
  const all = await web.listFiles();
  assert.deepEqual(all.files.map((f) => f.id), [photo.id, notes.id]);
  assert.equal(all.nextCursor, null);

  assert.deepEqual(await web.getFile(notes.id), notes);
  const content = await web.getFileContent(notes.id);
  assert.equal(await content.text(), text);
  assert.equal(content.type, 'application/octet-stream');
  const part = await web.getFileContent(notes.id, { range: { start: 0, end: 4 } });
  assert.equal(await part.text(), 'hello');
  const image = await web.getFileContent(photo.id);
  assert.equal(image.type, 'image/png');
  assert.deepEqual(Buffer.from(await image.arrayBuffer()), PNG);

  await web.deleteFile(notes.id);
  assert.equal(await code(web.getFile(notes.id)), 'request/not-found');
  assert.deepEqual((await web.listFiles()).files.map((f) => f.id), [photo.id]);
  web.close();
});

test("another user's file is not found; signed out is client/signed-out", async () => {
  const owner = await signedIn();
  const other = await signedIn();
  const file = await owner.uploadFile(new Blob(['mine']));
  assert.equal(await code(other.getFile(file.id)), 'request/not-found');
  assert.equal(await code(other.getFileContent(file.id)), 'request/not-found');
  assert.equal(await code(other.deleteFile(file.id)), 'request/not-found');
  assert.equal(await (await owner.getFileContent(file.id)).text(), 'mine');
  await owner.signOut();
  assert.equal(await code(owner.listFiles()), 'client/signed-out');
  owner.close(); other.close();
});
