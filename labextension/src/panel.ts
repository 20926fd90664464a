/**
 * The left-sidebar panel: Runs (live list, filters, detail), Queues, Presets and Insights tabs.
 *
 * It is the controller: it owns the runs model, the event stream (through the
 * service) and hands events to the list, the open run, the queues view and the
 * notifier. Views render; the service fetches.
 */

import { Panel, Widget } from '@lumino/widgets';
import { Signal, ISignal } from '@lumino/signaling';

import { errorBox, h } from './dom';
import { InsightsView } from './insights';
import { Notifier } from './notify';
import { PresetsView } from './presets';
import { QueuesView } from './queues';
import type { GpuPlatService, IStreamHandle, StreamState } from './request';
import { RunDetail } from './rundetail';
import { RunList } from './runlist';
import { RunsModel } from './runsmodel';
import { SweepRereader, isSweep, mayStop } from './sweepmodel';
import type { IProject, IQueue, IRun, IStatusEvent, IWhoAmI } from './types';
import {
  IRunFilter,
  STATUS_GROUPS,
  StatusGroup,
  clockOffset,
  filterQuery,
  groupCounts,
  statusGroup
} from './viewmodel';

export type TabName = 'runs' | 'queues' | 'presets' | 'insights';
const TABS: Array<{ name: TabName; label: string }> = [
  { name: 'runs', label: 'Runs' },
  { name: 'queues', label: 'Queues' },
  { name: 'presets', label: 'Presets' },
  { name: 'insights', label: 'Insights' }
];

export const PAGE_SIZE = 1000;
// More runs unknown in one frame than this are fetched as one page, not one by one.
const FETCH_ONE_BY_ONE = 20;
const SEARCH_DELAY_MS = 250;

export interface IPanelState {
  tab: TabName;
  runId: string | null;
}

export interface IGpuPlatPanelOptions {
  service: GpuPlatService;
  /** Open the submit dialog (optionally with a preset chosen). */
  submit: (preset?: string) => void;
  /** Start a GPU session on a session preset: a new notebook on its kernel. */
  startSession?: (preset: string, project: string) => Promise<void>;
  notifier?: boolean;
}

export class GpuPlatPanel extends Panel {
  constructor(private _opts: IGpuPlatPanelOptions) {
    super();
    this.addClass('jp-GpuPlat-panel');
    const service = _opts.service;
    this.model = new RunsModel();

    // header: title, connection state, submit
    this._state = h('span', { class: 'jp-GpuPlat-conn', role: 'status', title: 'Live status stream' }, 'connecting…');
    this._user = h('span', { class: 'jp-GpuPlat-muted jp-GpuPlat-user' });
    const header = new Widget({
      node: h(
        'div',
        { class: 'jp-GpuPlat-header' },
        h('span', { class: 'jp-GpuPlat-title' }, 'GPU platform'),
        this._user,
        h('span', { class: 'jp-GpuPlat-spacer' }),
        this._state,
        h(
          'button',
          {
            class: 'jp-GpuPlat-button jp-mod-accept jp-GpuPlat-submitButton',
            title: 'Submit a .py or .ipynb file to a GPU queue',
            onclick: () => _opts.submit()
          },
          'Submit…'
        )
      )
    });

    // tabs (arrow keys move between them, as in a WAI-ARIA tablist)
    this._tabButtons = TABS.map(t =>
      h(
        'button',
        {
          class: 'jp-GpuPlat-tab',
          role: 'tab',
          id: `jp-GpuPlat-tab-${t.name}`,
          'data-tab': t.name,
          'aria-controls': `jp-GpuPlat-page-${t.name}`,
          onclick: () => this.showTab(t.name)
        },
        t.label
      )
    );
    const tablist = h('div', { class: 'jp-GpuPlat-tabs', role: 'tablist', 'aria-label': 'GPU platform views' }, ...this._tabButtons);
    tablist.addEventListener('keydown', ev => {
      const i = this._tabButtons.indexOf(document.activeElement as HTMLButtonElement);
      if (i < 0 || (ev.key !== 'ArrowRight' && ev.key !== 'ArrowLeft')) {
        return;
      }
      ev.preventDefault();
      const next = (i + (ev.key === 'ArrowRight' ? 1 : TABS.length - 1)) % TABS.length;
      this.showTab(TABS[next].name);
      this._tabButtons[next].focus();
    });
    const tabs = new Widget({ node: tablist });

    // runs page: filters, counts, list (and the open run instead of the list)
    this._search = h('input', {
      class: 'jp-GpuPlat-input jp-GpuPlat-search',
      type: 'search',
      placeholder: 'Search runs by name',
      'aria-label': 'Search runs by name'
    });
    this._search.addEventListener('input', () => {
      window.clearTimeout(this._searchTimer);
      this._searchTimer = window.setTimeout(() => this._setFilter({ search: this._search.value.trim() }), SEARCH_DELAY_MS);
    });
    this._projectFilter = h('select', { class: 'jp-GpuPlat-select', 'aria-label': 'Filter by project' });
    this._projectFilter.addEventListener('change', () => this._setFilter({ project: this._projectFilter.value }));
    this._statusFilter = h(
      'select',
      { class: 'jp-GpuPlat-select', 'aria-label': 'Filter by status' },
      h('option', { value: '' }, 'All statuses'),
      ...STATUS_GROUPS.map(g => h('option', { value: g.group }, g.label))
    );
    this._statusFilter.addEventListener('change', () =>
      this._setFilter({ group: this._statusFilter.value as StatusGroup | '' })
    );
    this._queueFilter = h('select', { class: 'jp-GpuPlat-select', 'aria-label': 'Filter by queue' });
    this._queueFilter.addEventListener('change', () => this._setFilter({ queue: this._queueFilter.value }));
    this._fillFilterOptions();
    this._counts = h('div', { class: 'jp-GpuPlat-counts', 'aria-live': 'polite' });
    this._listError = h('div');
    this._filters = new Widget({
      node: h(
        'div',
        { class: 'jp-GpuPlat-filters' },
        this._search,
        h('div', { class: 'jp-GpuPlat-filterRow' }, this._projectFilter, this._statusFilter, this._queueFilter),
        this._counts,
        this._listError
      )
    });
    this.list = new RunList({
      model: this.model,
      onOpen: id => void this.openRun(id),
      onNeedMore: sweepId => void (sweepId ? this._loadMoreChildren(sweepId) : this._loadMore()),
      children: id => this._children.get(id),
      onToggle: id => void this._toggleSweep(id),
      clockOffset: () => this.clockOffset
    });
    this._sweeps = new SweepRereader(
      id => this._rereadSweep(id),
      cb => requestAnimationFrame(() => cb())
    );
    this._runsPage = new Panel();
    this._runsPage.addClass('jp-GpuPlat-page');
    this._runsPage.id = 'jp-GpuPlat-page-runs';
    this._runsPage.addWidget(this._filters);
    this._runsPage.addWidget(this.list);
    this.model.onChange(() => this._scheduleCounts());

    this.queuesView = new QueuesView({
      service,
      isAdmin: () => this._whoami?.platform_admin ?? false,
      oldestWaiting: q => this._oldestWaiting(q),
      clockOffset: () => this.clockOffset
    });
    this.queuesView.addClass('jp-GpuPlat-page');
    this.queuesView.id = 'jp-GpuPlat-page-queues';
    this.presetsView = new PresetsView({
      service,
      projects: () => this._projects,
      project: () => this.currentProject,
      onProject: name => (this._project = name),
      onSubmit: preset => _opts.submit(preset),
      onSession: _opts.startSession
    });
    this.presetsView.addClass('jp-GpuPlat-page');
    this.presetsView.id = 'jp-GpuPlat-page-presets';
    this.insightsView = new InsightsView({ service, clockOffset: () => this.clockOffset });
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

    this.addWidget(header);
    this.addWidget(tabs);
    this.addWidget(this._runsPage);
    this.addWidget(this.queuesView);
    this.addWidget(this.presetsView);
    this.addWidget(this.insightsView);
    this.showTab('runs');

    this.notifier = new Notifier(service, id => void this.openRun(id, true), () => this.clockOffset);
    this._ticker = window.setInterval(() => {
      this.list.tick();
      this._detail?.tick();
    }, 1000);
  }

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
    return this._offset ?? 0;
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
    const member = this._projects.find(p => p.role === 'member' || p.role === 'admin');
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
    this._events = this._opts.service.events({
      onEvent: ev => this._onEvent(ev),
      onReady: resumed => {
        this._live = true;
        this._streamReady.emit(resumed);
        if (resumed && this._loaded) {
          // after a long gap the replay may be partial (events are capped): refresh
          this.queuesView.schedule();
        }
      },
      onState: s => this._showState(s)
    });
    try {
      const [who, projects] = await Promise.all([this._opts.service.whoami(), this._opts.service.projects()]);
      this._whoami = who;
      this._projects = projects;
      this._user.textContent = who.user + (who.platform_admin ? ' (platform admin)' : '');
      this.notifier.user = who.user;
      this._fillFilterOptions();
      if (this._tab === 'presets') {
        void this.presetsView.refresh();
      }
    } catch (error) {
      this._listError.replaceChildren(errorBox(error));
    }
    if (this.isVisible) {
      void this._ensureLoaded();
    }
  }

  showTab(tab: TabName): void {
    this._tab = tab;
    this._tabButtons.forEach(b => {
      const on = b.dataset.tab === tab;
      b.setAttribute('aria-selected', String(on));
      b.tabIndex = on ? 0 : -1;
      b.classList.toggle('jp-mod-current', on);
    });
    this._runsPage.setHidden(tab !== 'runs');
    this.queuesView.setHidden(tab !== 'queues');
    this.presetsView.setHidden(tab !== 'presets');
    this.insightsView.setHidden(tab !== 'insights');
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
        service: this._opts.service,
        runId: id,
        onBack: () => this.closeRun(),
        onOpen: child => void this.openRun(child),
        mayStop: run => this._mayStop(run),
        clockOffset: () => this.clockOffset
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
  }

  closeRun(): void {
    this._detail?.dispose();
    this._detail = null;
    this._filters.show();
    this.list.show();
    this.list.node.focus();
    this._stateChanged.emit(this.state);
  }

  /** Reload the runs list from the first page (the filter stays). */
  async reload(): Promise<void> {
    this._loading = true;
    this._buffer = [];
    this._children.clear();
    this.list.emptyText = 'Loading runs…';
    const filter = this.model.filter;
    try {
      const t0 = Date.now() / 1000;
      const page = await this._opts.service.listRuns(filterQuery(filter), null, PAGE_SIZE);
      if (filter !== this.model.filter) {
        return; // the filter changed meanwhile; that reload wins
      }
      this._sampleOffset(page.runs, t0);
      this.model.addPage(page, true);
      this._listError.replaceChildren();
      this.list.emptyText = 'No runs match.';
    } catch (error) {
      this._listError.replaceChildren(errorBox(error));
      this.list.emptyText = 'Could not load runs.';
    } finally {
      this._loading = false;
      this._loaded = true;
    }
    const buffered = this._buffer;
    this._buffer = [];
    for (const ev of buffered) {
      this._applyToModel(ev);
    }
  }

  dispose(): void {
    if (this.isDisposed) {
      return;
    }
    this._events?.close();
    this.notifier.dispose();
    window.clearInterval(this._ticker);
    super.dispose();
  }

  protected onAfterShow(): void {
    void this._ensureLoaded();
  }

  private async _ensureLoaded(): Promise<void> {
    if (!this._loaded && !this._loading) {
      await this.reload();
    }
  }

  private async _loadMore(): Promise<void> {
    const before = this.model.nextBefore;
    if (this._loading || this._loadingMore || before === null) {
      return;
    }
    this._loadingMore = true;
    const filter = this.model.filter;
    try {
      const page = await this._opts.service.listRuns(filterQuery(filter), before, PAGE_SIZE);
      if (filter === this.model.filter) {
        this.model.addPage(page, false);
      }
    } catch (error) {
      this._listError.replaceChildren(errorBox(error));
    } finally {
      this._loadingMore = false;
    }
  }

  private _setFilter(change: Partial<IRunFilter>): void {
    this.model.setFilter({ ...this.model.filter, ...change });
    void this.reload();
  }

  private _onEvent(ev: IStatusEvent): void {
    if (this._live) {
      this._sample(Date.now() / 1000 - ev.at);
    }
    if (this._loading) {
      this._buffer.push(ev);
    } else if (this._loaded) {
      this._applyToModel(ev);
    }
    this._detail?.onEvent(ev);
    this._followSweep(ev);
    if (this._tab === 'queues') {
      this.queuesView.schedule();
    }
    // A sweep notifies as one run: its children's starts and ends would be a flood.
    if (this._opts.notifier !== false && !this._isKnownChild(ev.run_id)) {
      this.notifier.onEvent(ev);
    }
    this._eventReceived.emit(ev);
  }

  private _applyToModel(ev: IStatusEvent): void {
    if (this.model.applyEvent(ev) !== 'fetch' || this._fetching.has(ev.run_id)) {
      return;
    }
    this._unknown.add(ev.run_id);
    if (this._unknownFrame === null) {
      this._unknownFrame = requestAnimationFrame(() => this._fetchUnknown());
    }
  }

  /**
   * Fetch the runs that events named and we do not list, once per frame: one by one when
   * few, else one first page (a sweep of 10,000 children announces them all at once, and
   * its children are the newest runs: the page brings them, not 10,000 requests).
   */
  private _fetchUnknown(): void {
    this._unknownFrame = null;
    const ids = [...this._unknown];
    this._unknown.clear();
    if (ids.length <= FETCH_ONE_BY_ONE) {
      ids.forEach(id => this._fetchOne(id));
      return;
    }
    ids.forEach(id => this._fetching.add(id));
    const filter = this.model.filter;
    this._opts.service
      .listRuns(filterQuery(filter), null, PAGE_SIZE)
      .then(page => {
        if (filter !== this.model.filter) {
          return;
        }
        page.runs.forEach(run => this._fetched(run));
        // older runs the page did not bring (back in the list after a change): one by one, if few
        const missing = ids.filter(id => !this.model.get(id));
        ids.forEach(id => this._fetching.delete(id));
        if (missing.length <= FETCH_ONE_BY_ONE) {
          missing.forEach(id => this._fetchOne(id));
        }
      })
      .catch(() => undefined)
      .finally(() => ids.forEach(id => this._fetching.delete(id)));
  }

  private _fetchOne(id: string): void {
    if (this._fetching.has(id)) {
      return;
    }
    this._fetching.add(id);
    this._opts.service
      .getRun(id)
      .then(run => this._fetched(run))
      .catch(() => undefined) // gone or not visible any more: nothing to list
      .finally(() => this._fetching.delete(id));
  }

  private _fetched(run: IRun): void {
    this.model.upsert(run);
    if (run.parent) {
      this._children.get(run.parent)?.upsert(run);
      if (this.model.get(run.parent)) {
        this._sweeps.request(run.parent); // a new child changes its sweep's counts
      } else {
        this._ensureSweepListed(run.parent);
      }
    }
  }

  // ---- sweeps -------------------------------------------------------------------------

  /**
   * A sweep's counts change with its children's events, which name only the child: when
   * the event's run is a known child of a sweep we show (or the sweep itself), re-read
   * the sweep (once per frame at most), and keep its expanded children live.
   */
  private _followSweep(ev: IStatusEvent): void {
    let sweepId: string | null = null;
    const own = this.model.get(ev.run_id);
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
    if (sweepId === null && this._detail?.run && isSweep(this._detail.run) && ev.run_id === this._detail.runId) {
      sweepId = this._detail.runId;
    }
    if (sweepId === null) {
      return;
    }
    const children = this._children.get(sweepId);
    if (children?.get(ev.run_id)) {
      children.applyEvent(ev);
    }
    if (this.model.get(sweepId) || this._detail?.runId === sweepId) {
      this._sweeps.request(sweepId);
    }
  }

  private _isKnownChild(id: string): boolean {
    if (this.model.get(id)?.parent) {
      return true;
    }
    for (const children of this._children.values()) {
      if (children.get(id)) {
        return true;
      }
    }
    return false;
  }

  private async _rereadSweep(id: string): Promise<void> {
    const run = await this._opts.service.getRun(id);
    if (this.model.get(id)) {
      this.model.upsert(run, true);
    } else if (this._detail?.runId !== id) {
      return;
    }
    if (this._detail?.runId === id) {
      this._detail.showRecord(run);
    }
  }

  /** A child listed before its sweep: list the sweep (its row then stands for the child). */
  private _ensureSweepListed(id: string): void {
    if (this.model.get(id) || this._fetching.has(id)) {
      return;
    }
    this._fetching.add(id);
    this._opts.service
      .getRun(id)
      .then(run => this.model.upsert(run, true))
      .catch(() => undefined)
      .finally(() => this._fetching.delete(id));
  }

  private async _toggleSweep(id: string): Promise<void> {
    if (this._children.delete(id)) {
      this.list.schedule();
      return;
    }
    const children = new RunsModel();
    children.onChange(() => this.list.schedule());
    this._children.set(id, children);
    this.list.schedule();
    try {
      const page = await this._opts.service.listRuns({ parent: id }, null, PAGE_SIZE);
      if (this._children.get(id) === children) {
        children.addPage(page, true);
      }
    } catch (error) {
      this._listError.replaceChildren(errorBox(error));
    }
  }

  private async _loadMoreChildren(id: string): Promise<void> {
    const children = this._children.get(id);
    const before = children?.nextBefore ?? null;
    if (!children || before === null || this._loadingChildren.has(id)) {
      return;
    }
    this._loadingChildren.add(id);
    try {
      children.addPage(await this._opts.service.listRuns({ parent: id }, before, PAGE_SIZE), false);
    } catch (error) {
      this._listError.replaceChildren(errorBox(error));
    } finally {
      this._loadingChildren.delete(id);
    }
  }

  /** The Stop button's rule, which also says who may change a sweep (the server decides). */
  private _mayStop(run: IRun): boolean {
    const who = this._whoami;
    if (!who) {
      return true; // not known yet: show the controls, the server refuses if it must
    }
    const role = this._projects.find(p => p.name === run.project)?.role;
    return mayStop(run, who.user, role, who.platform_admin);
  }

  private _sampleOffset(runs: Array<Parameters<typeof clockOffset>[0]>, clientNow: number): void {
    for (const r of runs) {
      const o = clockOffset(r, clientNow);
      if (o !== null) {
        this._sample(o);
      }
    }
  }

  // Each sample is the true offset plus a delay ≥ 0: the smallest is the best estimate.
  private _sample(offset: number): void {
    if (this._offset === null || offset < this._offset) {
      this._offset = offset;
    }
  }

  private _oldestWaiting(queue: string): number | null {
    let oldest: number | null = null;
    for (const r of this.model.all) {
      if (r.queue === queue && !isSweep(r) && statusGroup(r.status) === 'waiting') {
        const at = r.queued_at ?? r.created_at;
        if (at !== null && (oldest === null || at < oldest)) {
          oldest = at;
        }
      }
    }
    return oldest;
  }

  private _fillFilterOptions(): void {
    const keep = (sel: HTMLSelectElement, options: HTMLOptionElement[]) => {
      const v = sel.value;
      sel.replaceChildren(...options);
      sel.value = options.some(o => o.value === v) ? v : '';
    };
    keep(this._projectFilter, [
      h('option', { value: '' }, 'All projects'),
      ...this._projects.map(p => h('option', { value: p.name }, p.name))
    ]);
    const queues = new Set<string>();
    for (const p of this._projects) {
      p.usable_queues.forEach(q => queues.add(q));
    }
    // called once before the queues view exists
    (this.queuesView?.queues ?? []).forEach((q: IQueue) => queues.add(q.name));
    keep(this._queueFilter, [
      h('option', { value: '' }, 'All queues'),
      ...[...queues].sort().map(q => h('option', { value: q }, q))
    ]);
  }

  private _scheduleCounts(): void {
    if (this._countsFrame === null) {
      this._countsFrame = requestAnimationFrame(() => {
        this._countsFrame = null;
        const runs = this.model.runs;
        const c = groupCounts(runs);
        const parts = STATUS_GROUPS.filter(g => c[g.group]).map(g => `${c[g.group]} ${g.label.toLowerCase()}`);
        const more = this.model.nextBefore !== null ? '+' : '';
        const noun = runs.length === 1 && !more ? 'run' : 'runs';
        this._counts.textContent = `${runs.length.toLocaleString()}${more} ${noun}${parts.length ? ': ' + parts.join(' · ') : ''}`;
      });
    }
  }

  private _showState(s: StreamState): void {
    const text: Record<StreamState, string> = {
      connecting: 'connecting…',
      live: '● live',
      reconnecting: 'reconnecting…',
      closed: 'disconnected'
    };
    this._state.textContent = text[s];
    this._state.dataset.state = s;
    if (s !== 'live') {
      this._live = false;
    }
  }

  private _tab: TabName = 'runs';
  private _tabButtons: HTMLButtonElement[];
  private _runsPage: Panel;
  private _filters: Widget;
  private _search: HTMLInputElement;
  private _projectFilter: HTMLSelectElement;
  private _statusFilter: HTMLSelectElement;
  private _queueFilter: HTMLSelectElement;
  private _counts: HTMLElement;
  private _countsFrame: number | null = null;
  private _listError: HTMLElement;
  private _state: HTMLElement;
  private _user: HTMLElement;
  private _detail: RunDetail | null = null;
  private _events: IStreamHandle | null = null;
  private _started: Promise<void> | null = null;
  private _whoami: IWhoAmI | null = null;
  private _projects: IProject[] = [];
  private _project = '';
  private _defaultProject = '';
  private _offset: number | null = null;
  private _live = false;
  private _loaded = false;
  private _loading = false;
  private _loadingMore = false;
  private _buffer: IStatusEvent[] = [];
  private _fetching = new Set<string>();
  private _unknown = new Set<string>();
  private _unknownFrame: number | null = null;
  private _children = new Map<string, RunsModel>();
  private _loadingChildren = new Set<string>();
  private _sweeps: SweepRereader;
  private _searchTimer = 0;
  private _ticker: number;
  private _stateChanged = new Signal<this, IPanelState>(this);
  private _eventReceived = new Signal<this, IStatusEvent>(this);
  private _streamReady = new Signal<this, boolean>(this);
}

