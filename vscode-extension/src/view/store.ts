// What the view knows: the last known-workers answer of each root session
// that sent one. Several root sessions may watch at once (two jobs, or a
// "sparkdap" and a "debugpy" attach); the view shows one of them.

import type { Answer } from '../protocol';
import { StopClock } from './model';

export interface RootEntry {
  id: string;
  name: string;
  answer?: Answer;
  /** When the last answer arrived (clock ms); 0 before the first. */
  updated: number;
  stops: StopClock;
}

export class WorkerStore {
  private readonly roots = new Map<string, RootEntry>();

  /** Starts following a root session; keeps its entry if it has one. */
  add(id: string, name: string): RootEntry {
    let e = this.roots.get(id);
    if (!e) {
      e = { id, name, updated: 0, stops: new StopClock() };
      this.roots.set(id, e);
    }
    return e;
  }

  /** Takes a new answer for a root; false when the root is not followed. */
  update(id: string, answer: Answer, now: number): boolean {
    const e = this.roots.get(id);
    if (!e) {
      return false;
    }
    e.answer = answer;
    e.updated = now;
    e.stops.observe(answer.known ?? [], now);
    return true;
  }

  remove(id: string): boolean {
    return this.roots.delete(id);
  }

  get(id: string): RootEntry | undefined {
    return this.roots.get(id);
  }

  has(id: string): boolean {
    return this.roots.has(id);
  }

  get size(): number {
    return this.roots.size;
  }

  /**
   * The root to show: the preferred one (the root of the focused debug
   * session) when it is followed, else the one that answered last.
   */
  current(preferred?: string): RootEntry | undefined {
    if (preferred !== undefined) {
      const p = this.roots.get(preferred);
      if (p) {
        return p;
      }
    }
    let best: RootEntry | undefined;
    for (const e of this.roots.values()) {
      if (!best || e.updated > best.updated) {
        best = e;
      }
    }
    return best;
  }
}
