import type { Clock } from '../batch';

/** A clock whose time moves only when the test says. */
export class FakeClock implements Clock {
  t = 0;
  private nextId = 1;
  private timers = new Map<number, { at: number; f: () => void }>();

  now(): number {
    return this.t;
  }

  setTimeout(f: () => void, ms: number): unknown {
    const id = this.nextId++;
    this.timers.set(id, { at: this.t + Math.max(0, ms), f });
    return id;
  }

  clearTimeout(h: unknown): void {
    this.timers.delete(h as number);
  }

  get pending(): number {
    return this.timers.size;
  }

  /** Moves time forward, running each timer due on the way, in order. */
  advance(ms: number): void {
    const end = this.t + ms;
    for (;;) {
      let next: [number, { at: number; f: () => void }] | undefined;
      for (const e of this.timers) {
        if (e[1].at <= end && (!next || e[1].at < next[1].at || (e[1].at === next[1].at && e[0] < next[0]))) {
          next = e;
        }
      }
      if (!next) {
        break;
      }
      this.timers.delete(next[0]);
      this.t = next[1].at;
      next[1].f();
    }
    this.t = end;
  }
}
