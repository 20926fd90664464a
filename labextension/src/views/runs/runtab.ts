/**
 * A run in a main-area dock tab: the sidebar's RunDetail (clocks, explain, timeline, live
 * logs, outputs, metric charts, resolved config) with the room of the main area, one tab
 * per run, following the panel's event stream until the tab closes.
 */

import { MainAreaWidget } from '@jupyterlab/apputils';
import type { ISignal } from '@lumino/signaling';

import { IRunActions, RunDetail } from './rundetail';
import type { RunDetailSource } from '../../models/rundetailsource';
import type { IEtaEvent, IStatusEvent } from '../../api/types';

export const RUN_TAB_CLASS = 'jp-GpuPlat-runTab';

export interface IRunTabOptions {
  /** The run's data source (its detail disposes of it). */
  source: RunDetailSource;
  events: ISignal<unknown, IStatusEvent>;
  /** Start estimates that moved (the run's own updates the tab at once). */
  etas: ISignal<unknown, IEtaEvent>;
  clockOffset: () => number;
  /** Show another run (a sweep's best child) in its own tab. */
  onOpen: (id: string) => void;
  /** The run's buttons (open folder, submit again, open an output); no "open in tab" here. */
  actions?: IRunActions;
}

/** The id of a run's tab (one per run: opening it again activates this one). */
export function runTabId(runId: string): string {
  return `jp-GpuPlat-runTab-${runId}`;
}

/** What runs and what it produced on the right (logs, outputs, charts); the record on the left. */
const RIGHT = ['.jp-GpuPlat-logSection', '.jp-GpuPlat-outputSection', '.jp-GpuPlat-metricSection'];

/** Move the detail's sections into two columns (the detail keeps its references to them). */
function twoColumns(node: HTMLElement): void {
  const sections = Array.from(node.children).filter(c => c.tagName === 'SECTION');
  if (!sections.length) {
    return;
  }
  const left = document.createElement('div');
  const right = document.createElement('div');
  left.className = 'jp-GpuPlat-runColumn jp-mod-record';
  right.className = 'jp-GpuPlat-runColumn jp-mod-output';
  const columns = document.createElement('div');
  columns.className = 'jp-GpuPlat-runColumns';
  sections[0].before(columns);
  for (const s of sections) {
    (RIGHT.some(sel => s.matches(sel)) ? right : left).append(s);
  }
  right.append(...RIGHT.map(sel => right.querySelector(sel)).filter((s): s is Element => !!s));
  columns.append(left, right);
}

export class RunTab extends MainAreaWidget<RunDetail> {
  constructor(opts: IRunTabOptions) {
    const content = new RunDetail({
      source: opts.source,
      onBack: () => undefined,
      onOpen: opts.onOpen,
      clockOffset: opts.clockOffset,
      actions: { ...opts.actions, openInTab: undefined }
    });
    content.id = `jp-GpuPlat-runTab-detail-${opts.source.runId}`; // the sidebar's detail has the plain id
    super({ content });
    this.id = runTabId(opts.source.runId);
    this.addClass(RUN_TAB_CLASS);
    this.node.dataset.runId = opts.source.runId;
    this.title.label = opts.source.runId;
    this.title.caption = `GPU run ${opts.source.runId}`;
    this.title.closable = true;
    // The tab is closed with its ✕; the sidebar's "← Runs" has no meaning here.
    const back = content.node.querySelector<HTMLElement>('.jp-GpuPlat-back');
    if (back) {
      back.style.display = 'none';
    }
    twoColumns(content.node);
    // The title follows the status shown: the event's at once, then each record read (not a guess
    // 100 ms later, which kept "· running" when the record came back slower).
    content.statusChanged.connect((_, status) => this._retitle(status));
    const onEvent = (_: unknown, ev: IStatusEvent) => content.onEvent(ev);
    const onEta = (_: unknown, ev: IEtaEvent) => content.onEta(ev);
    opts.events.connect(onEvent);
    opts.etas.connect(onEta);
    this._disconnect = () => {
      opts.events.disconnect(onEvent);
      opts.etas.disconnect(onEta);
    };
    this._ticker = window.setInterval(() => content.tick(), 1000);
    void content.load();
  }

  get runId(): string {
    return this.content.runId;
  }

  dispose(): void {
    if (this.isDisposed) {
      return;
    }
    window.clearInterval(this._ticker);
    this._disconnect();
    super.dispose();
  }

  private _retitle(status: string): void {
    const run = this.content.run;
    if (run && !this.isDisposed) {
      this.title.label = `${run.name || run.id} · ${status}`;
      this.title.caption = `GPU run ${run.id} (${run.project}, ${status})`;
    }
  }

  private _ticker: number;
  private _disconnect: () => void;
}
