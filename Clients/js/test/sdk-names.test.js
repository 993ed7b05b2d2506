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

/** `text` without its comments (a JSDoc inside an options type would otherwise read as a key). */
const uncommented = (text) => text.replace(/\/\*[\s\S]*?\*\//g, (c) => ' '.repeat(c.length)).replace(/\/\/[^\n]*/g, (c) => ' '.repeat(c.length));

/** The top-level parts of `text`, split at `separators` outside brackets. */
function split(text, separators) {
  let depth = 0;
  let current = '';
  const parts = [];
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if ('([{<'.includes(c)) depth++;
    if (')]}>'.includes(c) && !(c === '>' && '-='.includes(text[i - 1]))) depth--;
    if (depth === 0 && separators.includes(c)) { parts.push(current); current = ''; } else current += c;
  }
  parts.push(current);
  return parts.map((p) => p.trim()).filter(Boolean);
}

/**
 * The parameters' names of the declaration whose "(" is at `open` in `text`, in order. With
 * `flatten` (JS), a parameter whose type is one object literal (an options object) stands for its keys.
 */
function parameters(text, open, { flatten = false } = {}) {
  const source = uncommented(text);
  let depth = 0;
  let close = open;
  for (let i = open; i < source.length; i++) {
    const c = source[i];
    if ('([{<'.includes(c)) depth++;
    if (')]}>'.includes(c) && !(c === '>' && '-='.includes(source[i - 1]))) depth--;
    if (depth === 0) { close = i; break; }
  }
  const name = (part) => part.slice(0, part.indexOf(':')).trim().split(/\s+/).at(-1).replace(/\?$/, '');
  return split(source.slice(open + 1, close), ',').flatMap((part) => {
    const type = part.slice(part.indexOf(':') + 1).trim();
    if (flatten && type.startsWith('{') && type.endsWith('}') && split(type, '|').length === 1) {
      return split(type.slice(1, -1), ';,').map(name);
    }
    return [name(part)];
  });
}

/** Whether the comment or attribute lines right above `index` in `text` deprecate what follows. */
function deprecatedAt(text, index) {
  const lines = text.slice(0, index).split('\n').slice(0, -1);
  for (let i = lines.length - 1; i >= 0; i--) {
    const line = lines[i].trim();
    if (!/^(\/\*\*|\*|\/\/\/|@)/.test(line)) break;
    if (/@deprecated\b|^@available\(\*, deprecated\b/.test(line)) return true;
  }
  return false;
}

/** JS: the methods of `class Gatehouse` in gatehouse.d.ts, by name: [{open, deprecated}]. */
function jsMethods() {
  const found = new Map();
  for (const match of gatehouseClass.matchAll(/\n {2}([A-Za-z]\w*)(<[^>]*>)?\(/g)) {
    if (match[1] === 'constructor') continue;
    const list = found.get(match[1]) ?? [];
    list.push({ open: match.index + match[0].length - 1, deprecated: deprecatedAt(gatehouseClass, match.index + 1) });
    found.set(match[1], list);
  }
  return found;
}

/** JS: a current (not deprecated) method or property of `class Gatehouse`; its "(" when a method. */
function jsDeclaration(name) {
  const method = (jsMethods().get(name) ?? []).find((d) => !d.deprecated);
  if (method) return { open: method.open };
  const property = new RegExp(`\\n  readonly ${name}:`).exec(gatehouseClass);
  if (property && !deprecatedAt(gatehouseClass, property.index + 1)) return { open: -1 };
  return null;
}

/** Swift source with its comments and string literals (interpolations included) blanked, lengths kept. */
function blanked(text) {
  const out = text.split('');
  const blank = (from, to) => { for (let k = from; k < to; k++) if (out[k] !== '\n') out[k] = ' '; };
  /** The end (after the closing quote) of the string literal opening at `i`. */
  const stringEnd = (i) => {
    let j = i + 1;
    while (j < text.length && text[j] !== '"' && text[j] !== '\n') {
      if (text[j] === '\\' && text[j + 1] === '(') {
        let depth = 1;
        j += 2;
        while (j < text.length && depth > 0) {
          if (text[j] === '"') { j = stringEnd(j); continue; }
          if (text[j] === '(') depth++;
          if (text[j] === ')') depth--;
          j++;
        }
      } else j += text[j] === '\\' ? 2 : 1;
    }
    return j + 1;
  };
  let i = 0;
  while (i < text.length) {
    let end = i + 1;
    if (text.startsWith('//', i)) end = text.indexOf('\n', i) === -1 ? text.length : text.indexOf('\n', i);
    else if (text.startsWith('/*', i)) end = text.indexOf('*/', i + 2) + 2;
    else if (text.startsWith('"""', i)) end = text.indexOf('"""', i + 3) + 3;
    else if (text[i] === '"') end = stringEnd(i);
    else { i++; continue; }
    blank(i, end);
    i = end;
  }
  return out.join('');
}

/** Swift: the text of `GatehouseClient`'s own body and of each of its extensions' bodies. */
function clientBodies(text) {
  const source = blanked(text);
  const bodies = [];
  for (const match of source.matchAll(/^(public final class GatehouseClient\b[^{]*|extension GatehouseClient\b[^{]*)\{/gm)) {
    let depth = 0;
    const start = match.index + match[0].length - 1;
    for (let i = start; i < source.length; i++) {
      if (source[i] === '{') depth++;
      if (source[i] === '}' && --depth === 0) { bodies.push(text.slice(start, i + 1)); break; }
    }
  }
  return bodies.join('\n');
}

const client = clientBodies(swift);

/** Swift: GatehouseClient's public funcs (its extensions' too), by name: [{open, deprecated}]; `static` ones are not calls of a client. */
function swiftMethods() {
  const found = new Map();
  for (const match of client.matchAll(/\n {4}public func (\w+)(<[^>]*>)?\(/g)) {
    const list = found.get(match[1]) ?? [];
    list.push({ open: match.index + match[0].length - 1, deprecated: deprecatedAt(client, match.index + 1) });
    found.set(match[1], list);
  }
  return found;
}

/** Swift: the current (not deprecated) public funcs named `name`, or its public var. */
function swiftDeclarations(name) {
  const found = (swiftMethods().get(name) ?? []).filter((d) => !d.deprecated);
  const property = new RegExp(`\\n {4}public var ${name}:`).exec(client);
  if (property && !deprecatedAt(client, property.index + 1)) found.push({ open: -1 });
  return found;
}

const normal = (name) => name.replace(/MFA|TOTP/g, (m) => m[0] + m.slice(1).toLowerCase());

test('each operation of Clients/sdk-names.json has its JS and Swift name, the same unless the table says why', () => {
  assert.ok(table.operations.length >= 60);
  for (const { operation, js, swift: swiftName, why, params } of table.operations) {
    assert.ok(js || swiftName, `${operation}: neither SDK`);
    if (!js || !swiftName) assert.ok(why, `${operation}: only one SDK has it, and the table does not say why`);
    const jsDecl = js && jsDeclaration(js);
    if (js) assert.ok(jsDecl, `${operation}: gatehouse.d.ts declares no current ${js}`);
    const swiftDecls = swiftName ? swiftDeclarations(swiftName) : [];
    if (swiftName) assert.ok(swiftDecls.length > 0, `${operation}: GatehouseClient has no public, not deprecated ${swiftName}`);
    if (js && swiftName && !why) assert.equal(normal(js), normal(swiftName), `${operation}: ${js} in JS but ${swiftName} in Swift`);
    if (params) {
      assert.deepEqual(parameters(gatehouseClass, jsDecl.open, { flatten: true }), params.js, `${operation}: JS ${js}'s parameters`);
      const lists = swiftDecls.map((d) => parameters(client, d.open));
      assert.ok(lists.some((list) => JSON.stringify(list) === JSON.stringify(params.swift)), `${operation}: Swift ${swiftName}'s parameters are ${JSON.stringify(lists)}`);
    }
  }
});

test('every public call of either SDK is in Clients/sdk-names.json (a new call must be named in both, or say why not)', () => {
  const listed = { js: new Set(table.operations.map((o) => o.js)), swift: new Set(table.operations.map((o) => o.swift)) };
  const missing = [];
  for (const [name, decls] of jsMethods()) if (decls.some((d) => !d.deprecated) && !listed.js.has(name)) missing.push(`JS ${name}`);
  for (const [name, decls] of swiftMethods()) if (decls.some((d) => !d.deprecated) && !listed.swift.has(name)) missing.push(`Swift ${name}`);
  assert.deepEqual(missing, []);
  assert.ok(jsMethods().size >= 55 && swiftMethods().size >= 55, `read ${jsMethods().size} JS and ${swiftMethods().size} Swift calls`);
});

test('the names the SDKs once differed in stay as deprecated aliases of the shared ones', () => {
  const swiftRenamed = [
    ['me()', 'getUser()'], ['sessions()', 'getSessions()'], ['revokeSession(id:)', 'endSession(id:)'], ['app()', 'getApp()'],
    ['identities()', 'getIdentities()'], ['factors()', 'listFactors()'], ['passkeys()', 'listPasskeys()'],
    ['signIn(email:code:)', 'verifySignInCode(email:code:)'], ['resetPassword(email:code:newPassword:)', 'confirmPasswordReset(email:code:password:)'],
    ['signIn(provider:idToken:nonce:)', 'signInWithProvider(_:idToken:nonce:)'], ['signIn(provider:accessToken:)', 'signInWithProvider(_:accessToken:)'],
    ['link(provider:idToken:nonce:)', 'linkProvider(_:idToken:nonce:)'], ['signIn(passkey:)', 'signInWithPasskey(_:)'],
    ['signInWithFirebase(idToken:provider:)', 'signInWithFirebase(provider:idToken:)'],
    ['startWebSignIn(provider:redirectURI:)', 'startWebFlow(provider:redirectURI:)'], ['completeWebSignIn(_:callbackURL:)', 'finishWebFlow(_:callbackURL:)'],
    ['completeAppleWebSignIn(_:callbackURL:)', 'finishWebFlow(_:callbackURL:)'], ['uploadPhoto(_:contentType:fileName:)', 'uploadPhoto(_:contentType:filename:)'],
  ];
  for (const [old, renamed] of swiftRenamed) {
    const [, base, labels] = /^(\w+)\((.*)\)$/.exec(old);
    const first = labels.split(':')[0];
    const head = `@available(*, deprecated, renamed: "${renamed}")\n    public func ${base}(${first === '' ? '' : first === '_' ? '_ ' : first}`;
    assert.ok(client.includes(head), `${old} → ${renamed}`);
  }
  assert.match(client, /@available\(\*, deprecated, renamed: "updateUser\([^"]*\)"\)\n {4}public func updateProfile\(/);
  assert.match(client, /@available\(\*, deprecated[^\n]*\n {4}public func withRecentLogin<T: Sendable>\(\n {8}reauthenticate:/);
  assert.match(client, /@available\(\*, deprecated[^\n]*\n {4}public func startAppleWebSignIn\(/);
  assert.match(swift, /@available\(\*, deprecated, renamed: "WebFlow"\)\npublic typealias WebSignIn = WebFlow/);
  const methods = jsMethods();
  for (const old of ['sendEmailCode', 'verifyEmailCode', 'startAppleWebFlow', 'isAppleWebFlowReturn', 'finishAppleWebFlow']) {
    assert.ok(methods.get(old)?.every((d) => d.deprecated), `JS ${old} is declared, @deprecated`);
  }
});

test('a JS deprecated alias still does the call it was renamed to', async () => {
  const { Gatehouse, MemoryStorage } = await import('../gatehouse.js');
  const sent = [];
  const fetch = async (url, init) => {
    sent.push(`${init.method} ${new URL(url).pathname} ${init.body}`);
    return new Response(null, { status: 202 });
  };
  const web = new Gatehouse({ url: 'https://gatehouse.test', appKey: 'pk_test', storage: new MemoryStorage(), lock: 'local', fetch, autoRefresh: false });
  await web.sendEmailCode('ada@example.com');
  await web.sendSignInCode('ada@example.com');
  assert.deepEqual(sent, Array(2).fill('POST /v1/auth/email-code/send {"email":"ada@example.com"}'));
  assert.equal(await web.isAppleWebFlowReturn('https://app.example/cb?state=s&login_code=lc'), web.isWebFlowReturn('https://app.example/cb?state=s&login_code=lc'));
  web.close();
});

test('the table catches a drift: a renamed call, swapped parameters, a deprecated name or an unlisted call fail', () => {
  assert.equal(jsDeclaration('notACall'), null);
  assert.equal(jsDeclaration('sendEmailCode'), null, 'sendEmailCode is deprecated: not a current name');
  assert.deepEqual(swiftDeclarations('me'), [], 'me() is deprecated: not a current name');
  assert.deepEqual(swiftDeclarations('load'), [], "a SessionStore's public func is not GatehouseClient's");
  const swapped = 'public func withRecentLogin<T: Sendable>(\n        reauthenticate: () async throws -> Void, _ operation: () async throws -> T\n    )';
  assert.deepEqual(parameters(swapped, swapped.indexOf('(')), ['reauthenticate', 'operation']);
  const options = 'x(id: string, options?: { /** a, b: c */ range?: { start: number; end?: number }; mfaToken?: string }): void';
  assert.deepEqual(parameters(options, options.indexOf('('), { flatten: true }), ['id', 'range', 'mfaToken']);
  const union = 'x(id: string, input: { idToken: string } | { accessToken: string }): void';
  assert.deepEqual(parameters(union, union.indexOf('('), { flatten: true }), ['id', 'input']);
  const text = '\n  /** @deprecated Renamed. */\n  old(): void;\n  /** Fine. */\n  current(): void;';
  assert.equal(deprecatedAt(text, text.indexOf('  old')), true);
  assert.equal(deprecatedAt(text, text.indexOf('  current')), false);
  assert.ok(clientBodies('extension GatehouseClient {\n    public func a() { let s = "}" }\n    public func b() {}\n}\nstruct X {\n    public func c() {}\n}').includes('func b'));
});
