"""Flavors (named kinds of GPU): which flavor a run asks for, and which flavor each local device is.

Pure: the engine passes the platform config and this machine's devices as (index, name) pairs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from .config import PlatformConfig
from .errors import GpuPlatError, Unprocessable
from .limits import LimitExceeded
from .resources import Resources

ANY = "any"


def asked_flavor(cfg: PlatformConfig, resolved: Mapping[str, Any]) -> str | None:
    """The flavor a run's resolved spec asks for (`placement.gpu_type`); None: any, or no flavors.

    With no flavors in the platform config `gpu_type` keeps its older meaning (a node label value).
    """
    if not cfg.flavors:
        return None
    gpu_type = (resolved.get("placement") or {}).get("gpu_type")
    return None if not gpu_type or gpu_type == ANY else str(gpu_type)


def offered(cfg: PlatformConfig, queue: str) -> list[str]:
    q = cfg.queue(queue)
    return [f.name for f in q.flavors] if q is not None else []


def device_flavors(cfg: PlatformConfig, devices: Iterable[tuple[int, str]]) -> dict[int, str]:
    """Device index → its flavor: declared by a flavor's `devices`, else matched by name against `gpu_type`.

    A device no flavor claims has none (runs of a queue without flavors may still use it).
    """
    out: dict[int, str] = {}
    declared = {d: f.name for f in cfg.flavors for d in f.devices or ()}
    for index, name in devices:
        if index in declared:
            out[index] = declared[index]
            continue
        for f in cfg.flavors:
            if f.devices is None and f.gpu_type and f.gpu_type.lower() in name.lower():
                out[index] = f.name
                break
    return out


def flavor_counts(typed: Mapping[int, str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for name in typed.values():
        counts[name] = counts.get(name, 0) + 1
    return counts


def flavor_cap(cfg: PlatformConfig, queue: str | None, asked: str | None = None) -> int | None:
    """The most GPUs one run may get in `queue` on a flavor it may use; None where the queue has no flavors."""
    q = cfg.queue(queue) if queue else None
    if q is None or not q.flavors:
        return None
    quotas = [f.quota.gpu for f in q.flavors if asked is None or f.name == asked]
    return max(quotas) if quotas else None


def flavor_violations(
    cfg: PlatformConfig, queue: str | None, resolved: Mapping[str, Any], res: Resources
) -> list[GpuPlatError]:
    """A flavor its queue does not offer; a request no flavor it may use could ever hold (as the queue's quota is)."""
    bad = flavor_violation(cfg, queue, resolved)
    if bad is not None:
        return [bad]
    asked = asked_flavor(cfg, resolved)
    cap = flavor_cap(cfg, queue, asked)
    if cap is None or res.gpu <= cap:
        return []
    q = cfg.queue(queue or "")
    assert q is not None
    quotas = ", ".join(f"{f.name}: {f.quota.gpu}" for f in q.flavors if asked is None or f.name == asked)
    return [
        LimitExceeded(
            f"requests {res.gpu} gpu but queue {q.name} has at most {cap} gpu on a flavor ({quotas}): "
            "it could never be dispatched",
            f"ask for at most {cap} gpu",
            code="ExceedsQueueQuota",
            resource="gpu",
            limit=cap,
            requested=res.gpu,
        )
    ]


def flavor_violation(cfg: PlatformConfig, queue: str | None, resolved: Mapping[str, Any]) -> Unprocessable | None:
    """A run asking (`placement.gpu_type`) for a flavor its queue does not offer: refused, naming those it does."""
    asked = asked_flavor(cfg, resolved)
    if asked is None or queue is None or cfg.queue(queue) is None:
        return None
    names = offered(cfg, queue)
    if asked in names:
        return None
    what = "a flavor" if cfg.flavor(asked) is not None else "an unknown flavor"
    if names:
        allowed = f"queue {queue} offers: {', '.join(names)}"
        hint = f"set placement.gpu_type to one of: {', '.join(names)}, or any"
    else:
        allowed = f"queue {queue} offers no flavors"
        hint = "leave placement.gpu_type out (or any), or use a queue that offers it"
    return Unprocessable(
        f"placement.gpu_type asks for {what} its queue does not offer: {asked!r} ({allowed})",
        hint,
        code="FlavorNotOffered",
    )
