"""Query arguments and stream positions, parsed strictly: a clear 400 naming the argument, never a 500."""

from __future__ import annotations

import re

from tornado import web

from ..core.errors import InvalidInput

MAX_STREAM_POSITION = 2**63 - 1
_DECIMAL = re.compile(r"[0-9]{1,19}")  # ASCII only: str.isdigit and int() also take '²', '٣' and "1_0"


def decimal(raw: str, name: str, lo: int, hi: int, hint: str = "") -> int:
    """`raw` as an ASCII decimal integer in lo..hi, else InvalidInput naming `name` and the range."""
    value = int(raw) if _DECIMAL.fullmatch(raw) else None
    if value is None or not lo <= value <= hi:
        raise InvalidInput(f"{name} must be an integer between {lo} and {hi}, got {raw[:40]!r}", hint)
    return value


def stream_position(raw: str, name: str) -> int:
    """A resume position (log offset, event id) in 0..2**63-1."""
    return decimal(raw, name, 0, MAX_STREAM_POSITION, "resume from an id the stream sent")


def int_arg(h: web.RequestHandler, name: str, default: int, lo: int, hi: int) -> int:
    raw = h.get_argument(name, None)
    return default if raw is None else decimal(raw, name, lo, hi)


def choice(h: web.RequestHandler, name: str, default: str, allowed: tuple[str, ...]) -> str:
    value = h.get_argument(name, default)
    if value not in allowed:
        raise InvalidInput(f"{name} must be one of {', '.join(allowed)}, got {value[:40]!r}")
    return value


def names_arg(h: web.RequestHandler, name: str) -> list[str] | None:
    """A comma-separated list, also given as repeated arguments; None when empty."""
    names = [n for arg in h.get_arguments(name) for n in arg.split(",") if n]
    return names or None
