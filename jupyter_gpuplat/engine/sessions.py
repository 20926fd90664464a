"""GPU sessions: the kernel inside a lease, its idle clock, and how a session ends.

A session is a run of kind `session`: only the lease (the run) queues; the kernel is a
process inside it. What the engine cannot see itself (the kernel answered, restarted, went
busy or idle, was shut down) is reported by the Jupyter side (the kernel provisioner) through
`report`. The idle clock is timers on the engine's clock (`call_at`), not a poll: the warning fires
at the deadline less the warn lead, the cull at the deadline (never sooner than the lead after the
warning); a deadline is recomputed on events only — kernel reports, "Keep session", and each GPU
sampling tick for sessions judged by GPU use (`termination.idle_by`; core/idle.py judges and words it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from ..core.errors import Conflict
from ..core.gpu_usage import NotMeasured
from ..core.idle import IdleRule, Judgement, Signals, cull_text, judge, keep_text, status_text, warning_text
from ..core.reasons import Reason
from ..core.status import Status
from .gpu_sampling import SAMPLING_OFF, GpuSampling, TickResult
from .state import ActiveRun, EngineState
from .timers import Timer

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


# Why a session judged by GPU use is judged by its kernel until its first sample arrives.
NO_SAMPLE_YET = "no GPU sample of this session yet"


@dataclass
class Lease:
    """The session side of one running run: its kernel, what its GPUs do, and its idle clock."""

    run_id: str
    rule: IdleRule
    kernel: KernelState = "starting"
    kernel_id: str | None = None
    busy: bool = False
    last_activity: float = 0.0
    # The GPU clock: the last sample at or over the threshold (or the start, a keep, sight regained).
    gpu_since: float = 0.0
    gpu_in_use: bool = False
    gpu_blind: str | None = NO_SAMPLE_YET  # why its GPU use is not seen now; None: it is
    gpu_seen: bool = False  # a sample of it has arrived since the lease (re)started
    warned_at: float | None = None
    warned_deadline: float | None = None
    timers: list[Timer] = field(default_factory=list)

    @property
    def idle_seconds(self) -> int | None:
        return self.rule.idle_seconds

    def signals(self) -> Signals:
        return Signals(self.busy, self.last_activity, self.gpu_since, self.gpu_in_use, self.gpu_blind)

    def judgement(self) -> Judgement:
        return judge(self.rule, self.signals())

    @property
    def deadline(self) -> float | None:
        return self.judgement().deadline

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
        self.gpu_interval_seconds: float | None = None  # set by follow_gpus: None, GPU use is not sampled

    def follow_gpus(self, gpu: GpuSampling) -> None:
        """Read each GPU sampling tick (sessions judged idle by GPU use)."""
        self.gpu_interval_seconds = gpu.interval_seconds
        gpu.listeners.append(self.gpu_tick)

    # ---- from the reconciler ------------------------------------------------
    def started(self, a: ActiveRun) -> None:
        """The lease's process runs: the kernel is starting; the idle clock starts now."""
        if a.id in self.leases:
            return
        now = self.s.clock()
        # A re-attached session's clocks start again too: a restart never ends one early.
        lease = Lease(a.id, IdleRule.of(a.resolved.get("termination")), last_activity=now, gpu_since=now)
        if not self.gpu_interval_seconds:
            lease.gpu_blind = SAMPLING_OFF.reason
        self.leases[a.id] = lease
        self._arm(lease)

    def kept(self, run_id: str) -> None:
        """Re-attached after a restart, its kernel still up in the agent (no notebook has connected yet)."""
        lease = self.leases.get(run_id)
        if lease is not None and lease.kernel == "starting":
            lease.kernel = "ready"

    def close(self) -> None:
        for lease in self.leases.values():
            lease.cancel()

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
            lease.busy, lease.last_activity = False, now
            details = {"devices": list(a.devices), "kernel_id": lease.kernel_id}
            self.s.record(a, a.status, Reason.KERNEL_READY, f"kernel ready on {devices}", details=details)
        elif event == "restarted":
            lease.kernel, lease.last_activity, lease.busy = "ready", now, False
            message = f"kernel restarted inside the session; it keeps {devices}"
            self.s.record(a, a.status, Reason.KERNEL_RESTARTED, message, details={"devices": list(a.devices)})
        elif event == "busy":
            lease.busy = True
        elif event == "idle":
            lease.busy, lease.last_activity = False, now
        elif event == "shutdown":
            if kernel_id and lease.kernel_id and kernel_id != lease.kernel_id:
                return  # a kernel the lease has moved on from (the notebook's newer kernel holds it now)
            self.ender.end(a, Reason.KERNEL_SHUTDOWN, f"the kernel was shut down; {devices} returned", a.user)
            return
        self._arm(lease)

    def keepalive(self, user: str, run_id: str) -> None:
        """The owner's "Keep session": the idle clocks (kernel and GPU) start again."""
        a, lease = self._lease(run_id)
        now = self.s.clock()
        lease.last_activity, lease.gpu_since = now, max(lease.gpu_since, now)
        lease.warned_at = lease.warned_deadline = None
        deadline = lease.deadline
        kept = keep_text(lease.rule, lease.signals())
        message = f"kept by {user}" + (f"; {kept}" if deadline and kept else "")
        self.s.record(a, a.status, Reason.KEEP_ALIVE, message, details={"deadline": deadline})
        self._arm(lease)

    # ---- from GPU sampling -------------------------------------------------------
    def gpu_tick(self, got: TickResult) -> None:
        """One sampling tick: each session judged by GPU use moves its GPU clock, or is judged by its kernel."""
        for lease in list(self.leases.values()):
            if lease.rule.idle_by == "kernel" or lease.idle_seconds is None:
                continue
            before = lease.judgement()
            samples = got if isinstance(got, NotMeasured) else got.get(lease.run_id)
            if isinstance(samples, NotMeasured):
                lease.gpu_blind, lease.gpu_in_use = samples.reason, False
            elif not samples:
                lease.gpu_blind, lease.gpu_in_use = "no GPU samples of this session's devices", False
            else:
                if lease.gpu_blind is not None and lease.gpu_seen:
                    # Sight is back: what the GPUs did while unseen is unknown, never counted as idle.
                    lease.gpu_since = max(lease.gpu_since, min(x.at for x in samples))
                busy_at = [x.at for x in samples if x.util_percent >= lease.rule.gpu_threshold]
                lease.gpu_blind, lease.gpu_seen, lease.gpu_in_use = None, True, bool(busy_at)
                if busy_at:
                    lease.gpu_since = max(lease.gpu_since, max(busy_at))
            if lease.judgement() != before:
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
        a = self.s.active.get(run_id)
        gpus = gpus_text(a.devices, a.request.gpu) if a is not None else "its GPUs"
        j, rule = lease.judgement(), lease.rule
        return {
            "kernel": lease.kernel,
            "kernel_id": lease.kernel_id,
            "busy": lease.busy,
            "idle_seconds": lease.idle_seconds,
            "idle_deadline": j.deadline,
            "last_activity": lease.last_activity,
            "idle_by": rule.idle_by,
            "idle_judged_by": j.by,
            "gpu_idle_threshold": rule.gpu_threshold,
            "cull_busy_kernel": rule.cull_busy_kernel,
            "idle_since": j.since,
            "gpu_last_busy": lease.gpu_since if lease.gpu_seen else None,
            "gpu_not_measured": lease.gpu_blind if rule.idle_by != "kernel" else None,
            "idle_reason": status_text(rule, lease.signals(), gpus, self.s.clock()),
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
        """Timers for the lease's deadline as it stands: the warning, then the cull (not while a cell waits)."""
        lease.cancel()
        j = lease.judgement()
        if j.deadline is None or lease.idle_seconds is None:
            return
        if lease.warned_deadline is not None and j.deadline > lease.warned_deadline:
            lease.warned_at = lease.warned_deadline = None  # used since the warning: it no longer stands
        lead = warn_lead(lease.idle_seconds)
        if lease.warned_at is None:
            warn_at = max(self.s.clock(), j.deadline - lead)
            lease.timers.append(self.s.timers.call_at(warn_at, lambda: self._warn(lease)))
            cull_at = max(j.deadline, warn_at + lead)
        else:
            cull_at = max(j.deadline, lease.warned_at + lead)
        if not j.waits_for_cell:  # a cell running while its GPUs idle ends first; its `idle` report re-arms
            lease.timers.append(self.s.timers.call_at(cull_at, lambda: self._cull(lease)))

    def _warn(self, lease: Lease) -> None:
        a = self.s.active.get(lease.run_id)
        deadline = lease.deadline
        if a is None or a.status != Status.RUNNING or deadline is None or lease.idle_seconds is None:
            return
        now = self.s.clock()
        lease.warned_at, lease.warned_deadline = now, deadline
        signals = lease.signals()
        message = warning_text(lease.rule, signals, gpus_text(a.devices, a.request.gpu), now)
        j = lease.judgement()
        details = {"idle_seconds": lease.idle_seconds, "deadline": deadline, "idle_by": j.by, "idle_since": j.since}
        self.s.deferred.apply(
            f"idle warning of {a.id}",
            lambda: self.s.record(a, a.status, Reason.IDLE_WARNING, message, details=details),
        )

    def _cull(self, lease: Lease) -> None:
        a = self.s.active.get(lease.run_id)
        j = lease.judgement()
        if a is None or a.status != Status.RUNNING or j.deadline is None or j.waits_for_cell:
            return
        message = cull_text(lease.rule, lease.signals(), gpus_text(a.devices, a.request.gpu), self.s.clock())
        self.ender.end(a, Reason.IDLE_TIMEOUT, message, "the idle culler")
