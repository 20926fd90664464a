/**
 * The runs the sidebar lists: pages from `GET runs` kept live by status events.
 *
 * Pure (no DOM, no network): the controller feeds it pages and events and fetches the
 * runs it asks for. Order is newest first (by seq, as the service pages them); the
 * service filters pages, `matchesFilter` filters live events the same way.
 */

import type { IEtaEvent, IRun, IRunsPage, IStatusEvent } from '../api/types';
import { isNewer } from './estimates';
import { GPU_MOSTLY_IDLE } from './notices';
import { EMPTY_FILTER, IRunFilter, clocks, isFinal, markRead, matchesFilter, readAgo, statusGroup } from './viewmodel';

export type EventOutcome = 'updated' | 'removed' | 'fetch' | 'ignored';

export class RunsModel {
  /**
   * The runs that pass the filter, newest first; a sweep's children are not among them
   * while their sweep is (the sweep's row stands for them and expands to them).
   */
  get runs(): readonly IRun[] {
    if (this._visibleAt !== this._version) {
      this._visibleAt = this._version;
      this._visible = this._order.some(r => r.parent)
        ? this._order.filter(r => !(r.parent && this._byId.has(r.parent)))
        : this._order;
    }
    return this._visible;
  }

  /** Every run held, children of listed sweeps included. */
  get all(): readonly IRun[] {
    return this._order;
  }

  get filter(): IRunFilter {
    return this._filter;
  }

  /** Whether older runs remain on the server (keyset cursor of the next page). */
  get nextBefore(): number | null {
    return this._nextBefore;
  }

  /** Bumped on every change; views compare it to skip work. */
  get version(): number {
    return this._version;
  }

  /**
   * The longest queue wait among the waiting runs held in a queue (sweeps wait through their
   * children), `now` in client seconds: each run's service clock, gone on since it was read.
   */
  longestWait(queue: string, now: number = Date.now() / 1000): number | null {
    let longest: number | null = null;
    for (const r of this._order) {
      if (r.queue === queue && r.kind !== 'sweep' && statusGroup(r) === 'waiting') {
        const wait = clocks(r, readAgo(r, now))[0].seconds;
        if (wait !== null && (longest === null || wait > longest)) {
          longest = wait;
        }
      }
    }
    return longest;
  }

  get(id: string): IRun | undefined {
    return this._byId.get(id);
  }

  onChange(cb: () => void): () => void {
    this._listeners.add(cb);
    return () => this._listeners.delete(cb);
  }

  /** A new filter empties the list; the controller then loads the first page. */
  setFilter(f: IRunFilter): void {
    this._filter = { ...f };
    this._byId.clear();
    this._order = [];
    this._nextBefore = null;
    this._changed();
  }

  /** The first page (replace) or the next one (append). */
  addPage(page: IRunsPage, replace: boolean): void {
    if (replace) {
      this._byId.clear();
      this._order = [];
    }
    for (const run of page.runs) {
      const old = this._byId.get(run.id);
      if (old) {
        this._replace(old, run);
      } else {
        this._byId.set(run.id, run);
        this._order.push(run);
      }
    }
    this._nextBefore = page.next_before;
    this._changed();
  }

  /**
   * Apply a status event. A run we list changes in place (or leaves when it stops
   * matching the filter); a run we do not list yet but now should is `fetch`ed by the
   * controller, which hands it to `upsert`.
   */
  applyEvent(ev: IStatusEvent): EventOutcome {
    const run = this._byId.get(ev.run_id);
    if (!run) {
      if (!matchesFilter(ev, this._filter)) {
        return 'ignored';
      }
      if (ev.status === 'created') {
        // A new submission is the newest run: list it now, complete it when fetched.
        this._insertNew(ev);
      }
      return 'fetch';
    }
    if (run.updated_at !== null && ev.at < run.updated_at) {
      return 'ignored'; // older than what we hold (a page fetched after it)
    }
    if (ev.reason === GPU_MOSTLY_IDLE) {
      return 'ignored'; // a remark after its end: its status, reason and times stay the record's
    }
    run.status = ev.status;
    run.reason = ev.reason;
    run.message = ev.message;
    run.updated_at = ev.at;
    // No clock or phase time is kept from events: the record, re-read below, brings them.
    run.phase = ev.phase;
    if (ev.phase === 'run' || ev.phase === 'end') {
      // An estimate is of a start: the service has none for a started or ended run (the re-read says so too).
      run.eta = null;
      run.eta_unknown = null;
    }
    if (isFinal(ev)) {
      run.finished_at = ev.at;
    }
    if (!matchesFilter(run, this._filter)) {
      this._remove(run.id);
      this._changed();
      return 'removed';
    }
    this._changed();
    // Re-read the record: which clock ticks and how long each ran are the service's (a phase begun,
    // a preempted run waiting again, an end that closes the clocks); none is computed here.
    return 'fetch';
  }

  /**
   * Start estimates that moved (an `eta` event): the runs we hold take the service's new `eta` or
   * `eta_unknown` as they are. True when a run we hold changed.
   */
  applyEta(ev: IEtaEvent): boolean {
    let changed = false;
    for (const change of ev.runs) {
      const run = this._byId.get(change.run_id);
      if (run && isNewer(change, run)) {
        run.eta = change.eta ?? null;
        run.eta_unknown = change.eta_unknown ?? null;
        changed = true;
      }
    }
    if (changed) {
      this._changed();
    }
    return changed;
  }

  /**
   * Add or refresh one run (fetched after an event); kept only if it belongs in the list.
   * `force` lists it even if it is older than the loaded pages: a sweep whose children
   * are listed (its page would come much later: children are newer than their parent).
   */
  upsert(run: IRun, force = false): void {
    const old = this._byId.get(run.id);
    if (old) {
      if (old.updated_at === null || run.updated_at === null || run.updated_at >= old.updated_at) {
        this._replace(old, run);
        if (!matchesFilter(run, this._filter)) {
          this._remove(run.id);
        }
        this._changed();
      }
      return;
    }
    if (!matchesFilter(run, this._filter)) {
      return;
    }
    // Older than the loaded pages: the next page will bring it.
    if (!force && this._nextBefore !== null && run.seq < this._nextBefore) {
      return;
    }
    this._byId.set(run.id, run);
    this._order.splice(this._insertAt(run.seq), 0, run);
    this._changed();
  }

  private _insertNew(ev: IStatusEvent): void {
    const run: IRun = {
      id: ev.run_id,
      seq: (this._order[0]?.seq ?? 0) + 1,
      project: ev.project,
      user: ev.user,
      name: ev.name,
      kind: 'job',
      queue: ev.queue,
      status: ev.status,
      phase: ev.phase,
      reason: ev.reason,
      message: ev.message,
      resources: {},
      devices: [],
      exit_code: null,
      clocks: { queue_wait_seconds: null, start_wait_seconds: null, run_seconds: null, ticking: null },
      created_at: ev.at,
      queued_at: ev.at,
      dispatched_at: null,
      started_at: null,
      finished_at: null,
      updated_at: ev.at
    };
    this._byId.set(run.id, run);
    this._order.unshift(run);
    this._changed();
  }

  private _insertAt(seq: number): number {
    // newest first: the first index whose seq is lower than `seq`
    let lo = 0;
    let hi = this._order.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (this._order[mid].seq > seq) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    return lo;
  }

  private _replace(old: IRun, run: IRun): void {
    Object.assign(old, run);
    // the row keeps its object: its clocks are now as of the new record's read
    markRead(old, Date.now() / 1000 - readAgo(run));
  }

  private _remove(id: string): void {
    const run = this._byId.get(id);
    if (!run) {
      return;
    }
    this._byId.delete(id);
    const i = this._order.indexOf(run);
    if (i >= 0) {
      this._order.splice(i, 1);
    }
  }

  private _changed(): void {
    this._version += 1;
    for (const cb of this._listeners) {
      cb();
    }
  }

  private _byId = new Map<string, IRun>();
  private _order: IRun[] = [];
  private _filter: IRunFilter = { ...EMPTY_FILTER };
  private _nextBefore: number | null = null;
  private _version = 0;
  private _visible: IRun[] = [];
  private _visibleAt = -1;
  private _listeners = new Set<() => void>();
}
