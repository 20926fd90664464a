"""PATCH as real apiservers apply it: strategic merge (lists merged by their patchMergeKey), JSON merge, JSON patch."""

from __future__ import annotations

from typing import Any

from .store import ApiError

# Strategic merge: lists merged by these keys (the patchMergeKey of the real types).
MERGE_KEYS = {
    "conditions": "type",
    "containers": "name",
    "containerStatuses": "name",
    "env": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "tolerations": "key",
    "taints": "key",
    "finalizers": None,
}


def merge(target: Any, patch: Any, strategic: bool, key: str = "") -> Any:
    """`patch` merged into `target` (None deletes a key); strategic: keyed lists merged item by item."""
    if not isinstance(patch, dict):
        if strategic and isinstance(patch, list) and isinstance(target, list) and MERGE_KEYS.get(key):
            mk = MERGE_KEYS[key]
            out = list(target)
            for item in patch:
                if isinstance(item, dict) and mk in item:
                    for i, old in enumerate(out):
                        if isinstance(old, dict) and old.get(mk) == item[mk]:
                            if item.get("$patch") == "delete":
                                out.pop(i)
                            else:
                                out[i] = merge(old, item, strategic)
                            break
                    else:
                        out.append(item)
                else:
                    out.append(item)
            return out
        return patch
    merged: dict[str, Any] = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            merged.pop(k, None)
        else:
            merged[k] = merge(merged.get(k), v, strategic, k)
    return merged


def pointer(path: str) -> list[str]:
    """A JSON pointer's parts, unescaped."""
    return [p.replace("~1", "/").replace("~0", "~") for p in path.lstrip("/").split("/")]


def apply_patch(obj: dict[str, Any], body: Any, ctype: str, status_only: bool) -> None:
    """Apply the PATCH body to `obj` in place, by its content type; `status_only`: the status subresource."""
    if ctype == "application/json-patch+json":
        for op in body or []:
            parts = pointer(op["path"])
            parent: Any = obj
            for p in parts[:-1]:
                parent = parent[int(p)] if isinstance(parent, list) else parent.setdefault(p, {})
            last = parts[-1]
            if op["op"] in ("add", "replace"):
                if isinstance(parent, list):
                    if last == "-":
                        parent.append(op["value"])
                    elif op["op"] == "add":
                        parent.insert(int(last), op["value"])
                    else:
                        parent[int(last)] = op["value"]
                else:
                    parent[last] = op["value"]
            elif op["op"] == "remove":
                if isinstance(parent, list):
                    parent.pop(int(last))
                else:
                    parent.pop(last, None)
            else:
                raise ApiError(422, "Invalid", f"json patch op {op['op']!r} is not supported by the emulator")
        return
    if not isinstance(body, dict):
        raise ApiError(400, "BadRequest", "the body of the request must be an object")
    strategic = ctype != "application/merge-patch+json"
    if status_only:
        body = {"status": body.get("status", {})}
    merged = merge(obj, body, strategic)
    obj.clear()
    obj.update(merged)
