// The tree the "Spark executors" view shows, built from one known-workers
// answer: a header, then executors, under each its stages, under each its
// workers. Pure data, no vscode: src/view/provider.ts turns nodes into
// TreeItems. Building is a grouping pass and three sorts, O(n log n) for n
// rows (at most the 5,000 the proxy sends).

import type { Answer, Counts, KnownWorker, WorkerState } from '../protocol';
import { selectionText } from '../protocol';
import { describeWorker, stateOf, taskLabel } from './format';

export interface HeaderNode {
  kind: 'header';
  id: string;
  label: string;
  description: string;
  tooltip: string;
}

export interface WorkerNode {
  kind: 'worker';
  id: string;
  label: string;
  description: string;
  state: WorkerState;
  /** When the extension first saw it stopped where it is; for the tooltip, built on hover (workerTooltip). */
  stoppedSince?: number;
  /** Menus pick their actions from it: ";worker;<state>;[debug;][task;]". */
  contextValue: string;
  worker: KnownWorker;
}

export interface StageNode {
  kind: 'stage';
  id: string;
  label: string;
  description: string;
  /** undefined for the workers that reported no task yet. */
  stage?: number;
  contextValue: string;
  children: WorkerNode[];
}

export interface ExecutorNode {
  kind: 'executor';
  id: string;
  label: string;
  description: string;
  tooltip: string;
  children: StageNode[];
}

export interface MoreNode {
  kind: 'more';
  id: string;
  label: string;
  description: string;
  tooltip: string;
}

export type Node = HeaderNode | ExecutorNode | StageNode | WorkerNode | MoreNode;

export interface TreeModel {
  /** Top level: the header, the executors, then "and N more" when rows were left out. */
  roots: Node[];
  /** Some row shows a duration: redraw every second while visible. */
  needsTick: boolean;
  /** Worker rows in the tree. */
  rows: number;
}

export interface BuildOptions {
  now: number;
  /** When the extension first saw a worker stopped where it is now (StopClock.since). */
  stoppedSince?: (w: KnownWorker) => number | undefined;
}

const EMPTY: TreeModel = { roots: [], needsTick: false, rows: 0 };

/** The counts the proxy sends, or counted from the rows of an older proxy. */
export function countsOf(a: Answer): Counts {
  if (a.counts) {
    return a.counts;
  }
  const c: Counts = { workers: 0, running: 0, stopped: 0, idle: 0, finished: 0, failed: 0 };
  for (const w of a.known ?? []) {
    c.workers++;
    c[stateOf(w)]++;
  }
  return c;
}

/** "12 workers · 3 stopped · 8 running · 1 finished": the states no worker is in are left out. */
export function headerLabel(c: Counts): string {
  const parts = [`${c.workers} ${c.workers === 1 ? 'worker' : 'workers'}`];
  for (const s of ['stopped', 'running', 'idle', 'failed', 'finished'] as const) {
    if (c[s] > 0) {
      parts.push(`${c[s]} ${s}`);
    }
  }
  return parts.join(' · ');
}

/** Executor ids as Spark gives them: "driver" (local mode) first, then numbers as numbers, then other names. */
export function compareExecutorIds(a: string, b: string): number {
  const rank = (s: string): number => (s === 'driver' ? 0 : /^\d+$/.test(s) ? 1 : s === '' ? 3 : 2);
  const ra = rank(a);
  const rb = rank(b);
  if (ra !== rb) {
    return ra - rb;
  }
  if (ra === 1) {
    // Long ids compare by length first, so no precision is lost to Number.
    return a.length - b.length || (a < b ? -1 : a > b ? 1 : 0);
  }
  return a < b ? -1 : a > b ? 1 : 0;
}

function executorLabel(id: string, host: string): string {
  const who = id === 'driver' ? 'driver' : id === '' ? 'executor ?' : `executor ${id}`;
  return host ? `${who} · ${host}` : who;
}

function plural(n: number, one: string): string {
  return `${n} ${one}${n === 1 ? '' : 's'}`;
}

/** "1 stopped · 3 running" for a group's rows, or its row count when nothing stands out. */
function groupDescription(rows: readonly WorkerNode[]): string {
  let stopped = 0;
  let running = 0;
  for (const r of rows) {
    if (r.state === 'stopped') {
      stopped++;
    } else if (r.state === 'running') {
      running++;
    }
  }
  const parts = [plural(rows.length, 'worker')];
  if (stopped) {
    parts.push(`${stopped} stopped`);
  }
  if (running) {
    parts.push(`${running} running`);
  }
  return parts.join(' · ');
}

export function workerContextValue(w: KnownWorker, state: WorkerState): string {
  let v = `;worker;${state};`;
  // Only a worker whose debugger is connected has a proxy session id; the
  // actions that steer it need one (a finished worker's is stale).
  if (w.executor && state !== 'finished') {
    v += 'debug;';
  }
  if (w.task) {
    v += 'task;';
  }
  return v;
}

/**
 * Rows keep a fixed place (partition, attempt, then pid) rather than the
 * proxy's order by state: a row that stops or resumes must not move away
 * from under the pointer that is about to click its inline action.
 */
function compareRows(a: WorkerNode, b: WorkerNode): number {
  const ta = a.worker.task;
  const tb = b.worker.task;
  if (ta && tb) {
    if (ta.partition !== tb.partition) {
      return ta.partition - tb.partition;
    }
    if (ta.attempt !== tb.attempt) {
      return ta.attempt - tb.attempt;
    }
  }
  if (a.worker.pid !== b.worker.pid) {
    return a.worker.pid - b.worker.pid;
  }
  return a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
}

export function buildTree(answer: Answer | undefined, opts: BuildOptions): TreeModel {
  if (!answer) {
    return EMPTY;
  }
  const known = answer.known ?? [];
  const counts = countsOf(answer);
  const sel = selectionText(answer.selection, answer.asSubmitted ?? !answer.selection);
  const headerTooltip = [headerLabel(counts), `selection: ${sel}`];
  for (const g of answer.exceptions ?? []) {
    headerTooltip.push(`${g.type} at ${g.place}: ${plural(g.tasks, 'stop')}${g.held ? `, ${g.held} held` : ''}`);
  }
  const header: HeaderNode = {
    kind: 'header',
    id: 'header',
    label: headerLabel(counts),
    description: `selection: ${sel}`,
    tooltip: headerTooltip.join('\n'),
  };

  // Group: executor -> stage -> rows. Ids are the groups' keys, so VS Code
  // keeps what the user expanded or collapsed across redraws.
  const executors = new Map<string, { id: string; execId: string; host: string; stages: Map<string, StageNode> }>();
  const seen = new Set<string>();
  let needsTick = false;
  for (const w of known) {
    const state = stateOf(w);
    let id = `w:${w.host}:${w.pid}`;
    if (state === 'finished' || state === 'failed') {
      // A gone worker's host and pid may be a live process's now.
      id += `:gone:${w.since}`;
    }
    for (let n = 2; seen.has(id); n++) {
      id = id.replace(/#\d+$/, '') + `#${n}`;
    }
    seen.add(id);
    const stoppedSince = state === 'stopped' ? opts.stoppedSince?.(w) : undefined;
    const d = describeWorker({ worker: w, now: opts.now, stoppedSince });
    needsTick ||= d.timed;
    const row: WorkerNode = {
      kind: 'worker',
      id,
      label: taskLabel(w),
      description: d.text,
      state,
      stoppedSince,
      contextValue: workerContextValue(w, state),
      worker: w,
    };
    const ek = `e:${w.executorId}:${w.host}`;
    let e = executors.get(ek);
    if (!e) {
      e = { id: ek, execId: w.executorId ?? '', host: w.host ?? '', stages: new Map() };
      executors.set(ek, e);
    }
    const sk = w.task ? String(w.task.stage) : '-';
    let s = e.stages.get(sk);
    if (!s) {
      s = {
        kind: 'stage',
        id: `${ek}:s:${sk}`,
        label: w.task ? `stage ${w.task.stage}` : 'no task yet',
        description: '',
        stage: w.task?.stage,
        contextValue: w.task ? ';stage;' : ';stage-none;',
        children: [],
      };
      e.stages.set(sk, s);
    }
    s.children.push(row);
  }

  const execNodes: ExecutorNode[] = [];
  for (const e of executors.values()) {
    const stages = [...e.stages.values()];
    stages.sort((a, b) => (a.stage ?? Number.MAX_SAFE_INTEGER) - (b.stage ?? Number.MAX_SAFE_INTEGER));
    const all: WorkerNode[] = [];
    for (const s of stages) {
      s.children.sort(compareRows);
      s.description = groupDescription(s.children);
      all.push(...s.children);
    }
    execNodes.push({
      kind: 'executor',
      id: e.id,
      label: executorLabel(e.execId, e.host),
      description: groupDescription(all),
      tooltip: `Spark executor ${e.execId || '?'} on ${e.host || '?'}: ${groupDescription(all)}`,
      children: stages,
    });
  }
  execNodes.sort((a, b) => {
    const ea = executors.get(a.id)!;
    const eb = executors.get(b.id)!;
    return compareExecutorIds(ea.execId, eb.execId) || (ea.host < eb.host ? -1 : ea.host > eb.host ? 1 : 0);
  });

  const roots: Node[] = [header, ...execNodes];
  const more = answer.more ?? 0;
  if (more > 0) {
    roots.push({
      kind: 'more',
      id: 'more',
      label: `and ${more} more`,
      description: 'not listed',
      tooltip:
        `The proxy listed ${known.length} rows (stopped workers first) and left out ${more}. ` +
        'Raise the setting sparkdap.view.maxRows (at most 5000) to list more, or run `sparkdap workers` for all of them.',
    });
  }
  return { roots, needsTick, rows: known.length };
}

/**
 * StopClock remembers when each worker was first seen stopped where it
 * is, since the proxy's answer gives where a worker stopped but not when.
 * A worker that resumes, or stops elsewhere (a step), starts over. It only
 * holds the rows of the last answer, so it stays as small as the view.
 */
export class StopClock {
  private readonly since = new Map<string, { at: string; t: number }>();

  private static key(w: KnownWorker): string {
    return `${w.host}:${w.pid}:${w.executor ?? 0}`;
  }

  private static place(w: KnownWorker): string {
    return w.stopped ? `${w.stopped.file}:${w.stopped.line}:${w.stopped.name}` : '';
  }

  observe(rows: readonly KnownWorker[], now: number): void {
    const keep = new Set<string>();
    for (const w of rows) {
      if (stateOf(w) !== 'stopped') {
        continue;
      }
      const k = StopClock.key(w);
      const at = StopClock.place(w);
      keep.add(k);
      const prev = this.since.get(k);
      if (!prev || prev.at !== at) {
        this.since.set(k, { at, t: now });
      }
    }
    for (const k of this.since.keys()) {
      if (!keep.has(k)) {
        this.since.delete(k);
      }
    }
  }

  sinceOf(w: KnownWorker): number | undefined {
    return this.since.get(StopClock.key(w))?.t;
  }

  get size(): number {
    return this.since.size;
  }
}
