"""The engine: a small facade over its parts, each with one job.

- `state.EngineState`: the in-memory snapshot and the one write path (`record`).
- `admin.ConfigAdmin`: the platform config, applied whole.
- `dispatcher.Dispatcher`: submission, the admission cycle, the launch hand-off.
- `reconciler.Reconciler`: executor observations → timeline, finishing, stopping, re-attaching.
- `reads.ReadModel`: every read the service needs, with access control.

The store is only read at start-up; decisions are made over the snapshot.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from ..core.admission import QueueState
from ..core.config import PlatformConfig, parse_config
from ..core.errors import Conflict, Forbidden
from ..core.policy import require_can_stop
from ..core.request import RunRequest
from ..core.status import FINAL, HOLDING, Status
from ..executors.base import Device, Executor, Observation
from ..store import Store
from . import insights, sooner
from .admin import ConfigAdmin
from .bus import EventBus
from .compare import MAX_RUNS as MAX_COMPARE
from .compare import compare_sweep
from .dispatcher import Dispatcher
from .estimates import SCENARIOS, Estimates
from .gpu_sampling import GpuSampling
from .metrics import MetricsIndexer
from .reads import ReadModel
from .reconciler import Reconciler
from .sessions import Sessions
from .state import ActiveRun, EngineState, new_run_id, queue_limits
from .sweeps import Sweeps
from .timers import Timers

log = logging.getLogger("jupyter_gpuplat.engine")


class Engine:
    def __init__(
        self,
        store: Store,
        executor: Executor,
        *,
        artifacts_root: str,
        clock: Callable[[], float] = time.time,
        new_id: Callable[[], str] = new_run_id,
        stop_grace_seconds: float | None = None,
        safety_tick_seconds: float = 30.0,
        metrics_interval_seconds: float = 1.0,
        min_free_artifacts_bytes: int = 0,
        eta_scenarios: int = SCENARIOS,
        timers: Timers | None = None,
    ) -> None:
        self.state = EngineState(store, executor, clock, timers)
        self.artifacts_root = artifacts_root
        self.safety_tick_seconds = safety_tick_seconds
        self.metrics_interval_seconds = metrics_interval_seconds
        # Logs, outputs and tracking files are read through this (the executor knows where they live).
        self.artifacts = executor.artifact_reader(artifacts_root)
        self.metrics = MetricsIndexer(store, self.artifacts)
        self.dispatcher = Dispatcher(
            self.state, artifacts_root=artifacts_root, new_id=new_id, min_free_artifacts_bytes=min_free_artifacts_bytes
        )
        self.reconciler = Reconciler(
            self.state, self.dispatcher, on_final=self._final_index, stop_grace_seconds=stop_grace_seconds
        )
        self.dispatcher.reconciler = self.reconciler
        self.admin = ConfigAdmin(self.state, self.dispatcher)
        # Start estimates follow every run change and config change; computed off the admission path.
        self.estimates = Estimates(self.state, scenarios=eta_scenarios)
        self.gpu = GpuSampling(self.state)
        self.reconciler.sessions.follow_gpus(self.gpu)  # sessions judged idle by GPU use read its samples
        self.state.change_listeners.append(self._estimate_after)
        self.state.change_listeners.append(self.gpu.after_change)  # an ended run's gpu_usage kept on its record
        # The service's two doors: `reads` (answers from the snapshot and the store) and the
        # commands (this object's methods; config writes by people in `admin`). It reaches no
        # other component (tests/house/test_architecture).
        self.reads = ReadModel(
            self.state,
            self.artifacts,
            self.reconciler.sessions,
            self.reconciler.sweeps,
            artifacts_root,
            self.estimates,
            self.gpu,
        )
        self._tick: asyncio.Task[None] | None = None
        self._metrics_task: asyncio.Task[None] | None = None

    # ---- the snapshot, read-only views (tests, benchmarks, explain) ----------------
    @property
    def store(self) -> Store:
        return self.state.store

    @property
    def executor(self) -> Executor:
        return self.state.executor

    @property
    def bus(self) -> EventBus:
        return self.state.bus

    @property
    def clock(self) -> Callable[[], float]:
        return self.state.clock

    @property
    def cfg(self) -> PlatformConfig:
        return self.state.cfg

    @property
    def config_version(self) -> int:
        return self.state.config_version

    @property
    def queues(self) -> dict[str, QueueState]:
        return self.state.queues

    @property
    def active(self) -> dict[str, ActiveRun]:
        return self.state.active

    @property
    def devices(self) -> list[Device]:
        return self.state.devices

    @property
    def free_gpus(self) -> int | None:
        """Free GPUs of ours; None when the executor places work itself (Kubernetes)."""
        return self.state.free_gpus

    @property
    def cycles(self) -> int:
        return self.dispatcher.cycles

    # ---- start-up --------------------------------------------------------
    async def start(self, config: PlatformConfig | None = None, *, source: str = "", by: str = "") -> None:
        """Load config and every unfinished run, re-attach running work, then dispatch."""
        body, version = self.store.get_config()
        if body is not None:
            self.admin.load(parse_config(body), version)
        if config is not None:
            self.admin.apply_config(config, source=source, by=by or "startup")
        self.executor.set_observer(self._observe)
        for row in self.store.active_runs():
            self.reconciler.reload(row)
        self.estimates.load()
        self.state.config_listeners.append(lambda _cfg: self.estimates.changed())
        self.estimates.changed()
        self.estimates.start()
        self.gpu.start()
        self.dispatcher.wake()
        self._tick = asyncio.ensure_future(self._safety_tick_loop())
        self._metrics_task = asyncio.ensure_future(self._metrics_loop())

    def _estimate_after(self, a: ActiveRun, status: Status) -> None:
        if status in FINAL:
            self.estimates.ended(a, status, self.clock())
        else:
            self.estimates.changed(a.queue)

    def _observe(self, obs: Observation) -> None:
        # An observation is a fact about a run: kept and retried if the store cannot take it now.
        self.state.deferred.apply(f"{obs.status} of {obs.run_id}", lambda: self.reconciler.observe(obs))

    # ---- config ----------------------------------------------------------
    def apply_config(self, cfg: PlatformConfig, *, source: str, by: str) -> int:
        return self.admin.apply_config(cfg, source=source, by=by)

    def put_config_item(self, user: str, section: str, item: dict[str, Any]) -> int:
        return self.admin.put_config_item(user, section, item)

    def delete_config_item(self, user: str, section: str, name: str) -> int:
        return self.admin.delete_config_item(user, section, name)

    def update_config(self, user: str, change: Callable[[dict[str, Any]], None], *, source: str) -> int:
        return self.admin.update_config(user, change, source=source)

    # ---- submission and the cycle ------------------------------------------
    def on_config(self, listener: Callable[[PlatformConfig], None]) -> None:
        """Call `listener` with the config in force now and with each one applied later."""
        self.state.config_listeners.append(listener)
        listener(self.cfg)

    def preview(self, user: str, req: RunRequest) -> dict[str, Any]:
        out = self.dispatcher.preview(user, req)
        return sooner.add_to_preview(self.state, self.estimates, user, req, out, self.dispatcher.platform_gpus)

    def submit(self, user: str, req: RunRequest) -> dict[str, Any]:
        return self.dispatcher.submit(user, req)

    def wake(self, queue: str | None = None) -> None:
        self.dispatcher.wake(queue)

    def run_cycle(self) -> list[str]:
        return self.dispatcher.run_cycle()

    async def stop(self, user: str, run_id: str) -> dict[str, Any]:
        row = self.reads.get_visible(user, run_id)
        self.reconciler.stop(user, row)
        return self.store.get_run(run_id) or row

    # ---- sweeps ----------------------------------------------------------------
    @property
    def sweeps(self) -> Sweeps:
        return self.reconciler.sweeps

    def update_sweep(self, user: str, run_id: str, concurrency: int | None, paused: bool | None) -> dict[str, Any]:
        row = self.reads.get_visible(user, run_id)
        self.sweeps.update(user, row, concurrency, paused)
        return self.store.get_run(run_id) or row

    async def compare_sweep(
        self, user: str, sweep_id: str, metric: str | None, n_top: int, max_points: int
    ) -> dict[str, Any]:
        """A sweep's children against its objective, with what its running children wrote indexed first.

        Ended children were indexed when they ended (`_final_index`): only the running ones are read again.
        """
        self.reads.get_visible(user, sweep_id)
        sw = self.sweeps.of(sweep_id)
        for rid in list(sw.children) if sw is not None else []:
            if rid in self.active:
                await self.index_metrics(rid)
        return compare_sweep(self.state, user, sweep_id, metric, n_top, max_points)

    # ---- GPU sessions ----------------------------------------------------------
    @property
    def sessions(self) -> Sessions:
        return self.reconciler.sessions

    def _owned(self, user: str, run_id: str, what: str) -> dict[str, Any]:
        """A run its owner acts on as its kernel's user: invisible is 404, someone else's 403."""
        row = self.reads.get_visible(user, run_id)
        if row["user"] != user:
            raise Forbidden(f"only {row['user']}, who owns run {run_id}, may {what}", "")
        return row

    def session_report(self, user: str, run_id: str, event: str, kernel_id: str | None = None) -> None:
        self._owned(user, run_id, "report on its kernel")
        self.sessions.report(run_id, event, kernel_id)

    def keepalive(self, user: str, run_id: str) -> dict[str, Any]:
        row = self.reads.get_visible(user, run_id)
        require_can_stop(self.cfg, user, row)  # who may end a session may keep it
        self.sessions.keepalive(user, run_id)
        return self.store.get_run(run_id) or {}

    def move_session(self, user: str, run_id: str, notebook: str) -> dict[str, Any]:
        """The owner's notebook was renamed or moved: the lease follows it (and so does its default name)."""
        row = self.reads.get_visible(user, run_id)
        if row["user"] != user:
            raise Forbidden(f"session {run_id} is {row['user']}'s", "only its owner's notebook can move")
        self.sessions.move(run_id, notebook)
        return self.store.get_run(run_id) or row

    async def kernel_connection(self, user: str, run_id: str) -> dict[str, Any] | None:
        """A running session's connection info, for its owner only (the key runs code as them)."""
        row = self._owned(user, run_id, "connect to its kernel")
        if row["kind"] != "session":
            raise Conflict(f"run {run_id} is a {row['kind']}, not a session", "only sessions have a kernel")
        a = self.active.get(run_id)
        if a is None or a.handle is None or a.status != Status.RUNNING or run_id not in self.sessions.leases:
            return None
        return await self.executor.kernel_connection(run_id, a.handle)

    # ---- reads that index first, and listeners ---------------------------------
    def insights(self, user: str, **args: str | None) -> dict[str, Any]:
        """Waits, GPU-hours, goodput, refusals and failures over a range (engine/insights.py)."""
        return insights.compute(self.state, user, **args)

    async def run_metrics(self, user: str, run_id: str, names: list[str] | None, max_points: int) -> dict[str, Any]:
        """A visible run's metric curves, with all it has written indexed first."""
        self.reads.get_visible(user, run_id)
        # A stat when nothing is new; also covers a run that just ended whose final indexing is not done.
        await self.index_metrics(run_id)
        return self.reads.metrics(user, run_id, names, max_points)

    async def compare_runs(
        self, user: str, run_ids: list[str], names: list[str] | None, max_points: int
    ) -> dict[str, Any]:
        """Compare visible runs, with what each has written indexed first."""
        for rid in run_ids[:MAX_COMPARE]:
            await self.index_metrics(rid)
        return self.reads.compare(user, run_ids, names, max_points)

    # ---- background ----------------------------------------------------------
    async def settle(self) -> None:
        """Run every pending cycle and launch/stop task to the end (tests and benchmarks)."""
        while self.state.tasks or self.dispatcher.cycle_handle is not None:
            if self.dispatcher.cycle_handle is not None:
                self.dispatcher.cycle_handle.cancel()
                self.dispatcher.run_cycle()
            if self.state.tasks:
                await asyncio.gather(*list(self.state.tasks), return_exceptions=True)

    async def index_metrics(self, run_id: str) -> None:
        """Bring a run's metrics in the store up to what it has written (off the loop thread)."""
        await asyncio.to_thread(self.metrics.catch_up, run_id)

    async def _metrics_loop(self) -> None:
        # One loop for all runs: a stat per running run, a read only when its files grew.
        while True:
            await asyncio.sleep(self.metrics_interval_seconds)
            for rid in [a.id for a in self.active.values() if a.status in (Status.RUNNING, Status.STOPPING)]:
                try:
                    await self.index_metrics(rid)
                    a = self.active.get(rid)
                    if a is not None and a.parent is not None:
                        self.sweeps.child_metrics(a.parent, rid, final=False)
                except Exception:  # a damaged file must not stop indexing of the others
                    log.exception("indexing metrics of run %s failed", rid)

    async def _final_index(self, run_id: str, parent: str | None = None) -> None:
        try:
            await self.index_metrics(run_id)
            if parent is not None:  # a sweep's child: its sweep's rules and search see its last metrics
                self.sweeps.child_metrics(parent, run_id, final=True)
        except Exception:
            log.exception("indexing metrics of run %s failed", run_id)
        self.metrics.forget(run_id)

    async def _safety_tick_loop(self) -> None:
        # Everything is event-driven; this slow tick only guards against a lost wake-up.
        while True:
            await asyncio.sleep(self.safety_tick_seconds)
            self.wake()

    async def close(self) -> None:
        for task in (self._tick, self._metrics_task):
            if task is not None:
                task.cancel()
        await self.estimates.close()
        self.gpu.close()
        self.reconciler.sessions.close()  # a closed engine's idle timers must not end a session
        self.state.deferred.cancel()
        if self.dispatcher.cycle_handle is not None:
            self.dispatcher.cycle_handle.cancel()
        for t in list(self.state.tasks):
            t.cancel()
        await self.executor.close()


__all__ = ["FINAL", "HOLDING", "ActiveRun", "Engine", "queue_limits"]
