/**
 * The panel's sweeps' data source: expanded sweeps' children (their own live models), re-reading a
 * sweep when its children's events change its counts, listing a sweep whose child came
 * first. Events name only the child, so this maps children to their sweep.
 */

import type { GpuPlatService } from '../api/request';
import { RunsModel } from './runsmodel';
import { SweepRereader, isSweep } from './sweepmodel';
import type { IRun, IRunDetail, IStatusEvent } from '../api/types';

/** The run detail open beside the list, as far as the sweeps need it. */
export interface ISweepDetail {
  readonly runId: string;
  readonly run: IRunDetail | null;
  /** Show a record read anew. */
  showRecord(run: IRunDetail): void;
}

export interface ISweepSourceOptions {
  service: Pick<GpuPlatService, 'listRuns' | 'getRun'>;
  model: RunsModel;
  pageSize: number;
  /** Runs being fetched (shared with the panel: one request per run at a time). */
  fetching: Set<string>;
  detail: () => ISweepDetail | null;
  /** The list must render again (a sweep expanded, collapsed, its children changed). */
  changed: () => void;
  onError: (error: unknown) => void;
}

export class SweepSource {
  constructor(private _o: ISweepSourceOptions) {
    this._sweeps = new SweepRereader(
      id => this._reread(id),
      cb => requestAnimationFrame(() => cb())
    );
  }

  /** The children of an expanded sweep; undefined while collapsed. */
  children(id: string): RunsModel | undefined {
    return this._children.get(id);
  }

  clear(): void {
    this._children.clear();
  }

  /** A run arrived (fetched): its sweep's counts change, or its sweep must be listed first. */
  fetched(run: IRun): void {
    if (!run.parent) {
      return;
    }
    this._children.get(run.parent)?.upsert(run);
    if (this._o.model.get(run.parent)) {
      this._sweeps.request(run.parent);
    } else {
      this._ensureListed(run.parent);
    }
  }

  /**
   * A sweep's counts change with its children's events: when the event's run is a known
   * child of a sweep we show (or the sweep itself), re-read the sweep (once per frame at
   * most), and keep its expanded children live.
   */
  follow(ev: IStatusEvent): void {
    let sweepId: string | null = null;
    const own = this._o.model.get(ev.run_id);
    const detail = this._o.detail();
    if (own && isSweep(own)) {
      sweepId = own.id;
    } else if (own?.parent) {
      sweepId = own.parent;
    } else {
      for (const [id, children] of this._children) {
        if (children.get(ev.run_id)) {
          sweepId = id;
          break;
        }
      }
    }
    if (sweepId === null && detail?.run && isSweep(detail.run) && ev.run_id === detail.runId) {
      sweepId = detail.runId;
    }
    if (sweepId === null) {
      return;
    }
    const children = this._children.get(sweepId);
    if (children?.get(ev.run_id) && children.applyEvent(ev) === 'fetch') {
      // the child's clocks are the service's: re-read the expanded children
      this._rereadChildren(sweepId);
    }
    if (this._o.model.get(sweepId) || detail?.runId === sweepId) {
      this._sweeps.request(sweepId);
    }
  }

  isKnownChild(id: string): boolean {
    if (this._o.model.get(id)?.parent) {
      return true;
    }
    for (const children of this._children.values()) {
      if (children.get(id)) {
        return true;
      }
    }
    return false;
  }

  async toggle(id: string): Promise<void> {
    if (this._children.delete(id)) {
      this._o.changed();
      return;
    }
    const children = new RunsModel();
    children.onChange(() => this._o.changed());
    this._children.set(id, children);
    this._o.changed();
    try {
      const page = await this._o.service.listRuns({ parent: id }, null, this._o.pageSize);
      if (this._children.get(id) === children) {
        children.addPage(page, true);
      }
    } catch (error) {
      this._o.onError(error);
    }
  }

  async loadMore(id: string): Promise<void> {
    const children = this._children.get(id);
    const before = children?.nextBefore ?? null;
    if (!children || before === null || this._loading.has(id)) {
      return;
    }
    this._loading.add(id);
    try {
      children.addPage(await this._o.service.listRuns({ parent: id }, before, this._o.pageSize), false);
    } catch (error) {
      this._o.onError(error);
    } finally {
      this._loading.delete(id);
    }
  }

  private async _reread(id: string): Promise<void> {
    const run = await this._o.service.getRun(id);
    const detail = this._o.detail();
    if (this._o.model.get(id)) {
      this._o.model.upsert(run, true);
    } else if (detail?.runId !== id) {
      return;
    }
    if (detail?.runId === id) {
      detail.showRecord(run);
    }
  }

  /**
   * Re-read the first page of an expanded sweep's children (once per frame, one request per
   * sweep, not one per child: a wide sweep's children change all at once) into its list.
   */
  private _rereadChildren(sweepId: string): void {
    this._stale.add(sweepId);
    if (this._frame !== null) {
      return;
    }
    this._frame = requestAnimationFrame(() => {
      this._frame = null;
      const ids = [...this._stale];
      this._stale.clear();
      for (const id of ids) {
        this._o.service
          .listRuns({ parent: id }, null, this._o.pageSize)
          .then(page => {
            const children = this._children.get(id);
            page.runs.filter(r => children?.get(r.id)).forEach(r => children?.upsert(r));
          })
          .catch(() => undefined);
      }
    });
  }

  /** A child listed before its sweep: list the sweep (its row then stands for the child). */
  private _ensureListed(id: string): void {
    const fetching = this._o.fetching;
    if (this._o.model.get(id) || fetching.has(id)) {
      return;
    }
    fetching.add(id);
    this._o.service
      .getRun(id)
      .then(run => this._o.model.upsert(run, true))
      .catch(() => undefined)
      .finally(() => fetching.delete(id));
  }

  private _children = new Map<string, RunsModel>();
  private _loading = new Set<string>();
  private _stale = new Set<string>();
  private _frame: number | null = null;
  private _sweeps: SweepRereader;
}
