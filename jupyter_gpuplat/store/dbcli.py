"""`gpuplat db upgrade` and `gpuplat db copy`: the store's schema and data, from the command line.

Start-up migrates too (every server runs `migrate` under the same lock); `upgrade` lets a
platform team migrate before rolling out a new version, with the servers still down.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path

from jupyter_core.paths import jupyter_data_dir
from sqlalchemy import inspect
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError

from ..core.errors import GpuPlatError
from .copy import CopyError, copy_database, safe_url
from .migrations import LATEST, migrate
from .store import make_engine
from .urls import sqlite_path


def default_db_url() -> str:
    """The embedded server's default store (GpuPlat.db_url), unless GPUPLAT_DB_URL names another."""
    return os.environ.get("GPUPLAT_DB_URL") or "sqlite:///" + os.path.join(jupyter_data_dir(), "gpuplat", "gpuplat.db")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="gpuplat db", description="The platform's database: schema and copies.")
    sub = p.add_subparsers(dest="action", required=True)
    up = sub.add_parser("upgrade", help="migrate the database to this package's schema (under a lock)")
    up.add_argument("--db-url", help="SQLAlchemy URL (default: GPUPLAT_DB_URL or the embedded server's SQLite file)")
    cp = sub.add_parser("copy", help="copy an embedded store (SQLite) into an empty database, keeping every id")
    cp.add_argument("--from", dest="source", required=True, metavar="URL", help="the source, e.g. sqlite:///gpuplat.db")
    cp.add_argument("--to", dest="target", required=True, metavar="URL", help="the target, e.g. postgresql+psycopg://…")
    cp.add_argument("--batch", type=int, default=5_000, help="rows per insert (default 5000)")
    return p


EXIT_MISSING = 2  # the database (or the source) is not there: no retry helps, the command changed nothing
STORE_TABLES = ("alembic_version", "gpuplat_meta")  # one of them marks a gpuplat store (gpuplat_meta: before Alembic)


class Missing(Exception):
    """What is not there, with how to make it: one line for the user, no traceback."""


def _sqlite_path(url: str) -> Path | None:
    path = sqlite_path(url)
    return Path(path) if path else None


def _check_sqlite_directory(url: str) -> None:
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


def upgrade(url: str) -> int:
    _check_sqlite_directory(url)
    engine = make_engine(url)
    try:
        found = migrate(engine)
    finally:
        engine.dispose()
    if found == LATEST:
        print(f"{safe_url(url)}: already at schema version {LATEST}")
    else:
        print(f"{safe_url(url)}: schema version {LATEST} (was {found or 'empty'})")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    url = ""
    try:
        if args.action == "upgrade":
            url = args.db_url or default_db_url()
            return upgrade(url)
        url = args.source
        check_source(args.source)
        url = args.target
        _check_sqlite_directory(args.target)
        copy_database(args.source, args.target, batch_rows=args.batch)
        print("copied: the counts match")
        return 0
    except Missing as exc:
        print(f"gpuplat db: {exc}", file=sys.stderr)
        return EXIT_MISSING
    except (GpuPlatError, CopyError, RuntimeError, SQLAlchemyError) as exc:
        missing = _missing_database(url, exc)  # PostgreSQL says so only once we connect
        if missing is not None:
            print(f"gpuplat db: {missing}", file=sys.stderr)
            return EXIT_MISSING
        if isinstance(exc, GpuPlatError):  # StoreUnavailable: unreachable, or locked by a server still writing
            hint = f"\n  hint: {exc.hint}" if exc.hint else ""
            print(f"gpuplat db: {exc.message}{hint}", file=sys.stderr)
        else:
            print(f"gpuplat db: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
