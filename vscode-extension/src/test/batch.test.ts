import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Batcher, Ticker } from '../batch';
import { FakeClock } from '../testkit/fakeclock';

describe('Batcher', () => {
  test('a single event is drawn at once', () => {
    const c = new FakeClock();
    let n = 0;
    const b = new Batcher(() => n++, 250, c);
    b.schedule();
    c.advance(0);
    assert.equal(n, 1);
  });

  test('at most one flush per 250 ms however many events arrive', () => {
    const c = new FakeClock();
    const flushes: number[] = [];
    const b = new Batcher(() => flushes.push(c.now()), 250, c);
    // 1,000 events over 2 s: one every 2 ms.
    for (let i = 0; i < 1000; i++) {
      b.schedule();
      c.advance(2);
    }
    c.advance(1000);
    for (let i = 1; i < flushes.length; i++) {
      assert.ok(flushes[i] - flushes[i - 1] >= 250, `flushes ${flushes[i - 1]} and ${flushes[i]} too close`);
    }
    assert.ok(flushes.length >= 8 && flushes.length <= 10, `${flushes.length} flushes`);
    // The last events are not lost: a flush follows the last schedule.
    assert.ok(flushes[flushes.length - 1] >= 1998);
  });

  test('schedule during a pending flush arms nothing more', () => {
    const c = new FakeClock();
    const b = new Batcher(() => undefined, 250, c);
    assert.equal(b.schedule(), true);
    assert.equal(b.schedule(), false);
    assert.equal(c.pending, 1);
  });

  test('dispose cancels', () => {
    const c = new FakeClock();
    let n = 0;
    const b = new Batcher(() => n++, 250, c);
    b.schedule();
    b.dispose();
    c.advance(1000);
    assert.equal(n, 0);
    assert.equal(b.schedule(), false);
  });
});

describe('Ticker', () => {
  test('ticks each second while on, not after off', () => {
    const c = new FakeClock();
    let n = 0;
    const t = new Ticker(() => n++, 1000, c);
    t.set(true);
    c.advance(3500);
    assert.equal(n, 3);
    t.set(false);
    c.advance(5000);
    assert.equal(n, 3);
    assert.equal(c.pending, 0);
  });

  test('turning it on again keeps the phase', () => {
    const c = new FakeClock();
    let n = 0;
    const t = new Ticker(() => n++, 1000, c);
    t.set(true);
    for (let i = 0; i < 10; i++) {
      c.advance(300);
      t.set(true);
    }
    assert.equal(n, 3);
  });

  test('tick may turn it off', () => {
    const c = new FakeClock();
    let n = 0;
    const t: Ticker = new Ticker(() => {
      n++;
      t.set(false);
    }, 1000, c);
    t.set(true);
    c.advance(5000);
    assert.equal(n, 1);
    assert.equal(t.on, false);
  });
});
