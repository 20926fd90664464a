/**
 * Sweeps as the sidebar shows them: a parent's child counts and progress, the list rows
 * with expanded sweeps' children under them, the concurrency editor's input, who may
 * change a sweep, and the per-frame re-read of a sweep whose children changed.
 *
 * Pure (no DOM, no network): the scheduler and the fetch are passed in.
 */

import type { IRun } from './types';
import { isFinal } from './lifecycle';

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
  const ended = Object.entries(by)
    .filter(([s]) => isFinal(s))
    .reduce((a, [, n]) => a + n, 0);
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

/** Who may stop a run, and so change a sweep: its owner (a member or more), project admins, platform admins. */
export function mayStop(
  run: { user: string },
  user: string,
  role: 'viewer' | 'member' | 'admin' | null | undefined,
  platformAdmin: boolean
): boolean {
  if (platformAdmin || role === 'admin') {
    return true;
  }
  return run.user === user && role === 'member';
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
