"""The event recorder: core/v1 Events about objects, written by every controller.

Controllers take an `EventRecorder` instead of the cluster (client-go's `record.EventRecorder`,
which Kueue's scheduler is given). A repeat of the same event bumps `count` and
`lastTimestamp` on the one already stored, as the real recorder's correlator does.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from typing import Any

from .store import EVENT, RESOURCES, ResourceType, Store, now_rfc3339


class EventRecorder:
    def __init__(self, store: Store) -> None:
        self.store = store
        self._keys: dict[tuple[str, str, str, str], tuple[str, str]] = {}  # (uid, reason, message, component) → event

    def event(self, obj: Mapping[str, Any], type_: str, reason: str, message: str, component: str) -> None:
        """Record a core/v1 Event about `obj`; a repeat bumps `count` and `lastTimestamp`."""
        meta = obj["metadata"]
        ns = meta.get("namespace") or "default"
        key = (meta["uid"], reason, message, component)
        now = now_rfc3339()
        with self.store.lock:
            known = self._keys.get(key)
            if known is not None and self.store.find(EVENT, *known) is not None:

                def bump(e: dict[str, Any]) -> None:
                    e["count"] = int(e.get("count", 1)) + 1
                    e["lastTimestamp"] = now

                self.store.update(EVENT, known[0], known[1], bump)
                return
            rt = _rt_of(obj)
            created = self.store.create(
                EVENT,
                ns,
                {
                    "metadata": {"name": f"{meta['name']}.{secrets.token_hex(8)}"},
                    "involvedObject": {
                        "apiVersion": rt.api_version,
                        "kind": rt.kind,
                        "name": meta["name"],
                        "namespace": meta.get("namespace"),
                        "uid": meta["uid"],
                        "resourceVersion": meta.get("resourceVersion"),
                    },
                    "reason": reason,
                    "message": message,
                    "source": {"component": component},
                    "firstTimestamp": now,
                    "lastTimestamp": now,
                    "count": 1,
                    "type": type_,
                    "eventTime": None,
                    "reportingComponent": component,
                    "reportingInstance": "",
                },
            )
            self._keys[key] = (ns, created["metadata"]["name"])


def _rt_of(obj: Mapping[str, Any]) -> ResourceType:
    group = obj.get("apiVersion", "v1").rpartition("/")[0]
    return next(r for r in RESOURCES.values() if r.group == group and r.kind == obj.get("kind"))
