/**
 * A sweep's part of its run detail: child counts and progress, the concurrency editor
 * and Pause/Resume (for whoever may stop the sweep), and the best child with its params.
 */

import { errorBox, h } from './dom';
import type { GpuPlatService } from './request';
import { paramsText, parseConcurrency, sweepView } from './sweepmodel';
import type { IRunDetail } from './types';
import { isFinal } from './viewmodel';

export interface ISweepPartOptions {
  service: GpuPlatService;
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
    this.node = h(
      'div',
      { class: 'jp-GpuPlat-sweep' },
      this._counts,
      h('div', { class: 'jp-GpuPlat-meter' }, h('span', { class: 'jp-GpuPlat-meterLabel' }, 'Ended'), this._track, this._progress),
      this._gate,
      this._controls,
      this._error,
      this._best
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
    const open = editable && !isFinal(run.status);
    this._controls.hidden = !open;
    // never overwrite what the user is typing
    if (document.activeElement !== this._input && run.concurrency != null) {
      this._input.value = String(run.concurrency);
    }
    this._pause.textContent = run.paused ? 'Resume' : 'Pause';
    this._pause.title = run.paused ? 'Dispatch children again' : 'Dispatch no more children (running ones go on)';
    this._renderBest(run);
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
      const updated = await this._opts.service.updateSweep(run.id, change);
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
}
