/**
 * The run lifecycle as the sidebar shows it: status groups, the phases that tell the
 * dispatch side (our queue) from the execution side (the executor), and the three clocks.
 * The service computes each answer (a run's `phase`, its `clocks` and which is `ticking`);
 * this module only renders them.
 */

import type { IClocks, IRun, ITimelineEvent, Status } from '../api/types';
import { formatDuration } from './format';

export type ClockKey = 'queue_wait_seconds' | 'start_wait_seconds' | 'run_seconds';

export interface IClockView {
  key: 'queue_wait' | 'start_wait' | 'run';
  label: string;
  /** Which side of the platform the clock measures. */
  side: 'dispatch' | 'execution' | 'run';
  help: string;
  seconds: number | null;
  /** Still counting: the server's `clocks.ticking`. */
  live: boolean;
  text: string;
}

const CLOCKS: ReadonlyArray<Omit<IClockView, 'seconds' | 'live' | 'text'> & { field: ClockKey }> = [
  {
    key: 'queue_wait',
    field: 'queue_wait_seconds',
    label: 'Queue wait',
    side: 'dispatch',
    help: 'Waiting in our queue for a slot, quota or GPUs (dispatch)'
  },
  {
    key: 'start_wait',
    field: 'start_wait_seconds',
    label: 'Start wait',
    side: 'execution',
    help: 'Dispatched, waiting for the executor to place and start it (execution; again after a preemption)'
  },
  { key: 'run', field: 'run_seconds', label: 'Run time', side: 'run', help: 'Running, from start to end' }
];

/**
 * The three clocks as the service computed them (core/clocks.py: queue wait, start wait,
 * run time, a preempted run's wait again counted as start wait), rendered, not recomputed:
 * the one the service says is `ticking` goes on by `elapsed`, the seconds since the record was read.
 */
export function clocks(run: { clocks: IClocks }, elapsed: number): IClockView[] {
  const c = run.clocks;
  return CLOCKS.map(({ field, ...v }) => {
    const live = c.ticking === field;
    const base = c[field];
    // The phase has begun by the status before the service had its time: its clock starts at the read.
    const seconds = live ? (base ?? 0) + Math.max(0, elapsed) : base;
    return { ...v, seconds, live, text: formatDuration(seconds) };
  });
}

/**
 * The server's clock as seen from here: `clientNow - serverNow` estimated from a
 * record the server computed at `clientNow` (its ticking clock ends at the server's now).
 * Null when the run gives no estimate. After a preemption the run clock leaves out the
 * waits again: the estimate is then late, a larger sample, which ServerClock's minimum drops.
 */
export function clockOffset(run: IRun, clientNow: number): number | null {
  const c = run.clocks;
  let serverNow: number | null = null;
  if (c.ticking === 'run_seconds' && run.started_at !== null && c.run_seconds !== null) {
    serverNow = run.started_at + c.run_seconds;
  } else if (c.ticking === 'start_wait_seconds' && run.started_at === null && run.dispatched_at !== null && c.start_wait_seconds !== null) {
    serverNow = run.dispatched_at + c.start_wait_seconds;
  } else if (c.ticking === 'queue_wait_seconds' && run.queued_at !== null && c.queue_wait_seconds !== null) {
    serverNow = run.queued_at + c.queue_wait_seconds;
  }
  return serverNow === null ? null : clientNow - serverNow;
}

/** The lifecycle phase of a status, as the service says it (`phase` of runs, events, timeline events). */
export type Phase = IRun['phase'];

export type StatusGroup = 'waiting' | 'starting' | 'running' | 'succeeded' | 'failed' | 'stopped';

/**
 * The status filter's choices, each with what `GET runs` is asked for it: a phase (the service
 * says which statuses are in it), or for an ended run its final status, which names the group.
 * Which group a run is in comes from its `phase` (statusGroup).
 */
export const STATUS_GROUPS: ReadonlyArray<{
  group: StatusGroup;
  label: string;
  query: { phase: Exclude<Phase, 'end'> } | { status: Status };
}> = [
  { group: 'waiting', label: 'Waiting', query: { phase: 'dispatch' } },
  { group: 'starting', label: 'Starting', query: { phase: 'execution' } },
  { group: 'running', label: 'Running', query: { phase: 'run' } },
  { group: 'succeeded', label: 'Succeeded', query: { status: 'succeeded' } },
  { group: 'failed', label: 'Failed', query: { status: 'failed' } },
  { group: 'stopped', label: 'Stopped', query: { status: 'stopped' } }
];

/** Whether a run (or an event about it) is over: the service's phase says so. */
export function isFinal(x: { phase: Phase }): boolean {
  return x.phase === 'end';
}

const GROUP_OF_PHASE: Record<Exclude<Phase, 'end'>, StatusGroup> = {
  dispatch: 'waiting',
  execution: 'starting',
  run: 'running'
};

/** The group a run (or event) shows in: its phase's, or once ended its final status. */
export function statusGroup(x: { phase: Phase; status: string }): StatusGroup {
  return x.phase === 'end' ? (x.status as StatusGroup) : GROUP_OF_PHASE[x.phase];
}

/** How many runs are in each group, in the display order of STATUS_GROUPS. */
export function groupCounts(runs: Iterable<{ phase: Phase; status: string }>): Record<StatusGroup, number> {
  const out = {
    waiting: 0,
    starting: 0,
    running: 0,
    succeeded: 0,
    failed: 0,
    stopped: 0
  } as Record<StatusGroup, number>;
  for (const r of runs) {
    out[statusGroup(r)] += 1;
  }
  return out;
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
 * The timeline grouped into consecutive phases (each event's `phase`, from the service), so
 * the dispatch side (our queue) and the execution side (the executor) read apart. Events stay
 * in order; a phase that comes back (after a preemption) starts a new group rather than merging.
 */
export function timelinePhases(timeline: ITimelineEvent[]): IPhaseView[] {
  const out: IPhaseView[] = [];
  for (const ev of timeline) {
    const phase = ev.phase;
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

/** The clock each phase's time is (core/clocks.py counts a phase's time on it). */
const PHASE_CLOCK: Record<Exclude<Phase, 'end'>, IClockView['key']> = {
  dispatch: 'queue_wait',
  execution: 'start_wait',
  run: 'run'
};

/**
 * A timeline phase's duration. A phase seen once is the service's clock for it (ticking by
 * `elapsed` when the service says so): a preempted run's wait again is start wait, so its
 * "Running" phase shows the run time, not the time since it started. A phase that comes back
 * (more than one group) shows each group's own span, from its events' times to the next group's.
 */
export function phaseTime(
  p: IPhaseView,
  phases: readonly IPhaseView[],
  run: { clocks: IClocks; finished_at: number | null },
  elapsed: number,
  now: number
): { text: string; live: boolean } | null {
  if (p.phase === 'end') {
    return null;
  }
  if (phases.filter(q => q.phase === p.phase).length === 1) {
    const c = clocks(run, elapsed).find(v => v.key === PHASE_CLOCK[p.phase as Exclude<Phase, 'end'>])!;
    return { text: c.text, live: c.live };
  }
  const live = p.end === null && run.finished_at === null;
  return { text: formatDuration((p.end ?? run.finished_at ?? now) - p.start), live };
}

/** The verb a list row says before the clock that is ticking (the service's `clocks.ticking`). */
const TICKING_VERB: Record<IClockView['key'], string> = {
  queue_wait: 'waiting',
  start_wait: 'starting',
  run: 'running'
};

/**
 * An unfinished run's row text: the clock the service says is ticking, with local elapsed time
 * added (`waiting 12s`, `starting 40s`, `running 2m 05s`). A preempted run that waits again is
 * `starting` with the service's start wait, never `running` with the wait counted as run time.
 * No clock ticking yet (a row made from an event, its record not read): the group's word only.
 */
export function tickingText(run: { clocks: IClocks; phase: Phase; status: string }, elapsed: number): string {
  const live = clocks(run, elapsed).find(c => c.live);
  return live ? `${TICKING_VERB[live.key]} ${live.text}` : `${statusGroup(run)} …`;
}

// When each record arrived: the service marks what it reads (api/readclock.ts).
export { markRead, readAgo } from '../api/readclock';
