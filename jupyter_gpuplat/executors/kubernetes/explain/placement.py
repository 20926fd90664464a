"""Why the scheduler cannot place a pod: its fit error, read against the run's placement and the nodes.

The scheduler's own message is the authority. The node view (`NodeView`) counts only what
the platform's pods hold, so it can add detail (which node has how many GPUs free) but never
overrule the message: where the two disagree, GPUs are held outside the platform, and the
answer says so instead of quoting counts it cannot know.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ....core.reasons import CLUSTER_ADMINS, OWNER, PLATFORM_ADMINS, Reason
from ..manifests import ANN_FLAVOR, ANN_GPU_TYPE_LABEL
from .fit import FitFailure, parse_fit_error
from .model import (
    Explanation,
    NodeView,
    Obj,
    _annotations,
    _layer_name,
    _node_matches,
    _requests,
    _taint_text,
    _tolerates,
    placement_source,
)

# Which blocker headlines the answer, on a tie: the first in this order.
ORDER = ("insufficient", "taint", "selector", "cordoned", "volume", "pods", "pod_affinity", "topology", "node", "other")
_COUNT_KEY = {"taint": "untolerated_taint", "selector": "selector_mismatch", "cordoned": "cordoned"}


@dataclass
class Ask:
    """One unplaceable pod: what it asks for, what the scheduler said, and what we see of the nodes."""

    fit: FitFailure
    pod: Obj
    job: Obj | None
    nodes: Sequence[NodeView] | None
    gpu_resource: str
    counts: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        fit = self.fit
        if fit.nodes is not None:
            self.counts["nodes"] = fit.nodes
        for c in fit.causes:
            if c.category == "insufficient":
                key = f"insufficient_{(c.resource or '').replace('nvidia.com/', '')}"
            else:
                key = _COUNT_KEY.get(c.category, c.category)
            self.counts[key] = self.counts.get(key, 0) + c.count
        self.total = fit.nodes if fit.nodes is not None else sum(c.count for c in fit.causes)
        self.placed, self.presets = placement_source(self.job)
        self.want_gpus, self.cpu, self.mem = _requests(self.pod, self.gpu_resource)
        self.spec = self.pod.get("spec") or {}
        self.tolerations = list(self.spec.get("tolerations") or ())
        self.by_cat: dict[str, int] = {}
        for c in fit.causes:
            self.by_cat[c.category] = self.by_cat.get(c.category, 0) + c.count
        self.gpu_nodes = [n for n in self.nodes if n.gpus > 0] if self.nodes is not None and self.want_gpus else None

    def answer(self, reason: Reason, message: str, *who: tuple[str, str]) -> Explanation:
        return Explanation(
            "starting", reason, message + self.flavor_nodes(), tuple(who), raw=self.fit.raw, counts=self.counts
        )

    def flavor_nodes(self) -> str:
        """A run placed on a flavor: that flavor's nodes (those its selector matches) and their free GPUs."""
        flavor = _annotations(self.job).get(ANN_FLAVOR)
        if not flavor:
            return ""
        if self.nodes is None:
            return f" (flavor {flavor})"
        mine = [n for n in self.nodes if _node_matches(self.pod, n)]
        if not mine:
            return f" Flavor {flavor} has no node here: none matches its node labels."
        names = ", ".join(f"{n.name} {n.gpus_free}/{n.gpus} free" for n in sorted(mine, key=lambda n: n.name))
        return f" Flavor {flavor}'s nodes: {names}."

    def blocked(self, n: NodeView) -> str:
        """What keeps the run off node `n` by its own placement (else: "insufficient")."""
        if n.unschedulable:
            return "cordoned"
        if any(
            t.get("effect") in ("NoSchedule", "NoExecute") and not _tolerates(self.tolerations, t) for t in n.taints
        ):
            return "taint"
        if not _node_matches(self.pod, n):
            return "selector"
        return "insufficient"

    def others(self, headline: str) -> str:
        rest = [f"{c.count} {c.text}" for c in self.fit.causes if c.category != headline]
        return f" Other nodes: {', '.join(rest)}." if rest else ""


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
            Reason.UNSCHEDULABLE,
            f"Kubernetes cannot place the pod: {message.strip() or 'no reason given'}",
            ((OWNER, "wait, or stop the run"), (CLUSTER_ADMINS, "read the raw scheduler message")),
            raw=message,
        )
    ask = Ask(fit, pod, job, nodes, gpu_resource)
    if fit.prefilter:
        return _prefilter(ask)
    if ask.gpu_nodes is not None:
        big = [n for n in ask.gpu_nodes if n.gpus >= ask.want_gpus]
        if _annotations(job).get(ANN_FLAVOR):
            # Placed on a flavor: only its nodes could hold the run (the platform chose them, not the run).
            big = [n for n in big if _node_matches(pod, n)] or big
        if not big:
            return _no_node_big_enough(ask)
        # What blocks the nodes that could hold the run: decide the headline over those only.
        blocked: dict[str, int] = {}
        for n in big:
            cat = ask.blocked(n)
            blocked[cat] = blocked.get(cat, 0) + 1
        headline = max(ORDER, key=lambda c: (blocked.get(c, 0), -ORDER.index(c)))
    else:
        headline = max(ORDER, key=lambda c: (ask.by_cat.get(c, 0), -ORDER.index(c)))
    return _HEADLINES.get(headline, _other)(ask, headline)


def _prefilter(ask: Ask) -> Explanation:
    pre = ask.fit.prefilter
    low = pre.lower()
    if "persistentvolumeclaim" in low or "volume" in low:
        return ask.answer(
            Reason.VOLUME_NOT_BOUND,
            f"Storage for this run is not ready ({pre}): none of the {ask.total} nodes can take it until "
            "the volume claim is bound.",
            (CLUSTER_ADMINS, "bind or create the PersistentVolumeClaim (check the storage class)"),
            (PLATFORM_ADMINS, "check the artifact volume with `gpuplat cluster check`"),
        )
    return ask.answer(
        Reason.UNSCHEDULABLE,
        f"Kubernetes cannot place the pod: {pre}.",
        (CLUSTER_ADMINS, "read the raw scheduler message"),
    )


def _no_node_big_enough(ask: Ask) -> Explanation:
    gpu_nodes = ask.gpu_nodes or []
    largest = max((n.gpus for n in gpu_nodes), default=0)
    return ask.answer(
        Reason.NO_NODE_BIG_ENOUGH,
        f"No node has {ask.want_gpus} GPUs in all (the largest has {largest}; {len(gpu_nodes)} GPU node(s) "
        f"of {ask.total}): this run can never be placed as it is.",
        (OWNER, f"ask for at most {largest} GPU(s) per run, or stop it"),
        (CLUSTER_ADMINS, f"add a node with {ask.want_gpus} GPUs"),
    )


def _taint(ask: Ask, headline: str) -> Explanation:
    named = sorted({c.taint for c in ask.fit.causes if c.taint})
    if not named and ask.nodes is not None:
        named = sorted(
            {
                _taint_text(t)
                for n in ask.nodes
                for t in n.taints
                if t.get("effect") in ("NoSchedule", "NoExecute") and not _tolerates(ask.tolerations, t)
            }
        )
    which = f" ({', '.join(named)})" if named else ""
    if "placement.tolerations" in ask.placed:
        source = f"Its tolerations come from {_layer_name(ask.placed['placement.tolerations'])} and do not match."
        fix_where = _layer_name(ask.placed["placement.tolerations"])
    elif ask.presets:
        source = f"Its placement comes from preset {', '.join(ask.presets)}, which sets no toleration for them."
        fix_where = f"preset {ask.presets[-1]}"
    else:
        source, fix_where = "The run sets no tolerations.", "a preset"
    return ask.answer(
        Reason.UNTOLERATED_TAINT,
        f"{ask.by_cat.get(headline, 0)} of {ask.total} nodes are reserved by taint(s){which} that this run does not "
        f"tolerate. {source}{ask.others(headline)}",
        (PLATFORM_ADMINS, f"add the matching toleration to {fix_where}"),
        (OWNER, "resubmit with a preset that tolerates the GPU nodes"),
    )


def _selector(ask: Ask, headline: str) -> Explanation:
    selector = ask.spec.get("nodeSelector") or {}
    gpu_label = _annotations(ask.job).get(ANN_GPU_TYPE_LABEL, "")
    sel = ", ".join(f"{k}={v}" for k, v in selector.items()) or "its node affinity"
    prefixes = ("placement.node_selector", "placement.gpu_type", "placement.affinity")
    layers = sorted({_layer_name(v) for k, v in ask.placed.items() if k.startswith(prefixes)})
    src = f" (set by {', '.join(layers)})" if layers else ""
    gpu_type = f"; GPU type is the node label {gpu_label}" if gpu_label and gpu_label in selector else ""
    return ask.answer(
        Reason.SELECTOR_MISMATCH,
        f"No node matches the run's placement {sel}{src}: {ask.by_cat.get(headline, 0)} of {ask.total} nodes do not "
        f"match{gpu_type}.{ask.others(headline)}",
        (OWNER, "pick another GPU type or preset"),
        (PLATFORM_ADMINS, "fix the preset's node selector or affinity"),
    )


def _cordoned(ask: Ask, headline: str) -> Explanation:
    return ask.answer(
        Reason.NODES_CORDONED,
        f"{ask.by_cat.get(headline, 0)} of {ask.total} nodes are cordoned (maintenance) and take no new pods."
        f"{ask.others(headline)}",
        (CLUSTER_ADMINS, "uncordon the nodes when maintenance ends"),
        (OWNER, "wait, or stop the run"),
    )


def _volume(ask: Ask, headline: str) -> Explanation:
    return ask.answer(
        Reason.VOLUME_NODE_CONFLICT,
        f"The run's volumes can only be used on other nodes (e.g. another zone): {ask.by_cat.get(headline, 0)} of "
        f"{ask.total} nodes conflict with them.{ask.others(headline)}",
        (CLUSTER_ADMINS, "provision the volume where the GPU nodes are"),
        (OWNER, "use another volume"),
    )


def _insufficient(ask: Ask, headline: str) -> Explanation:
    gpu_short = sum(c.count for c in ask.fit.causes if c.category == "insufficient" and c.resource == ask.gpu_resource)
    if ask.want_gpus and (gpu_short or ask.gpu_nodes):
        return _insufficient_gpu(ask, headline, gpu_short)
    short = sorted({c.resource or "" for c in ask.fit.causes if c.category == "insufficient"})
    asks = ", ".join(x for x in (f"cpu {ask.cpu}" if ask.cpu else "", f"memory {ask.mem}" if ask.mem else "") if x)
    return ask.answer(
        Reason.INSUFFICIENT_RESOURCES,
        f"No node has enough free {' and '.join(short)} right now ({ask.by_cat.get(headline, 0)} node rejection(s) "
        f"of {ask.total}; the run asks for {asks or 'its requests'}).{ask.others(headline)}",
        (OWNER, "wait, or ask for less cpu/memory"),
        (CLUSTER_ADMINS, "add capacity"),
    )


def _insufficient_gpu(ask: Ask, headline: str, gpu_short: int) -> Explanation:
    want, also = ask.want_gpus, ask.others(headline)
    eligible = [n for n in ask.gpu_nodes or [] if ask.blocked(n) == "insufficient"]
    fits = [n for n in eligible if n.gpus_free >= want]
    # The scheduler rejected `gpu_short` nodes for GPUs; if our view has more nodes with room than the
    # scheduler left unrejected, pods outside the platform hold GPUs we cannot count.
    outside = gpu_short > 0 and len(fits) > ask.total - gpu_short
    free = [(n.gpus_free, n.name) for n in eligible if n.gpus_free > 0]
    total_free = sum(f for f, _ in free)
    if not outside and not fits and free and total_free >= want:
        spread = " + ".join(f"{f} on {name}" for f, name in sorted(free, reverse=True))
        ask.counts["free_gpus"] = total_free
        return ask.answer(
            Reason.GPU_FRAGMENTED,
            f"{total_free} GPUs are free but spread over nodes ({spread}); this run needs {want} on one "
            f"node, and {gpu_short or len(ask.gpu_nodes or [])} of {ask.total} nodes lack them.{also}",
            (OWNER, "wait for a node to free up, or ask for fewer GPUs per run"),
            (PLATFORM_ADMINS, "keep multi-GPU runs in a queue of their own, or use fewer, larger nodes"),
        )
    hidden = ""
    if outside:
        names = ", ".join(sorted(n.name for n in fits))
        hidden = (
            f" The platform's own runs leave room on {names}, so pods outside the platform (other namespaces or "
            "system pods) hold GPUs there; the platform cannot see how many."
        )
    return ask.answer(
        Reason.INSUFFICIENT_GPU,
        f"Admitted by the queue, but no node has {want} free {ask.gpu_resource} right now: {gpu_short} of "
        f"{ask.total} nodes lack free GPUs.{hidden}{also}",
        (OWNER, "wait for GPUs to free up, or stop the run"),
        (CLUSTER_ADMINS, "add GPU nodes" if not outside else "see which pods outside the platform hold GPUs"),
        (PLATFORM_ADMINS, "lower queue quotas to what the cluster can hold"),
    )


def _other(ask: Ask, headline: str) -> Explanation:
    text = ", ".join(f"{c.count} {c.text}" for c in ask.fit.causes) or ask.fit.raw
    return ask.answer(
        Reason.UNSCHEDULABLE,
        f"Kubernetes cannot place the pod on any of {ask.total} nodes: {text}.",
        (CLUSTER_ADMINS, "read the raw scheduler message"),
        (OWNER, "wait, or stop the run"),
    )


_HEADLINES: dict[str, Callable[[Ask, str], Explanation]] = {
    "taint": _taint,
    "selector": _selector,
    "cordoned": _cordoned,
    "volume": _volume,
    "insufficient": _insufficient,
}
