"""Schema migrations: Alembic revisions (store/alembic/versions), applied under a lock at start-up.

Revision N (its id is N in four digits) moves the schema from version N-1 to N; never edit a
released revision, add the next one. Every start runs `migrate`, and so does `gpuplat db upgrade`:
all of it (creating the bookkeeping tables included) is one transaction holding a lock —
PostgreSQL's `pg_advisory_xact_lock`, SQLite's write lock (BEGIN IMMEDIATE) — so concurrent
first starts migrate once, one after the other, and a failed revision leaves nothing behind.

`gpuplat_meta.schema_version` is kept too: code from before Alembic reads it to refuse a
newer database, and databases from then (a version, no `alembic_version`) are stamped with
their revision before the upgrade.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic.util import CommandError
from sqlalchemy import Connection, Engine, select, text

from . import schema
from .faults import StoreUnavailable

SCRIPT_LOCATION = Path(__file__).with_name("alembic")
# A migration is a directory of revisions; tests append one holding extra (or broken) revisions.
Migration = str | Path
MIGRATIONS: list[Migration] = [SCRIPT_LOCATION / "versions"]
LATEST = 13  # the head revision of MIGRATIONS (tests check that they agree)
# pg_advisory_xact_lock key of migrations (and `gpuplat db copy`): fixed, distinct from the leader's.
MIGRATIONS_LOCK_KEY = 0x6770_7570_6C61_7401  # "gpuplat" + 1


def current_version(conn: Connection) -> int:
    row = conn.execute(select(schema.meta.c.value).where(schema.meta.c.key == "schema_version")).first()
    return int(row[0]) if row else 0


def alembic_config(locations: Sequence[Migration] = MIGRATIONS, conn: Connection | None = None) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(SCRIPT_LOCATION).replace("%", "%%"))
    cfg.set_main_option("path_separator", "os")
    cfg.set_main_option("version_path_separator", "os")  # its name before alembic 1.16
    cfg.set_main_option("version_locations", _join(locations))
    cfg.attributes["connection"] = conn
    return cfg


def _join(locations: Sequence[Migration]) -> str:
    return os.pathsep.join(str(p).replace("%", "%%") for p in locations)


def head_version(locations: Sequence[Migration] = MIGRATIONS) -> int:
    head = ScriptDirectory.from_config(alembic_config(locations)).get_current_head()
    return int(head) if head else 0


def lock(conn: Connection) -> None:
    """Serialize with every other migration (and copy) of this database until `conn` commits."""
    if conn.dialect.name == "postgresql":
        conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _signed(MIGRATIONS_LOCK_KEY)})
    # SQLite: the transaction already holds the write lock (BEGIN IMMEDIATE, see store._begin).


def _signed(key: int) -> int:
    return key - (1 << 64) if key >= 1 << 63 else key


# How long a start-up may wait for other processes' migrations of the same SQLite file.
MIGRATION_WAIT_SECONDS = 120.0


def migrate(engine: Engine, steps: Sequence[Migration] = MIGRATIONS, *, applied: list[str] | None = None) -> int:
    """Bring the database to the head of `steps`; returns the version found before.

    `applied` (if given) receives the id of each revision run, in order.
    """
    # SQLite's busy timeout bounds one wait for the write lock; several servers starting at once on
    # a loaded machine can queue behind each other's migrations for longer. Nothing was written by
    # a try that could not lock, so try again (each try itself waits the busy timeout) until the deadline.
    deadline = time.monotonic() + MIGRATION_WAIT_SECONDS
    while True:
        try:
            # "gpuplat_writes_after_reads" (store.WRITES_AFTER_READS): BEGIN IMMEDIATE on SQLite.
            with engine.execution_options(gpuplat_writes_after_reads=True).begin() as conn:
                lock(conn)  # before anything, creating gpuplat_meta included: that raced on PostgreSQL
                return _migrate(conn, steps, applied)
        except StoreUnavailable as exc:
            locked = engine.dialect.name == "sqlite" and "locked" in exc.message
            if not locked or time.monotonic() >= deadline:
                raise


def _migrate(conn: Connection, steps: Sequence[Migration], applied: list[str] | None) -> int:
    cfg = alembic_config(steps, conn)
    cfg.attributes["applied"] = applied
    script = ScriptDirectory.from_config(cfg)
    latest = int(script.get_current_head() or 0)
    schema.metadata.create_all(conn, tables=[schema.meta])
    recorded = current_version(conn)
    revision = MigrationContext.configure(conn).get_current_revision()
    found = int(revision) if revision and revision.isdigit() else recorded
    known = revision is None or _known(script, revision)
    if max(found, recorded) > latest or not known:
        raise RuntimeError(
            f"database schema version {max(found, recorded)} is newer than this jupyter-gpuplat ({latest}); "
            "upgrade the package"
        )
    if revision is None and found > 0:  # from before Alembic: its version says which revision it is at
        command.stamp(cfg, f"{found:04d}")
    command.upgrade(cfg, "head")
    if recorded != latest:
        if conn.execute(select(schema.meta.c.key).where(schema.meta.c.key == "schema_version")).first() is None:
            conn.execute(schema.meta.insert().values(key="schema_version", value=str(latest)))
        else:
            conn.execute(schema.meta.update().where(schema.meta.c.key == "schema_version").values(value=str(latest)))
    return found


def _known(script: ScriptDirectory, revision: str) -> bool:
    try:
        return script.get_revision(revision) is not None
    except CommandError:
        return False
