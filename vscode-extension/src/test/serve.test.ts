import assert from 'node:assert/strict';
import type { ChildProcess, SpawnOptions } from 'node:child_process';
import { EventEmitter } from 'node:events';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { PassThrough } from 'node:stream';
import { describe, test } from 'node:test';
import {
  connectHost,
  launchServe,
  parseHostPort,
  parseReady,
  serveArgs,
  serveEnv,
  TailBuffer,
  waitForReady,
  type ServeOptions,
  type SpawnFn,
} from '../serve';

const opts: ServeOptions = {
  sparkdapPath: '/opt/bin/sparkdap',
  root: '/home/me/job',
  ide: '127.0.0.1:0',
  executors: '127.0.0.1:0',
  serveArgs: ['--map', '/opt/jobs=/home/me/job'],
};
const tokens = { executors: 'e'.repeat(64), ide: 'i'.repeat(64) };

describe('serve arguments', () => {
  test('flags, the ready file, then the user’s; no token on the command line', () => {
    const args = serveArgs(opts, '/tmp/x/ready.json');
    assert.deepEqual(args, [
      'serve', '--root', '/home/me/job', '--ide', '127.0.0.1:0', '--executors', '127.0.0.1:0',
      '--ready-file', '/tmp/x/ready.json', '--live', 'off', '--map', '/opt/jobs=/home/me/job',
    ]);
    assert.ok(!args.join(' ').includes(tokens.executors));
  });

  test('tokens in the environment, replacing inherited ones', () => {
    const env = serveEnv({ PATH: '/bin', SPARKDAP_TOKEN: 'old' }, tokens);
    assert.equal(env.SPARKDAP_TOKEN, tokens.executors);
    assert.equal(env.SPARKDAP_IDE_TOKEN, tokens.ide);
    assert.equal(env.PATH, '/bin');
  });

  test('addresses', () => {
    assert.deepEqual(parseHostPort('127.0.0.1:4711'), { host: '127.0.0.1', port: 4711 });
    assert.deepEqual(parseHostPort('[::1]:5678'), { host: '::1', port: 5678 });
    assert.deepEqual(parseHostPort(':0'), { host: '', port: 0 });
    assert.throws(() => parseHostPort('localhost'), /HOST:PORT/);
    assert.throws(() => parseHostPort('h:99999'), /port/);
    assert.equal(connectHost('0.0.0.0'), '127.0.0.1');
    assert.equal(connectHost('::'), '127.0.0.1');
    assert.equal(connectHost('10.0.0.2'), '10.0.0.2');
  });

  test('ready file contents', () => {
    assert.deepEqual(parseReady('{"ide":"127.0.0.1:4711","executors":"127.0.0.1:5678","token":"t"}'), {
      ide: '127.0.0.1:4711',
      executors: '127.0.0.1:5678',
    });
    assert.throws(() => parseReady('{"executors":"x"}'));
    assert.throws(() => parseReady('{"ide":"nope","executors":"x"}'));
  });

  test('TailBuffer keeps the first and the last lines, partial line included', () => {
    const t = new TailBuffer(3, 1);
    t.push('a\nb\n');
    assert.equal(t.text(), 'a\nb');
    t.push('c\nd\ne\nf');
    assert.equal(t.text(), 'a\n…\ne\nf');
    assert.equal(t.text(4), 'a\n…\nd\ne\nf');
    const flag = new TailBuffer();
    flag.push('flag provided but not defined: -bogus\nusage: sparkdap serve [flags]\n' + Array.from({ length: 40 }, (_, i) => `  --flag${i}`).join('\n') + '\n');
    assert.match(flag.text(8), /^flag provided but not defined: -bogus\nusage: sparkdap serve \[flags\]\n…\n/);
  });
});

function tmpdir(): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), 'sparkdap-test-'));
}

describe('waitForReady', () => {
  test('waits for the file to appear', async () => {
    const dir = tmpdir();
    const f = path.join(dir, 'ready.json');
    setTimeout(() => fs.writeFileSync(f, '{"ide":"127.0.0.1:1","executors":"127.0.0.1:2"}'), 60);
    const r = await waitForReady(f, { timeoutMs: 5000, pollMs: 10 });
    assert.equal(r.ide, '127.0.0.1:1');
  });

  test('bounded, with a reason', async () => {
    const dir = tmpdir();
    await assert.rejects(waitForReady(path.join(dir, 'never'), { timeoutMs: 50, pollMs: 10 }), /no ready file/);
    fs.writeFileSync(path.join(dir, 'bad'), '{');
    await assert.rejects(waitForReady(path.join(dir, 'bad'), { timeoutMs: 50, pollMs: 10 }), /unreadable/);
  });

  test('stops early when told', async () => {
    await assert.rejects(waitForReady('/nonexistent/x', { timeoutMs: 5000, failed: () => 'it exited' }), /it exited/);
  });
});

/** A process that behaves as serve does, as far as the launcher sees it. */
class FakeServe extends EventEmitter {
  stdout = new PassThrough();
  stderr = new PassThrough();
  pid = 4242;
  signals: string[] = [];
  /** Whether SIGTERM ends it (else only SIGKILL does). */
  termEnds = true;

  kill(sig: string): boolean {
    this.signals.push(sig);
    if (sig === 'SIGKILL' || this.termEnds) {
      setImmediate(() => this.emit('exit', null, sig));
    }
    return true;
  }
}

interface Spawned {
  cmd: string;
  args: readonly string[];
  options: SpawnOptions;
  proc: FakeServe;
}

function fakeSpawn(behave: (s: Spawned) => void): { spawn: SpawnFn; calls: Spawned[] } {
  const calls: Spawned[] = [];
  const spawn: SpawnFn = (cmd, args, options) => {
    const s = { cmd, args, options, proc: new FakeServe() };
    calls.push(s);
    behave(s);
    return s.proc as unknown as ChildProcess;
  };
  return { spawn, calls };
}

function readyFileOf(args: readonly string[]): string {
  return args[args.indexOf('--ready-file') + 1];
}

describe('launchServe', () => {
  test('starts serve, waits for its ready file, and stops it', async () => {
    const { spawn, calls } = fakeSpawn((s) => {
      s.proc.stderr.write('sparkdap: IDE port 127.0.0.1:41234 (attach your debugger here)\n');
      setTimeout(() => {
        fs.writeFileSync(readyFileOf(s.args), JSON.stringify({ ide: '127.0.0.1:41234', executors: '127.0.0.1:41235', token: tokens.executors }));
      }, 30);
    });
    const logged: string[] = [];
    const h = await launchServe(opts, tokens, { spawn, tmpDir: tmpdir(), pollMs: 10, log: (l) => logged.push(l) });
    assert.deepEqual(h.ide, { host: '127.0.0.1', port: 41234 });
    assert.equal(h.executors, '127.0.0.1:41235');
    const c = calls[0];
    assert.equal(c.cmd, '/opt/bin/sparkdap');
    assert.equal(c.options.cwd, '/home/me/job');
    assert.equal((c.options.env as NodeJS.ProcessEnv).SPARKDAP_TOKEN, tokens.executors);
    assert.equal((c.options.env as NodeJS.ProcessEnv).SPARKDAP_IDE_TOKEN, tokens.ide);
    // The ready file held the token: gone once read. The token file stays, private.
    assert.equal(fs.existsSync(readyFileOf(c.args)), false);
    assert.equal(fs.readFileSync(h.tokenFile, 'utf8').trim(), tokens.executors);
    if (process.platform !== 'win32') {
      assert.equal(fs.statSync(h.tokenFile).mode & 0o777, 0o600);
      assert.equal(fs.statSync(path.dirname(h.tokenFile)).mode & 0o777, 0o700);
    }
    assert.deepEqual(logged, ['sparkdap: IDE port 127.0.0.1:41234 (attach your debugger here)']);
    await h.stop();
    assert.deepEqual(c.proc.signals, ['SIGTERM']);
    assert.equal(h.exited, true);
    assert.equal(fs.existsSync(path.dirname(h.tokenFile)), false);
  });

  test('SIGKILL when SIGTERM is not enough', async () => {
    const { spawn, calls } = fakeSpawn((s) => {
      s.proc.termEnds = false;
      fs.writeFileSync(readyFileOf(s.args), '{"ide":"0.0.0.0:1","executors":"0.0.0.0:2"}');
    });
    const h = await launchServe(opts, tokens, { spawn, tmpDir: tmpdir(), pollMs: 10, killAfterMs: 50 });
    assert.equal(h.ide.host, '127.0.0.1', 'a wildcard listener is reached on loopback');
    await h.stop();
    assert.deepEqual(calls[0].proc.signals, ['SIGTERM', 'SIGKILL']);
  });

  test('a timeout names the binary and quotes serve’s last lines', async () => {
    const { spawn, calls } = fakeSpawn((s) => {
      s.proc.stderr.write('sparkdap: --executors 127.0.0.1:0: something is wrong\nsecond line\n');
    });
    await assert.rejects(
      launchServe(opts, tokens, { spawn, tmpDir: tmpdir(), pollMs: 10, timeoutMs: 100 }),
      (e: Error) => {
        assert.match(e.message, /sparkdap serve \(\/opt\/bin\/sparkdap\) did not get ready within 100 ms/);
        assert.match(e.message, /something is wrong\nsecond line/);
        return true;
      },
    );
    assert.deepEqual(calls[0].proc.signals, ['SIGTERM'], 'the stuck serve is stopped');
  });

  test('an exit before ready says so, with its output', async () => {
    const { spawn } = fakeSpawn((s) => {
      s.proc.stderr.write('sparkdap: the token is too weak\n');
      setTimeout(() => s.proc.emit('exit', 2, null), 20);
    });
    await assert.rejects(launchServe(opts, tokens, { spawn, tmpDir: tmpdir(), pollMs: 10 }), (e: Error) => {
      assert.match(e.message, /exited with status 2 before it was ready/);
      assert.match(e.message, /the token is too weak/);
      return true;
    });
  });

  test('a missing binary says what to set', async () => {
    const { spawn } = fakeSpawn((s) => {
      (s.proc as unknown as { pid: undefined }).pid = undefined;
      setImmediate(() => s.proc.emit('error', Object.assign(new Error('spawn sparkdap ENOENT'), { code: 'ENOENT' })));
    });
    await assert.rejects(launchServe(opts, tokens, { spawn, tmpDir: tmpdir(), pollMs: 10 }), (e: Error) => {
      assert.match(e.message, /^cannot run the sparkdap binary "\/opt\/bin\/sparkdap" \(not found\)\. Set "sparkdapPath"/);
      assert.match(e.message, /or put it on PATH$/);
      return true;
    });
  });

  test('with a real process: node standing in for sparkdap', { skip: process.platform === 'win32' }, async () => {
    const dir = tmpdir();
    const script = path.join(dir, 'fake.js');
    fs.writeFileSync(
      script,
      `const fs = require('fs');
       const a = process.argv.slice(2);
       if (a[0] !== 'serve' || !process.env.SPARKDAP_TOKEN || !process.env.SPARKDAP_IDE_TOKEN) process.exit(3);
       const f = a[a.indexOf('--ready-file') + 1];
       fs.writeFileSync(f + '.tmp', JSON.stringify({ide: '127.0.0.1:4711', executors: '127.0.0.1:5678', token: process.env.SPARKDAP_TOKEN}));
       fs.renameSync(f + '.tmp', f);
       process.on('SIGTERM', () => process.exit(0));
       setInterval(() => {}, 1000);`,
    );
    const bin = path.join(dir, 'sparkdap');
    fs.writeFileSync(bin, `#!/bin/sh\nexec "${process.execPath}" "${script}" "$@"\n`, { mode: 0o755 });
    const { spawn } = await import('node:child_process');
    const h = await launchServe({ ...opts, sparkdapPath: bin, root: dir }, tokens, { spawn, tmpDir: dir, pollMs: 20 });
    assert.deepEqual(h.ide, { host: '127.0.0.1', port: 4711 });
    assert.ok(h.pid);
    await h.stop();
    assert.equal(h.exited, true);
  });
});
