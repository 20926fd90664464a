"""GPU sessions: the kernel inside a lease, its idle clock, and how a session ends.

A session is a run of kind `session`: only the lease (the run) queues; the kernel is a
process inside it. What the engine cannot see itself (the kernel answered, restarted, went
busy or idle, was shut down) is reported by the Jupyter side (the kernel provisioner) through
`report`. The idle clock is timers on the loop (`call_at`), not a poll: the warning fires at
the deadline less WARN_LEAD, the cull at the deadline; a busy kernel has no deadline.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from ..core.errors import Conflict
from ..core.reasons import Reason
from ..core.status import Status
from .state import ActiveRun, EngineState

# The warning comes this long before the cull: 10% of the idle limit, at most 10 minutes.
WARN_FRACTION = 0.1
WARN_LEAD_MAX_SECONDS = 600.0
# What the agent exits with when the kernel kept dying (executors/kernel_agent.py, which is stdlib only).
KERNEL_DIED_EXIT = 75

KernelState = Literal["waiting", "starting", "ready", "ended"]
KernelEvent = Literal["ready", "restarted", "busy", "idle", "shutdown"]
KERNEL_EVENTS: tuple[str, ...] = ("ready", "restarted", "busy", "idle", "shutdown")


def is_session(a: ActiveRun | dict[str, Any]) -> bool:
    resolved = a.resolved if isinstance(a, ActiveRun) else (a.get("resolved") or {})
    return (resolved or {}).get("kind") == "session"


def gpus_text(devices: tuple[int, ...] | list[int], count: int = 0) -> str:
    """ "GPU 0", "GPUs 0, 1"; where the executor places work itself (no indices of ours), "2 GPUs"."""
    if not devices:
        return f"{count} GPU{'s' if count != 1 else ''}" if count else "no GPU"
    return ("GPU " if len(devices) == 1 else "GPUs ") + ", ".join(str(d) for d in devices)


def warn_lead(idle_seconds: float) -> float:
    return min(WARN_LEAD_MAX_SECONDS, WARN_FRACTION * idle_seconds)


@dataclass
class Lease:
    """The session side of one running run: its kernel and its idle clock."""

    run_id: str
    idle_seconds: int | None
    kernel: KernelState = "starting"
    kernel_id: str | None = None
    busy: bool = False
    last_activity: float = 0.0
    warned: bool = False
    timers: list[asyncio.TimerHandle] = field(default_factory=list)

    @property
    def deadline(self) -> float | None:
        if self.idle_seconds is None or self.busy:
            return None
        return self.last_activity + self.idle_seconds

    def cancel(self) -> None:
        for t in self.timers:
            t.cancel()
        self.timers.clear()


class SessionEnder(Protocol):
    """What sessions need of the reconciler: end a run with the session's own reason."""

    def end(self, a: ActiveRun, reason: str, message: str, by: str) -> None: ...


class Sessions:
    def __init__(self, state: EngineState, ender: SessionEnder) -> None:
        self.s = state
        self.ender = ender
        self.leases: dict[str, Lease] = {}

    # ---- from the reconciler ------------------------------------------------
    def started(self, a: ActiveRun) -> None:
        """The lease's process runs: the kernel is starting; the idle clock starts now."""
        if a.id in self.leases:
            return
        idle = (a.resolved.get("termination") or {}).get("idle_seconds")
        lease = Lease(a.id, int(idle) if idle else None, last_activity=self.s.clock())
        self.leases[a.id] = lease
        self._arm(lease)

    def kept(self, run_id: str) -> None:
        """Re-attached after a restart, its kernel still up in the agent (no notebook has connected yet)."""
        lease = self.leases.get(run_id)
        if lease is not None and lease.kernel == "starting":
            lease.kernel = "ready"

    def ended(self, run_id: str) -> None:
        lease = self.leases.pop(run_id, None)
        if lease is not None:
            lease.cancel()

    # ---- from the Jupyter side (the provisioner) --------------------------------
    def report(self, run_id: str, event: str, kernel_id: str | None = None) -> None:
        """A fact about the session's kernel, from the Jupyter server that runs it (its owner's)."""
        a, lease = self._lease(run_id)
        now = self.s.clock()
        devices = gpus_text(a.devices, a.request.gpu)
        if event == "ready":
            lease.kernel, lease.kernel_id = "ready", kernel_id or lease.kernel_id
            lease.busy, lease.last_activity, lease.warned = False, now, False
            details = {"devices": list(a.devices), "kernel_id": lease.kernel_id}
            self.s.record(a, a.status, Reason.KERNEL_READY, f"kernel ready on {devices}", details=details)
        elif event == "restarted":
            lease.kernel, lease.last_activity, lease.busy, lease.warned = "ready", now, False, False
            message = f"kernel restarted inside the session; it keeps {devices}"
            self.s.record(a, a.status, Reason.KERNEL_RESTARTED, message, details={"devices": list(a.devices)})
        elif event == "busy":
            lease.busy = True
        elif event == "idle":
            lease.busy, lease.last_activity, lease.warned = False, now, False
        elif event == "shutdown":
            if kernel_id and lease.kernel_id and kernel_id != lease.kernel_id:
                return  # a kernel the lease has moved on from (the notebook's newer kernel holds it now)
            self.ender.end(a, Reason.KERNEL_SHUTDOWN, f"the kernel was shut down; {devices} returned", a.user)
            return
        self._arm(lease)

    def keepalive(self, user: str, run_id: str) -> None:
        """The owner's "Keep session": the idle clock starts again."""
        a, lease = self._lease(run_id)
        lease.last_activity, lease.warned = self.s.clock(), False
        deadline = lease.deadline
        message = f"kept by {user}" + (
            f"; ends after {lease.idle_seconds} s without kernel activity" if deadline else ""
        )
        self.s.record(a, a.status, Reason.KEEP_ALIVE, message, details={"deadline": deadline})
        self._arm(lease)

    def move(self, run_id: str, notebook: str) -> None:
        """The session's notebook has a new path: a reload finds the lease there (`GET sessions?notebook=`).

        A name that was the old path (the default) follows; a name someone chose stays. No timeline
        event: nothing happened to the run, and its reason (why it waits, what it runs) stays.
        """
        a = self.s.active.get(run_id)
        if a is None or not is_session(a):
            raise Conflict(f"run {run_id} is not an unfinished session", "only a session's notebook can move")
        session = dict(a.resolved.get("session") or {})
        old, session["notebook"] = session.get("notebook"), notebook
        a.resolved = {**a.resolved, "session": session}
        fields: dict[str, Any] = {}
        if a.resolved.get("name") in (None, old):
            a.resolved["name"] = fields["name"] = notebook[-128:]
        self.s.store.transition(a.id, a.project, {**fields, "resolved": a.resolved}, None)

    def view(self, run_id: str) -> dict[str, Any] | None:
        lease = self.leases.get(run_id)
        if lease is None:
            return None
        return {
            "kernel": lease.kernel,
            "kernel_id": lease.kernel_id,
            "busy": lease.busy,
            "idle_seconds": lease.idle_seconds,
            "idle_deadline": lease.deadline,
            "last_activity": lease.last_activity,
        }

    # ---- the idle clock -----------------------------------------------------
    def _lease(self, run_id: str) -> tuple[ActiveRun, Lease]:
        a = self.s.active.get(run_id)
        if a is None or not is_session(a):
            raise Conflict(f"run {run_id} is not a running session", "only running sessions have a kernel")
        lease = self.leases.get(run_id)
        if lease is None or a.status != Status.RUNNING:
            raise Conflict(f"session {run_id} is {a.status.value}, not running", "wait until its kernel starts")
        return a, lease

    def _arm(self, lease: Lease) -> None:
        lease.cancel()
        deadline = lease.deadline
        if deadline is None or lease.idle_seconds is None:
            return
        loop = asyncio.get_running_loop()
        # Wall-clock deadline → loop time, so the timers fire when the clock says so.
        offset = loop.time() - self.s.clock()
        if not lease.warned:
            lease.timers.append(loop.call_at(deadline - warn_lead(lease.idle_seconds) + offset, self._warn, lease))
        lease.timers.append(loop.call_at(deadline + offset, self._cull, lease))

    def _warn(self, lease: Lease) -> None:
        a = self.s.active.get(lease.run_id)
        if a is None or a.status != Status.RUNNING or lease.deadline is None or lease.idle_seconds is None:
            return
        lease.warned = True
        left = max(0.0, lease.deadline - self.s.clock())
        message = f"no kernel activity for {lease.idle_seconds - left:.0f} s; the session ends in {left:.0f} s"
        details = {"idle_seconds": lease.idle_seconds, "deadline": lease.deadline}
        self.s.deferred.apply(
            f"idle warning of {a.id}",
            lambda: self.s.record(a, a.status, Reason.IDLE_WARNING, message + " unless kept", details=details),
        )

    def _cull(self, lease: Lease) -> None:
        a = self.s.active.get(lease.run_id)
        if a is None or a.status != Status.RUNNING or lease.deadline is None:
            return
        message = f"no kernel activity for {lease.idle_seconds} s; {gpus_text(a.devices, a.request.gpu)} returned"
        self.ender.end(a, Reason.IDLE_TIMEOUT, message, "the idle culler")
