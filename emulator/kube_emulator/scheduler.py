"""A scheduler over declared nodes, with kube-scheduler's filters and message format.

Filters run per node in kube-scheduler's order and stop at the first that fails:
NodeUnschedulable, TaintToleration, NodeAffinity (node selector and required
affinity), NodeResourcesFit. PersistentVolumeClaims are checked first, as the
VolumeBinding PreFilter does. A pod that fits nowhere gets `PodScheduled=False,
reason Unschedulable` and a `FailedScheduling` event whose message is built as
`FitError.Error()` builds it (see notes/kubernetes.md §3.1), in the taint wording of
the Kubernetes version chosen.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kubernetes.utils import parse_quantity

# Taint wordings Kubernetes has used for the TaintToleration filter, oldest first.
TAINT_WORDINGS = ("legacy", "v1.18", "v1.25", "v1.34")

UNRESOLVABLE = "Preemption is not helpful for scheduling"
NO_VICTIMS = "No preemption victims found for incoming pod"


def taint_reason(taint: Mapping[str, Any], wording: str) -> str:
    key, value = taint.get("key", ""), taint.get("value", "")
    if wording == "legacy":
        return "node(s) had taints that the pod didn't tolerate"
    if wording == "v1.18":
        return f"node(s) had taint {{{key}: {value}}}, that the pod didn't tolerate"
    if wording == "v1.25":
        return f"node(s) had untolerated taint {{{key}: {value}}}"
    return "node(s) had untolerated taint(s)"


def tolerates(tolerations: Sequence[Mapping[str, Any]], taint: Mapping[str, Any]) -> bool:
    for t in tolerations:
        effect = t.get("effect")
        if effect and effect != taint.get("effect"):
            continue
        key = t.get("key")
        if t.get("operator") == "Exists":
            if not key or key == taint.get("key"):
                return True
            continue
        if key == taint.get("key") and (t.get("value") or "") == (taint.get("value") or ""):
            return True
    return False


def untolerated_taint(pod: Mapping[str, Any], node: Mapping[str, Any]) -> Mapping[str, Any] | None:
    tolerations = pod["spec"].get("tolerations") or []
    for taint in node.get("spec", {}).get("taints") or []:
        if taint.get("effect") in ("NoSchedule", "NoExecute") and not tolerates(tolerations, taint):
            return taint
    return None


def _match_expression(labels: Mapping[str, str], expr: Mapping[str, Any]) -> bool:
    key, op, values = str(expr.get("key", "")), expr.get("operator"), expr.get("values") or []
    if op == "In":
        return labels.get(key) in values
    if op == "NotIn":
        return labels.get(key) not in values
    if op == "Exists":
        return key in labels
    if op == "DoesNotExist":
        return key not in labels
    if op in ("Gt", "Lt"):
        try:
            have, want = int(labels[key]), int(values[0])
        except (KeyError, ValueError, IndexError):
            return False
        return have > want if op == "Gt" else have < want
    return False


def matches_node(pod: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    labels = node["metadata"].get("labels") or {}
    for k, v in (pod["spec"].get("nodeSelector") or {}).items():
        if labels.get(k) != v:
            return False
    required = (
        (pod["spec"].get("affinity") or {})
        .get("nodeAffinity", {})
        .get("requiredDuringSchedulingIgnoredDuringExecution")
    )
    if required:
        terms = required.get("nodeSelectorTerms") or []
        if not any(all(_match_expression(labels, e) for e in term.get("matchExpressions") or []) for term in terms):
            return False
    return True


def _quantity(name: str, value: Any) -> int:
    # cpu in millicores, everything else in whole units (bytes, devices)
    q = parse_quantity(value)
    return int(q * 1000) if name == "cpu" else int(q)


def pod_requests(pod: Mapping[str, Any]) -> Counter[str]:
    """Requests summed over containers (limits stand in for missing requests, as the API defaults them)."""
    total: Counter[str] = Counter()
    for c in pod["spec"].get("containers") or []:
        res = c.get("resources") or {}
        want = {**(res.get("limits") or {}), **(res.get("requests") or {})}
        for name, value in want.items():
            total[name] += _quantity(name, value)
    total["pods"] += 1
    return total


def allocatable(node: Mapping[str, Any]) -> Counter[str]:
    out: Counter[str] = Counter()
    for name, value in ((node.get("status") or {}).get("allocatable") or {}).items():
        out[name] = _quantity(name, value)
    return out


@dataclass
class Placement:
    node: str | None  # chosen node, or None when it fits nowhere
    message: str = ""  # FitError.Error() when it fits nowhere
    gated: bool = False


def volume_prefilter(pod: Mapping[str, Any], claims: Mapping[str, Mapping[str, Any]]) -> str:
    """VolumeBinding PreFilter: a missing or unbound PVC rejects the pod on every node."""
    unbound = False
    for vol in pod["spec"].get("volumes") or []:
        claim = (vol.get("persistentVolumeClaim") or {}).get("claimName")
        if not claim:
            continue
        pvc = claims.get(claim)
        if pvc is None:
            return f'persistentvolumeclaim "{claim}" not found'
        if (pvc.get("status") or {}).get("phase") != "Bound":
            unbound = True
    return "pod has unbound immediate PersistentVolumeClaims" if unbound else ""


def fit_message(total: int, prefilter: str, reasons: Counter[str], postfilter: Counter[str], dra: bool) -> str:
    """`FitError.Error()`: prefilter message or the sorted histogram, then the preemption part."""
    msg = f"0/{total} nodes are available:"
    if prefilter:
        msg += f" {prefilter}."
    else:
        hist = sorted(f"{n} {r}" for r, n in reasons.items())
        if hist:
            msg += f" {', '.join(hist)}."
    if postfilter:
        post = (
            "preemption: "
            + f"0/{total} nodes are available: "
            + ", ".join(sorted(f"{n} {r}" for r, n in postfilter.items()))
            + "."
        )
        if dra:
            post = "no new claims to deallocate, " + post
        msg += f" {post}."
    return msg


def schedule(
    pod: Mapping[str, Any],
    nodes: Sequence[Mapping[str, Any]],
    used: Mapping[str, Counter[str]],
    claims: Mapping[str, Mapping[str, Any]],
    wording: str = "v1.34",
    dra: bool = False,
) -> Placement:
    """Pick a node for `pod` (the one with the most free GPUs, then by name) or say why none fits."""
    if pod["spec"].get("schedulingGates"):
        return Placement(None, "Scheduling is blocked due to non-empty scheduling gates", gated=True)
    total = len(nodes)
    pre = volume_prefilter(pod, claims)
    if pre:
        return Placement(None, fit_message(total, pre, Counter(), Counter({UNRESOLVABLE: total}), dra))
    want = pod_requests(pod)
    reasons: Counter[str] = Counter()
    post: Counter[str] = Counter()
    fits: list[tuple[int, str]] = []
    for node in nodes:
        name = node["metadata"]["name"]
        if (node.get("spec") or {}).get("unschedulable"):
            reasons["node(s) were unschedulable"] += 1
            post[UNRESOLVABLE] += 1
            continue
        taint = untolerated_taint(pod, node)
        if taint is not None:
            reasons[taint_reason(taint, wording)] += 1
            post[UNRESOLVABLE] += 1
            continue
        if not matches_node(pod, node):
            reasons["node(s) didn't match Pod's node affinity/selector"] += 1
            post[UNRESOLVABLE] += 1
            continue
        have = allocatable(node)
        busy = used.get(name, Counter())
        short = []
        for res, amount in want.items():
            if amount and busy[res] + amount > have[res]:
                short.append("Too many pods" if res == "pods" else f"Insufficient {res}")
        if short:
            for r in short:
                reasons[r] += 1
            post[NO_VICTIMS] += 1
            continue
        fits.append((-(have["nvidia.com/gpu"] - busy["nvidia.com/gpu"]), name))
    if fits:
        return Placement(min(fits)[1])
    if total == 0:
        return Placement(None, fit_message(0, "", reasons, Counter(), dra))
    return Placement(None, fit_message(total, "", reasons, post, dra))
