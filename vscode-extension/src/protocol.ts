// Types of the messages between this extension and `sparkdap serve`, as
// /tmp/spec/view-protocol.md and the Go sources define them (control/wire.go,
// selection/selection.go, selection/board.go). Only the root DAP session
// carries them: the proxy refuses them on child sessions.
//
// Every field the proxy may leave out (Go's omitempty) is optional here, so
// an older or newer proxy's answer still type-checks where it is read.

/** DAP request: a control.Request passed through to the proxy's control operations. */
export const CONTROL_REQUEST = 'sparkdap';
/** DAP request: start (or stop, with off) the sparkdapWorkers events. */
export const WATCH_REQUEST = 'sparkdapWatch';
/** DAP event: body is the control.Answer of known-workers. */
export const WORKERS_EVENT = 'sparkdapWorkers';

/** Default and bounds of maxRows (control.MaxKnownRows). */
export const DEFAULT_MAX_ROWS = 500;
export const MAX_KNOWN_ROWS = 5000;

/** Attach argument that carries the IDE token (dap.IDETokenArg). */
export const IDE_TOKEN_ARG = 'sparkdapToken';
/** Child configuration key naming the proxy's executor session. */
export const EXECUTOR_ARG = 'sparkdapExecutor';
/** Configuration key of the extension's replay sessions. */
export const REPLAY_ARG = 'sparkdapReplay';

/** Environment variables serve and submit read their tokens from (cmd/sparkdap/serve.go). */
export const TOKEN_ENV = 'SPARKDAP_TOKEN';
export const IDE_TOKEN_ENV = 'SPARKDAP_IDE_TOKEN';

/**
 * selection.Selection. A list left out (JSON null) selects any id, an empty
 * list none; sampleRate must be in (0, 1] or the proxy refuses it, so every
 * selection this extension sends carries sampleRate 1.
 */
export interface Selection {
  partitions?: number[] | null;
  stages?: number[] | null;
  executors?: string[] | null;
  sampleRate?: number;
}

/** selection.All(): every list nil. */
export function selectAll(): Selection {
  return { sampleRate: 1 };
}

/** selection.None(): an empty partition list matches no task. */
export function selectNone(): Selection {
  return { partitions: [], sampleRate: 1 };
}

export function selectPartition(p: number): Selection {
  return { partitions: [p], sampleRate: 1 };
}

export function selectStage(s: number): Selection {
  return { stages: [s], sampleRate: 1 };
}

/** selection.Task. */
export interface Task {
  stage: number;
  partition: number;
  attempt: number;
  taskAttemptId: number;
}

/** control.WorkerFrame. */
export interface WorkerFrame {
  name: string;
  file: string;
  line: number;
  plumbing?: boolean;
}

export type WorkerState = 'running' | 'stopped' | 'idle' | 'finished' | 'failed';

/** control.KnownWorker (selection.Worker embedded). */
export interface KnownWorker {
  executorId: string;
  host: string;
  pid: number;
  running: boolean;
  task?: Task;
  selected: boolean;
  /** RFC 3339: when the worker started its task, went idle or went away. */
  since: string;
  tasks: number;
  stopped?: WorkerFrame;
  /** The proxy's executor session id: names the worker in continue/pause/detach/capture. */
  executor?: number;
  outputBytes?: number;
  state?: WorkerState;
  exception?: string;
}

/** control.Counts. */
export interface Counts {
  workers: number;
  running: number;
  stopped: number;
  idle: number;
  finished: number;
  failed: number;
}

/** selection.ExceptionGroup. */
export interface ExceptionGroup {
  type: string;
  place: string;
  tasks: number;
  held: number;
}

/** control.CaptureResult. */
export interface CaptureResult {
  path: string;
  bytes: number;
  function: string;
  task: string;
  executor: number;
  frame: number;
  summary: string;
}

/** control.Answer. */
export interface Answer {
  error?: string;
  code?: string;
  selection?: Selection | null;
  asSubmitted?: boolean;
  sent?: number;
  known?: KnownWorker[];
  more?: number;
  counts?: Counts;
  exceptions?: ExceptionGroup[];
  capture?: CaptureResult;
}

/** control.Request, as the `sparkdap` DAP request's arguments. */
export type ControlRequest =
  | { op: 'known-workers'; maxRows?: number }
  | { op: 'selection' }
  | { op: 'select'; selection: Selection }
  | { op: 'select'; asSubmitted: true }
  | { op: 'select'; task: number }
  | { op: 'capture'; executor: number; frame?: number }
  | { op: 'continue' | 'pause' | 'detach'; executor: number }
  | { op: 'continue-all' };

export interface WatchArguments {
  maxRows?: number;
  off?: boolean;
}

/** Clamp a maxRows setting to what the proxy accepts (1..5000). */
export function clampMaxRows(n: unknown): number {
  const v = typeof n === 'number' && Number.isFinite(n) ? Math.floor(n) : DEFAULT_MAX_ROWS;
  return Math.min(MAX_KNOWN_ROWS, Math.max(1, v));
}

/**
 * Says a selection as selection.Selection.String does, so the view and
 * `sparkdap select` print the same words: "partitions 37 · stages all · executors all".
 */
export function selectionText(sel: Selection | null | undefined, asSubmitted?: boolean): string {
  if (!sel) {
    return asSubmitted === false ? 'unknown' : 'as submitted';
  }
  const ids = (name: string, l: readonly (number | string)[] | null | undefined): string => {
    if (l === null || l === undefined) {
      return `${name} all`;
    }
    if (l.length === 0) {
      return `${name} none`;
    }
    return `${name} ${l.join(',')}`;
  };
  let out = `${ids('partitions', sel.partitions)} · ${ids('stages', sel.stages)} · ${ids('executors', sel.executors)}`;
  if (typeof sel.sampleRate === 'number' && sel.sampleRate > 0 && sel.sampleRate < 1) {
    out += ` · sample rate ${sel.sampleRate}`;
  }
  return out;
}

/**
 * Reads an event or response body as an Answer, or undefined when it is not
 * one: the body crosses a process boundary and a proxy of another version
 * may send something else, which must not break the view.
 */
export function asAnswer(body: unknown): Answer | undefined {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    return undefined;
  }
  const a = body as Answer;
  if (a.known !== undefined && !Array.isArray(a.known)) {
    return undefined;
  }
  return a;
}
