/** Geometry of a metric's line chart (pure; metricsview.ts draws it). */

export interface IChartGeometry {
  /** SVG path data; a null value breaks the line. */
  d: string;
  min: number | null;
  max: number | null;
  last: number | null;
  firstStep: number | null;
  lastStep: number | null;
}

/** A curve scaled into a `width` × `height` box (y grows downwards, as in SVG). */
export function chartGeometry(
  steps: number[],
  values: Array<number | null>,
  width: number,
  height: number
): IChartGeometry {
  let min = Infinity;
  let max = -Infinity;
  let last: number | null = null;
  for (const v of values) {
    if (v !== null && Number.isFinite(v)) {
      min = Math.min(min, v);
      max = Math.max(max, v);
      last = v;
    }
  }
  if (!steps.length || last === null) {
    return { d: '', min: null, max: null, last: null, firstStep: steps[0] ?? null, lastStep: steps[steps.length - 1] ?? null };
  }
  const s0 = steps[0];
  const s1 = steps[steps.length - 1];
  const sx = s1 === s0 ? 0 : width / (s1 - s0);
  const sy = max === min ? 0 : height / (max - min);
  const parts: string[] = [];
  let pen = false;
  for (let i = 0; i < steps.length; i++) {
    const v = values[i];
    if (v === null || !Number.isFinite(v)) {
      pen = false;
      continue;
    }
    const x = s1 === s0 ? width / 2 : (steps[i] - s0) * sx;
    const y = max === min ? height / 2 : height - (v - min) * sy;
    parts.push(`${pen ? 'L' : 'M'}${x.toFixed(1)},${y.toFixed(1)}`);
    pen = true;
  }
  return { d: parts.join(''), min, max, last, firstStep: s0, lastStep: s1 };
}
