/**
 * One run in detail: clocks, explain, the timeline by phase, GPU use, live logs, outputs,
 * metrics, the resolved config with the layer of each field, and stop.
 */

import { Dialog, showDialog } from '@jupyterlab/apputils';
import { ISignal, Signal } from '@lumino/signaling';
import { Widget } from '@lumino/widgets';

import { configTable, errorBox, h, saveBlob, section } from '../dom';
import { EtaPart } from './etapart';
import { ExplainPart } from './explainpart';
import { GpuPart } from './gpupart';
import { gpuStale } from '../../models/gpuusage';
import { renderOutputs } from './outputspart';
import { LogView } from './logview';
import { MetricsView } from './metricsview';
import type { RunDetailSource } from '../../models/rundetailsource';
import { isSweep } from '../../models/sweepmodel';
import { stopConfirmation } from '../../models/sessionmodel';
import { SweepPart } from './sweepview';
import { TimelineView } from './timelineview';
import { codeFacts } from '../../models/codefacts';
import type { IEtaEvent, IOutputFile, IRunDetail, IStatusEvent } from '../../api/types';
import { etaChangeOf, isNewer } from '../../models/estimates';
import { clocks, configRows, formatGpus, isFinal, presetsText, statusGroup } from '../../models/viewmodel';

export { codeFacts }; // its home is models/codefacts.ts

export interface IRunDetailOptions {
  /** The run's data source (the detail disposes of it). */
  source: RunDetailSource;
  onBack: () => void;
  clockOffset: () => number;
  /** Open another run (a sweep's best child). */
  onOpen?: (id: string) => void;
  /** What the run's buttons open in the main area (JupyterLab commands); absent ones are not shown. */
  actions?: IRunActions;
}

/** The main-area commands a run's buttons call; the sidebar passes them, a dock tab may omit some. */
export interface IRunActions {
  /** This run in a main-area tab (gpuplat:open-run). */
  openInTab?: (id: string) => void;
  /** The run's artifacts in a file browser (gpuplat:open-run-folder). */
  openFolder?: (id: string) => void;
  /** The submit dialog prefilled from this run (gpuplat:resubmit). */
  resubmit?: (id: string) => void;
  /** One output file in a main-area tab (gpuplat:open-output). */
  openOutput?: (id: string, path: string) => void;
}

/** While logs stream, output sizes are re-read at most this often. */
const OUTPUTS_EVERY_MS = 1500;

export class RunDetail extends Widget {
  constructor(private _opts: IRunDetailOptions) {
    super();
    const runId = (this._runId = _opts.source.runId);
    this.addClass('jp-GpuPlat-detail');
    this.id = `jp-GpuPlat-detail-${runId}`;
    this.node.dataset.runId = runId;
    this._header = h('div', { class: 'jp-GpuPlat-detailHeader' });
    this._summary = h('div', { class: 'jp-GpuPlat-summary' });
    this._clocks = h('div', { class: 'jp-GpuPlat-clocks', role: 'group', 'aria-label': 'Clocks' });
    const act = _opts.actions ?? {};
    this._explainPart = new ExplainPart({
      onOpen: _opts.onOpen,
      resubmit: act.resubmit ? () => act.resubmit?.(runId) : undefined
    });
    this._outputs = h('div', { class: 'jp-GpuPlat-outputs' });
    this._config = h('div', { class: 'jp-GpuPlat-config' });
    this._code = h('dl', { class: 'jp-GpuPlat-code' });
    this._error = h('div', { class: 'jp-GpuPlat-detailError' });
    this._logs = new LogView(_opts.source);
    // The metrics answer carries the GPU series too: they are charted under "GPU use", and a live
    // run's words for them are read again once they count more samples than the record did.
    this._metrics = new MetricsView(_opts.source, system => {
      this._gpu.charts(system);
      if (this._run && !isFinal(this._run) && gpuStale(this._run, system)) {
        void this._reloadRecord();
      }
    });
    // the run writes its log into its outputs: the sizes grow with the lines
    this._logs.linesAdded.connect(() => this._scheduleOutputs());
    this._sweep = new SweepPart({
      source: _opts.source,
      onChanged: run => this.showRecord(run),
      onOpen: id => _opts.onOpen?.(id)
    });
    this._sweepSection = section('Sweep', 'jp-GpuPlat-sweepSection', this._sweep.node);
    this._sweepSection.hidden = true;
    // A sweep runs nothing itself: its logs, outputs, metrics and code are its children's.
    this._runOnly = [
      section('Logs', 'jp-GpuPlat-logSection', this._logs.node),
      section('Outputs', 'jp-GpuPlat-outputSection', this._outputs),
      section('Metrics', 'jp-GpuPlat-metricSection', this._metrics.node),
      section('Code', 'jp-GpuPlat-codeSection', this._code)
    ];
    const back = h(
      'button',
      { class: 'jp-GpuPlat-button jp-GpuPlat-back', title: 'Back to the runs list (Escape)', onclick: () => _opts.onBack() },
      '← Runs'
    );
    this._stop = h(
      'button',
      { class: 'jp-GpuPlat-button jp-GpuPlat-stop jp-mod-warn', onclick: () => void this._confirmStop() },
      'Stop…'
    );
    const id = runId;
    const tool = (label: string, cls: string, title: string, fn?: (id: string) => void) =>
      fn ? h('button', { class: `jp-GpuPlat-button ${cls}`, title, onclick: () => fn(id) }, label) : null;
    this.node.append(
      h(
        'div',
        { class: 'jp-GpuPlat-toolbar jp-GpuPlat-detailToolbar' },
        back,
        tool('Open in tab', 'jp-GpuPlat-openTab', 'Open this run in a main-area tab with room for logs, charts and config', act.openInTab),
        tool('Run folder', 'jp-GpuPlat-openFolder', "Open run folder: the run's artifacts in a file browser", act.openFolder),
        h('span', { class: 'jp-GpuPlat-spacer' }),
        this._stop
      ),
      this._header,
      this._error,
      this._summary,
      this._clocks,
      this._eta.node,
      this._sweepSection,
      section('Why is it here?', 'jp-GpuPlat-explainSection', this._explainPart.node),
      section('Timeline', 'jp-GpuPlat-timelineSection', this._timeline.node),
      this._gpu.node,
      ...this._runOnly,
      section('Resolved config', 'jp-GpuPlat-configSection', this._config)
    );
    this.node.addEventListener('keydown', ev => {
      if (ev.key === 'Escape' && !(ev.target as HTMLElement).closest('input')) {
        ev.preventDefault();
        _opts.onBack();
      }
    });
    this.node.tabIndex = -1;
  }

  get runId(): string {
    return this._runId;
  }

  get run(): IRunDetail | null {
    return this._run;
  }

  /** The status shown changed: at once from an event, then with each record read (a tab's title follows it). */
  get statusChanged(): ISignal<this, string> {
    return this._statusChanged;
  }

  /** Load the record, start the log stream and the outputs. */
  async load(): Promise<void> {
    this._logs.start();
    await this._reload();
  }

  /** A status event: this run's (reload it) or its queue's (its explain may change). */
  onEvent(ev: IStatusEvent): void {
    if (ev.run_id === this._runId) {
      // Show the new status at once; the full record follows.
      this._setStatus(ev);
      this._scheduleReload();
    } else if (this._run && ev.queue === this._run.queue && !isFinal(this._run)) {
      this._scheduleExplain();
    }
  }

  /** Start estimates moved: this run's, if the event names it, is the service's new answer (no re-read). */
  onEta(ev: IEtaEvent): void {
    const change = etaChangeOf(ev, this._runId);
    if (!change || !this._run || isFinal(this._run) || !isNewer(change, this._run)) {
      return;
    }
    this._run = { ...this._run, eta: change.eta ?? null, eta_unknown: change.eta_unknown ?? null };
    this._eta.render(this._run);
  }

  /** A fresher record of this run (a sweep re-read after its children's events, a PATCH's answer). */
  showRecord(run: IRunDetail): void {
    if (this.isDisposed || run.id !== this._runId) {
      return;
    }
    this._setRun(run);
  }

  /** Every second: the live clocks. */
  tick(): void {
    if (this._run && !isFinal(this._run)) {
      this._renderClocks();
      this._timeline.tick(this._run, Date.now() / 1000 - this._readAt, Date.now() / 1000 - this._opts.clockOffset());
      this._explainPart.tick(this._run, Date.now() / 1000 - this._readAt);
    }
  }

  /** Whether this run's clocks still count (the panel's timer runs while any shown run does). */
  get ticking(): boolean {
    return this._run === null || !isFinal(this._run);
  }

  /** An error of something this view started (a command it ran). */
  showError(error: unknown): void {
    if (!this.isDisposed) {
      this._error.replaceChildren(errorBox(error));
    }
  }

  focusFirst(): void {
    this.node.querySelector<HTMLElement>('.jp-GpuPlat-back')?.focus();
  }

  dispose(): void {
    if (this.isDisposed) {
      return;
    }
    window.clearTimeout(this._reloadTimer);
    window.clearTimeout(this._explainTimer);
    window.clearTimeout(this._outputsTimer);
    this._logs.dispose();
    this._metrics.dispose();
    this._opts.source.dispose();
    super.dispose();
  }

  private _scheduleReload(): void {
    window.clearTimeout(this._reloadTimer);
    this._reloadTimer = window.setTimeout(() => void this._reload(), 30);
  }

  private _scheduleExplain(): void {
    window.clearTimeout(this._explainTimer);
    this._explainTimer = window.setTimeout(() => void this._loadExplain(), 150);
  }

  private _scheduleOutputs(): void {
    if (this._outputsTimer === 0) {
      this._outputsTimer = window.setTimeout(() => {
        this._outputsTimer = 0;
        void this._loadOutputs();
      }, OUTPUTS_EVERY_MS);
    }
  }

  private async _reload(): Promise<void> {
    try {
      const run = await this._opts.source.load();
      if (this.isDisposed) {
        return;
      }
      this._error.replaceChildren();
      this._setRun(run);
      await Promise.all([this._loadExplain(), this._loadOutputs(), this._metrics.refresh(isFinal(run))]);
    } catch (error) {
      if (!this.isDisposed) {
        this._error.replaceChildren(errorBox(error));
      }
    }
  }

  /** The record alone (its `gpu_usage` moved with new samples); logs, outputs and metrics go on as they are. */
  private async _reloadRecord(): Promise<void> {
    try {
      const run = await this._opts.source.load();
      if (!this.isDisposed) {
        this._setRun(run);
      }
    } catch {
      // the next status event or metrics refresh tries again
    }
  }

  private async _loadExplain(): Promise<void> {
    try {
      const ex = await this._opts.source.explain();
      if (!this.isDisposed) {
        this._explainPart.render(ex, this._run, Date.now() / 1000 - this._readAt);
      }
    } catch (error) {
      if (!this.isDisposed) {
        this._explainPart.node.replaceChildren(errorBox(error));
      }
    }
  }

  private async _loadOutputs(): Promise<void> {
    try {
      const files = await this._opts.source.outputs();
      if (!this.isDisposed) {
        this._renderOutputs(files);
      }
    } catch (error) {
      // A run that has not started has no directory yet: nothing to list.
      if (!this.isDisposed) {
        this._renderOutputs([]);
      }
    }
  }

  /** A record read now: its clocks tick from here (local time, so the two clocks need not agree). */
  private _setRun(run: IRunDetail): void {
    this._run = run;
    this._readAt = Date.now() / 1000;
    this._render(run);
  }

  private _setStatus(ev: IStatusEvent): void {
    const { status, message } = ev;
    const badge = this._header.querySelector<HTMLElement>('.jp-GpuPlat-status');
    if (badge) {
      badge.textContent = status;
      badge.dataset.group = statusGroup(ev);
    }
    const msg = this._header.querySelector<HTMLElement>('.jp-GpuPlat-detailMessage');
    if (msg) {
      msg.textContent = message;
    }
    this.node.dataset.status = status;
    this._stop.disabled = isFinal(ev);
    this._statusChanged.emit(status);
  }

  private _render(run: IRunDetail): void {
    this.node.dataset.status = run.status;
    // The service says who may stop it (`actions`, core/policy.run_actions); an older service sends
    // none: then only an ended run cannot be stopped (the service refuses the rest itself).
    const may = run.actions ? run.actions.includes('stop') : !isFinal(run);
    this._stop.disabled = !may;
    this._stop.title = may ? 'Stop this run (asks first)' : isFinal(run) ? 'The run has ended' : 'You may not stop this run';
    this._header.replaceChildren(
      h(
        'div',
        { class: 'jp-GpuPlat-detailTitle' },
        h('span', { class: 'jp-GpuPlat-detailName' }, run.name || run.id),
        h('span', { class: 'jp-GpuPlat-status', 'data-group': statusGroup(run) }, run.status)
      ),
      h('div', { class: 'jp-GpuPlat-detailMessage' }, run.message)
    );
    const devices = run.devices.length ? ` on GPU ${run.devices.join(',')}` : '';
    const exit = run.exit_code !== null ? ` · exit code ${run.exit_code}` : '';
    const flavor = run.flavor ? ` ${run.flavor}` : ''; // the kind of GPU admission chose: "1 GPU h100 on GPU 0"
    this._summary.replaceChildren(
      h('span', null, `${run.id} · ${run.project} · ${run.user}`),
      h(
        'span',
        null,
        `queue ${run.queue} · ${presetsText(run)} · ${formatGpus(run.resources.gpu)}${flavor}${devices}${exit}`
      )
    );
    this._renderClocks();
    this._eta.render(run);
    this._sweepSection.hidden = !isSweep(run);
    this._runOnly.forEach(s => (s.hidden = isSweep(run)));
    if (isSweep(run)) {
      // Its controls show when the service says the caller may change it (`actions`, core/policy.py).
      this._sweep.render(run, (run.actions ?? []).includes('edit'));
    }
    this._timeline.render(run, Date.now() / 1000 - this._readAt, Date.now() / 1000 - this._opts.clockOffset());
    this._gpu.render(run);
    this._renderConfig(run);
    this._statusChanged.emit(run.status);
  }

  private _renderClocks(): void {
    if (!this._run) {
      return;
    }
    this._clocks.replaceChildren(
      ...clocks(this._run, Date.now() / 1000 - this._readAt).map(c =>
        h(
          'div',
          { class: `jp-GpuPlat-clock jp-mod-${c.side}${c.live ? ' jp-mod-live' : ''}`, title: c.help, 'data-clock': c.key },
          h('div', { class: 'jp-GpuPlat-clockLabel' }, c.label),
          h('div', { class: 'jp-GpuPlat-clockValue' }, c.text)
        )
      )
    );
  }

  private _renderOutputs(files: IOutputFile[]): void {
    renderOutputs(this._outputs, files, {
      ended: this._run !== null && isFinal(this._run),
      open: this._opts.actions?.openOutput ? path => this._opts.actions?.openOutput?.(this._runId, path) : undefined,
      download: path => void this._download(path)
    });
  }

  private async _download(path: string): Promise<void> {
    try {
      saveBlob(await this._opts.source.outputBlob(path), path.split('/').pop() || path);
    } catch (error) {
      this._error.replaceChildren(errorBox(error));
    }
  }

  private _renderConfig(run: IRunDetail): void {
    const rows = configRows(run.resolved ?? {}, run.provenance ?? {});
    this._config.replaceChildren(configTable(rows));
    const facts: HTMLElement[] = [];
    for (const [label, value] of codeFacts(run)) {
      facts.push(h('dt', null, label), h('dd', null, value));
    }
    this._code.replaceChildren(...facts);
  }

  private async _confirmStop(): Promise<void> {
    const run = this._run;
    if (!run) {
      return;
    }
    const ask = stopConfirmation(run);
    const result = await showDialog({
      title: ask.title,
      body: ask.body,
      buttons: [Dialog.cancelButton({ label: 'Keep running' }), Dialog.warnButton({ label: ask.button })]
    });
    if (!result.button.accept) {
      return;
    }
    try {
      const updated = await this._opts.source.stop();
      this._run = updated;
      this._render(updated);
    } catch (error) {
      this._error.replaceChildren(errorBox(error));
    }
  }

  private _runId: string;
  private _header: HTMLElement;
  private _summary: HTMLElement;
  private _clocks: HTMLElement;
  private _explainPart: ExplainPart;
  private _eta = new EtaPart();
  private _timeline = new TimelineView();
  private _gpu = new GpuPart();
  private _outputs: HTMLElement;
  private _config: HTMLElement;
  private _code: HTMLElement;
  private _error: HTMLElement;
  private _stop: HTMLButtonElement;
  private _logs: LogView;
  private _metrics: MetricsView;
  private _sweep: SweepPart;
  private _sweepSection: HTMLElement;
  private _runOnly: HTMLElement[];
  private _run: IRunDetail | null = null;
  private _readAt = 0;
  private _statusChanged = new Signal<this, string>(this);
  private _reloadTimer = 0;
  private _explainTimer = 0;
  private _outputsTimer = 0;
}
