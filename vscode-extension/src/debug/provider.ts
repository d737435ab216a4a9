// The "sparkdap" debug type in VS Code: resolving configurations (which
// starts serve for a root), the adapter descriptor for every session, and
// serve's lifetime, bound to its root session's. The decisions live in
// src/resolve.ts, src/config.ts and src/serve.ts; this is the glue.

import { spawn } from 'node:child_process';
import * as vscode from 'vscode';
import {
  ConfigError,
  defaultConfiguration,
  printedSubmitLine,
  sessionKind,
  submitArgv,
  submitEnv,
  type Config,
  type RootSettings,
} from '../config';
import { SocketDebugAdapter } from '../dapsocket';
import { connectKey, resolveConfiguration } from '../resolve';
import { launchServe, RESTART_GRACE_MS, type ServeHandle, type Tokens } from '../serve';
import { commandLine, defaultShellKind } from '../shellquote';

/** How long a started serve waits for its root session before it is stopped (the attach failed). */
const ORPHAN_MS = 60_000;

export interface ServeRecord {
  key: string;
  serve: ServeHandle;
  settings: RootSettings;
  tokens: Tokens;
  sessionId?: string;
  orphanTimer?: ReturnType<typeof setTimeout>;
  /** Armed when the root session ended: stops serve unless the session comes back (a restart). */
  stopTimer?: ReturnType<typeof setTimeout>;
  stopping: boolean;
}

export class SparkdapDebug
  implements vscode.DebugConfigurationProvider, vscode.DebugAdapterDescriptorFactory, vscode.Disposable
{
  /** By the IDE address serve listens on ("127.0.0.1:41234"), which the root's connect names. */
  private readonly serves = new Map<string, ServeRecord>();

  constructor(private readonly out: vscode.OutputChannel) {}

  /** F5 with no launch.json: a root with the defaults. */
  resolveDebugConfiguration(
    _folder: vscode.WorkspaceFolder | undefined,
    config: vscode.DebugConfiguration,
  ): vscode.DebugConfiguration {
    if (!config.type && !config.request && !config.name) {
      return defaultConfiguration() as vscode.DebugConfiguration;
    }
    return config;
  }

  async resolveDebugConfigurationWithSubstitutedVariables(
    folder: vscode.WorkspaceFolder | undefined,
    config: vscode.DebugConfiguration,
  ): Promise<vscode.DebugConfiguration | undefined> {
    const defaultPath = vscode.workspace.getConfiguration('sparkdap').get<string>('path') || 'sparkdap';
    try {
      const r = await resolveConfiguration(config as Config, folder?.uri.fsPath, {
        defaultPath,
        launch: (o, t) => {
          this.out.appendLine(`sparkdap: starting ${o.sparkdapPath} serve --root ${o.root} --ide ${o.ide} --executors ${o.executors}`);
          return launchServe(o, t, { spawn, log: (l) => this.out.appendLine(`[serve] ${l}`) });
        },
      });
      if (r.serve && r.settings && r.tokens) {
        this.track(r.serve, r.settings, r.tokens);
      }
      return r.config as vscode.DebugConfiguration;
    } catch (e) {
      const msg = (e as Error).message;
      this.out.appendLine(`sparkdap: ${msg}`);
      const open = e instanceof ConfigError ? 'Open launch.json' : 'Show output';
      // A notification is one paragraph: serve's last lines follow on it, joined.
      const oneLine = msg.replace(/\s*\n\s*/g, ' | ');
      void vscode.window.showErrorMessage(`sparkdap: ${oneLine.length > 700 ? oneLine.slice(0, 700) + '…' : oneLine}`, open).then((pick) => {
        if (pick === 'Open launch.json') {
          void vscode.commands.executeCommand('workbench.action.debug.configure');
        } else if (pick) {
          this.out.show(true);
        }
      });
      // undefined: the launch is abandoned quietly (the message says why).
      return undefined;
    }
  }

  private track(serve: ServeHandle, settings: RootSettings, tokens: Tokens): void {
    const key = `${serve.ide.host}:${serve.ide.port}`;
    const rec: ServeRecord = { key, serve, settings, tokens, stopping: false };
    // An attach that fails never starts a session: stop the serve nobody uses.
    rec.orphanTimer = setTimeout(() => {
      if (!rec.sessionId) {
        this.out.appendLine(`sparkdap: no session attached to serve at ${key}; stopping it`);
        void this.stop(rec);
      }
    }, ORPHAN_MS);
    this.serves.set(key, rec);
    this.out.appendLine(`sparkdap: serve (pid ${serve.pid}) listens for the IDE at ${key}, for executors at ${serve.executors}`);
    void serve.done.then(() => {
      if (!rec.stopping) {
        this.out.appendLine(`sparkdap: serve at ${key} exited`);
        void vscode.window.showWarningMessage('sparkdap: serve exited while its session ran; see the sparkdap output.', 'Show output').then(
          (p) => p && this.out.show(true),
        );
      }
      this.serves.delete(key);
    });
  }

  createDebugAdapterDescriptor(session: vscode.DebugSession): vscode.ProviderResult<vscode.DebugAdapterDescriptor> {
    const c = session.configuration.connect as { host?: string; port?: number | string } | undefined;
    const port = Number(c?.port);
    const host = c?.host || '127.0.0.1';
    if (!c || !Number.isInteger(port) || port < 1) {
      throw new Error('sparkdap: this session has no "connect" {host, port} to reach');
    }
    if (sessionKind(session.configuration as Config, !!session.parentSession) === 'replay') {
      // replay's debugpy listens a moment after the terminal starts it.
      return new vscode.DebugAdapterInlineImplementation(
        new SocketDebugAdapter(host, port, { retryMs: 20_000 }) as unknown as vscode.DebugAdapter,
      );
    }
    return new vscode.DebugAdapterServer(port, host);
  }

  /** The serve started for a root session, if the extension started one. */
  recordFor(session: vscode.DebugSession | undefined): ServeRecord | undefined {
    if (!session) {
      return undefined;
    }
    for (const r of this.serves.values()) {
      if (r.sessionId === session.id && !r.stopping) {
        return r;
      }
    }
    return undefined;
  }

  onDidStartSession(session: vscode.DebugSession): void {
    if (session.type !== 'sparkdap' || session.parentSession) {
      return;
    }
    const key = connectKey(session.configuration as Config);
    const rec = key ? this.serves.get(key) : undefined;
    // A session restarted after launch.json changed resolved again and
    // started a new serve: the one it had before is nobody's now.
    for (const old of this.serves.values()) {
      if (old.sessionId === session.id && old !== rec) {
        void this.stop(old);
      }
    }
    if (!rec || (rec.sessionId !== undefined && rec.sessionId !== session.id)) {
      return;
    }
    clearTimeout(rec.orphanTimer);
    clearTimeout(rec.stopTimer);
    rec.stopTimer = undefined;
    if (rec.sessionId === session.id) {
      // A restart onto the same serve: the job, if any, runs already.
      return;
    }
    rec.sessionId = session.id;
    if (rec.settings.submit) {
      this.runSubmit(rec);
    } else {
      const line = printedSubmitLine(rec.settings.sparkdapPath, rec.serve.executors, rec.serve.tokenFile, defaultShellKind(process.platform));
      const text = `sparkdap: attached. Run the job with (your spark-submit arguments after --):\n  ${line}`;
      this.out.appendLine(text);
      vscode.debug.activeDebugConsole.appendLine(text);
    }
  }

  onDidTerminateSession(session: vscode.DebugSession): void {
    const rec = this.recordFor(session);
    if (rec && !rec.stopTimer) {
      // The job runs on undebugged once serve is gone: its workers fail open.
      rec.stopTimer = setTimeout(() => void this.stop(rec), RESTART_GRACE_MS);
    }
  }

  /** Runs `sparkdap submit` in a terminal whose environment holds the executors' token. */
  runSubmit(rec: ServeRecord): vscode.Terminal {
    const sub = rec.settings.submit;
    const term = this.submitTerminal(rec);
    if (sub) {
      term.sendText(commandLine(submitArgv(rec.settings.sparkdapPath, sub, rec.serve.executors), defaultShellKind(process.platform)));
    }
    return term;
  }

  /** A terminal set up for `sparkdap submit` against rec's serve. */
  submitTerminal(rec: ServeRecord): vscode.Terminal {
    const term = vscode.window.createTerminal({
      name: 'sparkdap submit',
      cwd: rec.settings.root,
      env: submitEnv(rec.tokens.executors, rec.settings.submit),
    });
    term.show(true);
    return term;
  }

  private async stop(rec: ServeRecord): Promise<void> {
    if (rec.stopping) {
      return;
    }
    rec.stopping = true;
    clearTimeout(rec.orphanTimer);
    clearTimeout(rec.stopTimer);
    this.out.appendLine(`sparkdap: stopping serve at ${rec.key}`);
    await rec.serve.stop();
    this.serves.delete(rec.key);
  }

  /** Every serve the extension started, for the submit terminal command. */
  records(): ServeRecord[] {
    return [...this.serves.values()];
  }

  async dispose(): Promise<void> {
    await Promise.all([...this.serves.values()].map((r) => this.stop(r)));
  }
}
