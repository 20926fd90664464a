"""Where one pod of a run stands: disrupted, refused by its node, unplaced, or its container's state."""

from __future__ import annotations

import re
from collections.abc import Sequence

from ....core.reasons import CLUSTER_ADMINS, OWNER, PLATFORM_ADMINS, Reason
from .model import (
    Explanation,
    NodeView,
    Obj,
    _container_status,
    _latest_event,
    _memory_limit,
    _name,
    _pod_scheduled,
    _uid,
    condition,
)
from .placement import explain_unschedulable

_DISRUPTION = {
    "PreemptionByScheduler": (Reason.PREEMPTED, "preempted by a higher-priority pod"),
    "PreemptionByKubeScheduler": (Reason.PREEMPTED, "preempted by a higher-priority pod"),  # its 1.26 name
    "EvictionByEvictionAPI": (Reason.EVICTED, "evicted through the Eviction API (a node drain)"),
    "DeletionByTaintManager": (Reason.EVICTED, "deleted because its node got a NoExecute taint it does not tolerate"),
    "DeletionByPodGC": (Reason.EVICTED, "deleted because its node is gone"),
    "TerminationByKubelet": (Reason.EVICTED, "stopped by the kubelet (node pressure or node shutdown)"),
}
_PULL_REASONS = frozenset(
    {
        "ErrImagePull",
        "ImagePullBackOff",
        "InvalidImageName",
        "ErrImageNeverPull",
        "RegistryUnavailable",
        "ImageInspectError",
    }
)
# Disruptions: the pod is gone or going, and Kubernetes starts a replacement.
DISRUPTIONS = frozenset({Reason.PREEMPTED, Reason.EVICTED, Reason.GPU_ALLOCATION})


def explain_pod(
    pod: Obj,
    events: Sequence[Obj] = (),
    job: Obj | None = None,
    nodes: Sequence[NodeView] | None = None,
    gpu_resource: str = "nvidia.com/gpu",
) -> Explanation:
    """Where one pod of a run stands."""
    gone = _disrupted(pod, events) or _refused_by_node(pod)
    if gone is not None:
        return gone
    spec = pod.get("spec") or {}
    if not spec.get("nodeName"):
        return _unplaced(pod, events, job, nodes, gpu_resource)
    node, name = spec["nodeName"], _name(pod)
    cs = _container_status(pod)
    state = cs.get("state") or {}
    if state.get("waiting"):
        return _waiting(pod, events, cs, state["waiting"])
    if "running" in state:
        return Explanation("running", Reason.RUNNING, f"Running on node {node} (pod {name}).", ((OWNER, "stop it"),))
    term = state.get("terminated")
    if term:
        # Ended; the Job's own condition (checked first by explain_run) gives the outcome.
        return Explanation(
            "running",
            Reason.RUNNING,
            f"Running on node {node} (pod {name}).",
            ((OWNER, "stop it"),),
            exit_code=term.get("exitCode"),
        )
    return Explanation(
        "starting", Reason.CONTAINER_CREATING, f"Placed on node {node}; starting its container.", ((OWNER, "wait"),)
    )


def _disrupted(pod: Obj, events: Sequence[Obj]) -> Explanation | None:
    disruption = condition(pod, "DisruptionTarget")
    if disruption is None:
        return None
    code, phrase = _DISRUPTION.get(str(disruption.get("reason")), (Reason.EVICTED, "disrupted"))
    detail = disruption.get("message") or ""
    ev = _latest_event(pod, events, "Preempted")
    if ev is not None and code == Reason.PREEMPTED:
        detail = str(ev.get("message"))
    return Explanation(
        "running",
        code,
        f"Pod {_name(pod)} was {phrase}{f' ({detail})' if detail else ''}; Kubernetes starts a replacement.",
        ((OWNER, "nothing: the run restarts from the beginning (checkpoint to resume)"),),
        raw=str(detail),
        kubernetes_reason=str(disruption.get("reason")),
        pod_uid=_uid(pod),
    )


def _refused_by_node(pod: Obj) -> Explanation | None:
    status = pod.get("status") or {}
    msg = str(status.get("message") or "")
    name = _name(pod)
    if status.get("reason") == "Evicted":
        return Explanation(
            "running",
            Reason.EVICTED,
            f"Pod {name} was evicted by its node: {msg.strip()}",
            ((OWNER, "ask for more memory so the pod is not the first to go"), (CLUSTER_ADMINS, "relieve the node")),
            raw=msg,
            kubernetes_reason="Evicted",
            pod_uid=_uid(pod),
        )
    if status.get("reason") == "UnexpectedAdmissionError":
        return Explanation(
            "running",
            Reason.GPU_ALLOCATION,
            f"Node {(pod.get('spec') or {}).get('nodeName', '?')} could not give pod {name} its GPU: {msg}",
            ((CLUSTER_ADMINS, "check the GPU device plugin on that node"),),
            raw=msg,
            kubernetes_reason="UnexpectedAdmissionError",
            pod_uid=_uid(pod),
        )
    return None


def _unplaced(
    pod: Obj, events: Sequence[Obj], job: Obj | None, nodes: Sequence[NodeView] | None, gpu_resource: str
) -> Explanation:
    spec = pod.get("spec") or {}
    sched = _pod_scheduled(pod)
    if (sched is not None and sched.get("reason") == "SchedulingGated") or spec.get("schedulingGates"):
        gates = ", ".join(g.get("name", "") for g in spec.get("schedulingGates") or ()) or "a scheduling gate"
        return Explanation(
            "starting",
            Reason.SCHEDULING_GATED,
            f"Held before scheduling by {gates} (an admission gate, not capacity).",
            ((PLATFORM_ADMINS, "check what owns the gate (e.g. Kueue)"),),
            raw=str((sched or {}).get("message") or ""),
        )
    message = str((sched or {}).get("message") or "") if sched is not None and sched.get("status") == "False" else ""
    if not message:
        ev = _latest_event(pod, events, "FailedScheduling")
        message = str(ev.get("message")) if ev is not None else ""
    if message:
        return explain_unschedulable(message, pod, job, nodes, gpu_resource)
    return Explanation(
        "starting", Reason.PENDING, f"Pod {_name(pod)} is waiting for the scheduler.", ((OWNER, "wait"),)
    )


def _waiting(pod: Obj, events: Sequence[Obj], cs: Obj, waiting: Obj) -> Explanation:
    """A placed pod whose container waits: image, configuration, runtime, crash loop, mounts."""
    spec = pod.get("spec") or {}
    node, name = spec.get("nodeName"), _name(pod)
    reason = str(waiting.get("reason") or "")
    msg = str(waiting.get("message") or "")
    if reason in _PULL_REASONS:
        image = cs.get("image") or ((spec.get("containers") or [{}])[0]).get("image", "")
        err = _pull_error(pod, events, waiting)
        return Explanation(
            "starting",
            Reason.IMAGE_PULL,
            f'Cannot pull image "{image}" on node {node}: {err}',
            (
                (OWNER, "fix the image name or tag"),
                (PLATFORM_ADMINS, "add an image pull secret if the registry is private"),
            ),
            raw=err,
            kubernetes_reason=reason,
        )
    if reason == "CreateContainerConfigError":
        return Explanation(
            "starting",
            Reason.CONFIG_ERROR,
            f"Missing configuration: {msg} (pod {name} cannot start its container).",
            (
                (OWNER, "create it in the run's namespace, or remove the reference"),
                (PLATFORM_ADMINS, "check the preset's env and volumes"),
            ),
            raw=msg,
            kubernetes_reason=reason,
        )
    if reason in ("CreateContainerError", "RunContainerError"):
        return Explanation(
            "starting",
            Reason.CONTAINER_ERROR,
            f"The container runtime cannot start the run's container: {msg}",
            ((OWNER, "check the command and image"),),
            raw=msg,
            kubernetes_reason=reason,
        )
    if reason == "CrashLoopBackOff":
        return _crash_loop(pod, cs, waiting)
    return _creating(pod, events, reason)


def _crash_loop(pod: Obj, cs: Obj, waiting: Obj) -> Explanation:
    last = (cs.get("lastState") or {}).get("terminated") or {}
    code, phrase = terminated_text(last, pod)
    oom = code == Reason.OOM_KILLED
    return Explanation(
        "running",
        Reason.OOM_KILLED if oom else Reason.CRASH_LOOP,
        f"The process keeps crashing: restarted {cs.get('restartCount', 0)} time(s); last it {phrase}.",
        ((OWNER, "ask for more memory" if oom else "fix the program"),),
        raw=str(waiting.get("message") or ""),
        exit_code=last.get("exitCode"),
        kubernetes_reason="CrashLoopBackOff",
    )


def _creating(pod: Obj, events: Sequence[Obj], reason: str) -> Explanation:
    node = (pod.get("spec") or {}).get("nodeName")
    mount = _latest_event(pod, events, "FailedMount")
    if mount is not None:
        msg = str(mount.get("message"))
        return Explanation(
            "starting",
            Reason.VOLUME_MOUNT,
            f"Placed on node {node}, but mounting its volumes fails: {msg}",
            ((OWNER, "create the missing Secret/ConfigMap or fix the volume"), (CLUSTER_ADMINS, "check the storage")),
            raw=msg,
            kubernetes_reason="FailedMount",
        )
    # Any other waiting reason of the kubelet (PodInitializing, …) is a container being created;
    # the kubelet's own word is kept in `kubernetes_reason`.
    return Explanation(
        "starting",
        Reason.CONTAINER_CREATING,
        f"Placed on node {node}; starting its container ({reason or 'ContainerCreating'}).",
        ((OWNER, "wait"),),
        kubernetes_reason=reason,
    )


def _pull_error(pod: Obj, events: Sequence[Obj], waiting: Obj) -> str:
    # The same registry error appears in ErrImagePull's message and in the Failed event (after a
    # prefix); ImagePullBackOff only says "Back-off pulling image". Prefer one text for both.
    ev = _latest_event(pod, events, "Failed", "Failed to pull image")
    if ev is not None:
        return re.sub(r'^Failed to pull image "[^"]*": ', "", str(ev.get("message")))
    if waiting.get("reason") == "ErrImagePull" and waiting.get("message"):
        return str(waiting["message"])
    ev = _latest_event(pod, events, "InspectFailed")
    if ev is not None:
        return str(ev.get("message"))
    return str(waiting.get("message") or waiting.get("reason") or "")


def terminated_text(term: Obj, pod: Obj) -> tuple[Reason, str]:
    """(reason code, phrase) for a terminated container state."""
    code = term.get("exitCode")
    reason = term.get("reason") or ""
    if reason == "OOMKilled":
        limit = _memory_limit(pod)
        return (
            Reason.OOM_KILLED,
            f"ran out of memory (OOMKilled, exit {code}{f', memory limit {limit}' if limit else ''})",
        )
    if code == 0:
        return Reason.COMPLETED, "exited with code 0"
    if reason == "ContainerStatusUnknown":
        return Reason.ERROR, "its container was lost with its node"
    return Reason.ERROR, f"exited with code {code}" + (
        f" ({reason})" if reason and reason not in ("Error", "Completed") else ""
    )
