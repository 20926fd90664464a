"""A run's named connections in its pod: PVC and Secret volumes, env from Secrets by reference.

Only names go into the Job (claimName, secretName, secretKeyRef): the values stay in the
cluster's Secrets, so neither the manifest nor the run's record ever holds one.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ...core.connections import BUCKET_KEYS, env_var, plain_env


def volume_name(name: str) -> str:
    """A DNS-1123 label for the connection's pod volume, unique per connection name."""
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    return f"conn-{re.sub(r'[^a-z0-9-]', '-', name)[:40].strip('-')}-{digest}"


def connection_parts(
    refs: Sequence[Mapping[str, Any]] | None,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """(pod volumes, container mounts, container env) for the connections of a resolved spec."""
    volumes: list[dict[str, Any]] = []
    mounts: list[dict[str, Any]] = []
    env: list[dict[str, Any]] = []
    for c in refs or ():
        kind = c["kind"]
        env += [{"name": k, "value": v} for k, v in plain_env(c, local=False).items()]
        source: dict[str, Any] | None = None
        if kind == "volume":
            source = {"persistentVolumeClaim": {"claimName": c["claim"]}} if c.get("claim") else None
            if source is None:  # a host-path-only volume: the local executor's; a pod sees an empty dir
                source = {"emptyDir": {}}
        elif kind == "secret" and c.get("expose") == "files":
            source = {"secret": {"secretName": c["secret"], "defaultMode": 0o400}}
        if source is not None:
            name = volume_name(c["name"])
            volumes.append({"name": name, **source})
            mount: dict[str, Any] = {"name": name, "mountPath": c["mount_path"]}
            if c.get("read_only") or kind == "secret":
                mount["readOnly"] = True
            mounts.append(mount)
        if c.get("secret") and c.get("expose") != "files":
            mapping = c.get("env") or (dict(BUCKET_KEYS) if kind == "bucket" else {})
            for var, key in mapping.items():
                env.append({"name": var, "valueFrom": {"secretKeyRef": {"name": c["secret"], "key": key}}})
    return volumes, mounts, env


def backing_objects(conns: Sequence[Mapping[str, Any]]) -> list[tuple[str, str, str, list[str]]]:
    """(connection, "PersistentVolumeClaim"|"Secret", object name, keys it must hold) to check on a cluster."""
    out: list[tuple[str, str, str, list[str]]] = []
    for c in conns:
        if c.get("kind") == "volume" and c.get("claim"):
            out.append((c["name"], "PersistentVolumeClaim", c["claim"], []))
        if c.get("secret"):
            keys = list((c.get("env") or {}).values())
            if c.get("kind") == "bucket" and not c.get("env"):
                keys = list(BUCKET_KEYS.values())
            out.append((c["name"], "Secret", c["secret"], keys))
    return out


__all__ = ["backing_objects", "connection_parts", "env_var", "volume_name"]
