"""GPU samples of the runs and sessions holding devices, kept as their system metrics (issue 27).

Every `interval_seconds` the executor is asked, off the loop, for a reading of the devices held
by running runs (NVML on the local executor, the DCGM exporter on Kubernetes; nothing where it
cannot see), run by run: a run's own reason where only it cannot be seen. Each reading becomes
points of the holding run's `system/gpu<N>/util` and `system/gpu<N>/memory_bytes` series (step:
the sample time in whole seconds), written in one transaction per tick, so the run view, the
RunMonitor and Compare chart them as they chart a run's own metrics. A run's `gpu_usage` is
summarised from its stored series (core.gpu_usage.summary), computed once here for every client;
where the executor could not see, the reason it gave is said instead.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import numpy as np

from ..core.gpu_usage import SYSTEM_PREFIX, NotMeasured, Sample, from_series, memory_name, summary, util_name
from ..core.status import Status
from .state import EngineState

log = logging.getLogger("jupyter_gpuplat.engine")

# Per-run reasons kept in memory (runs that ended unmeasured keep theirs until this many newer ones).
MAX_RUN_REASONS = 10_000


class GpuSampling:
    """The sampling loop, and each run's `gpu_usage` from what it stored."""

    def __init__(self, state: EngineState) -> None:
        self.s = state
        # The executor's setting (LocalExecutor.gpu_sample_seconds): None where it samples nothing.
        self.interval_seconds: float | None = state.executor.gpu_interval()
        self.not_measured: NotMeasured | None = None  # the executor's last word where it could not see
        # Why a run has no samples where the executor saw others (its pod unreported, a MIG or shared device).
        self.run_not_measured: dict[str, NotMeasured] = {}
        self.ticks = 0
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self.interval_seconds:
            self._task = asyncio.ensure_future(self._loop())

    def close(self) -> None:
        if self._task is not None:
            self._task.cancel()

    async def _loop(self) -> None:
        assert self.interval_seconds
        while True:
            await asyncio.sleep(self.interval_seconds)
            try:
                await self.tick()
            except Exception:  # a failed reading must not stop sampling (nor the engine)
                log.exception("sampling GPUs failed")

    async def tick(self) -> int:
        """One reading of every held device, stored on its run; how many samples were kept."""
        held = self._held()
        if not held:
            return 0
        at = float(int(self.s.clock()))
        got = await asyncio.to_thread(self.s.executor.gpu_samples, held, at)
        self.ticks += 1
        if isinstance(got, NotMeasured):
            self.not_measured = got
            return 0
        self.not_measured = None
        points: dict[str, dict[str, tuple[np.ndarray, np.ndarray]]] = {}
        kept = 0
        for run_id, samples in got.items():
            if run_id not in held:  # a run this tick did not ask about
                continue
            if isinstance(samples, NotMeasured):
                self._run_reason(run_id, samples)
                continue
            self.run_not_measured.pop(run_id, None)
            for sample in samples:
                if sample.device not in held[run_id]:
                    continue
                series = points.setdefault(run_id, {})
                step = np.array([int(sample.at)], np.int64)
                series[util_name(sample.device)] = (step, np.array([sample.util_percent], np.float64))
                series[memory_name(sample.device)] = (step, np.array([float(sample.memory_bytes)], np.float64))
                kept += 1
        if points:
            await asyncio.to_thread(self.s.store.metrics.append_system, points)
        return kept

    def _held(self) -> dict[str, tuple[int, ...]]:
        """Run id → its devices: our indices where the engine assigns them, else the run's ordinals 0..n-1."""
        live = (a for a in self.s.active.values() if a.status in (Status.RUNNING, Status.STOPPING))
        if self.s.assigns_devices:
            return {a.id: tuple(a.devices) for a in live if a.devices}
        return {a.id: tuple(range(a.request.gpu)) for a in live if a.request.gpu > 0}

    def _run_reason(self, run_id: str, why: NotMeasured) -> None:
        self.run_not_measured.pop(run_id, None)  # re-inserted last: the oldest go first past the bound
        self.run_not_measured[run_id] = why
        while len(self.run_not_measured) > MAX_RUN_REASONS:
            del self.run_not_measured[next(iter(self.run_not_measured))]

    def usage(self, row: dict[str, Any]) -> dict[str, Any] | None:
        """A run's `gpu_usage` (None for a run that held no device)."""
        # Held GPUs: devices of ours, or (where the executor places work) a dispatched run that asked for some.
        if not (row.get("devices") or (row.get("devices") is not None and row.get("gpu"))):
            return None
        if not self.interval_seconds:
            return summary([], interval_seconds=1.0, not_measured=NotMeasured("GPU sampling is off on this server"))
        series = self.s.store.metrics.series_many([row["id"]], prefix=SYSTEM_PREFIX).get(row["id"], {})
        samples: list[Sample] = from_series(series)  # type: ignore[arg-type]
        why = self.run_not_measured.get(row["id"]) or self.not_measured or NotMeasured("no GPU samples were taken yet")
        return summary(samples, interval_seconds=self.interval_seconds, not_measured=why)
