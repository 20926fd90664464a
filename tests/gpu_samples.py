"""GPU samples as NVML would give them, written where the sampler writes them (issue 27).

NVML is hardware: where a test needs a run's GPU readings on a server without GPUs, it writes
the run's `system/gpu<N>/…` series (store.metrics.append_system) as the sampler would from NVML
every `gpu_sample_seconds` — the one boundary faked; the server summarises and words them itself.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from jupyter_gpuplat.core.gpu_usage import memory_name, util_name
from jupyter_gpuplat.store import Store

GiB = 1 << 30


def write_samples(
    store: Store, run_id: str, device: int, utils: list[float], memory: list[int], start: int = 0, every: int = 10
) -> None:
    """One reading of `device` every `every` seconds from `start` (the servers' gpu_sample_seconds: 10)."""
    steps = np.arange(start, start + every * len(utils), every, dtype=np.int64)
    store.metrics.append_system(
        {
            run_id: {
                util_name(device): (steps, np.array(utils, np.float64)),
                memory_name(device): (steps, np.array(memory, np.float64)),
            }
        }
    )


def write_samples_to(
    root: Path, run_id: str, device: int, utils: list[float], memory: list[int], start: int = 0
) -> None:
    """The same into the database of a server process (tests/server.py's ServerProcess under `root`)."""
    store = Store(f"sqlite:///{root / 'gpuplat.db'}")
    try:
        write_samples(store, run_id, device, utils, memory, start)
    finally:
        store.close()
