"""Run statuses and the allowed transitions (reason codes: `core/reasons.py`, re-exported)."""

from __future__ import annotations

from enum import StrEnum

from .reasons import DISPATCH_REASONS, Reason


class Status(StrEnum):
    CREATED = "created"
    QUEUED = "queued"
    DISPATCHED = "dispatched"
    STARTING = "starting"
    RUNNING = "running"
    STOPPING = "stopping"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    STOPPED = "stopped"


FINAL = frozenset({Status.SUCCEEDED, Status.FAILED, Status.STOPPED})
# Statuses in which a run holds its queue slot and quota: from dispatch until it ends.
HOLDING = frozenset({Status.DISPATCHED, Status.STARTING, Status.RUNNING, Status.STOPPING})
WAITING = frozenset({Status.CREATED, Status.QUEUED})


class Phase(StrEnum):
    """Where a status sits in the lifecycle: our queue (dispatch), the executor placing and starting it
    (execution), its process (run), or over (end). The one table: run views carry it as `phase`."""

    DISPATCH = "dispatch"
    EXECUTION = "execution"
    RUN = "run"
    END = "end"


_PHASE: dict[str, Phase] = {
    Status.CREATED: Phase.DISPATCH,
    Status.QUEUED: Phase.DISPATCH,
    Status.DISPATCHED: Phase.EXECUTION,
    Status.STARTING: Phase.EXECUTION,
    Status.RUNNING: Phase.RUN,
    Status.STOPPING: Phase.RUN,
}


def phase_of(status: str) -> Phase:
    """The phase of a status (a final status, or one this version does not know, is the end)."""
    return _PHASE.get(status, Phase.END)


def statuses_in(phases: list[str] | frozenset[str]) -> list[Status]:
    """The statuses whose phase is one of `phases` (a `GET runs?phase=` filter, so clients hold no status lists)."""
    return [s for s in Status if phase_of(s).value in phases]


def is_final(status: str) -> bool:
    return status in FINAL


_NEXT: dict[Status, frozenset[Status]] = {
    Status.CREATED: frozenset({Status.QUEUED, Status.STOPPED, Status.FAILED}),
    Status.QUEUED: frozenset({Status.QUEUED, Status.DISPATCHED, Status.STOPPED, Status.FAILED}),
    Status.DISPATCHED: frozenset({Status.DISPATCHED, Status.STARTING, Status.RUNNING, Status.STOPPING} | FINAL),
    Status.STARTING: frozenset({Status.STARTING, Status.RUNNING, Status.STOPPING} | FINAL),
    Status.RUNNING: frozenset({Status.RUNNING, Status.STOPPING} | FINAL),
    Status.STOPPING: frozenset({Status.STOPPING} | FINAL),
}


# A sweep's parent holds no slot: it runs from its first child's dispatch, and may be stopped while queued.
_SWEEP_NEXT: dict[Status, frozenset[Status]] = {Status.QUEUED: frozenset({Status.RUNNING, Status.STOPPING})}


def can_transition(old: Status, new: Status, *, sweep: bool = False) -> bool:
    return new in _NEXT.get(old, frozenset()) or (sweep and new in _SWEEP_NEXT.get(old, frozenset()))


# Reason codes live in one registry (core/reasons.py); re-exported here, where they always were.
__all__ = [
    "DISPATCH_REASONS",
    "FINAL",
    "HOLDING",
    "WAITING",
    "Phase",
    "Reason",
    "Status",
    "can_transition",
    "is_final",
    "phase_of",
    "statuses_in",
]
