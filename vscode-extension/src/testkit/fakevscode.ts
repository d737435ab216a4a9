// A stand-in for the parts of the vscode API the glue uses, recording
// what the extension does with them. It checks the wiring (what is sent
// to which session, what the tree shows, what a terminal is told), not
// VS Code's own behaviour.

type Listener<T> = (e: T) => unknown;

export class EventEmitter<T> {
  private ls = new Set<Listener<T>>();
  event = (l: Listener<T>) => {
    this.ls.add(l);
    return { dispose: () => this.ls.delete(l) };
  };
  fire(e: T): void {
    for (const l of [...this.ls]) {
      l(e);
    }
  }
  dispose(): void {
    this.ls.clear();
  }
}

export enum TreeItemCollapsibleState {
  None = 0,
  Collapsed = 1,
  Expanded = 2,
}

export class TreeItem {
  id?: string;
  description?: string;
  tooltip?: string;
  iconPath?: unknown;
  contextValue?: string;
  command?: { command: string; arguments?: unknown[] };
  constructor(
    public label: string,
    public collapsibleState?: TreeItemCollapsibleState,
  ) {}
}

export class ThemeIcon {
  constructor(
    public id: string,
    public color?: unknown,
  ) {}
}

export class ThemeColor {
  constructor(public id: string) {}
}

export class DebugAdapterServer {
  constructor(
    public port: number,
    public host?: string,
  ) {}
}

export class DebugAdapterInlineImplementation {
  constructor(public implementation: { dispose(): void }) {}
}

export enum CompletionItemKind {
  Field = 4,
}

export class CompletionItem {
  detail?: string;
  documentation?: unknown;
  sortText?: string;
  constructor(
    public label: string,
    public kind?: CompletionItemKind,
  ) {}
}

export class MarkdownString {
  constructor(public value: string) {}
}

export class Range {
  constructor(
    public startLine: number,
    public startCharacter: number,
    public endLine: number,
    public endCharacter: number,
  ) {}
}

export const Uri = { file: (p: string) => ({ scheme: 'file', fsPath: p }) };

export interface FakeSession {
  id: string;
  type: string;
  name: string;
  configuration: Record<string, unknown>;
  parentSession?: FakeSession;
  workspaceFolder?: unknown;
  requests: { command: string; args: unknown }[];
  answer: (command: string, args: unknown) => unknown;
  customRequest(command: string, args?: unknown): Promise<unknown>;
}

export function session(id: string, type: string, configuration: Record<string, unknown>, answer?: FakeSession['answer']): FakeSession {
  const s: FakeSession = {
    id,
    type,
    name: String(configuration.name ?? id),
    configuration,
    requests: [],
    answer: answer ?? (() => ({})),
    async customRequest(command, args) {
      s.requests.push({ command, args });
      return s.answer(command, args);
    },
  };
  return s;
}

export interface FakeTerminal {
  name: string;
  options: { name?: string; cwd?: string; env?: Record<string, string> };
  sent: { text: string; newline: boolean }[];
  show(): void;
  sendText(text: string, newline?: boolean): void;
}

export function createFake() {
  const started = new EventEmitter<FakeSession>();
  const terminated = new EventEmitter<FakeSession>();
  const custom = new EventEmitter<{ session: FakeSession; event: string; body: unknown }>();
  const activeChanged = new EventEmitter<FakeSession | undefined>();
  const configChanged = new EventEmitter<{ affectsConfiguration(s: string): boolean }>();
  const rec = {
    commands: new Map<string, (...a: unknown[]) => unknown>(),
    executed: [] as unknown[][],
    providers: new Map<string, unknown>(),
    factories: new Map<string, unknown>(),
    treeViews: new Map<string, { treeDataProvider: unknown; view: Record<string, unknown> }>(),
    terminals: [] as FakeTerminal[],
    console: [] as string[],
    output: [] as string[],
    messages: [] as string[],
    completions: [] as { selector: unknown; provider: unknown }[],
    startedDebugging: [] as unknown[],
    settings: {} as Record<string, unknown>,
  };
  const debug = {
    activeDebugSession: undefined as FakeSession | undefined,
    activeDebugConsole: { appendLine: (s: string) => rec.console.push(s), append: (s: string) => rec.console.push(s) },
    onDidStartDebugSession: started.event,
    onDidTerminateDebugSession: terminated.event,
    onDidReceiveDebugSessionCustomEvent: custom.event,
    onDidChangeActiveDebugSession: activeChanged.event,
    registerDebugConfigurationProvider: (t: string, p: unknown) => (rec.providers.set(t, p), { dispose() {} }),
    registerDebugAdapterDescriptorFactory: (t: string, f: unknown) => (rec.factories.set(t, f), { dispose() {} }),
    startDebugging: async (_f: unknown, c: unknown) => (rec.startedDebugging.push(c), true),
  };
  const msg = (kind: string) => async (m: string) => {
    rec.messages.push(`${kind}: ${m}`);
    return undefined;
  };
  const api = {
    EventEmitter,
    TreeItem,
    TreeItemCollapsibleState,
    ThemeIcon,
    ThemeColor,
    DebugAdapterServer,
    DebugAdapterInlineImplementation,
    CompletionItem,
    CompletionItemKind,
    MarkdownString,
    Range,
    Uri,
    debug,
    window: {
      createOutputChannel: () => ({ appendLine: (s: string) => rec.output.push(s), show() {}, dispose() {} }),
      showErrorMessage: msg('error'),
      showWarningMessage: msg('warning'),
      showInformationMessage: msg('info'),
      setStatusBarMessage: (m: string) => (rec.messages.push(`status: ${m}`), { dispose() {} }),
      createTreeView: (id: string, o: { treeDataProvider: unknown }) => {
        const vis = new EventEmitter<{ visible: boolean }>();
        const view: Record<string, unknown> = { visible: true, onDidChangeVisibility: vis.event, dispose() {} };
        rec.treeViews.set(id, { treeDataProvider: o.treeDataProvider, view });
        return view;
      },
      createTerminal: (options: FakeTerminal['options']) => {
        const t: FakeTerminal = {
          name: options.name ?? '',
          options,
          sent: [],
          show() {},
          sendText(text, newline = true) {
            t.sent.push({ text, newline });
          },
        };
        rec.terminals.push(t);
        return t;
      },
      showTextDocument: async () => undefined,
    },
    workspace: {
      getConfiguration: () => ({ get: (k: string, d?: unknown) => (k in rec.settings ? rec.settings[k] : d) }),
      onDidChangeConfiguration: configChanged.event,
    },
    commands: {
      registerCommand: (id: string, f: (...a: unknown[]) => unknown) => (rec.commands.set(id, f), { dispose() {} }),
      executeCommand: async (...a: unknown[]) => void rec.executed.push(a),
    },
    languages: {
      registerCompletionItemProvider: (selector: unknown, provider: unknown) => (rec.completions.push({ selector, provider }), { dispose() {} }),
    },
    env: { clipboard: { writeText: async () => undefined } },
  };
  return { api, rec, fire: { started, terminated, custom, activeChanged, configChanged }, debug };
}
