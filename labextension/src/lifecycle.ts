/**
 * The run lifecycle as the sidebar shows it: status groups, the phases that tell the
 * dispatch side (our queue) from the execution side (the executor), and the three clocks.
 */

import type { IRun, ITimelineEvent, Status } from './types';
import { formatDuration } from './format';

/** Timestamps a run's clocks are computed from (a subset of IRun). */
export interface IRunTimes {
  queued_at: number | null;
  dispatched_at: number | null;
  started_at: number | null;
  finished_at: number | null;
}

export interface IClockView {
  key: 'queue_wait' | 'start_wait' | 'run';
  label: string;
  /** Which side of the platform the clock measures. */
  side: 'dispatch' | 'execution' | 'run';
  help: string;
  seconds: number | null;
  /** Still counting (the phase has not ended). */
  live: boolean;
  text: string;
}

/**
 * The three clocks, computed live from the timestamps (as the service's `clocks()`):
 * queue wait (our queue: queued → dispatched), start wait (the executor: dispatched →
 * started) and run time (started → finished), each ending at `now` while it runs.
 */
export function clocks(t: IRunTimes, now: number): IClockView[] {
  const end = t.finished_at ?? now;
  const q = t.queued_at === null ? null : (t.dispatched_at ?? end) - t.queued_at;
  const sw = t.dispatched_at === null ? null : (t.started_at ?? end) - t.dispatched_at;
  const run = t.started_at === null ? null : end - t.started_at;
  const open = t.finished_at === null;
  return [
    {
      key: 'queue_wait',
      label: 'Queue wait',
      side: 'dispatch',
      help: 'Waiting in our queue for a slot, quota or GPUs (dispatch)',
      seconds: q,
      live: q !== null && open && t.dispatched_at === null,
      text: formatDuration(q)
    },
    {
      key: 'start_wait',
      label: 'Start wait',
      side: 'execution',
      help: 'Dispatched, waiting for the executor to place and start it (execution)',
      seconds: sw,
      live: sw !== null && open && t.started_at === null,
      text: formatDuration(sw)
    },
    {
      key: 'run',
      label: 'Run time',
      side: 'run',
      help: 'Running, from start to end',
      seconds: run,
      live: run !== null && open,
      text: formatDuration(run)
    }
  ];
}

/**
 * The server's clock as seen from here: `clientNow - serverNow` estimated from a
 * record the server computed at `clientNow` (an unfinished run's open clock ends at the
 * server's now). Null when the run gives no estimate.
 */
export function clockOffset(run: IRun, clientNow: number): number | null {
  if (run.finished_at !== null) {
    return null;
  }
  const c = run.clocks;
  let serverNow: number | null = null;
  if (run.started_at !== null && c.run_seconds !== null) {
    serverNow = run.started_at + c.run_seconds;
  } else if (run.dispatched_at !== null && c.start_wait_seconds !== null) {
    serverNow = run.dispatched_at + c.start_wait_seconds;
  } else if (run.queued_at !== null && c.queue_wait_seconds !== null) {
    serverNow = run.queued_at + c.queue_wait_seconds;
  }
  return serverNow === null ? null : clientNow - serverNow;
}

export type StatusGroup = 'waiting' | 'starting' | 'running' | 'succeeded' | 'failed' | 'stopped';

export const STATUS_GROUPS: ReadonlyArray<{
  group: StatusGroup;
  label: string;
  statuses: Status[];
}> = [
  { group: 'waiting', label: 'Waiting', statuses: ['created', 'queued'] },
  { group: 'starting', label: 'Starting', statuses: ['dispatched', 'starting'] },
  { group: 'running', label: 'Running', statuses: ['running', 'stopping'] },
  { group: 'succeeded', label: 'Succeeded', statuses: ['succeeded'] },
  { group: 'failed', label: 'Failed', statuses: ['failed'] },
  { group: 'stopped', label: 'Stopped', statuses: ['stopped'] }
];

export const FINAL_STATUSES: ReadonlySet<string> = new Set(['succeeded', 'failed', 'stopped']);

export function isFinal(status: string): boolean {
  return FINAL_STATUSES.has(status);
}

export function statusGroup(status: string): StatusGroup {
  for (const g of STATUS_GROUPS) {
    if ((g.statuses as string[]).includes(status)) {
      return g.group;
    }
  }
  return 'waiting';
}

/** How many runs are in each group, in the display order of STATUS_GROUPS. */
export function groupCounts(runs: Iterable<{ status: string }>): Record<StatusGroup, number> {
  const out = {
    waiting: 0,
    starting: 0,
    running: 0,
    succeeded: 0,
    failed: 0,
    stopped: 0
  } as Record<StatusGroup, number>;
  for (const r of runs) {
    out[statusGroup(r.status)] += 1;
  }
  return out;
}

/** The lifecycle phase a status belongs to: dispatch (our queue) vs execution (the executor). */
export type Phase = 'dispatch' | 'execution' | 'run' | 'end';

export function phaseOf(status: string): Phase {
  switch (status) {
    case 'created':
    case 'queued':
      return 'dispatch';
    case 'dispatched':
    case 'starting':
      return 'execution';
    case 'running':
    case 'stopping':
      return 'run';
    default:
      return 'end';
  }
}

export const PHASE_LABELS: Record<Phase, string> = {
  dispatch: 'Dispatch: waiting in our queue',
  execution: 'Execution: the executor places and starts it',
  run: 'Running',
  end: 'Ended'
};

export interface IPhaseView {
  phase: Phase;
  label: string;
  start: number;
  /** When the next phase began; null for the current one. */
  end: number | null;
  events: ITimelineEvent[];
}

/**
 * The timeline grouped into consecutive phases, so the dispatch side (our queue) and
 * the execution side (the executor) read apart. Events stay in order; a phase that
 * comes back (it should not) starts a new group rather than merging.
 */
export function timelinePhases(timeline: ITimelineEvent[]): IPhaseView[] {
  const out: IPhaseView[] = [];
  for (const ev of timeline) {
    const phase = phaseOf(ev.status);
    const last = out[out.length - 1];
    if (last && last.phase === phase) {
      last.events.push(ev);
      continue;
    }
    if (last) {
      last.end = ev.at;
    }
    out.push({ phase, label: PHASE_LABELS[phase], start: ev.at, end: null, events: [ev] });
  }
  return out;
}

/** When the run's current phase began (epoch seconds), from its timestamps. */
export function phaseStart(run: IRun): number | null {
  switch (phaseOf(run.status)) {
    case 'dispatch':
      return run.queued_at ?? run.created_at;
    case 'execution':
      return run.dispatched_at;
    case 'run':
      return run.started_at ?? run.dispatched_at;
    default:
      return run.finished_at;
  }
}
