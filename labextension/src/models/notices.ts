/** Which of the user's run events deserve a notification (pure; notify.ts shows them). */

import type { IEtaChange, IRun, IStatusEvent } from '../api/types';
import { statusGroup } from './lifecycle';

export interface INotifySettings {
  started: boolean;
  finished: boolean;
  failed: boolean;
  longWait: boolean;
  longWaitMinutes: number;
  /** A run I just submitted waits: when it is expected to start (its first estimate). */
  estimate: boolean;
}

export const DEFAULT_NOTIFY: INotifySettings = {
  started: true,
  finished: true,
  failed: true,
  longWait: true,
  longWaitMinutes: 10,
  estimate: true
};

export interface INotice {
  kind: 'started' | 'finished' | 'failed' | 'longWait' | 'estimate' | 'gpuIdle';
  type: 'info' | 'success' | 'error' | 'warning';
  message: string;
}

/** A remark after a run's end that changes nothing: it held GPUs mostly idle (worded by the service). */
export const GPU_MOSTLY_IDLE = 'GpuMostlyIdle';

/** Whether an event is for `me`: my run's, or a GPU-idle remark naming me (the service's `details.tell`). */
export function tellsMe(ev: IStatusEvent, me: string): boolean {
  const tell = ev.details?.tell;
  if (ev.reason === GPU_MOSTLY_IDLE && Array.isArray(tell)) {
    return tell.includes(me);
  }
  return ev.user === me;
}

/** The notification a status event deserves for `me`, or null (others' runs, repeats). */
export function noticeFor(ev: IStatusEvent, me: string, s: INotifySettings): INotice | null {
  if (!tellsMe(ev, me)) {
    return null;
  }
  if (ev.reason === GPU_MOSTLY_IDLE) {
    return { kind: 'gpuIdle', type: 'warning', message: ev.message };
  }
  const name = ev.name || ev.run_id;
  if (ev.status === 'running' && ev.reason === 'Started' && s.started) {
    return { kind: 'started', type: 'info', message: `Run ${name} started in ${ev.queue}` };
  }
  if (ev.status === 'succeeded' && s.finished) {
    return { kind: 'finished', type: 'success', message: `Run ${name} succeeded` };
  }
  if (ev.status === 'stopped' && s.finished) {
    return { kind: 'finished', type: 'info', message: `Run ${name} stopped: ${ev.message}` };
  }
  if (ev.status === 'failed' && s.failed) {
    return { kind: 'failed', type: 'error', message: `Run ${name} failed: ${ev.message}` };
  }
  return null;
}

/**
 * The notice of a run of mine that waits and has its first estimate: `Run third waits in
 * team-a-train: starts in ~10 min (p90 10 min)` (the service's words); null without a number
 * (an unknown start is the run's own to explain) or when the setting is off.
 */
export function estimateNotice(run: Pick<IWaitingRun, 'id' | 'name' | 'queue'>, change: IEtaChange, s: INotifySettings): INotice | null {
  if (!s.estimate || !change.eta) {
    return null;
  }
  return { kind: 'estimate', type: 'info', message: `Run ${run.name || run.id} waits in ${run.queue}: ${change.eta.text}` };
}

/**
 * A waiting run as the notices follow it: its queue-wait clock as the service gave it
 * (core/clocks: every wait in our queue, a wait again after a requeue included), `waited`
 * seconds at `readAt` (the server's time of that reading). The clock goes on from there.
 */
export interface IWaitingRun extends Pick<IRun, 'id' | 'user' | 'status' | 'phase' | 'name' | 'queue'> {
  waited: number;
  readAt: number;
}

/** A listed waiting run, read when the server's clock said `serverNow`. */
export function waitingRun(r: IRun, serverNow: number): IWaitingRun {
  const { id, user, status, phase, name, queue } = r;
  return { id, user, status, phase, name, queue, waited: r.clocks.queue_wait_seconds ?? 0, readAt: serverNow };
}

/** A run that has just entered the queue (its status event): its queue-wait clock starts at the event. */
export function waitingFromEvent(ev: IStatusEvent): IWaitingRun {
  return { id: ev.run_id, user: ev.user, status: ev.status, phase: ev.phase, name: ev.name, queue: ev.queue, waited: 0, readAt: ev.at };
}

/** How long the run has waited in our queue by `serverNow` (its clock goes on since the reading). */
export function waitedBy(r: IWaitingRun, serverNow: number): number {
  return r.waited + Math.max(0, serverNow - r.readAt);
}

/** My waiting runs that have waited at least the threshold by `serverNow` and were not announced yet. */
export function longWaiters(
  runs: Iterable<IWaitingRun>,
  me: string,
  serverNow: number,
  s: INotifySettings,
  announced: ReadonlySet<string>
): IWaitingRun[] {
  if (!s.longWait) {
    return [];
  }
  const limit = s.longWaitMinutes * 60;
  const out: IWaitingRun[] = [];
  for (const r of runs) {
    if (r.user === me && statusGroup(r) === 'waiting' && waitedBy(r, serverNow) >= limit && !announced.has(r.id)) {
      out.push(r);
    }
  }
  return out;
}

export interface IFailedRun {
  id: string;
  name: string;
  message: string;
}

/** Toasts that close by themselves (ms); failures stay longer but never for minutes. */
export const TOAST_MS: Record<INotice['type'], number> = { info: 5000, success: 5000, warning: 10000, error: 15000 };

/** Names shown in the one failure notice; the rest are counted. */
export const FAILED_NAMED = 3;

/**
 * The one notice for every failure since it was last dismissed: `Run a failed: why` for
 * one, `3 runs failed: a, b, c` for more (the newest first, the rest counted).
 */
export function failureSummary(failed: readonly IFailedRun[]): string {
  if (failed.length === 1) {
    const f = failed[0];
    return `Run ${f.name || f.id} failed${f.message ? `: ${f.message}` : ''}`;
  }
  const newest = [...failed].reverse();
  const names = newest.slice(0, FAILED_NAMED).map(f => f.name || f.id);
  const more = failed.length - names.length;
  return `${failed.length} runs failed: ${names.join(', ')}${more > 0 ? ` and ${more} more` : ''}`;
}
