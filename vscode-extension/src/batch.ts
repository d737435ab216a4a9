// Rate limits for the view. The proxy coalesces its events to one per
// 250 ms, but several root sessions, refresh commands and the duration
// ticker all ask for a redraw too: each redraw makes VS Code fetch every
// visible row again over IPC, so they are merged here into at most one per
// interval, and durations tick only while something shows one.

/** The timers the schedulers use; tests pass a fake one. */
export interface Clock {
  now(): number;
  setTimeout(f: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

export const realClock: Clock = {
  now: () => Date.now(),
  setTimeout: (f, ms) => setTimeout(f, ms),
  clearTimeout: (h) => clearTimeout(h as ReturnType<typeof setTimeout>),
};

/**
 * Batcher calls flush at most once per interval, however often schedule is
 * called. The first request after a quiet interval is served on the next
 * turn (delay 0) so a single event shows at once; requests within the
 * interval after a flush wait for its end and are served together.
 */
export class Batcher {
  private timer: unknown;
  private last = Number.NEGATIVE_INFINITY;
  private disposed = false;

  constructor(
    private readonly flush: () => void,
    private readonly intervalMs = 250,
    private readonly clock: Clock = realClock,
  ) {}

  /** Asks for a flush; returns whether this call armed the timer. */
  schedule(): boolean {
    if (this.disposed || this.timer !== undefined) {
      return false;
    }
    const wait = Math.max(0, this.last + this.intervalMs - this.clock.now());
    this.timer = this.clock.setTimeout(() => this.fire(), wait);
    return true;
  }

  /** Whether a flush is pending. */
  get pending(): boolean {
    return this.timer !== undefined;
  }

  private fire(): void {
    this.timer = undefined;
    if (this.disposed) {
      return;
    }
    this.last = this.clock.now();
    this.flush();
  }

  dispose(): void {
    this.disposed = true;
    if (this.timer !== undefined) {
      this.clock.clearTimeout(this.timer);
      this.timer = undefined;
    }
  }
}

/**
 * Ticker calls tick every period while it is on. Turning it on again while
 * on keeps the running phase (so a stream of updates does not postpone the
 * tick forever); off cancels the pending tick.
 */
export class Ticker {
  private timer: unknown;

  constructor(
    private readonly tick: () => void,
    private readonly periodMs = 1000,
    private readonly clock: Clock = realClock,
  ) {}

  get on(): boolean {
    return this.timer !== undefined;
  }

  set(on: boolean): void {
    if (on && this.timer === undefined) {
      this.arm();
    } else if (!on && this.timer !== undefined) {
      this.clock.clearTimeout(this.timer);
      this.timer = undefined;
    }
  }

  private arm(): void {
    this.timer = this.clock.setTimeout(() => {
      this.timer = undefined;
      // Re-armed before tick so tick may turn it off (set(false)).
      this.arm();
      this.tick();
    }, this.periodMs);
  }

  dispose(): void {
    this.set(false);
  }
}
