// The package installs as an app team installs it: `npm pack` makes the tarball, `npm install
// <tarball>` puts it in a scratch project (offline: it has no dependencies), and the project
// imports it by name — in Node, and in TypeScript (--strict, node16 resolution) through the
// package's "exports" and "types". What the tarball holds is checked too: the files an app
// needs and nothing of the tests.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const packageDir = path.resolve(here, '..');

function run(command, args, cwd) {
  const result = spawnSync(command, args, { cwd, encoding: 'utf8', env: { ...process.env, npm_config_cache: path.join(cwd, '.npm-cache') } });
  if (result.error) throw new Error(`${command} could not run: ${result.error.message}`);
  return { status: result.status, output: result.stdout + result.stderr, stdout: result.stdout };
}

test('npm pack makes a tarball that installs into a scratch project and imports by name', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gatehouse-js-install-'));
  try {
    const packed = run('npm', ['pack', '--json', '--pack-destination', dir, packageDir], dir);
    assert.equal(packed.status, 0, packed.output);
    const [info] = JSON.parse(packed.stdout);
    const files = info.files.map((file) => file.path).sort();
    assert.deepEqual(files, ['README.md', 'gatehouse.d.ts', 'gatehouse.js', 'package.json']);

    const app = path.join(dir, 'app');
    fs.mkdirSync(app);
    fs.writeFileSync(path.join(app, 'package.json'), JSON.stringify({ name: 'scratch-app', version: '1.0.0', type: 'module', private: true }));
    const installed = run('npm', ['install', '--offline', '--no-audit', '--no-fund', path.join(dir, info.filename)], app);
    assert.equal(installed.status, 0, installed.output);
    assert.ok(fs.existsSync(path.join(app, 'node_modules', 'gatehouse-js', 'gatehouse.js')));

    // Node: the import by name resolves through "exports" and gives the client.
    fs.writeFileSync(path.join(app, 'main.mjs'), [
      "import { Gatehouse, GatehouseError } from 'gatehouse-js';",
      "const client = new Gatehouse({ url: 'https://auth.example.com', appKey: 'pk_example_0123456789' });",
      "console.log(typeof client.signIn, typeof GatehouseError);",
    ].join('\n'));
    const node = run(process.execPath, ['main.mjs'], app);
    assert.equal(node.status, 0, node.output);
    assert.equal(node.stdout.trim(), 'function function');

    // TypeScript: the same import, typed from the installed package's declarations; a wrong call fails.
    fs.writeFileSync(path.join(app, 'main.mts'), [
      "import { Gatehouse } from 'gatehouse-js';",
      "const client = new Gatehouse({ url: 'https://auth.example.com', appKey: 'pk_example_0123456789' });",
      "export const pending: Promise<unknown> = client.signIn({ email: 'ada@example.com', password: 'correct horse' });",
    ].join('\n'));
    fs.writeFileSync(path.join(app, 'wrong.mts'), [
      "import { Gatehouse } from 'gatehouse-js';",
      "const client = new Gatehouse({ url: 'https://auth.example.com', appKey: 'pk_example_0123456789' });",
      "export const pending = client.signIn({ email: 42 });",
    ].join('\n'));
    const tscArgs = (file) => ['--strict', '--noEmit', '--target', 'es2022', '--module', 'node16', '--moduleResolution', 'node16', '--lib', 'es2022,dom', file];
    const typed = run(process.env.TSC_BIN ?? 'tsc', tscArgs('main.mts'), app);
    assert.equal(typed.status, 0, typed.output);
    const wrong = run(process.env.TSC_BIN ?? 'tsc', tscArgs('wrong.mts'), app);
    assert.notEqual(wrong.status, 0, 'a call with a wrong type must not compile');
    assert.match(wrong.output, /wrong\.mts\(3,.*error TS2\d+/, wrong.output);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
