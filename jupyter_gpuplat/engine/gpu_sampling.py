"""GPU samples of the runs and sessions holding devices, kept as their system metrics (issue 27).

Every `interval_seconds` the executor is asked, off the loop, for a reading of the devices held
by running runs (NVML on the local executor, the DCGM exporter on Kubernetes; nothing where it
cannot see), run by run: a run's own reason where only it cannot be seen. Each reading becomes
points of the holding run's `system/gpu<N>/util` and `system/gpu<N>/memory_bytes` series (step:
the sample time in whole seconds), written in one transaction per tick, so the run view, the
RunMonitor and Compare chart them as they chart a run's own metrics. A run's `gpu_usage` is
summarised from its stored series (core.gpu_usage.summary), computed once here for every client;
where the executor could not see, the reason it gave is said instead.

When a run that held devices ends, its summary is kept on its record (`gpuplat_runs.gpu_usage`,
read from there ever after), off the loop and after any tick still writing its last samples;
a run that ended mostly idle gets a `GpuMostlyIdle` event on its timeline, naming the numbers
to its owner and its project's admins (core.gpu_usage.idle_notice).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from ..core.gpu_usage import (
    SYSTEM_PREFIX,
    NotMeasured,
    Sample,
    from_series,
    idle_notice,
    memory_name,
    summary,
    util_name,
)
from ..core.reasons import Reason
from ..core.status import FINAL, Status
from .state import ActiveRun, EngineState

log = logging.getLogger("jupyter_gpuplat.engine")

# Per-run reasons kept in memory (runs that ended unmeasured keep theirs until this many newer ones).
MAX_RUN_REASONS = 10_000
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
        # Why a run has no samples where the executor saw others (its pod unreported, a MIG or shared device).
        self.run_not_measured: dict[str, NotMeasured] = {}
        self.ticks = 0
        self.listeners: list[TickListener] = []
        self._task: asyncio.Task[None] | None = None
        # A tick holds it until its samples are stored; keeping an ended run's summary waits for it.
        self._writing = asyncio.Lock()
        self._keeping: set[asyncio.Task[None]] = set()

    def start(self) -> None:
        if self.interval_seconds:
            self._task = asyncio.ensure_future(self._loop())

    def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
        for task in self._keeping:
            task.cancel()

    async def drain(self) -> None:
        """Wait until the summaries of the runs ended so far are kept (and their owners told)."""
        while self._keeping:
            await asyncio.gather(*list(self._keeping), return_exceptions=True)

    async def _loop(self) -> None:
        assert self.interval_seconds
        try:  # an executor that cannot see at all (declared GPUs, no NVML) says so before any run is sampled
            got = await asyncio.to_thread(self.s.executor.gpu_samples, {}, float(int(self.s.clock())))
            if isinstance(got, NotMeasured):
                self.not_measured = got
        except Exception:
            log.exception("asking the executor whether it can sample GPUs failed")
        while True:
            await asyncio.sleep(self.interval_seconds)
            try:
                await self.tick()
            except Exception:  # a failed reading must not stop sampling (nor the engine)
                log.exception("sampling GPUs failed")

    async def tick(self) -> int:
        """One reading of every held device, stored on its run; how many samples were kept."""
        async with self._writing:
            return await self._tick()

    async def _tick(self) -> int:
        held = self._held()
        if not held:
            return 0
        at = float(int(self.s.clock()))
        got = await asyncio.to_thread(self.s.executor.gpu_samples, held, at)
        self.ticks += 1
        if isinstance(got, NotMeasured):
            self.not_measured = got
            self._tell(got)
            return 0
        self.not_measured = None
        points: dict[str, dict[str, tuple[np.ndarray, np.ndarray]]] = {}
        kept = 0
        by_run: dict[str, list[Sample] | NotMeasured] = {}
        for run_id, samples in got.items():
            if run_id not in held:  # a run this tick did not ask about
                continue
            if isinstance(samples, NotMeasured):
                self._run_reason(run_id, samples)
                by_run[run_id] = samples
                continue
            self.run_not_measured.pop(run_id, None)
            mine = by_run.setdefault(run_id, [])
            for sample in samples:
                if sample.device not in held[run_id]:
                    continue
                assert isinstance(mine, list)
                mine.append(sample)
                series = points.setdefault(run_id, {})
                step = np.array([int(sample.at)], np.int64)
                series[util_name(sample.device)] = (step, np.array([sample.util_percent], np.float64))
                series[memory_name(sample.device)] = (step, np.array([float(sample.memory_bytes)], np.float64))
                kept += 1
        if points:
            await asyncio.to_thread(self.s.store.metrics.append_system, points)
        self._tell(by_run)
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

    def _tell(self, got: TickResult) -> None:
        for listener in self.listeners:
            try:
                listener(got)
            except Exception:  # a listener's failure must not stop sampling
                log.exception("a GPU sample listener failed")

    def usage(self, row: dict[str, Any]) -> dict[str, Any] | None:
        """A run's `gpu_usage` (None for a run that held no device): the record's once kept, else its samples
        summarised (a running run; one that ended before v13 or a moment ago)."""
        if row.get("gpu_usage") is not None:
            return dict(row["gpu_usage"])
        # Held GPUs: devices of ours, or (where the executor places work) a dispatched run that asked for some.
        if not (row.get("devices") or (row.get("devices") is not None and row.get("gpu"))):
            return None
        return self._summarise(row["id"], ended=row.get("finished_at") is not None)

    @staticmethod
    def listed(row: dict[str, Any]) -> dict[str, Any] | None:
        """A listed run's `gpu_usage`: the record's, kept when it ended; null while it runs (GET runs/{id} has it)."""
        return row.get("gpu_usage")

    def _summarise(self, run_id: str, *, ended: bool) -> dict[str, Any]:
        if not self.interval_seconds:
            return summary([], interval_seconds=1.0, not_measured=SAMPLING_OFF)
        series = self.s.store.metrics.series_many([run_id], prefix=SYSTEM_PREFIX).get(run_id, {})
        samples: list[Sample] = from_series(series)  # type: ignore[arg-type]
        why = (
            self.run_not_measured.get(run_id)
            or self.not_measured
            or NotMeasured("no GPU samples were taken" + ("" if ended else " yet"))
        )
        return summary(samples, interval_seconds=self.interval_seconds, not_measured=why)

    # ---- a run's end ------------------------------------------------------------
    def after_change(self, a: ActiveRun, status: Status) -> None:
        """A change listener: a run that held devices ended, so its summary is kept (in a task)."""
        # Sampling off: nothing to keep (GET runs/{id} says so without reading anything).
        held = a.devices or (not self.s.assigns_devices and a.request.gpu > 0 and a.times.get("dispatched_at"))
        if status in FINAL and held and self.interval_seconds:
            task = asyncio.ensure_future(self._keep(a))
            self._keeping.add(task)
            task.add_done_callback(self._keeping.discard)

    async def _keep(self, a: ActiveRun) -> None:
        try:
            async with self._writing:  # a tick in flight stores its last samples first
                usage = await asyncio.to_thread(self._summarise, a.id, ended=True)
                await asyncio.to_thread(self.s.store.set_gpu_usage, a.id, usage)
        except Exception:  # not kept: GET runs/{id} and insights count its samples instead
            log.exception("keeping the GPU usage of %s failed", a.id)
            return
        notice = idle_notice(a.id, usage)
        if notice is None:
            return
        pr = self.s.cfg.project(a.project)
        admins = sorted(u for u, r in pr.members.items() if r == "admin") if pr is not None else []
        details = {
            "busy_fraction": usage["busy_fraction"],
            "seconds_sampled": usage["seconds_sampled"],
            "seconds_busy": usage["seconds_busy"],
            "devices": usage["devices"],
            # Who is told (the sidebar shows it to them): the owner and the project's admins by name.
            "tell": list(dict.fromkeys([a.user, *admins])),
        }
        self.s.deferred.apply(
            f"GPU idle notice of {a.id}", lambda: self.s.remark(a, Reason.GPU_MOSTLY_IDLE, notice, details)
        )
