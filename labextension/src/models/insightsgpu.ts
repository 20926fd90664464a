/**
 * GPU-hours held against busy in the Insights tab (issue 27; pure). The server counts them
 * (core/gpu_insights.py: `gpu_hours_measured`, `gpu_hours_busy`, `busy_fraction`, `busy_percent`,
 * `idle_holders`); this only formats what it gave, never a share of its own: null busy figures
 * read "not measured", never 0%.
 */

import { formatHours, formatPercent } from './format';

type Loose = Record<string, any>;

function num(v: unknown): number | null {
  return typeof v === 'number' && Number.isFinite(v) ? v : null;
}

/** One view's busy figures as the server gave them (busy and fraction null: nothing was measured). */
export interface IBusy {
  measured: number;
  busy: number | null;
  fraction: number | null;
}

/** A view's busy figures; null from an older server's answer that has none (then nothing is shown). */
export function busyOf(v: Loose | null | undefined): IBusy | null {
  if (!v || !('gpu_hours_measured' in v)) {
    return null;
  }
  return { measured: num(v.gpu_hours_measured) ?? 0, busy: num(v.gpu_hours_busy), fraction: num(v.busy_fraction) };
}

function measured(b: IBusy | null): b is IBusy & { busy: number; fraction: number } {
  return b !== null && b.busy !== null && b.fraction !== null;
}

/** "busy 0.50 of 2.00 measured GPU-hours (25%)", or "GPU use not measured"; '' without figures. */
export function busyText(b: IBusy | null): string {
  if (b === null) {
    return '';
  }
  if (!measured(b)) {
    return 'GPU use not measured';
  }
  return `busy ${formatHours(b.busy)} of ${formatHours(b.measured)} measured GPU-hours (${formatPercent(b.fraction)})`;
}

/** The same in a table's cell: "0.50 of 2.00 (25%)" or "not measured". */
export function busyCell(b: IBusy | null): string {
  if (b === null) {
    return '—';
  }
  return measured(b) ? `${formatHours(b.busy)} of ${formatHours(b.measured)} (${formatPercent(b.fraction)})` : 'not measured';
}

export const BUSY_HEAD = 'Busy of measured GPU-h';

/** What busy means, from the answer's `busy_percent`: "util ≥ 5%" (null: the answer has none). */
export function busyThreshold(busyPercent: number | null): string | null {
  return busyPercent === null ? null : `util ≥ ${busyPercent}%`;
}

/** One project's GPU-hours held and busy (`projects`). */
export interface IProjectRow {
  project: string;
  runs: number;
  gpuHours: number;
  busy: IBusy | null;
}

export function projectsOf(v: unknown): IProjectRow[] {
  return (Array.isArray(v) ? v : []).map((p: Loose) => ({
    project: String(p.project),
    runs: num(p.runs) ?? 0,
    gpuHours: num(p.gpu_hours) ?? 0,
    busy: busyOf(p)
  }));
}

/** One of a holder's worst runs (`idle_holders[].worst_runs[]`). */
export interface IIdleRun {
  id: string;
  user: string;
  project: string;
  queue: string;
  gpuHours: number;
  idle: number;
  busy: IBusy | null;
}

/** A (project, user) holding idle GPU time, in the server's order (most idle first). */
export interface IIdleHolder {
  project: string;
  user: string;
  gpuHours: number;
  idle: number;
  measuredRuns: number;
  busy: IBusy | null;
  worstRuns: IIdleRun[];
}

export function idleHoldersOf(v: unknown): IIdleHolder[] {
  return (Array.isArray(v) ? v : []).map((h: Loose) => ({
    project: String(h.project),
    user: String(h.user),
    gpuHours: num(h.gpu_hours) ?? 0,
    idle: num(h.gpu_hours_idle) ?? 0,
    measuredRuns: num(h.measured_runs) ?? 0,
    busy: busyOf(h),
    worstRuns: (Array.isArray(h.worst_runs) ? h.worst_runs : []).map((r: Loose) => ({
      id: String(r.id),
      user: String(r.user),
      project: String(r.project),
      queue: String(r.queue),
      gpuHours: num(r.gpu_hours) ?? 0,
      idle: num(r.gpu_hours_idle) ?? 0,
      busy: busyOf(r)
    }))
  }));
}

function idleOf(idle: number, b: IBusy | null): string {
  const of = b ? ` of ${formatHours(b.measured)} measured` : '';
  const busy = b && b.fraction !== null ? ` (busy ${formatPercent(b.fraction)})` : '';
  return `${formatHours(idle)} GPU-hours idle${of}${busy}`;
}

/** "alice (team-a): 0.75 GPU-hours idle of 1.00 measured (busy 25%) · 2 measured runs". */
export function idleHolderText(h: IIdleHolder): string {
  const runs = h.measuredRuns === 1 ? '1 measured run' : `${h.measuredRuns} measured runs`;
  return `${h.user} (${h.project}): ${idleOf(h.idle, h.busy)} · ${runs}`;
}

/** After the run's id: " · 0.75 GPU-hours idle of 1.00 measured (busy 25%) · 1.00 held on team-a-train". */
export function idleRunText(r: IIdleRun): string {
  return ` · ${idleOf(r.idle, r.busy)} · ${formatHours(r.gpuHours)} held on ${r.queue}`;
}

/** The idle list's title, with the threshold the answer gave. */
export function idleTitle(busyPercent: number | null): string {
  return busyPercent === null ? 'Idle GPU time (measured, not busy)' : `Idle GPU time (measured, util < ${busyPercent}%)`;
}
