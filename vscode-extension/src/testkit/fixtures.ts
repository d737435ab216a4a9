// Rows as the proxy sends them, for the tests.

import type { Answer, KnownWorker } from '../protocol';

export const T0 = Date.UTC(2026, 0, 1, 12, 0, 0);

export function iso(ms: number): string {
  // Go writes nanoseconds; the view must read them.
  return new Date(ms).toISOString().replace('Z', '123456Z');
}

export function worker(p: Partial<KnownWorker> & { partition?: number; stage?: number; attempt?: number }): KnownWorker {
  const { partition, stage, attempt, ...rest } = p;
  const w: KnownWorker = {
    executorId: '1',
    host: 'node-1',
    pid: 1000 + (partition ?? 0),
    running: true,
    selected: true,
    since: iso(T0 - 3000),
    tasks: 1,
    state: 'running',
    ...rest,
  };
  if (partition !== undefined || stage !== undefined) {
    w.task = { stage: stage ?? 0, partition: partition ?? 0, attempt: attempt ?? 0, taskAttemptId: 100 + (partition ?? 0) };
  }
  return w;
}

/** n workers over executors 1..e, stages 0..s, a tenth stopped, some finished. */
export function manyWorkers(n: number, e = 10, s = 5): Answer {
  const known: KnownWorker[] = [];
  for (let i = 0; i < n; i++) {
    const state = i % 10 === 0 ? 'stopped' : i % 7 === 0 ? 'finished' : i % 13 === 0 ? 'idle' : 'running';
    known.push(
      worker({
        executorId: String((i % e) + 1),
        host: `node-${(i % e) + 1}`,
        pid: 10000 + i,
        partition: i,
        stage: i % s,
        state,
        running: state === 'running' || state === 'stopped',
        stopped: state === 'stopped' ? { name: 'udf', file: '/src/job/udf.py', line: 12 } : undefined,
        executor: state === 'finished' ? undefined : i + 1,
        outputBytes: i * 37,
      }),
    );
  }
  return { known, more: 0, selection: null, asSubmitted: true };
}
