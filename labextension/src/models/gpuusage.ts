/**
 * A run's GPU use as the run view shows it (issue 27; pure). The server words it (`gpu_usage.text`,
 * `busy_text`, `memory_peak_text`, core/gpu_usage.py); this only picks what to show. Its GPU samples
 * are the run's `system/…` series, charted apart from the metrics the run logged itself.
 */

import type { IMetrics, IRunDetail } from '../api/types';

/** The platform's own series of a run (the server keeps a run's own metrics out of it). */
export const SYSTEM_PREFIX = 'system/';

export interface IGpuFact {
  key: 'busy' | 'memory_peak';
  label: string;
  value: string;
}

export interface IGpuView {
  measured: boolean;
  /** The server's one line: "GPU busy 73% of 2.1 h · …" or "GPU use not measured: <reason>". */
  text: string;
  /** Busy share and memory peak as the server wrote them; none where not measured. */
  facts: IGpuFact[];
}

/** What the "GPU use" section shows; null for a run that held no GPU (no section). */
export function gpuView(run: Pick<IRunDetail, 'gpu_usage'>): IGpuView | null {
  const u = run.gpu_usage;
  if (!u) {
    return null;
  }
  if (!u.measured) {
    return { measured: false, text: u.text, facts: [] };
  }
  const facts: IGpuFact[] = [];
  if (u.busy_text) {
    facts.push({ key: 'busy', label: 'GPU busy', value: u.busy_text });
  }
  if (u.memory_peak_text) {
    facts.push({ key: 'memory_peak', label: 'Memory peak', value: u.memory_peak_text });
  }
  return { measured: true, text: u.text, facts };
}

/** A run's curves split into the metrics it logged and the platform's GPU series. */
export function splitSystem(metrics: IMetrics): { own: IMetrics; system: IMetrics } {
  const own: IMetrics = {};
  const system: IMetrics = {};
  for (const [name, curve] of Object.entries(metrics)) {
    (name.startsWith(SYSTEM_PREFIX) ? system : own)[name] = curve;
  }
  return { own, system };
}

const GiB = 2 ** 30;

/** A GPU series as charted: memory in GiB (its unit on the axis), utilisation in %. */
export function gpuChartSeries(name: string, values: Array<number | null>): { label: string; values: Array<number | null> } {
  if (name.endsWith('/memory_bytes')) {
    return { label: `${name} (GiB)`, values: values.map(v => (v === null ? null : v / GiB)) };
  }
  return { label: name.endsWith('/util') ? `${name} (%)` : name, values };
}

/**
 * Whether the record's `gpu_usage` is older than the GPU series just read (more util samples than it
 * counted): a live run's words are then read again from the server, not worked out here.
 */
export function gpuStale(run: Pick<IRunDetail, 'gpu_usage'>, system: IMetrics): boolean {
  const u = run.gpu_usage;
  if (!u) {
    return false;
  }
  const samples = Object.entries(system)
    .filter(([name]) => name.endsWith('/util'))
    .reduce((n, [, c]) => n + c.count, 0);
  return samples !== (u.samples ?? 0);
}
