"""`gpuplat db upgrade` and `gpuplat db copy`: the store's schema and data, from the command line.

Start-up migrates too (every server runs `migrate` under the same lock); `upgrade` lets a
platform team migrate before rolling out a new version, with the servers still down.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from jupyter_core.paths import jupyter_data_dir
from sqlalchemy.exc import SQLAlchemyError

from ..core.errors import GpuPlatError
from .copy import CopyError, copy_database, safe_url
from .migrations import LATEST, migrate
from .store import make_engine


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


def upgrade(url: str) -> int:
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
    try:
        if args.action == "upgrade":
            return upgrade(args.db_url or default_db_url())
        copy_database(args.source, args.target, batch_rows=args.batch)
        print("copied: the counts match")
        return 0
    except GpuPlatError as exc:  # StoreUnavailable: unreachable, or locked by a server still writing
        hint = f"\n  hint: {exc.hint}" if exc.hint else ""
        print(f"gpuplat db: {exc.message}{hint}", file=sys.stderr)
        return 1
    except (CopyError, RuntimeError, SQLAlchemyError) as exc:
        print(f"gpuplat db: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
