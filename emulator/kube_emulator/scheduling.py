"""`Scheduler`: the controller that binds pending pods to nodes and keeps each node's usage.

It decides with scheduler.py's filters (pure) and acts through narrow collaborators: the
store it reads pods, nodes and claims from and binds through, and the event recorder for
`Scheduled` / `FailedScheduling` (Kueue's `scheduler.New(queues, cache, client, recorder)`).
Pending and unschedulable pods are kept apart: an unschedulable pod is tried again only when
something it could be waiting for changes (a node, a claim, a pod's resources released).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from .conditions import set_condition
from .events import EventRecorder
from .scheduler import pod_requests, schedule
from .store import NODE, POD, PVC, Store


class Scheduler:
    def __init__(self, store: Store, recorder: EventRecorder, *, taint_wording: str, dra_message: bool) -> None:
        self.store = store
        self.recorder = recorder
        self.taint_wording = taint_wording
        self.dra_message = dra_message
        self.pending: dict[str, tuple[str, str]] = {}  # pod uid → (ns, name): waiting for a node
        self._unschedulable: dict[str, tuple[str, str]] = {}
        self._usage: dict[str, tuple[str, Counter[str]]] = {}  # pod uid → (node, requests)
        self.node_used: dict[str, Counter[str]] = {}

    def pod_changed(self, pod: dict[str, Any]) -> None:
        """A pod was added or changed: an ended one frees its node's resources, an unbound one waits."""
        uid = pod["metadata"]["uid"]
        if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            self.release(uid)
        if not pod["spec"].get("nodeName"):
            if not pod["metadata"].get("deletionTimestamp") and uid not in self._unschedulable:
                self.pending[uid] = (pod["metadata"]["namespace"], pod["metadata"]["name"])

    def pod_gone(self, uid: str) -> None:
        self.pending.pop(uid, None)
        self._unschedulable.pop(uid, None)
        self.release(uid)

    def release(self, uid: str) -> None:
        used = self._usage.pop(uid, None)
        if used is not None:
            node, req = used
            self.node_used[node] -= req
            self.retry_unschedulable()

    def retry_unschedulable(self) -> None:
        self.pending.update(self._unschedulable)
        self._unschedulable.clear()

    def schedule_pending(self) -> None:
        """One scheduling cycle: every pending pod, highest priority then oldest first."""
        nodes = sorted(self.store.iter(NODE), key=lambda n: n["metadata"]["name"])
        pods = [self.store.find(POD, ns, name) for ns, name in self.pending.values()]
        self.pending.clear()
        live = [
            p
            for p in pods
            if p is not None and not p["spec"].get("nodeName") and not p["metadata"].get("deletionTimestamp")
        ]
        live.sort(
            key=lambda p: (
                -int(p["spec"].get("priority") or 0),
                p["metadata"]["creationTimestamp"],
                p["metadata"]["name"],
            )
        )
        for pod in live:
            ns = pod["metadata"]["namespace"]
            claims = {c["metadata"]["name"]: c for c in self.store.select(PVC, ns)[0]}
            placed = schedule(pod, nodes, self.node_used, claims, self.taint_wording, self.dra_message)
            uid = pod["metadata"]["uid"]
            if placed.node is not None:
                req = pod_requests(pod)
                self._usage[uid] = (placed.node, req)
                self.node_used.setdefault(placed.node, Counter()).update(req)

                def bind(p: dict[str, Any], node: str = placed.node) -> None:
                    p["spec"]["nodeName"] = node
                    set_condition(p.setdefault("status", {}), "PodScheduled", "True")

                bound = self.store.update(POD, ns, pod["metadata"]["name"], bind)
                self.recorder.event(
                    bound,
                    "Normal",
                    "Scheduled",
                    f"Successfully assigned {ns}/{pod['metadata']['name']} to {placed.node}",
                    "default-scheduler",
                )
                continue
            self._unschedulable[uid] = (ns, pod["metadata"]["name"])
            reason = "SchedulingGated" if placed.gated else "Unschedulable"

            def unschedulable(p: dict[str, Any], reason: str = reason, message: str = placed.message) -> None:
                set_condition(p.setdefault("status", {}), "PodScheduled", "False", reason, message)

            updated = self.store.update(POD, ns, pod["metadata"]["name"], unschedulable)
            if not placed.gated:
                self.recorder.event(updated, "Warning", "FailedScheduling", placed.message, "default-scheduler")
