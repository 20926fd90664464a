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
__all__ = ["DISPATCH_REASONS", "FINAL", "HOLDING", "WAITING", "Reason", "Status", "can_transition"]
