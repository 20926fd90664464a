"""The platform config (YAML): queues, presets, projects, admins.

`parse_config` refuses a bad file whole, naming every error by its path
(`queues[1].quota.gpu: must be >= 0`).
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

import yaml
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from .connections import ConnectionConfig
from .errors import ConfigErrors
from .resources import MAX_GPU, Quota
from .spec import NAME_PATTERN, NOT_IMPLEMENTED, Kind, MergeStrategy, PartialSpec, ResourcesSpec, Text, Toleration

Role = Literal["viewer", "member", "admin"]
ROLE_RANK = {"viewer": 1, "member": 2, "admin": 3}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class QuotaSpec(ResourcesSpec):
    """A queue's limit per resource; an omitted resource is unlimited."""

    def quota(self) -> Quota:
        return Quota.parse(self.model_dump())


class FlavorQuotaSpec(QuotaSpec):
    """A queue's limit on one flavor: its GPUs (required), and optionally cpu and memory."""

    gpu: int = Field(ge=0, le=MAX_GPU)


class QueueFlavor(_Strict):
    """One flavor a queue offers, with its quota; a queue tries its flavors in the order listed."""

    name: str = Field(pattern=NAME_PATTERN)
    quota: FlavorQuotaSpec


class QueueConfig(_Strict):
    name: str = Field(pattern=NAME_PATTERN)
    description: str = ""
    priority: int = Field(default=0, ge=-1000, le=1000)
    concurrency: int | None = Field(default=None, ge=0, le=100_000)
    quota: QuotaSpec = Field(default_factory=QuotaSpec)
    # The GPU quota split by flavor, tried in this order (docs: flavors); empty: one implicit flavor.
    flavors: list[QueueFlavor] = Field(default_factory=list)
    max_per_user: int | None = Field(default=None, ge=1, le=100_000)
    ordering: Literal["best_effort_fifo", "strict_fifo"] = "best_effort_fifo"
    paused: bool = False


class PresetConfig(PartialSpec):
    name: str = Field(pattern=NAME_PATTERN)
    description: str = ""
    merge: MergeStrategy = "post_merge"
    # Dotted field paths ("resources.gpu", "placement") later layers may not change.
    locked: list[str] = Field(default_factory=list)

    def layer_dict(self) -> dict[str, Any]:
        d = self.model_dump(exclude_unset=True, mode="json")
        for meta in ("name", "description", "merge", "locked"):
            d.pop(meta, None)
        return d


def _image_pattern(v: str) -> str:
    if not v.strip() or any(c.isspace() for c in v) or "\x00" in v:
        raise ValueError("an image pattern has no spaces (e.g. registry.internal/vision/*, nvcr.io/nvidia/pytorch:2*)")
    return v


# An fnmatch pattern of image references (`*` matches any characters, `/` included).
ImagePattern = Annotated[str, Field(min_length=1, max_length=512), AfterValidator(_image_pattern)]
LABEL_PATTERN = r"^[A-Za-z0-9]([A-Za-z0-9._/-]*[A-Za-z0-9])?$"
LabelName = Annotated[str, Field(min_length=1, max_length=317, pattern=LABEL_PATTERN)]


def _toleration_key(v: str) -> str:
    if "*" in v:
        raise ValueError("name a taint key: a member never tolerates every taint")
    if not re.match(LABEL_PATTERN, v):
        raise ValueError(f"{v!r} is not a taint key (e.g. nvidia.com/gpu, spot)")
    return v


class AllowedPlacement(_Strict):
    """What members of a project may set in `placement` themselves (platform admins only).

    Everything else in node_selector and tolerations, and affinity always, comes from presets.
    """

    # label -> the values a member may select ("*": any value, or leaving the label out).
    node_selector: dict[LabelName, list[Annotated[str, Field(min_length=1, max_length=63)]]] = Field(
        default_factory=dict
    )
    # Taint keys a member may tolerate (any operator, value and effect).
    tolerations: list[Annotated[str, Field(min_length=1, max_length=317), AfterValidator(_toleration_key)]] = Field(
        default_factory=list
    )


class FlavorConfig(_Strict):
    """A named kind of GPU: how to recognise its devices here and place it on Kubernetes (admins only)."""

    name: str = Field(pattern=NAME_PATTERN)
    # Matched (case-insensitively, as a substring) against the name nvidia-smi reports ("H100" in
    # "NVIDIA H100 80GB HBM3"), when `devices` does not declare them.
    gpu_type: Text | None = Field(default=None, min_length=1, max_length=256)
    # Kubernetes: the node labels that select this flavor's nodes (the Job's nodeSelector), and the
    # taints its pods tolerate. Admin-controlled placement: a run's own placement cannot override them.
    node_labels: dict[LabelName, Annotated[str, Field(max_length=63)]] = Field(default_factory=dict)
    tolerations: list[Toleration] = Field(default_factory=list)
    # Local executor: the device indices of this flavor (for a machine whose GPUs are declared).
    devices: list[Annotated[int, Field(ge=0, le=MAX_GPU)]] | None = None


class ProjectConfig(_Strict):
    name: str = Field(pattern=NAME_PATTERN)
    description: str = ""
    members: dict[str, Role] = Field(default_factory=dict)
    # Team mode: roles granted to identity-provider (JupyterHub) groups; a `members` entry wins.
    groups: dict[str, Role] = Field(default_factory=dict)
    default_queue: str | None = None
    allowed_queues: list[str] | None = None
    default_presets: list[str] = Field(default_factory=list)
    allowed_presets: list[str] | None = None
    max_run_resources: ResourcesSpec | None = None
    # Images a member may name in a run (fnmatch patterns), on top of the platform's allowed_images.
    allowed_images: list[ImagePattern] | None = None
    # What members may set in placement themselves; omitted: nothing (only gpu_type).
    allowed_placement: AllowedPlacement | None = None


class PlatformConfig(_Strict):
    admins: list[str] = Field(default_factory=list)
    # Team mode: members of these identity-provider (JupyterHub) groups are platform admins too.
    admin_groups: list[str] = Field(default_factory=list)
    # With true, a project without allowed_queues/allowed_presets may use none.
    restrict_by_default: bool = False
    # Images a member may name in a run's own fields (fnmatch patterns, every project); with
    # neither this nor a project's allowed_images, only images the admin layers name.
    allowed_images: list[ImagePattern] | None = None
    # Org-wide defaults: the first layer of every run's spec.
    defaults: PartialSpec = Field(default_factory=PartialSpec)
    # Named kinds of GPU queues may split their quota by (docs: flavors).
    flavors: list[FlavorConfig] = Field(default_factory=list)
    queues: list[QueueConfig] = Field(default_factory=list)
    presets: list[PresetConfig] = Field(default_factory=list)
    projects: list[ProjectConfig] = Field(default_factory=list)
    # Named volumes, Secrets, buckets and repositories presets and runs may use (docs/connections.md).
    connections: list[ConnectionConfig] = Field(default_factory=list)

    def queue(self, name: str) -> QueueConfig | None:
        return next((q for q in self.queues if q.name == name), None)

    def preset(self, name: str) -> PresetConfig | None:
        return next((p for p in self.presets if p.name == name), None)

    def flavor(self, name: str) -> FlavorConfig | None:
        return next((f for f in self.flavors if f.name == name), None)

    def project(self, name: str) -> ProjectConfig | None:
        return next((p for p in self.projects if p.name == name), None)

    def connection(self, name: str) -> ConnectionConfig | None:
        return next((c for c in self.connections if c.name == name), None)


_FRIENDLY = {
    "greater_than_equal": "must be >= {ge}",
    "greater_than": "must be > {gt}",
    "less_than_equal": "must be <= {le}",
    "less_than": "must be < {lt}",
    "missing": "is required",
    "bool_type": "must be true or false",
    "string_pattern_mismatch": "invalid name: use lowercase letters, digits, '.', '_' and '-', 1-63 characters",
    "string_too_long": "is too long (at most {max_length} characters)",
    "string_too_short": "must not be empty",
}


def format_loc(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out or "(top level)"


def validation_messages(exc: ValidationError, model: type[BaseModel] | None = None, prefix: str = "") -> list[str]:
    """Pydantic errors as `path: message` lines a person can act on."""
    msgs = []
    for err in exc.errors():
        loc = tuple(
            p
            for p in err["loc"]
            if not (
                isinstance(p, str)
                and ("function-" in p or p in ("str", "int", "float", "list[EnvVar]", "dict[str,str]"))
            )
        )
        path = format_loc(loc)
        if prefix:
            path = prefix + ("" if path.startswith("[") else ".") + path if path != "(top level)" else prefix
        typ = err["type"]
        if typ == "extra_forbidden":
            msg = "unknown field"
        elif typ == "string_pattern_mismatch" and (err.get("ctx") or {}).get("pattern") != NAME_PATTERN:
            # the friendly text describes NAME_PATTERN only; other patterns (env names) are shown as is
            msg = f"must match the pattern {(err.get('ctx') or {}).get('pattern')}"
        elif typ in ("too_long", "too_short"):
            # a length bound on a list, or on a string with its own validator (NUL-free text)
            ctx = err.get("ctx") or {}
            unit = "items" if ctx.get("field_type") == "List" else "characters"
            if typ == "too_long":
                msg = f"is too long (at most {ctx.get('max_length')} {unit})"
            elif ctx.get("min_length") == 1:
                msg = "must not be empty"
            else:
                msg = f"is too short (at least {ctx.get('min_length')} {unit})"
        elif typ in _FRIENDLY:
            try:
                msg = _FRIENDLY[typ].format(**(err.get("ctx") or {}))
            except (KeyError, IndexError):
                msg = err["msg"]
        elif typ == "literal_error":
            msg = "must be one of " + str((err.get("ctx") or {}).get("expected", ""))
        else:
            msg = err["msg"].removeprefix("Value error, ")
        msgs.append(f"{path}: {msg}")
    # one loc can produce several union-branch errors; keep the first of each path
    seen: dict[str, str] = {}
    for m in msgs:
        seen.setdefault(m.split(":", 1)[0], m)
    return list(seen.values())


SECTIONS = ("flavors", "queues", "presets", "projects", "connections")
# A stand-in for an item with schema errors: its name stays known to the reference checks, nothing else.
_STAND_IN: dict[str, dict[str, Any]] = {"connections": {"kind": "git", "url": "-"}}


def parse_config(data: Any) -> PlatformConfig:
    """Validate a loaded YAML document: every error at once, the shape's and the cross-references'."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigErrors(["(top level): must be a mapping with admins, queues, presets, projects"])
    try:
        cfg = PlatformConfig.model_validate(data)
    except ValidationError as exc:
        schema = validation_messages(exc)
        # The references are checked too, on the document with each broken item replaced by its name
        # alone: one run of `config validate` names every problem, not one round at a time.
        patched = _without_broken(data, exc)
        refs = [e for e in cross_check(patched) if e not in schema] if patched is not None else []
        err = ConfigErrors(schema + refs)
        if all(e["type"] == NOT_IMPLEMENTED for e in exc.errors()) and not refs:
            # well-formed, but asks for what this release does not do
            err.status, err.code = 422, "NotImplemented"
        raise err from None
    errors = cross_check(cfg)
    if errors:
        raise ConfigErrors(errors)
    return cfg


def _without_broken(data: dict[str, Any], exc: ValidationError) -> PlatformConfig | None:
    """`data` without what has schema errors: an item's broken fields dropped (the item reduced to its name
    if it still does not validate), other top-level keys with errors dropped."""
    doc = dict(data)
    models: dict[str, type[BaseModel]] = {
        "flavors": FlavorConfig,
        "queues": QueueConfig,
        "presets": PresetConfig,
        "projects": ProjectConfig,
        "connections": ConnectionConfig,
    }
    touched: set[tuple[str, int]] = set()
    for section in SECTIONS:
        if isinstance(doc.get(section), list):
            doc[section] = [dict(x) if isinstance(x, dict) else x for x in doc[section]]
    for e in exc.errors():
        loc = e["loc"]
        top = loc[0] if loc else None
        if top in SECTIONS and isinstance(doc.get(top), list) and len(loc) > 1 and isinstance(loc[1], int):
            item = doc[str(top)][loc[1]]
            touched.add((str(top), loc[1]))
            if isinstance(item, dict) and len(loc) > 2 and isinstance(loc[2], str) and loc[2] != "name":
                item.pop(loc[2], None)
        elif isinstance(top, str):
            doc.pop(top, None)
    for section, i in touched:
        item = doc[section][i]
        try:
            models[section].model_validate(item)
        except ValidationError:
            name = item.get("name") if isinstance(item, dict) else None
            if not (isinstance(name, str) and re.match(NAME_PATTERN, name)):
                name = f"invalid.item.{i}"  # an item without a usable name: a placeholder keeps the indexes
            doc[section][i] = {"name": name, **_STAND_IN.get(section, {})}
    try:
        return PlatformConfig.model_validate(doc)
    except ValidationError:
        return None


def named_paths(errors: list[str], data: Any) -> list[str]:
    """Each `queues[0].…` path with the item's name after its index (`queues[0] (team-a-train).quota.gpu`)."""
    out = []
    for e in errors:
        m = re.match(r"^(flavors|queues|presets|projects|connections)\[(\d+)\]", e)
        items = data.get(m[1]) if m and isinstance(data, dict) else None
        i = int(m[2]) if m else 0
        name = (
            items[i].get("name") if isinstance(items, list) and i < len(items) and isinstance(items[i], dict) else None
        )
        out.append(f"{e[: m.end()]} ({name}){e[m.end() :]}" if m and isinstance(name, str) and name else e)
    return out


def load_config_text(text: str) -> PlatformConfig:
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigErrors([f"(yaml): {exc}"]) from None
    return parse_config(data)


def _dupes(kind: str, names: list[str]) -> list[str]:
    seen: set[str] = set()
    out = []
    for i, n in enumerate(names):
        if n in seen:
            out.append(f"{kind}[{i}].name: duplicate name {n!r}")
        seen.add(n)
    return out


def cross_check(cfg: PlatformConfig) -> list[str]:
    errors = _dupes("queues", [q.name for q in cfg.queues])
    errors += _dupes("presets", [p.name for p in cfg.presets])
    errors += _dupes("projects", [p.name for p in cfg.projects])
    errors += _dupes("connections", [c.name for c in cfg.connections])
    errors += _check_connections(cfg)
    errors += check_flavors(cfg)
    queues = [q.name for q in cfg.queues]
    presets = [p.name for p in cfg.presets]
    if cfg.defaults.queue and cfg.defaults.queue not in queues:
        errors.append(f"defaults.queue: unknown queue {cfg.defaults.queue!r} (known: {', '.join(queues) or 'none'})")
    for i, preset in enumerate(cfg.presets):
        if preset.queue and preset.queue not in queues:
            errors.append(f"presets[{i}].queue: unknown queue {preset.queue!r} (known: {', '.join(queues) or 'none'})")
        for j, field in enumerate(preset.locked):
            if field.split(".")[0] not in PartialSpec.model_fields:
                errors.append(
                    f"presets[{i}].locked[{j}]: unknown field {field!r} (fields: {', '.join(PartialSpec.model_fields)})"
                )
    for i, pr in enumerate(cfg.projects):
        where = f"projects[{i}]"
        for j, q in enumerate(pr.allowed_queues or []):
            if q not in queues:
                errors.append(
                    f"{where}.allowed_queues[{j}]: unknown queue {q!r} (known: {', '.join(queues) or 'none'})"
                )
        for j, p in enumerate(pr.allowed_presets or []):
            if p not in presets:
                errors.append(
                    f"{where}.allowed_presets[{j}]: unknown preset {p!r} (known: {', '.join(presets) or 'none'})"
                )
        for j, p in enumerate(pr.default_presets):
            if p not in presets:
                errors.append(
                    f"{where}.default_presets[{j}]: unknown preset {p!r} (known: {', '.join(presets) or 'none'})"
                )
        allowed_p = (
            pr.allowed_presets if pr.allowed_presets is not None else (None if not cfg.restrict_by_default else [])
        )
        for j, p in enumerate(pr.default_presets):
            if p in presets and allowed_p is not None and p not in allowed_p:
                errors.append(
                    f"{where}.default_presets[{j}]: {p!r} is not in the project's allowed presets {allowed_p}"
                )
        # A preset the project names (allowed or default) that locks a queue the project may not use: every
        # run on it would be refused at submit. (One that does not lock it runs with the run's own queue;
        # policy.allowed_presets drops the locked ones a project gets without naming them.)
        allowed_q = (
            pr.allowed_queues if pr.allowed_queues is not None else (None if not cfg.restrict_by_default else [])
        )
        for field, names in (("allowed_presets", pr.allowed_presets or []), ("default_presets", pr.default_presets)):
            for j, p in enumerate(names):
                pinned = cfg.preset(p)
                locks = pinned is not None and "queue" in pinned.locked
                if (
                    pinned
                    and locks
                    and pinned.queue in queues
                    and allowed_q is not None
                    and pinned.queue not in allowed_q
                ):
                    errors.append(
                        f"{where}.{field}[{j}]: preset {p!r} locks queue {pinned.queue!r}, which project "
                        f"{pr.name} may not use (allowed queues: {', '.join(allowed_q) or 'none'}); "
                        f"allow the queue or drop the preset"
                    )
        if pr.default_queue and pr.allowed_queues is None and cfg.restrict_by_default:
            errors.append(
                f"{where}.default_queue: restrict_by_default is true and the project lists no allowed_queues, "
                "so it may use no queue"
            )
        if pr.default_queue:
            if pr.default_queue not in queues:
                errors.append(
                    f"{where}.default_queue: unknown queue {pr.default_queue!r} (known: {', '.join(queues) or 'none'})"
                )
            elif pr.allowed_queues is not None and pr.default_queue not in pr.allowed_queues:
                errors.append(
                    f"{where}.default_queue: {pr.default_queue!r} is not in allowed_queues {pr.allowed_queues}"
                )
    return errors


def check_flavors(cfg: PlatformConfig, machine: dict[str, int] | None = None) -> list[str]:
    """Flavors: unique names, queues naming known ones each once, quotas within the devices of each.

    `machine`: the local machine's GPUs per flavor, where they are known (the server passes them).
    Else a flavor that declares its devices bounds its quota by their number.
    """
    errors = _dupes("flavors", [f.name for f in cfg.flavors])
    known = [f.name for f in cfg.flavors]
    allowed = ", ".join(known) or "none: the platform config declares no flavors"
    counts = {f.name: len(set(f.devices)) for f in cfg.flavors if f.devices is not None}
    counts.update(machine or {})
    owner: dict[int, str] = {}
    for i, f in enumerate(cfg.flavors):
        for d in f.devices or []:
            if owner.setdefault(d, f.name) != f.name:
                errors.append(f"flavors[{i}].devices: device {d} is already flavor {owner[d]!r}'s")
    for i, q in enumerate(cfg.queues):
        seen: set[str] = set()
        for j, qf in enumerate(q.flavors):
            where = f"queues[{i}].flavors[{j}]"
            if qf.name not in known:
                errors.append(f"{where}.name: unknown flavor {qf.name!r} (known: {allowed})")
            elif qf.name in seen:
                errors.append(f"{where}.name: flavor {qf.name!r} is listed twice")
            elif qf.name in counts and qf.quota.gpu > counts[qf.name]:
                errors.append(
                    f"{where}.quota.gpu: {qf.quota.gpu} is more than the {counts[qf.name]} device(s) of "
                    f"flavor {qf.name!r} (at most {counts[qf.name]})"
                )
            seen.add(qf.name)
    return errors


def _check_connections(cfg: PlatformConfig) -> list[str]:
    errors = []
    projects = [p.name for p in cfg.projects]
    conns = list(dict.fromkeys(c.name for c in cfg.connections))
    for i, c in enumerate(cfg.connections):
        for j, p in enumerate(c.projects or []):
            if p not in projects:
                errors.append(
                    f"connections[{i}].projects[{j}]: unknown project {p!r} (known: {', '.join(projects) or 'none'})"
                )
    layers = [("defaults", cfg.defaults)] + [(f"presets[{i}]", p) for i, p in enumerate(cfg.presets)]
    for where, layer in layers:
        for j, name in enumerate(layer.connections or []):
            if name not in conns:
                errors.append(
                    f"{where}.connections[{j}]: unknown connection {name!r} (known: {', '.join(conns) or 'none'})"
                )
    return errors


def dump_config(cfg: PlatformConfig) -> dict[str, Any]:
    return cfg.model_dump(mode="json", exclude_defaults=True)


__all__ = [
    "ROLE_RANK",
    "AllowedPlacement",
    "ConnectionConfig",
    "FlavorConfig",
    "Kind",
    "PlatformConfig",
    "PresetConfig",
    "ProjectConfig",
    "QueueConfig",
    "QueueFlavor",
    "Role",
    "load_config_text",
    "parse_config",
    "validation_messages",
]
