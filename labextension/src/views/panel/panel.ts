/**
 * The left-sidebar panel: Runs (live list, filters, detail), Queues, Presets and Insights tabs.
 *
 * It lays out the views and hands them what the runs page's data source (models/runssource:
 * the runs model, the event stream, the pages) reads: events go to the list, the open run, the
 * queues view and the notifier. Views render; the source fetches.
 */

import type { CommandRegistry } from '@lumino/commands';
import { Panel, Widget } from '@lumino/widgets';
import { Signal, ISignal } from '@lumino/signaling';

import { errorBox } from '../dom';
import { RunFilters } from '../runs/filters';
import { PanelHeader, TabStrip } from './panelchrome';
import { InsightsView } from '../insights/insights';
import { Notifier } from './notify';
import { PresetsView } from '../submit/presets';
import { QueuesView } from '../queues/queues';
import { RunDetail } from '../runs/rundetail';
import { runActions } from './panelactions';
import { RunList } from '../runs/runlist';
import type { RunsModel } from '../../models/runsmodel';
import type { RunsLoad, RunsSource } from '../../models/runssource';
import type { GpuPlatSources } from '../../models/sources';
import type { AccountSource } from '../../models/accountsource';
import type { SweepSource } from '../../models/sweepsource';
import { Ticker } from '../../models/ticker';
import type { IEtaEvent, IProject, IQueue, IStatusEvent, IWhoAmI, StreamState } from '../../api/types';
import type { IRunFilter } from '../../models/viewmodel';

export type TabName = 'runs' | 'queues' | 'presets' | 'insights';
const TABS: Array<{ name: TabName; label: string }> = [
  { name: 'runs', label: 'Runs' },
  { name: 'queues', label: 'Queues' },
  { name: 'presets', label: 'Presets' },
  { name: 'insights', label: 'Insights' }
];

export const PAGE_SIZE = 1000;

export interface IPanelState {
  tab: TabName;
  runId: string | null;
}

export interface IGpuPlatPanelOptions {
  /** The data sources (the plugin makes them with the service). */
  sources: GpuPlatSources;
  /** Open the submit dialog (optionally with a preset chosen). */
  submit: (preset?: string) => void;
  /** Start a GPU session on a session preset: a new notebook on its kernel. */
  startSession?: (preset: string, project: string) => Promise<void>;
  notifier?: boolean;
  /** JupyterLab's commands: the main-area views (gpuplat:open-run, compare, open-output, …). */
  commands?: CommandRegistry;
}

export class GpuPlatPanel extends Panel {
  constructor(private _opts: IGpuPlatPanelOptions) {
    super();
    this.addClass('jp-GpuPlat-panel');
    const sources = _opts.sources;
    this.source = sources.runs(PAGE_SIZE);
    this._account = sources.account();
    this.model = this.source.model;
    this.source.eventReceived.connect((_, ev) => this._onEvent(ev), this);
    this.source.etaReceived.connect((_, ev) => this._onEta(ev), this);
    this.source.fetched.connect((_, run) => this._sweeps.fetched(run), this);
    this.source.loadChanged.connect((_, load) => this._showLoad(load), this);
    this.source.pageFailed.connect((_, error) => this._listError.replaceChildren(errorBox(error)), this);
    this.source.streamReady.connect((_, resumed) => {
      this._streamReady.emit(resumed);
      if (resumed && this.source.loaded) {
        // after a long gap the replay may be partial (events are capped): refresh
        this.queuesView.schedule();
      }
    }, this);
    this.source.streamState.connect((_, s) => this._showState(s), this);
    // One second clock while a shown run counts; it stops when all are final or hidden.
    this._ticker = new Ticker(
      () => {
        this.list.tick();
        this._detail?.tick();
        if (this._tab === 'queues') {
          this.queuesView.tick();
        }
      },
      () => this.isVisible && (this._tab === 'queues' ? this.queuesView.live : this._detail ? this._detail.ticking : this.list.live),
      on => (this.node.dataset.ticking = String(on))
    );
    this.node.dataset.ticking = 'false';

    this._header = new PanelHeader(() => _opts.submit());
    const tabs = (this._tabStrip = new TabStrip(TABS, name => this.showTab(name)));

    // runs page: filters, counts, list (and the open run instead of the list)
    this._filters = new RunFilters({
      onChange: change => this._setFilter(change),
      onCompare: _opts.commands ? () => this._compare() : undefined,
      onClearSelection: () => this.list.clearSelection()
    });
    this._listError = this._filters.error;
    this.list = new RunList({
      model: this.model,
      onOpen: id => void this.openRun(id),
      onNeedMore: sweepId => void (sweepId ? this._sweeps.loadMore(sweepId) : this.source.loadMore()),
      children: id => this._sweeps.children(id),
      onToggle: id => void this._sweeps.toggle(id),
      clockOffset: () => this.clockOffset
    });
    this.list.selectionChanged.connect((_, ids) => this._filters.setSelected(ids.length));
    this._sweeps = sources.sweeps({
      model: this.model,
      pageSize: PAGE_SIZE,
      fetching: this.source.fetching,
      detail: () => this._detail,
      changed: () => this.list.schedule(),
      onError: error => this._listError.replaceChildren(errorBox(error))
    });
    this._runsPage = new Panel();
    this._runsPage.addClass('jp-GpuPlat-page');
    this._runsPage.id = 'jp-GpuPlat-page-runs';
    this._runsPage.addWidget(this._filters);
    this._runsPage.addWidget(this.list);
    this.model.onChange(() => {
      this._filters.showCounts(this.model);
      this._ticker.poke();
    });

    this.queuesView = new QueuesView({
      source: sources.queues(),
      longestWait: q => this.model.longestWait(q),
      onOpen: id => void this.openRun(id),
      onRendered: () => this._ticker.poke()
    });
    this.queuesView.addClass('jp-GpuPlat-page');
    this.queuesView.id = 'jp-GpuPlat-page-queues';
    this.presetsView = new PresetsView({
      source: sources.submit(),
      projects: () => this._projects,
      project: () => this.currentProject,
      onProject: name => (this._project = name),
      onSubmit: preset => _opts.submit(preset),
      onSession: _opts.startSession
    });
    this.presetsView.addClass('jp-GpuPlat-page');
    this.presetsView.id = 'jp-GpuPlat-page-presets';
    this.insightsView = new InsightsView({
      source: sources.insights(),
      clockOffset: () => this.clockOffset,
      onOpen: id => void this.openRun(id)
    });
    this.insightsView.addClass('jp-GpuPlat-page');
    this.insightsView.id = 'jp-GpuPlat-page-insights';
    for (const [w, name] of [
      [this._runsPage, 'runs'],
      [this.queuesView, 'queues'],
      [this.presetsView, 'presets'],
      [this.insightsView, 'insights']
    ] as Array<[Widget, TabName]>) {
      w.node.setAttribute('role', 'tabpanel');
      w.node.setAttribute('aria-labelledby', `jp-GpuPlat-tab-${name}`);
    }

    this.addWidget(this._header);
    this.addWidget(tabs);
    this.addWidget(this._runsPage);
    this.addWidget(this.queuesView);
    this.addWidget(this.presetsView);
    this.addWidget(this.insightsView);
    this.showTab('runs');

    this.notifier = new Notifier(this._account, id => void this.openRun(id, true), () => this.clockOffset);
  }

  /** The runs page's data source; `model` is its runs model. */
  readonly source: RunsSource;
  readonly model: RunsModel;
  readonly list: RunList;
  readonly queuesView: QueuesView;
  readonly presetsView: PresetsView;
  readonly insightsView: InsightsView;
  readonly notifier: Notifier;

  /** Every status event of the stream (the notebooks' GPU sessions follow it too). */
  get eventReceived(): ISignal<this, IStatusEvent> {
    return this._eventReceived;
  }

  /** Start estimates that moved (the list took them; run tabs and the notebooks' sessions follow them). */
  get etaReceived(): ISignal<this, IEtaEvent> {
    return this._etaReceived;
  }

  /** The stream (re)connected and replayed what was missed; `true` after a reconnect. */
  get streamReady(): ISignal<this, boolean> {
    return this._streamReady;
  }

  /** Emitted when the tab or the open run changes (the plugin saves it for reloads). */
  get stateChanged(): ISignal<this, IPanelState> {
    return this._stateChanged;
  }

  get state(): IPanelState {
    return { tab: this._tab, runId: this._detail?.runId ?? null };
  }

  get whoami(): IWhoAmI | null {
    return this._whoami;
  }

  get projects(): IProject[] {
    return this._projects;
  }

  /** Client clock minus server clock, in seconds (0 until measured). */
  get clockOffset(): number {
    return this.source.clockOffset;
  }

  /** The project the presets tab and the submit dialog start with. */
  get currentProject(): string {
    const names = this._projects.map(p => p.name);
    if (this._project && names.includes(this._project)) {
      return this._project;
    }
    if (this._defaultProject && names.includes(this._defaultProject)) {
      return this._defaultProject;
    }
    const member = this._projects.find(p => p.may_submit);
    return member?.name ?? names[0] ?? '';
  }

  set defaultProject(name: string) {
    this._defaultProject = name;
  }

  /** Identity, projects and the event stream; the runs list loads when first shown. */
  start(): Promise<void> {
    this._started ??= this._start();
    return this._started;
  }

  private async _start(): Promise<void> {
    this.source.connect();
    try {
      const [who, projects] = await this._account.identity();
      this._whoami = who;
      this._projects = projects;
      this._header.user = who.user + (who.platform_admin ? ' (platform admin)' : '');
      this.notifier.user = who.user;
      this._fillFilterOptions();
      if (this._tab === 'presets') {
        void this.presetsView.refresh();
      }
    } catch (error) {
      this._listError.replaceChildren(errorBox(error));
    }
    if (this.isVisible) {
      void this.source.ensureLoaded();
    }
  }

  showTab(tab: TabName): void {
    this._tab = tab;
    this._tabStrip.select(tab);
    this._runsPage.setHidden(tab !== 'runs');
    this.queuesView.setHidden(tab !== 'queues');
    this.presetsView.setHidden(tab !== 'presets');
    this.insightsView.setHidden(tab !== 'insights');
    this._ticker.poke();
    if (tab === 'insights') {
      void this.insightsView.refresh();
    } else if (tab === 'queues') {
      void this.queuesView.refresh();
    } else if (tab === 'presets') {
      void this.presetsView.refresh();
    }
    this._stateChanged.emit(this.state);
  }

  /** Show one run in detail (from the list, a notification, or after submitting). */
  async openRun(id: string, focus = true): Promise<void> {
    if (this._tab !== 'runs') {
      this.showTab('runs');
    }
    if (this._detail?.runId !== id) {
      this._detail?.dispose();
      this._detail = new RunDetail({
        source: this._opts.sources.runDetail(id),
        onBack: () => this.closeRun(),
        onOpen: child => void this.openRun(child),
        clockOffset: () => this.clockOffset,
        actions: runActions(this._opts.commands, error => this._detail?.showError(error))
      });
      this._detail.addClass('jp-GpuPlat-page');
      this._runsPage.addWidget(this._detail);
    }
    this._filters.hide();
    this.list.hide();
    this._stateChanged.emit(this.state);
    if (focus) {
      this._detail.focusFirst();
    }
    await this._detail.load();
    this._ticker.poke();
  }

  private _compare(): void {
    const ids = this.list.selected;
    if (ids.length >= 2) {
      this._opts.commands?.execute('gpuplat:compare', { ids }).catch(error => this._listError.replaceChildren(errorBox(error)));
    }
  }

  closeRun(): void {
    this._detail?.dispose();
    this._detail = null;
    this._filters.show();
    this.list.show();
    this.list.node.focus();
    this._stateChanged.emit(this.state);
    this._ticker.poke();
  }

  /** Reload the runs list from the first page (the filter stays). */
  reload(): Promise<void> {
    return this.source.reload();
  }

  private _showLoad(load: RunsLoad): void {
    if (load.state === 'loading') {
      this._sweeps.clear();
      this.list.emptyText = 'Loading runs…';
    } else if (load.state === 'loaded') {
      this._listError.replaceChildren();
      this.list.emptyText = 'No runs match.';
    } else {
      this._listError.replaceChildren(errorBox(load.error));
      this.list.emptyText = 'Could not load runs.';
    }
  }

  dispose(): void {
    if (this.isDisposed) {
      return;
    }
    this.source.dispose();
    this.notifier.dispose();
    this._ticker.stop();
    super.dispose();
  }

  protected onAfterShow(): void {
    void this.source.ensureLoaded();
    this._ticker.poke();
  }

  protected onAfterHide(): void {
    this._ticker.stop();
  }

  private _setFilter(change: Partial<IRunFilter>): void {
    void this.source.setFilter(change);
  }

  private _onEvent(ev: IStatusEvent): void {
    this._detail?.onEvent(ev);
    this._sweeps.follow(ev);
    this._ticker.poke();
    if (this._tab === 'queues') {
      this.queuesView.schedule();
    }
    // A sweep notifies as one run: its children's starts and ends would be a flood.
    if (this._opts.notifier !== false && !this._sweeps.isKnownChild(ev.run_id)) {
      this.notifier.onEvent(ev);
    }
    this._eventReceived.emit(ev);
  }

  private _onEta(ev: IEtaEvent): void {
    this._detail?.onEta(ev);
    if (this._opts.notifier !== false) {
      this.notifier.onEta(ev);
    }
    this._etaReceived.emit(ev);
  }

  private _fillFilterOptions(): void {
    const queues = new Set<string>();
    for (const p of this._projects) {
      p.usable_queues.forEach(q => queues.add(q));
    }
    // called once before the queues view exists
    (this.queuesView?.queues ?? []).forEach((q: IQueue) => queues.add(q.name));
    this._filters.fill(this._projects, [...queues]);
  }

  private _showState(s: StreamState): void {
    this._header.state = s;
  }

  private _tab: TabName = 'runs';
  private _header: PanelHeader;
  private _tabStrip: TabStrip<TabName>;
  private _runsPage: Panel;
  private _filters: RunFilters;
  private _listError: HTMLElement;
  private _detail: RunDetail | null = null;
  private _started: Promise<void> | null = null;
  private _whoami: IWhoAmI | null = null;
  private _projects: IProject[] = [];
  private _project = '';
  private _defaultProject = '';
  private _sweeps: SweepSource;
  private _account: AccountSource;
  private _ticker: Ticker;
  private _stateChanged = new Signal<this, IPanelState>(this);
  private _eventReceived = new Signal<this, IStatusEvent>(this);
  private _etaReceived = new Signal<this, IEtaEvent>(this);
  private _streamReady = new Signal<this, boolean>(this);
}

