// The glue, activated against a fake vscode (src/testkit/fakevscode.ts)
// with node standing in for the sparkdap binary: a root configuration
// starts serve and attaches to it, the session start runs submit and asks
// for the workers, events become tree rows, actions become control
// requests, and the root's end stops serve.

import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import Module from 'node:module';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { Answer } from '../protocol';
import { createFake, session, type FakeSession } from '../testkit/fakevscode';
import { T0, worker } from '../testkit/fixtures';
import { RESTART_GRACE_MS } from '../serve';

const fake = createFake();
type Loader = (request: string, parent: unknown, isMain: boolean) => unknown;
const M = Module as unknown as { _load: Loader };
const load = M._load;

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sparkdap-glue-'));
const bin = path.join(dir, 'sparkdap');
const pidFile = path.join(dir, 'serve.pid');

interface Ext {
  activate(ctx: { subscriptions: { dispose(): void }[] }): void;
  deactivate(): Promise<void> | undefined;
}
let ext: Ext;
const ctx = { subscriptions: [] as { dispose(): void }[] };

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

const wait = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('the extension in a fake VS Code', { skip: process.platform === 'win32' }, () => {
  before(() => {
    fs.writeFileSync(
      path.join(dir, 'fake.js'),
      `const fs = require('fs');
       const a = process.argv.slice(2);
       const f = a[a.indexOf('--ready-file') + 1];
       const cf = ${JSON.stringify(path.join(dir, 'count'))};
       const n = fs.existsSync(cf) ? Number(fs.readFileSync(cf, 'utf8')) + 1 : 0;
       fs.writeFileSync(cf, String(n));
       fs.writeFileSync(${JSON.stringify(pidFile)}, String(process.pid));
       const port = 41234 + 2 * n;
       fs.writeFileSync(f + '.tmp', JSON.stringify({ide: '127.0.0.1:' + port, executors: '127.0.0.1:' + (port + 1), token: process.env.SPARKDAP_TOKEN}));
       fs.renameSync(f + '.tmp', f);
       process.on('SIGTERM', () => process.exit(0));
       setInterval(() => {}, 1000);`,
    );
    fs.writeFileSync(bin, `#!/bin/sh\nexec "${process.execPath}" "${path.join(dir, 'fake.js')}" "$@"\n`, { mode: 0o755 });
    M._load = (request, parent, isMain) => (request === 'vscode' ? fake.api : load(request, parent, isMain));
    ext = require('../extension') as Ext;
    ext.activate(ctx);
  });

  after(async () => {
    await ext.deactivate();
    ctx.subscriptions.forEach((d) => d.dispose());
    M._load = load;
  });

  const provider = () => fake.rec.providers.get('sparkdap') as {
    resolveDebugConfiguration(f: unknown, c: Record<string, unknown>): Record<string, unknown>;
    resolveDebugConfigurationWithSubstitutedVariables(f: unknown, c: Record<string, unknown>): Promise<Record<string, unknown> | undefined>;
  };
  const factory = () => fake.rec.factories.get('sparkdap') as { createDebugAdapterDescriptor(s: FakeSession): unknown };
  let root: FakeSession;

  test('registers the debug type, the view, the commands and the completions', () => {
    assert.ok(fake.rec.providers.has('sparkdap'));
    assert.ok(fake.rec.factories.has('sparkdap'));
    assert.ok(fake.rec.treeViews.has('sparkdap.executors'));
    const pkg = JSON.parse(fs.readFileSync(path.join(__dirname, '../../package.json'), 'utf8')) as {
      contributes: { commands: { command: string }[] };
    };
    for (const c of pkg.contributes.commands) {
      assert.ok(fake.rec.commands.has(c.command), `${c.command} is contributed but not registered`);
    }
    assert.deepEqual(fake.rec.completions[0].selector, { language: 'python' });
    assert.equal(provider().resolveDebugConfiguration(undefined, {}).type, 'sparkdap');
  });

  test('a root configuration starts serve and attaches to it', async () => {
    const cfg = await provider().resolveDebugConfigurationWithSubstitutedVariables(
      { uri: { fsPath: dir } },
      { type: 'sparkdap', request: 'attach', name: 'job', sparkdapPath: bin, submit: { args: ['--master', 'local[2]', 'my job.py'], partitions: [1] } },
    );
    assert.ok(cfg);
    assert.deepEqual(cfg.connect, { host: '127.0.0.1', port: 41234 });
    assert.match(String(cfg.sparkdapToken), /^[0-9a-f]{64}$/);
    assert.equal(cfg.submit, undefined);
    assert.ok(alive(Number(fs.readFileSync(pidFile, 'utf8'))));
    root = session('root-1', 'sparkdap', cfg, (command) => (command === 'sparkdapWatch' ? { version: 1 } : {}));
    const d = factory().createDebugAdapterDescriptor(root) as { port: number; host: string };
    assert.deepEqual([d.constructor.name, d.port, d.host], ['DebugAdapterServer', 41234, '127.0.0.1']);
  });

  test('its start runs submit in a terminal and asks for the workers', async () => {
    fake.debug.activeDebugSession = root;
    fake.fire.started.fire(root);
    await wait(10);
    const t = fake.rec.terminals[0];
    assert.equal(t.options.cwd, dir);
    assert.match(String(t.options.env?.SPARKDAP_TOKEN), /^[0-9a-f]{64}$/);
    assert.notEqual(t.options.env?.SPARKDAP_TOKEN, root.configuration.sparkdapToken, 'the executors’ token is not the IDE token');
    assert.equal(t.sent[0].text, `${bin} submit --proxy 127.0.0.1:41235 --partitions 1 -- --master 'local[2]' 'my job.py'`);
    assert.deepEqual(root.requests[0], { command: 'sparkdapWatch', args: { maxRows: 500 } });
  });

  test('events become rows, at most one redraw per 250 ms', async () => {
    const view = fake.rec.treeViews.get('sparkdap.executors')!;
    const tree = view.treeDataProvider as {
      getChildren(n?: unknown): { kind: string; children?: unknown[] }[];
      getTreeItem(n: unknown): { label: string; description?: string; contextValue?: string; id?: string };
      resolveTreeItem(i: unknown, n: unknown): { tooltip?: string };
      onDidChangeTreeData(l: () => void): void;
    };
    let redraws = 0;
    tree.onDidChangeTreeData(() => redraws++);
    const answer: Answer = {
      counts: { workers: 2, running: 1, stopped: 1, idle: 0, finished: 0, failed: 0 },
      selection: null,
      asSubmitted: true,
      known: [
        worker({ partition: 7, stage: 3, state: 'stopped', stopped: { name: 'f', file: path.join(dir, 'udf.py'), line: 12 }, executor: 9, since: new Date(T0).toISOString() }),
        worker({ partition: 8, stage: 3, executor: 10 }),
      ],
    };
    for (let i = 0; i < 20; i++) {
      fake.fire.custom.fire({ session: root, event: 'sparkdapWorkers', body: answer });
    }
    fake.fire.custom.fire({ session: session('other', 'sparkdap', {}), event: 'sparkdapWorkers', body: { known: [] } });
    // The session start drew the empty list just now: these 21 events are
    // drawn once, when its 250 ms are up.
    await wait(300);
    assert.equal(redraws, 1);
    const top = tree.getChildren();
    assert.deepEqual(top.map((n) => tree.getTreeItem(n).label), ['2 workers · 1 stopped · 1 running', 'executor 1 · node-1']);
    assert.equal(view.view.badge && (view.view.badge as { value: number }).value, 1);
    const stage = tree.getChildren(top[1])[0];
    const rows = tree.getChildren(stage);
    const item = tree.getTreeItem(rows[0]);
    assert.equal(item.label, 'partition 7');
    assert.match(String(item.description), /^stopped at udf\.py:12 · \d+ s$/);
    assert.equal(item.contextValue, ';worker;stopped;debug;task;');
    assert.equal(item.id, 'root-1/w:node-1:1007');
    assert.match(String(tree.resolveTreeItem(item, rows[0]).tooltip), /proxy session: 9/);
    (globalThis as { __rows?: unknown[] }).__rows = rows;
  });

  test('actions send control requests to the root session', async () => {
    const rows = (globalThis as { __rows?: unknown[] }).__rows!;
    const run = (id: string, arg?: unknown) => fake.rec.commands.get(id)!(arg);
    root.requests.length = 0;
    await run('sparkdap.continue', rows[0]);
    await run('sparkdap.pause', rows[1]);
    await run('sparkdap.detach', rows[1]);
    await run('sparkdap.continueAll');
    await run('sparkdap.selectPartition', rows[0]);
    await run('sparkdap.selectStage', rows[0]);
    await run('sparkdap.selectAll');
    await run('sparkdap.selectNone');
    await run('sparkdap.selectAsSubmitted');
    assert.deepEqual(
      root.requests.map((r) => [r.command, r.args]),
      [
        ['sparkdap', { op: 'continue', executor: 9 }],
        ['sparkdap', { op: 'pause', executor: 10 }],
        ['sparkdap', { op: 'detach', executor: 10 }],
        ['sparkdap', { op: 'continue-all' }],
        ['sparkdap', { op: 'select', selection: { partitions: [7], sampleRate: 1 } }],
        ['sparkdap', { op: 'select', selection: { stages: [3], sampleRate: 1 } }],
        ['sparkdap', { op: 'select', selection: { sampleRate: 1 } }],
        ['sparkdap', { op: 'select', selection: { partitions: [], sampleRate: 1 } }],
        ['sparkdap', { op: 'select', asSubmitted: true }],
      ],
    );
  });

  test('a proxy error is shown in its own words', async () => {
    const rows = (globalThis as { __rows?: unknown[] }).__rows!;
    root.answer = () => {
      throw new Error('the executor is not stopped');
    };
    await fake.rec.commands.get('sparkdap.continue')!(rows[1]);
    assert.ok(fake.rec.messages.includes('error: sparkdap: continue: the executor is not stopped'));
  });

  test('replay: capture, a terminal running replay --debug, and a session that starts no serve', async () => {
    const rows = (globalThis as { __rows?: unknown[] }).__rows!;
    root.answer = (_c, args) =>
      (args as { op: string }).op === 'capture'
        ? { capture: { path: '/caps/parse-e9.json', bytes: 10, function: 'parse', task: 'stage 3 · partition 7', executor: 9, frame: 0, summary: 'captured parse' } }
        : {};
    await fake.rec.commands.get('sparkdap.replay')!(rows[0]);
    const t = fake.rec.terminals[fake.rec.terminals.length - 1];
    assert.match(t.sent[0].text, new RegExp(`^${bin} replay --debug 127\\.0\\.0\\.1:\\d+ /caps/parse-e9\\.json$`));
    const cfg = fake.rec.startedDebugging[0] as Record<string, unknown>;
    assert.equal(cfg.sparkdapReplay, true);
    assert.equal(cfg.name, 'replay parse (stage 3 · partition 7)');
    const resolved = await provider().resolveDebugConfigurationWithSubstitutedVariables(undefined, cfg);
    assert.deepEqual(resolved, cfg);
    const d = factory().createDebugAdapterDescriptor(session('replay-1', 'sparkdap', cfg)) as { constructor: { name: string }; implementation: { dispose(): void } };
    assert.equal(d.constructor.name, 'DebugAdapterInlineImplementation');
    d.implementation.dispose();
  });

  test('child sessions connect where the proxy says', async () => {
    const child = session('child-1', 'sparkdap', { type: 'sparkdap', connect: { host: '127.0.0.1', port: 41234 }, sparkdapExecutor: 9, sparkdapChildKey: 'k' });
    child.parentSession = root;
    assert.deepEqual(await provider().resolveDebugConfigurationWithSubstitutedVariables(undefined, child.configuration), child.configuration);
    const d = factory().createDebugAdapterDescriptor(child) as { port: number };
    assert.equal(d.port, 41234);
    fake.fire.started.fire(child);
    await wait(10);
    assert.deepEqual(child.requests, [], 'children are not watched (the proxy refuses them there)');
    await fake.rec.commands.get('sparkdap.reveal')!((globalThis as { __rows?: unknown[] }).__rows![0]);
    assert.deepEqual(fake.rec.executed.at(-1), ['workbench.debug.action.focusCallStackView']);
  });

  test('a "debugpy" attach is asked too, and stays out of the view until it answers', async () => {
    const tree = fake.rec.treeViews.get('sparkdap.executors')!.treeDataProvider as {
      getChildren(): unknown[];
      getTreeItem(n: unknown): { label: string };
    };
    const plain = session('plain', 'debugpy', { type: 'debugpy', request: 'attach', name: 'plain', connect: { host: 'h', port: 5678 } }, () => new Promise(() => undefined));
    fake.debug.activeDebugSession = plain;
    fake.fire.started.fire(plain);
    fake.fire.activeChanged.fire(plain);
    await wait(300);
    assert.deepEqual(plain.requests, [{ command: 'sparkdapWatch', args: { maxRows: 500 } }]);
    assert.equal(tree.getTreeItem(tree.getChildren()[0]).label, '2 workers · 1 stopped · 1 running', 'the proxy’s root is still shown');
    fake.fire.terminated.fire(plain);
    fake.debug.activeDebugSession = root;
  });

  test('condition completions at column 1 of a line with code only', () => {
    const p = fake.rec.completions[0].provider as { provideCompletionItems(d: unknown, pos: unknown): { label: string; kind: number }[] | undefined };
    const doc = { lineAt: () => ({ text: '    x = f(row)' }) };
    const items = p.provideCompletionItems(doc, { line: 4, character: 0 });
    assert.deepEqual(items?.map((i) => i.label), ['sparkdap.partition', 'sparkdap.stage', 'sparkdap.attempt', 'sparkdap.executor', 'sparkdap.task_attempt_id']);
    assert.ok(items?.every((i) => i.kind !== 15), 'no snippets: the widget drops them');
    assert.equal(p.provideCompletionItems(doc, { line: 4, character: 5 }), undefined);
  });

  test('a restarted root gets a new serve; the old one is stopped and the new one watched', async () => {
    const oldPid = Number(fs.readFileSync(pidFile, 'utf8'));
    const cfg = await provider().resolveDebugConfigurationWithSubstitutedVariables(
      { uri: { fsPath: dir } },
      { type: 'sparkdap', request: 'attach', name: 'job', sparkdapPath: bin },
    );
    assert.deepEqual(cfg?.connect, { host: '127.0.0.1', port: 41236 });
    const restarted = session('root-1', 'sparkdap', cfg!, (command) => (command === 'sparkdapWatch' ? { version: 1 } : {}));
    fake.debug.activeDebugSession = restarted;
    fake.fire.started.fire(restarted);
    for (let i = 0; i < 100 && alive(oldPid); i++) {
      await wait(20);
    }
    assert.equal(alive(oldPid), false);
    assert.ok(alive(Number(fs.readFileSync(pidFile, 'utf8'))));
    assert.deepEqual(restarted.requests[0], { command: 'sparkdapWatch', args: { maxRows: 500 } });
    assert.ok(fake.rec.console.some((l) => l.includes('submit --proxy 127.0.0.1:41237')), 'no submit: the line to use is printed');
    root = restarted;
  });

  test('a restart onto the same serve keeps it, and runs nothing again', async () => {
    const pid = Number(fs.readFileSync(pidFile, 'utf8'));
    const terminals = fake.rec.terminals.length;
    const console = fake.rec.console.length;
    fake.fire.terminated.fire(root);
    await wait(400);
    fake.fire.started.fire(root);
    await wait(RESTART_GRACE_MS);
    assert.ok(alive(pid));
    assert.equal(fake.rec.terminals.length, terminals);
    assert.equal(fake.rec.console.length, console);
  });

  test('the root’s end stops serve (after the restart grace) and empties the view', { timeout: 20_000 }, async () => {
    const pid = Number(fs.readFileSync(pidFile, 'utf8'));
    fake.fire.terminated.fire(root);
    await wait(RESTART_GRACE_MS - 500);
    assert.ok(alive(pid), 'kept for a restart');
    for (let i = 0; i < 200 && alive(pid); i++) {
      await wait(20);
    }
    assert.equal(alive(pid), false);
    await wait(300);
    const tree = fake.rec.treeViews.get('sparkdap.executors')!.treeDataProvider as { getChildren(): unknown[] };
    assert.deepEqual(tree.getChildren(), []);
  });

  test('a bad configuration says why and starts nothing', async () => {
    const r = await provider().resolveDebugConfigurationWithSubstitutedVariables(undefined, { type: 'sparkdap', request: 'attach', name: 'x', root: dir, ide: 'nope' });
    assert.equal(r, undefined);
    assert.ok(fake.rec.messages.some((m) => m.startsWith('error: sparkdap: "ide": "nope" is not HOST:PORT')));
  });
});
