"""One consistent refusal: every refusing rule with its own limit, and hints the policy accepts.

`judge` resolves a request (core.policy.resolve) and checks the platform's capacity, then
looks for what would be accepted instead: the same request with its resources lowered to
the tightest limit, another queue the project may use, an allowed preset in place of a
refused one, and for a field a member may not set (FieldNotAllowed) the run without it plus
a preset or connection that sets what it asked for. Each candidate is resolved by the same
policy functions and kept only if it is accepted, so a hint can never suggest what the
policy refuses. The hints of the violations are then written from those accepted
alternatives alone.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .config import PlatformConfig, ProjectConfig
from .errors import FieldNotAllowed, GpuPlatError
from .flavors import flavor_cap, flavor_violations
from .limits import ATTRS, LimitExceeded
from .member_rules import provides, strip
from .policy import Resolution, allowed_presets, allowed_queues, project_connections, require_project, resolve
from .request import RunRequest
from .resources import Quota, Resources, fmt_amount

RESOURCE_CODES = frozenset({"ExceedsQueueQuota", "MaxRunResources", "NoCapacity"})
QUEUE_CODES = frozenset({"NoQueue", "UnknownQueue", "QueueNotAllowed"})
PRESET_CODES = frozenset({"UnknownPreset", "PresetNotAllowed"})
FIELD_CODES = frozenset({"FieldNotAllowed"})  # core/member_rules.py: what a member may set
MAX_ALTERNATIVES = 6  # shown to people: a few good ones, fewest changes first


def capacity_violation(res: Resources, platform_gpus: int | None) -> LimitExceeded | None:
    """The platform's GPUs in all (None: the executor places work itself, no number of ours)."""
    if platform_gpus is not None and res.gpu > platform_gpus:
        return LimitExceeded(
            f"requests {res.gpu} gpu but this platform has {platform_gpus} gpu in all: it could never start",
            f"ask for at most {platform_gpus} gpu",
            code="NoCapacity",
            resource="gpu",
            limit=platform_gpus,
            requested=res.gpu,
        )
    return None


def check(
    cfg: PlatformConfig, user: str, req: RunRequest, platform_gpus: int | None
) -> tuple[Resolution, list[GpuPlatError]]:
    """The policy's verdict on `req`, the platform's capacity included: its resolution and every violation."""
    res = resolve(cfg, user, req)
    problems = list(res.violations)
    cap = capacity_violation(res.resources, platform_gpus)
    if cap is not None:
        problems.append(cap)
    problems += flavor_violations(cfg, res.queue, res.resolved, res.resources)
    return res, problems


@dataclass(frozen=True)
class Alternative:
    """Request fields to change (`queue`, `presets`, `resources`, `connections`; a refused field a
    member may not set: its new value, null to leave it out) so the policy accepts it."""

    changes: dict[str, Any]
    hint: str

    def to_dict(self) -> dict[str, Any]:
        return {"changes": self.changes, "hint": self.hint}


@dataclass(frozen=True)
class Judgement:
    resolution: Resolution
    violations: tuple[GpuPlatError, ...]  # hints written from `alternatives`
    alternatives: tuple[Alternative, ...]

    @property
    def rules(self) -> list[dict[str, Any]]:
        """Every refusing rule once, with its own limit (null for a rule without a number)."""
        out: list[dict[str, Any]] = []
        seen: set[tuple[str, str]] = set()
        for v in self.violations:
            limit = v.limit_text if isinstance(v, LimitExceeded) else None
            if (v.code, v.message) not in seen:  # one per rule and subject (each connection, each resource)
                seen.add((v.code, v.message))
                out.append({"rule": v.code, "limit": limit, "message": v.message})
        return out

    def refusal(self) -> GpuPlatError:
        """What a refused submit raises: the first violation's class, status, code and fields, every
        rule's words, and the rules and alternatives the API answers with (so `POST runs` and the
        preview name the same rules)."""
        first = self.violations[0]
        message = "; ".join(dict.fromkeys(v.message for v in self.violations))
        out = first.with_hint("; ".join(dict.fromkeys(v.hint for v in self.violations if v.hint)))
        out.message, out.args = message, (message,)
        out.answers = {"rules": self.rules, "alternatives": [a.to_dict() for a in self.alternatives]}
        return out

    def verdict(self, *more: GpuPlatError) -> dict[str, Any]:
        violations = (*self.violations, *more)
        return {
            "allowed": not violations,
            "violations": [v.to_dict() for v in violations],
            "rules": self.rules + [{"rule": v.code, "limit": None, "message": v.message} for v in more],
            "alternatives": [a.to_dict() for a in self.alternatives],
        }


def apply(req: RunRequest, changes: dict[str, Any]) -> RunRequest:
    """`req` with the changes of an alternative (resources merged into the run's own; None leaves a field out)."""
    data = req.model_dump(mode="json", exclude_unset=True)
    for key, value in changes.items():
        if value is None:
            data.pop(key, None)
        else:
            data[key] = {**(data.get(key) or {}), **value} if key == "resources" else value
    return RunRequest.model_validate(data)


def without_refused(req: RunRequest, refused: list[FieldNotAllowed]) -> dict[str, Any]:
    """The request changes that leave the refused member fields out (None: the whole field)."""
    layer = req.explicit_layer()
    kept = strip(layer, refused)
    return {k: kept.get(k) for k in dict.fromkeys(r.at[0] for r in refused if r.at) if kept.get(k) != layer.get(k)}


def _caps(cfg: PlatformConfig, pr: ProjectConfig, queue: str | None, platform_gpus: int | None) -> Quota:
    """The tightest limit per resource for a run in `queue`: its quota, the project's per-run maximum, the GPUs."""
    q = cfg.queue(queue) if queue else None
    limits = [q.quota.quota() if q is not None else Quota()]
    if pr.max_run_resources is not None:
        limits.append(Quota.parse(pr.max_run_resources.model_dump()))
    limits.append(Quota(gpu=platform_gpus))
    limits.append(Quota(gpu=flavor_cap(cfg, queue)))  # a queue with flavors: its largest flavor's quota

    def tightest(attr: str) -> int | None:
        values = [v for v in (getattr(x, attr) for x in limits) if v is not None]
        return min(values) if values else None

    return Quota(gpu=tightest("gpu"), cpu_milli=tightest("cpu_milli"), memory_bytes=tightest("memory_bytes"))


def _lowered(res: Resources, caps: Quota) -> dict[str, Any]:
    """Resources above `caps` set to the cap (in request form): empty when all fit, or when a cap
    is 0 (a run asking for none of what it wants is no alternative)."""
    out: dict[str, Any] = {}
    for name, attr in ATTRS.items():
        cap, want = getattr(caps, attr), getattr(res, attr)
        if cap is not None and want > cap:
            if cap == 0:
                return {}
            out[name] = cap if name == "gpu" else fmt_amount(name, cap)
    return out


def _text(changes: dict[str, Any], picked: list[str], dropped: Sequence[str] = (), conns: Sequence[str] = ()) -> str:
    """An alternative for people: `ask for at most 2 gpu`, `use queue interactive`, `use preset a instead of b`."""
    parts = []
    if "resources" in changes:
        amounts = ", ".join(f"{v} {k}" for k, v in changes["resources"].items())
        parts.append(f"ask for at most {amounts}")
    if "queue" in changes:
        parts.append(f"use queue {changes['queue']}")
    if "presets" in changes:
        added = [x for x in changes["presets"] if x not in picked]
        gone = [x for x in picked if x not in changes["presets"]]
        if added:
            instead = f" instead of {', '.join(gone)}" if gone else ""
            parts.append(f"use preset {', '.join(added)}{instead}")
        elif gone:
            parts.append(f"drop preset {', '.join(gone)}")
    if "connections" in changes:
        parts.append(f"use connection {', '.join(x for x in changes['connections'] if x not in conns)}")
    if dropped:
        parts.append(f"leave {', '.join(dropped)} out of the run's own fields")
    return " and ".join(parts)


def alternatives(
    cfg: PlatformConfig,
    user: str,
    req: RunRequest,
    res: Resolution,
    problems: list[GpuPlatError],
    platform_gpus: int | None,
) -> list[Alternative]:
    """Accepted variants of a refused request, fewest changed fields first; each checked by `check`."""
    pr = require_project(cfg, user, req.project, "member")
    codes = {p.code for p in problems}
    queues: list[str | None] = [None]  # None: keep the queue the request resolves to
    if codes & (QUEUE_CODES | RESOURCE_CODES):
        queues += [q for q in allowed_queues(cfg, pr) if cfg.queue(q) is not None and q != res.queue]
    preset_options: list[list[str] | None] = [None]
    if codes & PRESET_CODES:
        ok = allowed_presets(cfg, pr)
        kept = [p for p in req.presets if p in ok]
        preset_options = [kept, *([*kept, p] for p in ok if p not in kept)]
    elif codes & (RESOURCE_CODES | {"FieldLocked"}) and req.presets:
        # a picked preset may be what sets (or locks) too much: each one left out
        preset_options += [[x for x in req.presets if x != p] for p in req.presets]
    # A field a member may not set: every alternative leaves it out, and offers it only where a
    # preset or a connection the project may use then sets what the run asked for.
    refused = [p for p in problems if p.code in FIELD_CODES and isinstance(p, FieldNotAllowed)]
    base = without_refused(req, refused) if refused else {}
    dropped = list(dict.fromkeys(r.field for r in refused))
    conn_options: list[list[str] | None] = [None]
    if refused:
        ok = allowed_presets(cfg, pr)
        first = next((x for x in preset_options if x is not None), list(req.presets))
        preset_options += [o for o in ([*first, p] for p in ok if p not in first) if o not in preset_options]
        have = list(req.connections or [])
        conn_options += [[*have, c] for c in _connections_for(cfg, pr, refused) if c not in have]
    found: list[Alternative] = []

    def accepted(changes: dict[str, Any]) -> tuple[Resolution | None, bool]:
        try:
            got, left = check(cfg, user, apply(req, changes), platform_gpus)
        except (GpuPlatError, ValueError):  # ValueError: pydantic's, a variant that is no request
            return None, False
        return got, not left and all(provides(got.resolved, r) for r in refused)

    def text(changes: dict[str, Any]) -> str:
        return _text(changes, req.presets, dropped, req.connections or [])

    for queue, presets, conns in itertools.product(queues, preset_options, conn_options):
        changes: dict[str, Any] = dict(base)
        if queue is not None:
            changes["queue"] = queue
        if presets is not None:
            changes["presets"] = presets
        if conns is not None:
            changes["connections"] = conns
        if _subsumed(changes, found):
            continue
        got, ok_as_is = accepted(changes) if changes else (res, False)
        if ok_as_is:
            found.append(Alternative(changes, text(changes)))
            continue
        if got is None:
            continue
        # the same, with each resource lowered to the tightest limit of the queue it lands in
        low = _lowered(got.resources, _caps(cfg, pr, got.queue, platform_gpus))
        if not low:
            continue
        lowered = {**changes, "resources": low}
        if not _subsumed(lowered, found) and accepted(lowered)[1]:
            found.append(Alternative(lowered, text(lowered)))
    found.sort(key=lambda a: len(a.changes))
    return found[:MAX_ALTERNATIVES]


def _connections_for(cfg: PlatformConfig, pr: ProjectConfig, refused: list[FieldNotAllowed]) -> list[str]:
    """Connections the project may use that mount a volume source a refused run field named."""
    wanted = {(r.at[2], r.wanted) for r in refused if len(r.at) == 3 and r.at[0] == "volumes"}
    out = []
    for name in project_connections(cfg, pr):
        c = cfg.connection(name)
        if c is not None and any(getattr(c, source, None) == value for source, value in wanted):
            out.append(name)
    return out


def _subsumed(changes: dict[str, Any], found: list[Alternative]) -> bool:
    """An accepted alternative already changes a subset of these fields to the same values."""
    return any(all(changes.get(k) == v for k, v in a.changes.items()) for a in found)


HINTS_SHOWN = 3


def _hint(v: GpuPlatError, alts: list[Alternative], pr: ProjectConfig, picked: list[str]) -> str:
    """The violation's hint, from the accepted alternatives that change what it is about."""
    if v.code in RESOURCE_CODES:
        fields = {"resources", "queue", "presets"}
    elif v.code in QUEUE_CODES:
        fields = {"queue"}
    elif v.code in PRESET_CODES:
        fields = {"presets"}
    elif isinstance(v, FieldNotAllowed):
        # alternatives here all provide every refused field: the first few, else its own words
        mine = [a for a in alts if v.at and v.at[0] in a.changes]
        return "; or ".join(a.hint for a in mine[:HINTS_SHOWN]) or v.hint
    else:
        return v.hint  # a rule without a value to suggest (a locked field, a connection): its own words
    mine = [a for a in alts if fields & set(a.changes)]
    if not mine:
        what = "queue, preset or amount" if v.code in RESOURCE_CODES else "preset" if "presets" in fields else "queue"
        return f"no {what} allowed in project {pr.name} makes this run acceptable; ask a platform admin"
    if v.code in QUEUE_CODES and all(set(a.changes) == {"queue"} for a in mine):
        names = ", ".join(a.changes["queue"] for a in mine)
        return f"set queue to one of: {names}" if v.code == "NoQueue" else f"allowed queues: {names}"
    if v.code in PRESET_CODES and all(set(a.changes) == {"presets"} for a in mine):
        subs = [x for a in mine for x in a.changes["presets"] if x not in picked]
        drop = [a for a in mine if not any(x not in picked for x in a.changes["presets"])]
        text = f"allowed presets: {', '.join(subs)}" if subs else ""
        if drop:
            text += (" (or " if text else "") + drop[0].hint + (")" if text else "")
        return text
    return "; or ".join(a.hint for a in mine[:HINTS_SHOWN])


def judge(cfg: PlatformConfig, user: str, req: RunRequest, platform_gpus: int | None) -> Judgement:
    """The policy's verdict with every refusing rule and hints that the policy itself accepts.

    Raises like `resolve` for access (an unknown or invisible project: 404; a viewer: 403).
    """
    res, problems = check(cfg, user, req, platform_gpus)
    return judged(cfg, user, req, res, problems, platform_gpus)


def judged(
    cfg: PlatformConfig,
    user: str,
    req: RunRequest,
    res: Resolution,
    problems: list[GpuPlatError],
    platform_gpus: int | None,
) -> Judgement:
    """`check`'s answer judged: the hints and alternatives of its violations (none when it has none)."""
    if not problems:
        return Judgement(res, (), ())
    pr = require_project(cfg, user, req.project, "member")
    alts = alternatives(cfg, user, req, res, problems, platform_gpus)
    rewritten = [v.with_hint(_hint(v, alts, pr, req.presets)) for v in problems]
    return Judgement(res, tuple(rewritten), tuple(alts))
