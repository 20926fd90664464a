/**
 * Why runs wait, for list rows and the Queues tab, and clocks in server text kept live (pure).
 *
 * `waiting` on a run summary and the pending runs of a queue come from the service
 * (the same text explain gives); older servers lack them, so each reader falls back.
 */

import type { IClocks, IQueue, IRun } from '../api/types';
import { humanReason, ordinal } from './format';
import { clocks } from './lifecycle';

export interface IWaiting {
  reason: string;
  message: string;
}

/** Reasons that say only "it is in the queue", not why it is still there. */
const NOT_A_WHY = new Set(['Submitted', 'Admissible', 'Created', 'Queued', '']);

/** Why a waiting run waits: the service's `waiting`, else a queue reason of its last event; null otherwise. */
export function waitingOf(run: Partial<Pick<IRun, 'status' | 'phase' | 'reason' | 'message'>> & { waiting?: IWaiting | null }): IWaiting | null {
  if (run.phase !== 'dispatch') {
    return null;
  }
  if (run.waiting) {
    return run.waiting;
  }
  const reason = run.reason ?? '';
  return NOT_A_WHY.has(reason) ? null : { reason, message: run.message ?? '' };
}

/** `Queue concurrency: 2/2 runs dispatched in queue team-a-train`. */
export function waitingText(w: IWaiting): string {
  const head = humanReason(w.reason);
  return w.message ? `${head}: ${w.message}` : head;
}

export interface IPendingRun {
  /** Null for other projects' runs: counted, not named. */
  id: string | null;
  name: string | null;
  project: string;
  user: string | null;
  position: number;
}

type QueueLike = Omit<IQueue, 'pending' | 'pending_runs' | 'pending_hidden'> & {
  pending: number | IPendingRun[];
  pending_runs?: IPendingRun[] | null;
  pending_hidden?: number;
};

/** The pending runs the service lists for a queue (in queue order), or null when it lists none. */
export function pendingRuns(q: QueueLike): IPendingRun[] | null {
  const list = Array.isArray(q.pending) ? q.pending : q.pending_runs;
  return Array.isArray(list) ? [...list].sort((a, b) => a.position - b.position) : null;
}

export function pendingCount(q: QueueLike): number {
  return Array.isArray(q.pending) ? q.pending.length : q.pending;
}

/** Pending runs of projects the caller may not see: `and 2 of other projects`, '' when none. */
export function hiddenPendingText(q: QueueLike): string {
  const n = q.pending_hidden ?? 0;
  return n > 0 ? `and ${n} of other projects (not named)` : '';
}

/** One pending run's line: `1st · r-1 lr=0.1 (alice)`, or `2nd · a team-b run`. */
export function pendingRunText(p: IPendingRun): string {
  const who = p.id ? `${p.name || p.id}${p.user ? ` (${p.user})` : ''}` : `a ${p.project} run`;
  return `${ordinal(p.position)} · ${who}`;
}

/** The queue's dispatch rules: `ordering fifo · at most 1 dispatched per user`. */
export function queueRulesText(q: Pick<IQueue, 'ordering' | 'max_per_user'>): string {
  const parts = [`ordering ${q.ordering}`];
  parts.push(q.max_per_user === null || q.max_per_user === undefined ? 'no per-user limit' : `at most ${q.max_per_user} dispatched per user`);
  return parts.join(' · ');
}

/**
 * The service writes "running for 12s" as of when it answered: say the run's own run clock
 * instead (the service's `clocks.run_seconds`, gone on by `elapsed` while it ticks), so an answer
 * read once does not say "running for 0s" a minute later, and a preempted run waiting again
 * does not count the wait as running.
 */
export function liveMessage(message: string, run: { clocks: IClocks } | null, elapsed: number): string {
  const ran = run ? clocks(run, elapsed).find(c => c.key === 'run') : undefined;
  if (!ran || ran.seconds === null) {
    return message;
  }
  return message.replace(/running for \d+(?:\.\d+)? ?s\b/, `running for ${ran.text}`);
}
