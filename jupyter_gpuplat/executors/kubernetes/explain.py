"""Execution-side explanations: pure functions over (Job, Pods, Events[, Nodes]).

Kubernetes' wording changes between versions (notes/kubernetes.md §3), so messages
are parsed leniently, the raw text is always kept, and a message nobody recognises
degrades to itself, never to an error. Each answer has a reason code, a sentence
with the numbers, the layer ("executor"), who can act, and counts.

Objects are the raw JSON dicts the API returns (as recorded in fixtures).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ...core.resources import format_memory, parse_memory
from .manifests import ANN_GPU_TYPE_LABEL, ANN_PLACEMENT_FROM, ANN_PRESETS, CONTAINER

Obj = Mapping[str, Any]
LAYER = "executor"
OWNER = "the run's owner"
PLATFORM_ADMINS = "platform admins"
CLUSTER_ADMINS = "cluster admins"

# Reason codes (CamelCase, as on the timeline).
INSUFFICIENT_GPU = "InsufficientGPU"
GPU_FRAGMENTED = "GPUsFragmented"
NO_NODE_BIG_ENOUGH = "NoNodeLargeEnough"
INSUFFICIENT_RESOURCES = "InsufficientResources"
UNTOLERATED_TAINT = "UntoleratedTaint"
SELECTOR_MISMATCH = "NodeSelectorMismatch"
NODES_CORDONED = "NodesCordoned"
VOLUME_NOT_BOUND = "VolumeNotBound"
VOLUME_NODE_CONFLICT = "VolumeNodeConflict"
UNSCHEDULABLE = "Unschedulable"
SCHEDULING_GATED = "SchedulingGated"
PENDING = "Pending"
CREATE_FAILED = "PodCreateFailed"
EXCEEDED_QUOTA = "ExceededQuota"
IMAGE_PULL = "ImagePullError"
CONFIG_ERROR = "ConfigError"
CONTAINER_ERROR = "ContainerError"
VOLUME_MOUNT = "VolumeMountFailed"
CONTAINER_CREATING = "ContainerCreating"
CRASH_LOOP = "CrashLoop"
OOM_KILLED = "OOMKilled"
GPU_ALLOCATION = "GPUAllocationFailed"
PREEMPTED = "Preempted"
EVICTED = "Evicted"
RUNNING = "Running"
COMPLETED = "Completed"
ERROR = "Error"
TIMED_OUT = "TimedOut"
SUSPENDED = "Suspended"
FINISHING = "Finishing"  # the Job ended; its pods' final state has not arrived yet (not a timeline event)

_FIT = re.compile(r"^\s*0/(\d+) nodes are available:?\s*(.*)$", re.S)
_OLD_FIT = re.compile(r"^\s*No nodes are available that match all of the (?:following )?predicates:+\s*(.*)$", re.S)
_OLD_ENTRY = re.compile(r"^(.*?)\s*\((\d+)\)$")
_ENTRY = re.compile(r"^(\d+)\s+(.+)$", re.S)
_TAINT_NAMED = re.compile(r"taint \{([^}]*)\}")
_DISRUPTION = {
    "PreemptionByScheduler": (PREEMPTED, "preempted by a higher-priority pod"),
    "PreemptionByKubeScheduler": (PREEMPTED, "preempted by a higher-priority pod"),  # its 1.26 name
    "EvictionByEvictionAPI": (EVICTED, "evicted through the Eviction API (a node drain)"),
    "DeletionByTaintManager": (EVICTED, "deleted because its node got a NoExecute taint it does not tolerate"),
    "DeletionByPodGC": (EVICTED, "deleted because its node is gone"),
    "TerminationByKubelet": (EVICTED, "stopped by the kubelet (node pressure or node shutdown)"),
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


@dataclass(frozen=True)
class Cause:
    """One entry of the scheduler's histogram: `count` nodes rejected for `text`."""

    count: int
    text: str
    category: str  # insufficient | taint | selector | cordoned | volume | pods | pod_affinity | topology | node | other
    resource: str | None = None
    taint: str | None = None


@dataclass(frozen=True)
class FitFailure:
    """A parsed `0/N nodes are available: …` message."""

    nodes: int | None
    causes: tuple[Cause, ...]
    prefilter: str
    preemption: str
    raw: str


@dataclass(frozen=True)
class Explanation:
    status: str  # starting | running | succeeded | failed
    reason: str
    message: str
    who_can_act: tuple[tuple[str, str], ...] = ()
    raw: str = ""
    counts: Mapping[str, int] = field(default_factory=dict)
    exit_code: int | None = None
    kubernetes_reason: str = ""

    @property
    def final(self) -> bool:
        return self.status in ("succeeded", "failed")

    def details(self) -> dict[str, Any]:
        out: dict[str, Any] = {"layer": LAYER, "who_can_act": [{"who": w, "can": c} for w, c in self.who_can_act]}
        if self.raw:
            out["raw"] = self.raw
        if self.counts:
            out["counts"] = dict(self.counts)
        if self.kubernetes_reason:
            out["kubernetes_reason"] = self.kubernetes_reason
        return out


@dataclass(frozen=True)
class NodeView:
    """What the explanation needs of a node (built by the cache from Node objects)."""

    name: str
    gpus: int  # allocatable
    gpus_free: int  # allocatable minus what the platform's pods on it request
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Mapping[str, Any], ...] = ()
    unschedulable: bool = False


# -- the scheduler's message -----------------------------------------------------------------
def categorize(text: str) -> Cause:
    t = text.strip()
    low = t.lower()
    m = re.match(r"insufficient (\S+)", low)
    if m:
        return Cause(0, t, "insufficient", resource=t.split()[1])
    if "volume node affinity" in low or "persistentvolumeclaim" in low or ("volume" in low and "bound" in low):
        return Cause(0, t, "volume")
    if "taint" in low:
        named = _TAINT_NAMED.search(t)
        return Cause(0, t, "taint", taint=named.group(1) if named else None)
    if "anti-affinity" in low or "pod affinity" in low:
        return Cause(0, t, "pod_affinity")
    if "node affinity" in low or "node selector" in low or "nodeselector" in low:
        return Cause(0, t, "selector")
    if "unschedulable" in low or "cordon" in low:
        return Cause(0, t, "cordoned")
    if "too many pods" in low:
        return Cause(0, t, "pods")
    if "topology spread" in low:
        return Cause(0, t, "topology")
    if "pressure" in low or "not ready" in low or "had condition" in low or "free ports" in low:
        return Cause(0, t, "node")
    return Cause(0, t, "other")


def parse_fit_error(message: str) -> FitFailure | None:
    """Parse `0/N nodes are available: …` (any version's wording); None if it is not one."""
    raw = message or ""
    m = _FIT.match(raw)
    if m is None:
        old = _OLD_FIT.match(raw)
        if old is None:
            return None
        legacy: list[Cause] = []
        for part in old.group(1).rstrip(". ").split(", "):
            e = _OLD_ENTRY.match(part.strip())
            if e:
                c = categorize(e.group(1))
                legacy.append(Cause(int(e.group(2)), c.text, c.category, c.resource, c.taint))
        return FitFailure(None, tuple(legacy), "", "", raw)
    total = int(m.group(1))
    rest = m.group(2)
    preemption = ""
    cut = re.search(r"(?:no new claims to deallocate,\s*)?preemption:", rest)
    if cut:
        preemption = rest[cut.start() :].strip().rstrip(".").strip()
        rest = rest[: cut.start()]
    rest = rest.strip().rstrip(".").strip()
    causes: list[Cause] = []
    prefilter = []
    for part in re.split(r",\s+(?=\d+\s)|\.\s+(?=\d+\s)", rest) if rest else []:
        e = _ENTRY.match(part.strip())
        if e:
            c = categorize(e.group(2).rstrip(". "))
            causes.append(Cause(int(e.group(1)), c.text, c.category, c.resource, c.taint))
        elif part.strip():
            prefilter.append(part.strip().rstrip("."))
    return FitFailure(total, tuple(causes), "; ".join(prefilter), preemption, raw)


# -- small readers -----------------------------------------------------------------------------
def _conditions(obj: Obj | None) -> list[Obj]:
    return list(((obj or {}).get("status") or {}).get("conditions") or ())


def condition(obj: Obj | None, type_: str) -> Obj | None:
    for c in _conditions(obj):
        if c.get("type") == type_ and c.get("status") == "True":
            return c
    return None


def _pod_scheduled(pod: Obj) -> Obj | None:
    for c in _conditions(pod):
        if c.get("type") == "PodScheduled":
            return c
    return None


def _container_status(pod: Obj) -> Obj:
    statuses = list((pod.get("status") or {}).get("containerStatuses") or ())
    for cs in statuses:
        if cs.get("name") == CONTAINER:
            return cs
    return statuses[0] if statuses else {}


def _annotations(obj: Obj | None) -> Mapping[str, str]:
    return ((obj or {}).get("metadata") or {}).get("annotations") or {}


def _uid(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("uid") or "")


def _name(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


def _events_for(obj: Obj, events: Sequence[Obj]) -> list[Obj]:
    uid, name = _uid(obj), _name(obj)
    out = []
    for e in events:
        inv = e.get("involvedObject") or e.get("regarding") or {}
        if (uid and inv.get("uid") == uid) or (not uid and inv.get("name") == name):
            out.append(e)
    return sorted(out, key=lambda e: str(e.get("lastTimestamp") or e.get("eventTime") or ""))


def _latest_event(obj: Obj, events: Sequence[Obj], reason: str, contains: str = "") -> Obj | None:
    found = [e for e in _events_for(obj, events) if e.get("reason") == reason and contains in str(e.get("message"))]
    return found[-1] if found else None


def _requests(pod: Obj, gpu_resource: str) -> tuple[int, str, str]:
    """(GPUs, cpu text, memory text) the pod asks for."""
    gpus, cpu, mem = 0, "", ""
    for c in (pod.get("spec") or {}).get("containers") or ():
        res = c.get("resources") or {}
        want = {**(res.get("limits") or {}), **(res.get("requests") or {})}
        gpus += int(want.get(gpu_resource) or 0)
        cpu = str(want.get("cpu") or cpu)
        mem = str(want.get("memory") or mem)
    return gpus, cpu, mem


def _memory_limit(pod: Obj) -> str:
    for c in (pod.get("spec") or {}).get("containers") or ():
        limit = ((c.get("resources") or {}).get("limits") or {}).get("memory")
        if limit:
            try:
                return format_memory(parse_memory(limit))
            except ValueError:
                return str(limit)
    return ""


def placement_source(job: Obj | None) -> tuple[dict[str, str], list[str]]:
    """(placement field → the layer that set it, presets used), from the Job's annotations."""
    ann = _annotations(job)
    try:
        placed = json.loads(ann.get(ANN_PLACEMENT_FROM) or "{}")
    except ValueError:
        placed = {}
    presets = [p for p in (ann.get(ANN_PRESETS) or "").split(",") if p]
    return (placed if isinstance(placed, dict) else {}), presets


def _layer_name(layer: str) -> str:
    if "preset:" in layer:
        return f"preset {layer.rsplit('preset:', 1)[1]}"
    if layer.startswith("project:"):
        return f"project {layer.split(':', 1)[1]}'s defaults"
    if layer == "run":
        return "the run itself"
    if layer == "org":
        return "the platform defaults"
    return layer


def _tolerates(tolerations: Sequence[Obj], taint: Obj) -> bool:
    for t in tolerations:
        if t.get("effect") and t.get("effect") != taint.get("effect"):
            continue
        if t.get("operator") == "Exists":
            if not t.get("key") or t.get("key") == taint.get("key"):
                return True
        elif t.get("key") == taint.get("key") and (t.get("value") or "") == (taint.get("value") or ""):
            return True
    return False


def _taint_text(t: Obj) -> str:
    value = f"={t.get('value')}" if t.get("value") else ""
    return f"{t.get('key')}{value}:{t.get('effect')}"


def _node_matches(pod: Obj, node: NodeView) -> bool:
    for k, v in ((pod.get("spec") or {}).get("nodeSelector") or {}).items():
        if node.labels.get(k) != v:
            return False
    return True


# -- placement ---------------------------------------------------------------------------------
def explain_unschedulable(
    message: str,
    pod: Obj,
    job: Obj | None = None,
    nodes: Sequence[NodeView] | None = None,
    gpu_resource: str = "nvidia.com/gpu",
) -> Explanation:
    """Why the scheduler cannot place `pod`, from its `0/N nodes are available` message."""
    fit = parse_fit_error(message)
    if fit is None:
        return Explanation(
            "starting",
            UNSCHEDULABLE,
            f"Kubernetes cannot place the pod: {message.strip() or 'no reason given'}",
            ((OWNER, "wait, or stop the run"), (CLUSTER_ADMINS, "read the raw scheduler message")),
            raw=message,
        )
    counts: dict[str, int] = {}
    if fit.nodes is not None:
        counts["nodes"] = fit.nodes
    for c in fit.causes:
        key = {
            "insufficient": f"insufficient_{(c.resource or '').replace('nvidia.com/', '')}",
            "taint": "untolerated_taint",
            "selector": "selector_mismatch",
            "cordoned": "cordoned",
        }.get(c.category, c.category)
        counts[key] = counts.get(key, 0) + c.count
    total = fit.nodes if fit.nodes is not None else sum(c.count for c in fit.causes)
    placed, presets = placement_source(job)
    want_gpus, cpu, mem = _requests(pod, gpu_resource)
    tolerations = list((pod.get("spec") or {}).get("tolerations") or ())
    spec = pod.get("spec") or {}

    if fit.prefilter:
        low = fit.prefilter.lower()
        if "persistentvolumeclaim" in low or "volume" in low:
            return Explanation(
                "starting",
                VOLUME_NOT_BOUND,
                f"Storage for this run is not ready ({fit.prefilter}): none of the {total} nodes can take it until "
                "the volume claim is bound.",
                (
                    (CLUSTER_ADMINS, "bind or create the PersistentVolumeClaim (check the storage class)"),
                    (PLATFORM_ADMINS, "check the artifact volume with `gpuplat cluster check`"),
                ),
                raw=fit.raw,
                counts=counts,
            )
        return Explanation(
            "starting",
            UNSCHEDULABLE,
            f"Kubernetes cannot place the pod: {fit.prefilter}.",
            ((CLUSTER_ADMINS, "read the raw scheduler message"),),
            raw=fit.raw,
            counts=counts,
        )

    by_cat: dict[str, int] = {}
    for c in fit.causes:
        by_cat[c.category] = by_cat.get(c.category, 0) + c.count
    order = [
        "insufficient",
        "taint",
        "selector",
        "cordoned",
        "volume",
        "pods",
        "pod_affinity",
        "topology",
        "node",
        "other",
    ]

    gpu_nodes: list[NodeView] | None = None
    if nodes is not None and want_gpus:
        gpu_nodes = [n for n in nodes if n.gpus > 0]
        big = [n for n in gpu_nodes if n.gpus >= want_gpus]
        if not big:
            largest = max((n.gpus for n in gpu_nodes), default=0)
            return Explanation(
                "starting",
                NO_NODE_BIG_ENOUGH,
                f"No node has {want_gpus} GPUs in all (the largest has {largest}; {len(gpu_nodes)} GPU node(s) "
                f"of {total}): this run can never be placed as it is.",
                (
                    (OWNER, f"ask for at most {largest} GPU(s) per run, or stop it"),
                    (CLUSTER_ADMINS, f"add a node with {want_gpus} GPUs"),
                ),
                raw=fit.raw,
                counts=counts,
            )
        # What blocks the nodes that could hold the run: decide the headline over those only.
        blocked: dict[str, int] = {}
        for n in big:
            if n.unschedulable:
                cat = "cordoned"
            elif any(
                t.get("effect") in ("NoSchedule", "NoExecute") and not _tolerates(tolerations, t) for t in n.taints
            ):
                cat = "taint"
            elif not _node_matches(pod, n):
                cat = "selector"
            else:
                cat = "insufficient"
            blocked[cat] = blocked.get(cat, 0) + 1
        headline = max(order, key=lambda c: (blocked.get(c, 0), -order.index(c)))
    else:
        headline = max(order, key=lambda c: (by_cat.get(c, 0), -order.index(c)))

    others = [f"{c.count} {c.text}" for c in fit.causes if c.category != headline]
    also = f" Other nodes: {', '.join(others)}." if others else ""
    n_head = by_cat.get(headline, 0)

    if headline == "taint":
        named = sorted({c.taint for c in fit.causes if c.taint})
        if not named and nodes is not None:
            named = sorted(
                {
                    _taint_text(t)
                    for n in nodes
                    for t in n.taints
                    if t.get("effect") in ("NoSchedule", "NoExecute") and not _tolerates(tolerations, t)
                }
            )
        which = f" ({', '.join(named)})" if named else ""
        if "placement.tolerations" in placed:
            source = f"Its tolerations come from {_layer_name(placed['placement.tolerations'])} and do not match."
            fix_where = _layer_name(placed["placement.tolerations"])
        elif presets:
            names = ", ".join(presets)
            source = f"Its placement comes from preset {names}, which sets no toleration for them."
            fix_where = f"preset {presets[-1]}"
        else:
            source = "The run sets no tolerations."
            fix_where = "a preset"
        return Explanation(
            "starting",
            UNTOLERATED_TAINT,
            f"{n_head} of {total} nodes are reserved by taint(s){which} that this run does not tolerate. "
            f"{source}{also}",
            (
                (PLATFORM_ADMINS, f"add the matching toleration to {fix_where}"),
                (OWNER, "resubmit with a preset that tolerates the GPU nodes"),
            ),
            raw=fit.raw,
            counts=counts,
        )
    if headline == "selector":
        selector = spec.get("nodeSelector") or {}
        gpu_label = _annotations(job).get(ANN_GPU_TYPE_LABEL, "")
        sel = ", ".join(f"{k}={v}" for k, v in selector.items()) or "its node affinity"
        layers = sorted(
            {
                _layer_name(v)
                for k, v in placed.items()
                if k.startswith(("placement.node_selector", "placement.gpu_type", "placement.affinity"))
            }
        )
        src = f" (set by {', '.join(layers)})" if layers else ""
        gpu_type = f"; GPU type is the node label {gpu_label}" if gpu_label and gpu_label in selector else ""
        return Explanation(
            "starting",
            SELECTOR_MISMATCH,
            f"No node matches the run's placement {sel}{src}: {n_head} of {total} nodes do not match{gpu_type}.{also}",
            (
                (OWNER, "pick another GPU type or preset"),
                (PLATFORM_ADMINS, "fix the preset's node selector or affinity"),
            ),
            raw=fit.raw,
            counts=counts,
        )
    if headline == "cordoned":
        return Explanation(
            "starting",
            NODES_CORDONED,
            f"{n_head} of {total} nodes are cordoned (maintenance) and take no new pods.{also}",
            ((CLUSTER_ADMINS, "uncordon the nodes when maintenance ends"), (OWNER, "wait, or stop the run")),
            raw=fit.raw,
            counts=counts,
        )
    if headline == "volume":
        return Explanation(
            "starting",
            VOLUME_NODE_CONFLICT,
            f"The run's volumes can only be used on other nodes (e.g. another zone): {n_head} of {total} nodes "
            f"conflict with them.{also}",
            ((CLUSTER_ADMINS, "provision the volume where the GPU nodes are"), (OWNER, "use another volume")),
            raw=fit.raw,
            counts=counts,
        )
    if headline == "insufficient":
        gpu_short = sum(c.count for c in fit.causes if c.category == "insufficient" and c.resource == gpu_resource)
        if want_gpus and (gpu_short or gpu_nodes):
            free = [
                (n.gpus_free, n.name)
                for n in (gpu_nodes or [])
                if n.gpus_free > 0
                and not n.unschedulable
                and _node_matches(pod, n)
                and not any(
                    t.get("effect") in ("NoSchedule", "NoExecute") and not _tolerates(tolerations, t) for t in n.taints
                )
            ]
            total_free = sum(f for f, _ in free)
            if free and total_free >= want_gpus:
                spread = " + ".join(f"{f} on {name}" for f, name in sorted(free, reverse=True))
                counts["free_gpus"] = total_free
                return Explanation(
                    "starting",
                    GPU_FRAGMENTED,
                    f"{total_free} GPUs are free but spread over nodes ({spread}); this run needs {want_gpus} on one "
                    f"node, and {gpu_short or len(gpu_nodes or [])} of {total} nodes lack them.{also}",
                    (
                        (OWNER, "wait for a node to free up, or ask for fewer GPUs per run"),
                        (PLATFORM_ADMINS, "keep multi-GPU runs in a queue of their own, or use fewer, larger nodes"),
                    ),
                    raw=fit.raw,
                    counts=counts,
                )
            return Explanation(
                "starting",
                INSUFFICIENT_GPU,
                f"Admitted by the queue, but no node has {want_gpus} free {gpu_resource} right now: {gpu_short} of "
                f"{total} nodes lack free GPUs.{also}",
                (
                    (OWNER, "wait for GPUs to free up, or stop the run"),
                    (CLUSTER_ADMINS, "add GPU nodes"),
                    (PLATFORM_ADMINS, "lower queue quotas to what the cluster can hold"),
                ),
                raw=fit.raw,
                counts=counts,
            )
        short = sorted({c.resource or "" for c in fit.causes if c.category == "insufficient"})
        asks = ", ".join(x for x in (f"cpu {cpu}" if cpu else "", f"memory {mem}" if mem else "") if x)
        return Explanation(
            "starting",
            INSUFFICIENT_RESOURCES,
            f"No node has enough free {' and '.join(short)} right now ({n_head} node rejection(s) of {total}; "
            f"the run asks for {asks or 'its requests'}).{also}",
            ((OWNER, "wait, or ask for less cpu/memory"), (CLUSTER_ADMINS, "add capacity")),
            raw=fit.raw,
            counts=counts,
        )
    text = ", ".join(f"{c.count} {c.text}" for c in fit.causes) or fit.raw
    return Explanation(
        "starting",
        UNSCHEDULABLE,
        f"Kubernetes cannot place the pod on any of {total} nodes: {text}.",
        ((CLUSTER_ADMINS, "read the raw scheduler message"), (OWNER, "wait, or stop the run")),
        raw=fit.raw,
        counts=counts,
    )


# -- one pod -----------------------------------------------------------------------------------
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


def _terminated_text(term: Obj, pod: Obj) -> tuple[str, str]:
    """(reason code, phrase) for a terminated container state."""
    code = term.get("exitCode")
    reason = term.get("reason") or ""
    if reason == "OOMKilled":
        limit = _memory_limit(pod)
        return OOM_KILLED, f"ran out of memory (OOMKilled, exit {code}{f', memory limit {limit}' if limit else ''})"
    if code == 0:
        return COMPLETED, "exited with code 0"
    if reason == "ContainerStatusUnknown":
        return ERROR, "its container was lost with its node"
    return ERROR, f"exited with code {code}" + (
        f" ({reason})" if reason and reason not in ("Error", "Completed") else ""
    )


def explain_pod(
    pod: Obj,
    events: Sequence[Obj] = (),
    job: Obj | None = None,
    nodes: Sequence[NodeView] | None = None,
    gpu_resource: str = "nvidia.com/gpu",
) -> Explanation:
    """Where one pod of a run stands."""
    name = _name(pod)
    status = pod.get("status") or {}
    spec = pod.get("spec") or {}
    disruption = condition(pod, "DisruptionTarget")
    if disruption is not None:
        code, phrase = _DISRUPTION.get(str(disruption.get("reason")), (EVICTED, "disrupted"))
        detail = disruption.get("message") or ""
        ev = _latest_event(pod, events, "Preempted")
        if ev is not None and code == PREEMPTED:
            detail = str(ev.get("message"))
        return Explanation(
            "running",
            code,
            f"Pod {name} was {phrase}{f' ({detail})' if detail else ''}; Kubernetes starts a replacement.",
            ((OWNER, "nothing: the run restarts from the beginning (checkpoint to resume)"),),
            raw=str(detail),
            kubernetes_reason=str(disruption.get("reason")),
        )
    if status.get("reason") == "Evicted":
        msg = str(status.get("message") or "")
        return Explanation(
            "running",
            EVICTED,
            f"Pod {name} was evicted by its node: {msg.strip()}",
            ((OWNER, "ask for more memory so the pod is not the first to go"), (CLUSTER_ADMINS, "relieve the node")),
            raw=msg,
            kubernetes_reason="Evicted",
        )
    if status.get("reason") == "UnexpectedAdmissionError":
        msg = str(status.get("message") or "")
        return Explanation(
            "running",
            GPU_ALLOCATION,
            f"Node {spec.get('nodeName', '?')} could not give pod {name} its GPU: {msg}",
            ((CLUSTER_ADMINS, "check the GPU device plugin on that node"),),
            raw=msg,
            kubernetes_reason="UnexpectedAdmissionError",
        )
    sched = _pod_scheduled(pod)
    if not spec.get("nodeName"):
        if (sched is not None and sched.get("reason") == "SchedulingGated") or spec.get("schedulingGates"):
            gates = ", ".join(g.get("name", "") for g in spec.get("schedulingGates") or ()) or "a scheduling gate"
            return Explanation(
                "starting",
                SCHEDULING_GATED,
                f"Held before scheduling by {gates} (an admission gate, not capacity).",
                ((PLATFORM_ADMINS, "check what owns the gate (e.g. Kueue)"),),
                raw=str((sched or {}).get("message") or ""),
            )
        message = (
            str((sched or {}).get("message") or "") if sched is not None and sched.get("status") == "False" else ""
        )
        if not message:
            ev = _latest_event(pod, events, "FailedScheduling")
            message = str(ev.get("message")) if ev is not None else ""
        if message:
            return explain_unschedulable(message, pod, job, nodes, gpu_resource)
        return Explanation("starting", PENDING, f"Pod {name} is waiting for the scheduler.", ((OWNER, "wait"),))
    node = spec["nodeName"]
    cs = _container_status(pod)
    state = cs.get("state") or {}
    waiting = state.get("waiting")
    if waiting:
        reason = str(waiting.get("reason") or "")
        if reason in _PULL_REASONS:
            image = cs.get("image") or ((spec.get("containers") or [{}])[0]).get("image", "")
            err = _pull_error(pod, events, waiting)
            return Explanation(
                "starting",
                IMAGE_PULL,
                f'Cannot pull image "{image}" on node {node}: {err}',
                (
                    (OWNER, "fix the image name or tag"),
                    (PLATFORM_ADMINS, "add an image pull secret if the registry is private"),
                ),
                raw=err,
                kubernetes_reason=reason,
            )
        if reason == "CreateContainerConfigError":
            msg = str(waiting.get("message") or "")
            return Explanation(
                "starting",
                CONFIG_ERROR,
                f"Missing configuration: {msg} (pod {name} cannot start its container).",
                (
                    (OWNER, "create it in the run's namespace, or remove the reference"),
                    (PLATFORM_ADMINS, "check the preset's env and volumes"),
                ),
                raw=msg,
                kubernetes_reason=reason,
            )
        if reason in ("CreateContainerError", "RunContainerError"):
            msg = str(waiting.get("message") or "")
            return Explanation(
                "starting",
                CONTAINER_ERROR,
                f"The container runtime cannot start the run's container: {msg}",
                ((OWNER, "check the command and image"),),
                raw=msg,
                kubernetes_reason=reason,
            )
        if reason == "CrashLoopBackOff":
            last = (cs.get("lastState") or {}).get("terminated") or {}
            code, phrase = _terminated_text(last, pod)
            restarts = cs.get("restartCount", 0)
            return Explanation(
                "running",
                OOM_KILLED if code == OOM_KILLED else CRASH_LOOP,
                f"The process keeps crashing: restarted {restarts} time(s); last it {phrase}.",
                ((OWNER, "fix the program" if code != OOM_KILLED else "ask for more memory"),),
                raw=str(waiting.get("message") or ""),
                exit_code=last.get("exitCode"),
                kubernetes_reason=reason,
            )
        mount = _latest_event(pod, events, "FailedMount")
        if mount is not None:
            msg = str(mount.get("message"))
            return Explanation(
                "starting",
                VOLUME_MOUNT,
                f"Placed on node {node}, but mounting its volumes fails: {msg}",
                (
                    (OWNER, "create the missing Secret/ConfigMap or fix the volume"),
                    (CLUSTER_ADMINS, "check the storage"),
                ),
                raw=msg,
                kubernetes_reason="FailedMount",
            )
        return Explanation(
            "starting",
            CONTAINER_CREATING if reason in ("", "ContainerCreating", "PodInitializing") else reason,
            f"Placed on node {node}; starting its container ({reason or 'ContainerCreating'}).",
            ((OWNER, "wait"),),
            kubernetes_reason=reason,
        )
    if "running" in state:
        return Explanation("running", RUNNING, f"Running on node {node} (pod {name}).", ((OWNER, "stop it"),))
    term = state.get("terminated")
    if term:
        # Ended; the Job's own condition (checked first by explain_run) gives the outcome.
        return Explanation(
            "running",
            RUNNING,
            f"Running on node {node} (pod {name}).",
            ((OWNER, "stop it"),),
            exit_code=term.get("exitCode"),
        )
    return Explanation(
        "starting", CONTAINER_CREATING, f"Placed on node {node}; starting its container.", ((OWNER, "wait"),)
    )


# -- the whole run -----------------------------------------------------------------------------
def _attempts(job: Obj | None, pods: Sequence[Obj]) -> int:
    status = (job or {}).get("status") or {}
    return max(int(status.get("failed") or 0) + int(status.get("succeeded") or 0), len(pods), 1)


def _last_failed_pod(pods: Sequence[Obj]) -> Obj | None:
    failed = [p for p in pods if (p.get("status") or {}).get("phase") == "Failed"]
    return (
        sorted(failed, key=lambda p: str((p.get("metadata") or {}).get("creationTimestamp") or ""))[-1]
        if failed
        else None
    )


def explain_job_end(
    job: Obj, pods: Sequence[Obj], events: Sequence[Obj] = (), settle: bool = False
) -> Explanation | None:
    """The final answer when the Job has ended (Complete or Failed), else None.

    `settle`: answer even when the failed pod's final state has not been seen (else: FINISHING).
    """
    done = condition(job, "Complete") or condition(job, "SuccessCriteriaMet")
    if done is not None and condition(job, "Failed") is None:
        ok = [p for p in pods if (p.get("status") or {}).get("phase") == "Succeeded"]
        if not ok and not settle:
            return Explanation(
                "running", FINISHING, "The Job has completed; waiting for its pod's final state.", ((OWNER, "wait"),)
            )
        where = f" on node {(ok[-1].get('spec') or {}).get('nodeName')}" if ok else ""
        return Explanation("succeeded", COMPLETED, f"Completed: the container exited with code 0{where}.", exit_code=0)
    failed = condition(job, "Failed")
    if failed is None:
        return None
    k8s = str(failed.get("reason") or "")
    text = str(failed.get("message") or "")
    spec = job.get("spec") or {}
    last = _last_failed_pod(pods)
    term = (_container_status(last).get("state") or {}).get("terminated") or {} if last else {}
    if k8s == "DeadlineExceeded":
        limit = spec.get("activeDeadlineSeconds")
        return Explanation(
            "failed",
            TIMED_OUT,
            f"Stopped by Kubernetes: it exceeded its time limit of {limit} s (activeDeadlineSeconds; the "
            "limit counts from when the Job started, waiting included).",
            ((OWNER, "raise termination.timeout_seconds, or make the run shorter"),),
            raw=text,
            exit_code=term.get("exitCode"),
            kubernetes_reason=k8s,
        )
    if last is None and int(((job.get("status") or {}).get("failed")) or 0) > 0 and not settle:
        # The Job counts a failed pod that the pod watch has not delivered yet (separate streams):
        # wait for it a little, so the answer names the exit code.
        return Explanation(
            "running", FINISHING, "The Job has ended; waiting for its pod's final state.", ((OWNER, "wait"),)
        )
    attempts = _attempts(job, pods)
    if last is not None and term:
        code, phrase = _terminated_text(term, last)
        return Explanation(
            "failed",
            code if code != COMPLETED else ERROR,
            f"Failed: the container {phrase} (attempt {attempts} of {int(spec.get('backoffLimit') or 0) + 1}; {text}).",
            ((OWNER, "ask for more memory" if code == OOM_KILLED else "read the logs and fix the run"),),
            raw=text,
            exit_code=term.get("exitCode"),
            kubernetes_reason=k8s,
        )
    if last is not None:
        pod_ex = explain_pod(last, events, job)
        return Explanation(
            "failed",
            pod_ex.reason,
            f"Failed: {pod_ex.message} ({text})",
            pod_ex.who_can_act,
            raw=text,
            kubernetes_reason=k8s,
        )
    return Explanation(
        "failed",
        ERROR,
        f"Failed: {text or k8s}",
        ((OWNER, "read the logs and fix the run"),),
        raw=text,
        kubernetes_reason=k8s,
    )


def explain_run(
    job: Obj | None,
    pods: Sequence[Obj],
    events: Sequence[Obj] = (),
    nodes: Sequence[NodeView] | None = None,
    gpu_resource: str = "nvidia.com/gpu",
    settle: bool = False,
) -> Explanation:
    """One answer for a run from its Job, its pods and their events."""
    if job is not None:
        end = explain_job_end(job, pods, events, settle)
        if end is not None:
            return end
        if (job.get("spec") or {}).get("suspend"):
            cond = condition(job, "Suspended")
            return Explanation(
                "starting",
                SUSPENDED,
                f"The Job is suspended{': ' + str(cond.get('message')) if cond and cond.get('message') else ''}.",
                ((PLATFORM_ADMINS, "resume it, or check the queue that holds it (e.g. Kueue)"),),
            )
    live = [
        p
        for p in pods
        if not (p.get("metadata") or {}).get("deletionTimestamp")
        and (p.get("status") or {}).get("phase") not in ("Failed",)
    ]
    gone = [p for p in pods if p not in live]
    if not live:
        if job is not None:
            fc = _latest_event(job, events, "FailedCreate")
            if fc is not None:
                msg = str(fc.get("message"))
                quota = "exceeded quota" in msg
                return Explanation(
                    "starting",
                    EXCEEDED_QUOTA if quota else CREATE_FAILED,
                    f"Kubernetes refuses to create the run's pod: {msg}",
                    (
                        (
                            CLUSTER_ADMINS,
                            "raise the namespace's ResourceQuota" if quota else "fix what the message names",
                        ),
                        (PLATFORM_ADMINS, "check the executor's settings (priority classes, service account)"),
                    ),
                    raw=msg,
                    kubernetes_reason="FailedCreate",
                )
        if gone:
            # A disrupted pod being replaced: say so rather than "pending".
            newest = sorted(gone, key=lambda p: str((p.get("metadata") or {}).get("creationTimestamp") or ""))[-1]
            ex = explain_pod(newest, events, job, nodes, gpu_resource)
            if ex.reason in (PREEMPTED, EVICTED, GPU_ALLOCATION):
                return ex
        return Explanation(
            "starting", PENDING, "The Job is created; Kubernetes has not created its pod yet.", ((OWNER, "wait"),)
        )
    answers = [
        explain_pod(p, events, job, nodes, gpu_resource)
        for p in sorted(live, key=lambda p: str((p.get("metadata") or {}).get("name") or ""))
    ]
    if len(answers) == 1:
        return answers[0]
    placed = sum(1 for p in live if (p.get("spec") or {}).get("nodeName"))
    running = [a for a in answers if a.reason == RUNNING]
    waiting = [a for a in answers if a.reason != RUNNING]
    if not waiting:
        return Explanation("running", RUNNING, f"All {len(answers)} workers are running.", ((OWNER, "stop it"),))
    first = waiting[0]
    counts = dict(first.counts)
    counts.update(workers=len(answers), placed=placed, running=len(running))
    return Explanation(
        "running" if running else first.status,
        first.reason,
        f"{placed} of {len(answers)} workers placed, {len(running)} running; {len(waiting)} waiting: {first.message}",
        first.who_can_act,
        raw=first.raw,
        counts=counts,
        kubernetes_reason=first.kubernetes_reason,
    )
