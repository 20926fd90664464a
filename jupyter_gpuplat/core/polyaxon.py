"""Polyaxon files into this platform's presets and run requests (pure: no I/O).

`convert_preset` maps a Polyaxon preset (an operation with `isPreset`/`patchStrategy`,
`runPatch`, `queue`, `termination`) to a PresetConfig dict; `convert_operation` (polyaxon_op.py)
maps an operation or component with a job run to a RunRequest dict. Both return a per-field report (`Note`s):
what each field became, or why it has no equivalent. A field Polyaxon does not define is
refused by name; on submit, a field that would change what runs and has no equivalent is too.
See docs/polyaxon.md.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .errors import InvalidInput
from .member_rules import reserved_env

STRATEGIES = ("replace", "isnull", "post_merge", "pre_merge")
TEMPLATE = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_.]*)\s*\}\}")
# Polyaxon's param kinds that are this platform's matrix domains (kind -> domain key).
DOMAINS = {"choice": "choice", "range": "range", "linspace": "linspace", "uniform": "uniform"}
MATRIX_KINDS = {"grid": "grid", "random": "random", "mapping": "mapping", "bayes": "bayes"}
# Operation/component sections Polyaxon defines that this platform has no equivalent for.
NO_EQUIVALENT = {
    "cache": "runs are never reused from a cache here",
    "plugins": "auth/docker/shm/collect plugins are the executor's, not the run's",
    "hooks": "no hooks after a run ends",
    "build": "no image build step: give an image that exists",
    "schedule": "no cron or interval schedules",
    "events": "no event triggers",
    "joins": "no joins of other runs' outputs",
    "dependencies": "no DAG dependencies",
    "trigger": "no DAG trigger policy",
    "conditions": "no DAG conditions",
    "skipOnUpstreamSkip": "no DAGs",
    "isApproved": "runs need no approval",
    "cost": "no cost accounting; queues limit GPUs, CPU and memory",
    "namespace": "the namespace is the platform's (GpuPlat.kubernetes_namespace)",
    "template": "no templates",
    "mount": "no artifact mounts; runs read their working directory",
    "actions": "no UI actions",
    "contexts": "no Polyaxon contexts",
    "patchStrategy": "",
    "hubRef": "no component hub: inline the component or give pathRef to a local file",
    "urlRef": "no fetching components by URL: inline the component",
    "dagRef": "no DAGs",
    "outputs": "outputs are what the run writes and logs (tracking), not declared",
}
INFO_ONLY = {
    "version": "the polyaxonfile version (1.1) is read, not kept",
    "description": "a run has no description here",
    "tags": "runs have no tags here",
    "isPreset": "",
    "kind": "",
}
RUN_NO_EQUIVALENT = {
    "init": "no init containers (git, artifacts, connections): the run starts in your working directory",
    "sidecars": "no sidecar containers",
    "connections": "Polyaxon connections are not imported; use this platform's named connections",
    "volumes": "Kubernetes volume objects are not imported; use a preset's volumes",
}
ENV_MAP = {"nodeSelector": "node_selector", "tolerations": "tolerations", "affinity": "affinity"}
ENV_NO_EQUIVALENT = (
    "labels annotations serviceAccountName imagePullSecrets securityContext hostAliases hostNetwork hostPID "
    "dnsPolicy dnsConfig schedulerName priorityClassName priority restartPolicy nodeName"
).split()
CONTAINER_MAP = ("image", "command", "args", "env", "resources", "workingDir", "name")
CONTAINER_NO_EQUIVALENT = (
    "imagePullPolicy ports securityContext volumeMounts envFrom lifecycle livenessProbe readinessProbe "
    "startupProbe stdin tty terminationMessagePath"
).split()


@dataclass(frozen=True)
class Note:
    """One field of the report: `to` is what it became (None: no equivalent, `note` says why)."""

    field: str
    to: str | None
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"field": self.field, "to": self.to, "note": self.note}


class Refused(InvalidInput):
    """Fields refused by name, each with why and what is supported."""

    def __init__(self, where: str, problems: list[str], supported: str) -> None:
        super().__init__(f"{where}: " + "; ".join(problems), f"supported: {supported}")
        self.problems = problems


class Conv:
    """Collects the report and the refusals of one file."""

    def __init__(self, strict: bool) -> None:
        self.strict = strict  # submit: a field that changes what runs and has no equivalent is refused
        self.notes: list[Note] = []
        self.refused: list[str] = []

    def mapped(self, field: str, to: str, note: str = "") -> None:
        self.notes.append(Note(field, to, note))

    def dropped(self, field: str, why: str, *, changes_run: bool = True) -> None:
        if self.strict and changes_run:
            self.refused.append(f"{field} has no equivalent ({why})")
        else:
            self.notes.append(Note(field, None, why))

    def unknown(self, field: str, known: Any) -> None:
        self.refused.append(f"{field} is not a Polyaxon field here (known: {', '.join(sorted(known))})")

    def to_preset(self, field: str, why: str) -> None:
        """A field a run's own fields may not set (core/member_rules.py): on submit it belongs in a preset."""
        self.refused.append(
            f"{field}: {why}: move it into a preset (`gpuplat import polyaxon` converts a Polyaxon preset file; "
            "a platform admin adds it) and name the preset in presets"
        )


def _quantity(v: Any) -> Any:
    return v if isinstance(v, (int, float)) else str(v)


def _resources(c: Conv, res: Any, at: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if not isinstance(res, Mapping):
        c.refused.append(f"{at} must be a mapping with limits and requests")
        return out
    for part in res:
        if part not in ("limits", "requests"):
            c.unknown(f"{at}.{part}", ("limits", "requests"))
    limits, requests = res.get("limits") or {}, res.get("requests") or {}
    for key in dict.fromkeys([*requests, *limits]):
        field = f"{at}.{'requests' if key in requests else 'limits'}.{key}"
        value = requests.get(key, limits.get(key))
        name = {"cpu": "cpu", "memory": "memory", "nvidia.com/gpu": "gpu"}.get(key)
        if name is None:
            c.dropped(field, "only cpu, memory and nvidia.com/gpu are requested here")
            continue
        out[name] = int(str(value)) if name == "gpu" else _quantity(value)
        note = ""
        if key in requests and key in limits and str(requests[key]) != str(limits[key]):
            note = f"the limit {limits[key]} is not kept: a run gets what it requests"
        c.mapped(field, f"resources.{name}", note)
    return out


def _toleration(t: Mapping[str, Any]) -> dict[str, Any]:
    names = {"tolerationSeconds": "toleration_seconds"}
    return {names.get(k, k): v for k, v in t.items()}


def _environment(c: Conv, env: Any, at: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in (env or {}).items():
        if key in ENV_MAP and c.strict:
            # a submitted run: placement comes from the platform's presets, not the run's own fields
            c.to_preset(f"{at}.{key}", f"placement.{ENV_MAP[key]} comes from the platform's presets")
        elif key in ENV_MAP:
            if key == "tolerations":
                value = [_toleration(t) for t in value or []]
            out[ENV_MAP[key]] = value
            c.mapped(f"{at}.{key}", f"placement.{ENV_MAP[key]}")
        elif key in ENV_NO_EQUIVALENT:
            c.dropped(f"{at}.{key}", "the executor sets the pod's other fields")
        else:
            c.unknown(f"{at}.{key}", [*ENV_MAP, *ENV_NO_EQUIVALENT])
    return out


def _env_vars(c: Conv, env: Any, at: str) -> list[dict[str, Any]]:
    out = []
    for i, e in enumerate(env or []):
        if set(e) - {"name", "value"}:
            c.dropped(f"{at}[{i}].{sorted(set(e) - {'name', 'value'})[0]}", "env values are literals here")
            continue
        under = reserved_env(str(e.get("name")))
        if c.strict and under is not None:
            c.to_preset(f"{at}[{i}] {e['name']}", f"{under} is reserved for the platform")
            continue
        out.append({"name": e["name"], "value": None if e.get("value") is None else str(e["value"])})
    if out:
        c.mapped(at, "env")
    return out


def _termination(c: Conv, term: Any, at: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in (term or {}).items():
        if key == "timeout":
            out["timeout_seconds"] = int(value)
            c.mapped(f"{at}.timeout", "termination.timeout_seconds")
        elif key == "culling":
            if (value or {}).get("timeout") is not None:
                out["idle_seconds"] = int(value["timeout"])
                c.mapped(f"{at}.culling.timeout", "termination.idle_seconds", "sessions only: jobs ignore it")
        elif key in ("maxRetries", "ttl", "probe"):
            c.dropped(f"{at}.{key}", "no retries, TTL or probes: a run ends once", changes_run=key != "ttl")
        else:
            c.unknown(f"{at}.{key}", ("timeout", "culling", "maxRetries", "ttl"))
    return out


def _queue(c: Conv, q: Any, at: str) -> str:
    name = str(q)
    parts = name.split("/")  # Polyaxon's `agent.queue` stays whole: names here may hold dots
    if len(parts) == 2:
        c.mapped(at, "queue", f"the agent {parts[0]!r} is dropped: queues are the platform's")
        return parts[1]
    c.mapped(at, "queue")
    return name


def run_patch(c: Conv, run: Any, at: str, spec: dict[str, Any]) -> dict[str, Any]:
    """The spec fields of a run or runPatch (container, environment); returns the container's rest."""
    rest: dict[str, Any] = {}
    for key, value in (run or {}).items():
        if key == "kind":
            if value != "job":
                c.refused.append(
                    f"{at}.kind {value!r}: only kind job runs here (services, DAGs, distributed jobs do not)"
                )
        elif key == "container":
            for ck, cv in (value or {}).items():
                field = f"{at}.container.{ck}"
                if ck == "image":
                    spec["image"] = str(cv)
                    # on submit the policy checks it: allowed_images, or an image the presets name
                    c.mapped(field, "image", "an image the platform allows (allowed_images)" if c.strict else "")
                elif ck == "resources":
                    spec["resources"] = _resources(c, cv, field)
                elif ck == "env":
                    spec["env"] = _env_vars(c, cv, field)
                elif ck in CONTAINER_MAP:
                    rest[ck] = cv
                elif ck in CONTAINER_NO_EQUIVALENT:
                    c.dropped(field, "the executor builds the container")
                else:
                    c.unknown(field, [*CONTAINER_MAP, *CONTAINER_NO_EQUIVALENT])
        elif key == "environment":
            placement = _environment(c, value, f"{at}.environment")
            if placement:
                spec["placement"] = placement
        elif key in RUN_NO_EQUIVALENT:
            c.dropped(f"{at}.{key}", RUN_NO_EQUIVALENT[key])
        else:
            c.unknown(f"{at}.{key}", ["kind", "container", "environment", *RUN_NO_EQUIVALENT])
    return rest


def common_sections(c: Conv, data: Mapping[str, Any], at: str, handled: tuple[str, ...], spec: dict[str, Any]) -> None:
    """Top-level sections every operation, component and preset may have."""
    for key, value in data.items():
        field = f"{at}{key}"
        if key in handled:
            continue
        if key == "queue":
            spec["queue"] = _queue(c, value, field)
        elif key == "termination":
            term = _termination(c, value, field)
            if term:
                spec["termination"] = term
        elif key == "presets":
            spec["presets"] = [str(p) for p in value or []]
            c.mapped(field, "presets", "named presets must exist on this platform")
        elif key == "name":
            spec["name"] = str(value)
            c.mapped(field, "name")
        elif key in INFO_ONLY:
            if INFO_ONLY[key]:
                c.dropped(field, INFO_ONLY[key], changes_run=False)
        elif key in NO_EQUIVALENT:
            if NO_EQUIVALENT[key]:
                c.dropped(field, NO_EQUIVALENT[key], changes_run=key not in ("outputs",))
        else:
            c.unknown(field, [*handled, "queue", "termination", "presets", "name", *INFO_ONLY, *NO_EQUIVALENT])


def as_mapping(data: Any, what: str) -> Mapping[str, Any]:
    if not isinstance(data, Mapping):
        raise InvalidInput(f"{what}: a Polyaxon file is a YAML mapping", "kind: operation, component or a preset")
    return data


# ---- presets -----------------------------------------------------------------
def convert_preset(name: str, data: Any) -> tuple[dict[str, Any], list[Note]]:
    """A Polyaxon preset file as a PresetConfig dict (not yet validated) and its report."""
    data = as_mapping(data, name)
    c = Conv(strict=False)
    strategy = data.get("patchStrategy")
    if strategy is None:
        merge = "post_merge"
        c.mapped(
            "patchStrategy", "merge", "absent: post_merge, Polyaxon's default in code (its overview page says replace)"
        )
    elif strategy in STRATEGIES:
        merge = str(strategy)
        c.mapped("patchStrategy", "merge", _STRATEGY_NOTES[merge])
    else:
        merge = "post_merge"
        c.refused.append(f"patchStrategy {strategy!r} is not one of {', '.join(STRATEGIES)}")
    spec: dict[str, Any] = {}
    if "runPatch" in data:
        rest = run_patch(c, data["runPatch"], "runPatch", spec)
        for key in rest:
            c.dropped(f"runPatch.container.{key}", "a preset sets no command, args or working directory")
    for ref in ("component", "pathRef", "hubRef", "urlRef", "dagRef", "matrix", "params"):
        if ref in data:
            c.dropped(ref, "a preset holds no runtime: it patches the operations that use it")
    common_sections(c, data, "", ("patchStrategy", "runPatch", "component", "pathRef", "matrix", "params"), spec)
    if c.refused:
        raise Refused(f"preset {name}", c.refused, SUPPORTED)
    spec.pop("name", None)
    if spec.pop("presets", None) is not None:
        c.notes[:] = [n for n in c.notes if n.field != "presets"]
        c.dropped("presets", "a preset cannot apply other presets here: list them on the run", changes_run=False)
    if data.get("kind") not in (None, "operation", "preset"):
        raise Refused(f"preset {name}", [f"kind {data.get('kind')!r}: a preset is an operation"], SUPPORTED)
    return {"name": name, **spec, "merge": merge}, c.notes


_STRATEGY_NOTES = {
    "post_merge": "same name; lists merge by key here (env by name, tolerations by key+effect), by whole item there",
    "pre_merge": "same name; lists merge by key here, by whole item there",
    "isnull": "same name and meaning: set only what is absent",
    "replace": "replaces each field it sets (resources, placement) whole; Polyaxon recurses into environment",
}
SUPPORTED = (
    "queue, presets, name, termination.timeout, runPatch.container.{image, resources, env}, "
    "runPatch.environment.{nodeSelector, tolerations, affinity}, patchStrategy (replace|isnull|post_merge|pre_merge); "
    "an operation adds params, matrix, component/pathRef, run.kind job, container.{command, args, workingDir}, "
    "and takes its placement and reserved env names from presets"
)


def report_text(notes: list[Note]) -> str:
    width = max((len(n.field) for n in notes), default=5)
    lines = []
    for n in notes:
        to = n.to if n.to is not None else "(no equivalent)"
        lines.append(f"{n.field.ljust(width)}  -> {to}" + (f"  # {n.note}" if n.note else ""))
    return "\n".join(lines)
