/** Formatting for people: durations, resources, sizes, reasons, metric values. */

import type { IResources } from '../api/types';

/** A duration for people: `0.4s`, `42s`, `4m 05s`, `2h 03m`, `3d 4h` (truncated); `—` when unknown. */
export function formatDuration(seconds: number | null | undefined): string {
  if (seconds === null || seconds === undefined || !Number.isFinite(seconds)) {
    return '—';
  }
  const s = Math.max(0, seconds);
  if (s < 1) {
    return `${(Math.floor(s * 10) / 10).toFixed(1)}s`;
  }
  if (s < 60) {
    return `${Math.floor(s)}s`;
  }
  const pad = (n: number) => String(n).padStart(2, '0');
  if (s < 3600) {
    return `${Math.floor(s / 60)}m ${pad(Math.floor(s % 60))}s`;
  }
  if (s < 86400) {
    return `${Math.floor(s / 3600)}h ${pad(Math.floor((s % 3600) / 60))}m`;
  }
  return `${Math.floor(s / 86400)}d ${Math.floor((s % 86400) / 3600)}h`;
}

export function formatGpus(gpu: number | null | undefined): string {
  const n = gpu ?? 0;
  return n === 1 ? '1 GPU' : `${n} GPUs`;
}

/** `1 GPU · 4 CPU · 16Gi` (what is set, in that order). */
export function formatResources(r: IResources | null | undefined): string {
  if (!r) {
    return 'nothing set';
  }
  const parts: string[] = [];
  if (r.gpu !== null && r.gpu !== undefined) {
    parts.push(formatGpus(r.gpu));
  }
  if (r.cpu !== null && r.cpu !== undefined && String(r.cpu) !== '0') {
    parts.push(`${r.cpu} CPU`);
  }
  if (r.memory !== null && r.memory !== undefined && String(r.memory) !== '0') {
    parts.push(`${r.memory} memory`);
  }
  return parts.join(' · ') || 'nothing set';
}

export function formatBytes(n: number): string {
  if (n < 1024) {
    return `${n} B`;
  }
  const units = ['KiB', 'MiB', 'GiB', 'TiB'];
  let v = n;
  let i = -1;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i += 1;
  }
  return `${v < 10 ? v.toFixed(1) : Math.round(v)} ${units[i]}`;
}

/** `QueueConcurrency` → `Queue concurrency`. */
export function humanReason(reason: string): string {
  const words = reason.replace(/([a-z0-9])([A-Z])/g, '$1 $2').toLowerCase();
  return words.charAt(0).toUpperCase() + words.slice(1);
}

export function ordinal(n: number): string {
  const tens = n % 100;
  const suffix =
    tens >= 11 && tens <= 13 ? 'th' : ({ 1: 'st', 2: 'nd', 3: 'rd' } as Record<number, string>)[n % 10] ?? 'th';
  return `${n}${suffix}`;
}

/** A metric value, short: 4 significant digits, exponent when tiny or huge. */
export function formatMetric(v: number | null): string {
  if (v === null) {
    return '—';
  }
  const a = Math.abs(v);
  if (a !== 0 && (a < 1e-3 || a >= 1e6)) {
    return v.toExponential(2);
  }
  return String(Number(v.toPrecision(4)));
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

/** GPU-hours as `gpuplat report` gives them: a small non-zero figure stays visible (0.0042, never 0.00). */
export function formatHours(v: number | null): string {
  if (v === null) {
    return '—';
  }
  if (v > 0 && v < 0.01) {
    return v < 0.0001 ? '<0.0001' : String(Number(v.toPrecision(2)));
  }
  return v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2);
}
