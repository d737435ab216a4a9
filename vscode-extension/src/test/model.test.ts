import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Answer } from '../protocol';
import { buildTree, compareExecutorIds, headerLabel, StopClock, type ExecutorNode, type HeaderNode, type MoreNode, type WorkerNode } from '../view/model';
import { workerTooltip } from '../view/format';
import { manyWorkers, T0, worker } from '../testkit/fixtures';

function executors(roots: readonly unknown[]): ExecutorNode[] {
  return roots.filter((n): n is ExecutorNode => (n as ExecutorNode).kind === 'executor');
}

describe('buildTree', () => {
  test('no answer: an empty tree, so the welcome text shows', () => {
    const m = buildTree(undefined, { now: T0 });
    assert.deepEqual(m.roots, []);
    assert.equal(m.needsTick, false);
  });

  test('groups by executor, then stage, with the labels the view shows', () => {
    const a: Answer = {
      known: [
        worker({ executorId: '2', host: 'node-2', partition: 7, stage: 3 }),
        worker({ executorId: '1', host: 'node-1', partition: 9, stage: 3 }),
        worker({ executorId: '1', host: 'node-1', partition: 2, stage: 3, attempt: 1, pid: 7 }),
        worker({ executorId: '1', host: 'node-1', partition: 4, stage: 1 }),
        worker({ executorId: '10', host: 'node-10', partition: 1, stage: 0 }),
        worker({ executorId: 'driver', host: 'laptop', partition: 0, stage: 0 }),
      ],
    };
    const m = buildTree(a, { now: T0 });
    const ex = executors(m.roots);
    assert.deepEqual(
      ex.map((e) => e.label),
      ['driver · laptop', 'executor 1 · node-1', 'executor 2 · node-2', 'executor 10 · node-10'],
    );
    const e1 = ex[1];
    assert.deepEqual(e1.children.map((s) => s.label), ['stage 1', 'stage 3']);
    assert.deepEqual(e1.children[1].children.map((w) => w.label), ['partition 2 · attempt 1', 'partition 9']);
    assert.equal(e1.children[1].description, '2 workers · 2 running');
    assert.equal(e1.description, '3 workers · 3 running');
    assert.equal(m.rows, 6);
  });

  test('workers without a task, and without an executor id, have a place', () => {
    const a: Answer = {
      known: [worker({ executorId: '', host: 'h', pid: 42, state: 'idle', running: false })],
    };
    const ex = executors(buildTree(a, { now: T0 }).roots);
    assert.equal(ex[0].label, 'executor ? · h');
    assert.equal(ex[0].children[0].label, 'no task yet');
    assert.equal(ex[0].children[0].children[0].label, 'pid 42');
    assert.equal(ex[0].children[0].children[0].description, 'idle');
  });

  test('describes each state', () => {
    const stopAt = T0 - 41_000;
    const a: Answer = {
      known: [
        worker({ partition: 1, stage: 0, state: 'stopped', stopped: { name: 'f', file: '/src/udf.py', line: 12 }, executor: 5 }),
        worker({ partition: 2, stage: 0, state: 'running', outputBytes: 2150 }),
        worker({ partition: 3, stage: 0, state: 'idle', running: false }),
        worker({ partition: 4, stage: 0, state: 'finished', running: false }),
        worker({ partition: 5, stage: 0, state: 'failed', running: false, exception: 'KeyError' }),
        worker({ partition: 6, stage: 0, state: 'running', selected: false }),
        worker({ partition: 7, stage: 0, state: 'stopped', stopped: { name: 'f', file: 'C:\\job\\x.py', line: 3 }, exception: 'ValueError', executor: 6 }),
      ],
    };
    const m = buildTree(a, { now: T0, stoppedSince: (w) => (w.executor === 5 ? stopAt : undefined) });
    const rows = executors(m.roots)[0].children[0].children;
    assert.deepEqual(
      rows.map((r) => r.description),
      [
        'stopped at udf.py:12 · 41 s',
        'running · 3 s · 2.1 KiB out',
        'idle',
        'finished',
        'raised KeyError',
        'running · 3 s · not debugged',
        'stopped at x.py:3 · ValueError',
      ],
    );
    assert.equal(m.needsTick, true);
    assert.equal(rows[0].stoppedSince, stopAt);
    const tip0 = workerTooltip(rows[0].worker, T0, rows[0].stoppedSince);
    assert.match(tip0, /state: stopped at \/src\/udf\.py:12 in f/);
    assert.match(tip0, /stage 0 · partition 1 · attempt 0 · task attempt id 101/);
    assert.match(tip0, /stopped for: 41 s/);
    assert.match(tip0, /executor 1 · host node-1 · pid 1001/);
    assert.match(tip0, /proxy session: 5/);
    assert.match(workerTooltip(rows[1].worker, T0), /task started: 2026-01-01T11:59:57\.000Z \(3 s ago\)/);
    assert.match(workerTooltip(rows[1].worker, T0), /output: 2\.1 KiB/);
    assert.match(workerTooltip(rows[5].worker, T0), /debugged: no \(not selected\)/);
  });

  test('contextValue carries state, a connected debugger and a task, for the menus', () => {
    const a: Answer = {
      known: [
        worker({ partition: 1, stage: 0, state: 'stopped', stopped: { name: 'f', file: 'a.py', line: 1 }, executor: 3 }),
        worker({ partition: 2, stage: 0, state: 'running', executor: 4 }),
        worker({ partition: 3, stage: 0, state: 'running' }),
        worker({ partition: 4, stage: 0, state: 'finished', running: false, executor: 9 }),
        worker({ pid: 5, state: 'idle', running: false }),
      ],
    };
    const rows = executors(buildTree(a, { now: T0 }).roots)[0].children.flatMap((s) => s.children);
    assert.deepEqual(
      rows.map((r) => r.contextValue),
      [';worker;stopped;debug;task;', ';worker;running;debug;task;', ';worker;running;task;', ';worker;finished;task;', ';worker;idle;'],
    );
  });

  test('header counts and selection; an old proxy without counts is counted', () => {
    const a: Answer = {
      counts: { workers: 12, running: 8, stopped: 3, idle: 0, finished: 1, failed: 0 },
      selection: { partitions: [37], stages: null, executors: null, sampleRate: 1 },
      known: [],
    };
    const h = buildTree(a, { now: T0 }).roots[0] as HeaderNode;
    assert.equal(h.label, '12 workers · 3 stopped · 8 running · 1 finished');
    assert.equal(h.description, 'selection: partitions 37 · stages all · executors all');
    const old = buildTree({ known: [worker({ partition: 1, stage: 0 }), worker({ partition: 2, stage: 0, state: undefined, stopped: { name: '', file: 'a', line: 1 } })] }, { now: T0 }).roots[0] as HeaderNode;
    assert.equal(old.label, '2 workers · 1 stopped · 1 running');
    assert.equal(old.description, 'selection: as submitted');
    assert.equal(headerLabel({ workers: 1, running: 0, stopped: 0, idle: 1, finished: 0, failed: 1 }), '1 worker · 1 idle · 1 failed');
  });

  test('"and N more" from more', () => {
    const m = buildTree({ known: [worker({ partition: 1, stage: 0 })], more: 4500 }, { now: T0 });
    const last = m.roots[m.roots.length - 1] as MoreNode;
    assert.equal(last.kind, 'more');
    assert.equal(last.label, 'and 4500 more');
    assert.equal(buildTree({ known: [], more: 0 }, { now: T0 }).roots.some((n) => n.kind === 'more'), false);
  });

  test('ids are unique though a gone worker shares a live one’s host and pid', () => {
    const a: Answer = {
      known: [
        worker({ pid: 1, partition: 1, stage: 0 }),
        worker({ pid: 1, partition: 2, stage: 0, state: 'finished', running: false, since: 'a' }),
        worker({ pid: 1, partition: 3, stage: 0, state: 'finished', running: false, since: 'a' }),
        worker({ pid: 1, partition: 4, stage: 0 }),
      ],
    };
    const rows = executors(buildTree(a, { now: T0 }).roots)[0].children[0].children;
    assert.equal(new Set(rows.map((r) => r.id)).size, 4);
  });

  test('1,000 rows: grouped, sorted and described fast', () => {
    const a = manyWorkers(1000);
    let m = buildTree(a, { now: T0 });
    // The best of 10: a busy machine slows some builds, never speeds one up.
    let perBuild = Infinity;
    for (let i = 0; i < 10; i++) {
      const t = performance.now();
      m = buildTree(a, { now: T0 + i * 1000 });
      perBuild = Math.min(perBuild, performance.now() - t);
    }
    const ex = executors(m.roots);
    assert.equal(ex.length, 10);
    const rows: WorkerNode[] = ex.flatMap((e) => e.children.flatMap((s) => s.children));
    assert.equal(rows.length, 1000);
    assert.equal(new Set(rows.map((r) => r.id)).size, 1000);
    for (const e of ex) {
      for (const s of e.children) {
        for (let i = 1; i < s.children.length; i++) {
          assert.ok(s.children[i - 1].worker.task!.partition < s.children[i].worker.task!.partition);
        }
      }
    }
    assert.equal(m.needsTick, true);
    // Generous for slow CI machines: a build is a few ms here.
    assert.ok(perBuild < 100, `a build of 1,000 rows took ${perBuild.toFixed(1)} ms`);
  });

  test('5,000 rows stay near-linear', () => {
    const small = manyWorkers(500);
    const big = manyWorkers(5000);
    const time = (a: Answer) => {
      let best = Infinity;
      for (let i = 0; i < 5; i++) {
        const t = performance.now();
        buildTree(a, { now: T0 });
        best = Math.min(best, performance.now() - t);
      }
      return best;
    };
    time(big); // warm up
    const ratio = time(big) / Math.max(time(small), 0.1);
    assert.ok(ratio < 40, `10x rows took ${ratio.toFixed(1)}x the time`);
  });
});

describe('compareExecutorIds', () => {
  test('driver, numbers as numbers, names, unknown', () => {
    const ids = ['10', 'b', '', '2', 'driver', '1', 'a', '100'];
    assert.deepEqual([...ids].sort(compareExecutorIds), ['driver', '1', '2', '10', '100', 'a', 'b', '']);
  });
});

describe('StopClock', () => {
  test('keeps the first time a worker was seen stopped where it is', () => {
    const c = new StopClock();
    const stopped = worker({ pid: 1, executor: 3, state: 'stopped', stopped: { name: 'f', file: 'a.py', line: 1 } });
    c.observe([stopped], 1000);
    c.observe([stopped], 5000);
    assert.equal(c.sinceOf(stopped), 1000);
    const stepped = { ...stopped, stopped: { name: 'f', file: 'a.py', line: 2 } };
    c.observe([stepped], 6000);
    assert.equal(c.sinceOf(stepped), 6000, 'a step starts over');
    c.observe([{ ...stopped, state: 'running', stopped: undefined }], 7000);
    assert.equal(c.sinceOf(stopped), undefined);
    assert.equal(c.size, 0, 'resumed workers are forgotten');
  });
});
