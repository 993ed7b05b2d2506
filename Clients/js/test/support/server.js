// Starts the real Gatehouse executable (.build/debug/gatehouse, or GATEHOUSE_BIN) on a free
// loopback port with a fresh SQLite file, cheap password hashes, the fake providers and the SMTP
// sink, the way scripts/fuzz/run starts it. Nothing here imitates the server.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import crypto from 'node:crypto';
import { fileURLToPath } from 'node:url';

export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../..');

export function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
    server.on('error', reject);
  });
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** The SMTP sink of scripts/smtp-sink.py (aiosmtpd): mail lands as .eml files in a folder. */
export class SMTPSink {
  async start() {
    this.dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gatehouse-js-smtp-'));
    this.process = spawn('/usr/bin/python3', [path.join(repoRoot, 'scripts/smtp-sink.py'), this.dir], { stdio: ['pipe', 'ignore', 'inherit'] });
    for (let i = 0; i < 100 && !fs.existsSync(path.join(this.dir, 'port')); i++) await sleep(50);
    if (!fs.existsSync(path.join(this.dir, 'port'))) throw new Error('the SMTP sink did not start (python3-aiosmtpd installed?)');
    this.url = `smtp://127.0.0.1:${fs.readFileSync(path.join(this.dir, 'port'), 'utf8').trim()}`;
    return this;
  }

  stop() {
    // Node's stdio pipes are socket pairs, not the FIFO the sink watches: stop it by its id.
    if (this.process && this.process.exitCode === null) this.process.kill('SIGTERM');
    fs.rmSync(this.dir, { recursive: true, force: true });
  }

  /** The mails to `address`, oldest first, decoded (quoted-printable and base64 parts) to text. */
  mails(address) {
    const names = fs.readdirSync(this.dir).filter((n) => /^\d+\.json$/.test(n)).sort();
    const out = [];
    for (const name of names) {
      const envelope = JSON.parse(fs.readFileSync(path.join(this.dir, name), 'utf8'));
      if (!envelope.rcpt_tos.includes(address)) continue;
      out.push(decodeMail(fs.readFileSync(path.join(this.dir, name.replace('.json', '.eml')), 'latin1')));
    }
    return out;
  }

  /** Waits for a mail to `address` beyond the `after`-th one and returns its 6-digit code. */
  async code(address, { after = 0, timeoutMs = 10000 } = {}) {
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      const mails = this.mails(address);
      if (mails.length > after) {
        const match = mails[mails.length - 1].match(/\b(\d{6})\b/);
        if (match) return match[1];
      }
      await sleep(50);
    }
    throw new Error(`no code mailed to ${address} within ${timeoutMs} ms`);
  }
}

/** Every text part of a MIME message, transfer-decoded and joined. */
function decodeMail(raw) {
  const parts = raw.split(/\r?\n--[^\r\n]+\r?\n/);
  return parts.map((part) => {
    const [head, ...rest] = part.split(/\r?\n\r?\n/);
    const content = rest.join('\n\n');
    if (/content-transfer-encoding:\s*base64/i.test(head)) return Buffer.from(content.replace(/\s+/g, ''), 'base64').toString('utf8');
    if (/content-transfer-encoding:\s*quoted-printable/i.test(head)) {
      return content.replace(/=\r?\n/g, '').replace(/=([0-9A-F]{2})/gi, (_, h) => String.fromCharCode(parseInt(h, 16)));
    }
    return content;
  }).join('\n');
}

/** The Gatehouse executable, with an admin token, on a free port. */
export class GatehouseServer {
  constructor({ apple, google, firebase, smtp, env = {} } = {}) {
    this.apple = apple;
    this.google = google;
    this.firebase = firebase;
    this.smtp = smtp;
    this.extraEnv = env;
  }

  /** Starts it; a port taken between freePort() and the server's bind (test files run in parallel) is retried with another. */
  async start() {
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.#startOnce();
      } catch (error) {
        const lost = this.process?.exitCode !== null;
        await this.stop();
        if (!lost || attempt === 3) throw error;
      }
    }
  }

  async #startOnce() {
    const binary = process.env.GATEHOUSE_BIN ?? path.join(repoRoot, '.build/debug/gatehouse');
    if (!fs.existsSync(binary)) throw new Error(`no ${binary}: run swift build first`);
    this.dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gatehouse-js-'));
    const port = await freePort();
    this.url = `http://127.0.0.1:${port}`;
    this.adminToken = crypto.randomBytes(24).toString('hex');
    const env = {
      PATH: process.env.PATH,
      GATEHOUSE_DATABASE_URL: `sqlite://${this.dir}/gatehouse.db`,
      GATEHOUSE_LISTEN: `127.0.0.1:${port}`,
      GATEHOUSE_PUBLIC_URL: this.url,
      GATEHOUSE_ADMIN_TOKEN: this.adminToken,
      GATEHOUSE_ACCESS_LOG: 'off',
      GATEHOUSE_ARGON2_MEMORY_KIB: '1024',
      GATEHOUSE_ARGON2_ITERATIONS: '1',
      GATEHOUSE_SMTP_URL: this.smtp?.url ?? 'log:',
      ...(this.apple ? { GATEHOUSE_APPLE_URL: this.apple.url } : {}),
      ...(this.google ? { GATEHOUSE_GOOGLE_JWKS_URL: this.google.jwksURL } : {}),
      ...(this.firebase ? { GATEHOUSE_FIREBASE_JWKS_URL: this.firebase.jwksURL } : {}),
      ...this.extraEnv,
    };
    this.log = fs.openSync(path.join(this.dir, 'server.log'), 'w');
    this.process = spawn(binary, ['serve'], { env, stdio: ['ignore', this.log, this.log] });
    this.exited = new Promise((resolve) => this.process.on('exit', resolve));
    for (let i = 0; i < 200 && this.process.exitCode === null; i++) {
      try {
        if ((await fetch(`${this.url}/readyz`)).ok) return this;
      } catch { /* not yet */ }
      await sleep(50);
    }
    throw new Error(`gatehouse did not start:\n${fs.readFileSync(path.join(this.dir, 'server.log'), 'utf8').slice(-2000)}`);
  }

  async stop() {
    if (this.process && this.process.exitCode === null) {
      this.process.kill('SIGTERM');
      await Promise.race([this.exited, sleep(5000)]);
      if (this.process.exitCode === null) this.process.kill('SIGKILL');
    }
    if (this.log !== undefined) fs.closeSync(this.log);
    this.log = undefined;
    if (this.dir) fs.rmSync(this.dir, { recursive: true, force: true });
  }

  async admin(method, pathname, body, bearer = this.adminToken) {
    const response = await fetch(this.url + pathname, {
      method, headers: { Authorization: `Bearer ${bearer}`, ...(body ? { 'Content-Type': 'application/json' } : {}) },
      body: body ? JSON.stringify(body) : undefined,
    });
    const text = await response.text();
    if (!response.ok) throw new Error(`${method} ${pathname}: ${response.status} ${text}`);
    return text ? JSON.parse(text) : null;
  }

  /** A new app (`POST /v1/admin/apps`): `{id, appKey, secretKey}`. High auth rate limits: the tests sign in a lot. */
  async createApp(settings = {}) {
    const { data } = await this.admin('POST', '/v1/admin/apps', {
      name: 'JS client test', rate_limits: { auth_per_minute_per_ip: 1000, web_flow_per_minute_per_ip: 1000 }, ...settings,
    });
    return { id: data.app.id, appKey: data.app_key, secretKey: data.secret_key };
  }

  /** The value of one Prometheus series of `/metrics` (0 when absent). */
  async metric(name, labels = {}) {
    const response = await fetch(`${this.url}/metrics`, { headers: { Authorization: `Bearer ${this.adminToken}` } });
    const text = await response.text();
    let total = 0;
    for (const line of text.split('\n')) {
      const match = line.match(/^([a-z_]+)(?:\{([^}]*)\})? ([0-9.e+-]+)$/);
      if (!match || match[1] !== name) continue;
      const have = Object.fromEntries([...(match[2] ?? '').matchAll(/([a-z_]+)="([^"]*)"/g)].map((m) => [m[1], m[2]]));
      if (Object.entries(labels).every(([k, v]) => have[k] === v)) total += Number(match[3]);
    }
    return total;
  }
}
