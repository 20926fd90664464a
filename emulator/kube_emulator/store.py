"""The object store: what etcd plus the apiserver's registry do, in memory.

Every change takes the next global resourceVersion and appends one entry to the
history that watches replay; `compact()` forgets history so that a watch resuming
from before it gets 410 Expired, as a real apiserver does after etcd compaction.
Deletion honours propagation policies (Orphan, Background, Foreground) through
owner references, and finalizers.
"""

from __future__ import annotations

import base64
import copy
import datetime as dt
import secrets
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from .selectors import parse_field_selector, parse_label_selector

FOREGROUND = "foregroundDeletion"
ORPHAN = "orphan"


@dataclass(frozen=True)
class ResourceType:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    # Jobs deleted through the API orphan their pods unless told otherwise (batch/v1 quirk).
    default_propagation: str = "Background"
    subresources: tuple[str, ...] = ()

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


RESOURCES: dict[tuple[str, str], ResourceType] = {
    (r.group, r.plural): r
    for r in (
        ResourceType("", "v1", "pods", "Pod", True, subresources=("status", "log", "eviction")),
        ResourceType("", "v1", "events", "Event", True),
        ResourceType("", "v1", "nodes", "Node", False, subresources=("status",)),
        ResourceType("", "v1", "namespaces", "Namespace", False),
        ResourceType("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", True, subresources=("status",)),
        ResourceType("", "v1", "secrets", "Secret", True),
        ResourceType("", "v1", "configmaps", "ConfigMap", True),
        ResourceType("", "v1", "serviceaccounts", "ServiceAccount", True),
        ResourceType("batch", "v1", "jobs", "Job", True, default_propagation="Orphan", subresources=("status",)),
        ResourceType("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", False),
        # Stored and served, not enforced: the emulator has no network (docs/kubernetes.md).
        ResourceType("networking.k8s.io", "v1", "networkpolicies", "NetworkPolicy", True),
    )
}


def resource(group: str, plural: str) -> ResourceType:
    return RESOURCES[(group, plural)]


_INITIAL_PHASE = {"pods": "Pending", "persistentvolumeclaims": "Pending", "namespaces": "Active"}
POD = RESOURCES[("", "pods")]
SECRET = RESOURCES[("", "secrets")]
EVENT = RESOURCES[("", "events")]
NODE = RESOURCES[("", "nodes")]
JOB = RESOURCES[("batch", "jobs")]
PVC = RESOURCES[("", "persistentvolumeclaims")]


class ApiError(Exception):
    """Answered as a metav1.Status with this code and reason."""

    def __init__(self, code: int, reason: str, message: str, details: Mapping[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = dict(details or {})

    def status(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details:
            out["details"] = self.details
        return out


def not_found(rt: ResourceType, name: str) -> ApiError:
    qualified = f"{rt.plural}.{rt.group}" if rt.group else rt.plural
    return ApiError(404, "NotFound", f'{qualified} "{name}" not found', {"name": name, "kind": rt.plural})


def expired(rv: int, oldest: int) -> ApiError:
    return ApiError(410, "Expired", f"too old resource version: {rv} ({oldest})")


def admit_secret(obj: dict[str, Any], old: Mapping[str, Any] | None) -> None:
    """What the registry does to a Secret: `stringData` is write-only, merged into base64 `data`;
    an immutable Secret's data and type never change."""
    string_data = obj.pop("stringData", None) or {}
    if string_data:
        data = obj.setdefault("data", {})
        for k, v in string_data.items():
            data[k] = base64.b64encode(str(v).encode()).decode()
    if old is not None and old.get("immutable"):
        name = old["metadata"]["name"]
        for key in ("data", "type", "immutable"):
            if obj.get(key) != old.get(key):
                raise ApiError(
                    422,
                    "Invalid",
                    f'Secret "{name}" is invalid: {key}: Forbidden: field is immutable when `immutable` is set',
                    {"name": name, "kind": "secrets"},
                )


def now_rfc3339() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class Change:
    rv: int
    type: str  # ADDED, MODIFIED, DELETED
    rt: ResourceType
    obj: dict[str, Any]  # a snapshot; never mutated after it is recorded


Key = tuple[ResourceType, str, str]  # (type, namespace or "", name)


class Store:
    """Objects by (type, namespace, name), a global resourceVersion and the change history."""

    def __init__(self, history_limit: int = 100_000) -> None:
        self.lock = threading.RLock()
        self.changed = threading.Condition(self.lock)
        self.objects: dict[ResourceType, dict[tuple[str, str], dict[str, Any]]] = {rt: {} for rt in RESOURCES.values()}
        self.rv = 0
        self.history: list[Change] = []
        self.history_base = 0  # rv of the last change dropped from history
        self.history_limit = history_limit
        self._subscribers: list[Callable[[Change], None]] = []
        # Set by the kubelet model: takes over a pod that needs a graceful end (True: it removes it later).
        self.graceful: Callable[[ResourceType, dict[str, Any]], bool] | None = None
        # Set by the cluster: validation and admission of a new object (raises ApiError), under the lock.
        self.admission: Callable[[ResourceType, str, dict[str, Any]], None] | None = None
        self._by_uid: dict[str, tuple[ResourceType, str, str]] = {}
        self._children: dict[str, set[tuple[ResourceType, str, str]]] = {}

    # -- reading -----------------------------------------------------------------------------
    def get(self, rt: ResourceType, namespace: str, name: str) -> dict[str, Any]:
        with self.lock:
            obj = self.objects[rt].get((namespace if rt.namespaced else "", name))
            if obj is None:
                raise not_found(rt, name)
            return obj

    def find(self, rt: ResourceType, namespace: str, name: str) -> dict[str, Any] | None:
        with self.lock:
            return self.objects[rt].get((namespace if rt.namespaced else "", name))

    def select(
        self,
        rt: ResourceType,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> tuple[list[dict[str, Any]], int]:
        labels = parse_label_selector(label_selector)
        fields = parse_field_selector(field_selector, rt.plural)
        with self.lock:
            items = [
                o
                for (ns, _), o in sorted(self.objects[rt].items())
                if (namespace is None or ns == namespace) and labels(o["metadata"].get("labels") or {}) and fields(o)
            ]
            return items, self.rv

    def iter(self, rt: ResourceType) -> Iterator[dict[str, Any]]:
        with self.lock:
            yield from list(self.objects[rt].values())

    # -- writing -----------------------------------------------------------------------------
    def subscribe(self, callback: Callable[[Change], None]) -> None:
        """Called under the store lock for every change (controllers queue work from it)."""
        self._subscribers.append(callback)

    def _index(self, rt: ResourceType, obj: dict[str, Any], old: dict[str, Any] | None, gone: bool = False) -> None:
        meta = obj["metadata"]
        key = (rt, meta.get("namespace", "") if rt.namespaced else "", meta["name"])
        before = {r.get("uid") for r in (old or {}).get("metadata", {}).get("ownerReferences") or ()}
        after = set() if gone else {r.get("uid") for r in meta.get("ownerReferences") or ()}
        for uid in before - after:
            kids = self._children.get(uid)
            if kids is not None:
                kids.discard(key)
                if not kids:
                    del self._children[uid]
        for uid in after - before:
            self._children.setdefault(uid, set()).add(key)
        if gone:
            self._by_uid.pop(meta["uid"], None)
        else:
            self._by_uid[meta["uid"]] = key

    def _record(self, type_: str, rt: ResourceType, obj: dict[str, Any]) -> None:
        change = Change(self.rv, type_, rt, obj)
        self.history.append(change)
        if len(self.history) > self.history_limit:
            drop = len(self.history) - self.history_limit
            self.history_base = self.history[drop - 1].rv
            del self.history[:drop]
        for sub in self._subscribers:
            sub(change)
        self.changed.notify_all()

    def create(self, rt: ResourceType, namespace: str, body: Mapping[str, Any]) -> dict[str, Any]:
        obj = copy.deepcopy(dict(body))
        meta = obj.setdefault("metadata", {})
        ns = namespace if rt.namespaced else ""
        with self.lock:
            if not meta.get("name"):
                prefix = meta.get("generateName")
                if not prefix:
                    raise ApiError(
                        422,
                        "Invalid",
                        f"{rt.kind} is invalid: metadata.name: Required value: name or generateName is required",
                    )
                for _ in range(20):
                    candidate = prefix + "".join(secrets.choice("bcdfghjklmnpqrstvwxz2456789") for _ in range(5))
                    if (ns, candidate) not in self.objects[rt]:
                        break
                meta["name"] = candidate
            name = meta["name"]
            if (ns, name) in self.objects[rt]:
                qualified = f"{rt.plural}.{rt.group}" if rt.group else rt.plural
                raise ApiError(
                    409, "AlreadyExists", f'{qualified} "{name}" already exists', {"name": name, "kind": rt.plural}
                )
            if rt.namespaced and ns and rt.plural != "namespaces":
                nsobj = self.objects[RESOURCES[("", "namespaces")]]
                if nsobj and ("", ns) not in nsobj:
                    raise ApiError(404, "NotFound", f'namespaces "{ns}" not found', {"name": ns, "kind": "namespaces"})
            if rt is SECRET:
                admit_secret(obj, None)
            if rt.plural == "namespaces":  # the apiserver labels every namespace with its name
                meta.setdefault("labels", {})["kubernetes.io/metadata.name"] = name
            if self.admission is not None:
                self.admission(rt, ns, obj)
            self.rv += 1
            if rt.namespaced:
                meta["namespace"] = ns
            meta["uid"] = str(uuid.uuid4())
            meta["resourceVersion"] = str(self.rv)
            meta["creationTimestamp"] = now_rfc3339()
            meta.setdefault("generation", 1)
            obj["apiVersion"] = rt.api_version
            obj["kind"] = rt.kind
            initial = _INITIAL_PHASE.get(rt.plural)
            if initial:  # the API defaults these at creation
                obj.setdefault("status", {}).setdefault("phase", initial)
            self.objects[rt][(ns, name)] = obj
            self._index(rt, obj, None)
            self._record("ADDED", rt, obj)
            return obj

    def replace(
        self, rt: ResourceType, namespace: str, name: str, body: Mapping[str, Any], *, check_rv: bool = True
    ) -> dict[str, Any]:
        """PUT semantics: the whole object, with an optional resourceVersion precondition."""
        with self.lock:
            old = self.get(rt, namespace, name)
            want = (body.get("metadata") or {}).get("resourceVersion")
            if check_rv and want and want != old["metadata"]["resourceVersion"]:
                raise ApiError(
                    409,
                    "Conflict",
                    f'Operation cannot be fulfilled on {rt.plural} "{name}": the object has been modified; '
                    "please apply your changes to the latest version and try again",
                    {"name": name, "kind": rt.plural},
                )
            new = copy.deepcopy(dict(body))
            meta = new.setdefault("metadata", {})
            for keep in ("uid", "creationTimestamp", "namespace", "deletionTimestamp", "ownerReferences"):
                if keep in old["metadata"] and keep not in meta:
                    meta[keep] = old["metadata"][keep]
            meta["name"] = name
            return self._commit(rt, old, new)

    def update(
        self, rt: ResourceType, namespace: str, name: str, change: Callable[[dict[str, Any]], None]
    ) -> dict[str, Any]:
        """Apply `change` to a copy of the object and store it (a no-op change stores nothing)."""
        with self.lock:
            old = self.get(rt, namespace, name)
            new = copy.deepcopy(old)
            change(new)
            if new == old:
                return old
            return self._commit(rt, old, new)

    def _commit(self, rt: ResourceType, old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
        meta = new["metadata"]
        if rt is SECRET:
            admit_secret(new, old)
        if meta.get("deletionTimestamp") and not meta.get("finalizers") and rt is not POD:
            return self._remove(rt, new)
        self.rv += 1
        meta["resourceVersion"] = str(self.rv)
        meta["uid"] = old["metadata"]["uid"]
        new["apiVersion"] = rt.api_version
        new["kind"] = rt.kind
        if new.get("spec") != old.get("spec"):
            meta["generation"] = int(old["metadata"].get("generation", 1)) + 1
        ns = meta.get("namespace", "") if rt.namespaced else ""
        self.objects[rt][(ns, meta["name"])] = new
        self._index(rt, new, old)
        self._record("MODIFIED", rt, new)
        return new

    def _remove(self, rt: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
        meta = obj["metadata"]
        ns = meta.get("namespace", "") if rt.namespaced else ""
        self.objects[rt].pop((ns, meta["name"]), None)
        self._index(rt, obj, obj, gone=True)
        self.rv += 1
        gone = copy.deepcopy(obj)
        gone["metadata"]["resourceVersion"] = str(self.rv)
        self._record("DELETED", rt, gone)
        self._collect_garbage(meta["uid"])
        for ref in meta.get("ownerReferences") or ():
            owner = self._by_uid.get(ref.get("uid", ""))
            if owner is not None:
                o = self.objects[owner[0]].get((owner[1], owner[2]))
                if o is not None and FOREGROUND in (o["metadata"].get("finalizers") or ()):
                    self._maybe_release_foreground(owner[0], o)
        return gone

    def dependents(self, owner_uid: str) -> list[tuple[ResourceType, dict[str, Any]]]:
        with self.lock:
            out = []
            for rt, ns, name in sorted(self._children.get(owner_uid, ()), key=lambda k: (k[0].plural, k[1], k[2])):
                o = self.objects[rt].get((ns, name))
                if o is not None:
                    out.append((rt, o))
            return out

    def delete(
        self,
        rt: ResourceType,
        namespace: str,
        name: str,
        propagation: str | None = None,
    ) -> dict[str, Any]:
        """Delete with a propagation policy; returns the object as the API answers it."""
        with self.lock:
            obj = self.get(rt, namespace, name)
            policy = propagation or rt.default_propagation
            if obj["metadata"].get("deletionTimestamp"):
                return obj
            uid = obj["metadata"]["uid"]
            if policy == "Orphan":
                for drt, dep in self.dependents(uid):
                    self.update(drt, dep["metadata"].get("namespace", ""), dep["metadata"]["name"], _drop_owner(uid))
            if policy == "Foreground" and self.dependents(uid):

                def mark(o: dict[str, Any]) -> None:
                    o["metadata"]["deletionTimestamp"] = now_rfc3339()
                    fins = o["metadata"].setdefault("finalizers", [])
                    if FOREGROUND not in fins:
                        fins.append(FOREGROUND)

                marked = self.update(rt, namespace, name, mark)
                for drt, dep in self.dependents(uid):
                    self.delete(drt, dep["metadata"].get("namespace", ""), dep["metadata"]["name"], "Background")
                current = self.find(rt, namespace, name)
                if current is not None and FOREGROUND in (current["metadata"].get("finalizers") or ()):
                    self._maybe_release_foreground(rt, current)
                return marked
            if self.graceful is not None and self.graceful(rt, obj):
                return self.update(rt, namespace, name, _mark_deleted)
            if obj["metadata"].get("finalizers"):
                return self.update(rt, namespace, name, _mark_deleted)
            return self._remove(rt, obj)

    def remove_now(self, rt: ResourceType, namespace: str, name: str) -> None:
        """The end of a graceful deletion (the kubelet confirmed the pod is gone)."""
        with self.lock:
            obj = self.find(rt, namespace, name)
            if obj is not None:
                self._remove(rt, obj)

    def _collect_garbage(self, owner_uid: str) -> None:
        # Background propagation (and the end of a foreground one): dependents go too.
        for drt, dep in self.dependents(owner_uid):
            if dep["metadata"].get("deletionTimestamp"):
                continue
            self.delete(drt, dep["metadata"].get("namespace", ""), dep["metadata"]["name"], "Background")

    def _maybe_release_foreground(self, rt: ResourceType, o: dict[str, Any]) -> None:
        if self.dependents(o["metadata"]["uid"]):
            return

        def release(x: dict[str, Any]) -> None:
            x["metadata"]["finalizers"] = [f for f in x["metadata"].get("finalizers", []) if f != FOREGROUND]
            if not x["metadata"]["finalizers"]:
                del x["metadata"]["finalizers"]

        self.update(rt, o["metadata"].get("namespace", ""), o["metadata"]["name"], release)

    # -- history -----------------------------------------------------------------------------
    def changes_since(self, rv: int) -> list[Change]:
        """Changes after `rv`; raises 410 Expired when history before it was compacted."""
        with self.lock:
            if rv < self.history_base:
                raise expired(rv, self.history_base + 1)
            if not self.history or rv >= self.history[-1].rv:
                return []
            start = rv - self.history[0].rv + 1
            if start < 0 or self.history[max(start, 0)].rv != rv + 1:
                # rvs are dense, but stay safe if that ever changes
                return [c for c in self.history if c.rv > rv]
            return self.history[start:]

    def compact(self) -> int:
        """Forget all history: a watch resuming from any earlier resourceVersion gets 410."""
        with self.lock:
            self.history.clear()
            self.history_base = self.rv
            return self.rv


def _mark_deleted(o: dict[str, Any]) -> None:
    o["metadata"].setdefault("deletionTimestamp", now_rfc3339())
    o["metadata"].setdefault("deletionGracePeriodSeconds", 30)


def _drop_owner(uid: str) -> Callable[[dict[str, Any]], None]:
    def change(o: dict[str, Any]) -> None:
        refs = [r for r in o["metadata"].get("ownerReferences") or () if r.get("uid") != uid]
        if refs:
            o["metadata"]["ownerReferences"] = refs
        else:
            o["metadata"].pop("ownerReferences", None)

    return change
