"""`gpuplat db copy`: an embedded SQLite store used by a real server, copied into real PostgreSQL.

Every row and id survives (events.id is the SSE resume id), a client resuming the events stream
from a server on the copy misses nothing and sees nothing twice, and new rows get fresh ids.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from sqlalchemy import JSON, Text, cast, func, select, text

from jupyter_gpuplat.store import Store, migrations, schema
from jupyter_gpuplat.store.copy import TABLES, CopyError, copy_database
from jupyter_gpuplat.store.faults import StoreUnavailable
from jupyter_gpuplat.store.store import make_engine

from ..server import ServerProcess

PY = sys.executable
TRAIN = """
from jupyter_gpuplat import tracking
tracking.log_params(lr=0.1, arch="resnet")
for step in range(20):
    tracking.log_metrics(step=step, loss=1.0 / (step + 1))
"""


class SSE:
    """A client of /gpuplat/api/events reading one event at a time (blocking, with a read timeout)."""

    def __init__(self, srv: ServerProcess, last_event_id: int = 0) -> None:
        headers = {"Authorization": "token tok-alice", "Last-Event-ID": str(last_event_id)}
        self.resp = requests.get(f"{srv.url}gpuplat/api/events", headers=headers, stream=True, timeout=30)
        assert self.resp.status_code == 200, self.resp.text
        self.lines = self.resp.iter_lines(decode_unicode=True)

    def next(self) -> dict[str, str]:
        ev: dict[str, str] = {}
        for line in self.lines:
            if not line:
                if ev:
                    return ev
                continue
            if line.startswith(":"):
                continue
            key, _, value = line.partition(": ")
            ev[key] = value
        raise AssertionError("the events stream ended")

    def until_ready(self) -> list[tuple[int, dict[str, Any]]]:
        """The backlog: (id, event) of each status event before `ready`."""
        got = []
        while (ev := self.next()).get("event") != "ready":
            assert ev["event"] == "status", ev
            got.append((int(ev["id"]), json.loads(ev["data"])))
        return got

    def close(self) -> None:
        self.resp.close()


def rows(url: str) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every copied table in primary-key order; JSON as its text (SQL NULL stays None)."""
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            out = {}
            for t in TABLES:
                cols = [cast(c, Text) if isinstance(c.type, JSON) else c for c in t.c]
                out[t.name] = [tuple(r) for r in conn.execute(select(*cols).order_by(*t.primary_key.columns))]
            return out
    finally:
        engine.dispose()


def dbcli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PY, "-m", "jupyter_gpuplat.cli.db", *args], capture_output=True, text=True, timeout=300)


@pytest.fixture
def servers() -> Iterator[list[ServerProcess]]:
    made: list[ServerProcess] = []
    yield made
    for srv in made:
        srv.stop()


def test_copy_of_a_used_store_keeps_every_id_and_the_events_stream_resumes(
    tmp_path: Path, pg_db_url: str, servers: list[ServerProcess]
) -> None:
    embedded = ServerProcess(tmp_path / "embedded")
    servers.append(embedded)
    embedded.start()
    ids = [
        embedded.ok("POST", "runs", body={"project": "team-a", "name": f"r{i}", "command": [PY, "-c", TRAIN]})["id"]
        for i in range(3)
    ]
    ids.append(
        embedded.ok("POST", "runs", body={"project": "team-a", "command": [PY, "-c", "raise SystemExit(3)"]})["id"]
    )
    for rid in ids[:3]:
        embedded.wait_status(rid, "succeeded")
        assert embedded.ok("GET", f"runs/{rid}/metrics")["loss"]["steps"] == list(range(20))  # indexed into the store
    embedded.wait_status(ids[3], "failed")
    code, _ = embedded.call("POST", "runs", body={"project": "team-a", "command": [PY], "resources": {"gpu": 99}})
    assert code in (403, 422)  # a refused submit: recorded in gpuplat_refusals, which the copy carries too
    # A client followed the events stream, then went away halfway through.
    client = SSE(embedded)
    seen = client.until_ready()
    client.close()
    assert len(seen) >= 4 * 5 and [i for i, _ in seen] == sorted({i for i, _ in seen})
    held = seen[len(seen) // 2][0]
    embedded.stop()

    sqlite_url = f"sqlite:///{embedded.root / 'gpuplat.db'}"
    before = rows(sqlite_url)
    assert all(before[t.name] for t in TABLES), {k: len(v) for k, v in before.items()}  # every table has rows
    done = dbcli("copy", "--from", sqlite_url, "--to", pg_db_url)
    assert done.returncode == 0, done.stderr
    for name, table_rows in before.items():
        assert f"{name}: {len(table_rows)} rows" in done.stdout
    assert "copied: the counts match" in done.stdout
    after = rows(pg_db_url)
    assert after == before  # every row, every id, every JSON text: counts equal and more
    assert [r[0] for r in after["gpuplat_events"]] == [i for i, _ in seen]

    team = ServerProcess(
        tmp_path / "team",
        extra_config={"GpuPlat": {"db_url": pg_db_url, "artifacts_root": str(embedded.root / "artifacts")}},
    )
    servers.append(team)
    team.start()
    # The client resumes from the id it held: exactly what it had not seen, nothing twice.
    client = SSE(team, last_event_id=held)
    backlog = client.until_ready()
    assert backlog == [(i, ev) for i, ev in seen if i > held]
    # A new run: a fresh seq and id, and event ids after every copied one, delivered live on the same stream.
    new = team.ok("POST", "runs", body={"project": "team-a", "command": ["true"]})
    live = []
    while not live or live[-1][1]["status"] != "succeeded":
        ev = client.next()
        if ev.get("event") == "status":
            live.append((int(ev["id"]), json.loads(ev["data"])))
    client.close()
    assert {ev["run_id"] for _, ev in live} == {new["id"]} and new["id"] not in ids
    assert [ev["status"] for _, ev in live] == ["created", "queued", "dispatched", "running", "succeeded"]
    live_ids = [i for i, _ in live]
    assert live_ids == sorted(live_ids) and live_ids[0] > seen[-1][0]
    engine = make_engine(pg_db_url)
    try:
        with engine.connect() as conn:
            seq = conn.execute(select(schema.runs.c.seq).where(schema.runs.c.id == new["id"])).scalar_one()
        assert seq == max(r[0] for r in before["gpuplat_runs"]) + 1
    finally:
        engine.dispose()
    # The copied runs read back whole through the new server.
    assert team.ok("GET", f"runs/{ids[0]}")["status"] == "succeeded"
    assert team.ok("GET", f"runs/{ids[0]}/metrics")["loss"]["steps"] == list(range(20))
    assert team.ok("GET", f"runs/{ids[3]}")["exit_code"] == 3


def _populate(url: str, runs: int, events_per_run: int) -> None:
    s = Store(url)
    try:
        batch = 1_000
        for start in range(0, runs, batch):
            rows_, evs = [], []
            for i in range(start, min(start + batch, runs)):
                rows_.append(
                    {
                        "id": f"r{i:07d}",
                        "project": "team-a",
                        "user": "alice",
                        "kind": "job",
                        "queue": "q",
                        "status": "succeeded",
                        "request": {"project": "team-a", "command": ["true"]},
                        "resolved": {"kind": "job"},
                        "provenance": {},
                        "created_at": 1.5 + i,
                        "updated_at": 1.5 + i,
                    }
                )
                evs.append(
                    [
                        {"status": "queued", "reason": "Submitted", "message": f"e{k}", "at": 1.5 + i, "details": None}
                        for k in range(events_per_run)
                    ]
                )
            s.create_runs(rows_, evs)
    finally:
        s.close()


def test_copy_of_100k_events_is_fast_and_the_next_ids_follow(tmp_path: Path, pg_db_url: str) -> None:
    src = f"sqlite:///{tmp_path / 'big.db'}"
    _populate(src, runs=20_000, events_per_run=5)
    said: list[str] = []
    t0 = time.perf_counter()
    counts = copy_database(src, pg_db_url, log=said.append)
    took = time.perf_counter() - t0
    assert counts["gpuplat_runs"] == 20_000 and counts["gpuplat_events"] == 100_000
    assert "gpuplat_events: 100000 rows" in said
    print(f"\ncopied 20,000 runs + 100,000 events in {took:.1f} s ({100_000 / took:,.0f} events/s)")
    assert took < 30  # 1.9 s here (2 cores), COPY FROM STDIN; INSERTs took 11 s
    s = Store(pg_db_url)
    try:
        assert s.last_event_id() == 100_000
        (seq, [first]) = s.create_run(
            {
                "id": "r-after",
                "project": "team-a",
                "user": "alice",
                "kind": "job",
                "queue": "q",
                "status": "queued",
                "request": {},
                "resolved": {},
                "provenance": {},
                "created_at": 2.0,
                "updated_at": 2.0,
            },
            [{"status": "created", "reason": "", "message": "", "at": 2.0}],
        )
        assert (seq, first) == (20_001, 100_001)
    finally:
        s.close()


def test_copy_refuses_a_target_that_is_not_empty_and_changes_nothing(tmp_path: Path, pg_db_url: str) -> None:
    src = f"sqlite:///{tmp_path / 'a.db'}"
    _populate(src, runs=3, events_per_run=2)
    copy_database(src, pg_db_url, log=lambda _: None)
    before = rows(pg_db_url)
    done = dbcli("copy", "--from", src, "--to", pg_db_url)
    assert done.returncode == 1
    assert "is not empty (gpuplat_runs 3, gpuplat_events 6 rows): copy into a new database" in done.stderr
    assert "Traceback" not in done.stderr
    assert rows(pg_db_url) == before


def test_copy_refuses_a_source_behind_the_package(tmp_path: Path, pg_db_url: str) -> None:
    src = f"sqlite:///{tmp_path / 'old.db'}"
    _populate(src, runs=1, events_per_run=1)
    engine = make_engine(src)
    with engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = '0007'"))
    engine.dispose()
    with pytest.raises(CopyError, match=f"schema version 7, not {migrations.LATEST}: run `gpuplat db upgrade"):
        copy_database(src, pg_db_url, log=lambda _: None)
    engine = make_engine(pg_db_url)
    try:
        with engine.connect() as conn:
            assert conn.execute(select(func.count()).select_from(schema.runs)).scalar() == 0
    finally:
        engine.dispose()


def test_copy_into_sqlite_keeps_rows_and_json_nulls(tmp_path: Path) -> None:
    """The other direction works too (a backup of a team store, or a test copy): INSERTs, not COPY."""
    src = f"sqlite:///{tmp_path / 'a.db'}"
    _populate(src, runs=50, events_per_run=3)
    engine = make_engine(src)
    with engine.begin() as conn:  # a SQL NULL and a JSON null in one nullable JSON column
        conn.execute(text("UPDATE gpuplat_runs SET handle = NULL WHERE id = 'r0000001'"))
        conn.execute(text("UPDATE gpuplat_runs SET handle = 'null' WHERE id = 'r0000002'"))
    engine.dispose()
    dst = f"sqlite:///{tmp_path / 'b.db'}"
    assert copy_database(src, dst, log=lambda _: None)["gpuplat_events"] == 150
    assert rows(dst) == rows(src)


def test_copy_holds_writers_of_the_source_off(tmp_path: Path, pg_db_url: str) -> None:
    """The copy reads under SQLite's write lock: while a writer holds it, the copy waits, then gives up cleanly."""
    src = f"sqlite:///{tmp_path / 'a.db'}"
    _populate(src, runs=2, events_per_run=1)
    writer = make_engine(src).execution_options(gpuplat_writes_after_reads=True)
    try:
        with writer.begin() as conn:  # BEGIN IMMEDIATE: a server in the middle of a write
            conn.execute(text("UPDATE gpuplat_runs SET status = 'failed'"))
            with pytest.raises(StoreUnavailable, match="database is locked"):
                copy_database(src, pg_db_url, log=lambda _: None, busy_timeout_seconds=0.2)
    finally:
        writer.dispose()
    assert {k: len(v) for k, v in rows(pg_db_url).items()} == {t.name: 0 for t in TABLES}
    copy_database(src, pg_db_url, log=lambda _: None)  # the writer gone, the copy goes through
    assert rows(pg_db_url) == rows(src)


def test_copy_back_from_postgresql(tmp_path: Path, pg_db_url: str) -> None:
    """A PostgreSQL source is read in one REPEATABLE READ snapshot; the rows come back as they were."""
    src = f"sqlite:///{tmp_path / 'a.db'}"
    _populate(src, runs=20, events_per_run=3)
    copy_database(src, pg_db_url, log=lambda _: None)
    back = f"sqlite:///{tmp_path / 'back.db'}"
    assert copy_database(pg_db_url, back, log=lambda _: None)["gpuplat_events"] == 60
    assert rows(back) == rows(src)
