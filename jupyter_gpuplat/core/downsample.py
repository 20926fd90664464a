"""Downsampling a metric curve that keeps its extremes.

The series is cut into equal buckets; from each the minimum and the maximum
point survive (in step order), plus the first and last points. A spike or a dip
anywhere stays visible, which averaging or striding would hide.
"""

from __future__ import annotations

import numpy as np


def downsample(steps: np.ndarray, values: np.ndarray, max_points: int) -> tuple[np.ndarray, np.ndarray]:
    n = int(steps.size)
    if n <= max_points or max_points < 4:
        return steps, values
    buckets = (max_points - 2) // 2
    size = -(-n // buckets)  # ceil
    padded = buckets * size
    lo = np.full(padded, np.inf)
    hi = np.full(padded, -np.inf)
    finite = np.isfinite(values)
    lo[:n] = np.where(finite, values, np.inf)
    hi[:n] = np.where(finite, values, -np.inf)
    base = np.arange(buckets) * size
    keep = np.concatenate(
        [
            base + lo.reshape(buckets, size).argmin(axis=1),
            base + hi.reshape(buckets, size).argmax(axis=1),
            [0, n - 1],
        ]
    )
    keep = np.unique(keep[keep < n])
    return steps[keep], values[keep]
