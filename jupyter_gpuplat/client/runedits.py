"""Run requests built on the client side: params from `k=v` words, and a run submitted again with edits.

Pure functions over plain JSON, shared by the client (`Client.resubmit`), the CLI and the magics.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping
from typing import Any

from ..core.errors import InvalidInput

__all__ = ["ENTRY_FIELDS", "parse_params", "resubmit_body"]

# What a run executes: a request names exactly one of them.
ENTRY_FIELDS = ("command", "script", "code")


def parse_params(items: Iterable[str] | None) -> dict[str, Any]:
    """`k=v` pairs, as `%%gpu_submit --param` reads them: values read as JSON when they parse
    (numbers, true/false), else kept as text. A malformed item raises ValueError."""
    out: dict[str, Any] = {}
    for item in items or []:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise ValueError(f"--param expects key=value, got {item!r}")
        try:
            value = json.loads(raw)
        except ValueError:
            value = raw
        out[key] = value
    return out


def resubmit_body(run: Mapping[str, Any], edits: Mapping[str, Any]) -> dict[str, Any]:
    """A new request from a run's record (`GET runs/{id}`): the request as it was sent, then `edits`.

    The request, not the resolved spec: presets, project and queue as asked, so the project's
    defaults and the policy apply again. Edits replace fields (None removes one), except:
    `params`, `env` and `resources` merge key by key (a None value removes that key); `gpus=N`
    is `resources.gpu`; giving one of command/script/code drops the others.
    """
    request = run.get("request")
    if not isinstance(request, Mapping) or not request.get("project"):
        raise InvalidInput(
            f"run {run.get('id')} does not carry the request it was submitted with",
            "submit it anew with gpuplat submit (the server's run record has no `request`)",
            code="NoRequest",
        )
    body = copy.deepcopy(dict(request))
    edits = dict(edits)
    if edits.get("gpus") is not None:
        edits["resources"] = {**(edits.get("resources") or {}), "gpu": edits.pop("gpus")}
    edits.pop("gpus", None)
    if any(edits.get(f) is not None for f in ENTRY_FIELDS):
        for f in ENTRY_FIELDS:
            body.pop(f, None)
        if edits.get("command") is not None:
            body.pop("args", None)  # a command carries its own arguments
    if edits.get("params") is not None and "name" not in edits and body.get("name"):
        body["name"] = renamed(body["name"], body.get("params") or {}, _merged(body.get("params"), edits["params"]))
    for key, value in edits.items():
        if key in ("params", "resources") and value is not None:
            body[key] = _merged(body.get(key), value)
        elif key == "env" and value is not None:
            env = {e["name"]: e.get("value") for e in body.get("env") or []}
            body["env"] = [{"name": k, "value": v} for k, v in _merged(env, value).items()]
        elif value is None:
            body.pop(key, None)
        else:
            body[key] = list(value) if isinstance(value, tuple) else value
    return {k: v for k, v in body.items() if v not in ({}, [])}


def _merged(old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> dict[str, Any]:
    out = {**(old or {}), **new}
    return {k: v for k, v in out.items() if v is not None}


# A magic's run is named `train.ipynb · cell 3 · lr=0.1, k=2` (widgets/naming.py run_name): a resubmit
# with other params says the new ones. Kept in step with naming.params_text (which cannot be imported
# here: widgets import the client, which imports this module).
SEP = " · "


def _value(v: Any) -> str:
    if isinstance(v, str):
        return v
    if isinstance(v, float):
        return f"{v:.6g}"
    return json.dumps(v, separators=(",", ":"), default=str)


def params_text(params: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={_value(v)}" for k, v in params.items())


def renamed(name: str, old: Mapping[str, Any], new: Mapping[str, Any]) -> str:
    """`name` with its trailing params part (when it is exactly `old`'s) saying `new` instead."""
    suffix = SEP + params_text(old)
    if not old or not name.endswith(suffix):
        return name
    return name[: -len(suffix)] + (SEP + params_text(new) if new else "")
