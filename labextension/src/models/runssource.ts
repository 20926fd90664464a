/**
 * The runs page's data source (as JupyterLab's FileBrowserModel is the file browser's): it owns
 * the runs model, the event stream, the pages of `GET runs`, the runs fetched because events
 * named them, and the server's clock. Views compose it: they read its model and follow its
 * signals; they do not fetch.
 */

import { ISignal, Signal } from '@lumino/signaling';

import type { GpuPlatService, IStreamHandle, StreamState } from '../api/request';
import type { IEtaEvent, IRun, IStatusEvent } from '../api/types';
import { RunFetcher } from './runfetch';
import { RunsModel } from './runsmodel';
import { ServerClock } from './ticker';
import { IRunFilter, filterQuery } from './viewmodel';

/** Where loading the first page stands: `loading`, `loaded`, or the error it failed with. */
export type RunsLoad = { state: 'loading' } | { state: 'loaded' } | { state: 'error'; error: unknown };

export interface IRunsSourceOptions {
  service: GpuPlatService;
  pageSize: number;
}

export class RunsSource {
  constructor(private _o: IRunsSourceOptions) {
    this.model = new RunsModel();
    _o.service.runChanged.connect((_, run) => this._fetched(run), this);
    this._fetcher = new RunFetcher({ service: _o.service, model: this.model, pageSize: _o.pageSize, fetched: run => this._fetched(run) });
  }

  readonly model: RunsModel;

  /** Runs being fetched: one request per run at a time (shared with the sweeps' children). */
  get fetching(): Set<string> {
    return this._fetcher.fetching;
  }

  /** Client clock minus server clock, in seconds (0 until measured). */
  get clockOffset(): number {
    return this._clock.offset;
  }

  /** The first page was read (or failed): events now apply to the model. */
  get loaded(): boolean {
    return this._loaded;
  }

  /** Every status event of the stream, after the model applied it. */
  get eventReceived(): ISignal<this, IStatusEvent> {
    return this._eventReceived;
  }

  /** Start estimates that moved (`event: eta`), after the model took them. */
  get etaReceived(): ISignal<this, IEtaEvent> {
    return this._etaReceived;
  }

  /** The stream (re)connected and replayed what was missed; `true` after a reconnect. */
  get streamReady(): ISignal<this, boolean> {
    return this._streamReady;
  }

  get streamState(): ISignal<this, StreamState> {
    return this._streamState;
  }

  /** A run arrived, fetched or re-read, and the model holds it. */
  get fetched(): ISignal<this, IRun> {
    return this._fetchedSignal;
  }

  /** Loading the first page started, ended or failed. */
  get loadChanged(): ISignal<this, RunsLoad> {
    return this._loadChanged;
  }

  /** A later page failed. */
  get pageFailed(): ISignal<this, unknown> {
    return this._pageFailed;
  }

  /** Open the event stream (once). */
  connect(): void {
    this._events ??= this._o.service.events({
      onEvent: ev => this._onEvent(ev),
      onEta: ev => this._onEta(ev),
      onReady: resumed => {
        this._live = true;
        if (resumed && this._loaded) {
          // `eta` events are not replayed: the estimates sent during the drop come with the waiting runs re-read
          new Set(this.model.all.map(r => r.queue)).forEach(q => this._fetcher.rereadWaiting(q));
        }
        this._streamReady.emit(resumed);
      },
      onState: s => {
        this._streamState.emit(s);
        if (s !== 'live') {
          this._live = false;
        }
      }
    });
  }

  async ensureLoaded(): Promise<void> {
    if (!this._loaded && !this._loading) {
      await this.reload();
    }
  }

  setFilter(change: Partial<IRunFilter>): Promise<void> {
    this.model.setFilter({ ...this.model.filter, ...change });
    return this.reload();
  }

  /** Reload from the first page (the filter stays); events that arrive meanwhile wait for it. */
  async reload(): Promise<void> {
    this._loading = true;
    this._buffer = [];
    this._etaBuffer = [];
    this._loadChanged.emit({ state: 'loading' });
    const filter = this.model.filter;
    try {
      const t0 = Date.now() / 1000;
      const page = await this._o.service.listRuns(filterQuery(filter), null, this._o.pageSize);
      if (filter !== this.model.filter) {
        return; // the filter changed meanwhile; that reload wins
      }
      this._clock.sampleRuns(page.runs, t0);
      this.model.addPage(page, true);
      this._loadChanged.emit({ state: 'loaded' });
    } catch (error) {
      this._loadChanged.emit({ state: 'error', error });
    } finally {
      this._loading = false;
      this._loaded = true;
    }
    const buffered = this._buffer;
    this._buffer = [];
    for (const ev of buffered) {
      this._applyToModel(ev);
    }
    const etas = this._etaBuffer;
    this._etaBuffer = [];
    etas.forEach(ev => this.model.applyEta(ev)); // an estimate computed before the page's is not taken (isNewer)
  }

  /** The next page of the list, if there is one and none is loading. */
  async loadMore(): Promise<void> {
    const before = this.model.nextBefore;
    if (this._loading || this._loadingMore || before === null) {
      return;
    }
    this._loadingMore = true;
    const filter = this.model.filter;
    try {
      const page = await this._o.service.listRuns(filterQuery(filter), before, this._o.pageSize);
      if (filter === this.model.filter) {
        this.model.addPage(page, false);
      }
    } catch (error) {
      this._pageFailed.emit(error);
    } finally {
      this._loadingMore = false;
    }
  }

  dispose(): void {
    this._events?.close();
    this._fetcher.dispose();
    Signal.clearData(this);
  }

  private _onEvent(ev: IStatusEvent): void {
    if (this._live) {
      this._clock.sample(Date.now() / 1000 - ev.at);
    }
    if (this._loading) {
      this._buffer.push(ev);
    } else if (this._loaded) {
      this._applyToModel(ev);
    }
    this._eventReceived.emit(ev);
    if (this._loaded) {
      this._fetcher.rereadWaiting(ev.queue);
    }
  }

  private _onEta(ev: IEtaEvent): void {
    if (this._loading) {
      this._etaBuffer.push(ev);
    } else if (this._loaded) {
      this.model.applyEta(ev);
    }
    this._etaReceived.emit(ev);
  }

  private _applyToModel(ev: IStatusEvent): void {
    if (this.model.applyEvent(ev) === 'fetch') {
      this._fetcher.unknown(ev.run_id);
    }
  }

  private _fetched(run: IRun): void {
    this.model.upsert(run);
    this._fetchedSignal.emit(run);
  }

  private _fetcher: RunFetcher;
  private _events: IStreamHandle | null = null;
  private _clock = new ServerClock();
  private _live = false;
  private _loaded = false;
  private _loading = false;
  private _loadingMore = false;
  private _buffer: IStatusEvent[] = [];
  private _etaBuffer: IEtaEvent[] = [];
  private _eventReceived = new Signal<this, IStatusEvent>(this);
  private _etaReceived = new Signal<this, IEtaEvent>(this);
  private _streamReady = new Signal<this, boolean>(this);
  private _streamState = new Signal<this, StreamState>(this);
  private _fetchedSignal = new Signal<this, IRun>(this);
  private _loadChanged = new Signal<this, RunsLoad>(this);
  private _pageFailed = new Signal<this, unknown>(this);
}
