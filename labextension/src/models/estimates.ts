/**
 * Start estimates as the sidebar shows them (pure). The service computes each estimate and words it
 * (`eta.text`: "starts in ~6 min (p90 25 min)", "starts now"), or says why there is none
 * (`eta_unknown`); here it is only chosen and labelled, never recomputed from `p50_at` (one owner
 * per answer: engine/estimates.py and core/eta.py).
 */

import type { IEtaChange, IEtaEvent, IStartEstimate } from '../api/types';

/** What carries an estimate: a run, an explain answer, a preview, an alternative, an `eta` event's run. */
export interface IEstimated {
  eta?: IStartEstimate | null;
  eta_unknown?: string | null;
}

export interface IEstimateView {
  /** `known`: an estimate; `unknown`: none, and the service says why; `none`: nothing to say (not waiting, not estimated yet). */
  state: 'known' | 'unknown' | 'none';
  /** One line: the service's words, or `start unknown`. */
  text: string;
  /** What the estimate rests on (its basis), or why there is none. */
  why: string;
  /** When the service computed it (epoch seconds; known estimates only). */
  computedAt: number | null;
}

/** The estimate of a run, explain answer or preview, as one line and what it rests on. */
export function estimateView(x: IEstimated | null | undefined): IEstimateView {
  if (x?.eta) {
    return { state: 'known', text: x.eta.text, why: x.eta.basis, computedAt: x.eta.computed_at };
  }
  if (x?.eta_unknown) {
    return { state: 'unknown', text: 'start unknown', why: x.eta_unknown, computedAt: null };
  }
  return { state: 'none', text: '', why: '', computedAt: null };
}

/** `starts in ~6 min (p90 25 min)`, or `start unknown: <why>`; '' when nothing is said. */
export function estimateLine(x: IEstimated | null | undefined): string {
  const v = estimateView(x);
  return v.state === 'unknown' ? `${v.text}: ${v.why}` : v.text;
}

/** The change an `eta` event brings to run `id`, if it names it. */
export function etaChangeOf(ev: IEtaEvent, id: string): IEtaChange | undefined {
  return ev.runs.find(r => r.run_id === id);
}

/**
 * Whether `change` is news to what `held` says: an estimate computed before the one held (an
 * event read before a page that came later) is not.
 */
export function isNewer(change: IEstimated, held: IEstimated): boolean {
  return !(change.eta && held.eta && change.eta.computed_at < held.eta.computed_at);
}
