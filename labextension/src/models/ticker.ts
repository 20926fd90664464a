import { clockOffset } from './lifecycle';
import type { IRun } from '../api/types';

/**
 * The sidebar's one-second clock: it runs while a shown run still counts (not final)
 * and stops by itself when none does or the sidebar is hidden; `poke` starts it again.
 */

export class Ticker {
  constructor(
    private _tick: () => void,
    private _needed: () => boolean,
    private _onState: (running: boolean) => void = () => undefined,
    private _ms = 1000
  ) {}

  get running(): boolean {
    return this._timer !== null;
  }

  /** Something shown changed: start if a clock counts, stop if none does. */
  poke(): void {
    if (this._needed()) {
      if (this._timer === null) {
        this._timer = setInterval(() => this._beat(), this._ms);
        this._onState(true);
      }
    } else {
      this.stop();
    }
  }

  stop(): void {
    if (this._timer !== null) {
      clearInterval(this._timer);
      this._timer = null;
      this._onState(false);
    }
  }

  private _beat(): void {
    this._tick();
    if (!this._needed()) {
      this.stop();
    }
  }

  private _timer: ReturnType<typeof setInterval> | null = null;
}

/** The server's clock as seen from here: client minus server seconds (0 until measured). */
export class ServerClock {
  get offset(): number {
    return this._offset ?? 0;
  }

  /** Unfinished runs of a page the server computed at `clientNow` (their open clocks end at its now). */
  sampleRuns(runs: readonly IRun[], clientNow: number): void {
    for (const r of runs) {
      const o = clockOffset(r, clientNow);
      if (o !== null) {
        this.sample(o);
      }
    }
  }

  // Each sample is the true offset plus a delay ≥ 0: the smallest is the best estimate.
  sample(offset: number): void {
    if (this._offset === null || offset < this._offset) {
      this._offset = offset;
    }
  }

  private _offset: number | null = null;
}
