// Against a real `sparkdap serve`: set SPARKDAP_BIN to a built binary
// (go build -o /tmp/sparkdap ./cmd/sparkdap) to run it; skipped otherwise,
// so `npm test` needs no Go. It checks what the fakes cannot: serve's real
// flags and environment, the ready file, and the view protocol on the root
// DAP session (sparkdapWatch, sparkdapWorkers, the sparkdap request).

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { encodeMessage, MessageReader, type DapMessage } from '../dapsocket';
import { asAnswer, selectAll, selectNone, selectPartition } from '../protocol';
import { attachConfig, readRootSettings } from '../config';
import { launchServe, type ServeHandle } from '../serve';
import { newToken } from '../resolve';

const BIN = process.env.SPARKDAP_BIN;

class Client {
  private seq = 1;
  private readonly waiting = new Map<number, (m: DapMessage) => void>();
  readonly events: DapMessage[] = [];
  private readonly eventWaiters: { name: string; f: (m: DapMessage) => void }[] = [];

  constructor(private readonly sock: net.Socket) {
    const r = new MessageReader((m) => {
      if (m.type === 'response') {
        this.waiting.get(m.request_seq as number)?.(m);
      } else if (m.type === 'event') {
        this.events.push(m);
        for (const w of this.eventWaiters.filter((w) => w.name === m.event)) {
          this.eventWaiters.splice(this.eventWaiters.indexOf(w), 1);
          w.f(m);
        }
      } else if (m.type === 'request') {
        // Reverse requests (startDebugging): refused, no IDE here.
        sock.write(encodeMessage({ seq: this.seq++, type: 'response', request_seq: m.seq, command: m.command, success: false }));
      }
    });
    sock.on('data', (b) => r.push(b));
  }

  static connect(port: number, host: string): Promise<Client> {
    return new Promise((resolve, reject) => {
      const s = net.connect(port, host, () => resolve(new Client(s)));
      s.once('error', reject);
    });
  }

  request(command: string, args?: unknown, ms = 10000): Promise<DapMessage> {
    const seq = this.seq++;
    return new Promise((resolve, reject) => {
      const t = setTimeout(() => reject(new Error(`${command}: no response in ${ms} ms`)), ms);
      this.waiting.set(seq, (m) => {
        clearTimeout(t);
        resolve(m);
      });
      this.sock.write(encodeMessage({ seq, type: 'request', command, arguments: args }));
    });
  }

  nextEvent(name: string, ms = 10000): Promise<DapMessage> {
    return new Promise((resolve, reject) => {
      const t = setTimeout(() => reject(new Error(`no ${name} event in ${ms} ms`)), ms);
      this.eventWaiters.push({ name, f: (m) => (clearTimeout(t), resolve(m)) });
    });
  }

  close(): void {
    this.sock.destroy();
  }
}

describe('with a real sparkdap serve', { skip: !BIN && 'set SPARKDAP_BIN to run' }, () => {
  let serve: ServeHandle;
  let client: Client;
  const tokens = { executors: newToken(), ide: newToken() };
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'sparkdap-root-'));

  before(async () => {
    const s = readRootSettings({ sparkdapPath: BIN }, root);
    serve = await launchServe(s, tokens, { spawn, log: (l) => process.env.SPARKDAP_DEBUG && console.error(l) });
  });

  after(async () => {
    client?.close();
    await serve?.stop();
  });

  test('a wrong IDE token is refused', async () => {
    const c = await Client.connect(serve.ide.port, serve.ide.host);
    await c.request('initialize', { clientID: 'vscode', adapterID: 'sparkdap', supportsStartDebuggingRequest: true });
    const r = await c.request('attach', { type: 'sparkdap', request: 'attach', sparkdapToken: 'wrong', connect: serve.ide });
    assert.equal(r.success, false);
    assert.match(String(r.message), /sparkdapToken/);
    c.close();
  });

  test('attach with the resolved configuration', async () => {
    client = await Client.connect(serve.ide.port, serve.ide.host);
    const init = await client.request('initialize', { clientID: 'vscode', adapterID: 'sparkdap', supportsStartDebuggingRequest: true });
    assert.equal(init.success, true);
    const cfg = attachConfig({ type: 'sparkdap', request: 'attach', name: 'it', justMyCode: false }, serve.ide, tokens.ide);
    const r = await client.request('attach', cfg);
    assert.equal(r.success, true, String(r.message));
    await client.request('configurationDone', {});
  });

  test('sparkdapWatch answers, then sparkdapWorkers comes with counts', async () => {
    const ev = client.nextEvent('sparkdapWorkers');
    const r = await client.request('sparkdapWatch', { maxRows: 500 });
    assert.equal(r.success, true, String(r.message));
    assert.deepEqual(r.body, { version: 1 });
    const a = asAnswer((await ev).body);
    assert.ok(a);
    assert.deepEqual(a.counts, { workers: 0, running: 0, stopped: 0, idle: 0, finished: 0, failed: 0 });
  });

  test('select none, a partition, all, as submitted; each changes the event', async () => {
    for (const [req, want] of [
      [{ op: 'select', selection: selectNone() }, { partitions: [], stages: null, executors: null, sampleRate: 1 }],
      [{ op: 'select', selection: selectPartition(7) }, { partitions: [7], stages: null, executors: null, sampleRate: 1 }],
      [{ op: 'select', selection: selectAll() }, { partitions: null, stages: null, executors: null, sampleRate: 1 }],
    ] as const) {
      const ev = client.nextEvent('sparkdapWorkers');
      const r = await client.request('sparkdap', req);
      assert.equal(r.success, true, String(r.message));
      assert.deepEqual(asAnswer(r.body)?.selection, want);
      assert.deepEqual(asAnswer((await ev).body)?.selection, want);
    }
    const r = await client.request('sparkdap', { op: 'select', asSubmitted: true });
    assert.equal(asAnswer(r.body)?.asSubmitted, true);
  });

  test('errors come back as DAP errors with the proxy’s words', async () => {
    const r = await client.request('sparkdap', { op: 'continue', executor: 999 });
    assert.equal(r.success, false);
    assert.ok(String(r.message).length > 0);
    const c = await client.request('sparkdap', { op: 'capture', executor: 999 });
    assert.equal(c.success, false);
    const k = await client.request('sparkdap', { op: 'known-workers', maxRows: 10 });
    assert.equal(k.success, true);
    assert.ok(asAnswer(k.body)?.counts);
    const all = await client.request('sparkdap', { op: 'continue-all' });
    assert.equal(all.success, true, String(all.message));
  });
});
