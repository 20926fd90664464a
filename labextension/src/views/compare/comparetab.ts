/**
 * Compare runs in a main-area tab: the data of the Python `Compare` widget (`GET compare`):
 * a legend naming each run with the params that differ between them, the table of params,
 * config differences and metrics with deltas against a chosen baseline, and one chart per
 * metric with every run's curve overlaid. Re-read while a compared run is still active.
 */

import { MainAreaWidget } from '@jupyterlab/apputils';
import type { ISignal } from '@lumino/signaling';
import { Widget } from '@lumino/widgets';

import { errorBox, h } from '../dom';
import type { CompareSource } from '../../models/comparesource';
import type { IStatusEvent } from '../../api/types';
import { chartOrder, compareRows, ICompare, ICompareRow, legendLabel } from '../../models/comparemodel';
import { chartGeometry, formatMetric, isFinal, statusGroup } from '../../models/viewmodel';

const SVG = 'http://www.w3.org/2000/svg';
const W = 480;
const H = 140;
const COLORS = ['#1f77b4', '#ff7f0e', '#2ca02c', '#d62728', '#9467bd', '#8c564b', '#e377c2', '#7f7f7f'];

export function compareTabId(ids: string[]): string {
  return `jp-GpuPlat-compare-${ids.join('-')}`;
}

export interface ICompareViewOptions {
  source: CompareSource;
  ids: string[];
  events: ISignal<unknown, IStatusEvent>;
  onOpen: (id: string) => void;
}

export class CompareView extends Widget {
  constructor(private _opts: ICompareViewOptions) {
    super();
    this.addClass('jp-GpuPlat-compareView');
    this.node.dataset.runs = _opts.ids.join(',');
    this._baselineSelect = h('select', { class: 'jp-GpuPlat-select', name: 'baseline', 'aria-label': 'Baseline run' });
    this._baselineSelect.addEventListener('change', () => {
      this._baseline = this._baselineSelect.value;
      this._render();
    });
    this._title = h('div', { class: 'jp-GpuPlat-compareTitle' });
    this._legend = h('ul', { class: 'jp-GpuPlat-compareLegend', 'aria-label': 'Runs compared' });
    this._table = h('div', { class: 'jp-GpuPlat-compareTable' });
    this._charts = h('div', { class: 'jp-GpuPlat-compareCharts' });
    this._error = h('div');
    this.node.append(
      h('div', { class: 'jp-GpuPlat-toolbar' }, this._title, h('span', { class: 'jp-GpuPlat-spacer' }),
        h('label', { class: 'jp-GpuPlat-inline' }, h('span', null, 'Baseline '), this._baselineSelect)),
      this._error,
      this._legend,
      this._charts,
      this._table
    );
    this._baseline = _opts.ids[0];
    const onEvent = (_: unknown, ev: IStatusEvent) => {
      if (_opts.ids.includes(ev.run_id)) {
        window.clearTimeout(this._timer);
        this._timer = window.setTimeout(() => void this.refresh(), 300);
      }
    };
    _opts.events.connect(onEvent);
    this._disconnect = () => _opts.events.disconnect(onEvent);
  }

  get data(): ICompare | null {
    return this._data;
  }

  async refresh(): Promise<void> {
    try {
      const data = await this._opts.source.load();
      if (this.isDisposed) {
        return;
      }
      this._data = data;
      this._error.replaceChildren();
      if (!data.runs.some(r => r.id === this._baseline)) {
        this._baseline = data.runs[0]?.id ?? '';
      }
      this._render();
    } catch (error) {
      if (!this.isDisposed) {
        this._error.replaceChildren(errorBox(error));
      }
    }
  }

  dispose(): void {
    if (this.isDisposed) {
      return;
    }
    window.clearTimeout(this._timer);
    this._disconnect();
    super.dispose();
  }

  private _render(): void {
    const data = this._data;
    if (!data) {
      return;
    }
    const runs = data.runs;
    const differ = data.params.differ;
    this.node.dataset.active = String(runs.some(r => !isFinal(r)));
    this._title.replaceChildren(
      h('b', null, `${runs.length} runs`),
      h('span', { class: 'jp-GpuPlat-muted' }, ` · baseline ${this._baseline}; highlighted rows differ; Δ is against the baseline`)
    );
    this._baselineSelect.replaceChildren(
      ...runs.map(r => h('option', { value: r.id, selected: r.id === this._baseline }, `${r.name || r.id} · ${r.id}`))
    );
    this._legend.replaceChildren(
      ...runs.map((r, i) => {
        const l = legendLabel(r, differ);
        return h(
          'li',
          { class: 'jp-GpuPlat-compareRun', 'data-run-id': r.id },
          h('span', { class: 'jp-GpuPlat-swatch', style: `background:${COLORS[i % COLORS.length]}` }),
          h(
            'button',
            { class: 'jp-GpuPlat-link', title: `Open ${r.id} in a tab`, onclick: () => this._opts.onOpen(r.id) },
            l.name
          ),
          l.params ? h('span', { class: 'jp-GpuPlat-legendParams' }, l.params) : null,
          h('span', { class: 'jp-GpuPlat-muted' }, r.id),
          h('span', { class: 'jp-GpuPlat-status', 'data-group': statusGroup(r) }, r.status),
          r.id === this._baseline ? h('span', { class: 'jp-GpuPlat-chip' }, '★ baseline') : null
        );
      })
    );
    this._renderTable(data);
    this._renderCharts(data);
  }

  private _renderTable(data: ICompare): void {
    const rows = compareRows(data, this._baseline);
    const head = h(
      'tr',
      null,
      h('th', null, ''),
      ...data.runs.map(r => h('th', { 'data-run-id': r.id }, `${r.name || r.id}${r.id === this._baseline ? ' ★' : ''}`))
    );
    const body: HTMLElement[] = [];
    let section = '';
    for (const row of rows) {
      if (row.section !== section) {
        section = row.section;
        body.push(h('tr', { class: 'jp-GpuPlat-compareSection' }, h('td', { colspan: data.runs.length + 1 }, section)));
      }
      if (row.diff !== undefined) {
        body.push(codeRow(row, data.runs.length));
        continue;
      }
      body.push(
        h(
          'tr',
          { class: row.differ ? 'jp-GpuPlat-differ' : '', 'data-row': row.label },
          h('td', { class: 'jp-GpuPlat-compareKey' }, row.label),
          ...row.cells.map(c =>
            h(
              'td',
              null,
              c.text,
              c.delta ? h('span', { class: `jp-GpuPlat-delta jp-mod-${c.delta.tone}` }, ` (${c.delta.text})`) : null
            )
          )
        )
      );
    }
    this._table.replaceChildren(h('table', { class: 'jp-GpuPlat-compareGrid' }, h('thead', null, head), h('tbody', null, ...body)));
  }

  private _renderCharts(data: ICompare): void {
    if (!data.metrics.length) {
      this._charts.replaceChildren(h('div', { class: 'jp-GpuPlat-muted' }, 'No metrics logged by these runs.'));
      return;
    }
    this._charts.replaceChildren(...chartOrder(data).map(m => this._chart(data, m)));
  }

  /** One metric, every run's curve on shared axes. */
  private _chart(data: ICompare, metric: string): HTMLElement {
    const curves = data.runs.map(r => data.curves[r.id]?.[metric]);
    const logged = data.metric_runs?.[metric] ?? data.runs.length;
    const steps: number[] = [];
    const values: number[] = [];
    for (const c of curves) {
      steps.push(...(c?.steps ?? []));
      values.push(...(c?.values ?? []).filter((v): v is number => v !== null && Number.isFinite(v)));
    }
    const svg = document.createElementNS(SVG, 'svg');
    svg.setAttribute('viewBox', `-2 -2 ${W + 4} ${H + 4}`);
    svg.setAttribute('class', 'jp-GpuPlat-chart jp-GpuPlat-compareChart');
    svg.setAttribute('preserveAspectRatio', 'none');
    svg.setAttribute('role', 'img');
    svg.setAttribute('aria-label', `${metric} of ${data.runs.length} runs`);
    if (steps.length && values.length) {
      const s0 = Math.min(...steps);
      const s1 = Math.max(...steps);
      const lo = Math.min(...values);
      const hi = Math.max(...values);
      data.runs.forEach((r, i) => {
        const c = curves[i];
        if (!c || !c.steps.length) {
          return;
        }
        // Pad each curve with the shared extremes so every run is drawn on the same axes.
        const g = chartGeometry([s0, ...c.steps, s1], [lo, ...c.values, hi], W, H);
        const path = document.createElementNS(SVG, 'path');
        path.setAttribute('d', trimPad(g.d));
        path.setAttribute('fill', 'none');
        path.setAttribute('stroke', COLORS[i % COLORS.length]);
        path.setAttribute('stroke-width', r.id === this._baseline ? '3' : '1.5');
        path.setAttribute('vector-effect', 'non-scaling-stroke');
        path.setAttribute('data-run-id', r.id);
        svg.append(path);
      });
    }
    return h(
      'figure',
      { class: 'jp-GpuPlat-metric jp-GpuPlat-compareMetric', 'data-metric': metric },
      h(
        'figcaption',
        null,
        h('span', { class: 'jp-GpuPlat-metricName' }, metric),
        logged < data.runs.length
          ? h('span', { class: 'jp-GpuPlat-muted jp-GpuPlat-metricRuns' }, ` · logged by ${logged} of ${data.runs.length} runs`)
          : null
      ),
      svg,
      h(
        'div',
        { class: 'jp-GpuPlat-muted jp-GpuPlat-metricRange' },
        values.length ? `min ${formatMetric(Math.min(...values))} · max ${formatMetric(Math.max(...values))}` : 'no values'
      )
    );
  }

  private _data: ICompare | null = null;
  private _baseline: string;
  private _baselineSelect: HTMLSelectElement;
  private _title: HTMLElement;
  private _legend: HTMLElement;
  private _table: HTMLElement;
  private _charts: HTMLElement;
  private _error: HTMLElement;
  private _timer = 0;
  private _disconnect: () => void;
}

/** Code that differs, said once across the runs; its diff (the server's, against the first run) on demand. */
function codeRow(row: ICompareRow, n: number): HTMLElement {
  return h(
    'tr',
    { class: 'jp-GpuPlat-differ jp-GpuPlat-codeDiffer', 'data-row': row.label },
    h('td', { class: 'jp-GpuPlat-compareKey' }, row.label),
    h(
      'td',
      { colspan: n },
      h(
        'details',
        { class: 'jp-GpuPlat-codeDiff' },
        h('summary', null, 'code differs · show the diff against the first run'),
        h('pre', { class: 'jp-GpuPlat-diff' }, row.diff ?? '')
      )
    )
  );
}

/** Drop the two padding points (first and last) that fixed the shared axes. */
function trimPad(d: string): string {
  const parts = d.match(/[ML][^ML]*/g) ?? [];
  if (parts.length < 3) {
    return '';
  }
  const inner = parts.slice(1, -1);
  inner[0] = 'M' + inner[0].slice(1);
  return inner.join('');
}

export class CompareTab extends MainAreaWidget<CompareView> {
  constructor(opts: ICompareViewOptions) {
    super({ content: new CompareView(opts) });
    this.id = compareTabId(opts.ids);
    this.addClass('jp-GpuPlat-compareTab');
    this.node.dataset.runs = opts.ids.join(',');
    this.title.label = `Compare ${opts.ids.length} runs`;
    this.title.caption = `Compare ${opts.ids.join(', ')}`;
    this.title.closable = true;
    void this.content.refresh();
  }

  get ids(): string[] {
    return this.node.dataset.runs?.split(',') ?? [];
  }
}
