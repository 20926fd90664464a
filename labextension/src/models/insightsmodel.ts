/**
 * View model of the Insights tab (pure; insights.ts and whatif.ts draw it).
 *
 * It reads `GET insights` and `POST whatif` answers through `normalizeInsights` /
 * `normalizeWhatIf`, so the views depend on one shape here, not on the wire's details.
 */

import { formatDuration, humanReason } from './format';

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
}

export interface IInsightsView {
  since: number;
  until: number;
  queues: IQueueInsight[];
  usage: IUsage[];
  utilisation: number | null;
  machineUtilisation: number | null;
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
    refusals: counts(raw.refusals, 'rule'),
    failures: counts(total.failures ?? raw.failures, 'reason'),
    topUsers: (raw.top_users ?? []).map((u: Loose) => ({
      user: String(u.user),
      project: String(u.project ?? ''),
      runs: num(u.runs) ?? 0,
      gpuHours: num(u.gpu_hours) ?? 0
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
 * The figures of each flavor as the tab shows a queue's (runs, GPU-hours, utilisation of the
 * quota, queue wait p90), with the quota's GPUs; the machine's GPUs and utilisation where the
 * service gave them (a local machine, top-level figures), else no such columns.
 */
export function flavorTable(flavors: IFlavorInsight[]): IFlavorTable {
  const machine = flavors.some(f => f.machineGpus !== null);
  const head = ['Flavor', 'Runs', 'GPU-hours', 'Quota GPUs', 'Utilisation'];
  if (machine) {
    head.push('Machine GPUs', 'Machine use');
  }
  head.push('Wait p90');
  const rows = flavors.map(f => {
    const row = [f.name, String(f.runs), formatHours(f.gpuHours), count(f.quotaGpu), formatPercent(f.utilisation)];
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

/** A share as a percentage that keeps a small non-zero figure visible (0.083%, <0.001%, never 0.0%), as `gpuplat report`. */
export function formatPercent(v: number | null): string {
  if (v === null) {
    return '—';
  }
  const x = 100 * v;
  if (x === 0) {
    return '0%';
  }
  if (x >= 10) {
    return `${x.toFixed(0)}%`;
  }
  if (x >= 0.1) {
    return `${x.toFixed(1)}%`;
  }
  return x >= 0.001 ? `${Number(x.toPrecision(2))}%` : '<0.001%';
}

export function goodputBars(qs: IQueueInsight[]): IBar[] {
  return bars(
    qs.map(q => [q.queue, q.goodput]),
    formatPercent,
    1
  );
}

export function formatHours(v: number | null): string {
  if (v === null) {
    return '—';
  }
  return v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2);
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

// ---------------------------------------------------------------- what-if

/** Numeric queue settings the form may change; `quota_gpu` is sent as `quota: {gpu}`. */
export const WHATIF_FIELDS = ['concurrency', 'quota_gpu', 'priority', 'max_per_user'] as const;
export type WhatIfField = (typeof WHATIF_FIELDS)[number];
export const ORDERINGS = ['', 'best_effort_fifo', 'strict_fifo'];

export interface IWhatIfForm {
  queue: string;
  since: SinceChoice;
  values: Partial<Record<WhatIfField, string>>;
  ordering: string;
  /** A flavor's GPU quota in the queue, as `h100=4, a100=8` (sent as `flavors: {h100: {gpu: 4}}`). */
  flavors?: string;
}

/** `h100=4, a100=8` → `{h100: {gpu: 4}, a100: {gpu: 8}}`; the service names the flavors the queue offers. */
function flavorQuotas(text: string): { set?: Loose; error?: string } {
  const set: Loose = {};
  for (const item of text.split(/[\s,]+/).filter(Boolean)) {
    const m = /^([A-Za-z0-9][A-Za-z0-9_.-]*)=([0-9]+)$/.exec(item);
    if (!m) {
      return { error: `Flavor GPU quotas: give name=GPUs, e.g. h100=4, not "${item}".` };
    }
    set[m[1]] = { gpu: Number(m[2]) };
  }
  return { set };
}

/** `POST whatif` body from the form: only the fields set; a bad number is named, not sent. */
export function whatifBody(form: IWhatIfForm): { body?: Loose; error?: string } {
  if (!form.queue) {
    return { error: 'Choose a queue.' };
  }
  const set: Loose = {};
  for (const f of WHATIF_FIELDS) {
    const text = (form.values[f] ?? '').trim();
    if (!text) {
      continue;
    }
    const v = Number(text);
    if (!Number.isFinite(v) || (f !== 'priority' && (v < 0 || !Number.isInteger(v)))) {
      return { error: `${f} must be ${f === 'priority' ? 'a number' : 'a whole number ≥ 0'}, not "${text}".` };
    }
    if (f === 'quota_gpu') {
      set.quota = { gpu: v };
    } else {
      set[f] = v;
    }
  }
  if (form.ordering) {
    set.ordering = form.ordering;
  }
  const flavors = flavorQuotas(form.flavors ?? '');
  if (flavors.error) {
    return { error: flavors.error };
  }
  if (Object.keys(flavors.set ?? {}).length) {
    set.flavors = flavors.set;
  }
  // the service reads a duration back from its own clock; per-run rows are not shown here
  return { body: { since: form.since, changes: { [form.queue]: set }, queues: [form.queue], max_runs: 0 } };
}

export interface IWhatIfRow {
  label: string;
  observed: string;
  predicted: string;
  /** -1 better, 0 same, 1 worse (for colour). */
  change: number;
}

export interface IWhatIfView {
  rows: IWhatIfRow[];
  /** The settings replayed, as `concurrency 2 → 4` (only those that differ from the recorded ones). */
  settings: string[];
  assumptions: string[];
  /** The service's notes on the queue, e.g. which limit binds when the changed one does not. */
  notes: string[];
  /** The binding limit in the service's words, e.g. "the queue's h100 quota (flavors.h100)". */
  binding: string | null;
  runs: number | null;
}

/** The chosen queue's entry: the answer itself, or `queues[queue]` (a map or a list). */
function queueEntry(raw: Loose, queue: string): Loose {
  if (raw.observed || !raw.queues) {
    return raw;
  }
  const qs = raw.queues;
  if (Array.isArray(qs)) {
    return qs.find((q: Loose) => (q.queue ?? q.name) === queue) ?? qs[0] ?? {};
  }
  return qs[queue] ?? Object.values(qs)[0] ?? {};
}

/** A wait statistic of one side: `wait_p50_seconds` or `queue_wait.p50`. */
function wait(side: Loose, k: string): number | null {
  return num(side[`wait_${k}_seconds`]) ?? num(side.queue_wait?.[k]);
}

export function normalizeWhatIf(raw: Loose, queue = ''): IWhatIfView {
  const q = queueEntry(raw, queue);
  const obs = (q.observed ?? {}) as Loose;
  const pre = (q.predicted ?? {}) as Loose;
  const rows: IWhatIfRow[] = [];
  const add = (label: string, o: number | null, p: number | null, fmt: (v: number | null) => string, higherIsBetter = false) => {
    const change = o === null || p === null || o === p ? 0 : (p > o) !== higherIsBetter ? 1 : -1;
    rows.push({ label, observed: fmt(o), predicted: fmt(p), change });
  };
  for (const k of ['p50', 'p90', 'p99', 'mean'] as const) {
    add(`queue wait ${k}`, wait(obs, k), wait(pre, k), formatDuration);
  }
  add('GPU-hours', num(obs.gpu_hours), num(pre.gpu_hours), formatHours, true);
  add('utilisation', num(obs.utilisation ?? obs.utilization), num(pre.utilisation ?? pre.utilization), formatPercent, true);
  add('still waiting at end', num(obs.waiting_at_end), num(pre.waiting_at_end), v => (v === null ? '—' : String(v)));
  // per flavor of the queue, in its order: GPU-hours and the utilisation of the flavor's quota
  for (const f of (Array.isArray(q.flavors) ? q.flavors : []) as Loose[]) {
    const fo = (f.observed ?? {}) as Loose;
    const fp = (f.predicted ?? {}) as Loose;
    add(`${f.name} GPU-hours`, num(fo.gpu_hours), num(fp.gpu_hours), formatHours, true);
    add(`${f.name} utilisation`, num(fo.utilisation), num(fp.utilisation), formatPercent, true);
  }
  const assumptions = Array.isArray(raw.assumptions) ? raw.assumptions.map(String) : [];
  return {
    rows: rows.filter(r => r.observed !== '—' || r.predicted !== '—'),
    settings: settingChanges(q.observed_settings, q.settings),
    assumptions,
    notes: Array.isArray(q.notes) ? q.notes.map(String) : [],
    binding: typeof q.predicted_binding_text === 'string' ? q.predicted_binding_text : null,
    runs: num(q.runs)
  };
}

function settingText(v: unknown): string {
  if (v === null || v === undefined) {
    return 'no limit';
  }
  if (typeof v === 'object') {
    const parts = Object.entries(v as Loose).map(([k, x]) => `${x} ${k}`);
    return parts.length ? parts.join(', ') : 'no limit';
  }
  return String(v);
}

export function settingChanges(before: Loose | undefined, after: Loose | undefined): string[] {
  if (!before || !after) {
    return [];
  }
  const out: string[] = [];
  for (const k of Object.keys(after)) {
    const x = before[k];
    const y = after[k];
    if (k === 'flavors' && Array.isArray(x) && Array.isArray(y)) {
      // a flavor's quota, by its name: `h100 quota gpu 2 → 4`
      const was: Loose = {};
      for (const f of x as Loose[]) {
        was[f.name] = f.quota;
      }
      for (const f of y as Loose[]) {
        out.push(...settingChanges(was[f.name] ?? {}, f.quota ?? {}).map(c => `${f.name} quota ${c}`));
      }
      continue;
    }
    if (x && y && typeof x === 'object' && typeof y === 'object') {
      // a quota: name only the amounts that changed
      out.push(...settingChanges(x, y).map(c => `${k} ${c}`));
      continue;
    }
    const a = settingText(before[k]);
    const b = settingText(after[k]);
    if (a !== b) {
      out.push(`${k.replace(/_/g, ' ')} ${a} → ${b}`);
    }
  }
  return out;
}
