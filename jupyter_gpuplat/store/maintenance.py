"""What `gpuplat db upgrade` and `gpuplat db copy` do to a database (the command itself is cli/db.py).

Start-up migrates too (every server runs `migrate` under the same lock); `upgrade` lets a
platform team migrate before rolling out a new version, with the servers still down. Both say
what is missing (`Missing`: no retry helps) or what failed (`Failed`) in one line, with no
SQLAlchemy type leaving the store.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from jupyter_core.paths import jupyter_data_dir
from sqlalchemy import inspect
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError

from ..core.errors import GpuPlatError
from .copy import CopyError, copy_database, safe_url
from .migrations import LATEST, migrate
from .store import make_engine
from .urls import sqlite_path

T = TypeVar("T")


def default_db_url() -> str:
    """The embedded server's default store (GpuPlat.db_url), unless GPUPLAT_DB_URL names another."""
    return os.environ.get("GPUPLAT_DB_URL") or "sqlite:///" + os.path.join(jupyter_data_dir(), "gpuplat", "gpuplat.db")


STORE_TABLES = ("alembic_version", "gpuplat_meta")  # one of them marks a gpuplat store (gpuplat_meta: before Alembic)


class Missing(Exception):
    """What is not there, with how to make it: one line for the user, no traceback."""


class Failed(Exception):
    """The database refused or broke off: one line (and the hint, if the store has one)."""


def _sqlite_path(url: str) -> Path | None:
    path = sqlite_path(url)
    return Path(path) if path else None


def check_sqlite_directory(url: str) -> None:
    """The SQLite file's directory exists or can be made (make_engine makes it); else say which and why."""
    path = _sqlite_path(url)
    if path is None:
        return
    parent = path.parent
    for up in (parent, *parent.parents):
        if up.exists():
            if not up.is_dir():
                raise Missing(f"the directory {parent} of the SQLite file does not exist, and cannot: {up} is a file")
            if not os.access(up, os.W_OK | os.X_OK):
                what = "cannot be created" if up != parent else "is not writable"
                raise Missing(
                    f"the directory {parent} of the SQLite file {what} ({up} is not writable by this user): "
                    f"create it, writable by the server's account (mkdir -p {parent})"
                )
            return


def _missing_database(url: str, exc: BaseException) -> Missing | None:
    """A PostgreSQL database that does not exist, named, with how to create it; None for anything else."""
    cause: BaseException | None = exc
    while cause is not None:
        found = re.search(r'database "([^"]+)" does not exist', str(cause))
        if found:
            u = make_url(url)
            where = " ".join(f"{flag} {v}" for flag, v in (("-h", u.host), ("-p", u.port), ("-U", u.username)) if v)
            return Missing(
                f"the database {found.group(1)!r} does not exist on {u.host or 'localhost'}:{u.port or 5432}: "
                f"create it (createdb {where} {found.group(1)}, or CREATE DATABASE as a role with CREATEDB), "
                "then run this again"
            )
        cause = cause.__cause__ or cause.__context__
    return None


def check_source(url: str) -> None:
    """The copy's source exists and is a gpuplat store, checked before anything touches the target."""
    path = _sqlite_path(url)
    if path is not None and not path.is_file():
        raise Missing(f"the source {safe_url(url)} does not exist: there is no file {path}")
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            names = set(inspect(conn).get_table_names())
    finally:
        engine.dispose()
    if not names.intersection(STORE_TABLES):
        raise Missing(f"the source {safe_url(url)} is not a gpuplat store: it has no {' or '.join(STORE_TABLES)} table")


def upgrade(url: str) -> str:
    """Migrate `url` to this package's schema; what happened, in one line."""

    def run() -> str:
        check_sqlite_directory(url)
        engine = make_engine(url)
        try:
            found = migrate(engine)
        finally:
            engine.dispose()
        if found == LATEST:
            return f"{safe_url(url)}: already at schema version {LATEST}"
        return f"{safe_url(url)}: schema version {LATEST} (was {found or 'empty'})"

    return _guarded(url, run)


def copy(source: str, target: str, batch_rows: int) -> str:
    """Copy an embedded store into an empty database, every id kept; checked before the target is touched."""
    _guarded(source, lambda: check_source(source))

    def run() -> str:
        check_sqlite_directory(target)
        copy_database(source, target, batch_rows=batch_rows)
        return "copied: the counts match"

    return _guarded(target, run)


def _guarded(url: str, run: Callable[[], T]) -> T:
    """`run()`, its failures said in one line; a missing PostgreSQL database (said only once we
    connect) is named with how to create it."""
    try:
        return run()
    except (GpuPlatError, CopyError, RuntimeError, SQLAlchemyError) as exc:
        missing = _missing_database(url, exc)
        if missing is not None:
            raise missing from None
        if isinstance(exc, GpuPlatError):  # StoreUnavailable: unreachable, or locked by a server still writing
            raise Failed(exc.message + (f"\n  hint: {exc.hint}" if exc.hint else "")) from None
        raise Failed(str(exc)) from None
