"""What every explanation is made of: the answer, the node view, and small readers of raw objects.

Objects are the raw JSON dicts the API returns (as recorded in fixtures).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ....core.reasons import Layer, Reason
from ....core.resources import format_memory, parse_memory
from ....core.status import FINAL
from ..manifests import ANN_PLACEMENT_FROM, ANN_PRESETS, CONTAINER

Obj = Mapping[str, Any]
LAYER = Layer.EXECUTOR.value


@dataclass(frozen=True)
class Explanation:
    status: str  # starting | running | succeeded | failed
    reason: Reason
    message: str
    who_can_act: tuple[tuple[str, str], ...] = ()
    raw: str = ""
    counts: Mapping[str, int] = field(default_factory=dict)
    exit_code: int | None = None
    kubernetes_reason: str = ""
    # The pod a disruption (Preempted, Evicted) happened to: one disruption is one episode,
    # however often it is explained again (first from the pod's condition, later from its event).
    pod_uid: str = ""

    @property
    def final(self) -> bool:
        return self.status in FINAL  # one set (core/status.py); a Job never ends "stopped"

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
