// Headless Chromium (Debian's `chromium`) driven over the DevTools protocol on
// --remote-debugging-pipe: JSON messages separated by NUL, written to its fd 3, read from its fd 4.
// No npm packages, no WebSocket.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

export function chromiumBinary() {
  const candidates = [process.env.CHROMIUM_BIN, '/usr/bin/chromium', '/usr/bin/chromium-browser'].filter(Boolean);
  const found = candidates.find((c) => fs.existsSync(c));
  if (!found) throw new Error('Chromium is missing: scripts/install-deps --test installs Debian\'s chromium');
  return found;
}

export class Browser {
  #next = 1; #pending = new Map(); #listeners = new Set(); #buffer = '';

  static async launch() {
    const browser = new Browser();
    browser.dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gatehouse-js-chromium-'));
    const args = [
      '--headless=new', '--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--no-first-run', '--no-default-browser-check',
      '--disable-background-networking', '--disable-component-update', '--disable-sync', '--remote-debugging-pipe',
      `--user-data-dir=${browser.dir}`, 'about:blank',
    ];
    browser.process = spawn(chromiumBinary(), args, { stdio: ['ignore', 'ignore', 'pipe', 'pipe', 'pipe'] });
    browser.stderr = '';
    browser.process.stderr.on('data', (d) => { browser.stderr = (browser.stderr + d).slice(-4000); });
    browser.exited = new Promise((resolve) => browser.process.on('exit', resolve));
    browser.process.stdio[4].on('data', (chunk) => browser.#receive(chunk));
    const version = await Promise.race([
      browser.send('Browser.getVersion'),
      browser.exited.then(() => { throw new Error(`chromium exited at start:\n${browser.stderr}`); }),
      new Promise((_, reject) => setTimeout(() => reject(new Error(`chromium did not answer:\n${browser.stderr}`)), 30000)),
    ]);
    browser.version = version.product;
    return browser;
  }

  #receive(chunk) {
    this.#buffer += chunk.toString('utf8');
    let end;
    while ((end = this.#buffer.indexOf('\0')) >= 0) {
      const message = JSON.parse(this.#buffer.slice(0, end));
      this.#buffer = this.#buffer.slice(end + 1);
      if (message.id !== undefined) {
        const waiter = this.#pending.get(message.id);
        this.#pending.delete(message.id);
        if (message.error) waiter?.reject(new Error(`${waiter.method}: ${message.error.message}`));
        else waiter?.resolve(message.result);
      } else {
        for (const listener of this.#listeners) listener(message);
      }
    }
  }

  send(method, params = {}, sessionId) {
    const id = this.#next++;
    return new Promise((resolve, reject) => {
      this.#pending.set(id, { resolve, reject, method });
      this.process.stdio[3].write(`${JSON.stringify({ id, method, params, ...(sessionId ? { sessionId } : {}) })}\0`);
    });
  }

  on(listener) { this.#listeners.add(listener); return () => this.#listeners.delete(listener); }

  async newPage(url = 'about:blank') {
    const { targetId } = await this.send('Target.createTarget', { url: 'about:blank' });
    const { sessionId } = await this.send('Target.attachToTarget', { targetId, flatten: true });
    const page = new Page(this, sessionId);
    await page.send('Runtime.enable');
    page.off = this.on((m) => {
      if (m.sessionId !== sessionId) return;
      if (m.method === 'Runtime.consoleAPICalled') page.console.push(m.params.args.map((a) => a.value ?? a.description).join(' '));
      if (m.method === 'Runtime.exceptionThrown') page.console.push(`exception: ${m.params.exceptionDetails.exception?.description ?? m.params.exceptionDetails.text}`);
    });
    if (url !== 'about:blank') await page.goto(url);
    return page;
  }

  async close() {
    try { await Promise.race([this.send('Browser.close'), new Promise((r) => setTimeout(r, 3000))]); } catch { /* gone */ }
    if (this.process.exitCode === null) this.process.kill('SIGKILL');
    await this.exited;
    // Its helper processes may still be writing the profile for a moment.
    for (let attempt = 0; attempt < 20; attempt++) {
      try {
        fs.rmSync(this.dir, { recursive: true, force: true });
        return;
      } catch {
        await new Promise((r) => setTimeout(r, 250));
      }
    }
  }
}

export class Page {
  console = [];
  constructor(browser, sessionId) { this.browser = browser; this.sessionId = sessionId; }

  send(method, params) { return this.browser.send(method, params, this.sessionId); }

  async goto(url) { await this.send('Page.navigate', { url }); }

  /** The value of `expression` in the page (promises awaited). Throws the page's exception. */
  async evaluate(expression) {
    const { result, exceptionDetails } = await this.send('Runtime.evaluate', { expression, awaitPromise: true, returnByValue: true });
    if (exceptionDetails) throw new Error(`in the page: ${exceptionDetails.exception?.description ?? exceptionDetails.text}`);
    return result.value;
  }

  /** A PNG of the viewport, written to `file` (folders made); returns the path. */
  async screenshot(file) {
    const { data } = await this.send('Page.captureScreenshot', { format: 'png' });
    fs.mkdirSync(path.dirname(file), { recursive: true });
    fs.writeFileSync(file, Buffer.from(data, 'base64'));
    return file;
  }

  /** Polls `expression` until it is truthy (navigations in between are fine). */
  async waitFor(expression, { timeoutMs = 15000, what = expression } = {}) {
    const deadline = Date.now() + timeoutMs;
    let last;
    while (Date.now() < deadline) {
      try {
        const value = await this.evaluate(expression);
        if (value) return value;
      } catch (error) {
        last = error; // a document between navigations
      }
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new Error(`timed out waiting for ${what}${last ? ` (${last.message})` : ''}; page console:\n${this.console.join('\n')}`);
  }
}
