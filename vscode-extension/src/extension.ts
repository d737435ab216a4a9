// Entry point: wires the debug type, the view, its actions and the
// condition completions. Everything that decides something lives in
// modules without vscode, tested in plain Node (out/test).

import * as vscode from 'vscode';
import { registerConditionCompletions } from './conditions/provider';
import { registerActions } from './debug/actions';
import { SparkdapDebug } from './debug/provider';
import { ExecutorsView } from './view/provider';
import { WorkersWatch } from './view/watch';

let debugType: SparkdapDebug | undefined;

export function activate(context: vscode.ExtensionContext): void {
  const out = vscode.window.createOutputChannel('sparkdap');
  const debug = new SparkdapDebug(out);
  debugType = debug;
  let view: ExecutorsView | undefined;
  const watch = new WorkersWatch(() => view?.invalidate(), out);
  view = new ExecutorsView(watch);
  context.subscriptions.push(
    out,
    vscode.debug.registerDebugConfigurationProvider('sparkdap', debug),
    vscode.debug.registerDebugAdapterDescriptorFactory('sparkdap', debug),
    vscode.debug.onDidStartDebugSession((s) => debug.onDidStartSession(s)),
    vscode.debug.onDidTerminateDebugSession((s) => debug.onDidTerminateSession(s)),
    watch,
    view,
    registerConditionCompletions(),
    ...registerActions({ watch, debug, out, invalidate: () => view?.invalidate() }),
  );
}

/** Stops every serve this window started: the jobs run on undebugged. */
export function deactivate(): Promise<void> | undefined {
  return debugType?.dispose();
}
