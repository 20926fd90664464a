"""`EmulatedCluster`: the store, the controllers and the HTTP server, with a test API.

The controllers (scheduler, Job controller, kubelet model) run on one thread that
reacts to store changes and timers, under the store's lock, so that every object
change any client sees is one a real control plane could have made. Each controller
is given only what it acts through — the store, the event recorder, the clock — never
the cluster, so imports run one way: the cluster imports its parts, no part imports it.
"""

from __future__ import annotations

import secrets
import threading
import time
import traceback
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from .admission import Admission
from .clock import ControllerClock
from .conditions import set_condition
from .events import EventRecorder
from .faults import Faults
from .jobs import PRIORITY_CLASS, JobController
from .kubelet import Kubelet
from .processes import LocalRuntime
from .rbac import Permissions
from .scheduler import TAINT_WORDINGS
from .scheduling import Scheduler
from .server import ApiServer
from .store import EVENT, JOB, NODE, POD, PVC, RESOURCES, Change, Store

NAMESPACE = RESOURCES[("", "namespaces")]
SECRET = RESOURCES[("", "secrets")]
CONFIGMAP = RESOURCES[("", "configmaps")]


class EmulatedCluster:
    """A Kubernetes API on 127.0.0.1 with a scheduler, a Job controller and a kubelet model.

    Use as a context manager, or `start()` / `stop()`. Tests change the cluster
    through the methods here (they act as an admin or as the node would), and the
    code under test talks to `url` with the official client. `local_processes=True`:
    pods' commands run as real local processes (processes.py), each pod on its own
    loopback IP; without it they are the kubelet model's tiny scripts.
    """

    def __init__(
        self,
        *,
        taint_wording: str = "v1.34",
        dra_message: bool = False,
        bookmark_seconds: float = 1.0,
        history_limit: int = 100_000,
        token: str | None = None,
        local_processes: bool = False,
    ) -> None:
        if taint_wording not in TAINT_WORDINGS:
            raise ValueError(f"taint_wording must be one of {TAINT_WORDINGS}")
        self.store = Store(history_limit)
        self.taint_wording = taint_wording
        self.dra_message = dra_message
        self.bookmark_seconds = bookmark_seconds
        self.token = token or secrets.token_hex(16)
        self.faults = Faults()
        self.permissions = Permissions()
        self.requests: Counter[tuple[str, str]] = Counter()  # (verb, resource) → calls
        self.clock = ControllerClock(self.store.changed)
        self.recorder = EventRecorder(self.store)
        self.scheduler = Scheduler(self.store, self.recorder, taint_wording=taint_wording, dra_message=dra_message)
        self.jobs = JobController(self.store, self.recorder, self.clock)
        self.kubelet = Kubelet(self.store, self.recorder, self.clock)
        if local_processes:  # pods' commands run as real processes (processes.py)
            self.kubelet.local = LocalRuntime(self.store)
        self.server = ApiServer(self)
        self._queue: list[Change] = []
        self._thread: threading.Thread | None = None
        self._running = False
        self.errors: list[BaseException] = []
        self.store.subscribe(self._queue.append)
        self.store.admission = Admission(self.store)

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self) -> EmulatedCluster:
        self.server.start()
        self._running = True
        self._thread = threading.Thread(target=self._loop, name="k8s-emulator-controllers", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        with self.store.lock:
            self._running = False
            self.store.changed.notify_all()
        self.server.stop()
        if self._thread is not None:
            self._thread.join(10)
        if self.kubelet.local is not None:
            self.kubelet.local.stop_all()  # outside the lock: the processes' readers take it

    def __enter__(self) -> EmulatedCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        return self.server.url

    def kubeconfig(self, namespace: str = "default") -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "emulator", "cluster": {"server": self.url}}],
            "users": [{"name": "gpuplat", "user": {"token": self.token}}],
            "contexts": [
                {"name": "emulator", "context": {"cluster": "emulator", "user": "gpuplat", "namespace": namespace}}
            ],
            "current-context": "emulator",
        }

    def write_kubeconfig(self, path: str | Path, namespace: str = "default") -> Path:
        p = Path(path)
        p.write_text(yaml.safe_dump(self.kubeconfig(namespace)))
        return p

    # -- the controller loop -----------------------------------------------------------------
    def after(self, seconds: float, action: Callable[[], None]) -> None:
        """Run `action` on the controller thread after `seconds` (under the store lock)."""
        self.clock.after(seconds, action)

    def _loop(self) -> None:
        with self.store.lock:
            while self._running:
                try:
                    self._drain()
                except Exception as exc:  # a bug in the model must not hang every test: record it, go on
                    self.errors.append(exc)
                    traceback.print_exc()
                wait = self.clock.wait_seconds(1.0)
                if not self._queue and wait > 0:
                    self.store.changed.wait(wait)

    def _drain(self) -> None:
        for _ in range(10_000):
            progressed = False
            while self._queue:
                batch, self._queue[:] = list(self._queue), []
                for change in batch:
                    self._dispatch(change)
                progressed = True
            if self.clock.run_due():
                progressed = True
            if self.scheduler.pending:
                self.scheduler.schedule_pending()
                progressed = progressed or bool(self._queue)
            if not progressed:
                return

    def _dispatch(self, change: Change) -> None:
        obj, rt = change.obj, change.rt
        if rt is POD:
            uid = obj["metadata"]["uid"]
            if change.type == "DELETED":
                self.scheduler.pod_gone(uid)
                self.kubelet.forget(uid)
                self.jobs.pod_gone(obj)
                return
            phase = (obj.get("status") or {}).get("phase")
            self.scheduler.pod_changed(obj)
            if (
                obj["spec"].get("nodeName")
                and uid not in self.kubelet.procs
                and phase == "Pending"
                and not obj["metadata"].get("deletionTimestamp")
            ):
                self.kubelet.start(obj)
            for ref in obj["metadata"].get("ownerReferences") or ():
                if ref.get("kind") == "Job":
                    job = self.store.find(JOB, obj["metadata"]["namespace"], ref["name"])
                    if job is not None and job["metadata"]["uid"] == ref["uid"]:
                        self.jobs.sync(job, obj)
        elif rt is JOB and change.type != "DELETED":
            self.jobs.sync(obj)
        elif rt in (NODE, PVC):
            self.scheduler.retry_unschedulable()
        elif rt is PRIORITY_CLASS:
            self.jobs.retry_failed_creates()

    # -- what the controllers share, for tests -------------------------------------------
    @property
    def node_used(self) -> dict[str, Counter[str]]:
        """Requests of the pods bound to each node (the scheduler's)."""
        return self.scheduler.node_used

    def event(self, obj: Mapping[str, Any], type_: str, reason: str, message: str, component: str) -> None:
        """Record a core/v1 Event about `obj`; a repeat bumps `count` and `lastTimestamp`."""
        self.recorder.event(obj, type_, reason, message, component)

    # -- the test API: building a cluster ----------------------------------------------------
    def apply(self, docs: Iterable[Mapping[str, Any]]) -> None:
        """Create objects as an admin would (`kubectl create -f`)."""
        for doc in docs:
            if not doc:
                continue
            group, _, _version = doc["apiVersion"].rpartition("/")
            rt = next((r for r in RESOURCES.values() if r.group == group and r.kind == doc["kind"]), None)
            if rt is None:
                continue  # kinds the emulator does not model (Roles, Deployments) are only read, not stored
            self.store.create(rt, doc["metadata"].get("namespace", "default") if rt.namespaced else "", doc)

    def add_namespace(self, name: str, labels: Mapping[str, str] | None = None) -> dict[str, Any]:
        """A namespace (labelled `kubernetes.io/metadata.name`, as every namespace is, and with `labels`)."""
        meta = {"name": name, "labels": dict(labels or {})}
        return self.store.create(NAMESPACE, "", {"metadata": meta, "status": {"phase": "Active"}})

    def label_namespace(self, name: str, labels: Mapping[str, str | None]) -> None:
        """`kubectl label namespace`: None removes a label."""

        def change(o: dict[str, Any]) -> None:
            have = o["metadata"].setdefault("labels", {})
            for k, v in labels.items():
                if v is None:
                    have.pop(k, None)
                else:
                    have[k] = v

        self.store.update(NAMESPACE, "", name, change)

    def add_node(
        self,
        name: str,
        *,
        gpus: int = 0,
        cpu: str = "32",
        memory: str = "256Gi",
        labels: Mapping[str, str] | None = None,
        taints: Iterable[Mapping[str, str]] = (),
        unschedulable: bool = False,
        gpu_capacity: int | None = None,
    ) -> dict[str, Any]:
        """A Ready node; `gpus` allocatable nvidia.com/gpu (`gpu_capacity` differs when the plugin is unhealthy)."""
        alloc = {"cpu": cpu, "memory": memory, "pods": "110", "ephemeral-storage": "100Gi"}
        cap = dict(alloc)
        if gpus or gpu_capacity:
            alloc["nvidia.com/gpu"] = str(gpus)
            cap["nvidia.com/gpu"] = str(gpus if gpu_capacity is None else gpu_capacity)
        spec: dict[str, Any] = {}
        if taints:
            spec["taints"] = [dict(t) for t in taints]
        if unschedulable:
            spec["unschedulable"] = True
        return self.store.create(
            NODE,
            "",
            {
                "metadata": {
                    "name": name,
                    "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", **(labels or {})},
                },
                "spec": spec,
                "status": {
                    "capacity": cap,
                    "allocatable": alloc,
                    "conditions": [
                        {
                            "type": "Ready",
                            "status": "True",
                            "reason": "KubeletReady",
                            "message": "kubelet is posting ready status",
                        }
                    ],
                    "nodeInfo": {
                        "architecture": "amd64",
                        "bootID": str(uuid.uuid5(uuid.NAMESPACE_DNS, f"{name}.boot")),
                        "containerRuntimeVersion": "containerd://2.0.0",
                        "kernelVersion": "6.8.0",
                        "kubeProxyVersion": "",
                        "kubeletVersion": "v1.34.1",
                        "machineID": uuid.uuid5(uuid.NAMESPACE_DNS, name).hex,
                        "operatingSystem": "linux",
                        "osImage": "Ubuntu 24.04 LTS",
                        "systemUUID": str(uuid.uuid5(uuid.NAMESPACE_DNS, f"{name}.system")),
                    },
                },
            },
        )

    def add_pvc(self, namespace: str, name: str, *, phase: str = "Bound", size: str = "100Gi") -> dict[str, Any]:
        return self.store.create(
            PVC,
            namespace,
            {
                "metadata": {"name": name},
                "spec": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": size}}},
                "status": {"phase": phase, **({"capacity": {"storage": size}} if phase == "Bound" else {})},
            },
        )

    def set_pvc_phase(self, namespace: str, name: str, phase: str) -> None:
        """As a provisioner would: Bound gets the requested capacity."""

        def change(o: dict[str, Any]) -> None:
            status = o.setdefault("status", {})
            status["phase"] = phase
            if phase == "Bound":
                status["capacity"] = {"storage": o["spec"]["resources"]["requests"]["storage"]}
                status["accessModes"] = list(o["spec"].get("accessModes") or [])

        self.store.update(PVC, namespace, name, change)

    def add_priority_class(self, name: str, value: int) -> None:
        self.store.create(
            PRIORITY_CLASS, "", {"metadata": {"name": name}, "value": value, "preemptionPolicy": "PreemptLowerPriority"}
        )

    def add_pod(
        self,
        namespace: str,
        name: str,
        *,
        gpus: int = 0,
        command: str = "gate never",
        priority: int = 0,
        gpu_resource: str = "nvidia.com/gpu",
    ) -> dict[str, Any]:
        """A bare pod, as another team or a system component would create it (any namespace).

        It is scheduled and run like every pod; its command is the kubelet's tiny script.
        """
        if self.store.find(NAMESPACE, "", namespace) is None:
            self.add_namespace(namespace)
        limits = {gpu_resource: str(gpus)} if gpus else {}
        return self.store.create(
            POD,
            namespace,
            {
                "metadata": {"name": name, "labels": {"app": name}},
                "spec": {
                    "priority": priority,
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "main",
                            "image": "busybox:1.36",
                            "command": ["sh", "-c", command],
                            "resources": {"limits": limits, "requests": dict(limits)},
                        }
                    ],
                },
                "status": {"phase": "Pending", "qosClass": "BestEffort"},
            },
        )

    def add_secret(self, namespace: str, name: str, data: Mapping[str, str]) -> dict[str, Any]:
        """An Opaque Secret, as `kubectl create secret generic` makes it (kept base64 in `data`)."""
        return self.store.create(SECRET, namespace, {"metadata": {"name": name}, "type": "Opaque", "stringData": data})

    def cordon(self, node: str, on: bool = True) -> None:
        def change(n: dict[str, Any]) -> None:
            if on:
                n.setdefault("spec", {})["unschedulable"] = True
            else:
                n.setdefault("spec", {}).pop("unschedulable", None)

        self.store.update(NODE, "", node, change)

    def set_taints(self, node: str, taints: Iterable[Mapping[str, str]]) -> None:
        self.store.update(NODE, "", node, lambda n: n.setdefault("spec", {}).update(taints=[dict(t) for t in taints]))

    def open_gate(self, name: str) -> None:
        """Let every container waiting at `gate NAME` (and any that reaches it later) go on."""
        with self.store.lock:
            self.kubelet.open_gate(name)
            self.store.changed.notify_all()

    def missing_image(self, image: str) -> None:
        with self.store.lock:
            self.kubelet.missing_images.add(image)

    # -- the test API: disruptions -----------------------------------------------------------
    def evict(self, namespace: str, pod: str, message: str = "Eviction API: evicting") -> None:
        """The Eviction API (a drain): DisruptionTarget=EvictionByEvictionAPI, then graceful deletion."""
        with self.store.lock:
            self.store.update(
                POD,
                namespace,
                pod,
                lambda p: set_condition(
                    p.setdefault("status", {}), "DisruptionTarget", "True", "EvictionByEvictionAPI", message
                ),
            )
            self.store.delete(POD, namespace, pod, "Background")

    def preempt(self, namespace: str, pod: str, by: str = "default/high-priority") -> None:
        """Preemption by the scheduler: DisruptionTarget=PreemptionByScheduler, a Preempted event, deletion."""
        with self.store.lock:
            victim = self.store.get(POD, namespace, pod)
            msg = f"{by}: preempting to accommodate a higher priority pod"
            victim = self.store.update(
                POD,
                namespace,
                pod,
                lambda p: set_condition(
                    p.setdefault("status", {}), "DisruptionTarget", "True", "PreemptionByScheduler", msg
                ),
            )
            self.event(
                victim,
                "Normal",
                "Preempted",
                f"Preempted by pod {secrets.token_hex(4)}-uid on node {victim['spec'].get('nodeName', '')}",
                "default-scheduler",
            )
            self.store.delete(POD, namespace, pod, "Background")

    def evict_by_kubelet(
        self, namespace: str, pod: str, message: str = "The node was low on resource: memory. "
    ) -> None:
        with self.store.lock:
            self.kubelet.evicted_by_kubelet(self.store.get(POD, namespace, pod), message)

    def compact(self) -> int:
        """Forget the change history: watches resuming from before now get 410 Expired."""
        return self.store.compact()

    # -- the test API: reading -------------------------------------------------------------
    def pods(self, namespace: str, label_selector: str | None = None) -> list[dict[str, Any]]:
        return self.store.select(POD, namespace, label_selector)[0]

    def jobs_in(self, namespace: str, label_selector: str | None = None) -> list[dict[str, Any]]:
        return self.store.select(JOB, namespace, label_selector)[0]

    def events_for(self, obj: Mapping[str, Any]) -> list[dict[str, Any]]:
        ns = obj["metadata"].get("namespace") or "default"
        return self.store.select(EVENT, ns, field_selector=f"involvedObject.uid={obj['metadata']['uid']}")[0]

    def wait_for(self, predicate: Callable[[], Any], timeout: float = 10.0, what: str = "condition") -> Any:
        """Wait (on store changes, no fixed sleeps) until `predicate()` is truthy."""
        deadline = time.monotonic() + timeout
        with self.store.lock:
            while True:
                value = predicate()
                if value:
                    return value
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"emulated cluster: timed out after {timeout}s waiting for {what}")
                self.store.changed.wait(min(left, 0.1))


def load_manifests(paths: Iterable[str | Path]) -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = []
    for p in paths:
        docs.extend(d for d in yaml.safe_load_all(Path(p).read_text()) if d)
    return docs
