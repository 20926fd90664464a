"""Who may do what, and resolving a run request into a checked spec.

Policy is checked after merging and before a run exists: every violation names
the rule and the allowed values. Restrictions are access control.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .config import ROLE_RANK, PlatformConfig, ProjectConfig, Role
from .connections import allowed_connections
from .errors import Forbidden, GpuPlatError, NotFound, Unprocessable
from .identity import groups_of
from .limits import LimitExceeded
from .member_rules import MemberContext
from .member_rules import check as check_member_fields
from .merge import Layer, Resolved, merge_layers
from .naming import command_name
from .request import RunRequest
from .resources import Quota, Resources, fmt_amount
from .spec import DEFAULT_KIND
from .status import FINAL


# ---- roles -----------------------------------------------------------------
def is_platform_admin(cfg: PlatformConfig, user: str) -> bool:
    return user in cfg.admins or not groups_of(user).isdisjoint(cfg.admin_groups)


def platform_admins(cfg: PlatformConfig) -> list[str]:
    return [*cfg.admins, *(f"group {g}" for g in cfg.admin_groups)]


def member_role(pr: ProjectConfig, user: str) -> Role | None:
    """The role `members` gives the user, else the highest any of the user's groups gives."""
    if user in pr.members:
        return pr.members[user]
    granted = [pr.groups[g] for g in groups_of(user) if g in pr.groups]
    return max(granted, key=ROLE_RANK.__getitem__, default=None)


def role_in(cfg: PlatformConfig, user: str, project: str) -> Role | None:
    """The user's role in a project; platform admins act as project admins."""
    if is_platform_admin(cfg, user):
        return "admin"
    pr = cfg.project(project)
    return member_role(pr, user) if pr else None


def has_role(cfg: PlatformConfig, user: str, project: str, need: Role) -> bool:
    role = role_in(cfg, user, project)
    return role is not None and ROLE_RANK[role] >= ROLE_RANK[need]


def visible_projects(cfg: PlatformConfig, user: str) -> list[str]:
    if is_platform_admin(cfg, user):
        return [p.name for p in cfg.projects]
    return [p.name for p in cfg.projects if member_role(p, user) is not None]


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
    users = sorted(u for u, r in pr.members.items() if r == "admin")
    return users + sorted(f"group {g}" for g, r in pr.groups.items() if r == "admin")


def can_stop(cfg: PlatformConfig, user: str, project: str, owner: str) -> bool:
    if user == owner:
        return has_role(cfg, user, project, "member")
    return has_role(cfg, user, project, "admin")


def require_can_stop(cfg: PlatformConfig, user: str, run: dict[str, Any]) -> None:
    """Stop: the run's owner (a member or more), project admins and platform admins."""
    if not can_stop(cfg, user, run["project"], run["user"]):
        raise Forbidden(
            f"{user} may not stop run {run['id']} (owned by {run['user']})",
            "the run's owner, project admins and platform admins can stop it",
        )


def run_actions(cfg: PlatformConfig, user: str, run: dict[str, Any]) -> list[str]:
    """What `user` may do to `run` now, as run views say it (`actions`), so no client copies these rules:
    `stop` and, for a sweep, `edit` (its concurrency, pausing) and, for a session, `keep` (its idle clock):
    while it is unfinished, by those who may stop it; `resubmit` (a new run from its request) by members."""
    out = []
    if run["status"] not in FINAL and can_stop(cfg, user, run["project"], run["user"]):
        out.append("stop")
        if run.get("kind") == "sweep":
            out.append("edit")
        if run.get("kind") == "session":
            out.append("keep")
    if has_role(cfg, user, run["project"], "member"):
        out.append("resubmit")
    return out


def can_see(cfg: PlatformConfig, user: str, project: str) -> bool:
    """See a run (detail, logs, outputs, metrics, explain, compare): a viewer of its project or more."""
    return has_role(cfg, user, project, "viewer")


def require_visible_run(cfg: PlatformConfig, user: str, run_id: str, run: dict[str, Any] | None) -> dict[str, Any]:
    """The run, if the user may see it. Unknown and invisible look alike: other teams' ids leak nothing."""
    if run is None or not can_see(cfg, user, run["project"]):
        raise NotFound(f"run {run_id!r} not found", "list your runs with GET /gpuplat/api/runs")
    return run


def queue_actions(cfg: PlatformConfig, user: str, paused: bool) -> list[str]:
    """What `user` may do to a queue, as queue views say it (`actions`): pause or resume it (platform admins)."""
    return (["resume"] if paused else ["pause"]) if is_platform_admin(cfg, user) else []


def require_platform_admin(cfg: PlatformConfig, user: str) -> None:
    """Admin writes (queues, presets, the whole config, pause/resume, project create/delete)."""
    if not is_platform_admin(cfg, user):
        admins = ", ".join(platform_admins(cfg)) or "none"
        raise Forbidden(f"{user} is not a platform admin", f"platform admins: {admins}")


# Restrictions stay with platform admins; project admins manage members and defaults.
PLATFORM_ONLY_PROJECT_FIELDS = (
    "allowed_queues",
    "allowed_presets",
    "max_run_resources",
    "allowed_images",
    "allowed_placement",
)


def require_project_write(cfg: PlatformConfig, user: str, new: ProjectConfig) -> None:
    """Write a project: platform admins anything; its project admins members, description and defaults."""
    if is_platform_admin(cfg, user):
        return
    name = new.name
    old = cfg.project(name)
    if old is None or role_in(cfg, user, name) is None:
        # A project that does not exist and another team's look alike: the answer tells nothing.
        raise NotFound(
            f"project {name!r} not found",
            f"your projects: {', '.join(visible_projects(cfg, user)) or 'none'}; platform admins create projects",
            code="UnknownProject",
        )
    require_project(cfg, user, name, "admin")
    for f in PLATFORM_ONLY_PROJECT_FIELDS:
        if getattr(new, f) != getattr(old, f):
            raise Forbidden(
                f"{f} of project {name} is set by platform admins",
                "project admins may change members, groups, description, default_queue and default_presets",
            )
    queues, presets = allowed_queues(cfg, old), allowed_presets(cfg, old)
    outside = [q for q in [new.default_queue] if q and q not in queues]
    outside += [p for p in new.default_presets if p not in presets]
    if outside:
        raise Forbidden(
            f"{', '.join(outside)} not allowed in project {name}",
            f"queues: {', '.join(queues)}; presets: {', '.join(presets)}",
        )


def listable_queues(cfg: PlatformConfig, user: str) -> list[str]:
    """Queues a user may list: all for platform admins, else those usable in one of their projects."""
    if is_platform_admin(cfg, user):
        return [q.name for q in cfg.queues]
    usable: set[str] = set()
    for p in visible_projects(cfg, user):
        pr = cfg.project(p)
        if pr is not None:
            usable.update(allowed_queues(cfg, pr))
    return [q.name for q in cfg.queues if q.name in usable]


def listable_presets(cfg: PlatformConfig, user: str, project: str | None = None) -> list[str]:
    """Presets a user may list, in config order: one project's (a viewer or more), else all their projects'."""
    if project:
        pr = require_project(cfg, user, project, "viewer")
        names = set(allowed_presets(cfg, pr)) | set(pr.default_presets)
    elif is_platform_admin(cfg, user):
        names = {p.name for p in cfg.presets}
    else:
        names = set()
        for p in visible_projects(cfg, user):
            pr2 = cfg.project(p)
            if pr2 is not None:
                names |= set(allowed_presets(cfg, pr2))
    return [p.name for p in cfg.presets if p.name in names]


def listable_run_projects(cfg: PlatformConfig, user: str, project: str | None = None) -> list[str]:
    """Projects whose runs a user may list (one, if asked for and visible)."""
    projects = visible_projects(cfg, user)
    if not project:
        return projects
    if project not in projects:
        raise NotFound(f"project {project!r} not found", f"your projects: {', '.join(projects) or 'none'}")
    return [project]


def allowed_queues(cfg: PlatformConfig, pr: ProjectConfig) -> list[str]:
    if pr.allowed_queues is not None:
        return list(pr.allowed_queues)
    return [] if cfg.restrict_by_default else [q.name for q in cfg.queues]


def allowed_presets(cfg: PlatformConfig, pr: ProjectConfig) -> list[str]:
    """The presets a project may use (its `usable_presets`, what submit accepts and what hints offer).

    A preset that locks a queue the project may not use is not among them: a run on it could only be
    refused, and no hint could help. (Config validation refuses one a project lists or defaults to;
    this drops the rest. One that sets such a queue without locking it stays: the run picks its own.)
    """
    if pr.allowed_presets is not None:
        names = list(pr.allowed_presets)
    else:
        names = [] if cfg.restrict_by_default else [p.name for p in cfg.presets]
    queues = set(allowed_queues(cfg, pr))
    return [n for n in names if (p := cfg.preset(n)) is None or "queue" not in p.locked or p.queue in queues]


# ---- resolution ------------------------------------------------------------
@dataclass(frozen=True)
class Resolution:
    request: RunRequest
    resolved: dict[str, Any]
    provenance: dict[str, str]
    violations: tuple[GpuPlatError, ...]
    layers: tuple[str, ...]
    locks: dict[str, str] = field(default_factory=dict)  # path -> the layer (as in provenance) that locked it

    @property
    def queue(self) -> str | None:
        return self.resolved.get("queue")

    @property
    def resources(self) -> Resources:
        return Resources.parse(self.resolved.get("resources") or {})

    def raise_first(self) -> None:
        if self.violations:
            raise self.violations[0]

    def verdict(self, *more: GpuPlatError) -> dict[str, Any]:
        """Allowed or not, and every violation (the policy's, then `more`, e.g. capacity) in order."""
        violations = (*self.violations, *more)
        return {"allowed": not violations, "violations": [v.to_dict() for v in violations]}


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


def _applied_presets(layers: list[Layer]) -> list[str]:
    """Preset names of the merged layers (`project:P/preset:N`, `preset:N`), once each, in merge order."""
    names = [layer.label.rsplit("preset:", 1)[1] for layer in layers if "preset:" in layer.label]
    return list(dict.fromkeys(names))


def _exceeds(limit: Resources | Quota, req: Resources) -> list[tuple[str, int, int]]:
    out = []
    for name, attr in (("gpu", "gpu"), ("cpu", "cpu_milli"), ("memory", "memory_bytes")):
        lim = getattr(limit, attr)
        if lim is not None and getattr(req, attr) > lim:
            out.append((name, getattr(req, attr), lim))
    return out


def project_connections(cfg: PlatformConfig, pr: ProjectConfig) -> list[str]:
    return allowed_connections(cfg.connections, pr.name, cfg.restrict_by_default)


def _check_connections(cfg: PlatformConfig, pr: ProjectConfig, spec: dict[str, Any]) -> list[GpuPlatError]:
    """Each named connection exists and the project may use it; the spec then keeps their refs (no values)."""
    problems: list[GpuPlatError] = []
    names = spec.get("connections")
    if not names:
        spec.pop("connections", None)
        return problems
    ok = project_connections(cfg, pr)
    refs = []
    for name in names:
        c = cfg.connection(name)
        if c is None:
            problems.append(
                Unprocessable(
                    f"unknown connection {name!r}",
                    f"connections project {pr.name} may use: {', '.join(ok) or 'none'}",
                    code="UnknownConnection",
                )
            )
        elif name not in ok:
            problems.append(
                Forbidden(
                    f"connection {name!r} is not allowed in project {pr.name}",
                    f"allowed connections: {', '.join(ok) or 'none'}",
                    code="ConnectionNotAllowed",
                )
            )
        else:
            refs.append(c.reference())
    spec["connection_refs"] = refs
    return problems


def member_context(cfg: PlatformConfig, pr: ProjectConfig) -> MemberContext:
    """What platform admins grant the members of `pr`: connections, presets, images, placement."""
    usable = set(allowed_presets(cfg, pr)) | set(pr.default_presets)
    presets = {p.name: p.layer_dict() for p in cfg.presets if p.name in usable}
    images = [cfg.defaults.image, *(p.get("image") for p in presets.values())]
    patterns = [*(cfg.allowed_images or ()), *(pr.allowed_images or ())]
    ap = pr.allowed_placement
    return MemberContext(
        project=pr.name,
        connections=tuple(project_connections(cfg, pr)),
        presets=presets,
        admin_images=tuple(dict.fromkeys(i for i in images if isinstance(i, str))),
        image_patterns=tuple(dict.fromkeys(patterns)),
        node_selector=dict(ap.node_selector) if ap else {},
        tolerations=tuple(ap.tolerations) if ap else (),
    )


def resolve(cfg: PlatformConfig, user: str, req: RunRequest) -> Resolution:
    """Merge the layers and check every policy rule. Raises only for access (404/403)."""
    pr = require_project(cfg, user, req.project, "member")
    layers, problems = build_layers(cfg, pr, req)
    # The run layer is the member layer: project admins write only default_queue and
    # default_presets, which name platform-admin presets, so every other layer is an admin's.
    problems += check_member_fields(layers[-1].values, member_context(cfg, pr))
    merged: Resolved = merge_layers(layers)
    spec = merged.spec
    for v in merged.violations:
        problems.append(
            Forbidden(
                v.message(), "remove the override or pick presets that do not lock this field", code="FieldLocked"
            )
        )
    spec.setdefault("kind", DEFAULT_KIND)
    # Which presets made the spec (the project's defaults included): run views show these.
    applied = _applied_presets(layers)
    if applied:
        spec["presets"] = applied
    spec["command"] = req.argv()
    # No name given: the run is named after what it runs, here, so every client shows the same one.
    name = req.name or (req.script.rsplit("/", 1)[-1] if req.script else command_name(req.command))
    if name:
        spec["name"] = name
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
    problems += _check_connections(cfg, pr, spec)
    try:
        res = Resources.parse(spec.get("resources") or {})
    except ValueError as exc:  # merged values were validated per layer; guard anyway
        problems.append(Unprocessable(f"resources: {exc}", "use gpu: int, cpu: '500m', memory: '16Gi'"))
        res = Resources()
    q = cfg.queue(qname) if qname else None
    if q is not None:
        for name, want, have in _exceeds(q.quota.quota(), res):
            problems.append(
                LimitExceeded(
                    f"requests {fmt_amount(name, want)} {name} but queue {q.name} has a quota of "
                    f"{fmt_amount(name, have)} {name}: it could never be dispatched",
                    f"ask for at most {fmt_amount(name, have)} {name}",  # core/refusal.py checks and widens it
                    code="ExceedsQueueQuota",
                    resource=name,
                    limit=have,
                    requested=want,
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
                LimitExceeded(
                    f"requests {fmt_amount(name, want)} {name}; project {pr.name} allows at most "
                    f"{fmt_amount(name, have)} {name} per run (max_run_resources)",
                    f"ask for at most {cap_text} per run",
                    code="MaxRunResources",
                    resource=name,
                    limit=have,
                    requested=want,
                )
            )
    labels = tuple(layer.label for layer in layers)
    return Resolution(req, spec, merged.provenance, tuple(problems), labels, dict(merged.locks))
