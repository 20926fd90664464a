"""A Polyaxon operation or component with a job run as a RunRequest dict (pure: no I/O).

The shared tables and section converters are polyaxon.py's; see docs/polyaxon.md.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from .polyaxon import (
    DOMAINS,
    MATRIX_KINDS,
    SUPPORTED,
    TEMPLATE,
    Conv,
    Note,
    Refused,
    as_mapping,
    common_sections,
    run_patch,
)


def _inputs(c: Conv, inputs: Any, at: str) -> dict[str, Any]:
    out = {}
    for i, item in enumerate(inputs or []):
        if not isinstance(item, Mapping) or "name" not in item:
            c.refused.append(f"{at}[{i}] needs a name")
            continue
        if "value" in item and item["value"] is not None:
            out[str(item["name"])] = item["value"]
    if inputs:
        c.mapped(at, "params", "input defaults become params; type and isOptional are not checked here")
    return out


def _domain(c: Conv, name: str, p: Any, at: str) -> dict[str, Any] | None:
    kind = (p or {}).get("kind")
    value = (p or {}).get("value")
    if kind not in DOMAINS:
        c.refused.append(f"{at}.kind {kind!r} has no equivalent (supported: {', '.join(DOMAINS)})")
        return None
    if isinstance(value, str) and kind != "choice":
        value = [float(x) if "." in x or "e" in x.lower() else int(x) for x in value.split(":")]
    elif isinstance(value, Mapping):
        order = {"range": ("start", "stop", "step"), "linspace": ("start", "stop", "num"), "uniform": ("low", "high")}
        value = [value[k] for k in order.get(kind, ())]
    c.mapped(at, f"matrix.params.{name}.{DOMAINS[kind]}")
    if not isinstance(value, list):
        c.refused.append(f"{at}.value must be a list or 'a:b:c' (got {value!r})")
        return None
    return {DOMAINS[kind]: value}


def _matrix(c: Conv, m: Any, at: str) -> dict[str, Any]:
    kind = (m or {}).get("kind")
    if kind not in MATRIX_KINDS:
        c.refused.append(f"{at}.kind {kind!r} has no equivalent (supported: {', '.join(MATRIX_KINDS)})")
        return {}
    out: dict[str, Any] = {"kind": MATRIX_KINDS[kind]}
    c.mapped(f"{at}.kind", "matrix.kind")
    names = {"numRuns": "num_runs", "seed": "seed", "concurrency": "concurrency", "values": "values"}
    for key, value in m.items():
        if key in ("kind",):
            continue
        if key in names:
            out[names[key]] = value
            c.mapped(f"{at}.{key}", f"matrix.{names[key]}")
        elif key == "params":
            params = {n: _domain(c, n, p, f"{at}.params.{n}") for n, p in (value or {}).items()}
            out["params"] = {n: d for n, d in params.items() if d is not None}
        elif key == "metric":
            out["objective"] = {"metric": value["name"], "optimization": value.get("optimization", "maximize")}
            c.mapped(f"{at}.metric", "matrix.objective")
        elif key == "numInitialRuns":
            c.dropped(f"{at}.{key}", "the bayes search picks its own initial draws")
        elif key in ("earlyStopping", "maxIterations", "utilityFunction", "tuner", "eta", "resource", "resume"):
            c.dropped(f"{at}.{key}", "not imported: set early_stopping or num_runs on the sweep instead")
        else:
            c.unknown(f"{at}.{key}", [*names, "params", "metric", "earlyStopping", "maxIterations"])
    if kind == "bayes" and "num_runs" not in out and isinstance(m.get("maxIterations"), int):
        out["num_runs"] = m["maxIterations"]
    return out


def _substitute(
    c: Conv, words: list[str], at: str, values: Mapping[str, Any], later: set[str]
) -> tuple[list[str], bool]:
    """`{{ name }}` of a literal param is filled in now; of a matrix param, at run time (wrap=True)."""
    wrap = False
    out = []
    for w in words:
        for ref in TEMPLATE.findall(w):
            if ref in later:
                wrap = True
            elif ref not in values:
                c.refused.append(
                    f"{at}: {{{{ {ref} }}}} is not a param or input of this file (no Polyaxon globals here)"
                )
        out.append(TEMPLATE.sub(lambda m: _fill_now(m, values, later), w))
    return out, wrap


def _fill_now(m: re.Match[str], values: Mapping[str, Any], later: set[str]) -> str:
    name = m.group(1)
    return str(values[name]) if name in values and name not in later else m.group(0)


# The run-time filler for `{{ matrix param }}` in a sweep child's command (run/polyaxon_fill.py); the
# path is the old one, which stored sweeps and images with another version still run.
FILL = ["python", "-m", "jupyter_gpuplat.polyaxon", "fill", "--"]


def convert_operation(project: str, data: Any, component: Any = None) -> tuple[dict[str, Any], list[Note]]:
    """An operation (or component) with a job run as a RunRequest dict and its report.

    `component` is the file a `pathRef` names, loaded by the caller. Refuses, by name, fields
    Polyaxon does not define and fields with no equivalent that would change what runs.
    """
    data = as_mapping(data, "polyaxonfile")
    c = Conv(strict=True)
    kind = data.get("kind")
    if kind not in ("operation", "component"):
        raise Refused("polyaxonfile", [f"kind {kind!r}: give kind operation or component"], SUPPORTED)
    body: dict[str, Any] = {"project": project}
    comp: Mapping[str, Any] = data
    if kind == "operation":
        if "component" in data and "pathRef" in data:
            c.refused.append("give component or pathRef, not both")
        comp = data.get("component") or component or {}
        if "pathRef" in data:
            c.mapped("pathRef", "(read)", "the component file, relative to this file")
        if not comp:
            c.refused.append("an operation needs component or pathRef (hubRef, urlRef and dagRef have no equivalent)")
    spec: dict[str, Any] = {}
    run_rest: dict[str, Any] = {}
    values: dict[str, Any] = {}
    if comp is not data:
        common_sections(c, comp, "component.", ("run", "inputs", "kind"), spec)
    if "inputs" in comp:
        values.update(_inputs(c, comp["inputs"], ("component." if comp is not data else "") + "inputs"))
    run_rest = run_patch(c, comp.get("run"), ("component." if comp is not data else "") + "run", spec)
    op_spec: dict[str, Any] = {}
    if "runPatch" in data:
        patch_rest = run_patch(c, data["runPatch"], "runPatch", op_spec)
        run_rest.update(patch_rest)
        if data.get("patchStrategy") not in (None, "post_merge"):
            c.refused.append("patchStrategy on a submitted operation: only post_merge (the default) is supported")
    matrix = _matrix(c, data["matrix"], "matrix") if "matrix" in data else None
    for name, p in (data.get("params") or {}).items():
        if not isinstance(p, Mapping) or "value" not in p or set(p) - {"value", "contextOnly"}:
            c.refused.append(f"params.{name}: only literal {{value: ...}} params (no refs) are supported")
            continue
        values[name] = p["value"]
        c.mapped(f"params.{name}", f"params.{name}")
    handled = ("component", "pathRef", "runPatch", "matrix", "params", "patchStrategy", "run", "inputs")
    common_sections(c, data, "", handled, op_spec)
    for key in ("resources", "placement"):  # the operation's runPatch merges into the component's run
        if key in op_spec and key in spec:
            op_spec[key] = {**spec[key], **op_spec[key]}
    spec.update(op_spec)
    later = set((matrix or {}).get("params") or {}) | {k for v in (matrix or {}).get("values") or [] for k in v}
    cmd = run_rest.get("command")
    if cmd is None:
        c.refused.append("run.container.command is required: what the job runs")
    else:
        words = [cmd] if isinstance(cmd, str) else [str(x) for x in cmd]
        words += [str(x) for x in run_rest.get("args") or []]
        words, wrap = _substitute(c, words, "run.container.command/args", values, later)
        body["command"] = FILL + words if wrap else words
        c.mapped("run.container.command", "command")
        if run_rest.get("args"):
            c.mapped("run.container.args", "command", "appended to the command")
        if wrap:
            c.mapped("matrix.params", "command", "{{ param }} is filled in each child from its params at run time")
    wd = run_rest.get("workingDir")
    if wd is not None:
        if TEMPLATE.search(str(wd)):
            c.dropped(
                "run.container.workingDir",
                "Polyaxon globals; the run starts in the current directory",
                changes_run=False,
            )
        else:
            body["working_dir"] = str(wd)
            c.mapped("run.container.workingDir", "working_dir")
    if "name" in run_rest:
        c.dropped("run.container.name", "the executor names the container", changes_run=False)
    if c.refused:
        raise Refused("polyaxonfile", c.refused, SUPPORTED)
    body.update(spec)
    if values:
        body["params"] = {k: v for k, v in values.items() if k not in later}
        if not body["params"]:
            del body["params"]
    if matrix:
        body["matrix"] = matrix
    return body, c.notes
