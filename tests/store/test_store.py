"""The Store on real SQLite and real PostgreSQL: migrations, runs, timeline, listing, events, atomicity.

Every Store test runs once per backend (`store` / `store_url` are parametrized);
the end-to-end test at the bottom runs the real Jupyter server extension on
PostgreSQL.
"""

from __future__ import annotations

import itertools
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sqlalchemy import JSON, BigInteger, Connection, column, event, inspect, select, text
from sqlalchemy import table as sa_table
from sqlalchemy.exc import IntegrityError

from jupyter_gpuplat.store import Store, migrations, schema
from jupyter_gpuplat.store.insights import arrived_or_holding
from jupyter_gpuplat.store.store import make_engine

GI = 1024**3
T0 = 1_700_000_000.123456  # a realistic epoch with sub-millisecond digits: Float must round-trip exactly
_ids = itertools.count(1)


# ---- fixtures -----------------------------------------------------------------
@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'store' / 'gpuplat.db'}"  # parent dir does not exist yet: the store makes it
    return str(request.getfixturevalue("pg_db_url"))


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    s = Store(store_url)
    yield s
    s.close()


def run_row(
    *,
    project: str = "team-a",
    user: str = "alice",
    name: str | None = None,
    queue: str = "team-a-train",
    status: str = "queued",
    gpu: int = 1,
    memory_bytes: int = 16 * GI,
    at: float = T0,
    **extra: Any,
) -> dict[str, Any]:
    """A run row shaped exactly like Engine.submit builds it (`extra`: code, working_dir)."""
    rid = f"r{next(_ids):06d}"
    return {
        **extra,
        "id": rid,
        "project": project,
        "user": user,
        "name": name,
        "kind": "job",
        "queue": queue,
        "status": status,
        "reason": "Submitted",
        "message": f"waiting for dispatch in queue {queue}",
        "request": {"project": project, "command": ["python", "train.py"], "presets": ["single-gpu"]},
        "resolved": {"kind": "job", "name": name, "resources": {"gpu": gpu, "cpu": "4", "memory": "16Gi"}},
        "provenance": {"resources.gpu": "preset:single-gpu"},
        "gpu": gpu,
        "cpu_milli": 4000,
        "memory_bytes": memory_bytes,
        "created_at": at,
        "queued_at": at,
        "updated_at": at,
    }


def submit_events(user: str, queue: str, at: float = T0) -> list[dict[str, Any]]:
    return [
        {"status": "created", "reason": "Submitted", "message": f"submitted by {user}", "at": at},
        {"status": "queued", "reason": "Submitted", "message": f"waiting for dispatch in queue {queue}", "at": at},
    ]


def create(store: Store, **kw: Any) -> dict[str, Any]:
    row = run_row(**kw)
    seq, ev_ids = store.create_run(row, submit_events(row["user"], row["queue"], row["created_at"]))
    return {**row, "seq": seq, "event_ids": ev_ids}


def ev(status: str, reason: str = "", message: str = "", at: float = T0) -> dict[str, Any]:
    return {"status": status, "reason": reason, "message": message, "at": at}


# ---- migrations -----------------------------------------------------------------
def test_new_database_is_migrated_and_versioned(store_url: str) -> None:
    s = Store(store_url)
    try:
        assert s.schema_version_found == 0
        names = set(inspect(s.engine).get_table_names())
        assert {"gpuplat_meta", "gpuplat_config", "gpuplat_runs", "gpuplat_events", "gpuplat_leader"} <= names
        with s.engine.connect() as conn:
            assert migrations.current_version(conn) == migrations.LATEST
            assert conn.execute(select(schema.meta)).all() == [("schema_version", str(migrations.LATEST))]
            assert conn.execute(text("SELECT version_num FROM alembic_version")).all() == [
                (f"{migrations.LATEST:04d}",)
            ]
            assert conn.execute(select(schema.leader)).all() == [(1, 0, "", None)]
        assert s.count_runs() == 0
        assert s.last_event_id() == 0
        assert s.get_config() == (None, 0)
    finally:
        s.close()


def test_latest_is_the_head_revision() -> None:
    assert migrations.head_version() == migrations.LATEST


def extra_revision(directory: Path, body: str, revision: str = f"{migrations.LATEST + 1:04d}") -> Path:
    """A directory holding one more Alembic revision after the package's head (`body`: its upgrade)."""
    directory.mkdir(parents=True, exist_ok=True)
    code = "from alembic import op\nfrom sqlalchemy import text\n\n"
    head = f"{migrations.LATEST:04d}"
    code += f"revision = {revision!r}\ndown_revision = {head!r}\n\n\ndef upgrade():\n"
    code += "".join(f"    {line}\n" for line in body.strip().splitlines())
    (directory / f"{revision}_extra.py").write_text(code)
    return directory


def test_reopening_keeps_data_and_does_not_rerun_migrations(store_url: str) -> None:
    engine = make_engine(store_url)
    ran: list[str] = []
    try:
        assert migrations.migrate(engine, applied=ran) == 0
        assert ran == [f"{v:04d}" for v in range(1, migrations.LATEST + 1)]
    finally:
        engine.dispose()
    first = Store(store_url)
    assert first.schema_version_found == migrations.LATEST
    run = create(first)
    first.put_config({"queues": []}, source="t", by="ops", at=T0)
    first.close()

    again = Store(store_url)
    ran.clear()
    try:
        assert migrations.migrate(again.engine, applied=ran) == migrations.LATEST
        assert ran == [], "an up-to-date database must not re-run migrations"
        assert again.get_run(run["id"])["seq"] == run["seq"]
        assert again.get_config() == ({"queues": []}, 1)
        with again.engine.connect() as conn:
            assert conn.execute(select(schema.meta)).all() == [("schema_version", str(migrations.LATEST))]
    finally:
        again.close()


def test_upgrade_applies_only_the_new_migrations(store_url: str, tmp_path: Path) -> None:
    Store(store_url).close()  # a database at the current LATEST
    extra = extra_revision(
        tmp_path / "extra", 'op.execute(text("CREATE TABLE gpuplat_test_extra (k INTEGER PRIMARY KEY)"))'
    )
    s = Store(store_url, [*migrations.MIGRATIONS, extra])
    latest = migrations.LATEST + 1
    try:
        assert s.schema_version_found == latest - 1
        assert "gpuplat_test_extra" in inspect(s.engine).get_table_names()
        with s.engine.connect() as conn:
            assert migrations.current_version(conn) == latest
            assert conn.execute(select(schema.meta)).all() == [("schema_version", str(latest))]
            assert conn.execute(text("SELECT version_num FROM alembic_version")).all() == [(f"{latest:04d}",)]
        ran: list[str] = []
        assert migrations.migrate(s.engine, [*migrations.MIGRATIONS, extra], applied=ran) == latest
        assert ran == []  # and had it run, CREATE TABLE would have failed
    finally:
        s.close()


def test_failed_migration_rolls_back_and_is_retried(store_url: str, tmp_path: Path) -> None:
    Store(store_url).close()
    broken = extra_revision(
        tmp_path / "broken",
        'op.execute(text("CREATE TABLE gpuplat_test_half (k INTEGER PRIMARY KEY)"))\n'
        'op.execute(text("SELECT * FROM gpuplat_no_such_table"))',
    )
    with pytest.raises(Exception, match="gpuplat_no_such_table"):
        Store(store_url, [*migrations.MIGRATIONS, broken])
    s = Store(store_url)
    try:
        assert s.schema_version_found == migrations.LATEST, "the failed migration must not bump the version"
        assert "gpuplat_test_half" not in inspect(s.engine).get_table_names()
        with s.engine.connect() as conn:
            assert conn.execute(text("SELECT version_num FROM alembic_version")).all() == [
                (f"{migrations.LATEST:04d}",)
            ]
    finally:
        s.close()


def test_failed_first_migration_leaves_nothing(store_url: str, tmp_path: Path) -> None:
    broken = extra_revision(tmp_path / "broken", 'op.execute(text("SELECT * FROM gpuplat_no_such_table"))')
    with pytest.raises(Exception, match="gpuplat_no_such_table"):
        Store(store_url, [*migrations.MIGRATIONS, broken])
    engine = make_engine(store_url)
    try:
        assert inspect(engine).get_table_names() == [], "not even gpuplat_meta or alembic_version"
    finally:
        engine.dispose()


def test_database_newer_than_the_package_is_refused(store: Store) -> None:
    with store.engine.begin() as conn:
        conn.execute(
            schema.meta.update().where(schema.meta.c.key == "schema_version").values(value=str(migrations.LATEST + 1))
        )
    with pytest.raises(
        RuntimeError,
        match=f"version {migrations.LATEST + 1} is newer than this jupyter-gpuplat \\({migrations.LATEST}\\)",
    ):
        Store(store.url)


def test_database_at_an_unknown_revision_is_refused(store: Store) -> None:
    """A newer package's revision in alembic_version (this one cannot know it): refused, named."""
    with store.engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = '0042'"))
    with pytest.raises(RuntimeError, match=f"version 42 is newer than this jupyter-gpuplat \\({migrations.LATEST}\\)"):
        Store(store.url)


def as_before_alembic(conn: Connection, version: int) -> None:
    """Make a database look as the hand-written migrations left it at `version` (no alembic_version)."""
    conn.execute(text("DROP TABLE alembic_version"))
    conn.execute(schema.meta.update().where(schema.meta.c.key == "schema_version").values(value=str(version)))


def test_memory_column_holds_more_than_32_bits(store: Store) -> None:
    assert isinstance(schema.runs.c.memory_bytes.type, BigInteger)
    big = create(store, memory_bytes=2 * 1024 * GI)  # 2 TiB: far beyond a 32-bit INTEGER
    assert store.get_run(big["id"])["memory_bytes"] == 2 * 1024 * GI


def test_v2_widens_memory_on_a_v1_database(store_url: str) -> None:
    """A database created by the v1 migration (32-bit memory column on PostgreSQL) is widened by v2."""
    s = Store(store_url)
    pg = s.engine.dialect.name == "postgresql"
    with s.engine.begin() as conn:
        if pg:
            conn.execute(text("ALTER TABLE gpuplat_runs ALTER COLUMN memory_bytes TYPE INTEGER"))
        as_before_alembic(conn, 1)
    s.close()
    s = Store(store_url)
    try:
        assert s.schema_version_found == 1
        if pg:
            cols = {c["name"]: c["type"] for c in inspect(s.engine).get_columns("gpuplat_runs")}
            assert isinstance(cols["memory_bytes"], BigInteger)
        big = create(s, memory_bytes=128 * GI)
        assert s.get_run(big["id"])["memory_bytes"] == 128 * GI
    finally:
        s.close()


def test_v5_adds_code_and_working_dir_to_a_v4_database(store_url: str) -> None:
    """A v4 database (runs without code and working_dir) gains both; old rows read them as None."""
    s = Store(store_url)
    old = create(s)
    with s.engine.begin() as conn:
        conn.execute(text("ALTER TABLE gpuplat_runs DROP COLUMN code"))
        conn.execute(text("ALTER TABLE gpuplat_runs DROP COLUMN working_dir"))
        as_before_alembic(conn, 4)
    s.close()
    s = Store(store_url)
    try:
        assert s.schema_version_found == 4
        cols = {c["name"] for c in inspect(s.engine).get_columns("gpuplat_runs")}
        assert {"code", "working_dir"} <= cols
        got = s.get_run(old["id"])
        assert got is not None and got["code"] is None and got["working_dir"] is None
        code = {"snapshot": "code/train.py", "git": {"commit": "a" * 40, "dirty": True, "diff_path": "code/git.diff"}}
        new = create(s, working_dir="/home/alice/exp", code=code)
        got = s.get_run(new["id"])
        assert got is not None and got["code"] == code and got["working_dir"] == "/home/alice/exp"
        s.transition(new["id"], new["project"], {"code": {"snapshot": None, "git": None}}, None)
        assert s.get_run(new["id"])["code"] == {"snapshot": None, "git": None}  # type: ignore[index]
        [listed] = [r for r in s.list_runs([new["project"]]) if r["id"] == new["id"]]
        assert listed["working_dir"] == "/home/alice/exp"
    finally:
        s.close()


def test_whatif_reads_the_asked_and_the_admitted_flavor(store: Store) -> None:
    """What-if reads one JSON path of each run's resolved spec (the flavor it asked for), on both backends."""
    asks = run_row(flavor="h100")
    asks["resolved"] = {**asks["resolved"], "placement": {"gpu_type": "h100"}}
    other = run_row(at=T0 + 1)
    other["resolved"] = {**other["resolved"], "placement": {"node_selector": {"zone": "a"}}}
    plain = run_row(at=T0 + 2)
    for row in (asks, other, plain):
        store.create_run(row, submit_events(row["user"], row["queue"], row["created_at"]))
    rows = arrived_or_holding(store.engine, T0 - 1, T0 + 10, 100)
    assert [(x.id, x.gpu_type, x.flavor) for x in rows] == [
        (asks["id"], "h100", "h100"),
        (other["id"], None, None),
        (plain["id"], None, None),
    ]


def test_v6_moves_the_metrics_log_position_out_of_the_params(store_url: str) -> None:
    """A v5 database kept the binary log's position in the params JSON: v6 makes it a column."""
    s = Store(store_url)
    run = create(s)
    rt = schema.run_tracking
    with s.engine.begin() as conn:
        conn.execute(text("ALTER TABLE gpuplat_run_tracking DROP COLUMN log_offset"))
        legacy = sa_table(
            rt.name, column("run_id"), column("params", JSON), column("metrics_offset"), column("params_offset")
        )
        conn.execute(
            legacy.insert().values(
                run_id=run["id"],
                params={"lr": 0.1, "gpuplat:metrics_log_offset": 4096},
                metrics_offset=7,
                params_offset=9,
            )
        )
        as_before_alembic(conn, 5)
    s.close()
    s = Store(store_url)
    try:
        assert s.schema_version_found == 5
        state = s.metrics.state(run["id"])
        assert (state.params, state.metrics_offset, state.params_offset, state.log_offset) == ({"lr": 0.1}, 7, 9, 4096)
        assert s.metrics.params([run["id"]]) == {run["id"]: {"lr": 0.1}}
    finally:
        s.close()


# ---- platform config ----------------------------------------------------------------
def test_config_versions_increase(store: Store) -> None:
    assert store.get_config() == (None, 0)
    body1 = {"queues": [{"name": "q", "limits": {"gpu": 2}}], "admins": ["ops"]}
    body2 = {"queues": [], "nested": {"a": [1, 2.5, None, True, "ü"]}}
    assert store.put_config(body1, source="platform.yaml", by="config_file", at=T0) == 1
    assert store.get_config() == (body1, 1)
    assert store.put_config(body2, source="api", by="ops", at=T0 + 1) == 2
    assert store.get_config() == (body2, 2)
    assert store.put_config(body1, source="api", by="ops", at=T0 + 2) == 3
    assert store.get_config() == (body1, 3)
    with store.engine.connect() as conn:
        rows = conn.execute(
            select(schema.config.c.version, schema.config.c.source, schema.config.c.applied_by).order_by(
                schema.config.c.version
            )
        ).all()
    assert rows == [(1, "platform.yaml", "config_file"), (2, "api", "ops"), (3, "api", "ops")]


# ---- runs and their timeline --------------------------------------------------------------
def test_create_transition_and_timeline(store: Store) -> None:
    run = create(store, name="train-1", memory_bytes=128 * GI)
    assert run["seq"] >= 1
    assert len(run["event_ids"]) == 2 and run["event_ids"][0] < run["event_ids"][1]
    got = store.get_run(run["id"])
    assert got is not None
    for k, v in run.items():
        if k != "event_ids":
            assert got[k] == v, k
    assert got["devices"] is None and got["handle"] is None and got["exit_code"] is None
    assert got["reason"] == "Submitted" and got["stop_requested_by"] is None
    assert [e["status"] for e in got["timeline"]] == ["created", "queued"]

    ids = list(run["event_ids"])
    rid, proj = run["id"], run["project"]
    ids.append(
        store.transition(
            rid,
            proj,
            {
                "status": "dispatched",
                "reason": "Admitted",
                "devices": [2, 3],
                "dispatched_at": T0 + 1,
                "updated_at": T0 + 1,
            },
            ev("dispatched", "Admitted", "admitted to team-a-train", T0 + 1),
        )
    )
    handle = {"pid": 4242, "pgid": 4242, "log": "/tmp/x.log"}
    ids.append(
        store.transition(
            rid,
            proj,
            {"status": "running", "handle": handle, "started_at": T0 + 2, "updated_at": T0 + 2},
            {**ev("running", "Started", "", T0 + 2), "details": {"raw": "pod started", "nodes": [1, 2]}},
        )
    )
    # fields without an event: updated, no timeline entry, no id
    assert store.transition(rid, proj, {"message": "still going"}, None) is None
    ids.append(
        store.transition(
            rid,
            proj,
            {"status": "succeeded", "reason": "Completed", "exit_code": 0, "finished_at": T0 + 3, "updated_at": T0 + 3},
            ev("succeeded", "Completed", "exit code 0", T0 + 3),
        )
    )
    assert all(isinstance(i, int) for i in ids)
    assert ids == sorted(ids) and len(set(ids)) == len(ids)

    got = store.get_run(rid)
    assert got is not None
    assert got["status"] == "succeeded" and got["reason"] == "Completed" and got["exit_code"] == 0
    assert got["devices"] == [2, 3] and got["handle"] == handle
    assert got["message"] == "still going"
    assert (got["created_at"], got["dispatched_at"], got["started_at"], got["finished_at"]) == (
        T0,
        T0 + 1,
        T0 + 2,
        T0 + 3,
    )
    assert [e["status"] for e in got["timeline"]] == ["created", "queued", "dispatched", "running", "succeeded"]
    assert [e["id"] for e in got["timeline"]] == ids
    assert got["timeline"][2] == {"id": ids[2], "status": "dispatched", "reason": "Admitted",
                                  "message": "admitted to team-a-train", "at": T0 + 1, "details": None}  # fmt: skip
    assert got["timeline"][3]["reason"] == "Started" and got["timeline"][3]["message"] == ""
    assert got["timeline"][3]["details"] == {"raw": "pod started", "nodes": [1, 2]}
    assert store.get_run("nope") is None
    assert store.count_runs() == 1


def test_timelines_of_interleaved_runs_stay_separate(store: Store) -> None:
    a, b = create(store), create(store)
    for i in range(3):
        store.transition(a["id"], a["project"], {"message": f"a{i}"}, ev("queued", "QueueConcurrency", f"a{i}"))
        store.transition(b["id"], b["project"], {"message": f"b{i}"}, ev("queued", "QueueQuota", f"b{i}"))
    ta = store.get_run(a["id"])["timeline"]
    tb = store.get_run(b["id"])["timeline"]
    assert [e["message"] for e in ta[2:]] == ["a0", "a1", "a2"]
    assert [e["message"] for e in tb[2:]] == ["b0", "b1", "b2"]
    assert [e["id"] for e in ta] == sorted(e["id"] for e in ta)


def test_duplicate_run_id_is_rejected_atomically(store: Store) -> None:
    run = create(store)
    dup = {**run_row(), "id": run["id"]}
    with pytest.raises(IntegrityError):
        store.create_run(dup, submit_events("alice", "team-a-train"))
    assert store.count_runs() == 1
    assert len(store.get_run(run["id"])["timeline"]) == 2
    assert store.last_event_id() == run["event_ids"][-1]


def test_failed_transition_rolls_back_the_run_update(store: Store) -> None:
    run = create(store)
    before = store.get_run(run["id"])
    with pytest.raises(IntegrityError):
        store.transition(
            run["id"],
            run["project"],
            {"status": "running", "reason": "Started", "updated_at": T0 + 9},
            {"status": None, "reason": "Started", "message": "", "at": T0 + 9},
        )
    assert store.get_run(run["id"]) == before, "the run update must roll back with the failed event"
    assert store.last_event_id() == run["event_ids"][-1]
    # the store is still usable afterwards (the connection was returned clean)
    assert store.transition(run["id"], run["project"], {"status": "dispatched"}, ev("dispatched")) is not None
    assert store.get_run(run["id"])["status"] == "dispatched"


def test_failed_create_inserts_nothing(store: Store) -> None:
    row = run_row()
    with pytest.raises(IntegrityError):
        store.create_run(row, [ev("created"), {"status": None, "reason": "", "message": "", "at": T0}])
    assert store.get_run(row["id"]) is None
    assert store.count_runs() == 0 and store.last_event_id() == 0


def test_failed_append_events_inserts_none(store: Store) -> None:
    run = create(store)
    with pytest.raises(IntegrityError):
        store.append_events(
            {run["id"]: run["project"]},
            [(run["id"], ev("queued", "QueuePaused")), (run["id"], {**ev("queued"), "at": None})],
        )
    assert store.last_event_id() == run["event_ids"][-1]
    ids = store.append_events(
        {run["id"]: run["project"]}, [(run["id"], ev("queued", "QueuePaused")), (run["id"], ev("queued", "UserLimit"))]
    )
    assert len(ids) == 2 and ids[0] < ids[1] and ids[0] > run["event_ids"][-1]
    assert [e["reason"] for e in store.get_run(run["id"])["timeline"]][-2:] == ["QueuePaused", "UserLimit"]


# ---- listing ------------------------------------------------------------------------------
def test_list_runs_newest_first_with_filters(store: Store) -> None:
    r1 = create(store, project="team-a", user="alice", queue="team-a-train", name="alpha")
    r2 = create(store, project="team-a", user="bob", queue="team-a-debug", name="beta")
    r3 = create(store, project="team-b", user="alice", queue="team-b-train", name="gamma")
    r4 = create(store, project="team-a", user="alice", queue="team-a-debug")
    store.transition(r1["id"], "team-a", {"status": "running"}, ev("running"))
    store.transition(r2["id"], "team-a", {"status": "succeeded"}, ev("succeeded"))

    def ids(**kw: Any) -> list[str]:
        projects = kw.pop("projects", ["team-a", "team-b"])
        return [r["id"] for r in store.list_runs(projects, **kw)]

    assert ids() == [r4["id"], r3["id"], r2["id"], r1["id"]]
    assert ids(projects=["team-a"]) == [r4["id"], r2["id"], r1["id"]]
    assert ids(projects=["team-c"]) == []
    assert ids(projects=[]) == []
    assert ids(status=["running", "succeeded"]) == [r2["id"], r1["id"]]
    assert ids(status=["queued"]) == [r4["id"], r3["id"]]
    assert ids(queue="team-a-debug") == [r4["id"], r2["id"]]
    assert ids(user="alice") == [r4["id"], r3["id"], r1["id"]]
    assert ids(user="alice", queue="team-a-debug", status=["queued"]) == [r4["id"]]
    assert ids(name_contains="a") == [r3["id"], r2["id"], r1["id"]]  # the unnamed run never matches
    assert ids(name_contains="ph") == [r1["id"]]
    assert ids(limit=2) == [r4["id"], r3["id"]]

    rows = store.list_runs(["team-a", "team-b"])
    assert "request" not in rows[0] and "provenance" not in rows[0]
    assert rows[0]["presets"] == ["single-gpu"]  # from the request, without the whole request
    assert rows[-1]["seq"] == r1["seq"] and rows[-1]["status"] == "running" and rows[-1]["resolved"]["kind"] == "job"


def test_list_runs_by_notebook_lists_a_notebooks_sessions_ended_ones_too(store: Store) -> None:
    """`GET runs?notebook=`: what a reopened notebook asks (has its lease ended, and why)."""

    def session(notebook: str | None, status: str) -> str:
        row = run_row(status=status)
        row["kind"] = "session"
        row["resolved"] = {**row["resolved"], "kind": "session", "session": {"notebook": notebook}}
        return store.create_run(row, submit_events(row["user"], row["queue"]))[0] and row["id"]

    old = session("exp/a.ipynb", "stopped")
    new = session("exp/a.ipynb", "queued")
    session("exp/b.ipynb", "queued")
    session(None, "queued")
    create(store, name="exp/a.ipynb")  # a job named like the notebook is not its session

    assert [r["id"] for r in store.list_runs(["team-a"], notebook="exp/a.ipynb")] == [new, old]
    assert [r["id"] for r in store.list_runs(["team-a"], notebook="exp/a.ipynb", limit=1)] == [new]
    assert store.list_runs(["team-a"], notebook="a.ipynb") == []


def test_list_runs_name_contains_matches_wildcards_literally(store: Store) -> None:
    names = ["50%_done", "50x_done", "a_b", "axb", "100%", "1000", "x/y", "xy", "back\\slash", "backslash"]
    by_name = {n: create(store, name=n)["id"] for n in names}

    def match(needle: str) -> set[str]:
        return {r["name"] for r in store.list_runs(["team-a"], name_contains=needle)}

    assert match("%") == {"50%_done", "100%"}
    assert match("_") == {"50%_done", "50x_done", "a_b"}
    assert match("%_") == {"50%_done"}
    assert match("a_b") == {"a_b"}
    assert match("0%") == {"50%_done", "100%"}
    assert match("/") == {"x/y"}
    assert match("\\") == {"back\\slash"}
    assert match("x/y") == {"x/y"}
    assert len(by_name) == len(names)


def test_keyset_pagination_has_no_duplicates_or_gaps(store: Store) -> None:
    made = []
    for i in range(23):
        made.append(create(store, project="team-a" if i % 3 else "team-b", user="alice" if i % 2 else "bob"))
    expected = [r["id"] for r in sorted(made, key=lambda r: r["seq"], reverse=True)]

    def pages(page: int, **kw: Any) -> list[list[dict[str, Any]]]:
        out: list[list[dict[str, Any]]] = []
        before = None
        while True:
            rows = store.list_runs(["team-a", "team-b"], before_seq=before, limit=page, **kw)
            if not rows:
                return out
            out.append(rows)
            before = rows[-1]["seq"]

    for page in (1, 5, 7, 23, 100):
        got = pages(page)
        flat = [r["id"] for p in got for r in p]
        assert flat == expected, page
        assert all(len(p) == page for p in got[:-1])
    # A run submitted while paging does not shift later pages (keyset, not offset).
    first = store.list_runs(["team-a", "team-b"], limit=5)
    create(store)
    second = store.list_runs(["team-a", "team-b"], before_seq=first[-1]["seq"], limit=5)
    assert [r["id"] for r in first + second] == expected[:10]
    # Pagination composes with filters.
    bobs = [r["id"] for p in pages(4, user="bob") for r in p]
    assert bobs == [r["id"] for r in sorted(made, key=lambda r: -r["seq"]) if r["user"] == "bob"]


# ---- active runs, briefs, events ---------------------------------------------------------
def test_active_runs_are_the_unfinished_ones_in_submission_order(store: Store) -> None:
    final_for = {1: "succeeded", 3: "failed", 5: "stopped"}
    made = [create(store, project=f"p{i % 2}") for i in range(7)]
    for i, r in enumerate(made):
        if i in final_for:
            store.transition(r["id"], r["project"], {"status": final_for[i]}, ev(final_for[i]))
        elif i == 4:
            store.transition(r["id"], r["project"], {"status": "stopping"}, ev("stopping"))
        elif i == 6:
            store.transition(r["id"], r["project"], {"status": "running", "devices": [0]}, ev("running"))
    active = store.active_runs()
    assert [r["id"] for r in active] == [made[i]["id"] for i in (0, 2, 4, 6)]
    assert [r["status"] for r in active] == ["queued", "queued", "stopping", "running"]
    assert active[-1]["devices"] == [0]
    assert {"seq", "memory_bytes", "resolved", "handle", "stop_requested_by", "queued_at"} <= set(active[0])


def test_runs_brief(store: Store) -> None:
    a = create(store, name="a", user="alice")
    b = create(store, name=None, user="bob", project="team-b", queue="team-b-train", gpu=2)
    store.transition(b["id"], "team-b", {"status": "running", "devices": [1, 2]}, ev("running"))
    assert store.runs_brief([]) == {}
    brief = store.runs_brief([a["id"], b["id"], "missing"])
    assert set(brief) == {a["id"], b["id"]}
    assert brief[b["id"]] == {
        "id": b["id"],
        "name": None,
        "user": "bob",
        "project": "team-b",
        "status": "running",
        "gpu": 2,
        "devices": [1, 2],
        "queue": "team-b-train",
    }
    assert brief[a["id"]]["devices"] is None and brief[a["id"]]["status"] == "queued"


def test_events_since_and_last_event_id(store: Store) -> None:
    assert store.last_event_id() == 0
    assert store.events_since(0, None) == []
    a = create(store, project="team-a", name="na", user="alice", queue="qa")
    b = create(store, project="team-b", name="nb", user="bob", queue="qb")
    c_id = store.transition(a["id"], "team-a", {"status": "dispatched"}, ev("dispatched", "Admitted", "go", T0 + 5))
    all_ids = [*a["event_ids"], *b["event_ids"], c_id]
    assert store.last_event_id() == max(all_ids)

    evs = store.events_since(0, None)
    assert [e["id"] for e in evs] == sorted(all_ids)
    assert evs[-1] == {
        "id": c_id,
        "run_id": a["id"],
        "project": "team-a",
        "status": "dispatched",
        "reason": "Admitted",
        "message": "go",
        "at": T0 + 5,
        "queue": "qa",
        "user": "alice",
        "name": "na",
    }
    assert [e["id"] for e in store.events_since(a["event_ids"][-1], None)] == [*b["event_ids"], c_id]
    assert [e["id"] for e in store.events_since(0, ["team-a"])] == [*a["event_ids"], c_id]
    assert [e["id"] for e in store.events_since(0, ["team-b"])] == b["event_ids"]
    assert store.events_since(0, []) == []
    assert store.events_since(0, ["nobody"]) == []
    assert [e["id"] for e in store.events_since(0, None, limit=2)] == sorted(all_ids)[:2]
    # limit applies after the project filter: two team-a events, not "team-a among the first two"
    assert [e["id"] for e in store.events_since(0, ["team-a"], limit=2)] == a["event_ids"]
    assert store.events_since(store.last_event_id(), None) == []


def test_two_stores_on_one_database_see_each_other(store: Store) -> None:
    other = Store(store.url)
    try:
        assert other.schema_version_found == migrations.LATEST
        run = create(store)
        assert other.get_run(run["id"])["status"] == "queued"
        other.transition(run["id"], run["project"], {"status": "stopped"}, ev("stopped"))
        assert store.get_run(run["id"])["status"] == "stopped"
        assert store.active_runs() == []
    finally:
        other.close()


# ---- the real server on PostgreSQL ---------------------------------------------------------
@pytest.fixture
def jp_server_config(jp_server_config: dict[str, Any], pg_db_url: str) -> dict[str, Any]:
    """This module only: the Jupyter server's store lives in a fresh PostgreSQL database."""
    cfg = dict(jp_server_config)
    cfg["GpuPlat"] = {**cfg["GpuPlat"], "db_url": pg_db_url}
    return cfg


async def test_server_runs_on_postgresql(api: Any, platform: Any, pg_db_url: str) -> None:
    assert platform.store.url == pg_db_url
    assert platform.store.engine.dialect.name == "postgresql"
    run = await api.submit(command="true", name="pg-e2e")
    assert run["status"] == "queued"
    done = await api.wait_status(run["id"], "succeeded")
    assert done["exit_code"] == 0
    assert [e["status"] for e in done["timeline"]] == ["created", "queued", "dispatched", "running", "succeeded"]
    listing = await api.ok("GET", "runs", q="pg-e2e")
    assert [r["id"] for r in listing["runs"]] == [run["id"]]
    # the rows really are in PostgreSQL
    with platform.store.engine.connect() as conn:
        assert conn.execute(select(schema.runs.c.status).where(schema.runs.c.id == run["id"])).scalar_one() == (
            "succeeded"
        )


def test_metrics_append_takes_the_write_lock_before_it_reads(tmp_path: Path) -> None:
    """A write between the append's read and its write must wait, not make SQLite refuse the append.

    In WAL mode a deferred transaction that has read cannot write once another connection has
    committed since: SQLite answers "database is locked" at once, whatever the busy timeout.
    """
    db = tmp_path / "g.db"
    s = Store(f"sqlite:///{db}")
    other = sqlite3.connect(db, timeout=0, isolation_level=None)
    seen: list[str] = []

    @event.listens_for(s.engine, "before_cursor_execute")
    def _write_in_between(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if not seen and statement.lstrip().upper().startswith("INSERT INTO GPUPLAT_METRIC_CHUNKS"):
            try:  # another writer (a second server, a sqlite3 shell) between the read and the write
                other.execute("INSERT INTO gpuplat_meta (key, value) VALUES ('other', 'x')")
                seen.append("the other writer got in")
            except sqlite3.OperationalError:
                seen.append("the other writer waited")

    try:
        run = create(s)
        steps, values = np.arange(3, dtype=np.int64), np.array([1.0, 0.5, 0.25])
        s.metrics.append(run["id"], {"loss": (steps, values)}, params={}, metrics_offset=10, params_offset=0)
        assert seen == ["the other writer waited"]
        got_steps, got_values = s.metrics.series(run["id"])["loss"]
        assert got_steps.tolist() == [0, 1, 2] and got_values.tolist() == [1.0, 0.5, 0.25]
    finally:
        other.close()
        s.close()
