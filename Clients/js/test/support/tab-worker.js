// One "tab" of test/refresh.test.js: a Gatehouse client on the shared storage folder.
import { parentPort, workerData } from 'node:worker_threads';
import { webcrypto } from 'node:crypto';
import { FileStorage } from './env.js';

if (!globalThis.crypto) globalThis.crypto = webcrypto;
const { Gatehouse } = await import('../../gatehouse.js');

const { url, appKey, dir, calls, lock } = workerData;
// The race of calls is the subject: no background refresh gets there first.
const web = new Gatehouse({ url, appKey, storage: new FileStorage(dir), lock, autoRefresh: false });
parentPort.postMessage('ready');
parentPort.once('message', async () => {
  try {
    const users = await Promise.all(Array.from({ length: calls }, () => web.getUser()));
    parentPort.postMessage({ ids: users.map((u) => u.id) });
  } catch (error) {
    parentPort.postMessage({ ids: [], error: `${error.code ?? ''} ${error.message}` });
  } finally {
    web.close();
  }
});
