"""What applying a platform config would change: `make_plan(current, new, use)` (pure).

The server answers it for `PUT config?dry_run=true` (and `gpuplat config plan` / `apply --dry-run`
render that answer), so every client shows one plan:

1. `changes`: each queue, preset, project and connection added, removed or changed; a change lists
   its fields (`quota.gpu: 4 -> 2`), a project's `members` and `groups` apart from its other fields.
2. `members`: each user (or group) whose role in a project is added, removed or changed.
3. `affects`: what the change does to runs that exist now, per queue: a removed queue that still
   holds runs (the apply is refused with 409), a concurrency, quota or per-user limit lowered below
   what is in use (running runs go on; nothing more dispatches until use falls under it), a queue
   paused with runs waiting.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .config import PlatformConfig
from .resources import Resources

SECTIONS = ("queues", "presets", "projects", "connections")
_ROLES = ("members", "groups")  # a project's role maps: shown per user, not as one field


@dataclass(frozen=True)
class QueueUse:
    """What one queue holds now: its running (dispatched) runs and its queued ones."""

    running: Sequence[str] = ()
    queued: Sequence[str] = ()
    used: Resources = field(default_factory=Resources)
    per_user: Mapping[str, int] = field(default_factory=dict)


def _flat(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict) and (value or not prefix):
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(_flat(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    return {prefix: value}


def _fields(old: dict[str, Any], new: dict[str, Any]) -> dict[str, dict[str, Any]]:
    a, b = _flat(old), _flat(new)
    return {k: {"old": a.get(k), "new": b.get(k)} for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)}


def _items(cfg: PlatformConfig, section: str) -> dict[str, dict[str, Any]]:
    return {x.name: x.model_dump(mode="json", exclude_defaults=True) for x in getattr(cfg, section)}


def _top(cfg: PlatformConfig) -> dict[str, Any]:
    return cfg.model_dump(mode="json", exclude_defaults=True, exclude=set(SECTIONS))


def make_plan(current: PlatformConfig, new: PlatformConfig, use: Mapping[str, QueueUse]) -> dict[str, Any]:
    """The changes from `current` to `new`, and the runs in `use` (per queue) they affect."""
    changes: list[dict[str, Any]] = []
    members: list[dict[str, Any]] = []
    top = _fields(_top(current), _top(new))
    if top:
        changes.append({"section": "platform", "name": "", "change": "changed", "fields": top})
    for section in SECTIONS:
        old, now = _items(current, section), _items(new, section)
        for name in [*old, *(n for n in now if n not in old)]:
            a, b = old.get(name), now.get(name)
            if section == "projects":
                for roles in _ROLES:
                    members += _role_changes(name, roles, (a or {}).get(roles, {}), (b or {}).get(roles, {}))
            if a is None:
                changes.append({"section": section, "name": name, "change": "added", "fields": _fields({}, b or {})})
            elif b is None:
                changes.append({"section": section, "name": name, "change": "removed", "fields": {}})
            else:
                skip = _ROLES if section == "projects" else ()
                diff = _fields(
                    {k: v for k, v in a.items() if k not in skip}, {k: v for k, v in b.items() if k not in skip}
                )
                if diff:
                    changes.append({"section": section, "name": name, "change": "changed", "fields": diff})
    return {
        "changes": changes,
        "members": members,
        "affects": _affects(current, new, use),
        "unchanged": not (changes or members),
    }


def _role_changes(project: str, roles: str, old: dict[str, str], new: dict[str, str]) -> list[dict[str, Any]]:
    who = "group" if roles == "groups" else "user"
    out = []
    for name in sorted(set(old) | set(new)):
        if old.get(name) != new.get(name):
            change = "added" if name not in old else "removed" if name not in new else "changed"
            out.append({"project": project, who: name, "change": change, "old": old.get(name), "new": new.get(name)})
    return out


def _affects(current: PlatformConfig, new: PlatformConfig, use: Mapping[str, QueueUse]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []

    def add(queue: str, runs: Sequence[str], message: str, refused: bool = False) -> None:
        out.append({"queue": queue, "runs": list(runs), "message": message, "refused": refused})

    for q in current.queues:
        u = use.get(q.name) or QueueUse()
        runs = [*u.running, *u.queued]
        n = new.queue(q.name)
        if n is None:
            if runs:
                add(
                    q.name,
                    runs,
                    f"queue {q.name} is removed but holds {len(u.running)} running and {len(u.queued)} queued run(s): "
                    "the apply is refused (409) until they end",
                    refused=True,
                )
            continue
        if n.concurrency is not None and len(u.running) > n.concurrency and n.concurrency != q.concurrency:
            add(
                q.name,
                u.running,
                f"queue {q.name}: concurrency {q.concurrency if q.concurrency is not None else 'unlimited'} -> "
                f"{n.concurrency} with {len(u.running)} running: they go on, nothing more dispatches until "
                f"fewer than {n.concurrency} run",
            )
        if n.quota != q.quota:
            for res, used, _, limit in n.quota.quota().shortfalls(u.used, Resources()):
                add(
                    q.name,
                    u.running,
                    f"queue {q.name}: quota.{res} lowered to {limit} with {used} in use: the running runs go on, "
                    "nothing more dispatches until use falls under it",
                )
        if n.max_per_user is not None and n.max_per_user != q.max_per_user:
            over = sorted(user for user, k in u.per_user.items() if k > n.max_per_user)
            if over:
                add(
                    q.name,
                    u.running,
                    f"queue {q.name}: max_per_user {n.max_per_user} is below what {', '.join(over)} run(s) now: "
                    "theirs go on, their next wait",
                )
        if n.paused and not q.paused and u.queued:
            add(q.name, u.queued, f"queue {q.name} is paused: its {len(u.queued)} queued run(s) wait until resumed")
    return out


def plan_text(plan: Mapping[str, Any]) -> list[str]:
    """The plan as lines a person reads (the CLI's rendering of the server's answer)."""
    if plan.get("unchanged") and not plan.get("affects"):
        return ["no changes"]
    lines = []
    sign = {"added": "+", "removed": "-", "changed": "~"}
    for c in plan.get("changes", []):
        what = f"{c['section'][:-1]} {c['name']}" if c["section"] != "platform" else "platform settings"
        lines.append(f"{sign[c['change']]} {what}: {c['change']}")
        if c["change"] == "changed":
            lines += [f"    {k}: {_show(v['old'])} -> {_show(v['new'])}" for k, v in c["fields"].items()]
    for m in plan.get("members", []):
        who = f"user {m['user']}" if "user" in m else f"group {m['group']}"
        role = {"added": m["new"], "removed": m["old"]}.get(m["change"], f"{m['old']} -> {m['new']}")
        lines.append(f"{sign[m['change']]} project {m['project']}: {who} {m['change']} ({role})")
    for a in plan.get("affects", []):
        runs = f" [{', '.join(a['runs'][:10])}{', ...' if len(a['runs']) > 10 else ''}]" if a["runs"] else ""
        lines.append(f"! {a['message']}{runs}")
    return lines


def _show(v: Any) -> str:
    return "(unset)" if v is None else str(v)


__all__ = ["QueueUse", "make_plan", "plan_text"]
