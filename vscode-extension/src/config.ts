// Launch configurations of the "sparkdap" debug type: which kind of
// session one is, the root's settings with their defaults, what the
// resolved configuration sent to the proxy holds, and the `sparkdap
// submit` command line. No vscode here (src/debug/provider.ts is the glue).

import { EXECUTOR_ARG, IDE_TOKEN_ARG, REPLAY_ARG, TOKEN_ENV } from './protocol';
import type { HostPort } from './serve';
import { parseHostPort } from './serve';
import { commandLine, quotePosix, quotePowerShell, type ShellKind } from './shellquote';

/** A debug configuration as VS Code passes it: free-form JSON. */
export type Config = { [key: string]: unknown; type?: string; request?: string; name?: string };

export type SessionKind =
  /** A child session the proxy asked for (startDebugging): connect is set, nothing to start. */
  | 'child'
  /** An attach to `sparkdap replay --debug`, started by the replay action. */
  | 'replay'
  /** A root with its own connect: attach to a serve the user runs. */
  | 'attach'
  /** A root the extension starts serve for. */
  | 'root';

export function sessionKind(config: Config, hasParent = false): SessionKind {
  if (hasParent || config[EXECUTOR_ARG] !== undefined) {
    return 'child';
  }
  if (config[REPLAY_ARG] === true) {
    return 'replay';
  }
  if (config.connect !== undefined && config.connect !== null) {
    return 'attach';
  }
  return 'root';
}

export interface SubmitSettings {
  /** spark-submit's arguments, after `--`. */
  args: string[];
  partitions?: string;
  stages?: string;
  /** PYSPARK_PYTHON for the job (and replay's --python). */
  python?: string;
  /** The executor port as the executors reach it, when not serve's own address (tunnels, clusters). */
  proxy?: string;
  /** More `sparkdap submit` flags, before `--`. */
  flags: string[];
}

export interface RootSettings {
  sparkdapPath: string;
  root: string;
  ide: string;
  executors: string;
  serveArgs: string[];
  submit?: SubmitSettings;
}

/** The keys only the extension reads: left out of what reaches the proxy (and pydevd, and child sessions). */
export const EXTENSION_KEYS = ['sparkdapPath', 'root', 'ide', 'executors', 'submit', 'serveArgs'] as const;

export const DEFAULT_ADDR = '127.0.0.1:0';

export class ConfigError extends Error {}

function str(config: Config, key: string, def: string): string {
  const v = config[key];
  if (v === undefined || v === null || v === '') {
    return def;
  }
  if (typeof v !== 'string') {
    throw new ConfigError(`"${key}" must be a string`);
  }
  return v;
}

function strings(v: unknown, what: string): string[] {
  if (v === undefined || v === null) {
    return [];
  }
  if (!Array.isArray(v) || v.some((x) => typeof x !== 'string')) {
    throw new ConfigError(`${what} must be an array of strings`);
  }
  return v as string[];
}

/** "1,2,3" from a string, a number or a list of numbers; "none" stays "none". */
function ids(v: unknown, what: string): string | undefined {
  if (v === undefined || v === null || v === '') {
    return undefined;
  }
  if (typeof v === 'number' && Number.isInteger(v) && v >= 0) {
    return String(v);
  }
  if (Array.isArray(v) && v.every((x) => typeof x === 'number' && Number.isInteger(x) && x >= 0)) {
    return v.join(',');
  }
  if (typeof v === 'string' && /^(none|\d+(,\d+)*)$/.test(v.replace(/\s+/g, ''))) {
    return v.replace(/\s+/g, '');
  }
  throw new ConfigError(`${what} must be ids such as 1,2 (a string, a number or a list of numbers) or "none"`);
}

function addr(config: Config, key: string): string {
  const v = str(config, key, DEFAULT_ADDR);
  try {
    parseHostPort(v);
  } catch (e) {
    throw new ConfigError(`"${key}": ${(e as Error).message}`);
  }
  return v;
}

/** serve flags the extension owns: a second value would break the tokens or the ready file. */
const OWNED_FLAGS = /^--?(token|token-file|ide-token|ide-token-file|ready-file)(=|$)/;

/** The root's settings, with defaults; folder is the workspace folder's path, if any. */
export function readRootSettings(config: Config, folder: string | undefined, defaultPath = 'sparkdap'): RootSettings {
  const serveArgs = strings(config.serveArgs, '"serveArgs"');
  const owned = serveArgs.find((a) => OWNED_FLAGS.test(a));
  if (owned) {
    throw new ConfigError(
      `"serveArgs" must not set ${owned.split('=')[0]}: the extension gives serve its tokens and ready file (start serve yourself and use "connect" to choose them)`,
    );
  }
  const s: RootSettings = {
    sparkdapPath: str(config, 'sparkdapPath', defaultPath),
    root: str(config, 'root', folder ?? ''),
    ide: addr(config, 'ide'),
    executors: addr(config, 'executors'),
    serveArgs,
  };
  if (s.root === '') {
    throw new ConfigError('"root" is not set and there is no workspace folder: set it to the local project root');
  }
  const sub = config.submit;
  if (sub !== undefined && sub !== null) {
    if (typeof sub !== 'object' || Array.isArray(sub)) {
      throw new ConfigError('"submit" must be an object such as {"args": ["--master", "local[2]", "main.py"]}');
    }
    const o = sub as Record<string, unknown>;
    const args = strings(o.args, '"submit.args"');
    if (args.length === 0) {
      throw new ConfigError('"submit.args" must list the spark-submit arguments (at least the application)');
    }
    const opt = (k: string): string | undefined => {
      const v = o[k];
      if (v === undefined || v === null || v === '') {
        return undefined;
      }
      if (typeof v !== 'string') {
        throw new ConfigError(`"submit.${k}" must be a string`);
      }
      return v;
    };
    s.submit = {
      args,
      partitions: ids(o.partitions, '"submit.partitions"'),
      stages: ids(o.stages, '"submit.stages"'),
      python: opt('python'),
      proxy: opt('proxy'),
      flags: strings(o.flags, '"submit.flags"'),
    };
  }
  return s;
}

/**
 * The configuration VS Code attaches with once serve listens: the
 * extension's keys left out, connect and the IDE token set. The proxy
 * copies it (token included) into each child session's configuration.
 */
export function attachConfig(config: Config, ide: HostPort, ideToken: string): Config {
  const out: Config = { ...config };
  for (const k of EXTENSION_KEYS) {
    delete out[k];
  }
  out.connect = { host: ide.host, port: ide.port };
  out[IDE_TOKEN_ARG] = ideToken;
  return out;
}

/** `sparkdap submit` with its flags, `--`, then spark-submit's arguments. */
export function submitArgv(sparkdapPath: string, sub: SubmitSettings, executors: string): string[] {
  const argv = [sparkdapPath, 'submit', '--proxy', sub.proxy ?? executors];
  if (sub.partitions !== undefined) {
    argv.push('--partitions', sub.partitions);
  }
  if (sub.stages !== undefined) {
    argv.push('--stages', sub.stages);
  }
  argv.push(...sub.flags, '--', ...sub.args);
  return argv;
}

/** The submit terminal's environment: the executors' token (baked into the wrapper by submit), and the job's Python. */
export function submitEnv(executorsToken: string, sub: SubmitSettings | undefined): Record<string, string> {
  const env: Record<string, string> = { [TOKEN_ENV]: executorsToken };
  if (sub?.python) {
    env.PYSPARK_PYTHON = sub.python;
  }
  return env;
}

/**
 * The line printed for running the job by hand: the token is read from
 * its private file, so the line shows no secret and can be pasted into a
 * shell on this machine; jobArgs stand for the job's spark-submit arguments.
 */
export function printedSubmitLine(
  sparkdapPath: string,
  executors: string,
  tokenFile: string,
  kind: ShellKind = 'posix',
  jobArgs: readonly string[] = ['--master', 'local[2]', 'main.py'],
): string {
  const argv = [sparkdapPath, 'submit', '--proxy', executors, '--', ...jobArgs];
  if (kind === 'powershell') {
    return `$env:${TOKEN_ENV} = (Get-Content ${quotePowerShell(tokenFile)}); ${commandLine(argv, kind)}`;
  }
  return `${TOKEN_ENV}="$(cat ${quotePosix(tokenFile)})" ${commandLine(argv, kind)}`;
}

/** What F5 with no launch.json starts: a root with every default. */
export function defaultConfiguration(): Config {
  return { type: 'sparkdap', request: 'attach', name: 'sparkdap: debug PySpark executors', justMyCode: false };
}
