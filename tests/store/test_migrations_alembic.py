"""Migrations on Alembic under a lock: concurrent first starts, databases from before Alembic, `gpuplat db upgrade`.

Real PostgreSQL (tests/pg.py) and real SQLite files; the CLI runs as a subprocess.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from sqlalchemy import BigInteger, Connection, Engine, inspect, select, text
from sqlalchemy.engine import make_url

from jupyter_gpuplat.store import Store, migrations, schema
from jupyter_gpuplat.store.store import make_engine

from ..pg import psycopg_conninfo

HEAD = f"{migrations.LATEST:04d}"
T0 = 1_700_000_000.5


# ---- the hand-written migrations as released before Alembic (v1..v7), frozen ----------------
def _cols(conn: Connection, table: str) -> set[str]:
    return {c["name"] for c in inspect(conn).get_columns(table)}


def _old_v1(conn: Connection) -> None:
    schema.metadata.create_all(conn, tables=[schema.config, schema.runs, schema.events])


def _old_v2(conn: Connection) -> None:
    if conn.dialect.name == "postgresql":
        conn.execute(text("ALTER TABLE gpuplat_runs ALTER COLUMN memory_bytes TYPE BIGINT"))


def _old_v3(conn: Connection) -> None:
    if "details" not in _cols(conn, "gpuplat_events"):
        conn.execute(text("ALTER TABLE gpuplat_events ADD COLUMN details JSON"))


def _old_v4(conn: Connection) -> None:
    schema.metadata.create_all(conn, tables=[schema.metric_chunks, schema.run_tracking])


def _old_v5(conn: Connection) -> None:
    cols = _cols(conn, "gpuplat_runs")
    if "code" not in cols:
        conn.execute(text("ALTER TABLE gpuplat_runs ADD COLUMN code JSON"))
    if "working_dir" not in cols:
        conn.execute(text("ALTER TABLE gpuplat_runs ADD COLUMN working_dir TEXT"))


def _old_v6(conn: Connection) -> None:
    if "log_offset" not in _cols(conn, "gpuplat_run_tracking"):
        conn.execute(text("ALTER TABLE gpuplat_run_tracking ADD COLUMN log_offset BIGINT NOT NULL DEFAULT 0"))
    rt = schema.run_tracking
    key = "gpuplat:metrics_log_offset"
    for run_id, params in conn.execute(select(rt.c.run_id, rt.c.params)).all():
        if isinstance(params, dict) and key in params:
            rest = {k: v for k, v in params.items() if k != key}
            conn.execute(rt.update().where(rt.c.run_id == run_id).values(params=rest, log_offset=int(params[key])))


def _old_v7(conn: Connection) -> None:
    if "parent" not in _cols(conn, "gpuplat_runs"):
        conn.execute(text("ALTER TABLE gpuplat_runs ADD COLUMN parent VARCHAR(32)"))
    if "ix_runs_parent_seq" not in {ix["name"] for ix in inspect(conn).get_indexes("gpuplat_runs")}:
        conn.execute(text("CREATE INDEX ix_runs_parent_seq ON gpuplat_runs (parent, seq)"))


OLD_STEPS: list[Callable[[Connection], None]] = [_old_v1, _old_v2, _old_v3, _old_v4, _old_v5, _old_v6, _old_v7]


def old_migrate(engine: Engine) -> int:
    """The released `migrate()` of v7 (no lock on PostgreSQL, meta created outside the transaction)."""
    latest = len(OLD_STEPS)
    schema.metadata.create_all(engine, tables=[schema.meta])
    with engine.execution_options(gpuplat_writes_after_reads=True).begin() as conn:
        found = migrations.current_version(conn)
        if found > latest:
            raise RuntimeError(
                f"database schema version {found} is newer than this jupyter-gpuplat ({latest}); upgrade the package"
            )
        for version in range(found + 1, latest + 1):
            OLD_STEPS[version - 1](conn)
        if found == 0:
            conn.execute(schema.meta.insert().values(key="schema_version", value=str(latest)))
    return found


# ---- fixtures -------------------------------------------------------------------------------
@pytest.fixture(params=["sqlite", "postgresql"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def new_db(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Callable[[], str]]:
    """Makes fresh, empty databases of the backend (several per test: one per trial)."""
    made: list[str] = []

    def make() -> str:
        if backend == "sqlite":
            url = f"sqlite:///{tmp_path / f'db-{len(made)}' / 'gpuplat.db'}"
        else:
            admin: str = request.getfixturevalue("pg_url")
            name = f"gpuplat_test_{uuid.uuid4().hex[:16]}"
            with psycopg.connect(psycopg_conninfo(admin), autocommit=True) as conn:
                conn.execute(f'CREATE DATABASE "{name}"')
            url = make_url(admin).set(drivername="postgresql+psycopg", database=name).render_as_string(False)
        made.append(url)
        return url

    yield make
    if backend == "postgresql":
        admin = request.getfixturevalue("pg_url")
        with psycopg.connect(psycopg_conninfo(admin), autocommit=True) as conn:
            for url in made:
                conn.execute(f'DROP DATABASE IF EXISTS "{make_url(url).database}" WITH (FORCE)')


def bookkeeping(url: str) -> dict[str, Any]:
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            return {
                "alembic": conn.execute(text("SELECT version_num FROM alembic_version")).all(),
                "meta": conn.execute(select(schema.meta)).all(),
                "leader": conn.execute(select(schema.leader)).all(),
            }
    finally:
        engine.dispose()


AT_HEAD = {"alembic": [(HEAD,)], "meta": [("schema_version", str(migrations.LATEST))], "leader": [(1, 0, "", None)]}


# ---- concurrent first starts ----------------------------------------------------------------
TRIALS = 5
STARTS = 4


def start_store(url: str) -> int:
    s = Store(url)
    s.close()
    return s.schema_version_found


def concurrent_starts(url: str, start: Callable[[str], int] = start_store) -> tuple[list[int], list[BaseException]]:
    """`start(url)` in STARTS threads released together by a barrier: the versions found, the errors raised."""
    barrier = threading.Barrier(STARTS)
    found: list[int] = []
    errors: list[BaseException] = []

    def one() -> None:
        barrier.wait()
        try:
            found.append(start(url))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=one) for _ in range(STARTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return found, errors


def test_four_concurrent_first_starts_migrate_once(new_db: Callable[[], str]) -> None:
    """4 Stores built at once on an empty database, 5 times over (the code before the lock failed every trial)."""
    for trial in range(TRIALS):
        url = new_db()
        found, errors = concurrent_starts(url)
        assert errors == [], f"trial {trial}: {errors!r}"
        # One start migrated from empty; the others waited for it and found the head.
        assert sorted(found) == [0] + [migrations.LATEST] * (STARTS - 1), f"trial {trial}"
        assert bookkeeping(url) == AT_HEAD


def test_four_concurrent_db_upgrade_processes(new_db: Callable[[], str]) -> None:
    url = new_db()
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "jupyter_gpuplat.cli.db", "upgrade", "--db-url", url],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(STARTS)
    ]
    outs = [p.communicate(timeout=60) for p in procs]
    assert [p.returncode for p in procs] == [0] * STARTS, outs
    said = sorted(out.strip().split(": ", 1)[1] for out, _ in outs)
    assert said == [f"already at schema version {migrations.LATEST}"] * (STARTS - 1) + [
        f"schema version {migrations.LATEST} (was empty)"
    ], outs
    assert bookkeeping(url) == AT_HEAD


# ---- databases from before Alembic ------------------------------------------------------------
def _fill_v7(conn: Connection) -> None:
    conn.execute(schema.config.insert().values(body={"queues": []}, source="t", applied_by="ops", applied_at=T0))
    run = {
        "id": "r-old",
        "project": "team-a",
        "user": "alice",
        "kind": "job",
        "queue": "q",
        "status": "succeeded",
        "request": {"project": "team-a"},
        "resolved": {},
        "provenance": {},
        "gpu": 1,
        "created_at": T0,
        "updated_at": T0,
        "parent": None,
    }
    conn.execute(schema.runs.insert().values(run))
    for status in ("created", "queued", "succeeded"):
        conn.execute(schema.events.insert().values(run_id="r-old", project="team-a", status=status, at=T0))
    conn.execute(schema.run_tracking.insert().values(run_id="r-old", params={"lr": 0.1}, log_offset=64))


def test_a_v7_database_is_stamped_and_upgraded_keeping_its_rows(new_db: Callable[[], str]) -> None:
    url = new_db()
    engine = make_engine(url)
    pg = engine.dialect.name == "postgresql"
    assert old_migrate(engine) == 0
    with engine.begin() as conn:
        _fill_v7(conn)
        if pg:  # as v1 made them then: SERIAL, 32-bit ids and sequences
            for table, column in (("gpuplat_events", "id"), ("gpuplat_runs", "seq"), ("gpuplat_config", "version")):
                conn.execute(text(f"ALTER TABLE {table} ALTER COLUMN {column} TYPE INTEGER"))
                conn.execute(text(f"ALTER SEQUENCE {table}_{column}_seq AS INTEGER"))
    assert "alembic_version" not in inspect(engine).get_table_names()
    engine.dispose()

    s = Store(url)
    try:
        assert s.schema_version_found == 7
        assert bookkeeping(url) == AT_HEAD
        run = s.get_run("r-old")
        assert run is not None and run["status"] == "succeeded" and run["seq"] == 1
        assert [e["status"] for e in run["timeline"]] == ["created", "queued", "succeeded"]
        assert s.get_config() == ({"queues": []}, 1)
        assert s.metrics.state("r-old").log_offset == 64
        if pg:
            cols = {c["name"]: c["type"] for c in inspect(s.engine).get_columns("gpuplat_events")}
            assert isinstance(cols["id"], BigInteger)
            with s.engine.begin() as conn:
                types = conn.execute(
                    text("SELECT sequencename, data_type::text FROM pg_sequences ORDER BY sequencename")
                ).all()
                assert types == [
                    ("gpuplat_config_version_seq", "bigint"),
                    ("gpuplat_events_id_seq", "bigint"),
                    ("gpuplat_refusals_id_seq", "bigint"),  # v9
                    ("gpuplat_runs_seq_seq", "bigint"),
                ]
                conn.execute(text("SELECT setval('gpuplat_events_id_seq', 2147483647)"))  # int4's last id
        next_id = s.transition("r-old", "team-a", {}, {"status": "succeeded", "reason": "", "message": "", "at": T0})
        assert next_id == (2**31 if pg else 4)
    finally:
        s.close()
    # The released v7 code refuses the upgraded database, naming both versions.
    old = make_engine(url)
    try:
        with pytest.raises(
            RuntimeError, match=rf"version {migrations.LATEST} is newer than this jupyter-gpuplat \(7\)"
        ):
            old_migrate(old)
    finally:
        old.dispose()


def test_a_v7_database_written_by_the_old_code_then_reopened_twice(new_db: Callable[[], str]) -> None:
    url = new_db()
    engine = make_engine(url)
    old_migrate(engine)
    engine.dispose()
    ran: list[str] = []
    engine = make_engine(url)
    try:
        assert migrations.migrate(engine, applied=ran) == 7
        assert ran == ["0008", "0009", "0010", "0011", "0012", "0013"], "only the revisions after v7 run"
        ran.clear()
        assert migrations.migrate(engine, applied=ran) == migrations.LATEST
        assert ran == []
    finally:
        engine.dispose()


# ---- gpuplat db upgrade ---------------------------------------------------------------------
def dbcli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "jupyter_gpuplat.cli.db", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )


def test_db_upgrade_cli(new_db: Callable[[], str]) -> None:
    url = new_db()
    first = dbcli("upgrade", "--db-url", url)
    assert first.returncode == 0, first.stderr
    assert first.stdout.strip().endswith(f"schema version {migrations.LATEST} (was empty)")
    assert bookkeeping(url) == AT_HEAD
    again = dbcli("upgrade", "--db-url", url)
    assert again.returncode == 0 and again.stdout.strip().endswith(f"already at schema version {migrations.LATEST}")
    if make_url(url).password:
        assert make_url(url).password not in first.stdout  # type: ignore[operator]

    engine = make_engine(url)
    with engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = '0042'"))
    engine.dispose()
    newer = dbcli("upgrade", "--db-url", url)
    assert newer.returncode == 1
    assert f"schema version 42 is newer than this jupyter-gpuplat ({migrations.LATEST})" in newer.stderr
    assert "Traceback" not in newer.stderr


def test_db_upgrade_defaults_to_gpuplat_db_url(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'env' / 'gpuplat.db'}"
    done = dbcli("upgrade", env={**os.environ, "GPUPLAT_DB_URL": url})
    assert done.returncode == 0, done.stderr
    assert bookkeeping(url) == AT_HEAD


def test_db_upgrade_of_an_unreachable_database_says_so() -> None:
    done = dbcli("upgrade", "--db-url", "postgresql+psycopg://gpuplat:secret@127.0.0.1:1/gpuplat")
    assert done.returncode == 1
    assert done.stderr.startswith("gpuplat db: ") and "Traceback" not in done.stderr
    assert "secret" not in done.stderr


def test_a_new_database_has_64_bit_ids(new_db: Callable[[], str]) -> None:
    """PostgreSQL: BIGINT ids and sequences from the start; SQLite: INTEGER PRIMARY KEY (the 64-bit rowid)."""
    url = new_db()
    s = Store(url)
    try:
        with s.engine.connect() as conn:
            for table, column in (("gpuplat_events", "id"), ("gpuplat_runs", "seq"), ("gpuplat_config", "version")):
                [col] = [c for c in inspect(conn).get_columns(table) if c["name"] == column]
                if conn.dialect.name == "postgresql":
                    assert isinstance(col["type"], BigInteger), (table, col)
                    seq = conn.execute(text("SELECT pg_get_serial_sequence(:t, :c)"), {"t": table, "c": column})
                    kind = conn.execute(
                        text("SELECT data_type::text FROM pg_sequences WHERE schemaname || '.' || sequencename = :s"),
                        {"s": seq.scalar()},
                    ).scalar()
                    assert kind == "bigint", table
                else:
                    assert str(col["type"]) == "INTEGER" and col["primary_key"], (table, col)
    finally:
        s.close()
