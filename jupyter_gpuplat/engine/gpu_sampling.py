"""GPU samples of the runs and sessions holding devices, kept as their system metrics (issue 27).

Every `interval_seconds` the executor is asked, off the loop, for a reading of the devices held
by running runs (NVML on the local executor; nothing where it cannot see). Each reading becomes
points of the holding run's `system/gpu<N>/util` and `system/gpu<N>/memory_bytes` series (step:
the sample time in whole seconds), written in one transaction per tick, so the run view, the
RunMonitor and Compare chart them as they chart a run's own metrics. A run's `gpu_usage` is
summarised from its stored series (core.gpu_usage.summary), computed once here for every client;
where the executor could not see, the reason it gave is said instead.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from ..core.gpu_usage import SYSTEM_PREFIX, NotMeasured, Sample, from_series, memory_name, summary, util_name
from ..core.status import Status
from .state import EngineState

log = logging.getLogger("jupyter_gpuplat.engine")

SAMPLING_OFF = NotMeasured("GPU sampling is off on this server")
# What each tick tells its listeners: the samples it stored by run id (or why that run was not seen),
# or why it saw nothing at all.
TickResult = Mapping[str, list[Sample] | NotMeasured] | NotMeasured
TickListener = Callable[[TickResult], None]  # sessions judged idle by GPU use follow the ticks


class GpuSampling:
    """The sampling loop, and each run's `gpu_usage` from what it stored."""

    def __init__(self, state: EngineState) -> None:
        self.s = state
        # The executor's setting (LocalExecutor.gpu_sample_seconds): None where it samples nothing.
        self.interval_seconds: float | None = state.executor.gpu_interval()
        self.not_measured: NotMeasured | None = None  # the executor's last word where it could not see
        self.ticks = 0
        self.listeners: list[TickListener] = []
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
        holders = {
            d: a.id for a in self.s.active.values() if a.status in (Status.RUNNING, Status.STOPPING) for d in a.devices
        }
        if not holders:
            return 0
        at = float(int(self.s.clock()))
        got = await asyncio.to_thread(self.s.executor.gpu_samples, sorted(holders), at)
        self.ticks += 1
        if isinstance(got, NotMeasured):
            self.not_measured = got
            self._tell(got)
            return 0
        self.not_measured = None
        points: dict[str, dict[str, tuple[np.ndarray, np.ndarray]]] = {}
        by_run: dict[str, list[Sample]] = {}
        for sample in got:
            run_id = holders.get(sample.device)
            if run_id is None:  # a device this tick did not ask about
                continue
            by_run.setdefault(run_id, []).append(sample)
            series = points.setdefault(run_id, {})
            step = np.array([int(sample.at)], np.int64)
            series[util_name(sample.device)] = (step, np.array([sample.util_percent], np.float64))
            series[memory_name(sample.device)] = (step, np.array([float(sample.memory_bytes)], np.float64))
        await asyncio.to_thread(self.s.store.metrics.append_system, points)
        self._tell(by_run)
        return len(got)

    def _tell(self, got: TickResult) -> None:
        for listener in self.listeners:
            try:
                listener(got)
            except Exception:  # a listener's failure must not stop sampling
                log.exception("a GPU sample listener failed")

    def usage(self, row: dict[str, Any]) -> dict[str, Any] | None:
        """A run's `gpu_usage` (None for a run that held no device)."""
        if not row.get("devices"):
            return None
        if not self.interval_seconds:
            return summary([], interval_seconds=1.0, not_measured=SAMPLING_OFF)
        series = self.s.store.metrics.series_many([row["id"]], prefix=SYSTEM_PREFIX).get(row["id"], {})
        samples: list[Sample] = from_series(series)  # type: ignore[arg-type]
        why = self.not_measured or NotMeasured("no GPU samples were taken yet")
        return summary(samples, interval_seconds=self.interval_seconds, not_measured=why)
