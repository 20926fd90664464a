/**
 * Sweeps as the sidebar shows them: a parent's child counts and progress, the list rows
 * with expanded sweeps' children under them, the concurrency editor's input, who may
 * change a sweep, and the per-frame re-read of a sweep whose children changed.
 *
 * Pure (no DOM, no network): the scheduler and the fetch are passed in.
 */

import type { IRun, ISweepPoint } from '../api/types';

/** At most this many children dispatched at once (the engine's MAX_CONCURRENCY). */
export const MAX_CONCURRENCY = 10_000;

// The order counts are shown in: what moves first, then what has ended.
const COUNT_ORDER = ['running', 'stopping', 'starting', 'dispatched', 'queued', 'created', 'succeeded', 'failed', 'stopped'];

export interface ISweepView {
  /** e.g. "2 running · 10 queued" */
  countsText: string;
  ended: number;
  total: number;
  /** ended / total, 0..1 */
  fraction: number;
  /** e.g. "3/12 ended" */
  progressText: string;
  /** e.g. "at most 2 at once" or "paused" */
  concurrencyText: string;
}

export function isSweep(run: { kind?: string | null }): boolean {
  return run.kind === 'sweep';
}

/** A sweep's row and header: counts by status, ended/total; null for other runs. */
export function sweepView(run: IRun): ISweepView | null {
  if (!isSweep(run)) {
    return null;
  }
  const by = run.children?.by_status ?? {};
  const total = run.children?.total ?? Object.values(by).reduce((a, b) => a + b, 0);
  const known = [...COUNT_ORDER, ...Object.keys(by).filter(s => !COUNT_ORDER.includes(s)).sort()];
  const parts = known.filter(s => by[s]).map(s => `${by[s]} ${s}`);
  const ended = run.children?.ended ?? 0;
  const c = run.concurrency;
  const gate = c === null || c === undefined ? '' : `at most ${c} at once`;
  return {
    countsText: parts.join(' · ') || (run.children ? 'no children' : '…'),
    ended,
    total,
    fraction: total > 0 ? Math.min(1, ended / total) : 0,
    progressText: `${ended}/${total} ended`,
    concurrencyText: run.paused ? `paused${gate ? ` (${gate})` : ''}` : gate
  };
}

/** A child's params in one line, in their order: "lr=0.1 · batch=32". */
export function paramsText(params: Record<string, unknown> | null | undefined): string {
  if (!params) {
    return '';
  }
  return Object.entries(params)
    .map(([k, v]) => `${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`)
    .join(' · ');
}

export type ParsedConcurrency = { value: number; error?: undefined } | { value?: undefined; error: string };

/** The concurrency editor's text: a whole number from 1 to MAX_CONCURRENCY. */
export function parseConcurrency(text: string): ParsedConcurrency {
  const t = text.trim();
  if (!/^\d+$/.test(t)) {
    return { error: `concurrency must be a whole number from 1 to ${MAX_CONCURRENCY}` };
  }
  const value = Number(t);
  if (value < 1 || value > MAX_CONCURRENCY) {
    return { error: `concurrency must be between 1 and ${MAX_CONCURRENCY}, got ${value}` };
  }
  return { value };
}

/** One row of the runs list: a top-level run (depth 0) or an expanded sweep's child (depth 1). */
export interface IListRow {
  run: IRun;
  depth: 0 | 1;
}

/** The list's rows: each top-level run, and under each expanded sweep its children. */
export function flattenRows(top: readonly IRun[], expanded: ReadonlyMap<string, readonly IRun[]>): IListRow[] {
  const rows: IListRow[] = [];
  for (const run of top) {
    rows.push({ run, depth: 0 });
    const children = expanded.get(run.id);
    if (children) {
      for (const child of children) {
        rows.push({ run: child, depth: 1 });
      }
    }
  }
  return rows;
}

/**
 * Re-read sweeps whose children changed: at most one request per sweep per frame, and
 * never two at once for one sweep (a change during a read asks for one more read after it).
 */
export class SweepRereader {
  constructor(
    private _read: (id: string) => Promise<void>,
    private _schedule: (cb: () => void) => void
  ) {}

  /** Ask for a re-read of this sweep (many asks in one frame cost one read). */
  request(id: string): void {
    if (this._inFlight.has(id)) {
      this._again.add(id);
      return;
    }
    this._wanted.add(id);
    if (!this._scheduled) {
      this._scheduled = true;
      this._schedule(() => this._flush());
    }
  }

  get inFlight(): number {
    return this._inFlight.size;
  }

  private _flush(): void {
    this._scheduled = false;
    const ids = [...this._wanted];
    this._wanted.clear();
    for (const id of ids) {
      this._inFlight.add(id);
      void this._read(id)
        .catch(() => undefined)
        .finally(() => {
          this._inFlight.delete(id);
          if (this._again.delete(id)) {
            this.request(id);
          }
        });
    }
  }

  private _wanted = new Set<string>();
  private _again = new Set<string>();
  private _inFlight = new Set<string>();
  private _scheduled = false;
}

// ---- the detail's params-vs-metric chart ------------------------------------------------------

/** One child as `GET runs/{id}/compare` lists it (declared with the service's answers). */
export type { ISweepPoint };

export interface IScatterDot {
  id: string;
  cx: number;
  cy: number;
  best: boolean;
  title: string;
}

export interface IScatter {
  dots: IScatterDot[];
  /** The x axis's ends (or its categories), as text. */
  xMin: string;
  xMax: string;
  log: boolean;
  yMin: string;
  yMax: string;
  /** Children without a value yet (not drawn). */
  missing: number;
}

const fmt = (v: number) => (Number.isInteger(v) ? String(v) : v.toPrecision(3));

/**
 * Children as dots of `param` (x) against the objective's value (y grows down, as in SVG),
 * in a `width` x `height` box. Numbers scale linearly, or by log when they span 100x or more
 * (a loguniform learning rate); other values are categories, evenly spaced in first-seen order.
 */
export function scatterGeometry(
  points: readonly ISweepPoint[],
  param: string,
  best: string | null,
  width: number,
  height: number,
  pad = 6
): IScatter {
  const drawn = points.filter(p => p.value !== null && Number.isFinite(p.value) && param in p.params);
  const xs = drawn.map(p => p.params[param]);
  const numeric = xs.every(x => typeof x === 'number');
  const nums = numeric ? (xs as number[]) : [];
  const lo = Math.min(...nums);
  const hi = Math.max(...nums);
  const log = numeric && nums.length > 1 && lo > 0 && hi / lo >= 100;
  const cats = numeric ? [] : [...new Set(xs.map(x => String(x)))];
  const fx = (x: unknown): number => {
    if (!numeric) {
      return cats.length < 2 ? 0.5 : cats.indexOf(String(x)) / (cats.length - 1);
    }
    const [a, b, v] = log ? [Math.log(lo), Math.log(hi), Math.log(x as number)] : [lo, hi, x as number];
    return b === a ? 0.5 : (v - a) / (b - a);
  };
  const ys = drawn.map(p => p.value as number);
  const ylo = Math.min(...ys);
  const yhi = Math.max(...ys);
  const fy = (y: number) => (yhi === ylo ? 0.5 : (y - ylo) / (yhi - ylo));
  const w = width - 2 * pad;
  const hgt = height - 2 * pad;
  return {
    dots: drawn.map(p => ({
      id: p.id,
      cx: pad + fx(p.params[param]) * w,
      cy: pad + (1 - fy(p.value as number)) * hgt,
      best: p.id === best,
      title: `${p.id}: ${paramsText(p.params)} → ${fmt(p.value as number)}`
    })),
    xMin: drawn.length ? (numeric ? fmt(lo) : cats[0]) : '',
    xMax: drawn.length ? (numeric ? fmt(hi) : cats[cats.length - 1]) : '',
    log,
    yMin: drawn.length ? fmt(ylo) : '',
    yMax: drawn.length ? fmt(yhi) : '',
    missing: points.length - drawn.length
  };
}
