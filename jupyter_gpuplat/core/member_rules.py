"""What a member may set in a run's own fields (pure: no I/O).

A member's run is untrusted code, and its fields are hostile input: what reaches past the run
(volume sources, placement, images, the platform's env names, security relaxations) is granted
only by platform admins, through presets, connections and the allow-lists of the platform
config. `check` judges the member layer (the run request's own spec fields) and returns one
`FieldNotAllowed` per refused field, naming the field, the rule and what is allowed:

- `volumes.connection`: volumes without a source (scratch) only; host_path, secret, config_map
  and claim come from platform-admin presets and the connections the project may use.
- `placement.preset`: `gpu_type`, and what the project's `allowed_placement` lists; node_selector,
  tolerations and affinity come from presets.
- `image.allowed`: an image the admin layers name (org defaults, the project's presets) or one
  matching `allowed_images` (platform and project); or none (the presets' or the default).
- `env.reserved`: any name but RESERVED_PREFIXES and RESERVED_NAMES (set or deleted), CUDA_TUNING
  excepted.
- `security.preset`: no relaxation (deleting one, back to the restricted default, is allowed).

Deleting is refused where it could widen what the run reaches (placement, env: a preset's
node selector, a preset's `NVIDIA_*`) and allowed where it only narrows it (volumes, security).
`strip` and `provides` let core/refusal.py offer a preset that sets the refused field instead.
"""

from __future__ import annotations

import copy
import fnmatch
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .errors import FieldNotAllowed
from .spec import Toleration

VOLUME_SOURCES = ("host_path", "secret", "config_map", "claim")
PLACEMENT_FIELDS = ("node_selector", "tolerations", "affinity")
RESERVED_PREFIXES = ("CUDA_", "NVIDIA_", "GPUPLAT_", "JUPYTER_", "JUPYTERHUB_", "JPY_", "KERNEL_", "KUBERNETES_")
RESERVED_NAMES = (
    "HIP_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES",
    "GPU_DEVICE_ORDINAL",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
)
# CUDA variables that tune a process's own CUDA runtime and select no device: members keep them.
CUDA_TUNING = (
    "CUDA_LAUNCH_BLOCKING",
    "CUDA_MODULE_LOADING",
    "CUDA_DEVICE_MAX_CONNECTIONS",
    "CUDA_CACHE_DISABLE",
    "CUDA_CACHE_MAXSIZE",
    "CUDA_CACHE_PATH",
    "CUDA_FORCE_PTX_JIT",
    "CUDA_DISABLE_PTX_JIT",
)
RESERVED_TEXT = ", ".join([*(f"{p}*" for p in RESERVED_PREFIXES), *RESERVED_NAMES])
TUNING_TEXT = "CUDA tuning variables stay allowed: " + ", ".join(CUDA_TUNING)
_GLOB = "*?["


@dataclass(frozen=True)
class MemberContext:
    """What platform admins grant a project's members (core/policy.member_context builds it)."""

    project: str
    connections: tuple[str, ...] = ()  # the connections the project may use
    # The presets the project may use (allowed and default), name -> the fields it sets, in config order.
    presets: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    admin_images: tuple[str, ...] = ()  # images the org defaults and those presets name
    image_patterns: tuple[str, ...] = ()  # the platform's and the project's allowed_images
    node_selector: Mapping[str, Sequence[str]] = field(default_factory=dict)  # allowed_placement
    tolerations: tuple[str, ...] = ()  # allowed_placement: taint keys


# ---- images -------------------------------------------------------------------------------------
def _has_glob(s: str) -> bool:
    return any(c in s for c in _GLOB)


def normalize_image(ref: str) -> str:
    """`python:3.11` -> `docker.io/library/python:3.11`; `pytorch/pytorch` -> `docker.io/pytorch/pytorch:latest`.

    The registry is the first component when it looks like a host (has `.` or `:`, or is
    `localhost`), else Docker Hub; a Docker Hub name without a namespace is in `library/`; a
    reference with neither tag nor digest is `:latest`.
    """
    name, at, digest = ref.strip().partition("@")
    first, slash, rest = name.partition("/")
    if slash and ("." in first or ":" in first or first == "localhost"):
        registry, path = first, rest
    else:
        registry, path = "docker.io", name
    if registry in ("index.docker.io", "registry-1.docker.io"):
        registry = "docker.io"
    if registry == "docker.io" and "/" not in path:
        path = "library/" + path
    if not at and ":" not in path.rsplit("/", 1)[-1]:
        path += ":latest"
    return f"{registry}/{path}{at}{digest}"


def normalize_pattern(pattern: str) -> str:
    """A pattern without wildcards is a reference (normalised as one); with them, the Docker Hub
    prefix is added where the pattern plainly names a Hub image (`python:3.*`, `pytorch/*`)."""
    if not _has_glob(pattern):
        return normalize_image(pattern)
    first, slash, _ = pattern.partition("/")
    if (_has_glob(first) and slash) or pattern in ("*", "**"):
        return pattern  # `*/team/*`, `*`: the registry is the pattern's
    if not slash:
        return "docker.io/library/" + pattern
    if "." in first or ":" in first or first == "localhost":
        return pattern
    return "docker.io/" + pattern


def image_allowed(image: str, ctx: MemberContext) -> bool:
    ref = normalize_image(image)
    if ref in {normalize_image(i) for i in ctx.admin_images}:
        return True
    return any(fnmatch.fnmatchcase(ref, normalize_pattern(p)) for p in ctx.image_patterns)


# ---- env ----------------------------------------------------------------------------------------
def reserved_env(name: str) -> str | None:
    """The reserved name or prefix (`NVIDIA_*`) `name` falls under; None when a member may set it."""
    if name in RESERVED_NAMES:
        return name
    if name in CUDA_TUNING:
        return None
    return next((p + "*" for p in RESERVED_PREFIXES if name.startswith(p)), None)


# ---- the rule -----------------------------------------------------------------------------------
def _presets_setting(ctx: MemberContext, *path: str) -> list[str]:
    """`preset:NAME` for each preset the project may use that sets `path` (e.g. placement, tolerations)."""
    out = []
    for name, fields in ctx.presets.items():
        value: Any = fields
        for p in path:
            value = value.get(p) if isinstance(value, Mapping) else None
        if value not in (None, {}, []):
            out.append(f"preset:{name}")
    return out


def _env_presets(ctx: MemberContext, name: str) -> list[str]:
    return [
        f"preset:{p}"
        for p, fields in ctx.presets.items()
        if any(isinstance(e, Mapping) and e.get("name") == name for e in fields.get("env") or [])
    ]


def _pick(presets: list[str]) -> str:
    names = ", ".join(p.removeprefix("preset:") for p in presets)
    return f"pick a preset that sets it ({names})" if presets else "ask a platform admin for a preset that sets it"


def _volumes(member: Mapping[str, Any], ctx: MemberContext) -> list[FieldNotAllowed]:
    out = []
    conns = list(ctx.connections)
    for v in member.get("volumes") or []:
        if not isinstance(v, Mapping):
            continue
        for source in VOLUME_SOURCES:
            if v.get(source) is None:
                continue
            f = f"volumes[{v.get('name')}].{source}"
            out.append(
                FieldNotAllowed(
                    f"{f}: a run's own fields may not name a volume source (rule volumes.connection); volume "
                    f"sources come from platform-admin presets and the connections project {ctx.project} may use: "
                    f"{', '.join(conns) or 'none'}",
                    "name a connection instead"
                    + (f" (connections: [{', '.join(conns)}])" if conns else "")
                    + ", or pick a preset that mounts it; a volume without a source is scratch space and stays allowed",
                    field=f,
                    rule="volumes.connection",
                    allowed=conns,
                    at=("volumes", str(v.get("name")), source),
                    wanted=v.get(source),
                )
            )
    return out


def _placement(member: Mapping[str, Any], ctx: MemberContext) -> list[FieldNotAllowed]:
    if "placement" not in member:
        return []
    pl = member["placement"]
    gpu_type = "placement.gpu_type stays yours to set"
    if pl is None:
        presets = list(dict.fromkeys(p for k in PLACEMENT_FIELDS for p in _presets_setting(ctx, "placement", k)))
        return [
            FieldNotAllowed(
                "placement: null would delete the node selector, tolerations and affinity the presets set; "
                "placement comes from platform-admin presets (rule placement.preset); "
                f"allowed: {', '.join(presets) or 'none'}",
                f"leave placement out (set placement.gpu_type: null to unset only the GPU type); {gpu_type}",
                field="placement",
                rule="placement.preset",
                allowed=presets,
                at=("placement",),
                wanted=None,
            )
        ]
    out = []
    for key in PLACEMENT_FIELDS:
        if key not in pl:
            continue
        value = pl[key]
        wanted: Any = value
        allow: list[str] = []
        if key == "node_selector" and isinstance(value, Mapping):
            allow = [f"node_selector {lab}={v}" for lab, vals in ctx.node_selector.items() for v in vals]
            wanted = {lab: val for lab, val in value.items() if not _label_allowed(lab, val, ctx)}
            if not wanted:
                continue
        elif key == "tolerations" and isinstance(value, list):
            allow = [f"toleration key {k}" for k in ctx.tolerations]
            wanted = [t for t in value if not (isinstance(t, Mapping) and t.get("key") in ctx.tolerations)]
            if not wanted:
                continue
        presets = _presets_setting(ctx, "placement", key)
        allowed = [*presets, *allow]
        f = f"placement.{key}"
        own = f"; or set only what the project allows ({', '.join(allow)})" if allow else ""
        out.append(
            FieldNotAllowed(
                f"{f} comes from platform-admin presets, not a run's own fields (rule placement.preset; "
                f"the run asked for {_asked(key, wanted)}); allowed: {', '.join(allowed) or 'none'}",
                f"{_pick(presets)}{own}; {gpu_type}",
                field=f,
                rule="placement.preset",
                allowed=allowed,
                at=("placement", key),
                wanted=wanted,
            )
        )
    return out


def _asked(key: str, wanted: Any) -> str:
    if wanted is None:
        return "deleting it"
    if key == "node_selector":
        return ", ".join(f"{k}={'(deleted)' if v is None else v}" for k, v in wanted.items())
    if key == "tolerations":
        keys = [str(t.get("key")) if isinstance(t, Mapping) and t.get("key") else "every taint" for t in wanted]
        return "tolerating " + ", ".join(keys)
    return "an affinity"


def _label_allowed(label: str, value: Any, ctx: MemberContext) -> bool:
    vals = ctx.node_selector.get(label)
    if vals is None:
        return False
    if value is None:  # leaving the label out: any node, so only where any value is allowed
        return "*" in vals
    return "*" in vals or value in vals


def _image(member: Mapping[str, Any], ctx: MemberContext) -> list[FieldNotAllowed]:
    image = member.get("image")
    if image is None or image_allowed(image, ctx):
        return []  # None: the presets' or the executor's default image (the platform's)
    allowed = list(dict.fromkeys([*ctx.image_patterns, *ctx.admin_images]))
    return [
        FieldNotAllowed(
            f"image {image!r} ({normalize_image(image)}) is not allowed in project {ctx.project} (rule image.allowed); "
            f"allowed: {', '.join(allowed) or 'none'}",
            "use an allowed image, or leave image out: the presets' image or the platform's default is used",
            field="image",
            rule="image.allowed",
            allowed=allowed,
            at=("image",),
            wanted=image,
        )
    ]


def _env(member: Mapping[str, Any], ctx: MemberContext) -> list[FieldNotAllowed]:
    if "env" not in member:
        return []
    env = member["env"]
    if env is None:
        return [
            FieldNotAllowed(
                "env: null would delete every variable the presets set, the platform's reserved ones included "
                f"(rule env.reserved; reserved: {RESERVED_TEXT})",
                "delete variables by name ({name: X, value: null}) instead",
                field="env",
                rule="env.reserved",
                allowed=[],
                at=("env",),
                wanted=None,
            )
        ]
    out = []
    for e in env:
        name = e.get("name") if isinstance(e, Mapping) else None
        if not isinstance(name, str):
            continue
        under = reserved_env(name)
        if under is None:
            continue
        presets = _env_presets(ctx, name)
        allowed = [*presets, *(CUDA_TUNING if name.startswith("CUDA_") else ())]
        act = "delete" if e.get("value") is None else "set"
        hint = [f"reserved: {RESERVED_TEXT}"]
        if name.startswith("CUDA_"):
            hint.append(TUNING_TEXT)
        if presets:
            hint.insert(0, _pick(presets))
        if "DEVICE" in name or name.startswith(("NVIDIA_", "CUDA_MPS_")):
            hint.insert(0, "GPUs are chosen with resources.gpu, not with env")
        out.append(
            FieldNotAllowed(
                f"env.{name}: {under} is reserved for the platform (rule env.reserved): a run's own fields may not "
                f"{act} it",
                "; ".join(hint),
                field=f"env.{name}",
                rule="env.reserved",
                allowed=allowed,
                at=("env", name),
                wanted=e.get("value"),
            )
        )
    return out


def _security(member: Mapping[str, Any], ctx: MemberContext) -> list[FieldNotAllowed]:
    sec = member.get("security")
    if not isinstance(sec, Mapping):
        return []  # absent, or null: back to the restricted default, which only narrows
    out = []
    for key, value in sec.items():
        if value is None:
            continue
        presets = _presets_setting(ctx, "security", key)
        f = f"security.{key}"
        out.append(
            FieldNotAllowed(
                f"{f}: relaxations of the restricted default come only from platform-admin presets "
                f"(rule security.preset); allowed: {', '.join(presets) or 'none'}",
                _pick(presets),
                field=f,
                rule="security.preset",
                allowed=presets,
                at=("security", key),
                wanted=value,
            )
        )
    return out


def check(member: Mapping[str, Any], ctx: MemberContext) -> list[FieldNotAllowed]:
    """Every field of the member layer a member may not set, in spec order."""
    return [
        *_placement(member, ctx),
        *_image(member, ctx),
        *_env(member, ctx),
        *_volumes(member, ctx),
        *_security(member, ctx),
    ]


# ---- refused parts out, and what a preset gives instead -----------------------------------------
def strip(member: Mapping[str, Any], refused: Iterable[FieldNotAllowed]) -> dict[str, Any]:
    """The member layer without the refused parts (an emptied field is left out)."""
    out = copy.deepcopy(dict(member))
    for r in refused:
        top = r.at[0] if r.at else None
        if top is None or top not in out:
            continue
        if len(r.at) == 1:
            out.pop(top)
        elif top == "placement" and isinstance(out[top], dict):
            key = r.at[1]
            cur = out[top].get(key)
            if key == "node_selector" and isinstance(cur, dict) and isinstance(r.wanted, Mapping):
                rest = {k: v for k, v in cur.items() if k not in r.wanted}
                out[top][key] = rest
            elif key == "tolerations" and isinstance(cur, list) and isinstance(r.wanted, list):
                out[top][key] = [t for t in cur if t not in r.wanted]
            else:
                out[top].pop(key, None)
            if out[top].get(key) in ({}, []):
                out[top].pop(key, None)
        elif top == "volumes" and isinstance(out[top], list):
            out[top] = [v for v in out[top] if not (isinstance(v, Mapping) and str(v.get("name")) == r.at[1])]
        elif top == "env" and isinstance(out[top], list):
            out[top] = [e for e in out[top] if not (isinstance(e, Mapping) and e.get("name") == r.at[1])]
        elif top == "security" and isinstance(out[top], dict):
            out[top].pop(r.at[1], None)
        if out.get(top) in ({}, []):
            out.pop(top)
    return out


def provides(spec: Mapping[str, Any], r: FieldNotAllowed) -> bool:
    """Whether a resolved spec has what the member asked for in the refused field (a preset set it)."""
    at, wanted = r.at, r.wanted
    if not at or wanted is None:
        return False  # a delete: nothing for a preset to give
    if at[0] == "image":
        return isinstance(spec.get("image"), str) and normalize_image(spec["image"]) == normalize_image(wanted)
    if at[0] == "placement" and len(at) == 2:
        got = (spec.get("placement") or {}).get(at[1])
        if at[1] == "node_selector":
            return isinstance(got, Mapping) and all(got.get(k) == v for k, v in wanted.items())
        if at[1] == "tolerations":
            have = [_toleration(t) for t in got or []]
            return all(_toleration(t) in have for t in wanted)
        return bool(got == wanted)
    if at[0] == "volumes" and len(at) == 3:
        source = at[2]
        vols = [*(spec.get("volumes") or []), *(spec.get("connection_refs") or [])]
        return any(isinstance(v, Mapping) and v.get(source) == wanted for v in vols)
    if at[0] == "env" and len(at) == 2:
        env = spec.get("env") or []
        return any(isinstance(e, Mapping) and e.get("name") == at[1] and e.get("value") == wanted for e in env)
    if at[0] == "security" and len(at) == 2:
        return bool((spec.get("security") or {}).get(at[1]) == wanted)
    return False


def _toleration(t: Any) -> Any:
    try:
        return Toleration.model_validate(t).model_dump()
    except ValueError:
        return t
