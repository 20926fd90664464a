"""Who may do what, and resolving a run request into a checked spec.

Policy is checked after merging and before a run exists: every violation names
the rule and the allowed values. Restrictions are access control.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .config import ROLE_RANK, PlatformConfig, ProjectConfig, Role
from .errors import Forbidden, GpuPlatError, NotFound, Unprocessable
from .merge import Layer, Resolved, merge_layers
from .request import RunRequest
from .resources import Quota, Resources, fmt_amount


# ---- roles -----------------------------------------------------------------
def is_platform_admin(cfg: PlatformConfig, user: str) -> bool:
    return user in cfg.admins


def role_in(cfg: PlatformConfig, user: str, project: str) -> Role | None:
    """The user's role in a project; platform admins act as project admins."""
    if is_platform_admin(cfg, user):
        return "admin"
    pr = cfg.project(project)
    return pr.members.get(user) if pr else None


def has_role(cfg: PlatformConfig, user: str, project: str, need: Role) -> bool:
    role = role_in(cfg, user, project)
    return role is not None and ROLE_RANK[role] >= ROLE_RANK[need]


def visible_projects(cfg: PlatformConfig, user: str) -> list[str]:
    if is_platform_admin(cfg, user):
        return [p.name for p in cfg.projects]
    return [p.name for p in cfg.projects if user in p.members]


def require_project(cfg: PlatformConfig, user: str, project: str, need: Role) -> ProjectConfig:
    """The project, if the user holds at least `need` in it. Unknown and invisible look alike."""
    pr = cfg.project(project)
    role = role_in(cfg, user, project)
    if pr is None or role is None:
        raise NotFound(
            f"project {project!r} not found",
            f"your projects: {', '.join(visible_projects(cfg, user)) or 'none'}",
            code="UnknownProject",
        )
    if ROLE_RANK[role] < ROLE_RANK[need]:
        raise Forbidden(
            f"{user} is a {role} in project {project}; this needs the {need} role or higher",
            f"ask a project admin ({', '.join(admins_of(pr)) or 'none'}) to change your role",
        )
    return pr


def admins_of(pr: ProjectConfig) -> list[str]:
    return sorted(u for u, r in pr.members.items() if r == "admin")


def can_stop(cfg: PlatformConfig, user: str, project: str, owner: str) -> bool:
    if user == owner:
        return has_role(cfg, user, project, "member")
    return has_role(cfg, user, project, "admin")


def allowed_queues(cfg: PlatformConfig, pr: ProjectConfig) -> list[str]:
    if pr.allowed_queues is not None:
        return list(pr.allowed_queues)
    return [] if cfg.restrict_by_default else [q.name for q in cfg.queues]


def allowed_presets(cfg: PlatformConfig, pr: ProjectConfig) -> list[str]:
    if pr.allowed_presets is not None:
        return list(pr.allowed_presets)
    return [] if cfg.restrict_by_default else [p.name for p in cfg.presets]


# ---- resolution ------------------------------------------------------------
@dataclass(frozen=True)
class Resolution:
    request: RunRequest
    resolved: dict[str, Any]
    provenance: dict[str, str]
    violations: tuple[GpuPlatError, ...]
    layers: tuple[str, ...]

    @property
    def queue(self) -> str | None:
        return self.resolved.get("queue")

    @property
    def resources(self) -> Resources:
        return Resources.parse(self.resolved.get("resources") or {})

    def raise_first(self) -> None:
        if self.violations:
            raise self.violations[0]

    def verdict(self) -> dict[str, Any]:
        return {"allowed": not self.violations, "violations": [v.to_dict() for v in self.violations]}


def build_layers(cfg: PlatformConfig, pr: ProjectConfig, req: RunRequest) -> tuple[list[Layer], list[GpuPlatError]]:
    """org defaults < project defaults (default queue, default presets) < picked presets < run fields."""
    problems: list[GpuPlatError] = []
    layers = [Layer("org", cfg.defaults.layer_dict())]
    if pr.default_queue:
        layers.append(Layer(f"project:{pr.name}", {"queue": pr.default_queue}))
    for name in pr.default_presets:
        p = cfg.preset(name)
        if p is not None:
            layers.append(Layer(f"project:{pr.name}/preset:{name}", p.layer_dict(), p.merge, tuple(p.locked)))
    allowed = allowed_presets(cfg, pr)
    for name in req.presets:
        p = cfg.preset(name)
        if p is None:
            problems.append(
                Unprocessable(
                    f"unknown preset {name!r}",
                    f"presets allowed in project {pr.name}: {', '.join(allowed) or 'none'}",
                    code="UnknownPreset",
                )
            )
            continue
        if name not in allowed:
            problems.append(
                Forbidden(
                    f"preset {name!r} is not allowed in project {pr.name}",
                    f"allowed presets: {', '.join(allowed) or 'none'}",
                    code="PresetNotAllowed",
                )
            )
            continue
        layers.append(Layer(f"preset:{name}", p.layer_dict(), p.merge, tuple(p.locked)))
    layers.append(Layer("run", req.explicit_layer()))
    return layers, problems


def _exceeds(limit: Resources | Quota, req: Resources) -> list[tuple[str, int, int]]:
    out = []
    for name, attr in (("gpu", "gpu"), ("cpu", "cpu_milli"), ("memory", "memory_bytes")):
        lim = getattr(limit, attr)
        if lim is not None and getattr(req, attr) > lim:
            out.append((name, getattr(req, attr), lim))
    return out


def resolve(cfg: PlatformConfig, user: str, req: RunRequest) -> Resolution:
    """Merge the layers and check every policy rule. Raises only for access (404/403)."""
    pr = require_project(cfg, user, req.project, "member")
    layers, problems = build_layers(cfg, pr, req)
    merged: Resolved = merge_layers(layers)
    spec = merged.spec
    for v in merged.violations:
        problems.append(
            Forbidden(
                v.message(), "remove the override or pick presets that do not lock this field", code="FieldLocked"
            )
        )
    spec.setdefault("kind", "job")
    spec["command"] = req.argv()
    if req.name or req.script:
        spec["name"] = req.name or req.script.rsplit("/", 1)[-1]  # type: ignore[union-attr]
    if req.params:
        spec["params"] = req.params
    if req.code is not None:
        spec["code"] = req.code
    queues_ok = allowed_queues(cfg, pr)
    qname = spec.get("queue")
    if not qname:
        problems.append(
            Unprocessable(
                "no queue: the run sets none and neither do its presets or the project",
                f"set queue to one of: {', '.join(queues_ok) or 'none'}",
                code="NoQueue",
            )
        )
    elif cfg.queue(qname) is None:
        problems.append(
            Unprocessable(
                f"unknown queue {qname!r}", f"allowed queues: {', '.join(queues_ok) or 'none'}", code="UnknownQueue"
            )
        )
    elif qname not in queues_ok:
        problems.append(
            Forbidden(
                f"queue {qname!r} is not allowed in project {pr.name}",
                f"allowed queues: {', '.join(queues_ok) or 'none'}",
                code="QueueNotAllowed",
            )
        )
    try:
        res = Resources.parse(spec.get("resources") or {})
    except ValueError as exc:  # merged values were validated per layer; guard anyway
        problems.append(Unprocessable(f"resources: {exc}", "use gpu: int, cpu: '500m', memory: '16Gi'"))
        res = Resources()
    q = cfg.queue(qname) if qname else None
    if q is not None:
        for name, want, have in _exceeds(q.quota.quota(), res):
            problems.append(
                Unprocessable(
                    f"requests {fmt_amount(name, want)} {name} but queue {q.name} has a quota of "
                    f"{fmt_amount(name, have)} {name}: it could never be dispatched",
                    f"ask for at most {fmt_amount(name, have)} {name}, or use another queue: "
                    f"{', '.join(x for x in queues_ok if x != q.name) or 'none'}",
                    code="ExceedsQueueQuota",
                )
            )
    if pr.max_run_resources is not None:
        lim = Quota.parse(pr.max_run_resources.model_dump())
        # name only the limited resources: an unset one is unlimited, not 0
        limits = (("gpu", lim.gpu), ("cpu", lim.cpu_milli), ("memory", lim.memory_bytes))
        caps = [(n, v) for n, v in limits if v is not None]
        cap_text = ", ".join(f"{fmt_amount(n, v)} {n}" for n, v in caps)
        for name, want, have in _exceeds(lim, res):
            problems.append(
                Unprocessable(
                    f"requests {fmt_amount(name, want)} {name}; project {pr.name} allows at most "
                    f"{fmt_amount(name, have)} {name} per run (max_run_resources)",
                    f"ask for at most {cap_text} per run",
                    code="MaxRunResources",
                )
            )
    return Resolution(req, spec, merged.provenance, tuple(problems), tuple(layer.label for layer in layers))
