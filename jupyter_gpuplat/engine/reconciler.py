"""The reconciler: executor observations → the run's timeline; finishing and stopping runs.

Executors never write run state: they report `Observation`s, and this records them.
An observation for a run that is no longer active (a repeated final, "running" after
the run ended) changes nothing. Re-attaching to work after a restart lives here too.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from ..core.admission import HeldRun
from ..core.errors import Conflict
from ..core.policy import require_can_stop
from ..core.resources import Resources
from ..core.status import FINAL, Reason, Status
from ..executors.base import ExecutorError, Observation
from .dispatcher import Dispatcher
from .sessions import KERNEL_DIED_EXIT, Sessions, gpus_text, is_session
from .state import ActiveRun, EngineState, log
from .sweeps import Sweep, Sweeps


class Reconciler:
    def __init__(
        self,
        state: EngineState,
        dispatcher: Dispatcher,
        *,
        on_final: Callable[[str, str | None], Coroutine[Any, Any, None]],
        stop_grace_seconds: float | None = None,
    ) -> None:
        self.s = state
        self.d = dispatcher
        self.on_final = on_final  # the last metrics indexing of a run that ended
        self.stop_grace_seconds = stop_grace_seconds
        self.sessions = Sessions(state, self)
        self.sweeps = Sweeps(state)
        self.sweeps.stopper = self
        self.sweeps.waker = dispatcher
        self.sweeps.spawner = dispatcher

    # ---- start-up: reload and re-attach ------------------------------------
    def reload(self, row: dict[str, Any]) -> None:
        """Take one unfinished run from the store back into the snapshot, re-attaching its work."""
        s = self.s
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
            parent=row.get("parent"),
            flavor=row.get("flavor"),
        )
        a.asked = s.asked_flavor(a.resolved)
        s.active[a.id] = a
        if row["kind"] == "sweep":
            counts = s.store.child_counts(a.id)
            ended = sum(n for st, n in counts.items() if st in {x.value for x in FINAL})
            failed = counts.get(Status.FAILED.value, 0)
            self.sweeps.register(a, [], ended=ended, failed=failed, created=sum(counts.values()))
            return
        if a.parent is not None and (sw := self.sweeps.of(a.parent)) is not None:
            sw.children.add(a.id)
        q = s.queues.get(a.queue)
        if q is None:
            # Config lost the queue while the server was down: never leave the run in limbo.
            gone = f"queue {a.queue} no longer exists in the platform config"
            s.deferred.apply(f"loss of {a.id}", lambda: self.finish(a, Status.FAILED, Reason.LOST, gone))
            return
        if a.status in (Status.CREATED, Status.QUEUED):
            q.add_pending(a.pending())
            return
        taken = set(a.devices) - s.free_devices
        if taken:
            log.error("run %s holds devices %s already held by another run", a.id, sorted(taken))
        q.hold(HeldRun(a.id, a.user, a.request, a.devices, a.parent, a.flavor))
        s.take_devices(a.devices)
        if a.handle is None:
            # Dispatch was recorded but the executor never started it: start it now.
            s.spawn(self.d.launch(a))
            return
        obs = s.executor.attach(a.id, a.handle)
        # Start-up writes wait for a store that is down, rather than leave half a snapshot.
        if obs.status == "running":
            message = obs.message or "re-attached after a server restart"
            s.deferred.apply(f"re-attach of {a.id}", lambda: s.record(a, a.status, Reason.REATTACHED, message))
            if a.status == Status.RUNNING and is_session(a):
                self.sessions.started(a)  # its idle clock starts again from the restart
                s.spawn(self._kernel_kept(a))
            if a.stop_requested_by:
                s.spawn(self.stop_in_executor(a))
        else:
            s.deferred.apply(f"{obs.status} of {a.id}", lambda: self.observe(obs))

    async def _kernel_kept(self, a: ActiveRun) -> None:
        """A re-attached session's kernel kept running in its agent: up (not "starting") before a notebook connects."""
        assert a.handle is not None
        try:
            info = await self.s.executor.kernel_connection(a.id, a.handle)
        except ExecutorError as exc:
            log.info("session %s: its kernel's connection is not readable yet: %s", a.id, exc.message)
            return
        if info is not None:
            self.sessions.kept(a.id)

    # ---- observations ---------------------------------------------------------
    def observe(self, obs: Observation) -> None:
        s = self.s
        a = s.active.get(obs.run_id)
        if a is None:
            # Already final (a repeated or late observation) or unknown: nothing to record.
            log.debug("ignoring %s %s for run %s: not an active run", obs.status, obs.reason, obs.run_id)
            return
        details = dict(obs.details) if obs.details else None
        if obs.status in ("starting", "running"):
            # Execution-side progress: every observation is a new timeline event (a repeated
            # warning is a new episode, never an overwrite). A stopping run stays stopping, and a
            # running one running: an executor that lost track (Kubernetes after a restart reports
            # a preempted run's replacement pod as "starting") never moves the run back.
            status = Status(obs.status)
            if a.status == Status.STOPPING or (a.status == Status.RUNNING and status == Status.STARTING):
                status = a.status
            if status == Status.RUNNING:
                fields = {} if a.status == Status.RUNNING else {"started_at": s.clock()}
                self.record_running(a, obs.reason, obs.message, details=details, **fields)
            else:
                s.record(a, status, obs.reason, obs.message, details=details)
            return
        status = Status(obs.status)
        reason: str = obs.reason
        message = obs.message
        if a.end is not None and status == Status.STOPPED:
            reason, message = a.end
        elif a.stop_requested_by and status == Status.STOPPED:
            message = f"stopped by {a.stop_requested_by}; {obs.message.removeprefix('stopped by request; ')}"
        elif is_session(a) and status == Status.FAILED and obs.exit_code == KERNEL_DIED_EXIT:
            reason = Reason.KERNEL_DIED
            message = f"the kernel kept dying (5 exits within 60 s); {gpus_text(a.devices, a.request.gpu)} returned"
        self.finish(a, status, reason, message, exit_code=obs.exit_code, details=details)

    def sweep_dispatched(self, child: ActiveRun) -> None:
        self.sweeps.dispatched(child)

    def register_sweep(self, parent: ActiveRun, children: list[ActiveRun]) -> Sweep:
        return self.sweeps.register(parent, children)

    def record_running(self, a: ActiveRun, reason: str, message: str, **fields: Any) -> None:
        """The run's process runs; a session's lease now holds its GPUs and its kernel starts."""
        if is_session(a) and reason in (Reason.STARTED, Reason.RUNNING):
            reason, message = (
                Reason.KERNEL_STARTING,
                f"holds {gpus_text(a.devices, a.request.gpu)}; its kernel is starting",
            )
        self.s.record(a, Status.RUNNING, reason, message, **fields)
        if is_session(a):
            self.sessions.started(a)

    def finish(self, a: ActiveRun, status: Status, reason: str, message: str, **fields: Any) -> None:
        s = self.s
        s.record(a, status, reason, message, finished_at=s.clock(), **fields)
        s.active.pop(a.id, None)
        self.sessions.ended(a.id)
        if a.handle is not None:
            s.spawn(self.on_final(a.id, a.parent))
        q = s.queues.get(a.queue)
        if q is not None:
            q.remove_pending(a.id)
            if q.release(a.id) is not None:
                self.d.dirty.add(a.queue)
        if a.devices:
            s.give_devices(a.devices)
            self.d.freed_devices()
        if a.parent is not None:
            self.sweeps.child_ended(a, status)
        self.d.schedule()

    # ---- stop ------------------------------------------------------------
    def stop(self, user: str, row: dict[str, Any]) -> None:
        """Stop a run the user can see: before dispatch it ends now, after it the executor is asked."""
        s = self.s
        run_id = row["id"]
        require_can_stop(s.cfg, user, row)
        a = s.active.get(run_id)
        if a is None:
            raise Conflict(f"run {run_id} has already ended ({row['status']})", "only unfinished runs can be stopped")
        sweep = self.sweeps.of(run_id)
        if sweep is not None:
            self.sweeps.stop(user, sweep)
            return
        self.stop_child(user, a, row)

    def stop_child(self, user: str, a: ActiveRun, row: dict[str, Any]) -> None:
        """Stop one run (permission already checked): before dispatch it ends now, after it the executor is asked."""
        s = self.s
        if a.status in (Status.CREATED, Status.QUEUED):
            self.finish(a, Status.STOPPED, Reason.STOPPED, f"stopped by {user} before dispatch")
            self.d.dirty.add(a.queue)  # a strict FIFO queue may have been waiting behind it
            self.d.schedule()
        elif a.stop_requested_by is None:
            # Recorded first: if the store cannot take it, the caller gets a 503 and nothing changed.
            s.record(a, Status.STOPPING, Reason.STOP_REQUESTED, f"stop requested by {user}", stop_requested_by=user)
            a.stop_requested_by = user
            if a.handle is not None:
                s.spawn(self.stop_in_executor(a))

    def end(self, a: ActiveRun, reason: str, message: str, by: str) -> None:
        """End a session for a reason of its own (idle, its kernel shut down), with that reason as final."""
        if a.status in (Status.CREATED, Status.QUEUED):
            self.finish(a, Status.STOPPED, reason, message)
            return
        if a.stop_requested_by is not None:
            return
        a.end = (reason, message)
        self.s.record(a, Status.STOPPING, Reason.STOP_REQUESTED, f"ending: {message}", stop_requested_by=by)
        a.stop_requested_by = by
        if a.handle is not None:
            self.s.spawn(self.stop_in_executor(a))

    async def stop_in_executor(self, a: ActiveRun) -> None:
        assert a.handle is not None
        await self.s.executor.stop(a.id, a.handle, self.stop_grace_seconds)
