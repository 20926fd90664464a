"""Versioned schema migrations, applied in order at start-up.

Each entry moves the schema from version N-1 to N inside one transaction.
Never edit a released migration: append a new one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from sqlalchemy import Connection, Engine, inspect, select, text

from . import schema

Migration = Callable[[Connection], None]


def _v1(conn: Connection) -> None:
    schema.metadata.create_all(conn, tables=[schema.config, schema.runs, schema.events])


def _v2(conn: Connection) -> None:
    # v1 made gpuplat_runs.memory_bytes a 32-bit INTEGER on PostgreSQL: widen it (no-op on SQLite,
    # whose integers are 64-bit; databases created after this change already have BIGINT).
    if conn.dialect.name == "postgresql":
        conn.execute(text("ALTER TABLE gpuplat_runs ALTER COLUMN memory_bytes TYPE BIGINT"))


def _v3(conn: Connection) -> None:
    # Executor details (raw Kubernetes text, counts, who can act) on timeline events.
    cols = {c["name"] for c in inspect(conn).get_columns("gpuplat_events")}
    if "details" not in cols:  # v1 databases created after this column was added already have it
        conn.execute(text("ALTER TABLE gpuplat_events ADD COLUMN details JSON"))


def _v4(conn: Connection) -> None:
    # Metrics and params recorded by runs through jupyter_gpuplat.tracking.
    schema.metadata.create_all(conn, tables=[schema.metric_chunks, schema.run_tracking])


def _v5(conn: Connection) -> None:
    # Runs from the user's directory: what code ran (snapshot, git) and where it started.
    cols = {c["name"] for c in inspect(conn).get_columns("gpuplat_runs")}
    if "code" not in cols:  # v1 databases created after these columns were added already have them
        conn.execute(text("ALTER TABLE gpuplat_runs ADD COLUMN code JSON"))
    if "working_dir" not in cols:
        conn.execute(text("ALTER TABLE gpuplat_runs ADD COLUMN working_dir TEXT"))


def _v6(conn: Connection) -> None:
    # The indexer's position in the binary metrics log: a column, moved out of the params JSON
    # where the code before v6 kept it (under "gpuplat:metrics_log_offset").
    cols = {c["name"] for c in inspect(conn).get_columns("gpuplat_run_tracking")}
    if "log_offset" not in cols:  # v4 databases created after this column was added already have it
        conn.execute(text("ALTER TABLE gpuplat_run_tracking ADD COLUMN log_offset BIGINT NOT NULL DEFAULT 0"))
    rt = schema.run_tracking
    key = "gpuplat:metrics_log_offset"
    for run_id, params in conn.execute(select(rt.c.run_id, rt.c.params)).all():
        if isinstance(params, dict) and key in params:
            rest = {k: v for k, v in params.items() if k != key}
            conn.execute(rt.update().where(rt.c.run_id == run_id).values(params=rest, log_offset=int(params[key])))


def _v7(conn: Connection) -> None:
    # Sweeps: a child names its parent; a sweep's children are listed by it.
    cols = {c["name"] for c in inspect(conn).get_columns("gpuplat_runs")}
    if "parent" not in cols:  # v1 databases created after this column was added already have it
        conn.execute(text("ALTER TABLE gpuplat_runs ADD COLUMN parent VARCHAR(32)"))
    indexes = {ix["name"] for ix in inspect(conn).get_indexes("gpuplat_runs")}
    if "ix_runs_parent_seq" not in indexes:
        conn.execute(text("CREATE INDEX ix_runs_parent_seq ON gpuplat_runs (parent, seq)"))


MIGRATIONS: list[Migration] = [_v1, _v2, _v3, _v4, _v5, _v6, _v7]
LATEST = len(MIGRATIONS)


def current_version(conn: Connection) -> int:
    row = conn.execute(select(schema.meta.c.value).where(schema.meta.c.key == "schema_version")).first()
    return int(row[0]) if row else 0


def migrate(engine: Engine, steps: Sequence[Migration] = MIGRATIONS) -> int:
    """Bring the database to the last of `steps`; returns the version found before."""
    latest = len(steps)
    schema.metadata.create_all(engine, tables=[schema.meta])
    # Reads the version, then writes: the write lock first (store._begin), so two servers
    # starting on one SQLite file migrate one after the other.
    with engine.execution_options(gpuplat_writes_after_reads=True).begin() as conn:
        found = current_version(conn)
        if found > latest:
            raise RuntimeError(
                f"database schema version {found} is newer than this jupyter-gpuplat ({latest}); upgrade the package"
            )
        for version in range(found + 1, latest + 1):
            steps[version - 1](conn)
        if found != latest:
            if found == 0:
                conn.execute(schema.meta.insert().values(key="schema_version", value=str(latest)))
            else:
                conn.execute(
                    schema.meta.update().where(schema.meta.c.key == "schema_version").values(value=str(latest))
                )
    return found
