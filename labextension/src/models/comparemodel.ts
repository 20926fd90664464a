/** What the Compare tab shows, computed from `GET compare` (pure; comparetab.ts draws it). */

import type { components } from '../api/api.gen';
import type { ICompare } from '../api/types';

export type { ICompare };
export type ICompareRun = components['schemas']['CompareRun'];

export function showValue(v: unknown): string {
  if (v === null || v === undefined) {
    return '—';
  }
  if (typeof v === 'number') {
    return Number.isInteger(v) ? String(v) : v.toPrecision(4).replace(/\.?0+$/, '');
  }
  return typeof v === 'string' ? v : JSON.stringify(v);
}

function isNumber(v: unknown): v is number {
  return typeof v === 'number' && Number.isFinite(v);
}

export interface IDelta {
  text: string;
  /** 'good' / 'bad' when the metric has a direction, else 'neutral'. */
  tone: 'good' | 'bad' | 'neutral';
}

/** `Δ +0.02, +3.1%` against the baseline; null when either is not a number or they are equal. */
export function delta(v: unknown, base: unknown, lowerBetter?: boolean): IDelta | null {
  if (!isNumber(v) || !isNumber(base) || v === base) {
    return null;
  }
  const d = v - base;
  const sign = d > 0 ? '+' : '';
  const rel = base ? `, ${d / Math.abs(base) > 0 ? '+' : ''}${((d / Math.abs(base)) * 100).toFixed(1)}%` : '';
  const tone = lowerBetter === undefined ? 'neutral' : (d < 0) === lowerBetter ? 'good' : 'bad';
  return { text: `Δ ${sign}${Number(d.toPrecision(4))}${rel}`, tone };
}

/**
 * The metrics in the order their charts are drawn: the server's default (the one most runs logged)
 * first, then by how many runs logged each (the server's counts), by name among equals.
 */
export function chartOrder(data: ICompare): string[] {
  const runs = data.metric_runs ?? {};
  const rank = (m: string) => (m === data.default_metric ? Infinity : runs[m] ?? 0);
  return [...data.metrics].sort((a, b) => rank(b) - rank(a) || (a < b ? -1 : a > b ? 1 : 0));
}

/** The run's label in the legend: its name (or id) and the params that differ between the runs. */
export function legendLabel(run: ICompareRun, differ: string[]): { name: string; params: string } {
  const params = differ
    .filter(k => k in (run.params ?? {}))
    .map(k => `${k}=${showValue(run.params[k])}`)
    .join(', ');
  return { name: run.name || run.id, params };
}

export interface ICompareRow {
  section: string;
  label: string;
  cells: Array<{ text: string; delta: IDelta | null }>;
  differ: boolean;
  /** Code that differs: the server's unified diff against the first run, shown once behind "code differs". */
  diff?: string;
}

/**
 * The table: run facts, GPU use, params, resolved-config differences, metrics last and best, each
 * against the baseline. GPU use (busy share, memory peak) is the server's rows, shown as worded.
 */
export function compareRows(data: ICompare, baseline: string): ICompareRow[] {
  const runs = data.runs;
  const base = runs.find(r => r.id === baseline) ?? runs[0];
  const rows: ICompareRow[] = [];
  // the flavor (kind of GPU) a run ran on, where any did: runs on an H100 and an A100 differ in speed
  const keys = runs.some(r => r.flavor) ? (['project', 'user', 'queue', 'flavor', 'status'] as const) : (['project', 'user', 'queue', 'status'] as const);
  for (const key of keys) {
    const values = runs.map(r => String(r[key] ?? '—'));
    rows.push({ section: 'run', label: key, cells: values.map(text => ({ text, delta: null })), differ: new Set(values).size > 1 });
  }
  for (const g of data.gpu ?? []) {
    const values = runs.map(r => g.values[r.id] ?? '—');
    rows.push({ section: 'GPU use', label: g.label, cells: values.map(text => ({ text, delta: null })), differ: new Set(values).size > 1 });
  }
  const differ = new Set(data.params.differ);
  for (const key of data.params.keys) {
    rows.push({
      section: 'params',
      label: key,
      cells: runs.map(r => ({
        text: showValue(r.params[key]),
        delta: r.id === base.id ? null : delta(r.params[key], base.params[key])
      })),
      differ: differ.has(key)
    });
  }
  for (const d of data.config.differ) {
    rows.push({
      section: 'resolved config: differences',
      label: d.path,
      cells: runs.map(r => ({ text: showValue(d.values[r.id]), delta: null })),
      differ: true,
      diff: d.diff ?? undefined
    });
  }
  for (const m of data.metrics) {
    const lower = data.direction[m] === 'min'; // the service's answer (core/compare.py)
    const bs = base.metrics[m];
    for (const kind of ['last', 'best'] as const) {
      const pick = (s: ICompareRun['metrics'][string] | undefined) =>
        !s ? null : kind === 'last' ? s.last ?? null : (lower ? s.min : s.max) ?? null;
      const values = runs.map(r => pick(r.metrics[m]));
      rows.push({
        section: 'metrics: last and best (min for losses/errors, else max)',
        label: `${m} (${kind})`,
        cells: runs.map((r, i) => ({
          text: showValue(values[i]),
          delta: r.id === base.id ? null : delta(values[i], pick(bs), lower)
        })),
        differ: new Set(values.map(v => showValue(v))).size > 1
      });
    }
  }
  return rows;
}
