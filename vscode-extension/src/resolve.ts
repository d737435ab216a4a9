// Resolving a "sparkdap" configuration before VS Code attaches: for a
// root, start serve and point the configuration at it; every other kind
// passes through. The launcher and the token source are passed in, so the
// whole path is tested without VS Code or a sparkdap binary.

import { randomBytes } from 'node:crypto';
import {
  attachConfig,
  ConfigError,
  readRootSettings,
  sessionKind,
  type Config,
  type RootSettings,
  type SessionKind,
} from './config';
import { EXECUTOR_ARG } from './protocol';
import type { HostPort, ServeOptions, Tokens } from './serve';

/** 32 random bytes, hex: 256 bits, well over serve's 128-bit floor. */
export function newToken(): string {
  return randomBytes(32).toString('hex');
}

export interface Launched {
  ide: HostPort;
  executors: string;
}

export interface ResolveDeps<S extends Launched> {
  launch(o: ServeOptions, t: Tokens): Promise<S>;
  newToken?: () => string;
  /** sparkdapPath when the configuration gives none (the setting sparkdap.path). */
  defaultPath?: string;
}

export interface Resolved<S extends Launched> {
  kind: SessionKind;
  config: Config;
  /** Set for a root: the serve started for it, its settings and tokens. */
  serve?: S;
  settings?: RootSettings;
  tokens?: Tokens;
}

function checkConnect(config: Config, what: string): void {
  const c = config.connect as { port?: unknown } | undefined;
  const port = typeof c?.port === 'string' ? Number(c.port) : c?.port;
  if (typeof c !== 'object' || c === null || typeof port !== 'number' || !Number.isInteger(port) || port < 1 || port > 65535) {
    throw new ConfigError(`${what}: "connect" must be {"host": …, "port": 1..65535}`);
  }
}

export async function resolveConfiguration<S extends Launched>(
  config: Config,
  folder: string | undefined,
  deps: ResolveDeps<S>,
): Promise<Resolved<S>> {
  const kind = sessionKind(config);
  switch (kind) {
    case 'child':
      // The proxy wrote it (connect, the executor, the child key): as is.
      checkConnect(config, `child session ${String(config[EXECUTOR_ARG])}`);
      return { kind, config };
    case 'replay':
    case 'attach':
      checkConnect(config, kind === 'replay' ? 'replay session' : `"${config.name ?? 'sparkdap'}"`);
      return { kind, config };
  }
  const settings = readRootSettings(config, folder, deps.defaultPath);
  const mint = deps.newToken ?? newToken;
  const tokens: Tokens = { executors: mint(), ide: mint() };
  const serve = await deps.launch(
    {
      sparkdapPath: settings.sparkdapPath,
      root: settings.root,
      ide: settings.ide,
      executors: settings.executors,
      serveArgs: settings.serveArgs,
    },
    tokens,
  );
  return { kind, config: attachConfig(config, serve.ide, tokens.ide), serve, settings, tokens };
}

/**
 * Whether a session is a root the view follows: a "sparkdap" root, or a
 * "debugpy" attach (by connect, host or port: the proxy's IDE port, maybe).
 * A debugpy attach to a plain debugpy answers sparkdapWatch with an error,
 * which the view ignores.
 */
export function isWatchableRoot(type: string, config: Config, hasParent: boolean): boolean {
  if (hasParent || config[EXECUTOR_ARG] !== undefined) {
    return false;
  }
  if (type === 'sparkdap') {
    const k = sessionKind(config);
    return k === 'root' || k === 'attach';
  }
  if (type === 'debugpy' || type === 'python') {
    return config.request === 'attach' && config.processId === undefined && config.listen === undefined &&
      (config.connect !== undefined || config.port !== undefined);
  }
  return false;
}

/** "host:port" of a configuration's connect, the key serves are found by. */
export function connectKey(config: Config): string | undefined {
  const c = config.connect as { host?: unknown; port?: unknown } | undefined;
  if (typeof c !== 'object' || c === null) {
    return undefined;
  }
  const host = typeof c.host === 'string' && c.host !== '' ? c.host : '127.0.0.1';
  return `${host}:${String(c.port)}`;
}
