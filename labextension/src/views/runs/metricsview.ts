/**
 * Metric charts of one run, from `GET runs/{id}/metrics` (what the run logged with
 * jupyter_gpuplat.tracking): one small SVG line chart per metric, refreshed while the
 * run is live. The platform's GPU series (`system/…`) in the same answer go to `onSystem`
 * (the run view's "GPU use" section), not among the run's own metrics.
 */

import { Widget } from '@lumino/widgets';

import { h } from '../dom';
import { GpuPlatAPIError } from '../../api/errors';
import type { RunDetailSource } from '../../models/rundetailsource';
import type { IMetrics } from '../../api/types';
import { splitSystem } from '../../models/gpuusage';
import { chartGeometry, formatMetric } from '../../models/viewmodel';

const SVG = 'http://www.w3.org/2000/svg';
const W = 240;
const H = 60;
const REFRESH_MS = 5000;

export class MetricsView extends Widget {
  constructor(
    private _source: RunDetailSource,
    private _onSystem: (system: IMetrics) => void = () => undefined
  ) {
    super();
    this.addClass('jp-GpuPlat-metrics');
    this.node.append(h('div', { class: 'jp-GpuPlat-muted' }, 'Loading metrics…'));
  }

  /** Fetch and draw; keeps refreshing every few seconds until the run is final. */
  async refresh(final: boolean): Promise<void> {
    window.clearTimeout(this._timer);
    try {
      this._render(await this._source.metrics());
    } catch (error) {
      if (this.isDisposed) {
        return;
      }
      // An older server without the route answers a bare 404 (no error code).
      const missing = error instanceof GpuPlatAPIError && error.status === 404 && !error.code;
      this.node.replaceChildren(
        h(
          'div',
          { class: 'jp-GpuPlat-muted jp-GpuPlat-metricsUnavailable' },
          missing ? 'Metric charts need the metrics API (GET runs/{id}/metrics), which this server does not have.' : `Metrics: ${(error as Error).message}`
        )
      );
      return;
    }
    if (!final && !this.isDisposed) {
      this._timer = window.setTimeout(() => void this.refresh(false), REFRESH_MS);
    }
  }

  dispose(): void {
    window.clearTimeout(this._timer);
    super.dispose();
  }

  private _render(metrics: IMetrics): void {
    if (this.isDisposed) {
      return;
    }
    const { own, system } = splitSystem(metrics);
    this._onSystem(system);
    metrics = own;
    const names = Object.keys(metrics).sort();
    if (!names.length) {
      this.node.replaceChildren(
        h(
          'div',
          { class: 'jp-GpuPlat-muted' },
          'No metrics recorded. Log them from the run with jupyter_gpuplat.tracking.log_metrics(step=…, loss=…).'
        )
      );
      return;
    }
    this.node.replaceChildren(...names.map(name => metricChart(name, name, metrics[name].steps, metrics[name].values, metrics[name].count)));
  }

  private _timer = 0;
}

/** One series as a small line chart with its last value and range (`label`: its caption, `name`: data-metric). */
export function metricChart(name: string, label: string, steps: number[], values: Array<number | null>, count: number): HTMLElement {
  const g = chartGeometry(steps, values, W, H);
  const svg = document.createElementNS(SVG, 'svg');
  svg.setAttribute('viewBox', `-2 -2 ${W + 4} ${H + 4}`);
  svg.setAttribute('class', 'jp-GpuPlat-chart');
  svg.setAttribute('preserveAspectRatio', 'none'); // fill the width; the stroke does not scale
  svg.setAttribute('role', 'img');
  svg.setAttribute('aria-label', `${label}: last ${formatMetric(g.last)}, min ${formatMetric(g.min)}, max ${formatMetric(g.max)}`);
  const path = document.createElementNS(SVG, 'path');
  path.setAttribute('d', g.d);
  path.setAttribute('class', 'jp-GpuPlat-chartLine');
  svg.append(path);
  return h(
    'figure',
    { class: 'jp-GpuPlat-metric', 'data-metric': name },
    h(
      'figcaption',
      null,
      h('span', { class: 'jp-GpuPlat-metricName' }, label),
      h('span', { class: 'jp-GpuPlat-metricLast' }, formatMetric(g.last))
    ),
    svg,
    h(
      'div',
      { class: 'jp-GpuPlat-muted jp-GpuPlat-metricRange' },
      `min ${formatMetric(g.min)} · max ${formatMetric(g.max)} · steps ${g.firstStep ?? '—'}–${g.lastStep ?? '—'} · ${count} points`
    )
  );
}
