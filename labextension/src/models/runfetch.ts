/**
 * Fetching the runs the list lacks or holds stale: runs that events named and we do not
 * list (once per frame: one by one when few, else one first page), and the waiting runs
 * of a queue whose events changed why they wait.
 */

import type { GpuPlatService } from '../api/request';
import type { RunsModel } from './runsmodel';
import type { IRun } from '../api/types';
import { filterQuery, statusGroup } from './viewmodel';

// More runs unknown in one frame than this are fetched as one page, not one by one.
const FETCH_ONE_BY_ONE = 20;
// Events of a queue change why its runs wait: its listed waiting runs are re-read after this.
const WAITING_REREAD_MS = 400;

export interface IRunFetcherOptions {
  service: GpuPlatService;
  model: RunsModel;
  pageSize: number;
  /** A run arrived: list it (and tell its sweep). */
  fetched: (run: IRun) => void;
}

export class RunFetcher {
  constructor(private _o: IRunFetcherOptions) {}

  /** Runs being fetched: one request per run at a time. */
  readonly fetching = new Set<string>();

  /** An event named a run we do not list: fetch it (batched per frame). */
  unknown(id: string): void {
    if (this.fetching.has(id)) {
      return;
    }
    this._unknown.add(id);
    if (this._frame === null) {
      this._frame = requestAnimationFrame(() => this._fetchUnknown());
    }
  }

  /**
   * Why a run waits changes with its queue (a run ahead ends, a queue is paused): after
   * a queue's events, re-read our listed waiting runs of that queue (their `waiting`).
   */
  rereadWaiting(queue: string): void {
    const m = this._o.model;
    if (!m.all.some(r => r.queue === queue && statusGroup(r) === 'waiting')) {
      return;
    }
    this._queues.add(queue);
    window.clearTimeout(this._timer);
    this._timer = window.setTimeout(() => {
      const queues = [...this._queues];
      this._queues.clear();
      for (const q of queues) {
        this._o.service
          .listRuns({ queue: q, phase: 'dispatch' }, null, this._o.pageSize)
          .then(page => page.runs.filter(r => m.get(r.id)).forEach(r => m.upsert(r)))
          .catch(() => undefined);
      }
    }, WAITING_REREAD_MS);
  }

  dispose(): void {
    window.clearTimeout(this._timer);
    if (this._frame !== null) {
      cancelAnimationFrame(this._frame);
    }
  }

  /**
   * A sweep of 10,000 children announces them all at once, and its children are the
   * newest runs: one first page brings them, not 10,000 requests.
   */
  private _fetchUnknown(): void {
    this._frame = null;
    const ids = [...this._unknown];
    this._unknown.clear();
    if (ids.length <= FETCH_ONE_BY_ONE) {
      ids.forEach(id => this._fetchOne(id));
      return;
    }
    ids.forEach(id => this.fetching.add(id));
    const m = this._o.model;
    const filter = m.filter;
    this._o.service
      .listRuns(filterQuery(filter), null, this._o.pageSize)
      .then(page => {
        if (filter !== m.filter) {
          return;
        }
        page.runs.forEach(run => this._o.fetched(run));
        // older runs the page did not bring (back in the list after a change): one by one, if few
        const missing = ids.filter(id => !m.get(id));
        ids.forEach(id => this.fetching.delete(id));
        if (missing.length <= FETCH_ONE_BY_ONE) {
          missing.forEach(id => this._fetchOne(id));
        }
      })
      .catch(() => undefined)
      .finally(() => ids.forEach(id => this.fetching.delete(id)));
  }

  private _fetchOne(id: string): void {
    if (this.fetching.has(id)) {
      return;
    }
    this.fetching.add(id);
    this._o.service
      .getRun(id)
      .then(run => this._o.fetched(run))
      .catch(() => undefined) // gone or not visible any more: nothing to list
      .finally(() => this.fetching.delete(id));
  }

  private _unknown = new Set<string>();
  private _frame: number | null = null;
  private _queues = new Set<string>();
  private _timer = 0;
}
