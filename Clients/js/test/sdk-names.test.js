// The two SDKs name the same calls the same way: Clients/sdk-names.json lists each operation's JS
// and Swift names (and, for some, parameters in order); this checks both SDKs' declarations
// against it, so neither can drift alone.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const clients = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const table = JSON.parse(fs.readFileSync(path.join(clients, 'sdk-names.json'), 'utf8'));
const dts = fs.readFileSync(path.join(clients, 'js/gatehouse.d.ts'), 'utf8');
const kit = path.join(clients, 'swift/Sources/GatehouseKit');
const swift = fs.readdirSync(kit).filter((f) => f.endsWith('.swift')).map((f) => fs.readFileSync(path.join(kit, f), 'utf8')).join('\n');
const gatehouseClass = dts.slice(dts.indexOf('export declare class Gatehouse {'));

/** The parameters' names of the declaration whose "(" is at `open` in `text`, in order. */
function parameters(text, open) {
  let depth = 0;
  let current = '';
  const parts = [];
  for (let i = open + 1; i < text.length; i++) {
    const c = text[i];
    if (depth === 0 && c === ')') { parts.push(current); break; }
    if ('([{<'.includes(c)) depth++;
    if (')]}>'.includes(c) && !(c === '>' && '-='.includes(text[i - 1]))) depth--;
    if (depth === 0 && c === ',') { parts.push(current); current = ''; } else current += c;
  }
  return parts.map((p) => p.trim()).filter(Boolean).map((p) => {
    const head = p.slice(0, p.indexOf(':')).trim().split(/\s+/);
    return head.at(-1).replace(/\?$/, '');
  });
}

/** JS: a method or property of `class Gatehouse` in gatehouse.d.ts; its "(" when a method. */
function jsDeclaration(name) {
  const method = new RegExp(`\\n  ${name}(<[^>]*>)?\\(`).exec(gatehouseClass);
  if (method) return { open: method.index + method[0].length - 1, text: gatehouseClass };
  if (new RegExp(`\\n  readonly ${name}:`).test(gatehouseClass)) return { open: -1 };
  return null;
}

/** Swift: a public func (or var) not marked deprecated on the line before. */
function swiftDeclarations(name) {
  const found = [];
  const pattern = new RegExp(`public (func ${name}(<[^>]*>)?\\(|var ${name}:)`, 'g');
  for (const match of swift.matchAll(pattern)) {
    const before = swift.slice(0, match.index).split('\n').slice(-2).join('\n');
    if (before.includes('deprecated')) continue;
    found.push({ open: match[0].endsWith('(') ? match.index + match[0].length - 1 : -1 });
  }
  return found;
}

const normal = (name) => name.replace(/MFA|TOTP/g, (m) => m[0] + m.slice(1).toLowerCase());

test('each operation of Clients/sdk-names.json has its JS and Swift name, the same unless the table says why', () => {
  assert.ok(table.operations.length >= 30);
  for (const { operation, js, swift: swiftName, why, params } of table.operations) {
    const jsDecl = jsDeclaration(js);
    assert.ok(jsDecl, `${operation}: gatehouse.d.ts declares no ${js}`);
    const swiftDecls = swiftDeclarations(swiftName);
    assert.ok(swiftDecls.length > 0, `${operation}: GatehouseKit has no public, not deprecated ${swiftName}`);
    if (!why) assert.equal(normal(js), normal(swiftName), `${operation}: ${js} in JS but ${swiftName} in Swift`);
    if (params) {
      assert.deepEqual(parameters(gatehouseClass, jsDecl.open), params.js, `${operation}: JS ${js}'s parameters`);
      const lists = swiftDecls.map((d) => parameters(swift, d.open));
      assert.ok(lists.some((list) => JSON.stringify(list) === JSON.stringify(params.swift)), `${operation}: Swift ${swiftName}'s parameters are ${JSON.stringify(lists)}`);
    }
  }
});

test('the names the SDKs once differed in are kept in Swift as deprecated aliases of the shared ones', () => {
  for (const [old, renamed] of [['me()', 'getUser()'], ['sessions()', 'getSessions()'], ['revokeSession(id:)', 'endSession(id:)']]) {
    assert.ok(swift.includes(`@available(*, deprecated, renamed: "${renamed}")\n    public func ${old.replace(/\(.*/, '')}(`), `${old} → ${renamed}`);
  }
  assert.match(swift, /@available\(\*, deprecated, renamed: "updateUser\([^"]*\)"\)\n {4}public func updateProfile\(/);
  assert.match(swift, /@available\(\*, deprecated[^\n]*\n {4}public func withRecentLogin<T: Sendable>\(\n {8}reauthenticate:/);
});

test('the table catches a drift: a renamed call or swapped parameters fail', () => {
  assert.equal(jsDeclaration('notACall'), null);
  assert.deepEqual(swiftDeclarations('me'), [], 'me() is deprecated: not a current name');
  const swapped = 'public func withRecentLogin<T: Sendable>(\n        reauthenticate: () async throws -> Void, _ operation: () async throws -> T\n    )';
  assert.deepEqual(parameters(swapped, swapped.indexOf('(')), ['reauthenticate', 'operation']);
});
