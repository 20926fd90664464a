"""How a run's pods read: whether its container started or ended, where it runs, how a session ended from outside."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ...core.reasons import Reason
from ..base import FAILED, SUCCEEDED, Observation
from .cache import Snapshot
from .manifests import CONTAINER
from .runs import WatchedRun


def ended_outside(run: WatchedRun, status: str, reason: str) -> bool:
    """A session's Job ended because its pod was ended from outside (not by its kernel agent)?

    The agent exits 0 only when told to stop, so a "completed" session was; a pod deleted or
    disrupted ends the session whatever its exit code (unless the Job's time limit did it).
    """
    if reason == Reason.TIMED_OUT:
        return False
    return status == SUCCEEDED or run.disruption is not None or run.pod_deleted


def disruption_text(reason: str, raw: str) -> str:
    what: dict[str, str] = {
        Reason.PREEMPTED: "preempted by a higher-priority pod",
        Reason.EVICTED: "evicted from its node",
    }
    return f"its pod was {what.get(reason, reason)}" + (f" ({raw.rstrip('.')})." if raw else ".")


def session_ended_outside(run: WatchedRun, obs: Observation) -> Observation:
    """The session's pod was ended from outside the platform (preempted, evicted, drained, deleted)."""
    why = run.disruption or "its pod was deleted outside the platform."
    return Observation(
        run.run_id,
        FAILED,
        Reason.LOST,
        f"The session ended from outside the platform: {why} A session's pod is not replaced "
        "(its kernel's state would be lost); start a new session.",
        obs.exit_code,
        details=obs.details,
    )


def _state(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    for cs in (pod.get("status") or {}).get("containerStatuses") or ():
        if cs.get("name") == CONTAINER:
            return cs.get("state") or {}
    return {}


def pod_container_started(pod: Mapping[str, Any]) -> bool:
    state = _state(pod)
    return "running" in state or "terminated" in state


def pod_container_ended(pod: Mapping[str, Any]) -> bool:
    return "terminated" in _state(pod) or (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def container_started(snap: Snapshot) -> bool:
    return any(pod_container_started(p) for p in snap.pods)


def running_message(snap: Snapshot) -> str:
    for p in snap.pods:
        if pod_container_started(p):
            return f"Running on node {(p.get('spec') or {}).get('nodeName')} (pod {p['metadata']['name']})."
    return "Running."


def placed_details(snap: Snapshot, node_labels: Callable[[str], Mapping[str, str] | None]) -> dict[str, Any]:
    """Where the started pod runs: its node, and that node's values of the labels the pod selects by
    (a flavor's, where a flavor placed it), so a client can see the run landed on its flavor's nodes
    without reading nodes itself. No `node_labels` where the nodes cannot be read."""
    pod = next((p for p in snap.pods if pod_container_started(p)), None)
    node = ((pod or {}).get("spec") or {}).get("nodeName")
    if pod is None or not node:
        return {}
    out: dict[str, Any] = {"node": node}
    labels = node_labels(node)
    if labels is not None:
        wanted = (pod.get("spec") or {}).get("nodeSelector") or {}
        out["node_labels"] = {k: labels[k] for k in wanted if k in labels}
    return out
