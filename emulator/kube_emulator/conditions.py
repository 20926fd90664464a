"""Writing a pod's status as the controllers and the kubelet do: a condition (its transition time moves only on
a change) and the container's status."""

from __future__ import annotations

from typing import Any

from .store import now_rfc3339


def set_condition(
    status: dict[str, Any], type_: str, value: str, reason: str | None = None, message: str | None = None
) -> None:
    conds = status.setdefault("conditions", [])
    now = now_rfc3339()
    for c in conds:
        if c["type"] == type_:
            if c["status"] != value:
                c["lastTransitionTime"] = now
            c["status"] = value
            for k, v in (("reason", reason), ("message", message)):
                if v:
                    c[k] = v
                else:
                    c.pop(k, None)
            return
    new: dict[str, Any] = {"type": type_, "status": value, "lastProbeTime": None, "lastTransitionTime": now}
    if reason:
        new["reason"] = reason
    if message:
        new["message"] = message
    conds.append(new)


def set_container_status(status: dict[str, Any], pod: dict[str, Any], state: dict[str, Any], **extra: Any) -> None:
    """The pod's one container's status in `state`; its image ID, container ID, restarts and last state kept."""
    c = pod["spec"]["containers"][0]
    prev = (status.get("containerStatuses") or [{}])[0]
    cs = {
        "name": c["name"],
        "image": c.get("image", ""),
        "imageID": prev.get("imageID", ""),
        "ready": "running" in state,
        "started": "running" in state,
        "restartCount": prev.get("restartCount", 0),
        "state": state,
        "lastState": prev.get("lastState", {}),
    }
    if "containerID" in prev:
        cs["containerID"] = prev["containerID"]
    cs.update(extra)
    status["containerStatuses"] = [cs]
