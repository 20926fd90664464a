"""Map domain errors to HTTP responses, in one place."""

from __future__ import annotations

import json
from typing import Any

from pydantic import ValidationError

from ..core.config import validation_messages
from ..core.errors import GpuPlatError, InvalidInput, Unprocessable
from ..core.spec import NOT_IMPLEMENTED


def parse_json_body(raw: bytes, model: Any | None = None, *, max_bytes: int = 1_000_000) -> Any:
    """Decode a request body, refusing malformed or oversized JSON with a clear message."""
    if len(raw) > max_bytes:
        raise InvalidInput(f"request body is {len(raw)} bytes; at most {max_bytes} allowed")
    if not raw.strip():
        raise InvalidInput("request body is empty", "send a JSON object")
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise InvalidInput(f"malformed JSON: {exc}", "send a JSON object") from None
    if model is None:
        return data
    if not isinstance(data, dict):
        raise InvalidInput("request body must be a JSON object", "send a JSON object")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise from_validation(exc, model) from None


def from_validation(exc: ValidationError, model: Any) -> GpuPlatError:
    msgs = validation_messages(exc)
    fields = ", ".join(model.model_fields)
    if any(e["type"] == NOT_IMPLEMENTED for e in exc.errors()):
        # well-formed, but asks for what this release does not do: refused, never ignored
        return Unprocessable("invalid request: " + "; ".join(msgs), "remove the fields named", code="NotImplemented")
    return InvalidInput("invalid request: " + "; ".join(msgs), f"fields allowed: {fields}", code="InvalidRequest")


def error_body(err: GpuPlatError) -> dict[str, Any]:
    return {"error": err.to_dict()}
