"""The leader lock and fencing on a real PostgreSQL: one holder, a bumped epoch per takeover, late writes refused.

The holder's session is ended the three ways a control plane loses it: its backend terminated
(`pg_terminate_backend`), its process frozen (SIGSTOP: the server frees the lock after
`idle_session_timeout`), and its database unreachable (the backend frozen: the holder steps down
at its renew deadline).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import psycopg
import pytest
from sqlalchemy import event, select

from jupyter_gpuplat.core.errors import LostLeadership, NotLeader
from jupyter_gpuplat.service.team.leadership import Leadership
from jupyter_gpuplat.store import schema
from jupyter_gpuplat.store.leader import LeaderLock
from jupyter_gpuplat.store.store import Store

from ..pg import open_store, psycopg_conninfo
from ..waiting import until, wait_for


@pytest.fixture
def store(pg_db_url: str) -> Iterator[Store]:
    s = open_store(pg_db_url)
    yield s
    s.close()


@pytest.fixture
def locks(pg_db_url: str) -> Iterator[list[LeaderLock]]:
    made: list[LeaderLock] = []
    yield made
    for lock in made:
        lock.release()


def leader_row(url: str) -> tuple[int, str]:
    with psycopg.connect(psycopg_conninfo(url)) as conn:
        row = conn.execute("SELECT epoch, holder FROM gpuplat_leader WHERE id = 1").fetchone()
    assert row is not None
    return int(row[0]), str(row[1])


def backend_pids(url: str, holder: str) -> list[int]:
    with psycopg.connect(psycopg_conninfo(url), autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE application_name = %s", (f"gpuplat-leader {holder}",)
        ).fetchall()
    return [int(r[0]) for r in rows]


def terminate(url: str, holder: str) -> None:
    pids = backend_pids(url, holder)
    assert len(pids) == 1, pids
    with psycopg.connect(psycopg_conninfo(url), autocommit=True) as conn:
        # The timeout makes it wait until the backend is gone (PostgreSQL 14+).
        assert conn.execute("SELECT pg_terminate_backend(%s, 5000)", (pids[0],)).fetchone() == (True,)


def config_write(store: Store, n: int) -> int:
    return store.put_config({"n": n}, source="test", by="test", at=float(n))


def test_only_one_lock_is_held_and_each_takeover_bumps_the_epoch(store: Store, pg_db_url: str, locks: Any) -> None:
    a, b, c = (LeaderLock(pg_db_url, holder=h) for h in ("a", "b", "c"))
    locks += [a, b, c]
    assert a.try_acquire() == 1
    assert b.try_acquire() is None and c.try_acquire() is None
    assert a.try_acquire() == 1  # already ours: the same epoch, the lock not taken twice
    assert leader_row(pg_db_url) == (1, "a")
    assert a.heartbeat(2.0) and a.held

    a.release()  # one unlock frees it, though a asked twice
    assert until(lambda: b.try_acquire(), "b to take the released lock", 5) == 2
    assert c.try_acquire() is None
    assert leader_row(pg_db_url) == (2, "b")
    b.release()
    assert until(lambda: c.try_acquire(), "c to take the released lock", 5) == 3


def test_a_sqlite_url_is_refused_with_the_reason(tmp_path: Any) -> None:
    with pytest.raises(ValueError, match="needs PostgreSQL, not sqlite"):
        LeaderLock(f"sqlite:///{tmp_path}/x.db", holder="a")
    s = Store(f"sqlite:///{tmp_path}/x.db")
    try:
        with pytest.raises(ValueError, match="fencing needs the shared PostgreSQL store"):
            s.fence(1)
    finally:
        s.close()


def test_terminated_holder_is_taken_over_at_once_and_its_late_writes_are_refused(
    store: Store, pg_db_url: str, locks: Any
) -> None:
    a, b = LeaderLock(pg_db_url, holder="a"), LeaderLock(pg_db_url, holder="b")
    locks += [a, b]
    epoch = a.try_acquire()
    assert epoch == 1
    lost: list[LostLeadership] = []
    store.fence(epoch, on_lost=lost.append)
    assert store.fenced_epoch == 1
    version = config_write(store, 1)  # ours: committed
    loss = {"loss": (np.array([1]), np.array([0.5]))}
    store.metrics.append("r-1", loss, params={}, metrics_offset=1, params_offset=0)

    terminate(pg_db_url, "a")
    t0 = time.monotonic()
    assert until(lambda: b.try_acquire(), "b to take the lock of the terminated holder", 5) == 2
    assert time.monotonic() - t0 < 1.0  # at once: no lease to wait out
    assert not a.heartbeat(1.0) and a.lost

    # a does not know yet: its next writes, through its store's pool, are refused, nothing written.
    with pytest.raises(LostLeadership, match="fencing epoch 2, ours 1") as info:
        config_write(store, 2)
    assert isinstance(info.value, NotLeader) and info.value.status == 503 and info.value.code == "NotLeader"
    with pytest.raises(LostLeadership):
        store.metrics.append(
            "r-1", {"loss": (np.array([2]), np.array([0.25]))}, params={"x": 1}, metrics_offset=2, params_offset=0
        )
    with pytest.raises(LostLeadership):
        store.transition_many([("r-1", "p", {}, {"status": "running", "reason": "x", "message": "", "at": 1.0})])
    assert len(lost) == 3
    assert store.get_config() == ({"n": 1}, version)
    assert store.metrics.state("r-1").metrics_offset == 1
    assert store.metrics.series("r-1")["loss"][1].tolist() == [0.5]
    with store.engine.connect() as conn:
        assert conn.execute(select(schema.events)).first() is None

    # A refused transaction left no share lock behind: the next takeover's bump does not wait on it.
    b.release()
    c = LeaderLock(pg_db_url, holder="c")
    locks.append(c)
    assert until(lambda: c.try_acquire(), "c to take over", 5) == 3
    # An unfenced store (embedded mode, or a standby's reads) is not checked at all.
    other = Store(pg_db_url)
    try:
        config_write(other, 3)
        assert other.get_config()[0] == {"n": 3}
    finally:
        other.close()


def test_a_fenced_write_commits_while_the_epoch_is_ours_and_readers_pay_nothing(
    store: Store, pg_db_url: str, locks: Any
) -> None:
    a = LeaderLock(pg_db_url, holder="a")
    locks.append(a)
    store.fence(a.try_acquire() or 0)
    with pytest.raises(RuntimeError, match="already fenced"):
        store.fence(5)
    statements: list[str] = []
    event.listen(store.engine, "before_cursor_execute", lambda _c, _cur, stmt, *_: statements.append(stmt))
    store.get_config()
    store.list_runs(["p"])
    assert not any("gpuplat_leader" in s for s in statements)  # reads: no check
    config_write(store, 1)
    assert sum("gpuplat_leader" in s and "FOR SHARE" in s for s in statements) == 1  # one write, one check
    # A frozen leader's open transaction would hold locks the next leader waits on: the server ends it.
    with store.engine.connect() as conn:
        assert conn.exec_driver_sql("SHOW idle_in_transaction_session_timeout").scalar() == "5s"


FROZEN_HOLDER = textwrap.dedent(
    """
    import asyncio, json, sys
    from jupyter_gpuplat.core.errors import LostLeadership
    from jupyter_gpuplat.service.team.leadership import Leadership
    from jupyter_gpuplat.store.leader import LeaderLock
    from jupyter_gpuplat.store.store import Store

    url, idle = sys.argv[1], float(sys.argv[2])
    store = Store(url)

    def say(**kw):
        print(json.dumps(kw), flush=True)

    async def elected(epoch):
        store.fence(epoch)
        store.put_config({"by": "frozen"}, source="t", by="frozen", at=1.0)
        say(elected=epoch)

    async def deposed(reason):
        try:
            store.put_config({"by": "late"}, source="t", by="frozen", at=2.0)
            say(deposed=reason, late_write="committed")
        except LostLeadership as exc:
            say(deposed=reason, late_write="refused", error=exc.message)

    lock = LeaderLock(url, holder="frozen", idle_timeout_seconds=idle)
    asyncio.run(Leadership(lock, retry_seconds=0.1, renew_seconds=0.2, renew_deadline_seconds=idle * 0.6,
                           on_elected=elected, on_deposed=deposed).run())
    """
)


def test_a_frozen_holder_is_freed_by_the_server_then_its_late_write_is_refused(
    store: Store, pg_db_url: str, locks: Any
) -> None:
    idle = 2.0
    proc = subprocess.Popen(
        [sys.executable, "-c", FROZEN_HOLDER, pg_db_url, str(idle)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        assert json.loads(proc.stdout.readline()) == {"elected": 1}
        b = LeaderLock(pg_db_url, holder="b")
        locks.append(b)
        assert b.try_acquire() is None
        os.kill(proc.pid, signal.SIGSTOP)
        t0 = time.monotonic()
        assert until(lambda: b.try_acquire(), "the frozen holder's lock to be freed", idle + 10) == 2
        took = time.monotonic() - t0
        assert took <= idle + 1.5, f"took over {took:.2f} s after the freeze (lease {idle} s)"
        store.fence(2)
        config_write(store, 7)  # the new leader writes
        os.kill(proc.pid, signal.SIGCONT)
        out = json.loads(proc.stdout.readline())
        assert out["late_write"] == "refused", out
        assert "session ended" in out["deposed"] and "fencing epoch 2, ours 1" in out["error"]
        assert proc.wait(10) == 0
        assert store.get_config()[0] == {"n": 7}
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGCONT)
            proc.kill()
            proc.wait()
        assert proc.stdout is not None
        proc.stdout.close()


def test_an_unreachable_database_deposes_the_leader_within_its_renew_deadline(
    store: Store, pg_db_url: str, locks: Any
) -> None:
    """The lock's backend frozen: heartbeats get no answer at all, as across a cut network."""
    lock = LeaderLock(pg_db_url, holder="a", idle_timeout_seconds=4.0)
    locks.append(lock)
    renew, deadline = 0.2, 1.5
    events: list[tuple[str, Any, float]] = []

    async def elected(epoch: int) -> None:
        events.append(("elected", epoch, time.monotonic()))

    async def deposed(reason: str) -> None:
        events.append(("deposed", reason, time.monotonic()))

    leadership = Leadership(
        lock, retry_seconds=0.1, renew_seconds=renew, renew_deadline_seconds=deadline,
        on_elected=elected, on_deposed=deposed,
    )  # fmt: skip

    async def scenario() -> float:
        task = asyncio.ensure_future(leadership.run())
        await wait_for(lambda: leadership.is_leader and leadership.last_renewed, 30, "the first leadership")
        beats = {leadership.last_renewed}

        def beating() -> bool:  # a few beats succeed
            beats.add(leadership.last_renewed)
            return len(beats) >= 3

        await wait_for(beating, 30, "the leader's heartbeats")
        assert leadership.is_leader and leadership.epoch == 1
        (pid,) = backend_pids(pg_db_url, "a")
        os.kill(pid, signal.SIGSTOP)
        try:
            last = leadership.last_renewed
            await asyncio.wait_for(task, deadline + 10)
        finally:
            os.kill(pid, signal.SIGCONT)
        return last

    last_ok = asyncio.run(scenario())
    (_, _, _), (kind, reason, at) = events
    assert kind == "deposed" and "no heartbeat succeeded" in reason, reason
    assert deadline <= at - last_ok <= deadline + renew + 0.5, at - last_ok
    assert not leadership.is_leader and leadership.deposed == reason


def test_leadership_refuses_timings_that_would_outlive_the_lock(pg_db_url: str) -> None:
    async def nop(_: Any) -> None:
        return None

    lock = LeaderLock(pg_db_url, holder="a", idle_timeout_seconds=5.0)
    with pytest.raises(ValueError, match="must stop before the database frees its lock"):
        Leadership(lock, renew_deadline_seconds=6.0, on_elected=nop, on_deposed=nop)
