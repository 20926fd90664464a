"""Faults of the machine: the database locked or down for a while, the disk full.

Clear errors to clients (503 StoreUnavailable with Retry-After, nothing changed), nothing the
executor observed is lost (kept and written once the store answers), admissions that could not
be saved are taken back and decided again, runs that cannot start for a full disk say so
(DiskFull), and everything recovers when the fault clears. The faults are real: a second
SQLite connection holding the write lock, a real PostgreSQL server stopped and started again,
a real tmpfs filled to the last byte.
"""

from __future__ import annotations

import asyncio
import errno
import os
import sqlite3
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from jupyter_gpuplat.executors.fake import FakeExecutor, Script
from jupyter_gpuplat.store import StoreUnavailable

from ..conftest import Api
from ..fake_engine import Harness, config
from ..pg import LocalCluster, _wait_ready
from ..waiting import wait_for

BUSY = 0.2  # seconds a write waits for the lock before it is refused


@contextmanager
def write_lock(db: Path) -> Iterator[sqlite3.Connection]:
    """Another writer holds the SQLite file's write lock (as a `sqlite3` shell or a copy job would)."""
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    finally:
        conn.execute("ROLLBACK")
        conn.close()


@pytest.fixture
def harness(tmp_path: Path, jp_asyncio_loop: asyncio.AbstractEventLoop) -> Iterator[Harness]:
    h = Harness(tmp_path, FakeExecutor(gpus=4), busy_timeout_seconds=BUSY)
    jp_asyncio_loop.run_until_complete(h.start(config([{"name": "q", "concurrency": 1}])))
    yield h
    jp_asyncio_loop.run_until_complete(h.close())


def db_of(h: Harness) -> Path:
    return h.tmp / "gpuplat.db"


# ---- engine: a locked SQLite file -----------------------------------------------------------


async def test_submit_while_locked_is_refused_and_creates_nothing(harness: Harness) -> None:
    h = harness
    q = h.engine.queues["q"]
    with write_lock(db_of(h)):
        with pytest.raises(StoreUnavailable) as err:
            h.submit()
        assert err.value.status == 503
        assert "database is locked" in err.value.message
        assert "nothing was changed" in err.value.hint
    assert h.store.count_runs() == 0
    assert not h.engine.active and q.pending_count == 0
    rid = h.submit()
    await h.settle()
    assert h.status(rid) == "running"


async def test_a_cycle_that_cannot_be_saved_is_taken_back_and_decided_again(harness: Harness) -> None:
    h = harness
    q = h.engine.queues["q"]
    rid = h.submit()
    with write_lock(db_of(h)):
        await h.settle()  # the cycle admits rid in memory, cannot save it, and takes it back
        assert h.status(rid) == "queued"
        assert [e["status"] for e in h.timeline(rid)] == ["created", "queued"]
        assert q.pending_count == 1 and not q.held
        assert h.engine.state.free_devices == {0, 1, 2, 3}
        assert h.engine.active[rid].devices == ()
        assert rid not in h.ex.launched
        assert h.engine.state.deferred.fault is not None
    # The retry (a timer) decides again once the store answers.
    await wait_for(lambda: _status_is(h, rid, "running"), 10, f"{rid} dispatched after the lock")
    assert [s for s, _ in h.assert_timeline_valid(rid)].count("dispatched") == 1
    assert h.engine.state.deferred.fault is None


async def _status_is(h: Harness, rid: str, status: str) -> bool:
    await h.settle()
    return h.status(rid) == status


async def test_what_the_executor_observes_during_an_outage_is_recorded_after_it(harness: Harness) -> None:
    h = harness
    h.ex.scripts["first"] = Script.succeeds(after=10)
    first = h.submit(name="first")
    await h.settle()
    second = h.submit()  # waits: concurrency 1
    await h.settle()
    assert h.statuses(first, second) == ["running", "queued"]
    with write_lock(db_of(h)):
        assert h.ex.advance(10) == 1  # `first` succeeded: the store cannot take it now
        await h.engine.settle()
        assert h.status(first) == "running"  # the record is behind, never ahead ...
        assert len(h.engine.state.deferred) == 1  # ... and the fact is kept
        assert first in h.engine.active and second not in h.ex.launched
    await wait_for(lambda: _status_is(h, second, "running"), 10, "the kept observation written, then the next run")
    tl = h.assert_timeline_valid(first)
    assert [s for s, _ in tl].count("succeeded") == 1
    assert h.status(first) == "succeeded"
    assert len(h.engine.state.deferred) == 0


async def test_stop_while_locked_is_refused_and_changes_nothing(harness: Harness) -> None:
    h = harness
    h.ex.scripts["long"] = Script.never_ends()
    rid = h.submit(name="long")
    await h.settle()
    with write_lock(db_of(h)):
        with pytest.raises(StoreUnavailable):
            await h.engine.stop("bob", rid)
    assert h.engine.active[rid].stop_requested_by is None
    assert h.status(rid) == "running"
    await h.engine.stop("bob", rid)
    await h.advance()
    assert h.status(rid) == "stopped"


# ---- engine: PostgreSQL down for a while -----------------------------------------------------


def _pg_ctl(cluster: LocalCluster, *args: str) -> None:
    res = cluster._run(str(cluster.bindir / "pg_ctl"), *args, "-D", str(cluster.data), "-w", "-t", "60")
    assert res.returncode == 0, (res.stdout, res.stderr)


@pytest.mark.postgres  # starts a PostgreSQL server of its own (LocalCluster), not pg_url
async def test_postgresql_down_for_a_while_loses_nothing(tmp_path: Path) -> None:
    cluster = LocalCluster()
    try:
        url = cluster.start()
        _wait_ready(url)
        h = Harness(tmp_path, FakeExecutor(gpus=4), db_url=url)
        await h.start(config([{"name": "q", "concurrency": 1}]))
        h.ex.scripts["first"] = Script.succeeds(after=10)
        first = h.submit(name="first")
        await h.settle()
        second = h.submit()
        await h.settle()
        _pg_ctl(cluster, "stop", "-m", "fast")
        with pytest.raises(StoreUnavailable) as err:
            h.submit()
        assert "the platform cannot save or read its state right now" in err.value.message
        assert h.ex.advance(10) == 1
        await h.engine.settle()
        assert len(h.engine.state.deferred) == 1
        opts = f"-h 127.0.0.1 -p {cluster.port} -k {cluster.sock} -c fsync=off"
        _pg_ctl(cluster, "start", "-l", str(cluster.log), "-o", opts)
        await wait_for(lambda: _status_is(h, second, "running"), 30, "recovery after PostgreSQL came back")
        assert h.status(first) == "succeeded"
        assert h.store.count_runs() == 2  # the refused submit created nothing
        await h.close()
    finally:
        cluster.stop()


# ---- the REST API: clear errors, nothing changed ----------------------------------------------

TINY = "64k"


def mount_tmpfs(path: Path, size: str) -> None:
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], check=True)


def fill(path: Path) -> Path:
    """Write into `path` until its file system is full; the filler is returned to free it again."""
    filler = path / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
    try:
        while os.write(fd, b"\0" * 4096):
            pass
    except OSError as exc:
        assert exc.errno == errno.ENOSPC
    finally:
        os.close(fd)
    return filler


@pytest.fixture
def disks(tmp_path: Path) -> Iterator[dict[str, Path]]:
    """Two tiny real file systems: one for the artifacts, one for the database."""
    out = {"artifacts": tmp_path / "artifacts-disk", "db": tmp_path / "db-disk"}
    mounted = []
    try:
        for p in out.values():
            mount_tmpfs(p, "1m" if p.name == "db-disk" else TINY)
            mounted.append(p)
        yield out
    finally:
        for p in mounted:
            subprocess.run(["umount", "-l", str(p)], check=False)


@pytest.fixture
def jp_server_config(jp_server_config: dict[str, Any], disks: dict[str, Path]) -> dict[str, Any]:
    jp_server_config["GpuPlat"].update(
        db_url=f"sqlite:///{disks['db'] / 'gpuplat.db'}",
        artifacts_root=str(disks["artifacts"]),
        db_busy_timeout_seconds=BUSY,
        min_free_artifacts_bytes=16 * 1024,
    )
    return jp_server_config


async def test_api_answers_503_while_the_database_is_locked(api: Api, disks: dict[str, Path]) -> None:
    before = await api.ok("GET", "runs", "alice")
    with write_lock(disks["db"] / "gpuplat.db"):
        code, body = await api("POST", "runs", "alice", {"project": "team-a", "command": ["true"]})
        assert code == 503, body
        assert body["error"]["code"] == "StoreUnavailable"
        assert "database is locked" in body["error"]["message"]
        assert "retry" in body["error"]["hint"]
        code, body = await api("POST", "queues/team-a-train/pause", "ops")
        assert code == 503, body
        # Reads go on: SQLite's WAL lets readers past a writer.
        code, runs = await api("GET", "runs", "alice")
        assert code == 200 and runs["runs"] == before["runs"]
    after = await api.ok("GET", "runs", "alice")
    assert after["runs"] == before["runs"]
    queues = await api.ok("GET", "queues", "ops")
    assert not next(q for q in queues["queues"] if q["name"] == "team-a-train")["paused"]
    run = await api.submit(command=["true"])
    await api.wait_status(run["id"], "succeeded")


async def test_retry_after_header_on_503(jp_fetch: Any, disks: dict[str, Path]) -> None:
    with write_lock(disks["db"] / "gpuplat.db"):
        resp = await jp_fetch(
            "gpuplat", "api", "runs", method="POST", raise_error=False,
            body=b'{"project": "team-a", "command": ["true"]}', headers={"Authorization": "token tok-alice"},
        )  # fmt: skip
    assert resp.code == 503
    assert int(resp.headers["Retry-After"]) > 0


async def test_full_artifacts_disk_fails_the_run_with_disk_full_then_recovers(api: Api, disks: dict[str, Path]) -> None:
    filler = fill(disks["artifacts"])
    run = await api.submit(command=["true"])
    done = await api.wait_status(run["id"], "failed")
    assert done["reason"] == "DiskFull", (done["message"], done["timeline"])
    assert "the artifacts disk is full" in done["message"] and "free space" in done["message"]
    assert done["exit_code"] is None and done["started_at"] is None  # it never ran
    explained = await api.ok("GET", f"runs/{run['id']}/explain")
    assert explained["reason"] == "DiskFull"
    filler.unlink()
    again = await api.submit(command=["true"])
    assert (await api.wait_status(again["id"], "succeeded"))["reason"] == "Completed"


async def test_full_database_disk_answers_503_and_changes_nothing(api: Api, disks: dict[str, Path]) -> None:
    before = await api.ok("GET", "runs", "alice")
    filler = fill(disks["db"])
    codes = []
    for _ in range(3):  # a few writes: SQLite may still have a free page or two
        code, body = await api("POST", "runs", "alice", {"project": "team-a", "command": ["true"]})
        codes.append(code)
        if code == 503:
            assert body["error"]["code"] == "StoreUnavailable"
            assert "full" in body["error"]["message"]
    assert 503 in codes and set(codes) <= {201, 503}, codes
    filler.unlink()
    run = await api.submit(command=["true"])
    await api.wait_status(run["id"], "succeeded")
    after = await api.ok("GET", "runs", "alice")
    # Only what got a 201 exists: the refused ones left nothing.
    assert len(after["runs"]) == len(before["runs"]) + codes.count(201) + 1
