// The view's actions: each sends a control request to the proxy over the
// root session (the `sparkdap` DAP request), or does what VS Code's API
// allows for Reveal. Errors are the proxy's own words.

import * as fs from 'node:fs';
import * as vscode from 'vscode';
import { printedSubmitLine } from '../config';
import {
  selectAll,
  selectionText,
  selectNone,
  selectPartition,
  selectStage,
  type Answer,
  type ControlRequest,
} from '../protocol';
import { freePort, replayArgv, replayConfig } from '../replay';
import { commandLine, defaultShellKind } from '../shellquote';
import type { Node, StageNode, WorkerNode } from '../view/model';
import { control, type WorkersWatch } from '../view/watch';
import type { SparkdapDebug } from './provider';

interface Deps {
  watch: WorkersWatch;
  debug: SparkdapDebug;
  out: vscode.OutputChannel;
  invalidate: () => void;
}

function isWorker(n: unknown): n is WorkerNode {
  return typeof n === 'object' && n !== null && (n as Node).kind === 'worker';
}

export function registerActions(d: Deps): vscode.Disposable[] {
  const root = (): vscode.DebugSession | undefined => {
    const cur = d.watch.current();
    if (!cur) {
      void vscode.window.showWarningMessage('sparkdap: no debug session lists Spark workers.');
    }
    return cur?.session;
  };

  const ask = async (req: ControlRequest): Promise<Answer | undefined> => {
    const s = root();
    if (!s) {
      return undefined;
    }
    try {
      return await control(s, req);
    } catch (e) {
      const msg = (e as Error).message;
      d.out.appendLine(`sparkdap: ${req.op} failed: ${msg}`);
      void vscode.window.showErrorMessage(`sparkdap: ${req.op}: ${msg}`);
      return undefined;
    }
  };

  const executorOf = (n: unknown): number | undefined => {
    if (isWorker(n) && n.worker.executor) {
      return n.worker.executor;
    }
    void vscode.window.showWarningMessage('sparkdap: this worker has no debugger connected.');
    return undefined;
  };

  const steer = (op: 'continue' | 'pause' | 'detach') => async (n: unknown) => {
    const executor = executorOf(n);
    if (executor !== undefined) {
      await ask({ op, executor });
    }
  };

  const select = async (req: ControlRequest) => {
    const a = await ask(req);
    if (a) {
      const sent = a.sent ? ` (sent to ${a.sent} worker${a.sent === 1 ? '' : 's'})` : '';
      void vscode.window.setStatusBarMessage(`sparkdap: selection ${selectionText(a.selection, a.asSubmitted)}${sent}`, 5000);
    }
  };

  const capture = async (n: unknown) => {
    const executor = executorOf(n);
    if (executor === undefined) {
      return undefined;
    }
    const a = await ask({ op: 'capture', executor });
    if (!a?.capture) {
      return undefined;
    }
    d.out.appendLine(`sparkdap: ${a.capture.summary || 'captured'}: ${a.capture.path}`);
    return a.capture;
  };

  const sparkdapPath = (): string => {
    const rec = d.debug.recordFor(d.watch.current()?.session);
    return rec?.settings.sparkdapPath ?? (vscode.workspace.getConfiguration('sparkdap').get<string>('path') || 'sparkdap');
  };

  const cmds: Record<string, (n?: unknown) => unknown> = {
    'sparkdap.reveal': async (n) => {
      if (!isWorker(n)) {
        return;
      }
      const w = n.worker;
      // The child session's stop is what VS Code shows when the worker
      // stopped; the API cannot focus another session (activeStackItem is
      // read-only), so Reveal opens where it stopped and the CALL STACK.
      const child = w.executor ? d.watch.child(w.executor) : undefined;
      if (w.stopped?.file && fs.existsSync(w.stopped.file)) {
        const line = Math.max(0, w.stopped.line - 1);
        await vscode.window.showTextDocument(vscode.Uri.file(w.stopped.file), {
          preview: true,
          selection: new vscode.Range(line, 0, line, 0),
        });
      }
      await vscode.commands.executeCommand('workbench.debug.action.focusCallStackView');
      if (!child) {
        void vscode.window.setStatusBarMessage(`sparkdap: ${n.label} has no session in CALL STACK yet`, 5000);
      } else if (vscode.debug.activeDebugSession?.id !== child.id) {
        void vscode.window.setStatusBarMessage(`sparkdap: select "${child.name}" in CALL STACK`, 8000);
      }
    },
    'sparkdap.continue': steer('continue'),
    'sparkdap.pause': steer('pause'),
    'sparkdap.detach': steer('detach'),
    'sparkdap.continueAll': async () => {
      const a = await ask({ op: 'continue-all' });
      if (a) {
        void vscode.window.setStatusBarMessage(`sparkdap: resumed ${a.sent ?? 0} stopped worker(s)`, 5000);
      }
    },
    'sparkdap.capture': async (n) => {
      const c = await capture(n);
      if (!c) {
        return;
      }
      const pick = await vscode.window.showInformationMessage(`sparkdap: ${c.summary || 'captured'} → ${c.path}`, 'Open', 'Copy path');
      if (pick === 'Open') {
        await vscode.window.showTextDocument(vscode.Uri.file(c.path), { preview: true });
      } else if (pick === 'Copy path') {
        await vscode.env.clipboard.writeText(c.path);
      }
    },
    'sparkdap.replay': async (n) => {
      const c = await capture(n);
      if (!c) {
        return;
      }
      const host = '127.0.0.1';
      const port = await freePort(host);
      const rec = d.debug.recordFor(d.watch.current()?.session);
      const argv = replayArgv(sparkdapPath(), host, port, c.path, rec?.settings.submit?.python);
      const term = vscode.window.createTerminal({ name: `sparkdap replay ${c.function}`, cwd: rec?.settings.root });
      term.show(true);
      term.sendText(commandLine(argv, defaultShellKind(process.platform)));
      const folder = d.watch.current()?.session.workspaceFolder;
      await vscode.debug.startDebugging(folder, replayConfig(`${c.function} (${c.task})`, host, port) as vscode.DebugConfiguration);
    },
    'sparkdap.selectPartition': async (n) => {
      if (isWorker(n) && n.worker.task) {
        await select({ op: 'select', selection: selectPartition(n.worker.task.partition) });
      }
    },
    'sparkdap.selectStage': async (n) => {
      const stage = isWorker(n) ? n.worker.task?.stage : (n as StageNode | undefined)?.stage;
      if (stage !== undefined) {
        await select({ op: 'select', selection: selectStage(stage) });
      }
    },
    'sparkdap.selectAll': () => select({ op: 'select', selection: selectAll() }),
    'sparkdap.selectNone': () => select({ op: 'select', selection: selectNone() }),
    'sparkdap.selectAsSubmitted': () => select({ op: 'select', asSubmitted: true }),
    'sparkdap.refresh': async () => {
      await d.watch.refresh();
      d.invalidate();
    },
    'sparkdap.submitTerminal': () => {
      const rec = d.debug.recordFor(d.watch.current()?.session) ?? d.debug.records()[0];
      if (!rec) {
        void vscode.window.showWarningMessage('sparkdap: no serve started by this extension is running.');
        return;
      }
      const term = d.debug.submitTerminal(rec);
      // Typed, not run: the user adds the job's arguments.
      term.sendText(commandLine([rec.settings.sparkdapPath, 'submit', '--proxy', rec.serve.executors, '--'], defaultShellKind(process.platform)) + ' ', false);
      d.out.appendLine(`sparkdap: elsewhere on this machine: ${printedSubmitLine(rec.settings.sparkdapPath, rec.serve.executors, rec.serve.tokenFile)}`);
    },
  };
  return Object.entries(cmds).map(([id, f]) => vscode.commands.registerCommand(id, f));
}
