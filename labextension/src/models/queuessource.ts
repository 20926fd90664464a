/**
 * The queues page's data source: the queues this caller may use, re-read on demand (a burst
 * of status events coalesced into one request), and pausing or resuming one. The view follows
 * its signals and renders; it does not fetch.
 */

import { ISignal, Signal } from '@lumino/signaling';

import type { GpuPlatService } from '../api/request';
import type { IQueue } from '../api/types';

/** A burst of `schedule()` calls within this many milliseconds costs one request. */
export const QUEUES_COALESCE_MS = 200;

export class QueuesSource {
  constructor(private _service: Pick<GpuPlatService, 'queues' | 'pauseQueue' | 'resumeQueue'>) {}

  get queues(): IQueue[] {
    return this._queues;
  }

  /** The list was read anew, or one queue changed (paused, resumed). */
  get changed(): ISignal<this, IQueue[]> {
    return this._changed;
  }

  /** Reading or changing failed; the list stays as it was. */
  get failed(): ISignal<this, unknown> {
    return this._failed;
  }

  /** Reload (coalesced: a burst of status events costs one request). */
  schedule(): void {
    clearTimeout(this._timer);
    this._timer = setTimeout(() => void this.refresh(), QUEUES_COALESCE_MS);
  }

  async refresh(): Promise<void> {
    try {
      this._queues = await this._service.queues();
      this._changed.emit(this._queues);
    } catch (error) {
      this._failed.emit(error);
    }
  }

  /** Pause a running queue, resume a paused one (what the queue's `actions` offer). */
  async toggle(q: IQueue): Promise<void> {
    try {
      const r = q.paused ? await this._service.resumeQueue(q.name) : await this._service.pauseQueue(q.name);
      this._queues = this._queues.map(x => (x.name === q.name ? r.queue : x));
      this._changed.emit(this._queues);
    } catch (error) {
      this._failed.emit(error);
    }
  }

  dispose(): void {
    clearTimeout(this._timer);
    Signal.clearData(this);
  }

  private _queues: IQueue[] = [];
  private _timer: ReturnType<typeof setTimeout> | undefined = undefined;
  private _changed = new Signal<this, IQueue[]>(this);
  private _failed = new Signal<this, unknown>(this);
}
