"""A deposed leader's engine, on a fenced PostgreSQL store: every write it tries is refused and none is retried.

The Engine is real and its store is real (PostgreSQL, fenced with epoch 1); the executor is
the scripted FakeExecutor. Another lock takes over (epoch 2) behind the engine's back, as
when this control plane's lock session was terminated a moment ago and its heartbeat has not
noticed yet.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from jupyter_gpuplat.core.errors import LostLeadership
from jupyter_gpuplat.executors.fake import FakeExecutor
from jupyter_gpuplat.store.leader import LeaderLock

from ..fake_engine import Harness, config
from ..pg import open_store


@pytest.fixture
def harness(
    tmp_path: Path, pg_db_url: str, jp_asyncio_loop: asyncio.AbstractEventLoop
) -> Iterator[tuple[Harness, list[LostLeadership], LeaderLock]]:
    open_store(pg_db_url).close()
    ours = LeaderLock(pg_db_url, holder="ours")
    epoch = ours.try_acquire()
    assert epoch == 1
    h = Harness(tmp_path, FakeExecutor(gpus=2), db_url=pg_db_url)
    lost: list[LostLeadership] = []
    h.store.fence(epoch, on_lost=lost.append)
    jp_asyncio_loop.run_until_complete(h.start(config([{"name": "q", "concurrency": 1}, {"name": "open"}])))
    yield h, lost, ours
    jp_asyncio_loop.run_until_complete(h.close())
    ours.release()


async def test_after_a_takeover_the_old_engine_writes_nothing_and_retries_nothing(
    harness: tuple[Harness, list[LostLeadership], LeaderLock], pg_db_url: str
) -> None:
    h, lost, ours = harness
    running = h.submit()
    await h.settle()
    assert h.status(running) == "running"
    waiting = h.submit(queue="open")  # recorded; its admission cycle is due on the next loop turn

    # Someone else leads now: our session is gone and the new leader bumped the epoch.
    ours.release()
    theirs = LeaderLock(pg_db_url, holder="theirs")
    try:
        assert theirs.try_acquire() == 2
        # The cycle's dispatch is refused before anything is launched.
        with pytest.raises(LostLeadership):
            await h.settle()
        assert h.ex.submitted == [running]
        with pytest.raises(LostLeadership):  # the API answers 503 NotLeader
            h.submit()
        # The running run ends: its observation cannot be recorded (the executor logs the refusal), and
        # is not kept for a retry: the new leader re-attaches the run and observes its end itself.
        h.ex.finish(running)
        h.ex.deliver()
        assert len(h.engine.state.deferred) == 0
        assert lost, "the server is told at once (it deposes itself)"
        assert h.statuses(running, waiting) == ["running", "queued"]
        assert h.store.count_runs() == 2
    finally:
        theirs.release()


async def test_a_large_admission_cycle_on_the_fenced_store_records_each_dispatch_once_in_order(
    harness: tuple[Harness, list[LostLeadership], LeaderLock],
) -> None:
    """Many events of one cycle go in as one statement of arrays on PostgreSQL: ids in the order decided."""
    h, lost, _ = harness
    h.engine.admin.set_paused_as("ops", "open", True)
    ids = [h.submit(queue="open", gpu=0) for _ in range(150)]
    await h.settle()
    h.engine.admin.set_paused_as("ops", "open", False)
    await h.settle()
    assert h.statuses(*ids) == ["running"] * 150
    dispatched = []
    for rid in ids:
        tl = h.timeline(rid)
        assert [e["status"] for e in tl].count("dispatched") == 1, tl
        dispatched.append(next(e["id"] for e in tl if e["status"] == "dispatched"))
    assert dispatched == sorted(dispatched)  # admitted in submission order, ids in that order
    assert not lost
