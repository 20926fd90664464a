"""Map domain errors to HTTP responses, in one place."""

from __future__ import annotations

import json
import math
import re
from typing import Any

from pydantic import ValidationError

from ..core.config import format_loc, validation_messages
from ..core.errors import GpuPlatError, InvalidInput, Unprocessable
from ..core.spec import NOT_IMPLEMENTED

MAX_BODY_BYTES = 1_000_000
# Real bodies nest a few levels (config -> queues -> [i] -> quota); the parser recurses per level.
MAX_JSON_DEPTH = 64
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')
_BRACKET = re.compile(r"[\[\]{}]")
_JSON_HINT = "send a JSON object"


class RangeNotSatisfiable(GpuPlatError):
    """A resume position past the end of what exists (a log offset)."""

    status = 416
    code = "OffsetPastEnd"


def parse_json_body(raw: bytes, model: Any | None = None, *, max_bytes: int = MAX_BODY_BYTES) -> Any:
    """Decode a request body, refusing malformed, oversized, too deeply nested or non-finite JSON."""
    if len(raw) > max_bytes:
        raise InvalidInput(f"request body is {len(raw)} bytes; at most {max_bytes} allowed")
    try:
        text = raw.decode("utf-8-sig")  # a leading BOM is ignored, as json.loads(bytes) did
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"request body is not UTF-8: {exc}", _JSON_HINT) from None
    if not text.strip():
        raise InvalidInput("request body is empty", _JSON_HINT)
    depth = json_depth(text)
    if depth > MAX_JSON_DEPTH:
        raise InvalidInput(
            f"request body is nested more than {MAX_JSON_DEPTH} levels deep",
            f"send a JSON object whose arrays and objects nest at most {MAX_JSON_DEPTH} levels deep",
        )
    unusual: list[bool] = []

    def number(s: str) -> float:
        f = float(s)
        if not math.isfinite(f):  # 1e400: beyond a double
            unusual.append(True)
        return f

    def constant(s: str) -> float:  # NaN, Infinity, -Infinity: Python's extension, not JSON
        unusual.append(True)
        return float(s)

    try:
        data = json.loads(text, parse_float=number, parse_constant=constant)
    except (ValueError, RecursionError) as exc:
        raise InvalidInput(f"malformed JSON: {exc}", _JSON_HINT) from None
    if unusual or "\\u0000" in text:  # a JSON string holds a NUL only as this escape
        _refuse_unstorable(data, ())
    if model is None:
        return data
    if not isinstance(data, dict):
        raise InvalidInput("request body must be a JSON object", _JSON_HINT)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise from_validation(exc, model) from None


def json_depth(text: str) -> int:
    """How deeply arrays and objects nest in `text`, brackets in strings aside; the scan stops past the limit."""
    if text.count("[") + text.count("{") <= MAX_JSON_DEPTH:
        return 0  # too few brackets to pass the limit: no scan
    depth = deepest = 0
    for bracket in _BRACKET.finditer(_STRING.sub("", text)):
        depth += 1 if bracket.group() in "[{" else -1
        deepest = max(deepest, depth)
        if deepest > MAX_JSON_DEPTH:
            break
    return deepest


def _refuse_unstorable(data: Any, loc: tuple[Any, ...]) -> None:
    """The first non-finite number or NUL-holding string, by its path (`params.lr: must be a finite number`).

    Neither can be stored and read back: SQLite refuses NaN in JSON, PostgreSQL a NUL, and a
    stored one fails every later read of the run or the config, not this request.
    """
    if isinstance(data, float) and not math.isfinite(data):
        raise InvalidInput(
            f"invalid request: {format_loc(loc)}: must be a finite number, got {data!r}",
            "NaN, Infinity and numbers beyond about 1.8e308 are not JSON numbers",
        )
    if isinstance(data, str) and "\x00" in data:
        raise InvalidInput(
            f"invalid request: {format_loc(loc)}: must not contain NUL bytes", "remove the NUL (\\u0000)"
        )
    if isinstance(data, dict):
        for key, value in data.items():
            if "\x00" in key:
                raise InvalidInput(
                    f"invalid request: a key in {format_loc(loc)} must not contain NUL bytes",
                    "remove the NUL (\\u0000)",
                )
            _refuse_unstorable(value, (*loc, key))
    elif isinstance(data, list):
        for i, value in enumerate(data):
            _refuse_unstorable(value, (*loc, i))


def from_validation(exc: ValidationError, model: Any) -> GpuPlatError:
    msgs = validation_messages(exc)
    fields = ", ".join(model.model_fields)
    if any(e["type"] == NOT_IMPLEMENTED for e in exc.errors()):
        # well-formed, but asks for what this release does not do: refused, never ignored
        return Unprocessable("invalid request: " + "; ".join(msgs), "remove the fields named", code="NotImplemented")
    hint = f"fields allowed: {fields}"
    if all(e["loc"] and e["loc"][0] == "matrix" for e in exc.errors()):
        hint = MATRIX_HINT  # the matrix's own vocabulary says more than the request's field list
    bounds = bound_hints(exc)
    if bounds and not any(e["type"] == "extra_forbidden" for e in exc.errors()):
        hint = "; ".join(bounds)  # a value out of range: the limit that refused it, not the list of fields
    return InvalidInput("invalid request: " + "; ".join(msgs), hint, code="InvalidRequest")


# pydantic's bound errors: the ctx key holding the limit, and how the hint says it
BOUNDS = {
    "less_than_equal": ("le", "at most"),
    "less_than": ("lt", "less than"),
    "greater_than_equal": ("ge", "at least"),
    "greater_than": ("gt", "more than"),
}


def bound_hints(exc: ValidationError) -> list[str]:
    """`resources.gpu: at most 1024 (asked 1000000)` for each value outside its field's bounds."""
    out = []
    for e in exc.errors():
        if e["type"] in BOUNDS and e.get("ctx"):
            key, words = BOUNDS[e["type"]]
            loc = tuple(p for p in e["loc"] if not (isinstance(p, str) and "function-" in p))
            out.append(f"{format_loc(loc)}: {words} {e['ctx'][key]} (asked {e['input']!r})")
    return out


MATRIX_HINT = (
    "matrix: kind grid|random|mapping|bayes; params as name: {values|range|linspace|choice} "
    "(random and bayes also uniform, loguniform); see docs/sweeps.md"
)


def error_body(err: GpuPlatError) -> dict[str, Any]:
    return {"error": err.to_dict()}
