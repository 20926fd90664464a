/**
 * The run view's "GPU use" section (issue 27): the server's words for the run's GPU samples
 * (`gpu_usage.text`), its busy share and memory peak as the server wrote them, and charts of its
 * `system/gpu<N>/util` and `memory_bytes` series. Not measured: the reason, and no empty chart.
 */

import { h, section } from '../dom';
import type { IMetrics, IRunDetail } from '../../api/types';
import { gpuChartSeries, gpuView } from '../../models/gpuusage';
import { metricChart } from './metricsview';

export class GpuPart {
  constructor() {
    this._text = h('div', { class: 'jp-GpuPlat-gpuText' });
    this._facts = h('div', { class: 'jp-GpuPlat-gpuFacts' });
    this._charts = h('div', { class: 'jp-GpuPlat-metrics jp-GpuPlat-gpuCharts' });
    this.node = section('GPU use', 'jp-GpuPlat-gpuSection', this._text, this._facts, this._charts);
    this.node.hidden = true;
  }

  /** The section: shown for a run that held GPUs. */
  readonly node: HTMLElement;

  /** The record's `gpu_usage`, as the server worded it. */
  render(run: IRunDetail): void {
    const view = gpuView(run);
    this.node.hidden = view === null;
    this._measured = view?.measured ?? false;
    this.node.dataset.measured = String(this._measured);
    this._text.textContent = view?.text ?? '';
    this._text.classList.toggle('jp-GpuPlat-muted', !this._measured);
    this._facts.replaceChildren(
      ...(view?.facts ?? []).map(f =>
        h(
          'div',
          { class: 'jp-GpuPlat-clock', 'data-gpu': f.key },
          h('div', { class: 'jp-GpuPlat-clockLabel' }, f.label),
          h('div', { class: 'jp-GpuPlat-clockValue' }, f.value)
        )
      )
    );
    this._drawCharts();
  }

  /** The run's GPU series (from the metrics answer); drawn only while the use is measured. */
  charts(system: IMetrics): void {
    this._system = system;
    this._drawCharts();
  }

  private _drawCharts(): void {
    const names = this._measured ? Object.keys(this._system).sort() : [];
    this._charts.hidden = names.length === 0;
    this._charts.replaceChildren(
      ...names.map(name => {
        const c = this._system[name];
        const s = gpuChartSeries(name, c.values);
        return metricChart(name, s.label, c.steps, s.values, c.count);
      })
    );
  }

  private _text: HTMLElement;
  private _facts: HTMLElement;
  private _charts: HTMLElement;
  private _measured = false;
  private _system: IMetrics = {};
}
