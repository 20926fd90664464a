"""`gpuplat db copy`: an embedded store (SQLite) into PostgreSQL, for teams that outgrow one server.

The source is held still for the whole read (SQLite: BEGIN IMMEDIATE, so no writer commits in
between; PostgreSQL: one REPEATABLE READ snapshot). The target is migrated to the latest
revision and must hold no rows yet. Every primary key is kept — `gpuplat_events.id` is the
SSE resume id a client holds (Last-Event-ID) — and then the sequences are moved past the
copied ids, so new rows get fresh ones. All of the target's writes are one transaction: a
failed copy, or counts that differ, leave it as empty as it was.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

from sqlalchemy import JSON, Connection, Row, Table, Text, cast, func, insert, null, select, text
from sqlalchemy.engine import make_url

from . import schema
from .estimates import run_etas
from .facts import run_facts_table
from .insights import refusals
from .migrations import LATEST, lock, migrate
from .store import DEFAULT_BUSY_TIMEOUT_SECONDS, WRITES_AFTER_READS, make_engine

# In foreign-key-free dependency order; gpuplat_meta and gpuplat_leader belong to the target
# (its own schema version; the epoch of its own leaders).
TABLES: list[Table] = [
    schema.config,
    schema.runs,
    schema.events,
    schema.metric_chunks,
    schema.run_tracking,
    refusals,
    run_facts_table,
    run_etas,
]
SERIALS: list[tuple[Table, str]] = [
    (schema.config, "version"),
    (schema.runs, "seq"),
    (schema.events, "id"),
    (refusals, "id"),
]
BATCH_ROWS = 5_000


class CopyError(RuntimeError):
    """The copy was refused or did not match; the target was left as it was."""


def safe_url(url: str) -> str:
    return make_url(url).render_as_string(hide_password=True)


def copy_database(
    source_url: str,
    target_url: str,
    *,
    batch_rows: int = BATCH_ROWS,
    log: Callable[[str], None] = print,
    busy_timeout_seconds: float = DEFAULT_BUSY_TIMEOUT_SECONDS,
) -> dict[str, int]:
    """Copy every row of the store at `source_url` into the empty store at `target_url`; returns the counts.

    `busy_timeout_seconds`: how long to wait for a writer of a SQLite source (a server still running).
    """
    if make_url(source_url) == make_url(target_url):
        raise CopyError("the source and the target are the same database")
    src = make_engine(source_url, busy_timeout_seconds)
    dst = make_engine(target_url)
    try:
        found = migrate(dst)
        log(f"target {safe_url(target_url)}: schema version {LATEST} (was {found or 'empty'})")
        source = src.execution_options(**{WRITES_AFTER_READS: True})
        if src.dialect.name == "postgresql":
            source = source.execution_options(isolation_level="REPEATABLE READ")
        with source.begin() as sconn, dst.begin() as dconn:
            _check_source(sconn, source_url)
            lock(dconn)  # no migration (or second copy) of the target meanwhile
            _check_empty(dconn, target_url)
            counts = {t.name: _copy_table(sconn, dconn, t, batch_rows) for t in TABLES}
            if dconn.dialect.name == "postgresql":
                _reset_sequences(dconn)
            _compare(sconn, dconn, counts)
        for name, n in counts.items():
            log(f"{name}: {n} rows")
        return counts
    finally:
        src.dispose()
        dst.dispose()


def _check_source(conn: Connection, url: str) -> None:
    version = _version(conn)
    if version != LATEST:
        raise CopyError(
            f"the source {safe_url(url)} is at schema version {version}, not {LATEST}: "
            f"run `gpuplat db upgrade --db-url {safe_url(url)}` first"
        )


def _version(conn: Connection) -> int:
    names = set(conn.dialect.get_table_names(conn))
    if "alembic_version" in names:
        rev = conn.execute(text("SELECT version_num FROM alembic_version")).scalar()
        return int(rev) if rev and str(rev).isdigit() else 0
    if "gpuplat_meta" in names:
        row = conn.execute(select(schema.meta.c.value).where(schema.meta.c.key == "schema_version")).first()
        return int(row[0]) if row else 0
    return 0


def _check_empty(conn: Connection, url: str) -> None:
    held = {t.name: n for t in TABLES if (n := _count(conn, t))}
    if held:
        rows = ", ".join(f"{name} {n}" for name, n in held.items())
        raise CopyError(f"the target {safe_url(url)} is not empty ({rows} rows): copy into a new database")


def _count(conn: Connection, table: Table) -> int:
    return int(conn.execute(select(func.count()).select_from(table)).scalar_one())


def _copy_table(sconn: Connection, dconn: Connection, table: Table, batch_rows: int) -> int:
    # JSON columns move as their text: nothing re-encoded, and SQL NULL and JSON null stay apart.
    json_cols = [i for i, c in enumerate(table.c) if isinstance(c.type, JSON)]
    cols = [cast(c, Text).label(c.name) if i in json_cols else c for i, c in enumerate(table.c)]
    query = select(*cols).order_by(*table.primary_key.columns)
    parts = (list(part) for part in sconn.execution_options(yield_per=batch_rows).execute(query).partitions())
    if dconn.dialect.name == "postgresql":
        return _copy_in(dconn, table, parts)
    n = 0
    for part in parts:
        dconn.execute(insert(table), [_decoded(r._mapping, table, json_cols) for r in part])
        n += len(part)
    return n


def _copy_in(dconn: Connection, table: Table, parts: Iterable[list[Row[Any]]]) -> int:
    """PostgreSQL's COPY FROM STDIN on the transaction's own connection: 10x faster than INSERTs."""
    names = ", ".join(f'"{c.name}"' for c in table.c)
    raw = dconn.connection.driver_connection
    n = 0
    with raw.cursor() as cur, cur.copy(f"COPY {table.name} ({names}) FROM STDIN") as copy:  # type: ignore[union-attr]
        for part in parts:
            for r in part:
                copy.write_row(tuple(r))
            n += len(part)
    return n


def _decoded(mapping: Any, table: Table, json_cols: list[int]) -> dict[str, Any]:
    row = dict(mapping)
    for i in json_cols:
        name = table.c[i].name
        raw = row[name]
        row[name] = null() if raw is None else json.loads(raw)
    return row


def _reset_sequences(conn: Connection) -> None:
    for table, column in SERIALS:
        # is_called=false on an empty table: the next id is 1, as in a new database.
        conn.execute(
            text(
                f"SELECT setval(pg_get_serial_sequence(:t, :c), COALESCE(MAX({column}), 1), MAX({column}) IS NOT NULL)"
                f" FROM {table.name}"
            ),
            {"t": table.name, "c": column},
        )


def _compare(sconn: Connection, dconn: Connection, copied: dict[str, int]) -> None:
    for table in TABLES:
        there, here = _count(sconn, table), _count(dconn, table)
        if not there == here == copied[table.name]:
            raise CopyError(f"{table.name}: {there} rows in the source, {here} in the target: nothing was copied")
