// Starting `sparkdap serve` for a root session and waiting until it
// listens. No vscode here: the process, the file system and the clock are
// passed in, so tests drive it with a fake process and temp files.
//
// Tokens go through the environment (SPARKDAP_TOKEN, SPARKDAP_IDE_TOKEN,
// which serve reads when no flag gives one), never on a command line that
// `ps` shows to every user. The ready file holds the executors' token, so
// it lives in a fresh private directory (mkdtemp: mode 0700) and is
// deleted once read.

import type { ChildProcess, SpawnOptions } from 'node:child_process';
import * as fs from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { IDE_TOKEN_ENV, TOKEN_ENV } from './protocol';

/**
 * How long serve outlives its root session's end. VS Code restarts a
 * session (Restart, Ctrl+Shift+F5) by ending it and attaching again 300 ms
 * later, with the configuration it resolved before (so the same serve)
 * unless launch.json changed: serve must still be there then.
 */
export const RESTART_GRACE_MS = 3_000;

export interface ServeOptions {
  sparkdapPath: string;
  root: string;
  /** HOST:PORT for the IDE port; port 0 picks a free one. */
  ide: string;
  /** HOST:PORT for the executor port. */
  executors: string;
  /** Extra serve flags from the launch configuration, after the extension's own. */
  serveArgs: readonly string[];
}

export interface Tokens {
  /** The executors' access token: the workers present it (SPARKDAP_TOKEN). */
  executors: string;
  /** The IDE token: VS Code presents it as the attach argument sparkdapToken. */
  ide: string;
}

/** The ready file's fields: serve writes {"ide","executors","token"}. */
export interface Ready {
  ide: string;
  executors: string;
}

export interface HostPort {
  host: string;
  port: number;
}

/** serve's command line (after the binary): tokens are not on it. */
export function serveArgs(o: ServeOptions, readyFile: string): string[] {
  return [
    'serve',
    '--root', o.root,
    '--ide', o.ide,
    '--executors', o.executors,
    '--ready-file', readyFile,
    // The status block redraws a terminal; here stderr is a pipe to the
    // output channel, which wants plain lines.
    '--live', 'off',
    ...o.serveArgs,
  ];
}

/** serve's environment: the extension's, with both tokens set (and any inherited ones replaced). */
export function serveEnv(base: NodeJS.ProcessEnv, t: Tokens): NodeJS.ProcessEnv {
  return { ...base, [TOKEN_ENV]: t.executors, [IDE_TOKEN_ENV]: t.ide };
}

/** Splits "127.0.0.1:4711" or "[::1]:4711". */
export function parseHostPort(addr: string): HostPort {
  const m = /^(?:\[([^\]]*)\]|([^:]*)):(\d{1,5})$/.exec(addr.trim());
  if (!m) {
    throw new Error(`"${addr}" is not HOST:PORT`);
  }
  const port = Number(m[3]);
  if (port < 0 || port > 65535) {
    throw new Error(`"${addr}": port ${port} is not 0..65535`);
  }
  return { host: m[1] ?? m[2] ?? '', port };
}

/** Where to connect to a listener on host: a wildcard address is reached on loopback. */
export function connectHost(host: string): string {
  return host === '' || host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host;
}

/** Reads the ready file's text; throws when it is not a complete ready file. */
export function parseReady(text: string): Ready {
  const v = JSON.parse(text) as Record<string, unknown>;
  if (typeof v !== 'object' || v === null || typeof v.ide !== 'string' || typeof v.executors !== 'string') {
    throw new Error('the ready file lacks "ide" or "executors"');
  }
  parseHostPort(v.ide);
  return { ide: v.ide, executors: v.executors };
}

/**
 * Keeps the first and the last lines of a stream, for error messages: a
 * flag error prints its cause first and the usage after it, a failure at
 * run time prints it last.
 */
export class TailBuffer {
  private head: string[] = [];
  private lines: string[] = [];
  private dropped = false;
  private partial = '';

  constructor(
    private readonly max = 20,
    private readonly headMax = 2,
  ) {}

  push(chunk: string): void {
    const parts = (this.partial + chunk).split(/\r?\n/);
    this.partial = parts.pop() ?? '';
    for (const l of parts) {
      if (l.trim() === '') {
        continue;
      }
      if (this.head.length < this.headMax) {
        this.head.push(l);
      } else {
        this.lines.push(l);
      }
    }
    if (this.lines.length > this.max) {
      this.lines = this.lines.slice(-this.max);
      this.dropped = true;
    }
  }

  /** At most n lines: all of them, or the first ones, "…", and the last ones. */
  text(n = this.max): string {
    const rest = this.partial.trim() !== '' ? [...this.lines, this.partial] : this.lines;
    const all = [...this.head, ...rest];
    if (all.length <= n && !this.dropped) {
      return all.join('\n');
    }
    const tail = Math.max(1, n - this.head.length);
    return [...this.head, '…', ...rest.slice(-tail)].join('\n');
  }
}

export interface WaitOptions {
  timeoutMs: number;
  pollMs?: number;
  /** Why to stop waiting early (the process exited), or undefined. */
  failed?: () => string | undefined;
  sleep?: (ms: number) => Promise<void>;
  now?: () => number;
  readFile?: (p: string) => Promise<string>;
}

export class ReadyTimeout extends Error {}

/**
 * Polls for the ready file. serve writes it whole (a rename), so a file
 * that exists is complete; one that does not parse yet is read again
 * rather than trusted.
 */
export async function waitForReady(file: string, o: WaitOptions): Promise<Ready> {
  const sleep = o.sleep ?? ((ms: number) => new Promise<void>((r) => setTimeout(r, ms)));
  const now = o.now ?? Date.now;
  const readFile = o.readFile ?? ((p: string) => fs.readFile(p, 'utf8'));
  const deadline = now() + o.timeoutMs;
  let lastErr = '';
  for (;;) {
    const why = o.failed?.();
    if (why !== undefined) {
      throw new Error(why);
    }
    try {
      return parseReady(await readFile(file));
    } catch (e) {
      const err = e as NodeJS.ErrnoException;
      if (err.code !== 'ENOENT') {
        lastErr = err.message;
      }
    }
    if (now() >= deadline) {
      throw new ReadyTimeout(lastErr ? `the ready file stayed unreadable: ${lastErr}` : 'no ready file');
    }
    await sleep(o.pollMs ?? 100);
  }
}

export type SpawnFn = (command: string, args: readonly string[], options: SpawnOptions) => ChildProcess;

export interface LaunchDeps {
  spawn: SpawnFn;
  env?: NodeJS.ProcessEnv;
  tmpDir?: string;
  timeoutMs?: number;
  pollMs?: number;
  /** Each line serve prints, for the output channel. */
  log?: (line: string) => void;
  /** SIGTERM, then SIGKILL after this long. */
  killAfterMs?: number;
}

export interface ServeHandle {
  ide: HostPort;
  /** The executor port as serve listens on it ("127.0.0.1:41234"). */
  executors: string;
  /** A file (mode 0600) holding the executors' token, for the printed submit line. */
  tokenFile: string;
  pid: number | undefined;
  readonly exited: boolean;
  /** Resolves when the process is gone. */
  readonly done: Promise<void>;
  /** SIGTERM, SIGKILL if it is still there after killAfterMs; removes the private directory. */
  stop(): Promise<void>;
}

function describeExit(code: number | null, signal: NodeJS.Signals | null): string {
  return signal ? `was killed by ${signal}` : `exited with status ${code}`;
}

/** Starts serve and resolves once its ready file says where it listens. */
export async function launchServe(o: ServeOptions, tokens: Tokens, deps: LaunchDeps): Promise<ServeHandle> {
  const dir = await fs.mkdtemp(path.join(deps.tmpDir ?? os.tmpdir(), 'sparkdap-'));
  const readyFile = path.join(dir, 'ready.json');
  const tokenFile = path.join(dir, 'token');
  await fs.writeFile(tokenFile, tokens.executors + '\n', { mode: 0o600 });
  const cleanup = () => fs.rm(dir, { recursive: true, force: true }).catch(() => undefined);

  const tail = new TailBuffer();
  let failure: string | undefined;
  let exited = false;
  let resolveDone!: () => void;
  const done = new Promise<void>((r) => (resolveDone = r));

  let child: ChildProcess;
  try {
    child = deps.spawn(o.sparkdapPath, serveArgs(o, readyFile), {
      cwd: o.root,
      env: serveEnv(deps.env ?? process.env, tokens),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
  } catch (e) {
    await cleanup();
    throw new Error(startError(o.sparkdapPath, (e as Error).message));
  }
  const onData = (b: Buffer | string) => {
    const s = b.toString();
    tail.push(s);
    if (deps.log) {
      for (const l of s.split(/\r?\n/)) {
        if (l !== '') {
          deps.log(l);
        }
      }
    }
  };
  child.stdout?.on('data', onData);
  child.stderr?.on('data', onData);
  let cannotStart = false;
  child.on('error', (e: NodeJS.ErrnoException) => {
    cannotStart ||= child.pid === undefined;
    failure ??= startError(o.sparkdapPath, e.code === 'ENOENT' ? 'not found' : e.message);
    if (e.code === 'ENOENT' || child.pid === undefined) {
      exited = true;
      resolveDone();
    }
  });
  child.on('exit', (code, signal) => {
    exited = true;
    failure ??= `sparkdap serve (${o.sparkdapPath}) ${describeExit(code, signal)} before it was ready`;
    resolveDone();
  });

  let killTimer: ReturnType<typeof setTimeout> | undefined;
  const stop = async (): Promise<void> => {
    if (!exited) {
      child.kill('SIGTERM');
      killTimer = setTimeout(() => {
        if (!exited) {
          child.kill('SIGKILL');
        }
      }, deps.killAfterMs ?? 5000);
      await done;
      clearTimeout(killTimer);
    }
    await cleanup();
  };

  const withTail = (msg: string): string => {
    const t = tail.text(8);
    return t ? `${msg}. Its last output:\n${t}` : `${msg}; it printed nothing.`;
  };

  let ready: Ready;
  try {
    ready = await waitForReady(readyFile, {
      timeoutMs: deps.timeoutMs ?? 20000,
      pollMs: deps.pollMs,
      failed: () => failure,
    });
  } catch (e) {
    await stop();
    if (e instanceof ReadyTimeout) {
      const ms = deps.timeoutMs ?? 20000;
      const within = ms >= 1000 ? `${Math.round(ms / 1000)} s` : `${ms} ms`;
      throw new Error(withTail(`sparkdap serve (${o.sparkdapPath}) did not get ready within ${within} (${e.message})`));
    }
    throw new Error(cannotStart ? (e as Error).message : withTail((e as Error).message));
  } finally {
    // It holds the executors' token; the token file stays for the printed submit line.
    await fs.rm(readyFile, { force: true }).catch(() => undefined);
  }
  const hp = parseHostPort(ready.ide);
  return {
    ide: { host: connectHost(hp.host), port: hp.port },
    executors: ready.executors,
    tokenFile,
    pid: child.pid,
    get exited() {
      return exited;
    },
    done,
    stop,
  };
}

function startError(bin: string, why: string): string {
  return (
    `cannot run the sparkdap binary "${bin}" (${why}). Set "sparkdapPath" in the launch configuration ` +
    '(or the setting sparkdap.path) to the binary built with `go build -o sparkdap ./cmd/sparkdap`, or put it on PATH'
  );
}
