/** A run's timeline by phase: each phase's events and its duration, the current one ticking each second. */

import { h } from '../dom';
import type { IRunDetail } from '../../api/types';
import { IPhaseView, isFinal, phaseTime, timelinePhases } from '../../models/viewmodel';

export class TimelineView {
  readonly node = h('ol', { class: 'jp-GpuPlat-timeline' });

  /**
   * The run's phases; `elapsed`: seconds since its record was read (local time), `now`: the
   * server's time.
   */
  render(run: IRunDetail, elapsed: number, now: number): void {
    const fmt = (at: number) => new Date(at * 1000).toLocaleTimeString();
    const phases = timelinePhases(run.timeline);
    this._livePhase = null;
    const time = (p: (typeof phases)[number]) => {
      const t = phaseTime(p, phases, run, elapsed, now);
      if (t === null) {
        return null;
      }
      const node = h('span', { class: 'jp-GpuPlat-phaseTime' }, t.text);
      if (t.live && !isFinal(run)) {
        node.classList.add('jp-mod-live');
        this._livePhase = { node, phase: p, phases };
      }
      return node;
    };
    this.node.replaceChildren(
      ...phases.map(p =>
        h(
          'li',
          { class: `jp-GpuPlat-phase jp-mod-${p.phase}`, 'data-phase': p.phase },
          h(
            'div',
            { class: 'jp-GpuPlat-phaseTitle' },
            h('span', null, p.label),
            time(p)
          ),
          h(
            'ul',
            { class: 'jp-GpuPlat-events' },
            ...p.events.map(e =>
              h(
                'li',
                { class: 'jp-GpuPlat-event', 'data-status': e.status, 'data-phase': e.phase },
                h('span', { class: 'jp-GpuPlat-eventTime' }, fmt(e.at)),
                h('span', { class: 'jp-GpuPlat-eventStatus' }, `${e.status} · ${e.reason}`),
                h('span', { class: 'jp-GpuPlat-eventMessage' }, e.message)
              )
            )
          )
        )
      )
    );
  }

  /** The current phase's duration goes on (the service's clock for it, or its span since its first event). */
  tick(run: IRunDetail, elapsed: number, now: number): void {
    const live = this._livePhase;
    if (live) {
      const t = phaseTime(live.phase, live.phases, run, elapsed, now);
      live.node.textContent = t?.text ?? '';
    }
  }

  private _livePhase: { node: HTMLElement; phase: IPhaseView; phases: IPhaseView[] } | null = null;
}
