"""The OpenAPI document, generated from the pydantic schemas and the route table."""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from pydantic import BaseModel

from ..core.config import PlatformConfig, PresetConfig, ProjectConfig, QueueConfig
from ..core.request import RunRequest

_BODIES: dict[tuple[str, str], type[BaseModel]] = {
    ("runs", "post"): RunRequest,
    ("runs/preview", "post"): RunRequest,
    ("queues/{name}", "put"): QueueConfig,
    ("presets/{name}", "put"): PresetConfig,
    ("projects/{name}", "put"): ProjectConfig,
    ("config", "put"): PlatformConfig,
}
_ERROR = {
    "type": "object",
    "properties": {
        "error": {
            "type": "object",
            "properties": {"code": {"type": "string"}, "message": {"type": "string"}, "hint": {"type": "string"}},
            "required": ["code", "message", "hint"],
        }
    },
}


def _path(pattern: str) -> str:
    return re.sub(r"\(\?P<(\w+)>[^)]*\)", r"{\1}", pattern).replace("(?P<action>pause|resume)", "{action}")


@lru_cache(maxsize=8)
def openapi_document(base_url: str) -> dict[str, Any]:
    from .handlers import API, ROUTES

    components: dict[str, Any] = {"Error": _ERROR}
    for model in set(_BODIES.values()):
        schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
        for name, sub in schema.pop("$defs", {}).items():
            components[name] = sub
        components[model.__name__] = schema
    paths: dict[str, Any] = {}
    for pattern, handler, summary in ROUTES:
        path = _path(pattern)
        ops: dict[str, Any] = {}
        for method in ("get", "post", "put", "delete"):
            if getattr(handler, method).__qualname__.split(".")[0] != handler.__name__:
                continue
            op: dict[str, Any] = {
                "summary": summary,
                "parameters": [
                    {"name": p, "in": "path", "required": True, "schema": {"type": "string"}}
                    for p in re.findall(r"{(\w+)}", path)
                ],
                "responses": {
                    "200": {"description": "OK"},
                    "4XX": {
                        "description": "Refused: what was wrong and what is allowed",
                        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
                    },
                },
            }
            body = _BODIES.get((path, method))
            if body is not None:
                op["requestBody"] = {
                    "required": True,
                    "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{body.__name__}"}}},
                }
            if path in ("events",) or path.endswith("/logs"):
                op["responses"]["200"] = {"description": "Server-Sent Events", "content": {"text/event-stream": {}}}
            ops[method] = op
        paths[f"/{API}/{path}"] = ops
    return {
        "openapi": "3.1.0",
        "info": {"title": "jupyter-gpuplat", "version": "1"},
        "servers": [{"url": base_url.rstrip("/") or "/"}],
        "paths": paths,
        "components": {"schemas": components},
    }
