"""Run statuses, the allowed transitions, and typed reason codes."""

from __future__ import annotations

from enum import StrEnum


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


def can_transition(old: Status, new: Status) -> bool:
    return new in _NEXT.get(old, frozenset())


class Reason(StrEnum):
    # dispatch side (our queue holds the run)
    QUEUE_CONCURRENCY = "QueueConcurrency"
    QUEUE_QUOTA = "QueueQuota"
    USER_LIMIT = "UserLimit"
    SWEEP_CONCURRENCY = "SweepConcurrency"
    QUEUE_PAUSED = "QueuePaused"
    NO_CAPACITY = "NoCapacity"
    BEHIND_HEAD = "BehindQueueHead"
    PRIORITY = "WaitingForHigherPriority"
    # lifecycle
    SUBMITTED = "Submitted"
    ADMITTED = "Admitted"
    STARTED = "Started"
    REATTACHED = "Reattached"
    COMPLETED = "Completed"
    ERROR = "Error"
    SIGNALED = "Signaled"
    STOP_REQUESTED = "StopRequested"
    STOPPED = "Stopped"
    TIMED_OUT = "TimedOut"
    LOST = "Lost"
    START_FAILED = "StartFailed"


DISPATCH_REASONS = frozenset(
    {
        Reason.QUEUE_CONCURRENCY,
        Reason.QUEUE_QUOTA,
        Reason.USER_LIMIT,
        Reason.SWEEP_CONCURRENCY,
        Reason.QUEUE_PAUSED,
        Reason.NO_CAPACITY,
        Reason.BEHIND_HEAD,
    }
)
