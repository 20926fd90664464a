/**
 * View model of the Insights tab (pure; insights.ts draws it; the what-if form's is whatifmodel.ts).
 *
 * It reads `GET insights` through `normalizeInsights`, so the view depends on one shape here, not
 * on the wire's details; GPU-hours held against busy are read and worded in insightsgpu.ts.
 */

import { formatDuration, formatHours, formatPercent, humanReason } from './format';
import { BUSY_HEAD, IBusy, IIdleHolder, IProjectRow, busyCell, busyOf, idleHoldersOf, projectsOf } from './insightsgpu';

export { formatHours, formatPercent };

export type SinceChoice = '24h' | '7d' | '30d';
export const SINCE_CHOICES: Array<{ value: SinceChoice; label: string; bucket: string }> = [
  { value: '24h', label: 'Last 24 h', bucket: '1h' },
  { value: '7d', label: 'Last 7 days', bucket: '6h' },
  { value: '30d', label: 'Last 30 days', bucket: '1d' }
];

/** What the tab shows: one queue, one project, or everything the caller may see. */
export interface IScope {
  kind: 'all' | 'queue' | 'project';
  name: string;
}

export interface IScopeOption {
  value: string;
  label: string;
  scope: IScope;
}

/** Selector options from what the service listed for this caller (it already filters). */
export function scopeOptions(queues: string[], projects: string[]): IScopeOption[] {
  const opts: IScopeOption[] = [{ value: 'all:', label: 'All I can see', scope: { kind: 'all', name: '' } }];
  for (const q of [...queues].sort()) {
    opts.push({ value: `queue:${q}`, label: `Queue ${q}`, scope: { kind: 'queue', name: q } });
  }
  for (const p of [...projects].sort()) {
    opts.push({ value: `project:${p}`, label: `Project ${p}`, scope: { kind: 'project', name: p } });
  }
  return opts;
}

/** Query of `GET insights`: the range as a duration back from the server's own clock. */
export function insightsQuery(scope: IScope, since: SinceChoice): Record<string, string> {
  const c = SINCE_CHOICES.find(s => s.value === since) ?? SINCE_CHOICES[1];
  const q: Record<string, string> = { since: c.value, bucket: c.bucket };
  if (scope.kind === 'queue') {
    q.queue = scope.name;
  } else if (scope.kind === 'project') {
    q.project = scope.name;
  }
  return q;
}

export interface IPercentiles {
  p50: number | null;
  p90: number | null;
  p99: number | null;
  count: number;
}

export interface IQueueInsight {
  queue: string;
  queueWait: IPercentiles;
  startWait: IPercentiles;
  runs: number;
  /** Seconds waited per category (quota, concurrency, max_per_user, capacity, placement, other), largest first. */
  waitsByReason: Array<[string, number]>;
  goodput: number | null;
  gpuHours: number;
  /** Held GPU-hours that were measured, and busy (insightsgpu.ts); null: an older server's answer. */
  busy: IBusy | null;
  utilisation: number | null;
  /** Per flavor, in the order the queue tries them (empty: it has no flavors). */
  flavors: IFlavorInsight[];
}

/**
 * One flavor (kind of GPU): its runs' figures, against its quota (over the selected queues, or
 * one queue's) and, top-level only, this machine's devices of it. The service computes each.
 */
export interface IFlavorInsight {
  name: string;
  runs: number;
  queueWait: IPercentiles;
  gpuHours: number;
  busy: IBusy | null;
  /** GPUs of quota on this flavor; null: no selected queue offers it now. */
  quotaGpu: number | null;
  utilisation: number | null;
  /** This machine's GPUs of this flavor; null on a cluster (and on a queue's own flavors). */
  machineGpus: number | null;
  machineUtilisation: number | null;
}

/** One bucket of the series: start (s), GPU-hours used, the quota's GPU-hours allowance (null: no quota). */
export interface IUsage {
  start: number;
  used: number;
  allowance: number | null;
}

export interface ICount {
  key: string;
  count: number;
}

export interface IUserRow {
  user: string;
  project: string;
  runs: number;
  gpuHours: number;
  busy: IBusy | null;
}

export interface IInsightsView {
  since: number;
  until: number;
  queues: IQueueInsight[];
  usage: IUsage[];
  utilisation: number | null;
  machineUtilisation: number | null;
  /** GPU-hours held in all, and how many of them were measured and busy. */
  gpuHours: number;
  busy: IBusy | null;
  /** The utilisation (%) from which a sampled device counts as busy; null: an older server's answer. */
  busyPercent: number | null;
  projects: IProjectRow[];
  /** Who held the most idle GPU time (measured, not busy), most first, each with its worst runs. */
  idleHolders: IIdleHolder[];
  refusals: ICount[];
  failures: ICount[];
  topUsers: IUserRow[];
  /** Per flavor over the selected queues, in the platform config's order (empty: no flavors). */
  flavors: IFlavorInsight[];
}

type Loose = Record<string, any>;

function num(v: unknown): number | null {
  return typeof v === 'number' && Number.isFinite(v) ? v : null;
}

function pct(v: Loose | undefined | null): IPercentiles {
  return { p50: num(v?.p50), p90: num(v?.p90), p99: num(v?.p99), count: num(v?.n ?? v?.count) ?? 0 };
}

/** A `{key: n}` map or a `[{<name>, count}]` list, as counts, largest first. */
export function counts(v: unknown, keyField: string): ICount[] {
  let rows: ICount[] = [];
  if (Array.isArray(v)) {
    rows = v.map((r: Loose) => ({ key: String(r[keyField] ?? r.key ?? r.name ?? ''), count: num(r.count ?? r.value ?? r.seconds) ?? 0 }));
  } else if (v && typeof v === 'object') {
    rows = Object.entries(v as Loose).map(([key, n]) => ({ key, count: num(n) ?? 0 }));
  }
  return rows.sort((a, b) => b.count - a.count || a.key.localeCompare(b.key));
}

/** FlavorFigures / QueueFlavorFigures, in the order the service gave them. */
function flavorsOf(v: unknown): IFlavorInsight[] {
  return (Array.isArray(v) ? v : []).map((f: Loose) => ({
    name: String(f.name),
    runs: num(f.runs) ?? 0,
    queueWait: pct(f.queue_wait),
    gpuHours: num(f.gpu_hours) ?? 0,
    busy: busyOf(f),
    quotaGpu: num(f.quota_gpu),
    utilisation: num(f.utilisation),
    machineGpus: num(f.machine_gpus),
    machineUtilisation: num(f.machine_utilisation)
  }));
}

/** `GET insights` (service/schemas/insights.py Insights) as the views read it. */
export function normalizeInsights(raw: Loose): IInsightsView {
  const queues: IQueueInsight[] = (raw.queues ?? []).map((q: Loose) => ({
    queue: String(q.name ?? q.queue),
    runs: num(q.runs) ?? 0,
    queueWait: pct(q.queue_wait),
    startWait: pct(q.start_wait),
    waitsByReason: counts(q.waits_by_category, 'category')
      .filter(c => c.count > 0)
      .map(c => [c.key, c.count] as [string, number]),
    goodput: num(q.goodput),
    gpuHours: num(q.gpu_hours) ?? 0,
    busy: busyOf(q),
    utilisation: num(q.utilisation),
    flavors: flavorsOf(q.flavors)
  }));
  const total = (raw.total ?? {}) as Loose;
  return {
    since: num(raw.since) ?? 0,
    until: num(raw.until) ?? 0,
    queues,
    usage: (raw.series ?? []).map((b: Loose) => ({
      start: num(b.start) ?? 0,
      used: num(b.gpu_hours) ?? 0,
      allowance: num(b.allowance_gpu_hours)
    })),
    utilisation: num(total.utilisation),
    machineUtilisation: num(total.machine_utilisation),
    gpuHours: num(total.gpu_hours) ?? 0,
    busy: busyOf(total),
    busyPercent: num(raw.busy_percent),
    projects: projectsOf(raw.projects),
    idleHolders: idleHoldersOf(raw.idle_holders),
    refusals: counts(raw.refusals, 'rule'),
    failures: counts(total.failures ?? raw.failures, 'reason'),
    topUsers: (raw.top_users ?? []).map((u: Loose) => ({
      user: String(u.user),
      project: String(u.project ?? ''),
      runs: num(u.runs) ?? 0,
      gpuHours: num(u.gpu_hours) ?? 0,
      busy: busyOf(u)
    })),
    flavors: flavorsOf(raw.flavors)
  };
}

/** A per-flavor table: its header and one row of cell texts per flavor, in the given order. */
export interface IFlavorTable {
  head: string[];
  rows: string[][];
}

/**
 * The figures of each flavor as the tab shows a queue's (runs, GPU-hours held and busy, utilisation
 * of the quota, queue wait p90), with the quota's GPUs; the machine's GPUs and utilisation where the
 * service gave them (a local machine, top-level figures), else no such columns.
 */
export function flavorTable(flavors: IFlavorInsight[]): IFlavorTable {
  const machine = flavors.some(f => f.machineGpus !== null);
  const head = ['Flavor', 'Runs', 'GPU-hours', BUSY_HEAD, 'Quota GPUs', 'Utilisation'];
  if (machine) {
    head.push('Machine GPUs', 'Machine use');
  }
  head.push('Wait p90');
  const rows = flavors.map(f => {
    const row = [f.name, String(f.runs), formatHours(f.gpuHours), busyCell(f.busy), count(f.quotaGpu), formatPercent(f.utilisation)];
    if (machine) {
      row.push(count(f.machineGpus), formatPercent(f.machineUtilisation));
    }
    row.push(formatDuration(f.queueWait.p90));
    return row;
  });
  return { head, rows };
}

function count(v: number | null): string {
  return v === null ? '—' : String(v);
}

/** One horizontal bar: its label, text, and length as a fraction of the widest. */
export interface IBar {
  label: string;
  text: string;
  fraction: number;
}

export function bars(rows: Array<[string, number | null]>, fmt: (v: number | null) => string, max?: number): IBar[] {
  const top = max ?? Math.max(0, ...rows.map(([, v]) => v ?? 0));
  return rows.map(([label, v]) => ({ label, text: fmt(v), fraction: top > 0 && v !== null ? Math.min(1, v / top) : 0 }));
}

/** Queue wait and start wait percentiles of a queue, on one scale. */
export function waitBars(q: IQueueInsight): IBar[] {
  const rows: Array<[string, number | null]> = [
    ['queue wait p50', q.queueWait.p50],
    ['queue wait p90', q.queueWait.p90],
    ['queue wait p99', q.queueWait.p99],
    ['start wait p50', q.startWait.p50],
    ['start wait p90', q.startWait.p90],
    ['start wait p99', q.startWait.p99]
  ];
  return bars(rows, formatDuration);
}

export function reasonBars(q: IQueueInsight): IBar[] {
  return bars(
    q.waitsByReason.map(([r, s]) => [humanReason(r.replace(/_/g, ' ')), s]),
    formatDuration
  );
}

export function goodputBars(qs: IQueueInsight[]): IBar[] {
  return bars(
    qs.map(q => [q.queue, q.goodput]),
    formatPercent,
    1
  );
}

/** Two lines (used, allowance) on one scale in a `width` × `height` box; y grows downwards. */
export function usagePaths(
  usage: IUsage[],
  width: number,
  height: number
): { used: string; allowance: string; max: number } {
  if (!usage.length) {
    return { used: '', allowance: '', max: 0 };
  }
  const max = Math.max(0, ...usage.map(b => Math.max(b.used, b.allowance ?? 0)));
  const x0 = usage[0].start;
  const x1 = usage[usage.length - 1].start;
  const x = (t: number) => (x1 === x0 ? width / 2 : ((t - x0) / (x1 - x0)) * width);
  const y = (v: number) => (max === 0 ? height : height - (v / max) * height);
  const path = (vals: Array<number | null>) => {
    const parts: string[] = [];
    let pen = false;
    vals.forEach((v, i) => {
      if (v === null) {
        pen = false;
        return;
      }
      parts.push(`${pen ? 'L' : 'M'}${x(usage[i].start).toFixed(1)},${y(v).toFixed(1)}`);
      pen = true;
    });
    return parts.join('');
  };
  return { used: path(usage.map(b => b.used)), allowance: path(usage.map(b => b.allowance)), max };
}
