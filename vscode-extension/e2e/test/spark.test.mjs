// End-to-end: the sparkdap extension in a real VS Code (code-server) in
// chromium debugs a real PySpark job (fixture/job.py on local[3]) through
// the "sparkdap" debug type, and we check what a user sees.
//
// Environment: SPARKDAP_REPO (repo root; default ../..), E2E_TIMEOUT (watchdog,
// seconds, default 420), E2E_ARTIFACTS (where a failure leaves screenshots
// and code-server's log; default $SPARKDAP_REPO/.cache/vscode-e2e/artifacts).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import {
  VSCode, breakpointLines, chord, collapsePane, expandPane, cmdline, focusEditor, gotoLine, log, openRunAndDebug, quickOpen,
  readPane, rowContextAction, runCommand, setSidebarWidth, sleep, tree, waitFor, waitPane,
} from '../lib/vscode.mjs';

const E2E = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const REPO = path.resolve(process.env.SPARKDAP_REPO || path.join(E2E, '../..'));
const SPARKDAP = path.join(REPO, '.cache/bin/sparkdap');
const VSIX = path.join(REPO, 'vscode-extension/sparkdap.vsix');
const WORK = path.join(REPO, '.cache/vscode-e2e');
const STAMP = new Date().toISOString().replace(/[:.]/g, '-');
const ARTIFACTS = path.join(process.env.E2E_ARTIFACTS || path.join(WORK, 'artifacts'), STAMP);
const TIMEOUT_S = Number(process.env.E2E_TIMEOUT || 420);
const VIEW = 'Spark executors';

// ---------- the workspace: fixture/job.py + a launch.json for it ----------
function makeWorkspace() {
  const ws = path.join(WORK, 'ws-' + STAMP);
  fs.mkdirSync(path.join(ws, '.vscode'), { recursive: true });
  const job = fs.readFileSync(path.join(E2E, 'fixture/job.py'), 'utf8');
  fs.writeFileSync(path.join(ws, 'job.py'), job);
  const line = job.split('\n').findIndex((l) => l.includes('# BREAKPOINT')) + 1;
  fs.writeFileSync(path.join(ws, '.vscode/launch.json'), JSON.stringify({
    version: '0.2.0',
    configurations: [{
      name: 'sparkdap e2e', type: 'sparkdap', request: 'attach',
      sparkdapPath: SPARKDAP, root: '${workspaceFolder}', justMyCode: false,
      submit: {
        args: ['--master', 'local[3]', '--conf', 'spark.ui.enabled=false', '--conf', 'spark.python.worker.reuse=false',
          'job.py', 'result.json'],
      },
    }],
  }, null, 2));
  return { ws, line, marker: path.join(ws, 'result.json') };
}

// ---------- the Spark executors rows ----------
/** Worker rows: label "partition N…" and the description (state). */
function workers(pane) {
  return (pane?.rows || []).map((r) => {
    const label = r.parts.find((p) => /label-name/.test(p.cls))?.text || '';
    const desc = r.parts.find((p) => /label-description/.test(p.cls))?.text || '';
    const m = /^partition (\d+)/.exec(label);
    return m && { partition: +m[1], label, desc, row: r };
  }).filter(Boolean);
}

/** CALL STACK rows that say paused. A worker's child session with one
 * thread shows as one row (VS Code folds the thread into the session row);
 * with more threads, the thread rows carry the stop. */
function pausedRows(pane) {
  return (pane?.rows || []).filter((r) => (r.kind === 'thread' || r.kind === 'session') && /paused/i.test(r.text));
}

// ---------- run ----------
const ctx = { vs: null, failed: false };

async function finish(reason) {
  const vs = ctx.vs;
  if (!vs) return [];
  if (ctx.failed || reason) {
    await vs.saveFailure(reason ? 'watchdog' : 'failure').catch(() => {});
    process.stderr.write(`\ne2e: FAILED${reason ? ' (' + reason + ')' : ''}: screenshots, workbench HTML and code-server's log in ${ARTIFACTS}\n`);
    process.stderr.write(`e2e: code-server log tail:\n${vs.logTail(30)}\n`);
  }
  return vs.stop();
}

const watchdog = setTimeout(async () => {
  log(`watchdog: ${TIMEOUT_S}s elapsed`);
  ctx.failed = true;
  const left = await finish(`watchdog ${TIMEOUT_S}s`).catch(() => []);
  if (left.length) log('killed leftovers:', left.join('; '));
  process.exit(3);
}, TIMEOUT_S * 1000);
watchdog.unref();
for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, async () => { ctx.failed = true; await finish(sig).catch(() => {}); process.exit(130); });

test('sparkdap debugs a PySpark job in VS Code', { timeout: TIMEOUT_S * 1000 }, async (t) => {
  for (const f of [SPARKDAP, VSIX]) assert.ok(fs.existsSync(f), `${f} is missing (scripts/test-vscode-e2e builds it)`);
  const { ws, line, marker } = makeWorkspace();
  const vs = ctx.vs = new VSCode({ workspace: ws, vsix: VSIX, artifacts: ARTIFACTS });
  let page;
  // A row's context action until the view shows its effect (done). A click
  // on a menu that had not settled can miss: one more try, logged.
  const rowAction = async (row, item, done, what, firstMs, retryMs) => {
    await rowContextAction(page, VIEW, row, item);
    const pane = await waitPane(page, VIEW, done, firstMs, what).catch(() => null);
    if (pane) return pane;
    log(`${item} on ${row}: no change after ${firstMs / 1000} s, opening the context menu again`);
    await rowContextAction(page, VIEW, row, item);
    return waitPane(page, VIEW, done, retryMs, what);
  };
  const step = async (name, fn) => {
    if (ctx.failed) return t.test(name, { skip: 'an earlier step failed' });
    return t.test(name, async () => {
      const s = performance.now();
      try { await fn(); } catch (e) { ctx.failed = true; throw e; } finally { log(`step "${name}": ${((performance.now() - s) / 1000).toFixed(1)}s`); }
    });
  };
  t.after(async () => {
    const left = await finish();
    if (!ctx.failed) { fs.rmSync(ws, { recursive: true, force: true }); if (!process.env.E2E_KEEP) fs.rmSync(ARTIFACTS, { recursive: true, force: true }); }
    assert.deepEqual(left, [], 'processes left after stop (killed)');
  });

  await step('VS Code starts with the extension installed', async () => {
    page = await vs.start();
    await openRunAndDebug(page);
    await waitFor(() => readPane(page, VIEW), 60000, `pane "${VIEW}" in Run and Debug`);
    // Room for the executors and the call stack, as a user would make it.
    for (const p of ['Variables', 'Watch', 'Breakpoints']) await collapsePane(page, p);
    await expandPane(page, VIEW);
  });

  await step(`a breakpoint set with F9 on job.py:${line} shows its glyph`, async () => {
    await quickOpen(page, 'job.py');
    await gotoLine(page, line);
    await page.keyboard.press('F9');
    const lines = await waitFor(async () => { const l = await breakpointLines(page); return l.includes(line) && l; }, 10000, `breakpoint glyph on line ${line}`);
    assert.deepEqual(lines, [line]);
    await vs.shot('1-breakpoint');
  });

  let stopped;
  await step('F5 stops 3 workers at the breakpoint, one row per partition', async () => {
    await page.click('.part.editor .monaco-editor .view-lines');
    await page.keyboard.press('F5');
    const want = `stopped at job.py:${line}`;
    const pane = await waitPane(page, VIEW, (p) => workers(p).filter((w) => w.desc.startsWith(want)).length >= 3,
      180000, `3 workers "${want}"`);
    stopped = workers(pane).filter((w) => w.desc.startsWith(want));
    log('stopped rows:', stopped.map((w) => `${w.label} | ${w.desc}`).join(' ; '));
    assert.equal(stopped.length, 3, 'three stopped workers');
    assert.deepEqual(stopped.map((w) => w.partition).sort(), [0, 1, 2], 'each row names a different partition');
    const header = pane.rows[0]?.text || '';
    assert.match(header, /3 stopped/, `header counts (got "${header}")`);
    await vs.shot('2-stopped');
  });

  await step('at a 300 px side bar the CALL STACK thread rows differ in visible text and name the partition', async () => {
    const w = await setSidebarWidth(page, 300);
    assert.equal(w, 300, 'side bar width after the drag');
    const cs = await waitPane(page, 'Call Stack', (p) => pausedRows(p).length >= 3, 60000, '3 paused rows');
    const threads = pausedRows(cs);
    log('call stack thread rows (visible text):', threads.map((r) => JSON.stringify(r.shown)).join(' ; '));
    await vs.shot('3-callstack-300');
    const shown = threads.map((r) => r.shown);
    assert.equal(new Set(shown).size, shown.length, `visible texts differ: ${JSON.stringify(shown)}`);
    const parts = shown.map((s) => /partition (\d+)|\bp(\d+)\b/i.exec(s)).map((m) => m && +(m[1] ?? m[2]));
    assert.ok(parts.every((p) => p !== null), `every visible text names its partition: ${JSON.stringify(shown)}`);
    assert.deepEqual([...parts].sort(), [0, 1, 2]);
  });

  await step('"Detach" on partition 0\'s row lets that worker run on undebugged; the others stay stopped', async () => {
    const detached = (p) => {
      const ws = workers(p);
      const p0 = ws.find((w) => w.partition === 0);
      return p0 && !/^stopped/.test(p0.desc) && ws.filter((w) => w.partition !== 0 && /^stopped at/.test(w.desc)).length === 2;
    };
    const pane = await rowAction('partition 0', 'Detach (run on undebugged)', detached,
      'partition 0 not stopped, partitions 1 and 2 still stopped', 10000, 20000);
    log('rows after detach:', workers(pane).map((w) => `${w.label} | ${w.desc}`).join(' ; '));
    const cs = await waitPane(page, 'Call Stack', (p) => {
      const paused = pausedRows(p);
      return paused.length === 2 && !paused.some((r) => /partition 0\b/i.test(r.text));
    }, 30000, 'only partitions 1 and 2 paused');
    assert.ok(cs);
    await vs.shot('4-detached');
  });

  const continueAll = async () => {
    // The view's title action (shown while the pane header is hovered); the palette if it is not there.
    const sel = `.part.sidebar .pane-header[aria-label^="${VIEW}"]`;
    const header = await page.waitForSelector(sel, { timeout: 5000 }).catch(() => null);
    if (header) {
      await header.hover();
      const btn = await page.waitForSelector(`${sel} .actions .action-label[aria-label^="Continue all stopped workers"]`,
        { visible: true, timeout: 5000 }).catch(() => null);
      if (btn) return btn.click();
    }
    log('title action not found: using the palette');
    await runCommand(page, 'sparkdap: Continue all stopped workers');
  };

  await step('"Debug only this partition" on partition 1, then "Continue all": the second job stops only partition 1', async () => {
    const selected = (p) => /selection: partitions 1 ·/.test(p.rows[0]?.text || '');
    await rowAction('partition 1', 'Debug only this partition', selected, 'header says "selection: partitions 1"', 10000, 15000);
    await continueAll();
    const cs = await waitPane(page, 'Call Stack', (p) => pausedRows(p).some((r) => /partition 1 · stage 1/i.test(r.text)), 120000,
      'partition 1 of stage 1 paused');
    await sleep(3000); // let stage 1's other tasks run: they must not stop
    const now = await readPane(page, 'Call Stack');
    const paused = pausedRows(now).map((r) => r.text);
    log('paused rows in stage 1:', JSON.stringify(paused));
    assert.equal(paused.length, 1, `only one paused row: ${JSON.stringify(paused)}`);
    assert.match(paused[0], /partition 1 · stage 1/i);
    const view = await readPane(page, VIEW);
    assert.match(view.rows[0]?.text || '', /\b1 stopped\b/, `header: ${view.rows[0]?.text}`);
    assert.ok(!fs.existsSync(marker), 'the job waits for the stopped partition');
    assert.ok(cs);
    await vs.shot('5-only-partition-1');
  });

  await step('"Continue all" resumes it; the job finishes and the rows say finished', async () => {
    await continueAll();
    const result = await waitFor(() => { try { return JSON.parse(fs.readFileSync(marker, 'utf8')); } catch { return null; } },
      120000, `the job writes ${marker}`);
    assert.deepEqual(result, [1, 5, 9, 13, 17, 21], 'the job\'s result');
    const pane = await waitPane(page, VIEW, (p) => {
      const h = p.rows[0]?.text || '';
      const ws = workers(p);
      return /finished/.test(h) && !/stopped|running/.test(h) && ws.length >= 3 && ws.every((w) => /^finished/.test(w.desc));
    }, 60000, 'every worker finished');
    log('rows after continue all:', pane.rows.map((r) => r.text).join(' ; '));
    await vs.shot('6-finished');
  });

  await step('stopping the session stops sparkdap serve', async () => {
    const serves = () => tree(vs.cs.pid).filter((pid) => { const a = cmdline(pid); return a.some((x) => /sparkdap$/.test(x)) && a.includes('serve'); });
    const before = serves();
    log('sparkdap serve pids before stop:', before.join(' '));
    assert.ok(before.length >= 1, 'a sparkdap serve under code-server while debugging');
    // Stop the root session: select its row in CALL STACK (Shift+F5 stops
    // the focused session, which may be a worker's child session), then Shift+F5.
    const gone = () => serves().length === 0 && before.every((p) => !cmdline(p).includes('serve'));
    // The floating debug toolbar shows while a session runs.
    const debugging = () => page.evaluate(() => [...document.querySelectorAll('.debug-toolbar')].some((t) => getComputedStyle(t).display !== 'none'));
    for (let attempt = 1; ; attempt++) {
      const cs = await readPane(page, 'Call Stack');
      log(`stop attempt ${attempt}; call stack rows:`, JSON.stringify((cs?.rows || []).map((r) => r.text.slice(0, 60))));
      const clicked = await page.evaluate(() => {
        const pane = [...document.querySelectorAll('.part.sidebar .pane')].find((p) => p.querySelector('.pane-header .title')?.textContent.trim().toLowerCase() === 'call stack');
        const row = pane && [...pane.querySelectorAll('.monaco-list-row')].find((r) => r.getAttribute('aria-level') === '1' && r.querySelector('.session'));
        if (!row) return null;
        const b = row.querySelector('.session .name, .session').getBoundingClientRect();
        return { x: b.left + 10, y: b.top + b.height / 2 };
      });
      if (clicked) await page.mouse.click(clicked.x, clicked.y); else await focusEditor(page);
      await chord(page, 'Shift+F5');
      try {
        await waitFor(gone, 15000, 'no sparkdap serve process left');
        break;
      } catch (e) {
        if (attempt >= 3) throw e;
        log(`sparkdap serve still there after Shift+F5 (debugging: ${await debugging()})`);
      }
    }
    await waitFor(async () => !(await debugging()), 10000, 'the debug toolbar goes away');
  });
});
