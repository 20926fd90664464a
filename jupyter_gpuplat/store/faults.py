"""Database faults that pass: a locked SQLite file, a full disk, PostgreSQL down or restarting.

They surface as `StoreUnavailable` (a 503 with a message safe to show a user), never as a
driver exception deep in a handler; the engine keeps what it could not write and retries.
Anything else the driver raises (a constraint, a bad statement) stays a bug and is not caught.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from sqlalchemy import Engine, event

from ..core.errors import Unavailable

# sqlite3.OperationalError texts that mean "not now" rather than "never".
_SQLITE_PASSING = ("locked", "busy", "disk is full", "database or disk is full", "disk i/o error", "unable to open")


class StoreUnavailable(Unavailable):
    code = "StoreUnavailable"


def passing_fault(exc: BaseException, is_disconnect: bool = False) -> str | None:
    """What is wrong, in a few words, when `exc` is a database fault that may clear by itself."""
    if is_disconnect:
        return f"the database connection was lost ({_first_line(exc)})"
    if isinstance(exc, sqlite3.OperationalError):
        text = str(exc).lower()
        if any(p in text for p in _SQLITE_PASSING):
            return f"the database is unavailable ({exc})"
        return None
    try:  # PostgreSQL: connection refused, server shutting down, too many clients
        import psycopg
    except ImportError:  # pragma: no cover - the postgres extra is not installed
        return None
    if isinstance(exc, psycopg.OperationalError):
        return f"the database is unavailable ({_first_line(exc)})"
    return None


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def translate_faults(engine: Engine) -> None:
    """Raise `StoreUnavailable` in place of the driver's error for passing faults."""

    @event.listens_for(engine, "handle_error")
    def _handle(ctx: Any) -> None:
        what = passing_fault(ctx.original_exception, bool(ctx.is_disconnect))
        if what is not None:
            raise StoreUnavailable(
                f"the platform cannot save or read its state right now: {what}",
                "nothing was changed; retry in a few seconds",
            ) from ctx.original_exception
