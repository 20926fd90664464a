"""The OpenAPI document, generated from the pydantic models and a route table given to it.

Request bodies come from the core's request and config models, responses from
`service/schemas/models.py`; query parameters are listed here with the bounds the handlers
enforce. The route table is an argument (service/routes.py owns it), so this module
imports no handler. `labextension/openapi.json` is this document for base URL `/`,
and the sidebar's TypeScript types are generated from it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import JsonSchemaMode, models_json_schema

from ..core.config import PlatformConfig, PresetConfig, ProjectConfig, QueueConfig
from ..core.request import RunRequest
from ..core.status import Phase, Status
from .schemas import models as m

API = "gpuplat/api"
REF = "#/components/schemas/{model}"

# (path, method) -> request body model
_BODIES: dict[tuple[str, str], type[BaseModel]] = {
    ("runs", "post"): RunRequest,
    ("runs/preview", "post"): RunRequest,
    ("queues/{name}", "put"): QueueConfig,
    ("presets/{name}", "put"): PresetConfig,
    ("projects/{name}", "put"): ProjectConfig,
    ("config", "put"): PlatformConfig,
    ("runs/{run_id}/kernel", "post"): m.KernelReport,
    ("runs/{run_id}", "patch"): m.SweepChange,
}

# (path, method) -> (status, response model); absent: a stream or a file (see _RAW)
_RESPONSES: dict[tuple[str, str], tuple[int, type[BaseModel]]] = {
    ("whoami", "get"): (200, m.WhoAmI),
    ("capacity", "get"): (200, m.Capacity),
    ("queues", "get"): (200, m.QueuesPage),
    ("queues/{name}/{action}", "post"): (200, m.QueueWritten),
    ("queues/{name}", "put"): (200, m.QueueWritten),
    ("queues/{name}", "delete"): (200, m.Deleted),
    ("projects", "get"): (200, m.ProjectsPage),
    ("projects/{name}", "put"): (200, m.ProjectWritten),
    ("projects/{name}", "delete"): (200, m.Deleted),
    ("presets", "get"): (200, m.PresetsPage),
    ("presets/{name}", "put"): (200, m.PresetWritten),
    ("presets/{name}", "delete"): (200, m.Deleted),
    ("config", "get"): (200, m.ConfigView),
    ("config", "put"): (200, m.ConfigView),
    ("runs/preview", "post"): (200, m.Preview),
    ("runs", "post"): (201, m.RunSummary),
    ("runs", "get"): (200, m.RunsPage),
    ("runs/{run_id}", "get"): (200, m.RunDetail),
    ("runs/{run_id}", "patch"): (200, m.RunDetail),
    ("runs/{run_id}/explain", "get"): (200, m.Explain),
    ("runs/{run_id}/stop", "post"): (200, m.RunDetail),
    ("runs/{run_id}/keepalive", "post"): (200, m.RunSummary),
    ("runs/{run_id}/compare", "get"): (200, m.SweepCompare),
    ("runs/{run_id}/kernel", "get"): (200, m.KernelConnection),
    ("runs/{run_id}/kernel", "post"): (200, m.RunSummary),
    ("sessions", "get"): (200, m.SessionsPage),
    ("runs/{run_id}/outputs", "get"): (200, m.Outputs),
    ("runs/{run_id}/metrics", "get"): (200, m.Metrics),
    ("compare", "get"): (200, m.Compare),
    ("openapi.json", "get"): (200, m.OpenAPIDocument),
}

_SSE = {"text/event-stream": {"schema": {"type": "string"}}}
_RAW: dict[tuple[str, str], dict[str, Any]] = {
    ("runs/{run_id}/logs", "get"): {
        "description": "Server-Sent Events: one `data:` per log line (id = byte offset after it), then `event: end`"
        " with {status, offset}; `format=text`: the plain log from `offset`. A resume position (`offset` or"
        " Last-Event-ID) past the end of the log is answered 416 (code OffsetPastEnd) before anything is sent",
        "content": {
            "text/event-stream": {**_SSE["text/event-stream"], "x-end-event": {"$ref": "#/components/schemas/LogEnd"}},
            "text/plain": {"schema": {"type": "string"}},
        },
    },
    ("events", "get"): {
        "description": "Server-Sent Events: `event: status` per status change of a visible run (id = event id),"
        " `event: ready` once caught up, comments as keep-alives",
        "content": {
            "text/event-stream": {
                **_SSE["text/event-stream"],
                "x-status-event": {"$ref": "#/components/schemas/StatusEvent"},
            }
        },
    },
    ("runs/{run_id}/outputs/{path}", "get"): {
        "description": "A file: its bytes, always application/octet-stream (Content-Disposition: attachment), "
        "so a run's HTML or SVG never runs in the Jupyter origin. A directory: the listing below it, as for outputs.",
        "content": {
            "application/octet-stream": {"schema": {"type": "string", "format": "binary"}},
            "application/json": {"schema": {"$ref": "#/components/schemas/Outputs"}},
        },
    },
}

_STATUSES = [s.value for s in Status]


def _q(name: str, schema: dict[str, Any], description: str, *, required: bool = False, csv: bool = False) -> dict:
    p: dict[str, Any] = {"name": name, "in": "query", "required": required, "schema": schema}
    p["description"] = description
    if csv:  # a comma-separated list; the parameter may also repeat
        p["style"], p["explode"] = "form", False
    return p


def _int(lo: int, hi: int, default: int | None = None) -> dict[str, Any]:
    s: dict[str, Any] = {"type": "integer", "minimum": lo, "maximum": hi}
    if default is not None:
        s["default"] = default
    return s


_STR = {"type": "string"}
_BOOL_TEXT = {"type": "string", "enum": ["true", "false"]}
_NAMES = {"type": "array", "items": {"type": "string", "minLength": 1}}

_QUERY: dict[tuple[str, str], list[dict[str, Any]]] = {
    ("runs", "get"): [
        _q("project", _STR, "Only this project's runs (one of yours)"),
        _q("status", {"type": "array", "items": {"type": "string", "enum": _STATUSES}}, "These statuses", csv=True),
        _q(
            "phase",
            {"type": "array", "items": {"type": "string", "enum": [p.value for p in Phase]}},
            "Runs in these phases (a run's `phase`); with `status`, runs that match both",
            csv=True,
        ),
        _q("queue", _STR, "Only this queue's runs"),
        _q("user", _STR, "Only this user's runs"),
        _q("q", _STR, "Name contains"),
        _q("kind", {"type": "string", "enum": ["job", "session", "sweep"]}, "Only runs of this kind"),
        _q("parent", _STR, "Only this sweep's children (without it, sweeps' children are left out: one row per sweep)"),
        _q("notebook", _STR, "Only the GPU sessions of this notebook (path relative to the root), ended ones too"),
        _q("before", _int(0, 2**62), "Runs older than this seq (next_before of the previous page)"),
        _q("limit", _int(1, 1000, 100), "Page size"),
    ],
    ("presets", "get"): [_q("project", _STR, "Presets usable in this project")],
    ("runs/{run_id}/compare", "get"): [
        _q("metric", _STR, "Judge the children by this metric instead of the objective"),
        _q("top", _int(0, 50, 5), "How many of the best children's curves to send"),
        _q("max_points", _int(4, 100_000, 500), "Points per curve after downsampling (extremes kept)"),
    ],
    ("sessions", "get"): [_q("notebook", _STR, "Only the sessions of this notebook (path relative to the root)")],
    ("config", "put"): [_q("dry_run", {**_BOOL_TEXT, "default": "false"}, "true: validate and answer, apply nothing")],
    ("runs/{run_id}/logs", "get"): [
        _q("follow", {**_BOOL_TEXT, "default": "true"}, "false: send what exists and end"),
        _q(
            "offset",
            _int(0, 2**63 - 1, 0),
            "Byte offset to resume from (or the Last-Event-ID header); past the log's end: 416",
        ),
        _q("format", {"type": "string", "enum": ["sse", "text"], "default": "sse"}, "text: the plain log file"),
    ],
    ("events", "get"): [
        _q(
            "since",
            {"type": "string", "pattern": "^[0-9]{0,19}$"},
            "Event id to resume after (or Last-Event-ID): a decimal in 0..2**63-1",
        ),
        _q("limit", _int(0, 10**9, 0), "End after this many events (0: never)"),
        _q("heartbeat", _int(1, 300, 15), "Seconds between keep-alive comments"),
    ],
    ("runs/{run_id}/metrics", "get"): [
        _q("names", _NAMES, "Only these metrics", csv=True),
        _q("max_points", _int(4, 1_000_000, 2000), "Points per curve after downsampling (extremes kept)"),
    ],
    ("compare", "get"): [
        _q("runs", _NAMES, "The runs to compare", required=True, csv=True),
        _q("metrics", _NAMES, "Only these metrics", csv=True),
        _q("max_points", _int(4, 100_000, 500), "Points per curve after downsampling (extremes kept)"),
    ],
}

# What each path parameter's route pattern accepts.
_PATH_PARAMS: dict[str, dict[str, Any]] = {
    "run_id": {"type": "string", "pattern": "^[A-Za-z0-9_-]{1,64}$"},
    "name": {"type": "string", "pattern": "^[^/]{1,200}$"},
    "action": {"type": "string", "enum": ["pause", "resume"]},
    "path": {"type": "string", "pattern": "^.+$"},
}


def openapi_path(pattern: str) -> str:
    """A tornado route pattern as an OpenAPI path template: `(?P<run_id>...)` -> `{run_id}`."""
    out, i = [], 0
    while i < len(pattern):
        if pattern.startswith("(?P<", i):
            end = pattern.index(">", i)
            out.append("{" + pattern[i + 4 : end] + "}")
            depth, i = 1, end + 1
            while depth:  # skip the group's regex, nested parentheses included
                depth += {"(": 1, ")": -1}.get(pattern[i], 0)
                i += 1
        else:
            out.append(pattern[i])
            i += 1
    return "".join(out)


def _schemas() -> dict[str, Any]:
    answers: list[type[BaseModel]] = [r for _, r in _RESPONSES.values()] + [m.Error, *m.STREAM_MODELS]
    pairs: list[tuple[type[BaseModel], JsonSchemaMode]] = [(b, "validation") for b in dict.fromkeys(_BODIES.values())]
    pairs += [(r, "serialization") for r in dict.fromkeys(answers)]
    keys, top = models_json_schema(pairs, ref_template=REF)
    return {"keys": keys, "defs": top.get("$defs", {})}


def _ref(keys: dict[Any, Any], model: type[BaseModel], mode: str) -> dict[str, Any]:
    return dict(keys[(model, mode)])


def _operation(path: str, method: str, summary: str, keys: dict[Any, Any]) -> dict[str, Any]:
    error = {"application/json": {"schema": _ref(keys, m.Error, "serialization")}}
    op: dict[str, Any] = {
        "summary": summary,
        "operationId": f"{method}_{re.sub(r'[^A-Za-z0-9]+', '_', path).strip('_')}",
        "parameters": [
            {"name": p, "in": "path", "required": True, "schema": _PATH_PARAMS[p]} for p in re.findall(r"{(\w+)}", path)
        ]
        + _QUERY.get((path, method), []),
        "responses": {},
    }
    if (path, method) in _RESPONSES:
        code, model = _RESPONSES[(path, method)]
        content = {"application/json": {"schema": _ref(keys, model, "serialization")}}
        op["responses"][str(code)] = {"description": model.__doc__.strip().splitlines()[0] if model.__doc__ else "OK"}
        op["responses"][str(code)]["content"] = content
    else:
        op["responses"]["200"] = _RAW[(path, method)]
    op["responses"]["4XX"] = {"description": "Refused: what was wrong and what is allowed", "content": error}
    body = _BODIES.get((path, method))
    if body is not None:
        op["requestBody"] = {
            "required": True,
            "content": {"application/json": {"schema": _ref(keys, body, "validation")}},
        }
    return op


@lru_cache(maxsize=8)
def _document(base_url: str, routes: tuple[tuple[str, type, str], ...]) -> dict[str, Any]:
    schemas = _schemas()
    keys = schemas["keys"]
    paths: dict[str, Any] = {}
    for pattern, handler, summary in routes:
        path = openapi_path(pattern)
        ops: dict[str, Any] = {}
        for method in ("get", "post", "put", "patch", "delete"):
            if getattr(handler, method).__qualname__.split(".")[0] != handler.__name__:
                continue  # tornado's default: 405
            ops[method] = _operation(path, method, summary, keys)
        paths[f"/{API}/{path}"] = ops
    return {
        "openapi": "3.1.0",
        "info": {"title": "jupyter-gpuplat", "version": "1"},
        "servers": [{"url": base_url.rstrip("/") or "/"}],
        "paths": paths,
        "components": {"schemas": schemas["defs"]},
    }


def openapi_document(base_url: str, routes: Sequence[tuple[str, type, str]]) -> dict[str, Any]:
    """The document for the given route table (pattern, handler class, summary) at `base_url`."""
    return _document(base_url, tuple(routes))
