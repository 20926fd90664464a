"""The engine's in-memory snapshot and its one write path.

`EngineState` holds what the dispatcher, reconciler, config administration and read
model share: the platform config, one `QueueState` per queue, the unfinished runs,
the free devices. Every run state change goes through `record`, which persists the
change and its timeline event in one transaction, then publishes it.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..core.admission import FlavorLimit, FreeByFlavor, PendingRun, QueueLimits, QueueState
from ..core.config import PlatformConfig, QueueConfig
from ..core.flavors import asked_flavor, device_flavors, flavor_counts
from ..core.resources import Resources
from ..core.status import Status, can_transition
from ..executors.base import Device, Executor
from ..store import Store
from .bus import EventBus
from .deferred import Deferred
from .timers import LoopTimers, Timers

log = logging.getLogger("jupyter_gpuplat.engine")


def new_run_id() -> str:
    return "r-" + secrets.token_hex(5)


def queue_limits(q: QueueConfig) -> QueueLimits:
    return QueueLimits(
        name=q.name,
        priority=q.priority,
        concurrency=q.concurrency,
        quota=q.quota.quota(),
        max_per_user=q.max_per_user,
        ordering=q.ordering,
        paused=q.paused,
        flavors=tuple(FlavorLimit(f.name, f.quota.quota()) for f in q.flavors),
    )


@dataclass
class ActiveRun:
    """What the engine keeps in memory for a run that is not final."""

    id: str
    seq: int
    project: str
    user: str
    queue: str
    status: Status
    request: Resources
    resolved: dict[str, Any]
    devices: tuple[int, ...] = ()
    handle: dict[str, Any] | None = None
    stop_requested_by: str | None = None
    launching: bool = False
    times: dict[str, float | None] = field(default_factory=dict)
    provenance: dict[str, str] | None = None  # None after a reload: read from the store if needed
    # A session or sweep ended by the platform (idle, kernel shut down, early stopping): its final
    # reason and message, and (sweeps) its final status.
    end: tuple[str, str] | None = None
    end_status: Status | None = None
    parent: str | None = None  # a sweep's child: the sweep's id
    asked: str | None = None  # the flavor it asked for (placement.gpu_type naming a flavor); None: any
    flavor: str | None = None  # the flavor it was admitted on; None: its queue has no flavors

    def pending(self) -> PendingRun:
        return PendingRun(self.id, self.seq, self.queue, self.user, self.request, self.parent, self.asked)


@dataclass(frozen=True, slots=True)
class Change:
    """One run state change for `EngineState.record_many` (the arguments of `record`)."""

    run: ActiveRun
    status: Status
    reason: str
    message: str
    details: dict[str, Any] | None = None
    fields: dict[str, Any] = field(default_factory=dict)


class EngineState:
    """The snapshot every engine part reads and changes; the store is read only at start-up."""

    def __init__(
        self, store: Store, executor: Executor, clock: Callable[[], float], timers: Timers | None = None
    ) -> None:
        self.store = store
        self.executor = executor
        self.clock = clock
        # Deadlines on that clock (a session's idle clock).
        self.timers: Timers = timers or LoopTimers(clock)
        self.cfg = PlatformConfig()
        self.config_version = 0
        self.queues: dict[str, QueueState] = {}
        self.active: dict[str, ActiveRun] = {}
        self.devices: list[Device] = executor.devices()
        self.free_devices: set[int] = {d.index for d in self.devices}
        # Device index → its flavor (set with the config); empty where no flavor types this machine's devices.
        self.device_flavor: dict[int, str] = {}
        self._free_by_flavor: dict[str, int] | None = None
        # A cluster executor places work itself: our queues still count GPUs, devices are not ours.
        self.assigns_devices = executor.assigns_devices
        self.bus = EventBus()
        self.tasks: set[asyncio.Task[Any]] = set()
        # Writes kept while the store is unavailable, retried in order.
        self.deferred = Deferred()
        # Called after each config change (e.g. the session kernelspecs follow the presets).
        self.config_listeners: list[Callable[[PlatformConfig], None]] = []
        # Told of every run change after it is published (the start estimates follow them).
        self.change_listeners: list[Callable[[ActiveRun, Status], None]] = []

    @property
    def free_gpus(self) -> int | None:
        """Free GPUs we hand out; None when the executor places work itself (no number of ours)."""
        return len(self.free_devices) if self.assigns_devices else None

    @property
    def free_by_flavor(self) -> FreeByFlavor:
        """Free devices per flavor, where we hand out devices and the config declares flavors (kept as they change)."""
        return self._free_by_flavor

    def take_devices(self, devices: tuple[int, ...]) -> None:
        """Devices a run now holds: no longer free (for its flavor too)."""
        taken = set(devices) & self.free_devices
        self.free_devices -= taken
        self._count_flavors(tuple(taken), -1)

    def give_devices(self, devices: tuple[int, ...]) -> None:
        """Devices a run held, free again."""
        back = set(devices) - self.free_devices
        self.free_devices |= back
        self._count_flavors(tuple(back), 1)

    def _count_flavors(self, devices: tuple[int, ...], step: int) -> None:
        counts = self._free_by_flavor
        if counts is None:
            return
        for d in devices:
            f = self.device_flavor.get(d)
            if f is not None and f in counts:
                counts[f] += step

    def _recount_flavors(self) -> None:
        if not self.assigns_devices or not self.cfg.flavors:
            self._free_by_flavor = None
            return
        counts = dict.fromkeys((f.name for f in self.cfg.flavors), 0)
        for d in self.free_devices:
            f = self.device_flavor.get(d)
            if f is not None and f in counts:
                counts[f] += 1
        self._free_by_flavor = counts

    def machine_flavors(self, cfg: PlatformConfig) -> dict[str, int] | None:
        """This machine's devices per flavor of `cfg`; None where unknown (devices not ours, none found, no flavors)."""
        if not self.assigns_devices or not self.devices or not cfg.flavors:
            return None
        found = flavor_counts(device_flavors(cfg, ((d.index, d.name) for d in self.devices)))
        return {f.name: found.get(f.name, 0) for f in cfg.flavors}

    def asked_flavor(self, resolved: dict[str, Any]) -> str | None:
        return asked_flavor(self.cfg, resolved)

    def set_config(self, cfg: PlatformConfig, version: int) -> set[str]:
        """Make `cfg` current in memory; returns the queue names (all need a new look)."""
        self.cfg = cfg
        self.config_version = version
        self.device_flavor = device_flavors(cfg, ((d.index, d.name) for d in self.devices)) if cfg.flavors else {}
        self._recount_flavors()
        names = {q.name for q in cfg.queues}
        for q in cfg.queues:
            limits = queue_limits(q)
            if q.name in self.queues:
                self.queues[q.name].limits = limits
            else:
                self.queues[q.name] = QueueState(limits)
        for name in list(self.queues):
            if name not in names:
                del self.queues[name]
        for listener in self.config_listeners:
            try:
                listener(cfg)
            except Exception:  # a listener's failure must not undo a config change
                log.exception("a config listener failed")
        return names

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        task = asyncio.ensure_future(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    # ---- the one write path ----------------------------------------------------
    def record(
        self,
        a: ActiveRun,
        status: Status,
        reason: str,
        message: str,
        details: dict[str, Any] | None = None,
        **fields: Any,
    ) -> None:
        ev, cols = self._change(a, status, reason, message, details, fields)
        ev_id = self.store.transition(a.id, a.project, cols, ev)
        a.status = status
        _keep_times(a, cols)
        assert ev_id is not None
        self.publish(ev_id, a, ev)

    def record_many(self, changes: Sequence[Change]) -> None:
        """Several `record`s in one transaction (one admission cycle), published in the order given."""
        if not changes:
            return
        rows = []
        for c in changes:
            ev, cols = self._change(c.run, c.status, c.reason, c.message, c.details, c.fields)
            rows.append((c.run, c.status, ev, cols))
        ids = self.store.transition_many([(a.id, a.project, cols, ev) for a, _, ev, cols in rows])
        for ev_id, (a, status, ev, cols) in zip(ids, rows, strict=True):
            a.status = status
            _keep_times(a, cols)
            self.publish(ev_id, a, ev)

    def _change(
        self,
        a: ActiveRun,
        status: Status,
        reason: str,
        message: str,
        details: dict[str, Any] | None,
        fields: dict[str, Any],
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """The timeline event and the run's new columns for one change."""
        if not can_transition(a.status, status, sweep=a.resolved.get("kind") == "sweep"):
            # Never drop an observation: record it, but make the broken invariant loud.
            log.error("run %s: unexpected transition %s -> %s (%s)", a.id, a.status, status, reason)
        now = self.clock()
        ev: dict[str, Any] = {"status": status.value, "reason": str(reason), "message": message, "at": now}
        if details:
            ev["details"] = details
        cols = {"status": status.value, "reason": str(reason), "message": message, "updated_at": now, **fields}
        return ev, cols

    def remark(self, a: ActiveRun, reason: str, message: str, details: dict[str, Any] | None = None) -> None:
        """An event on the run's timeline that changes nothing (its status and record stay): published, but no
        change listener is told (nothing changed for them)."""
        ev: dict[str, Any] = {"status": a.status.value, "reason": str(reason), "message": message, "at": self.clock()}
        if details:
            ev["details"] = details
        (ev_id,) = self.store.append_events({a.id: a.project}, [(a.id, ev)])
        self.publish(ev_id, a, ev, listeners=False)

    def publish(self, ev_id: int, a: ActiveRun, ev: dict[str, Any], *, listeners: bool = True) -> None:
        self.bus.publish(
            {
                "id": ev_id,
                "run_id": a.id,
                "project": a.project,
                "queue": a.queue,
                "user": a.user,
                "name": (a.resolved or {}).get("name"),
                "parent": a.parent,
                **ev,
            }
        )
        if not listeners:
            return
        status = Status(ev["status"])
        for listener in self.change_listeners:
            listener(a, status)

    def publish_etas(self, runs: dict[str, dict[str, Any]]) -> None:
        """New start estimates (run id → `{project, eta, eta_unknown}`): one bus event, not part of any timeline."""
        if runs:
            self.bus.publish({"type": "eta", "runs": runs})


def _keep_times(a: ActiveRun, cols: dict[str, Any]) -> None:
    """The run's times in memory follow its record (a holding run's elapsed time counts from dispatch)."""
    for k in ("dispatched_at", "started_at"):
        if k in cols:
            a.times[k] = cols[k]
