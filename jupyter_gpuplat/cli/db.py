"""`gpuplat db upgrade` and `gpuplat db copy`: the store's schema and data, from the command line.

What each does to the database is store/maintenance.py; here the arguments, the one-line
answers and the exit codes (2: something is missing, no retry helps; 1: it failed).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from ..store.maintenance import Failed, Missing, copy, default_db_url, upgrade

EXIT_MISSING = 2  # the database (or the source) is not there: no retry helps, the command changed nothing


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


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.action == "upgrade":
            print(upgrade(args.db_url or default_db_url()))
        else:
            print(copy(args.source, args.target, args.batch))
        return 0
    except Missing as exc:
        print(f"gpuplat db: {exc}", file=sys.stderr)
        return EXIT_MISSING
    except Failed as exc:
        print(f"gpuplat db: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
