/**
 * View model of the Insights tab's what-if form (pure; whatif.ts draws it): the `POST whatif` body
 * from the form (`whatifBody`) and its answer as the form shows it (`normalizeWhatIf`).
 */

import { formatDuration, formatHours, formatPercent } from './format';
import type { SinceChoice } from './insightsmodel';

type Loose = Record<string, any>;

function num(v: unknown): number | null {
  return typeof v === 'number' && Number.isFinite(v) ? v : null;
}

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
