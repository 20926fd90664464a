/**
 * A sweep's part of its run detail: child counts and progress, the concurrency editor
 * and Pause/Resume (for whoever may stop the sweep), and the best child with its params.
 */

import { errorBox, h } from '../dom';
import type { RunDetailSource } from '../../models/rundetailsource';
import { ISweepPoint, paramsText, parseConcurrency, scatterGeometry, sweepView } from '../../models/sweepmodel';
import type { IRunDetail } from '../../api/types';
import { isFinal } from '../../models/viewmodel';

export interface ISweepPartOptions {
  source: RunDetailSource;
  /** The sweep answered by PATCH: the detail shows it. */
  onChanged: (run: IRunDetail) => void;
  /** Open a child's detail (the best child). */
  onOpen: (id: string) => void;
}

export class SweepPart {
  constructor(private _opts: ISweepPartOptions) {
    this._counts = h('div', { class: 'jp-GpuPlat-sweepCounts', 'aria-live': 'polite' });
    this._bar = h('div', { class: 'jp-GpuPlat-meterBar' });
    this._track = h(
      'div',
      { class: 'jp-GpuPlat-meterTrack jp-GpuPlat-sweepProgress', role: 'progressbar', 'aria-valuemin': 0, 'aria-valuemax': 100 },
      this._bar
    );
    this._progress = h('span', { class: 'jp-GpuPlat-meterText' });
    this._gate = h('div', { class: 'jp-GpuPlat-sweepGate' });
    this._input = h('input', {
      class: 'jp-GpuPlat-input jp-GpuPlat-concurrencyInput',
      type: 'number',
      min: 1,
      step: 1,
      'aria-label': 'Children dispatched at once, at most'
    });
    this._input.addEventListener('keydown', ev => {
      if (ev.key === 'Enter') {
        ev.preventDefault();
        void this._apply();
      }
    });
    this._applyButton = h(
      'button',
      { class: 'jp-GpuPlat-button jp-GpuPlat-concurrencyApply', onclick: () => void this._apply() },
      'Apply'
    );
    this._pause = h('button', { class: 'jp-GpuPlat-button jp-GpuPlat-sweepPause', onclick: () => void this._togglePause() });
    this._controls = h(
      'div',
      { class: 'jp-GpuPlat-sweepControls' },
      h('label', { class: 'jp-GpuPlat-muted' }, 'Concurrency'),
      this._input,
      this._applyButton,
      this._pause
    );
    this._error = h('div');
    this._best = h('div', { class: 'jp-GpuPlat-sweepBest' });
    this._param = h('select', { class: 'jp-GpuPlat-select jp-GpuPlat-sweepParam', 'aria-label': 'Param on the x axis' });
    this._param.addEventListener('change', () => this._drawChart());
    this._chart = h('div', { class: 'jp-GpuPlat-sweepChart' });
    const refresh = h(
      'button',
      { class: 'jp-GpuPlat-button', title: "Read the children's metrics again", onclick: () => void this._loadPoints() },
      'Refresh'
    );
    this._chartBox = h(
      'div',
      { class: 'jp-GpuPlat-sweepChartBox' },
      h('div', { class: 'jp-GpuPlat-sweepChartBar' }, h('label', { class: 'jp-GpuPlat-muted' }, 'Params vs metric'), this._param, refresh),
      this._chart
    );
    this.node = h(
      'div',
      { class: 'jp-GpuPlat-sweep' },
      this._counts,
      h('div', { class: 'jp-GpuPlat-meter' }, h('span', { class: 'jp-GpuPlat-meterLabel' }, 'Ended'), this._track, this._progress),
      this._gate,
      this._controls,
      this._error,
      this._best,
      this._chartBox
    );
  }

  readonly node: HTMLElement;

  /** Show the sweep; `editable` when the viewer may change it (the Stop button's rule). */
  render(run: IRunDetail, editable: boolean): void {
    this._run = run;
    const v = sweepView(run);
    if (!v) {
      return;
    }
    this._counts.textContent = v.countsText;
    const pct = Math.round(v.fraction * 100);
    this._bar.style.width = `${pct}%`;
    this._track.setAttribute('aria-valuenow', String(pct));
    this._track.setAttribute('aria-label', `Children ended: ${v.progressText}`);
    this._progress.textContent = v.progressText;
    this._gate.textContent = v.concurrencyText ? `Dispatches ${v.concurrencyText}` : '';
    this.node.dataset.paused = String(Boolean(run.paused));
    const open = editable && !isFinal(run);
    this._controls.hidden = !open;
    // never overwrite what the user is typing
    if (document.activeElement !== this._input && run.concurrency != null) {
      this._input.value = String(run.concurrency);
    }
    this._pause.textContent = run.paused ? 'Resume' : 'Pause';
    this._pause.title = run.paused ? 'Dispatch children again' : 'Dispatch no more children (running ones go on)';
    this._renderBest(run);
    // the chart is read when the detail opens and once more when the sweep ends
    const ended = isFinal(run);
    if (this._pointsFor === null || (ended && this._pointsFor !== 'final')) {
      this._pointsFor = ended ? 'final' : 'open';
      void this._loadPoints();
    }
  }

  private async _loadPoints(): Promise<void> {
    const run = this._run;
    if (!run) {
      return;
    }
    try {
      const cmp = await this._opts.source.sweepPoints();
      this._points = cmp.children;
      this._metric = cmp.objective?.metric ?? '';
      this._bestId = cmp.best ?? run.best?.id ?? null; // top=0 answers no best: the record has it
      const names: string[] = [];
      for (const c of cmp.children) {
        Object.keys(c.params).forEach(n => names.includes(n) || names.push(n));
      }
      const keep = this._param.value;
      this._param.replaceChildren(...names.map(n => h('option', { value: n }, n)));
      if (names.includes(keep)) {
        this._param.value = keep;
      }
      this._drawChart();
    } catch (error) {
      this._chart.replaceChildren(errorBox(error));
    }
  }

  private _drawChart(): void {
    const W = 260;
    const H = 120;
    const param = this._param.value;
    const g = scatterGeometry(this._points, param, this._run?.best?.id ?? this._bestId, W, H);
    if (!g.dots.length) {
      this._chart.replaceChildren(
        h('div', { class: 'jp-GpuPlat-muted' }, this._metric ? `No child has reported ${this._metric} yet.` : 'No child has reported a metric yet.')
      );
      return;
    }
    const NS = 'http://www.w3.org/2000/svg';
    const svg = document.createElementNS(NS, 'svg');
    svg.setAttribute('viewBox', `0 0 ${W} ${H}`);
    svg.setAttribute('class', 'jp-GpuPlat-scatter');
    svg.setAttribute('role', 'img');
    svg.setAttribute('aria-label', `${this._metric} against ${param} for ${g.dots.length} children`);
    for (const d of g.dots) {
      const c = document.createElementNS(NS, 'circle');
      c.setAttribute('cx', d.cx.toFixed(1));
      c.setAttribute('cy', d.cy.toFixed(1));
      c.setAttribute('r', d.best ? '4.5' : '3');
      c.setAttribute('class', d.best ? 'jp-GpuPlat-dot jp-mod-best' : 'jp-GpuPlat-dot');
      c.dataset.runId = d.id;
      const t = document.createElementNS(NS, 'title');
      t.textContent = d.title;
      c.append(t);
      svg.append(c);
    }
    this._chart.replaceChildren(
      h('div', { class: 'jp-GpuPlat-muted' }, `${this._metric} ${g.yMin} … ${g.yMax}`),
      svg as unknown as HTMLElement,
      h(
        'div',
        { class: 'jp-GpuPlat-muted jp-GpuPlat-scatterAxis' },
        `${param}${g.log ? ' (log)' : ''}: ${g.xMin} … ${g.xMax}${g.missing ? ` · ${g.missing} without a value` : ''}`
      )
    );
  }

  private _renderBest(run: IRunDetail): void {
    const best = run.best;
    const objective = (run.matrix?.objective ?? null) as { metric?: string; optimization?: string } | null;
    if (!best) {
      this._best.replaceChildren(
        h('div', { class: 'jp-GpuPlat-muted' }, objective?.metric ? `Best child: none has reported ${objective.metric} yet` : 'No objective: no best child')
      );
      return;
    }
    const metric = objective?.metric ?? 'objective';
    this._best.replaceChildren(
      h(
        'div',
        { class: 'jp-GpuPlat-sweepBestTitle' },
        'Best child: ',
        h(
          'button',
          { class: 'jp-GpuPlat-link jp-GpuPlat-sweepBestOpen', title: `Open ${best.id}`, onclick: () => this._opts.onOpen(best.id) },
          best.id
        ),
        ` · ${metric} ${objective?.optimization === 'maximize' ? 'max' : 'min'} ${best.value.toPrecision(4)}`
      ),
      h('div', { class: 'jp-GpuPlat-sweepBestParams' }, paramsText(best.params))
    );
  }

  private async _apply(): Promise<void> {
    const run = this._run;
    if (!run) {
      return;
    }
    const parsed = parseConcurrency(this._input.value);
    if (parsed.error !== undefined) {
      this._error.replaceChildren(errorBox({ message: parsed.error }));
      return;
    }
    await this._patch(run, { concurrency: parsed.value });
    this._input.blur();
  }

  private _togglePause(): Promise<void> {
    const run = this._run;
    return run ? this._patch(run, { paused: !run.paused }) : Promise.resolve();
  }

  private async _patch(run: IRunDetail, change: { concurrency?: number; paused?: boolean }): Promise<void> {
    this._applyButton.disabled = this._pause.disabled = true;
    try {
      const updated = await this._opts.source.updateSweep(change);
      this._error.replaceChildren();
      this._opts.onChanged(updated);
    } catch (error) {
      this._error.replaceChildren(errorBox(error));
    } finally {
      this._applyButton.disabled = this._pause.disabled = false;
    }
  }

  private _run: IRunDetail | null = null;
  private _counts: HTMLElement;
  private _bar: HTMLElement;
  private _track: HTMLElement;
  private _progress: HTMLElement;
  private _gate: HTMLElement;
  private _input: HTMLInputElement;
  private _applyButton: HTMLButtonElement;
  private _pause: HTMLButtonElement;
  private _controls: HTMLElement;
  private _error: HTMLElement;
  private _best: HTMLElement;
  private _param: HTMLSelectElement;
  private _chart: HTMLElement;
  private _chartBox: HTMLElement;
  private _points: ISweepPoint[] = [];
  private _metric = '';
  private _bestId: string | null = null;
  private _pointsFor: 'open' | 'final' | null = null;
}
