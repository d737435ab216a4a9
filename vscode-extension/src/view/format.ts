// Words and numbers as the view shows them. Kept apart from the tree's
// shape so each can be tested by itself, and kept short: the view lives in
// a side bar about 300 px wide, where a description is cut at its end.

import type { KnownWorker, WorkerState } from '../protocol';

/** "512 B", "2.1 KiB", "3.4 MiB": the unit sparkdap's CLI uses. */
export function formatBytes(n: number): string {
  if (!Number.isFinite(n) || n < 0) {
    return '?';
  }
  if (n < 1024) {
    return `${Math.round(n)} B`;
  }
  const units = ['KiB', 'MiB', 'GiB', 'TiB'];
  let v = n / 1024;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${v < 10 ? v.toFixed(1) : Math.round(v).toString()} ${units[i]}`;
}

/** "41 s", "3 min 05 s", "2 h 03 min": seconds only while they matter. */
export function formatDuration(ms: number): string {
  const s = Math.max(0, Math.floor(ms / 1000));
  if (s < 60) {
    return `${s} s`;
  }
  const m = Math.floor(s / 60);
  if (m < 60) {
    return `${m} min ${String(s % 60).padStart(2, '0')} s`;
  }
  const h = Math.floor(m / 60);
  return `${h} h ${String(m % 60).padStart(2, '0')} min`;
}

/**
 * Milliseconds since a Go time.Time in JSON (RFC 3339, nanoseconds
 * allowed), or undefined for Go's zero time or anything unreadable.
 */
export function parseSince(since: string | undefined): number | undefined {
  if (!since) {
    return undefined;
  }
  // A worker's since changes once per task, and the view redraws every
  // second: parsing the same strings again dominated a redraw of 1,000 rows.
  let t = sinceCache.get(since);
  if (t === undefined) {
    t = Date.parse(since);
    if (sinceCache.size >= 20_000) {
      sinceCache.clear();
    }
    sinceCache.set(since, t);
  }
  // Go's zero time.Time is year 1: "not known".
  if (!Number.isFinite(t) || t < MIN_TIME) {
    return undefined;
  }
  return t;
}

const MIN_TIME = Date.UTC(1971, 0, 1);
const sinceCache = new Map<string, number>();

/** The last element of a path, for either separator (executor paths may be Windows-less, local ones not). */
export function baseName(path: string): string {
  const i = Math.max(path.lastIndexOf('/'), path.lastIndexOf('\\'));
  return i >= 0 ? path.slice(i + 1) : path;
}

/**
 * The state the proxy gives, or the one its fields imply for a proxy that
 * predates KnownWorker.state (the same rules as control.withState, minus
 * what only the proxy knows).
 */
export function stateOf(w: KnownWorker): WorkerState {
  switch (w.state) {
    case 'running':
    case 'stopped':
    case 'idle':
    case 'finished':
    case 'failed':
      return w.state;
  }
  if (w.stopped) {
    return 'stopped';
  }
  return w.running ? 'running' : 'idle';
}

/** "partition 7", "partition 7 · attempt 1", or the pid for a worker that reported no task. */
export function taskLabel(w: KnownWorker): string {
  if (!w.task) {
    return `pid ${w.pid}`;
  }
  const a = w.task.attempt > 0 ? ` · attempt ${w.task.attempt}` : '';
  return `partition ${w.task.partition}${a}`;
}

export interface DescribeInput {
  worker: KnownWorker;
  now: number;
  /** When this extension first saw the worker stopped where it is (the proxy sends no stop time). */
  stoppedSince?: number;
}

/**
 * The row's description: its state, for how long where that changes, and
 * the output it sent. Returns whether it shows a duration, so the view
 * knows whether it must tick.
 */
export function describeWorker(input: DescribeInput): { text: string; timed: boolean } {
  const { worker: w, now } = input;
  const state = stateOf(w);
  let text: string;
  let timed = false;
  switch (state) {
    case 'stopped': {
      const f = w.stopped;
      text = f && f.file ? `stopped at ${baseName(f.file)}:${f.line}` : 'stopped';
      if (w.exception) {
        text += ` · ${w.exception}`;
      }
      if (input.stoppedSince !== undefined) {
        text += ` · ${formatDuration(now - input.stoppedSince)}`;
        timed = true;
      }
      break;
    }
    case 'running': {
      text = 'running';
      const since = parseSince(w.since);
      if (since !== undefined) {
        text += ` · ${formatDuration(now - since)}`;
        timed = true;
      }
      if (!w.selected) {
        text += ' · not debugged';
      }
      break;
    }
    case 'failed':
      text = w.exception ? `raised ${w.exception}` : 'raised an exception';
      break;
    default:
      text = state;
  }
  if (typeof w.outputBytes === 'number' && w.outputBytes > 0) {
    text += ` · ${formatBytes(w.outputBytes)} out`;
  }
  return { text, timed };
}

/** Every field of the row, one per line, for its tooltip. */
export function workerTooltip(w: KnownWorker, now: number, stoppedSince?: number): string {
  const lines: string[] = [];
  if (w.task) {
    lines.push(
      `stage ${w.task.stage} · partition ${w.task.partition} · attempt ${w.task.attempt} · task attempt id ${w.task.taskAttemptId}`,
    );
  } else {
    lines.push('no task reported yet');
  }
  const state = stateOf(w);
  let st = `state: ${state}`;
  if (w.stopped) {
    st += ` at ${w.stopped.file}:${w.stopped.line}`;
    if (w.stopped.name) {
      st += ` in ${w.stopped.name}`;
    }
  }
  if (w.exception) {
    st += ` (${w.exception})`;
  }
  lines.push(st);
  const since = parseSince(w.since);
  if (since !== undefined) {
    const what = state === 'running' ? 'task started' : state === 'finished' || state === 'failed' ? 'went away' : 'since';
    lines.push(`${what}: ${new Date(since).toISOString()} (${formatDuration(now - since)} ago)`);
  }
  if (stoppedSince !== undefined) {
    lines.push(`stopped for: ${formatDuration(now - stoppedSince)}`);
  }
  lines.push(`executor ${w.executorId || '?'} · host ${w.host} · pid ${w.pid}`);
  lines.push(`debugged: ${w.selected ? 'yes (selected)' : 'no (not selected)'} · tasks run: ${w.tasks}`);
  if (typeof w.outputBytes === 'number') {
    lines.push(`output: ${formatBytes(w.outputBytes)}`);
  }
  if (w.executor) {
    lines.push(`proxy session: ${w.executor}`);
  }
  return lines.join('\n');
}
