/**
 * One notebook's GPU session lease as its toolbar follows it: the run record and why it waits,
 * each re-read one at a time (models/coalesce), an event's news kept until a fresher read.
 */

import { OneAtATime } from './coalesce';
import { isFinal } from './lifecycle';
import { ISessionRun, isWaiting } from './sessionmodel';
import type { SessionSource } from './sessionsource';
import type { IExplain, IStatusEvent } from '../api/types';

export interface ILeaseHooks {
  /** A re-read of the lease arrived (`run` is the record read). */
  read(run: ISessionRun): void;
  /** Why the lease waits arrived. */
  explained(): void;
}

export class SessionLease {
  constructor(
    private _source: SessionSource,
    private _hooks: ILeaseHooks
  ) {}

  run: ISessionRun | null = null;
  explain: IExplain | null = null;

  /** Follow `run` from now (found, or restored with the notebook); why it waits is not known yet. */
  follow(run: ISessionRun): void {
    this.run = run;
    this.explain = null;
  }

  /** What an event of this lease says, shown at once; the re-read fills in the rest (devices, the kernel's state). */
  showEvent(ev: IStatusEvent): void {
    const run = this.run;
    if (run && ev.run_id === run.id) {
      const devices = (ev.details?.devices as number[] | undefined) ?? run.devices;
      this.run = { ...run, status: ev.status, phase: ev.phase, reason: ev.reason, message: ev.message, devices };
    }
  }

  /** Re-read the lease (one read at a time, once more if asked meanwhile). */
  refresh(): void {
    if (this.run) {
      this._reread.request();
    }
  }

  /** Re-read why a waiting lease waits (coalesced as `refresh`). */
  refreshExplain(): void {
    const run = this.run;
    if (run && isWaiting(run)) {
      this._reexplain.request();
    }
  }

  /**
   * The notebook moved to `path`: the lease follows (a reload finds it at the new path). Null when
   * there is nothing to move; true once this lease's record says so.
   */
  moveTo(path: string): Promise<boolean> | null {
    const run = this.run;
    if (!run || isFinal(run) || run.session?.notebook === path) {
      return null;
    }
    return this._source.moveSession(run.id, path).then(r => {
      if (this.run?.id !== r.id) {
        return false;
      }
      this.run = { ...this.run, name: r.name, session: r.session };
      return true;
    });
  }

  private _readRun(): Promise<void> | null {
    const run = this.run;
    if (!run) {
      return null;
    }
    return this._source.getRun(run.id).then(r => {
      if (this.run?.id === r.id) {
        // The event shown meanwhile may be newer than this read (an end): keep the final status.
        this.run = isFinal(this.run) && !isFinal(r) ? { ...r, ...pickStatus(this.run) } : r;
        if (isWaiting(r)) {
          this.refreshExplain();
        }
        this._hooks.read(r);
      }
    });
  }

  private _readExplain(): Promise<void> | null {
    const run = this.run;
    if (!run || !isWaiting(run)) {
      return null;
    }
    return this._source.explain(run.id).then(ex => {
      if (this.run?.id === ex.run_id && isWaiting(this.run)) {
        this.explain = ex;
        this._hooks.explained();
      }
    });
  }

  private _reread = new OneAtATime(() => this._readRun());
  private _reexplain = new OneAtATime(() => this._readExplain());
}

/** What an event said of a run that a slower re-read must not undo. */
function pickStatus(run: ISessionRun): Pick<ISessionRun, 'status' | 'phase' | 'reason' | 'message'> {
  return { status: run.status, phase: run.phase, reason: run.reason, message: run.message };
}
