// End to end with Spark: serve started as the extension starts it, a DAP
// client standing in for VS Code (it opens the child sessions the proxy
// asks for), the job run with the submit command line and environment the
// extension types into its terminal, and the view built from the proxy's
// events. Slow (a Spark job): runs only with SPARKDAP_E2E=1 and
// SPARKDAP_BIN set, on a machine with Java, pyspark and debugpy.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import * as net from 'node:net';
import * as path from 'node:path';
import { after, test } from 'node:test';
import { readRootSettings, submitArgv, submitEnv } from '../config';
import { encodeMessage, MessageReader, SocketDebugAdapter, type DapMessage } from '../dapsocket';
import { freePort, replayArgv, replayConfig } from '../replay';
import { asAnswer, type Answer } from '../protocol';
import { newToken } from '../resolve';
import { launchServe, type ServeHandle } from '../serve';
import { commandLine } from '../shellquote';
import { buildTree, StopClock, type ExecutorNode } from '../view/model';

const BIN = process.env.SPARKDAP_BIN;
const RUN = !!BIN && process.env.SPARKDAP_E2E === '1';
const LOANS = path.resolve(__dirname, '../../../examples/loans');

type Handler = (m: DapMessage, reply: (body: unknown, success?: boolean) => void) => void;

class Conn {
  private seq = 1;
  private readonly waiting = new Map<number, (m: DapMessage) => void>();
  onEvent: (m: DapMessage) => void = () => undefined;
  onRequest: Handler = (_m, reply) => reply(undefined, false);

  constructor(readonly sock: net.Socket) {
    const r = new MessageReader((m) => {
      if (m.type === 'response') {
        this.waiting.get(m.request_seq as number)?.(m);
      } else if (m.type === 'event') {
        this.onEvent(m);
      } else {
        this.onRequest(m, (body, success = true) =>
          sock.write(encodeMessage({ seq: this.seq++, type: 'response', request_seq: m.seq, command: m.command, success, body })),
        );
      }
    });
    sock.on('data', (b) => r.push(b));
  }

  static open(port: number, host: string): Promise<Conn> {
    return new Promise((res, rej) => {
      const s = net.connect(port, host, () => res(new Conn(s)));
      s.once('error', rej);
    });
  }

  request(command: string, args?: unknown): Promise<DapMessage> {
    const seq = this.seq++;
    return new Promise((res, rej) => {
      const t = setTimeout(() => rej(new Error(`${command}: no answer`)), 30000);
      this.waiting.set(seq, (m) => (clearTimeout(t), res(m)));
      this.sock.write(encodeMessage({ seq, type: 'request', command, arguments: args }));
    });
  }

  async attach(cfg: unknown): Promise<void> {
    await this.request('initialize', { clientID: 'vscode', adapterID: 'sparkdap', supportsStartDebuggingRequest: true, supportsRunInTerminalRequest: false });
    const r = await this.request('attach', cfg);
    assert.equal(r.success, true, String(r.message));
    await this.request('configurationDone', {});
  }
}

let serve: ServeHandle | undefined;
const conns: Conn[] = [];
after(async () => {
  conns.forEach((c) => c.sock.destroy());
  await serve?.stop();
});

test('a Spark worker stops, shows in the view, and resumes from it', { skip: !RUN && 'set SPARKDAP_E2E=1 and SPARKDAP_BIN', timeout: 300_000 }, async () => {
  const settings = readRootSettings(
    { sparkdapPath: BIN, submit: { args: ['--master', 'local[2]', '--py-files', 'loanlib.py', 'loans.py'], partitions: [1] } },
    LOANS,
  );
  const tokens = { executors: newToken(), ide: newToken() };
  serve = await launchServe(settings, tokens, { spawn, log: (l) => process.env.SPARKDAP_DEBUG && console.error('[serve]', l) });
  const rootCfg = { type: 'sparkdap', request: 'attach', name: 'e2e', justMyCode: false, connect: serve.ide, sparkdapToken: tokens.ide };

  const root = await Conn.open(serve.ide.port, serve.ide.host);
  conns.push(root);
  const answers: Answer[] = [];
  root.onEvent = (m) => {
    if (m.event === 'sparkdapWorkers') {
      const a = asAnswer(m.body);
      if (a) {
        answers.push(a);
      }
    }
  };
  // As VS Code does: a child session per startDebugging, attached where its configuration says.
  root.onRequest = (m, reply) => {
    if (m.command !== 'startDebugging') {
      reply(undefined, false);
      return;
    }
    reply({});
    const cfg = (m.arguments as { configuration: { connect: { host: string; port: number } } }).configuration;
    void Conn.open(cfg.connect.port, cfg.connect.host).then((c) => {
      conns.push(c);
      return c.attach(cfg);
    });
  };
  await root.attach(rootCfg);
  const bp = await root.request('setBreakpoints', { source: { path: path.join(LOANS, 'loanlib.py') }, breakpoints: [{ line: 12 }] });
  assert.equal(bp.success, true);
  assert.equal((await root.request('sparkdapWatch', { maxRows: 500 })).success, true);

  const argv = submitArgv(settings.sparkdapPath, settings.submit!, serve.executors);
  const job = spawn('/bin/sh', ['-c', commandLine(argv)], { cwd: LOANS, env: { ...process.env, ...submitEnv(tokens.executors, settings.submit) }, stdio: ['ignore', 'pipe', 'pipe'] });
  let jobOut = '';
  job.stdout.on('data', (b) => (jobOut += b));
  job.stderr.on('data', (b) => (jobOut += b));
  const jobDone = new Promise<number>((res) => job.on('exit', (c) => res(c ?? -1)));

  const waitAnswer = async (pred: (a: Answer) => boolean, what: string): Promise<Answer> => {
    const end = Date.now() + 180_000;
    for (;;) {
      const a = answers.find(pred);
      if (a) {
        return a;
      }
      if (Date.now() > end) {
        throw new Error(`no event with ${what}; job output:\n${jobOut.slice(-3000)}`);
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  };

  const stoppedAnswer = await waitAnswer((a) => (a.counts?.stopped ?? 0) > 0, 'a stopped worker');
  const stops = new StopClock();
  stops.observe(stoppedAnswer.known ?? [], Date.now());
  const m = buildTree(stoppedAnswer, { now: Date.now(), stoppedSince: (w) => stops.sinceOf(w) });
  const ex = m.roots.filter((n): n is ExecutorNode => n.kind === 'executor');
  const rows = ex.flatMap((e) => e.children.flatMap((s) => s.children));
  const stopped = rows.find((r) => r.state === 'stopped')!;
  console.log(
    [m.roots[0].label, m.roots[0].description, ...ex.flatMap((e) => [`${e.label} (${e.description})`, ...e.children.flatMap((s) => [`  ${s.label} (${s.description})`, ...s.children.map((r) => `    ${r.label} — ${r.description} [${r.contextValue}]`)])])].join('\n'),
  );
  assert.equal(stopped.worker.task?.partition, 1);
  assert.match(stopped.description, /^stopped at loanlib\.py:12/);
  assert.match(stopped.contextValue, /;stopped;debug;task;/);

  // Capture the stopped call, as the view's Capture does.
  const cap = await root.request('sparkdap', { op: 'capture', executor: stopped.worker.executor });
  assert.equal(cap.success, true, String(cap.message));
  const capture = asAnswer(cap.body)?.capture;
  assert.ok(capture?.path);

  // Done debugging: clear the breakpoint, resume that worker from the view, and every other stop.
  await root.request('setBreakpoints', { source: { path: path.join(LOANS, 'loanlib.py') }, breakpoints: [] });
  const c = await root.request('sparkdap', { op: 'continue', executor: stopped.worker.executor });
  assert.equal(c.success, true, String(c.message));
  await root.request('sparkdap', { op: 'continue-all' });
  assert.equal(await jobDone, 0, jobOut.slice(-3000));
  await waitAnswer((a) => (a.counts?.stopped ?? 0) === 0 && (a.counts?.finished ?? 0) + (a.counts?.idle ?? 0) > 0, 'the workers done');

  // Replay it under the debugger, as the view's Replay does: replay's
  // debugpy listens a moment after it starts; the adapter retries.
  const port = await freePort();
  const rargv = replayArgv(settings.sparkdapPath, '127.0.0.1', port, capture.path);
  const adapter = new SocketDebugAdapter('127.0.0.1', port, { retryMs: 20_000 });
  const fromReplay: DapMessage[] = [];
  adapter.onDidSendMessage((m) => fromReplay.push(m));
  adapter.handleMessage({ seq: 1, type: 'request', command: 'initialize', arguments: { clientID: 'vscode', adapterID: 'sparkdap' } });
  adapter.handleMessage({ seq: 2, type: 'request', command: 'attach', arguments: replayConfig('it', '127.0.0.1', port) });
  const rp = spawn(rargv[0], rargv.slice(1), { cwd: LOANS, stdio: ['ignore', 'pipe', 'pipe'] });
  let replayOut = '';
  rp.stdout.on('data', (b) => (replayOut += b));
  rp.stderr.on('data', (b) => (replayOut += b));
  const replayDone = new Promise<number>((res) => rp.on('exit', (c) => res(c ?? -1)));
  const end = Date.now() + 60_000;
  while (!fromReplay.some((m) => m.type === 'event' && m.event === 'initialized') && Date.now() < end) {
    await new Promise((r) => setTimeout(r, 50));
  }
  adapter.handleMessage({ seq: 3, type: 'request', command: 'configurationDone', arguments: {} });
  assert.equal(await replayDone, 0, replayOut);
  adapter.dispose();
  const attached = fromReplay.find((m) => m.type === 'response' && m.command === 'attach');
  assert.equal(attached?.success, true, JSON.stringify(attached));
  console.log(`replay of ${capture.path}: ${replayOut.trim().split('\n').slice(-2).join(' / ')}`);
});
