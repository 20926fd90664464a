/**
 * View-model logic of the sidebar: pure functions from API records to what is shown.
 *
 * No DOM and no JupyterLab imports, so it runs (and is unit-tested) in plain node.
 * Times are epoch seconds as the service records them; `now` is always passed in.
 * The smaller topics live in their own modules and are re-exported here.
 */

import type { IExplain, IPreset, IQueue, IRun } from '../api/types';
import { formatDuration, formatGpus, formatResources, humanReason } from './format';
import { Phase, STATUS_GROUPS, StatusGroup, isFinal, statusGroup, tickingText } from './lifecycle';
import { pendingCount, waitingOf, waitingText } from './waiting';
import { estimateLine, estimateView } from './estimates';

export * from './format';
export * from './lifecycle';
export * from './provenance';
export * from './notices';
export * from './chart';
export * from './estimates';
export * from './submitmodel';
export * from './waiting';

// ---- resources, presets, queues -------------------------------------------------------------

export interface IPresetView {
  name: string;
  description: string;
  kind: string;
  requests: string;
  places: string;
  queue: string;
  limits: string;
  locked: string;
  session: boolean;
}

/** One preset card: what it requests and where it places work. */
export function presetView(p: IPreset): IPresetView {
  const place: string[] = [];
  const pl = p.placement;
  if (pl?.gpu_type) {
    place.push(`GPU type ${pl.gpu_type}`);
  }
  if (pl?.node_selector) {
    const sel = Object.entries(pl.node_selector)
      .filter(([, v]) => v !== null)
      .map(([k, v]) => `${k}=${v}`);
    if (sel.length) {
      place.push(`nodes ${sel.join(', ')}`);
    }
  }
  if (pl?.tolerations?.length) {
    place.push(`tolerates ${pl.tolerations.map(t => String(t.key ?? '*')).join(', ')}`);
  }
  if (pl?.affinity && Object.keys(pl.affinity).length) {
    place.push('custom affinity');
  }
  if (p.image) {
    place.push(`image ${p.image}`);
  }
  const limits: string[] = [];
  if (p.termination?.timeout_seconds) {
    limits.push(`timeout ${formatDuration(p.termination.timeout_seconds)}`);
  }
  if (p.termination?.idle_seconds) {
    limits.push(`idle stop ${formatDuration(p.termination.idle_seconds)}`);
  }
  return {
    name: p.name,
    description: p.description,
    kind: p.kind ?? 'job',
    requests: formatResources(p.resources),
    places: place.join(' · ') || 'anywhere the queue dispatches',
    queue: p.queue ? `queue ${p.queue}` : "the project's queue",
    limits: limits.join(' · '),
    locked: p.locked.length ? `locked: ${p.locked.join(', ')}` : '',
    session: p.kind === 'session'
  };
}

export interface IQueueView {
  name: string;
  paused: boolean;
  priority: number;
  gpuText: string;
  /** 0..1 of the GPU quota in use; null without a GPU quota. */
  gpuFraction: number | null;
  runsText: string;
  runsFraction: number | null;
  pendingText: string;
  waitText: string;
  oldestWaitText: string;
  /** Its GPU quota per flavor, in the order the queue tries them (empty: no flavors). */
  flavors: { name: string; text: string; fraction: number | null }[];
}

function ratio(used: number, limit: number | null | undefined): number | null {
  if (limit === null || limit === undefined) {
    return null;
  }
  return limit <= 0 ? 1 : Math.min(1, used / limit);
}

/**
 * A queue's row: GPUs used/quota, runs dispatched/concurrency, pending count, what the
 * head of the queue waits for, and the longest wait among the pending runs we can see.
 */
export function queueView(q: IQueue, longestWait: number | null): IQueueView {
  const gpu = Number(q.usage.gpu ?? 0);
  const quota = q.quota.gpu ?? null;
  const runs = q.usage.runs;
  const head = q.head_wait;
  const pending = pendingCount(q);
  return {
    name: q.name,
    paused: q.paused,
    priority: q.priority,
    gpuText: quota === null ? `${gpu} GPUs (no quota)` : `${gpu}/${quota} GPUs`,
    gpuFraction: ratio(gpu, quota),
    runsText:
      q.concurrency === null ? `${runs} runs dispatched` : `${runs}/${q.concurrency} runs dispatched`,
    runsFraction: ratio(runs, q.concurrency),
    pendingText: `${pending} pending`,
    waitText: q.paused ? 'paused: nothing is dispatched' : head ? head.message : '',
    oldestWaitText:
      longestWait === null || pending === 0 ? '' : `longest wait ${formatDuration(longestWait)}`,
    flavors: (q.flavors ?? []).map(f => {
      const used = Number(f.usage.gpu ?? 0);
      const limit = f.quota.gpu ?? null;
      const free = f.free_gpus === null || f.free_gpus === undefined ? '' : ` · ${f.free_gpus} free here`;
      return {
        name: f.name,
        text: limit === null ? `${used} GPUs${free}` : `${used}/${limit} GPUs${free}`,
        fraction: ratio(used, limit)
      };
    })
  };
}

// ---- run rows ---------------------------------------------------------------------------------

export interface IRunRowView {
  id: string;
  name: string;
  status: string;
  group: StatusGroup;
  queue: string;
  presets: string;
  gpus: string;
  phaseText: string;
  /** Why a waiting run waits (reason and numbers), '' when not waiting or not known. */
  why: string;
  /** When it is expected to start (the service's words) or `start unknown`; '' when nothing is said. */
  eta: string;
  /** What the estimate rests on, or why there is none. */
  etaWhy: string;
  title: string;
}

/**
 * A list row: status, queue, preset, GPUs and its clock. `now` is the server's time (for "ended
 * 5m ago"); `elapsed` the seconds since the record was read, which the ticking clock goes on by.
 */
export function runRowView(run: IRun, now: number, elapsed = 0): IRunRowView {
  const group = statusGroup(run);
  let phaseText: string;
  if (isFinal(run)) {
    // The service's run time (a preempted run's waits again are start wait, not run time).
    const ran = run.clocks.run_seconds;
    const ago = run.finished_at !== null ? `${formatDuration(now - run.finished_at)} ago` : '';
    phaseText = ran !== null ? `ran ${formatDuration(ran)}${ago ? `, ${ago}` : ''}` : ago;
  } else {
    phaseText = tickingText(run, elapsed);
  }
  const w = waitingOf(run);
  const why = w ? waitingText(w) : '';
  const eta = estimateView(run);
  const etaLine = estimateLine(run);
  return {
    id: run.id,
    name: run.name || run.id,
    status: run.status,
    group,
    queue: run.queue,
    // a run listed from its first event has no presets/resources until it is fetched
    presets: presetsText(run),
    gpus: run.resources?.gpu === undefined ? '… GPUs' : formatGpus(run.resources.gpu),
    phaseText,
    why,
    eta: eta.text,
    etaWhy: eta.why,
    title: `${run.id} · ${run.status} (${run.reason}): ${why || run.message}${etaLine ? ` · ${etaLine}` : ''}`
  };
}

/** The presets that made the run's spec (project default presets included), `no preset` when none did. */
export function presetsText(run: Pick<IRun, 'presets' | 'presets_applied'>): string {
  const applied = run.presets_applied ?? run.presets;
  return applied === undefined ? '…' : applied.length ? applied.join(' + ') : 'no preset';
}

// ---- filters -------------------------------------------------------------------------------

export interface IRunFilter {
  project: string;
  queue: string;
  group: StatusGroup | '';
  search: string;
}

export const EMPTY_FILTER: IRunFilter = { project: '', queue: '', group: '', search: '' };

/** Whether a run (or a status event about it) passes the filter, as the service would. */
export function matchesFilter(
  r: { project: string; queue: string; status: string; phase: Phase; name: string | null },
  f: IRunFilter
): boolean {
  if (f.project && r.project !== f.project) {
    return false;
  }
  if (f.queue && r.queue !== f.queue) {
    return false;
  }
  if (f.group && statusGroup(r) !== f.group) {
    return false;
  }
  if (f.search && !(r.name ?? '').includes(f.search)) {
    return false;
  }
  return true;
}

/** The `GET runs` query for a filter (the service filters; live events are checked here). */
export function filterQuery(f: IRunFilter): Record<string, string> {
  const q: Record<string, string> = {};
  if (f.project) {
    q.project = f.project;
  }
  if (f.queue) {
    q.queue = f.queue;
  }
  if (f.group) {
    const g = STATUS_GROUPS.find(x => x.group === f.group);
    if (g) {
      Object.assign(q, g.query);
    }
  }
  if (f.search) {
    q.q = f.search;
  }
  return q;
}

// ---- explain -------------------------------------------------------------------------------

export interface IExplainView {
  side: 'dispatch' | 'execution' | 'running' | 'done';
  /** The service's words for the layer (`layer_text`). */
  layerLabel: string;
  headline: string;
  message: string;
  /** The service's number lines (`number_lines`: numbers, position, queue), as the CLI prints them. */
  numbers: string[];
  blockers: string[];
  /** The run id each blocker line names (null: another project's run, counted not named). */
  blockerIds: Array<string | null>;
  whoCanAct: string[];
  details: string[];
  /**
   * Per flavor the run may use, in its queue's order, why it does not start there (`flavors`);
   * empty where that adds nothing to the message (one flavor, or a limit of the whole queue).
   */
  flavors: string[];
}

// Only which colour the layer's badge takes; its words are the service's `layer_text`.
const SIDE_OF_LAYER: Record<string, IExplainView['side']> = {
  queue: 'dispatch',
  executor: 'execution',
  running: 'running'
};

/** The explain answer as lines: layer, reason, the service's number lines, blockers, who can act. */
export function explainView(ex: IExplain): IExplainView {
  const side = SIDE_OF_LAYER[ex.layer] ?? 'done';
  const blockers = ex.blockers.map(b => {
    const what = b.id ? `${b.id}${b.name ? ` (${b.name}` + (b.user ? `, ${b.user})` : ')') : ''}` : `a ${b.project} run`;
    const dev = b.devices && b.devices.length ? ` on GPU ${b.devices.join(',')}` : '';
    return `${what}: ${b.status}, ${formatGpus(b.gpu)}${dev}`;
  });
  const details: string[] = [];
  for (const [k, v] of Object.entries(ex.details ?? {})) {
    if (k === 'layer' || k === 'who_can_act' || v === null || typeof v === 'object') {
      continue;
    }
    details.push(`${k}: ${String(v)}`);
  }
  const perFlavor = ex.flavors ?? [];
  const flavors = perFlavor.some(f => f.message !== ex.message)
    ? perFlavor.map(f => (f.message.startsWith(`${f.name}: `) ? f.message : `${f.name}: ${f.message}`))
    : [];
  return {
    side,
    layerLabel: ex.layer_text,
    headline: humanReason(ex.reason || ex.status),
    message: ex.message,
    numbers: ex.number_lines.map(n => `${n.label}: ${n.text}`),
    blockers,
    blockerIds: ex.blockers.map(b => b.id ?? null),
    whoCanAct: ex.who_can_act.map(w => `${w.who} can ${w.can}`),
    details,
    flavors
  };
}
