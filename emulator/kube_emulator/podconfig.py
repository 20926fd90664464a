"""What a container needs before it starts: a well-formed image that pulls, and the Secrets and
ConfigMaps its env and volumes name (read from the store, as the kubelet would)."""

from __future__ import annotations

import re
from typing import Any

from .store import RESOURCES, Store

SECRET = RESOURCES[("", "secrets")]
CONFIGMAP = RESOURCES[("", "configmaps")]
IMAGE = re.compile(r"^[a-z0-9]+([._/:@-][a-zA-Z0-9_.-]+)*$")


def pull_error(image: str) -> str:
    """What containerd says when the image is not in the registry."""
    ref = image if "/" in image.split(":")[0] and "." in image.split("/")[0] else f"docker.io/library/{image}"
    if ":" not in ref.rsplit("/", 1)[-1]:
        ref += ":latest"
    return (
        f'rpc error: code = NotFound desc = failed to pull and unpack image "{ref}": '
        f'failed to resolve reference "{ref}": {ref}: not found'
    )


def missing_config(store: Store, pod: dict[str, Any]) -> tuple[str, str] | None:
    """("env" or "volume", message) for the first Secret, ConfigMap or key the container lacks; None: all there."""
    ns = pod["metadata"]["namespace"]
    c = pod["spec"]["containers"][0]
    for e in c.get("env") or []:
        src = e.get("valueFrom") or {}
        for ref_key, rt, kind in (("secretKeyRef", SECRET, "Secret"), ("configMapKeyRef", CONFIGMAP, "ConfigMap")):
            ref = src.get(ref_key)
            if not ref or ref.get("optional"):
                continue
            obj = store.find(rt, ns, ref["name"])
            if obj is None:
                return "env", f'{kind.lower()} "{ref["name"]}" not found'
            if ref["key"] not in (obj.get("data") or {}) and ref["key"] not in (obj.get("stringData") or {}):
                return "env", f"couldn't find key {ref['key']} in {kind} {ns}/{ref['name']}"
    for e in c.get("envFrom") or []:
        for ref_key, rt, kind in (("secretRef", SECRET, "secret"), ("configMapRef", CONFIGMAP, "configmap")):
            ref = e.get(ref_key)
            if ref and not ref.get("optional") and store.find(rt, ns, ref["name"]) is None:
                return "env", f'{kind} "{ref["name"]}" not found'
    for v in pod["spec"].get("volumes") or []:
        for key, rt, kind, name_key in (
            ("secret", SECRET, "secret", "secretName"),
            ("configMap", CONFIGMAP, "configmap", "name"),
        ):
            ref = v.get(key)
            if ref and not ref.get("optional") and store.find(rt, ns, ref[name_key]) is None:
                return (
                    "volume",
                    f'MountVolume.SetUp failed for volume "{v["name"]}" : {kind} "{ref[name_key]}" not found',
                )
    return None
