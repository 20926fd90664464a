"""One shared list+watch cache of the platform's Jobs, Pods, their Events, and the Nodes.

Each kind has one informer thread: list (paged) to get a resourceVersion, then watch
from it with bookmarks, resuming from the last resourceVersion seen after a dropped
or timed-out stream, and listing again after 410 Expired (the diff against the cache
turns into the changes the watch missed, so no status change is lost). Every watch
has a server-side `timeout_seconds` and a client read timeout; every list a request
timeout. Runs are answered from here: there are no per-run polls.

Objects are raw JSON dicts, replaced whole and never mutated, so readers on the event
loop take references without copying.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kubernetes.client.exceptions import ApiException
from kubernetes.watch.watch import iter_resp_lines

from .explain import NodeView
from .manifests import LABEL_RUN
from .streaming import StreamThread

Obj = dict[str, Any]
EVENTS_PER_OBJECT = 50
UNMATCHED_EVENTS = 2000


class Expired(Exception):
    """410: the resourceVersion is too old; list again."""


@dataclass(frozen=True)
class Timeouts:
    connect_seconds: float = 5.0
    request_seconds: float = 30.0
    watch_seconds: int = 300  # server-side timeoutSeconds of each watch
    backoff_max_seconds: float = 5.0


@dataclass(frozen=True)
class Snapshot:
    job: Obj | None
    pods: tuple[Obj, ...]
    events: tuple[Obj, ...]
    gone: tuple[Obj, ...] = ()  # pods deleted since the last snapshot of this run (their last state)


def _rv(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


class Informer(StreamThread):
    """List+watch of one kind, feeding `ClusterCache.apply` / `replace`."""

    def __init__(
        self,
        cache: ClusterCache,
        kind: str,
        call: Callable[..., Any],
        args: tuple[Any, ...],
        label_selector: str | None,
        timeouts: Timeouts,
    ) -> None:
        self.cache = cache
        self.kind = kind
        self.call = call
        self.args = args
        self.label_selector = label_selector
        self.timeouts = timeouts
        self.rv: str | None = None
        self.synced = threading.Event()
        self.forbidden = ""
        super().__init__(f"gpuplat-k8s-{kind}")

    def _kwargs(self) -> dict[str, Any]:
        return {"label_selector": self.label_selector} if self.label_selector else {}

    def _run(self) -> None:
        backoff = 0.1
        log = self.cache.log
        while not self._stop.is_set():
            try:
                if self.rv is None:
                    self._list()
                self._watch()
                backoff = 0.1
                continue
            except Expired:
                self.cache.stats[f"{self.kind}.expired"] += 1
                self.rv = None  # list again right away
                continue
            except ApiException as exc:
                if self._stop.is_set():
                    return
                if exc.status == 410:
                    self.cache.stats[f"{self.kind}.expired"] += 1
                    self.rv = None
                    continue
                if exc.status == 403:
                    if not self.forbidden:
                        log.warning("gpuplat: the service account may not list/watch %s: %s", self.kind, exc.reason)
                    self.forbidden = str(exc.reason or "forbidden")
                    self.synced.set()  # nothing more will come: do not hold up readers
                    self.cache.wake_all()
                else:
                    log.warning("gpuplat: %s watch failed (%s %s); retrying", self.kind, exc.status, exc.reason)
            except Exception as exc:  # dropped connection, read timeout, bad chunk: resume from rv
                if self._stop.is_set():
                    return
                self.cache.stats[f"{self.kind}.dropped"] += 1
                log.debug("gpuplat: %s watch interrupted: %r", self.kind, exc)
            self.cache.stats[f"{self.kind}.retries"] += 1
            if self._stop.wait(backoff):
                return
            backoff = min(backoff * 2, self.timeouts.backoff_max_seconds)

    def _list(self) -> None:
        items: list[Obj] = []
        token: str | None = None
        t = self.timeouts
        while True:
            kwargs = self._kwargs()
            kwargs.update(limit=500, _preload_content=False, _request_timeout=(t.connect_seconds, t.request_seconds))
            if token:
                kwargs["_continue"] = token
            resp = self.call(*self.args, **kwargs)
            self.cache.stats[f"{self.kind}.list"] += 1
            body = json.loads(resp.data)
            items.extend(body.get("items") or ())
            meta = body.get("metadata") or {}
            token = meta.get("continue")
            if not token:
                break
        self.cache.replace(self.kind, items)
        self.rv = str(meta.get("resourceVersion") or "")
        self.forbidden = ""
        self.synced.set()
        if self.kind in ("jobs", "pods"):
            self.cache.listed()

    def _watch(self) -> None:
        t = self.timeouts
        kwargs = self._kwargs()
        kwargs.update(
            watch=True,
            resource_version=self.rv,
            allow_watch_bookmarks=True,
            timeout_seconds=t.watch_seconds,
            _preload_content=False,
            _request_timeout=(t.connect_seconds, t.watch_seconds + t.request_seconds),
        )
        resp = self.call(*self.args, **kwargs)
        self.cache.stats[f"{self.kind}.watch"] += 1
        self._resp = resp
        try:
            for line in iter_resp_lines(resp):
                if self._stop.is_set():
                    return
                if not line:
                    continue
                ev = json.loads(line)
                type_, obj = ev.get("type"), ev.get("object") or {}
                if type_ == "ERROR":
                    if obj.get("code") == 410:
                        raise Expired(obj.get("message"))
                    raise ApiException(
                        status=obj.get("code") or 500, reason=f"{obj.get('reason')}: {obj.get('message')}"
                    )
                rv = _rv(obj)
                if type_ != "BOOKMARK":
                    self.cache.apply(self.kind, type_, obj)
                if rv:
                    self.rv = rv
        finally:
            self._resp = None
            resp.release_conn()


class ClusterCache:
    """The platform's objects in one namespace (plus the nodes), indexed by run id."""

    def __init__(
        self,
        core: Any,
        batch: Any,
        namespace: str,
        label_selector: str,
        timeouts: Timeouts,
        on_dirty: Callable[[], None],
        log: logging.Logger | logging.LoggerAdapter[Any],
        watch_nodes: bool = True,
        on_synced: Callable[[], None] | None = None,
    ) -> None:
        self.namespace = namespace
        self.on_synced = on_synced
        self.log = log
        self.lock = threading.Lock()
        self.stats: Counter[str] = Counter()
        self._on_dirty = on_dirty
        self.jobs: dict[str, Obj] = {}
        self.pods: dict[str, Obj] = {}
        self.nodes: dict[str, Obj] = {}
        self.job_of_run: dict[str, str] = {}
        self.pods_of_run: dict[str, set[str]] = {}
        self.run_of_uid: dict[str, str] = {}
        self.events_of_uid: dict[str, OrderedDict[str, Obj]] = {}
        self.event_uid: dict[str, str] = {}  # event name → involved uid
        self.unmatched: OrderedDict[str, Obj] = OrderedDict()
        self.pod_gpus: dict[str, tuple[str, int]] = {}  # pod name → (node, GPUs), while it holds them
        self.gone_pods: dict[str, list[Obj]] = {}  # run id → pods deleted since its last snapshot
        self.gpus_used: Counter[str] = Counter()  # node → GPUs the platform's live pods hold there
        self.gpu_resource = "nvidia.com/gpu"
        self.dirty: set[str] = set()
        self.informers = {
            "jobs": Informer(self, "jobs", batch.list_namespaced_job, (namespace,), label_selector, timeouts),
            "pods": Informer(self, "pods", core.list_namespaced_pod, (namespace,), label_selector, timeouts),
            "events": Informer(self, "events", core.list_namespaced_event, (namespace,), None, timeouts),
        }
        if watch_nodes:
            self.informers["nodes"] = Informer(self, "nodes", core.list_node, (), None, timeouts)

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self) -> None:
        for inf in self.informers.values():
            inf.start()

    def stop(self) -> None:
        for inf in self.informers.values():
            inf.stop()
        for inf in self.informers.values():
            inf.join(5)

    @property
    def synced(self) -> bool:
        """Jobs and pods have been listed at least once (events and nodes only add detail)."""
        return self.informers["jobs"].synced.is_set() and self.informers["pods"].synced.is_set()

    def wait_synced(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        for kind in ("jobs", "pods"):
            if not self.informers[kind].synced.wait(max(0.0, deadline - time.monotonic())):
                return False
        return True

    def listed(self) -> None:
        """Jobs or pods were (re)listed: tell the reader once both are in."""
        if self.synced and self.on_synced is not None:
            self.on_synced()

    # -- ingest (informer threads) -----------------------------------------------------------
    def _mark(self, run_id: str | None) -> None:
        if run_id is None:
            return
        was_empty = not self.dirty
        self.dirty.add(run_id)
        if was_empty:
            self._on_dirty()

    def wake_all(self) -> None:
        with self.lock:
            for run_id in list(self.job_of_run) + list(self.pods_of_run):
                self._mark(run_id)

    def apply(self, kind: str, type_: str, obj: Obj) -> None:
        with self.lock:
            self.stats[f"{kind}.events"] += 1
            self._apply(kind, type_, obj)

    def _apply(self, kind: str, type_: str, obj: Obj) -> None:
        meta = obj.get("metadata") or {}
        name = str(meta.get("name") or "")
        deleted = type_ == "DELETED"
        if kind == "jobs":
            run_id = (meta.get("labels") or {}).get(LABEL_RUN)
            if deleted:
                self.jobs.pop(name, None)
                if run_id and self.job_of_run.get(run_id) == name:
                    del self.job_of_run[run_id]
                self._drop_uid(str(meta.get("uid") or ""))
            else:
                self.jobs[name] = obj
                if run_id:
                    self.job_of_run[run_id] = name
                    self._own_uid(str(meta.get("uid") or ""), run_id)
            self._mark(run_id)
        elif kind == "pods":
            run_id = (meta.get("labels") or {}).get(LABEL_RUN)
            if deleted:
                last = self.pods.pop(name, None)
                if run_id:
                    self.gone_pods.setdefault(run_id, []).append(last or obj)
                    names = self.pods_of_run.get(run_id)
                    if names is not None:
                        names.discard(name)
                        if not names:
                            del self.pods_of_run[run_id]
                    # Its events stay until the run's next snapshot has taken the pod's last state.
                else:
                    self._drop_uid(str(meta.get("uid") or ""))
                before = self.pod_gpus.pop(name, None)
                if before is not None:
                    self.gpus_used[before[0]] -= before[1]
            else:
                self.pods[name] = obj
                if run_id:
                    self.pods_of_run.setdefault(run_id, set()).add(name)
                    self._own_uid(str(meta.get("uid") or ""), run_id)
                self._count_gpus(name, obj)
            self._mark(run_id)
        elif kind == "events":
            inv = obj.get("involvedObject") or {}
            uid = str(inv.get("uid") or "")
            if deleted:
                self.unmatched.pop(name, None)
                owner = self.event_uid.pop(name, None)
                if owner is not None:
                    self.events_of_uid.get(owner, OrderedDict()).pop(name, None)
                return
            run_id = self.run_of_uid.get(uid)
            if run_id is None:
                # Its pod may not have reached the pod watch yet: keep it a while.
                self.unmatched[name] = obj
                self.unmatched.move_to_end(name)
                while len(self.unmatched) > UNMATCHED_EVENTS:
                    self.unmatched.popitem(last=False)
                return
            self._add_event(uid, name, obj)
            self._mark(run_id)
        elif kind == "nodes":
            if deleted:
                self.nodes.pop(name, None)
            else:
                self.nodes[name] = obj

    def _add_event(self, uid: str, name: str, obj: Obj) -> None:
        bucket = self.events_of_uid.setdefault(uid, OrderedDict())
        bucket[name] = obj
        bucket.move_to_end(name)
        self.event_uid[name] = uid
        while len(bucket) > EVENTS_PER_OBJECT:
            old, _ = bucket.popitem(last=False)
            self.event_uid.pop(old, None)

    def _own_uid(self, uid: str, run_id: str) -> None:
        if not uid or uid in self.run_of_uid:
            return
        self.run_of_uid[uid] = run_id
        for name in [n for n, e in self.unmatched.items() if (e.get("involvedObject") or {}).get("uid") == uid]:
            self._add_event(uid, name, self.unmatched.pop(name))

    def _drop_uid(self, uid: str) -> None:
        self.run_of_uid.pop(uid, None)
        for name in self.events_of_uid.pop(uid, OrderedDict()):
            self.event_uid.pop(name, None)

    def _count_gpus(self, name: str, pod: Obj) -> None:
        spec = pod.get("spec") or {}
        phase = (pod.get("status") or {}).get("phase")
        node = spec.get("nodeName")
        gpus = 0
        for c in spec.get("containers") or ():
            res = c.get("resources") or {}
            gpus += int(
                (res.get("limits") or {}).get(self.gpu_resource)
                or (res.get("requests") or {}).get(self.gpu_resource)
                or 0
            )
        before = self.pod_gpus.pop(name, None)
        if before is not None:
            self.gpus_used[before[0]] -= before[1]
        if node and gpus and phase not in ("Succeeded", "Failed"):
            self.pod_gpus[name] = (node, gpus)
            self.gpus_used[node] += gpus

    def replace(self, kind: str, items: list[Obj]) -> None:
        """A fresh list: apply what changed since the cache last saw it, as a watch would have."""
        with self.lock:
            self.stats[f"{kind}.relisted_items"] += len(items)
            current = {"jobs": self.jobs, "pods": self.pods, "nodes": self.nodes}.get(kind)
            if current is None:  # events: rebuild the indexes from scratch
                fresh = {str((o.get("metadata") or {}).get("name")): o for o in items}
                for name in list(self.event_uid) + list(self.unmatched):
                    if name not in fresh:
                        self._apply(kind, "DELETED", {"metadata": {"name": name}})
                for o in items:
                    self._apply(kind, "ADDED", o)
                return
            fresh = {str((o.get("metadata") or {}).get("name")): o for o in items}
            for name, old in list(current.items()):
                if name not in fresh:
                    self._apply(kind, "DELETED", old)
            for name, o in fresh.items():
                before = current.get(name)
                if before is None or _rv(before) != _rv(o):
                    self._apply(kind, "MODIFIED" if before is not None else "ADDED", o)

    # -- reading (event loop) ----------------------------------------------------------------
    def take_dirty(self) -> set[str]:
        with self.lock:
            out, self.dirty = self.dirty, set()
            return out

    def snapshot(self, run_id: str) -> Snapshot:
        with self.lock:
            job_name = self.job_of_run.get(run_id)
            job = self.jobs.get(job_name) if job_name else None
            pods = tuple(self.pods[n] for n in sorted(self.pods_of_run.get(run_id, ())) if n in self.pods)
            events: list[Obj] = []
            for obj in (job, *pods):
                if obj is not None:
                    events.extend(self.events_of_uid.get(str(obj["metadata"].get("uid")), OrderedDict()).values())
            gone = tuple(self.gone_pods.pop(run_id, ()))
            for obj in gone:
                uid = str(obj["metadata"].get("uid"))
                events.extend(self.events_of_uid.get(uid, OrderedDict()).values())
                self._drop_uid(uid)
            return Snapshot(job, pods, tuple(events), gone)

    def run_pods(self, run_id: str) -> tuple[Obj, ...]:
        """The run's pods now, read only (any thread): unlike `snapshot`, takes nothing kept for the next one."""
        with self.lock:
            return tuple(self.pods[n] for n in sorted(self.pods_of_run.get(run_id, ())) if n in self.pods)

    def forget(self, run_id: str) -> None:
        """The run is over: drop what is kept only for its next snapshot."""
        with self.lock:
            for obj in self.gone_pods.pop(run_id, ()):
                self._drop_uid(str(obj["metadata"].get("uid")))

    def node_labels(self, name: str) -> dict[str, str] | None:
        """One node's labels; None when nodes cannot be read (or the node is gone)."""
        nodes = self.informers.get("nodes")
        if nodes is None or nodes.forbidden or not nodes.synced.is_set():
            return None
        with self.lock:
            n = self.nodes.get(name)
            return None if n is None else dict((n.get("metadata") or {}).get("labels") or {})

    def node_views(self) -> list[NodeView] | None:
        """Nodes with their GPUs free as the platform counts them; None when nodes cannot be read."""
        nodes = self.informers.get("nodes")
        if nodes is None or nodes.forbidden or not nodes.synced.is_set():
            return None
        with self.lock:
            used = self.gpus_used
            out = []
            for name, n in sorted(self.nodes.items()):
                alloc = int(((n.get("status") or {}).get("allocatable") or {}).get(self.gpu_resource) or 0)
                spec = n.get("spec") or {}
                out.append(
                    NodeView(
                        name,
                        alloc,
                        max(0, alloc - used[name]),
                        dict((n.get("metadata") or {}).get("labels") or {}),
                        tuple(spec.get("taints") or ()),
                        bool(spec.get("unschedulable")),
                    )
                )
            return out

    def run_ids(self) -> set[str]:
        with self.lock:
            return set(self.job_of_run)

    def job(self, run_id: str) -> Obj | None:
        with self.lock:
            name = self.job_of_run.get(run_id)
            return self.jobs.get(name) if name else None
