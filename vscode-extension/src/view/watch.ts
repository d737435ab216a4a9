// Following the proxy over each root debug session: sparkdapWatch when a
// root starts, its sparkdapWorkers events into the store, and the child
// sessions by executor (for Reveal). VS Code has no API listing the
// sessions, so they are tracked from the start and terminate events.

import * as vscode from 'vscode';
import type { Config } from '../config';
import { asAnswer, clampMaxRows, CONTROL_REQUEST, EXECUTOR_ARG, WATCH_REQUEST, WORKERS_EVENT, type Answer, type ControlRequest } from '../protocol';
import { isWatchableRoot } from '../resolve';
import { WorkerStore, type RootEntry } from './store';

export function maxRowsSetting(): number {
  return clampMaxRows(vscode.workspace.getConfiguration('sparkdap').get<number>('view.maxRows'));
}

/** The root of a session: itself, or its topmost parent. */
export function rootOf(s: vscode.DebugSession | undefined): vscode.DebugSession | undefined {
  while (s?.parentSession) {
    s = s.parentSession;
  }
  return s;
}

/** Sends a control request on a root session; rejects with the proxy's message. */
export async function control(session: vscode.DebugSession, req: ControlRequest): Promise<Answer> {
  const body: unknown = await session.customRequest(CONTROL_REQUEST, req);
  return asAnswer(body) ?? {};
}

export class WorkersWatch implements vscode.Disposable {
  readonly store = new WorkerStore();
  private readonly roots = new Map<string, vscode.DebugSession>();
  /** Child sessions by the proxy's executor session id. */
  private readonly children = new Map<number, vscode.DebugSession>();
  private readonly subs: vscode.Disposable[] = [];

  constructor(
    private readonly changed: () => void,
    private readonly out: vscode.OutputChannel,
  ) {
    this.subs.push(
      vscode.debug.onDidStartDebugSession((s) => this.started(s)),
      vscode.debug.onDidTerminateDebugSession((s) => this.terminated(s)),
      vscode.debug.onDidReceiveDebugSessionCustomEvent((e) => this.event(e)),
      vscode.debug.onDidChangeActiveDebugSession(() => this.changed()),
      vscode.workspace.onDidChangeConfiguration((e) => {
        if (e.affectsConfiguration('sparkdap.view.maxRows')) {
          for (const s of this.roots.values()) {
            this.watch(s);
          }
        }
      }),
    );
    // Sessions that started before the extension activated.
    const active = rootOf(vscode.debug.activeDebugSession);
    if (active) {
      this.started(active);
    }
  }

  private started(s: vscode.DebugSession): void {
    const exec = s.configuration[EXECUTOR_ARG];
    if (typeof exec === 'number') {
      this.children.set(exec, s);
      return;
    }
    if (!isWatchableRoot(s.type, s.configuration as Config, !!s.parentSession)) {
      return;
    }
    // A restarted root starts again under the same id, maybe with a new
    // proxy: its old list is dropped and the new proxy asked.
    if (this.store.remove(s.id)) {
      this.changed();
    }
    this.roots.set(s.id, s);
    this.watch(s);
  }

  /**
   * Asks the proxy for sparkdapWorkers events. onDidStartDebugSession
   * fires once the attach has been answered, which is when the proxy
   * takes the request. The root enters the view only once the proxy
   * answers (or its first event comes): a plain debugpy answers with an
   * error ("sparkdapWatch not in [...]"), as does an older proxy, and
   * those stay out of the view.
   */
  watch(s: vscode.DebugSession): void {
    s.customRequest(WATCH_REQUEST, { maxRows: maxRowsSetting() }).then(
      () => {
        if (this.roots.get(s.id) === s) {
          this.store.add(s.id, s.name);
          this.out.appendLine(`sparkdap: following the workers of "${s.name}"`);
          this.changed();
        }
      },
      (e: Error) => {
        this.out.appendLine(`sparkdap: "${s.name}" does not list workers (${e.message}); not shown in Spark executors`);
      },
    );
  }

  private terminated(s: vscode.DebugSession): void {
    const exec = s.configuration[EXECUTOR_ARG];
    if (typeof exec === 'number' && this.children.get(exec)?.id === s.id) {
      this.children.delete(exec);
    }
    if (this.roots.delete(s.id)) {
      this.store.remove(s.id);
      this.changed();
    }
  }

  private event(e: vscode.DebugSessionCustomEvent): void {
    if (e.event !== WORKERS_EVENT || !this.roots.has(e.session.id)) {
      return;
    }
    const a = asAnswer(e.body);
    if (a) {
      // The first event may come before the watch's answer is handled here.
      this.store.add(e.session.id, e.session.name);
      this.store.update(e.session.id, a, Date.now());
      this.changed();
    }
  }

  /** Asks every followed root for its list now (the Refresh action). */
  async refresh(): Promise<void> {
    await Promise.all(
      [...this.roots.values()].map(async (s) => {
        try {
          if (!this.store.has(s.id)) {
            this.watch(s);
            return;
          }
          const a = await control(s, { op: 'known-workers', maxRows: maxRowsSetting() });
          this.store.update(s.id, a, Date.now());
        } catch (e) {
          this.out.appendLine(`sparkdap: refreshing "${s.name}": ${(e as Error).message}`);
        }
      }),
    );
    this.changed();
  }

  /** The root the view shows, with its entry. */
  current(): { session: vscode.DebugSession; entry: RootEntry } | undefined {
    const active = rootOf(vscode.debug.activeDebugSession);
    const entry = this.store.current(active?.id);
    const session = entry && this.roots.get(entry.id);
    return entry && session ? { session, entry } : undefined;
  }

  rootCount(): number {
    return this.roots.size;
  }

  child(executor: number): vscode.DebugSession | undefined {
    return this.children.get(executor);
  }

  dispose(): void {
    for (const d of this.subs) {
      d.dispose();
    }
  }
}
