// What the console's tests share: the real server (Clients/js/test/support/server.js), headless
// Chromium over the DevTools protocol (…/chromium.js), an SMTP sink that requires a password, and
// the helpers that drive a page as a person would (typing, keys, file uploads) and check it.
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { repoRoot } from '../../Clients/js/test/support/server.js';

export { Browser } from '../../Clients/js/test/support/chromium.js';
export { GatehouseServer, repoRoot } from '../../Clients/js/test/support/server.js';

export const artifacts = path.join(repoRoot, '.build/test-artifacts/console');
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** scripts/smtp-sink.py with USER:PASSWORD (AUTH required), as an app's own SMTP server. */
export class PasswordSMTPSink {
  constructor(user, password) { this.user = user; this.password = password; }

  async start() {
    this.dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gatehouse-console-smtp-'));
    this.process = spawn('/usr/bin/python3', [path.join(repoRoot, 'scripts/smtp-sink.py'), this.dir, `${this.user}:${this.password}`], { stdio: ['pipe', 'ignore', 'inherit'] });
    for (let i = 0; i < 100 && !fs.existsSync(path.join(this.dir, 'port')); i++) await sleep(50);
    if (!fs.existsSync(path.join(this.dir, 'port'))) throw new Error('the SMTP sink did not start (python3-aiosmtpd installed?)');
    this.url = `smtp://127.0.0.1:${fs.readFileSync(path.join(this.dir, 'port'), 'utf8').trim()}`;
    return this;
  }

  /** `accept` or `refuse-permanently` (550 to every RCPT TO). */
  mode(mode) { fs.writeFileSync(path.join(this.dir, 'mode'), mode); }

  /** The envelopes of the stored mails: `{mail_from, rcpt_tos}`. */
  envelopes() {
    return fs.readdirSync(this.dir).filter((n) => /^\d+\.json$/.test(n)).sort().map((n) => JSON.parse(fs.readFileSync(path.join(this.dir, n), 'utf8')));
  }

  stop() {
    if (this.process && this.process.exitCode === null) this.process.kill('SIGTERM');
    fs.rmSync(this.dir, { recursive: true, force: true });
  }
}

/** A P-256 key in PKCS#8 PEM, as Apple's .p8 files are, made by openssl into `dir`. */
export function makeP8(dir) {
  const file = path.join(dir, 'AuthKey_ABCDE12345.p8');
  const made = spawnSync('sh', ['-c', `openssl ecparam -name prime256v1 -genkey -noout | openssl pkcs8 -topk8 -nocrypt -out '${file}'`]);
  if (made.status !== 0) throw new Error(`openssl: ${made.stderr}`);
  return file;
}
/** Drives one tab: typing through the input pipeline, keys, file choosers, screenshots, checks. */
export class Driver {
  constructor(page) { this.page = page; }

  static async open(browser, url) {
    const page = await browser.newPage();
    const driver = new Driver(page);
    await page.send('Log.enable');
    await page.send('Emulation.setDeviceMetricsOverride', { width: 1280, height: 900, deviceScaleFactor: 1, mobile: false });
    page.log = [];
    page.off2 = browser.on((m) => {
      if (m.sessionId === page.sessionId && m.method === 'Log.entryAdded') page.log.push(m.params.entry);
    });
    await page.goto(url);
    return driver;
  }

  evaluate(expression) { return this.page.evaluate(expression); }
  waitFor(expression, what) { return this.page.waitFor(expression, { what }); }

  /** Focuses `selector`, clears it and types `text` as keystrokes would insert it. */
  async type(selector, text) {
    await this.evaluate(`(() => { const c = document.querySelector(${JSON.stringify(selector)}); if (!c) throw new Error('no ${selector.replace(/'/g, '')}'); c.focus(); c.select?.(); })()`);
    await this.page.send('Input.dispatchKeyEvent', { type: 'keyDown', key: 'Backspace', code: 'Backspace', windowsVirtualKeyCode: 8 });
    await this.page.send('Input.dispatchKeyEvent', { type: 'keyUp', key: 'Backspace', code: 'Backspace', windowsVirtualKeyCode: 8 });
    if (text) await this.page.send('Input.insertText', { text });
  }

  /** A key pressed on whatever has the focus. */
  async press(key) {
    const codes = { Enter: 13, Space: 32, Tab: 9 };
    const text = key === 'Enter' ? '\r' : key === 'Space' ? ' ' : undefined;
    await this.page.send('Input.dispatchKeyEvent', { type: 'keyDown', key: key === 'Space' ? ' ' : key, code: key, windowsVirtualKeyCode: codes[key], text });
    await this.page.send('Input.dispatchKeyEvent', { type: 'keyUp', key: key === 'Space' ? ' ' : key, code: key, windowsVirtualKeyCode: codes[key] });
  }

  /** Focuses `selector` and presses Enter (a button or link used from the keyboard). */
  async activate(selector) {
    await this.evaluate(`(() => { const c = document.querySelector(${JSON.stringify(selector)}); if (!c) throw new Error('no such control'); c.focus(); })()`);
    await this.press('Enter');
  }

  async check(selector, on = true) {
    await this.evaluate(`(() => { const c = document.querySelector(${JSON.stringify(selector)}); if (c.checked !== ${on}) { c.focus(); c.click(); } })()`);
  }

  /** Chooses `file` in the file input `selector`, as the file chooser would. */
  async chooseFile(selector, file) {
    const { result } = await this.page.send('Runtime.evaluate', { expression: `document.querySelector(${JSON.stringify(selector)})` });
    await this.page.send('DOM.setFileInputFiles', { files: [file], objectId: result.objectId });
  }

  /**
   * The whole page as a PNG under .build/test-artifacts/console/ (its first 6000 px); with
   * `selector`, the part of the page from that element's top (a part further down a long page).
   */
  async screenshot(name, selector) {
    const { cssContentSize } = await this.page.send('Page.getLayoutMetrics');
    const top = selector
      ? Math.max(0, Math.floor(await this.evaluate(`document.querySelector(${JSON.stringify(selector)}).getBoundingClientRect().top + scrollY - 16`)))
      : 0;
    const height = Math.min(Math.ceil(cssContentSize.height) - top, 6000);
    const { data } = await this.page.send('Page.captureScreenshot', {
      format: 'png', captureBeyondViewport: true, clip: { x: 0, y: top, width: 1280, height: Math.max(height, 900), scale: 1 },
    });
    fs.mkdirSync(artifacts, { recursive: true });
    const file = path.join(artifacts, name);
    fs.writeFileSync(file, Buffer.from(data, 'base64'));
    return file;
  }

  /** The accessibility check, run in the page: the problems found (an empty list passes). */
  accessibilityProblems() { return this.evaluate(`(${accessibilityCheck.toString()})()`); }
}

/**
 * Every form control has a label (a <label for>, aria-label or aria-labelledby) with text; every
 * button and link has a name; ids are unique and every aria-describedby names elements that
 * exist; the page has a language, a title and one h1; nothing is put in the tab order by a
 * positive tabindex; the controls are native (a click handler on a div is not keyboard-usable,
 * so only button, a, input, select and textarea are focusable).
 */
function accessibilityCheck() {
  const problems = [];
  const describe = (node) => `${node.tagName.toLowerCase()}${node.id ? `#${node.id}` : ''}${node.name ? `[name=${node.name}]` : ''}`;
  const visible = (node) => !node.closest('[hidden]') && node.type !== 'hidden';
  for (const control of document.querySelectorAll('input, select, textarea')) {
    if (!visible(control)) continue;
    const byLabel = [...(control.labels ?? [])].some((l) => l.textContent.trim());
    const byAria = (control.getAttribute('aria-label') ?? '').trim()
      || (control.getAttribute('aria-labelledby') ?? '').split(/\s+/).some((id) => document.getElementById(id)?.textContent.trim());
    if (!byLabel && !byAria) problems.push(`no label: ${describe(control)}`);
  }
  for (const button of document.querySelectorAll('button, a[href], [role="button"]')) {
    if (!visible(button)) continue;
    const name = (button.getAttribute('aria-label') ?? '').trim() || button.textContent.trim();
    if (!name) problems.push(`no name: ${describe(button)}`);
  }
  const ids = [...document.querySelectorAll('[id]')].map((n) => n.id);
  for (const id of new Set(ids.filter((id, i) => ids.indexOf(id) !== i))) problems.push(`id used twice: ${id}`);
  for (const node of document.querySelectorAll('[aria-describedby]')) {
    for (const id of node.getAttribute('aria-describedby').split(/\s+/).filter(Boolean)) {
      if (!document.getElementById(id)) problems.push(`aria-describedby names a missing ${id}: ${describe(node)}`);
    }
  }
  if (!document.documentElement.lang) problems.push('no lang on <html>');
  if (!document.title.trim()) problems.push('no title');
  if (document.querySelectorAll('main h1').length !== 1) problems.push(`${document.querySelectorAll('main h1').length} h1 in main`);
  for (const node of document.querySelectorAll('[tabindex]')) if (Number(node.getAttribute('tabindex')) > 0) problems.push(`positive tabindex: ${describe(node)}`);
  for (const node of document.querySelectorAll('[onclick]')) problems.push(`inline handler: ${describe(node)}`);
  for (const image of document.querySelectorAll('img')) if (!image.hasAttribute('alt')) problems.push(`img without alt: ${describe(image)}`);
  return problems;
}
