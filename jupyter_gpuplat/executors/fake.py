"""A scripted executor for tests and benchmarks: a fake, never used by the product.

It starts nothing. Each run follows a `Script` (succeed, fail with code N, never end,
start slowly, fail to start, be lost after a restart), picked by run id, by run name
or a default. Observations go to an outbox with a due time on an injected `FakeClock`;
the test delivers them with `deliver()` / `advance(seconds)` (or, with `auto=True`, on
the next turn of the event loop). No sleeps, no processes, no threads.

The work a fake "started" is kept in `FakeWorkloads`, which a test may share between
executors as a machine outlives a server: a submit for a run whose work already exists
adopts it (idempotent launch) instead of starting it again. `Script(crash_after_submit=True)`
opens the crash window between "work started" and "handle saved": the work exists, and
submit never returns (the engine is closed before it could save the handle).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

from ..core.gpu_usage import Sample
from ..core.reasons import Reason
from .artifacts import FilesystemArtifacts
from .base import Device, Executor, ExecutorError, GpuReading, LaunchRequest, Observation


@dataclass
class FakeTimer:
    when: float
    callback: Callable[[], None]
    cancelled: bool = False

    def cancel(self) -> None:
        self.cancelled = True


class FakeClock:
    """A clock that moves only when told: `clock()` reads it, `advance(dt)` moves it.

    It keeps timers too (`call_at`, the engine's `timers` in tests): `advance` fires those due, in
    time order, each with the clock at its time; `advance(0)` fires those already due.
    """

    def __init__(self, start: float = 1_000_000.0) -> None:
        self.now = start
        self._timers: list[FakeTimer] = []

    def __call__(self) -> float:
        return self.now

    def call_at(self, when: float, callback: Callable[[], None]) -> FakeTimer:
        timer = FakeTimer(when, callback)
        self._timers.append(timer)
        return timer

    def advance(self, seconds: float) -> float:
        target = self.now + seconds
        while True:
            self._timers = [t for t in self._timers if not t.cancelled]
            due = [t for t in self._timers if t.when <= target]
            if not due:
                break
            first = min(due, key=lambda t: t.when)
            self._timers.remove(first)
            self.now = max(self.now, first.when)
            first.callback()
        self.now = target
        return self.now


@dataclass
class FakeWorkloads:
    """The work fake executors started, by run id; share one between executors to outlive a restart."""

    handles: dict[str, dict[str, Any]] = field(default_factory=dict)  # run id → the handle of its work
    starts: Counter[str] = field(default_factory=Counter)  # run id → how many times work was started


@dataclass(frozen=True)
class Script:
    """What happens to one run once it is handed over."""

    outcome: str = "succeeded"  # "succeeded", "failed" or "never" (never ends by itself)
    exit_code: int | None = 0
    after: float = 0.0  # seconds of run time before the outcome
    slow_start: bool = False  # start only when the test calls `FakeExecutor.start(run_id)`
    start_error: str | None = None  # submit raises ExecutorError with this message
    lost_after_restart: bool = False  # attach reports the run Lost
    crash_after_submit: bool = False  # the work starts, then submit never returns (close ends it)

    @classmethod
    def instant(cls) -> Script:
        return cls()

    @classmethod
    def succeeds(cls, after: float = 0.0) -> Script:
        return cls(after=after)

    @classmethod
    def fails(cls, code: int, after: float = 0.0) -> Script:
        return cls("failed", code, after)

    @classmethod
    def never_ends(cls) -> Script:
        return cls("never", None)

    @classmethod
    def slow(cls, then: Script | None = None) -> Script:
        """Starts when the test says so (`start`), then follows `then` (default: never ends)."""
        base = then or cls.never_ends()
        return cls(base.outcome, base.exit_code, base.after, slow_start=True)

    @classmethod
    def cannot_start(cls, message: str = "no such image") -> Script:
        return cls(start_error=message)

    @classmethod
    def crashes_after_submit(cls) -> Script:
        """The work starts, but the server dies before the handle is saved: submit never returns."""
        return cls("never", None, crash_after_submit=True)

    @classmethod
    def lost(cls) -> Script:
        """Runs until a restart; after it, attach reports the run Lost."""
        return cls("never", None, lost_after_restart=True)


class FakeExecutor(FilesystemArtifacts, Executor):
    """Hands out `gpus` device indices like the local executor; reports nothing unscripted."""

    name = "fake"

    def __init__(
        self,
        *,
        gpus: int = 4,
        clock: FakeClock | None = None,
        scripts: Mapping[str, Script] | None = None,
        default: Script | None = None,
        auto: bool = False,
        on_submit: Callable[[LaunchRequest], None] | None = None,
        workloads: FakeWorkloads | None = None,
        gpu_sample_seconds: float | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.clock = clock or FakeClock()
        self.scripts: dict[str, Script] = dict(scripts or {})  # by run id or run name
        self.default = default or Script.never_ends()
        self.auto = auto
        self.on_submit = on_submit
        self._devices = [Device(i, f"fake GPU {i}", 81920, f"GPU-fake-{i}", declared=True) for i in range(gpus)]
        self.launched: dict[str, LaunchRequest] = {}
        self.submitted: list[str] = []  # run ids, one per call of submit
        self.adopted: list[str] = []  # runs whose submit found their work already started
        self.workloads = workloads if workloads is not None else FakeWorkloads()
        # GPU readings, as NVML would give them (None: this executor cannot see its GPUs).
        self.gpu_reading: Callable[[int, float], tuple[float, int]] | None = None
        self._gpu_interval = gpu_sample_seconds
        self.stopped: list[str] = []
        self.attached: list[str] = []
        self.outbox: list[tuple[float, Observation]] = []
        self._gates: dict[str, asyncio.Future[None]] = {}
        self._n = 0

    # ---- scripting ---------------------------------------------------------
    def script_of(self, run_id: str, name: str | None = None) -> Script:
        return self.scripts.get(run_id) or (self.scripts.get(name) if name else None) or self.default

    def emit(
        self,
        run_id: str,
        status: str,
        reason: str,
        message: str = "",
        exit_code: int | None = None,
        *,
        after: float = 0.0,
        details: Mapping[str, Any] | None = None,
    ) -> None:
        """Queue any observation (also out of order or repeated), due `after` seconds from now."""
        # Scripts may emit any code (also one no executor reports) to test what the engine records.
        code = cast(Reason, reason)
        obs = Observation(run_id, status, code, message or f"{status} ({reason})", exit_code, details)
        self.outbox.append((self.clock() + after, obs))
        if self.auto:
            self._deliver_soon()

    def deliver(self) -> int:
        """Deliver every observation that is due now, in due order; returns how many."""
        now = self.clock()
        due = sorted((x for x in self.outbox if x[0] <= now), key=lambda x: x[0])
        self.outbox = [x for x in self.outbox if x[0] > now]
        for _, obs in due:
            self._emit(obs)
        return len(due)

    def advance(self, seconds: float) -> int:
        """Move the clock, then deliver what became due."""
        self.clock.advance(seconds)
        return self.deliver()

    def start(self, run_id: str) -> None:
        """A slow-starting run starts now: its submit returns, or (cluster) it reports running."""
        gate = self._gates.pop(run_id, None)
        if gate is not None and not gate.done():
            gate.set_result(None)

    def finish(self, run_id: str, exit_code: int = 0) -> None:
        """End a run now: succeeded with 0, failed otherwise."""
        if exit_code == 0:
            self.emit(run_id, "succeeded", "Completed", "exited with code 0", 0)
        else:
            self.emit(run_id, "failed", "Error", f"exited with code {exit_code}", exit_code)

    def _deliver_soon(self) -> None:
        try:
            asyncio.get_running_loop().call_soon(self.deliver)
        except RuntimeError:
            self.deliver()

    def _outcome(self, run_id: str, script: Script) -> None:
        if script.outcome == "succeeded":
            self.emit(run_id, "succeeded", "Completed", "exited with code 0", 0, after=script.after)
        elif script.outcome == "failed":
            code = script.exit_code if script.exit_code is not None else 1
            self.emit(run_id, "failed", "Error", f"exited with code {code}", code, after=script.after)

    # ---- the executor contract -------------------------------------------------
    def devices(self) -> list[Device]:
        return list(self._devices)

    def gpu_interval(self) -> float | None:
        return self._gpu_interval

    def gpu_samples(self, held: Mapping[str, tuple[int, ...]], at: float) -> GpuReading:
        """Scripted readings (`gpu_reading(device, at) -> (util %, memory bytes)`): the hardware boundary, faked."""
        if self.gpu_reading is None:
            return super().gpu_samples(held, at)
        reading = self.gpu_reading
        return {rid: [Sample(at, d, *reading(d, at)) for d in devices] for rid, devices in held.items()}

    async def submit(self, req: LaunchRequest) -> dict[str, Any]:
        name = req.spec.get("name")
        script = self.script_of(req.run_id, name)
        self.launched[req.run_id] = req
        self.submitted.append(req.run_id)
        if self.on_submit is not None:
            self.on_submit(req)
        existing = self.workloads.handles.get(req.run_id)
        if existing is not None:
            # Started before a crash that lost the handle: adopt the work, never start it twice.
            self.adopted.append(req.run_id)
            if self.reports_start:
                self.emit(req.run_id, "running", "Started", "fake: adopted, running")
            self._outcome(req.run_id, script)
            return {**existing, "adopted": True}
        if script.start_error is not None:
            raise ExecutorError(script.start_error)
        self._n += 1
        handle = {"executor": self.name, "n": self._n, "name": name, "devices": list(req.devices)}
        if script.crash_after_submit:
            self._started_work(req.run_id, handle)
            gate = asyncio.get_running_loop().create_future()
            self._gates[req.run_id] = gate
            await gate  # close() cancels it: the engine never sees the handle (start() lets it return late)
        elif script.slow_start:
            gate = asyncio.get_running_loop().create_future()
            self._gates[req.run_id] = gate
            if not self.reports_start:
                await gate  # the launch waits: the run stays dispatched with no handle
            else:
                self._started_work(req.run_id, handle)  # handed over: the cluster has it
                gate.add_done_callback(lambda _: self._started(req.run_id, script))
                return handle
        if req.run_id not in self.workloads.handles:
            self._started_work(req.run_id, handle)
        if self.reports_start:
            self.emit(req.run_id, "running", "Started", "fake: running")
        self._outcome(req.run_id, script)
        return handle

    def _started_work(self, run_id: str, handle: dict[str, Any]) -> None:
        self.workloads.handles[run_id] = handle
        self.workloads.starts[run_id] += 1

    def _started(self, run_id: str, script: Script) -> None:
        self.emit(run_id, "running", "Started", "fake: running")
        self._outcome(run_id, script)

    def attach(self, run_id: str, handle: Mapping[str, Any]) -> Observation:
        self.attached.append(run_id)
        script = self.script_of(run_id, handle.get("name"))
        if script.lost_after_restart:
            return Observation(run_id, "failed", Reason.LOST, "fake: the run is gone after the restart")
        return Observation(run_id, "running", Reason.REATTACHED, "fake: still running")

    async def stop(self, run_id: str, handle: Mapping[str, Any], grace_seconds: float | None = None) -> None:
        self.stopped.append(run_id)
        self.emit(run_id, "stopped", "Stopped", "stopped by request; fake: ended at once")

    def log_path(self, handle: Mapping[str, Any]) -> str:
        return "/dev/null"

    async def close(self) -> None:
        for gate in self._gates.values():
            gate.cancel()
        self._gates.clear()


class FakeClusterExecutor(FakeExecutor):
    """Like a cluster: places work itself (no device indices, free GPUs not counted by the engine)
    and reports "running" itself after the hand-over."""

    name = "fake-cluster"
    assigns_devices = False
    reports_start = True
