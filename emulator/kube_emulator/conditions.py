"""Setting a status condition as the apiserver's controllers do: the transition time moves only on a change."""

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
