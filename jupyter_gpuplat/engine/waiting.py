"""Why runs wait, for lists: the reason and message explain gives, from the in-memory snapshot.

`GET runs` says for each run that has not started why it waits (`waiting`), and `GET queues`
lists a queue's pending runs with their positions and start estimates (the kept ones: `eta_of`).
Both read only the snapshot (queue states and active runs): no store read, no explain per row.
Messages are the dispatcher's own (`wait_reason`), which name no other team's run or user
(core.admission.shared_message); pending runs of projects the caller may not see are counted,
never named.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..core.admission import QueueState, wait_reason
from ..core.eta import view
from ..core.reasons import Layer, layer_of
from ..core.status import Status
from .estimates import Estimates
from .state import EngineState

# A queue lists at most this many of the caller's pending runs (the count says how many in all).
PENDING_LISTED = 100
_NOT_STARTED = (Status.DISPATCHED, Status.STARTING)


def waiting_of(s: EngineState, row: dict[str, Any]) -> dict[str, str] | None:
    """`{reason, message}` for a run that waits (our queue or the executor holds it), else None."""
    a = s.active.get(row["id"])
    if a is None:
        return None
    if a.status in (Status.CREATED, Status.QUEUED):
        q = s.queues.get(a.queue)
        p = q.pending(a.id) if q is not None else None
        if q is None or p is None:
            return None  # a sweep's parent: its children wait, each with its own reason
        w = wait_reason(q, p, s.free_gpus, s.free_by_flavor)
        return {"reason": str(w.reason), "message": w.message}
    reason, message = str(row.get("reason") or ""), str(row.get("message") or "")
    # Dispatched, not started (or a replacement after a preemption): the executor's latest word.
    if a.status in _NOT_STARTED or (a.status == Status.RUNNING and layer_of(reason) in (Layer.EXECUTOR, Layer.QUEUE)):
        return {"reason": reason, "message": message} if reason else None
    return None


def eta_of(s: EngineState, estimates: Estimates, row: dict[str, Any]) -> tuple[dict[str, Any] | None, str | None]:
    """`(eta, eta_unknown)` of a run that has not started: our queue's estimate, or why there is none.

    A run dispatched and not started is the executor's to start: on a cluster Kubernetes holds it
    (the estimate covers our queue only, so none is invented for the wait for nodes).
    """
    a = s.active.get(row["id"])
    if a is None:
        return None, None
    if a.status in (Status.CREATED, Status.QUEUED):
        k = estimates.of(a.id)
        return view(k.estimate, k.computed_at, s.clock()) if k is not None else (None, None)
    if a.status in _NOT_STARTED:
        if s.assigns_devices:
            return None, "dispatched: the executor is starting it now"
        return (
            None,
            "dispatched to Kubernetes, which holds it until a node has room; our estimate covers our queue only",
        )
    return None, None


def pending_runs(
    s: EngineState, estimates: Estimates, q: QueueState, visible: Iterable[str]
) -> tuple[list[dict[str, Any]], int]:
    """The caller's visible pending runs of `q` in dispatch-position order (at most PENDING_LISTED), each with
    its start estimate (`eta`, `eta_unknown`: as `GET runs` gives them), and how many pending runs are of
    projects the caller may not see (counted, not named)."""
    projects = set(visible)
    listed: list[dict[str, Any]] = []
    hidden = 0
    for position, p in enumerate(q.ordered_pending(), start=1):
        a = s.active.get(p.id)
        if a is None or a.project not in projects:
            hidden += 1
            continue
        if len(listed) < PENDING_LISTED:
            name = a.resolved.get("name")
            eta, unknown = eta_of(s, estimates, {"id": a.id})
            listed.append(
                {
                    "id": a.id,
                    "name": name,
                    "project": a.project,
                    "user": a.user,
                    "position": position,
                    "eta": eta,
                    "eta_unknown": unknown,
                }
            )
    return listed, hidden
