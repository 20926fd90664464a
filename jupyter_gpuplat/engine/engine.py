"""The engine: dispatcher + reconciler over an in-memory snapshot.

Every run state change goes through `_record`, which persists the change and its
timeline event in one transaction, then publishes it. Decisions are made by the
pure functions in core.admission over `QueueState`s kept here; the store is only
read at start-up. A dispatch is recorded before the executor starts the work.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..core.admission import (
    HeldRun,
    PendingRun,
    QueueLimits,
    QueueState,
    choose,
    order_queues,
    pick_devices,
    wait_reason,
)
from ..core.config import PlatformConfig, QueueConfig, dump_config, parse_config
from ..core.errors import Conflict, Forbidden, NotFound, Unprocessable
from ..core.policy import can_stop, has_role, is_platform_admin, resolve, visible_projects
from ..core.request import CELL_FILE, RunRequest
from ..core.resources import Resources
from ..core.status import FINAL, HOLDING, Reason, Status, can_transition
from ..executors.base import Executor, LaunchRequest, Observation
from ..store import Store
from .bus import EventBus
from .metrics import MetricsIndexer

log = logging.getLogger("jupyter_gpuplat.engine")
UNLIMITED_GPUS = 1 << 30


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

    def pending(self) -> PendingRun:
        return PendingRun(self.id, self.seq, self.queue, self.user, self.request)


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
    ) -> None:
        self.store = store
        self.executor = executor
        self.artifacts_root = artifacts_root
        self.clock = clock
        self.new_id = new_id
        self.stop_grace_seconds = stop_grace_seconds
        self.safety_tick_seconds = safety_tick_seconds
        self.metrics_interval_seconds = metrics_interval_seconds
        self.metrics = MetricsIndexer(store, artifacts_root)
        self._metrics_task: asyncio.Task[None] | None = None
        self.cfg = PlatformConfig()
        self.config_version = 0
        self.queues: dict[str, QueueState] = {}
        self.active: dict[str, ActiveRun] = {}
        self.devices = executor.devices()
        self.free_devices: set[int] = {d.index for d in self.devices}
        # A cluster executor places work itself: our queues still count GPUs, devices are not ours.
        self.assigns_devices = executor.assigns_devices
        self.bus = EventBus()
        self._dirty: set[str] = set()
        self._capacity_waiters: set[str] = set()
        self._newly_queued: list[str] = []
        self._cycle_handle: asyncio.Handle | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._tick: asyncio.Task[None] | None = None
        self.cycles = 0

    # ---- start-up --------------------------------------------------------
    async def start(self, config: PlatformConfig | None = None, *, source: str = "", by: str = "") -> None:
        """Load config and every unfinished run, re-attach running work, then dispatch."""
        body, version = self.store.get_config()
        if body is not None:
            self._set_config(parse_config(body), version)
        if config is not None:
            self.apply_config(config, source=source, by=by or "startup")
        self.executor.set_observer(self._observe)
        for row in self.store.active_runs():
            await self._reload(row)
        self._dirty |= set(self.queues)
        self._schedule()
        self._tick = asyncio.ensure_future(self._safety_tick_loop())
        self._metrics_task = asyncio.ensure_future(self._metrics_loop())

    async def _reload(self, row: dict[str, Any]) -> None:
        a = ActiveRun(
            id=row["id"],
            seq=row["seq"],
            project=row["project"],
            user=row["user"],
            queue=row["queue"],
            status=Status(row["status"]),
            request=Resources(row["gpu"], row["cpu_milli"], row["memory_bytes"]),
            resolved=row["resolved"],
            devices=tuple(row["devices"] or ()),
            handle=row["handle"],
            stop_requested_by=row["stop_requested_by"],
            times={k: row[k] for k in ("created_at", "queued_at", "dispatched_at", "started_at")},
        )
        q = self.queues.get(a.queue)
        if q is None:
            # Config lost the queue while the server was down: never leave the run in limbo.
            self.active[a.id] = a
            self._finish(a, Status.FAILED, Reason.LOST, f"queue {a.queue} no longer exists in the platform config")
            return
        self.active[a.id] = a
        if a.status in (Status.CREATED, Status.QUEUED):
            q.add_pending(a.pending())
            return
        taken = set(a.devices) - self.free_devices
        if taken:
            log.error("run %s holds devices %s already held by another run", a.id, sorted(taken))
        q.hold(HeldRun(a.id, a.user, a.request, a.devices))
        self.free_devices -= set(a.devices)
        if a.handle is None:
            # Dispatch was recorded but the executor never started it: start it now.
            self._spawn(self._launch(a))
            return
        obs = self.executor.attach(a.id, a.handle)
        if obs.status == "running":
            self._record(a, a.status, Reason.REATTACHED, obs.message or "re-attached after a server restart")
            if a.stop_requested_by:
                self._spawn(self._stop_in_executor(a))
        else:
            self._observe(obs)

    # ---- config ----------------------------------------------------------
    def _set_config(self, cfg: PlatformConfig, version: int) -> None:
        self.cfg = cfg
        self.config_version = version
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
        self._dirty |= names

    def apply_config(self, cfg: PlatformConfig, *, source: str, by: str) -> int:
        """Make `cfg` the platform config (declarative: what is not in it is removed)."""
        keep = {q.name for q in cfg.queues}
        busy = sorted(n for n, q in self.queues.items() if n not in keep and (q.held or q.pending_count))
        if busy:
            raise Conflict(
                f"cannot remove queue(s) {', '.join(busy)}: runs are still waiting or running in them",
                "stop those runs or let them finish, then apply again",
            )
        version = self.store.put_config(dump_config(cfg), source=source, by=by, at=self.clock())
        self._set_config(cfg, version)
        self._schedule()
        return version

    def put_config_item(self, user: str, section: str, item: dict[str, Any]) -> int:
        """Create or replace one named queue, preset or project; the whole config is re-validated."""

        def change(body: dict[str, Any]) -> None:
            kept = [x for x in body.get(section, []) if x["name"] != item["name"]]
            body[section] = [*kept, item]

        return self.update_config(user, change, source=f"api:PUT {section}/{item['name']}")

    def delete_config_item(self, user: str, section: str, name: str) -> int:
        known = [x.name for x in getattr(self.cfg, section)]
        if name not in known:
            raise NotFound(f"{section[:-1]} {name!r} not found", f"{section}: {', '.join(known) or 'none'}")

        def change(body: dict[str, Any]) -> None:
            body[section] = [x for x in body.get(section, []) if x["name"] != name]

        return self.update_config(user, change, source=f"api:DELETE {section}/{name}")

    def update_config(self, user: str, change: Callable[[dict[str, Any]], None], *, source: str) -> int:
        """Apply an admin write: edit a copy of the config document, re-validate it whole."""
        body = dump_config(self.cfg)
        change(body)
        return self.apply_config(parse_config(body), source=source, by=user)

    # ---- submission ------------------------------------------------------
    def preview(self, user: str, req: RunRequest) -> dict[str, Any]:
        res = resolve(self.cfg, user, req)
        violations = list(res.violations)
        cap = self._capacity_violation(res.resources)
        if cap:
            violations.append(cap)
        return {
            "resolved": res.resolved,
            "provenance": res.provenance,
            "layers": list(res.layers),
            "verdict": {"allowed": not violations, "violations": [v.to_dict() for v in violations]},
        }

    @property
    def free_gpus(self) -> int:
        return len(self.free_devices) if self.assigns_devices else UNLIMITED_GPUS

    def _capacity_violation(self, req: Resources) -> Unprocessable | None:
        if self.assigns_devices and req.gpu > len(self.devices):
            return Unprocessable(
                f"requests {req.gpu} GPU(s) but this platform has {len(self.devices)} in all: it could never start",
                f"ask for at most {len(self.devices)} GPU(s)",
                code="NoCapacity",
            )
        return None

    def submit(self, user: str, req: RunRequest) -> dict[str, Any]:
        res = resolve(self.cfg, user, req)
        res.raise_first()
        cap = self._capacity_violation(res.resources)
        if cap:
            raise cap
        qname = res.queue
        assert qname is not None
        now = self.clock()
        rid = self.new_id()
        r = res.resources
        q = self.queues[qname]
        row = {
            "id": rid,
            "project": req.project,
            "user": user,
            "name": res.resolved.get("name"),
            "kind": res.resolved.get("kind", "job"),
            "queue": qname,
            "status": Status.QUEUED.value,
            "reason": Reason.SUBMITTED.value,
            "message": f"waiting for dispatch in queue {qname}",
            "request": req.model_dump(mode="json", exclude_unset=True),
            "resolved": res.resolved,
            "provenance": res.provenance,
            "gpu": r.gpu,
            "cpu_milli": r.cpu_milli,
            "memory_bytes": r.memory_bytes,
            "created_at": now,
            "queued_at": now,
            "updated_at": now,
        }
        evs = [
            {"status": "created", "reason": Reason.SUBMITTED.value, "message": f"submitted by {user}", "at": now},
            {
                "status": "queued",
                "reason": Reason.SUBMITTED.value,
                "message": f"waiting for dispatch in queue {qname} (priority {q.limits.priority})",
                "at": now,
            },
        ]
        seq, ev_ids = self.store.create_run(row, evs)
        a = ActiveRun(rid, seq, req.project, user, qname, Status.QUEUED, r, res.resolved, times={"created_at": now})
        a.provenance = dict(res.provenance)
        self.active[rid] = a
        q.add_pending(a.pending())
        for ev_id, ev in zip(ev_ids, evs, strict=True):
            self._publish(ev_id, a, ev)
        self._newly_queued.append(rid)
        self._dirty.add(qname)
        self._schedule()
        # The full row, as the store now holds it, without reading it back.
        row.update(seq=seq, devices=None, handle=None, exit_code=None, stop_requested_by=None)
        row.update(dispatched_at=None, started_at=None, finished_at=None)
        return row

    # ---- the admission cycle --------------------------------------------
    def wake(self, queue: str | None = None) -> None:
        self._dirty |= {queue} if queue else set(self.queues)
        self._schedule()

    def _schedule(self) -> None:
        # Wake-ups merge: many events before the loop turns cost one cycle.
        if self._cycle_handle is None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                return
            self._cycle_handle = loop.call_soon(self.run_cycle)

    def run_cycle(self) -> list[str]:
        """Decide over the snapshot, assume, persist, hand to the executor. Returns admitted ids."""
        self._cycle_handle = None
        self.cycles += 1
        dirty = [self.queues[n] for n in self._dirty if n in self.queues]
        self._dirty.clear()
        admitted: list[tuple[ActiveRun, QueueState]] = []
        for q in order_queues(dirty):
            self._capacity_waiters.discard(q.limits.name)
            while True:
                run, capacity_blocked = choose(q, self.free_gpus)
                if run is None:
                    if capacity_blocked:
                        self._capacity_waiters.add(q.limits.name)
                    break
                devices = pick_devices(self.free_devices, run.request.gpu) if self.assigns_devices else ()
                self.free_devices -= set(devices)
                q.assume(run, devices)
                a = self.active[run.id]
                a.devices = devices
                admitted.append((a, q))
        for a, q in admitted:
            lim = q.limits
            conc = f"{len(q.held)}/{lim.concurrency}" if lim.concurrency is not None else f"{len(q.held)}"
            gpus = f"{q.used.gpu}/{lim.quota.gpu}" if lim.quota.gpu is not None else f"{q.used.gpu}"
            dev = ",".join(map(str, a.devices)) or "none"
            self._record(
                a,
                Status.DISPATCHED,
                Reason.ADMITTED,
                f"admitted by queue {lim.name} ({conc} runs, {gpus} GPUs in use); devices {dev}",
                devices=list(a.devices),
                dispatched_at=self.clock(),
            )
            self._spawn(self._launch(a))
        if self._newly_queued:
            fresh, self._newly_queued = self._newly_queued, []
            for rid in fresh:
                waiting = self.active.get(rid)
                if waiting is None or waiting.status != Status.QUEUED:
                    continue
                q = self.queues[waiting.queue]
                p = q.pending(rid)
                if p is not None:
                    w = wait_reason(q, p, self.free_gpus)
                    self._record(waiting, Status.QUEUED, w.reason, w.message)
        return [a.id for a, _ in admitted]

    async def _launch(self, a: ActiveRun) -> None:
        spec = a.resolved
        env = {e["name"]: e["value"] for e in spec.get("env") or [] if e.get("value") is not None}
        if spec.get("params"):
            env["GPUPLAT_PARAMS"] = json.dumps(spec["params"])
        term = spec.get("termination") or {}
        if a.provenance is None:
            a.provenance = dict((self.store.get_run(a.id) or {}).get("provenance") or {})
        req = LaunchRequest(
            run_id=a.id,
            command=list(spec["command"]),
            env=env,
            devices=a.devices,
            workdir=os.path.join(self.artifacts_root, a.id),
            timeout_seconds=term.get("timeout_seconds"),
            spec=spec,
            project=a.project,
            user=a.user,
            provenance=a.provenance,
        )
        a.launching = True
        try:
            if spec.get("code") is not None:
                # A notebook cell runs as a file: tracebacks then show its lines.
                os.makedirs(req.workdir, exist_ok=True)
                with open(os.path.join(req.workdir, CELL_FILE), "w", encoding="utf-8") as f:
                    f.write(spec["code"])
            handle = await self.executor.submit(req)
        except Exception as exc:  # the executor's message is what the user needs
            a.launching = False
            log.warning("run %s failed to start: %s", a.id, exc)
            self._finish(a, Status.FAILED, Reason.START_FAILED, f"could not start: {exc}")
            return
        a.launching = False
        a.handle = handle
        if a.id not in self.active:
            return
        pid = handle.get("pid")
        where = f"pid {pid}" if pid else str(handle.get("summary") or "executor")
        started = f"started as {where} on devices {','.join(map(str, a.devices)) or 'none'}"
        if self.executor.reports_start:
            # Handed over, not running yet: the executor reports "running" when it is.
            started = f"submitted as {where}; waiting for the executor to start it"
        if a.stop_requested_by:
            # Stopped while it was being started: keep it `stopping`, then stop it.
            self._record(a, Status.STOPPING, Reason.STARTED, f"{started}; stopping as requested", handle=handle)
            await self._stop_in_executor(a)
            return
        if self.executor.reports_start:
            self._record(a, Status.STARTING, Reason.SUBMITTED, started, handle=handle)
            return
        self._record(a, Status.RUNNING, Reason.STARTED, started, handle=handle, started_at=self.clock())

    # ---- reconciler --------------------------------------------------------
    def _observe(self, obs: Observation) -> None:
        a = self.active.get(obs.run_id)
        if a is None:
            return
        details = dict(obs.details) if obs.details else None
        if obs.status in ("starting", "running"):
            # Execution-side progress: every observation is a new timeline event (a repeated
            # warning is a new episode, never an overwrite). A stopping run stays stopping.
            status = Status(obs.status) if a.status != Status.STOPPING else Status.STOPPING
            fields: dict[str, Any] = {}
            if status == Status.RUNNING and a.status != Status.RUNNING:
                fields["started_at"] = self.clock()
            self._record(a, status, obs.reason, obs.message, details=details, **fields)
            return
        status = Status(obs.status)
        message = obs.message
        if a.stop_requested_by and status == Status.STOPPED:
            message = f"stopped by {a.stop_requested_by}; {obs.message.removeprefix('stopped by request; ')}"
        self._finish(a, status, obs.reason, message, exit_code=obs.exit_code, details=details)

    def _finish(self, a: ActiveRun, status: Status, reason: str, message: str, **fields: Any) -> None:
        self._record(a, status, reason, message, finished_at=self.clock(), **fields)
        self.active.pop(a.id, None)
        if a.handle is not None:
            self._spawn(self._final_index(a.id))
        q = self.queues.get(a.queue)
        if q is not None:
            q.remove_pending(a.id)
            if q.release(a.id) is not None:
                self._dirty.add(a.queue)
        if a.devices:
            self.free_devices |= set(a.devices)
            # Freed GPUs may unblock any queue that waited on local capacity.
            self._dirty |= self._capacity_waiters
        self._schedule()

    # ---- stop ------------------------------------------------------------
    async def stop(self, user: str, run_id: str) -> dict[str, Any]:
        row = self.get_visible(user, run_id)
        if not can_stop(self.cfg, user, row["project"], row["user"]):
            raise Forbidden(
                f"{user} may not stop run {run_id} (owned by {row['user']})",
                "the run's owner, project admins and platform admins can stop it",
            )
        a = self.active.get(run_id)
        if a is None:
            raise Conflict(f"run {run_id} has already ended ({row['status']})", "only unfinished runs can be stopped")
        if a.status in (Status.CREATED, Status.QUEUED):
            self._finish(a, Status.STOPPED, Reason.STOPPED, f"stopped by {user} before dispatch")
            self._dirty.add(a.queue)  # a strict FIFO queue may have been waiting behind it
            self._schedule()
        elif a.stop_requested_by is None:
            a.stop_requested_by = user
            self._record(a, Status.STOPPING, Reason.STOP_REQUESTED, f"stop requested by {user}", stop_requested_by=user)
            if a.handle is not None:
                self._spawn(self._stop_in_executor(a))
        return self.store.get_run(run_id) or row

    async def _stop_in_executor(self, a: ActiveRun) -> None:
        assert a.handle is not None
        await self.executor.stop(a.id, a.handle, self.stop_grace_seconds)

    # ---- recording ---------------------------------------------------------
    def _record(
        self,
        a: ActiveRun,
        status: Status,
        reason: str,
        message: str,
        details: dict[str, Any] | None = None,
        **fields: Any,
    ) -> None:
        if not can_transition(a.status, status):
            # Never drop an observation: record it, but make the broken invariant loud.
            log.error("run %s: unexpected transition %s -> %s (%s)", a.id, a.status, status, reason)
        now = self.clock()
        ev: dict[str, Any] = {"status": status.value, "reason": str(reason), "message": message, "at": now}
        if details:
            ev["details"] = details
        cols = {"status": status.value, "reason": str(reason), "message": message, "updated_at": now, **fields}
        ev_id = self.store.transition(a.id, a.project, cols, ev)
        a.status = status
        assert ev_id is not None
        self._publish(ev_id, a, ev)

    def _publish(self, ev_id: int, a: ActiveRun, ev: dict[str, Any]) -> None:
        self.bus.publish(
            {
                "id": ev_id,
                "run_id": a.id,
                "project": a.project,
                "queue": a.queue,
                "user": a.user,
                "name": (a.resolved or {}).get("name"),
                **ev,
            }
        )

    # ---- reads with access control ------------------------------------------
    def get_visible(self, user: str, run_id: str) -> dict[str, Any]:
        row = self.store.get_run(run_id)
        if row is None or not has_role(self.cfg, user, row["project"], "viewer"):
            # Unknown and invisible look alike: ids of other teams' runs leak nothing.
            raise NotFound(f"run {run_id!r} not found", "list your runs with GET /gpuplat/api/runs")
        return row

    def visible_projects(self, user: str) -> list[str]:
        return visible_projects(self.cfg, user)

    def is_admin(self, user: str) -> bool:
        return is_platform_admin(self.cfg, user)

    def is_final(self, run_id: str) -> bool:
        return run_id not in self.active

    # ---- background ----------------------------------------------------------
    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

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
                except Exception:  # a damaged file must not stop indexing of the others
                    log.exception("indexing metrics of run %s failed", rid)

    async def _final_index(self, run_id: str) -> None:
        try:
            await self.index_metrics(run_id)
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
        if self._cycle_handle is not None:
            self._cycle_handle.cancel()
        for t in list(self._tasks):
            t.cancel()
        await self.executor.close()


__all__ = ["FINAL", "HOLDING", "ActiveRun", "Engine", "queue_limits"]
