import assert from 'node:assert/strict';
import * as net from 'node:net';
import { describe, test } from 'node:test';
import { encodeMessage, MessageReader, SocketDebugAdapter, type DapMessage } from '../dapsocket';
import { freePort } from '../replay';

describe('MessageReader', () => {
  test('reads frames split and merged anywhere', () => {
    const msgs = [{ seq: 1, type: 'request', command: 'initialize' }, { seq: 2, type: 'event', event: 'x', body: { s: 'ünï' } }];
    const bytes = Buffer.concat(msgs.map(encodeMessage));
    for (let cut = 1; cut < bytes.length; cut += 7) {
      const got: DapMessage[] = [];
      const r = new MessageReader((m) => got.push(m));
      r.push(bytes.subarray(0, cut));
      r.push(bytes.subarray(cut));
      assert.deepEqual(got, msgs);
    }
  });

  test('refuses a header with no length', () => {
    const r = new MessageReader(() => undefined);
    assert.throws(() => r.push(Buffer.from('X: 1\r\n\r\n{}')), /Content-Length/);
  });
});

function waitFor(cond: () => boolean, ms = 5000): Promise<void> {
  const end = Date.now() + ms;
  return new Promise((resolve, reject) => {
    const tick = () => (cond() ? resolve() : Date.now() > end ? reject(new Error('timed out')) : setTimeout(tick, 10));
    tick();
  });
}

describe('SocketDebugAdapter', () => {
  test('connects once the listener is up, sending what VS Code said before', async () => {
    const port = await freePort();
    const got: DapMessage[] = [];
    const a = new SocketDebugAdapter('127.0.0.1', port, { retryMs: 5000, intervalMs: 20 });
    const fromServer: DapMessage[] = [];
    a.onDidSendMessage((m) => fromServer.push(m));
    a.handleMessage({ seq: 1, type: 'request', command: 'initialize' });
    // The listener comes up late, as replay's debugpy does.
    await new Promise((r) => setTimeout(r, 150));
    const srv = net.createServer((c) => {
      const r = new MessageReader((m) => {
        got.push(m);
        c.write(encodeMessage({ seq: 1, type: 'response', request_seq: m.seq, command: m.command, success: true }));
      });
      c.on('data', (b) => r.push(b));
    });
    await new Promise<void>((r) => srv.listen(port, '127.0.0.1', r));
    try {
      await waitFor(() => fromServer.length === 1);
      assert.equal(got[0].command, 'initialize');
      assert.equal(fromServer[0].success, true);
      a.handleMessage({ seq: 2, type: 'request', command: 'attach' });
      await waitFor(() => fromServer.length === 2);
      assert.equal(got[1].command, 'attach');
    } finally {
      a.dispose();
      srv.close();
    }
  });

  test('gives up after retryMs with an error VS Code shows', async () => {
    const port = await freePort();
    const a = new SocketDebugAdapter('127.0.0.1', port, { retryMs: 100, intervalMs: 20 });
    const out: DapMessage[] = [];
    a.onDidSendMessage((m) => out.push(m));
    a.handleMessage({ seq: 1, type: 'request', command: 'initialize' });
    await waitFor(() => out.length >= 2);
    assert.equal(out[0].type, 'response');
    assert.equal(out[0].success, false);
    assert.match(String(out[0].message), /could not connect to 127\.0\.0\.1:\d+ within 0 s/);
    assert.equal(out[1].event, 'terminated');
    a.dispose();
  });

  test('the server hanging up ends the session', async () => {
    const srv = net.createServer((c) => c.end());
    await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
    const port = (srv.address() as net.AddressInfo).port;
    const a = new SocketDebugAdapter('127.0.0.1', port, { retryMs: 1000 });
    const out: DapMessage[] = [];
    a.onDidSendMessage((m) => out.push(m));
    try {
      await waitFor(() => out.some((m) => m.event === 'terminated'));
    } finally {
      a.dispose();
      srv.close();
    }
  });
});
