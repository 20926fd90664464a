"""The reconciler with the scripted FakeExecutor and a FakeClock: no processes, no sleeps.

Stop in every state, lost runs after a restart, repeated and out-of-order observations,
and every recorded timeline checked against `core.status.can_transition`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from jupyter_gpuplat.core.errors import Conflict, Forbidden, NotFound
from jupyter_gpuplat.executors.fake import FakeClock, FakeClusterExecutor, FakeExecutor, Script

from ..fake_engine import Harness, config

Make = Callable[..., Any]
QUEUES = [{"name": "q"}, {"name": "fifo", "ordering": "strict_fifo", "concurrency": 1}]


@pytest.fixture
def make(tmp_path: Path, jp_asyncio_loop: asyncio.AbstractEventLoop) -> Iterator[Make]:
    """make(executor, dir=None): an engine over `tmp_path/dir`; the same dir is the same store (a restart)."""
    made: list[Harness] = []

    async def _make(ex: FakeExecutor | None = None, where: str = "db") -> Harness:
        (tmp_path / where).mkdir(exist_ok=True)
        h = Harness(tmp_path / where, ex or FakeExecutor(gpus=2))
        made.append(h)
        return await h.start(config(QUEUES))

    yield _make
    for h in made:
        jp_asyncio_loop.run_until_complete(h.close())


# ---- stop in every state ----------------------------------------------------------------
async def test_stop_queued_ends_it_at_once_and_unblocks_strict_fifo(make: Make) -> None:
    h = await make()
    holder = h.submit(queue="fifo")
    await h.settle()
    head = h.submit(queue="fifo")
    behind = h.submit("erin", queue="fifo")
    await h.settle()
    h.engine.reconciler.stop("bob", h.engine.reads.get_visible("bob", head))
    assert h.status(head) == "stopped"
    assert h.timeline(head)[-1]["message"] == "stopped by bob before dispatch"
    assert h.ex.stopped == []  # nothing was handed over: nothing to stop in the executor
    h.ex.finish(holder)
    await h.advance()
    assert h.statuses(holder, behind) == ["succeeded", "running"]
    h.assert_timeline_valid(head)


async def test_stop_dispatched_before_the_executor_returned_a_handle(make: Make) -> None:
    h = await make(FakeExecutor(gpus=1, default=Script.slow()))
    rid = h.submit()
    await asyncio.sleep(0)  # the launch task runs up to the executor, which has not answered
    h.engine.run_cycle()
    for _ in range(3):
        await asyncio.sleep(0)
    assert h.status(rid) == "dispatched"
    assert h.engine.active[rid].launching and h.engine.active[rid].handle is None
    row = await h.engine.stop("bob", rid)
    assert row["status"] == "stopping"
    assert h.ex.stopped == []  # no handle yet: stopped once the executor has answered
    h.ex.start(rid)
    await h.advance()
    assert h.ex.stopped == [rid]
    assert h.status(rid) == "stopped"
    steps = h.assert_timeline_valid(rid)
    assert [s for s, _ in steps][-4:] == ["dispatched", "stopping", "stopping", "stopped"]
    assert h.timeline(rid)[-1]["message"].startswith("stopped by bob")
    assert h.engine.free_gpus == 1


async def test_stop_starting_on_a_cluster(make: Make) -> None:
    h = await make(FakeClusterExecutor(gpus=0, default=Script.slow()))
    rid = h.submit()
    await h.settle()
    assert h.status(rid) == "starting"
    await h.engine.stop("alice", rid)  # a project admin may stop others' runs
    assert h.status(rid) == "stopping"
    await h.advance()
    assert h.status(rid) == "stopped"
    assert h.ex.stopped == [rid]
    assert h.timeline(rid)[-1]["message"].startswith("stopped by alice")
    h.assert_timeline_valid(rid)


async def test_stop_running_then_again_while_stopping_then_final(make: Make) -> None:
    ex = FakeExecutor(gpus=1)
    h = await make(ex)
    rid = h.submit()
    await h.settle()
    assert h.status(rid) == "running"
    await h.engine.stop("bob", rid)
    await h.settle()  # the executor was asked; its "stopped" is not delivered yet
    n = len(h.timeline(rid))
    assert h.status(rid) == "stopping"
    assert (await h.engine.stop("alice", rid))["status"] == "stopping"  # a second stop adds nothing
    assert len(h.timeline(rid)) == n
    assert ex.stopped == [rid]
    await h.advance()
    assert h.status(rid) == "stopped"
    with pytest.raises(Conflict):
        await h.engine.stop("bob", rid)
    h.assert_timeline_valid(rid)


async def test_who_may_stop(make: Make) -> None:
    h = await make()
    rid = h.submit("bob")
    await h.settle()
    with pytest.raises(Forbidden):
        await h.engine.stop("erin", rid)  # another member
    with pytest.raises(Forbidden):
        await h.engine.stop("carol", rid)  # a viewer
    with pytest.raises(NotFound):
        await h.engine.stop("dave", rid)  # not in the project: the run does not exist for him
    with pytest.raises(NotFound):
        await h.engine.stop("bob", "r-nope")
    await h.engine.stop("ops", rid)  # a platform admin
    await h.advance()
    assert h.status(rid) == "stopped"


# ---- outcomes --------------------------------------------------------------------------------
async def test_exit_codes_and_clocks(make: Make) -> None:
    ex = FakeClusterExecutor(gpus=0, scripts={"bad": Script.fails(7, after=30), "ok": Script.succeeds(after=10)})
    h = await make(ex)
    bad, ok = h.submit(name="bad"), h.submit("erin", name="ok")
    await h.settle()
    h.clock.advance(5)  # start wait: 5 s between the hand-over and "running"
    await h.advance()
    await h.advance(10)
    assert h.statuses(bad, ok) == ["running", "succeeded"]
    await h.advance(20)
    row = h.store.get_run(bad)
    assert row is not None
    assert (row["status"], row["exit_code"], row["reason"]) == ("failed", 7, "Error")
    assert row["started_at"] - row["dispatched_at"] == 5
    assert row["finished_at"] - row["started_at"] == 30
    for rid in (bad, ok):
        h.assert_timeline_valid(rid)


# ---- repeated and out-of-order observations ---------------------------------------------------
async def test_repeated_and_late_observations(make: Make) -> None:
    ex = FakeExecutor(gpus=2)
    h = await make(ex)
    rid = h.submit()
    await h.settle()
    ex.finish(rid)
    ex.finish(rid)  # a duplicate final
    ex.emit(rid, "running", "Started")  # running after succeeded
    ex.emit(rid, "failed", "Error", exit_code=1)  # another final, later
    await h.advance()
    tl = h.timeline(rid)
    assert [e["status"] for e in tl].count("succeeded") == 1
    assert tl[-1]["status"] == "succeeded"
    assert h.status(rid) == "succeeded"
    ex.emit("r-unknown", "succeeded", "Completed")  # never dispatched by us: ignored
    await h.advance()
    h.assert_timeline_valid(rid)


async def test_starting_after_running_is_recorded_and_the_run_stays_running(make: Make) -> None:
    """An executor that lost track (Kubernetes after a restart reports a preempted run's
    replacement pod as "starting") never moves a running run back: found by the engine machine."""
    ex = FakeClusterExecutor(gpus=0)
    h = await make(ex)
    rid = h.submit()
    await h.advance()
    assert h.status(rid) == "running"
    ex.emit(rid, "starting", "Preempted", "pod preempted; a replacement starts", details={"layer": "executor"})
    await h.advance()
    assert h.status(rid) == "running"
    assert (h.timeline(rid)[-1]["reason"], h.timeline(rid)[-1]["message"]) == (
        "Preempted",
        "pod preempted; a replacement starts",
    )
    assert h.assert_timeline_valid(rid)[-2:] == [("running", "Started"), ("running", "Preempted")]


async def test_repeated_start_warnings_are_episodes_and_stopping_stays_stopping(make: Make) -> None:
    ex = FakeClusterExecutor(gpus=0, default=Script.slow())
    h = await make(ex)
    rid = h.submit()
    await h.settle()
    for _ in range(2):
        ex.emit(rid, "starting", "ImagePullBackOff", "back-off pulling image", details={"layer": "executor"})
    await h.advance()
    reasons = [e["reason"] for e in h.timeline(rid)]
    assert reasons.count("ImagePullBackOff") == 2  # the same warning twice: two events, no overwrite
    await h.engine.stop("bob", rid)
    await h.settle()
    ex.outbox.clear()  # the executor has not stopped it yet
    ex.emit(rid, "running", "Started")  # started while being stopped: stays stopping
    await h.advance()
    assert h.status(rid) == "stopping"
    assert h.timeline(rid)[-1]["reason"] == "Started"
    ex.emit(rid, "stopped", "Stopped", "stopped by request; killed")
    await h.advance()
    assert h.status(rid) == "stopped"
    assert h.timeline(rid)[-1]["message"] == "stopped by bob; killed"
    h.assert_timeline_valid(rid)


# ---- restarts --------------------------------------------------------------------------------------
async def test_lost_after_restart_frees_devices_and_waiting_runs_dispatch(make: Make) -> None:
    clock = FakeClock()
    first = FakeExecutor(gpus=2, clock=clock, scripts={"goner": Script.lost()})
    h1 = await make(first)
    goner, keeper = h1.submit(name="goner"), h1.submit("erin", name="keeper")
    waiting = h1.submit("alice", name="waiting")
    await h1.settle()
    assert h1.statuses(goner, keeper, waiting) == ["running", "running", "queued"]
    await h1.engine.close()  # the server goes away; the runs do not

    second = FakeExecutor(gpus=2, clock=clock, scripts={"goner": Script.lost()})
    h2 = await make(second)
    assert sorted(second.attached) == sorted([goner, keeper])
    assert h2.statuses(goner, keeper, waiting) == ["failed", "running", "running"]
    assert h2.timeline(goner)[-1]["reason"] == "Lost"
    assert h2.timeline(keeper)[-1]["reason"] == "Reattached"
    assert second.launched[waiting].devices == h1.engine.active[goner].devices
    for rid in (goner, keeper, waiting):
        h2.assert_timeline_valid(rid)


async def test_dispatch_recorded_but_never_handed_over_is_launched_after_restart(make: Make) -> None:
    clock = FakeClock()
    h1 = await make(FakeExecutor(gpus=1, clock=clock, default=Script.slow()))
    rid = h1.submit()
    h1.engine.run_cycle()
    await asyncio.sleep(0)
    assert h1.status(rid) == "dispatched"
    await h1.engine.close()  # crashed before the executor answered

    h2 = await make(FakeExecutor(gpus=1, clock=clock))
    assert rid in h2.ex.launched
    assert h2.status(rid) == "running"
    h2.assert_timeline_valid(rid)


async def test_a_queue_gone_from_the_config_fails_its_runs_at_start(make: Make, tmp_path: Path) -> None:
    h1 = await make()
    h1.engine.admin.set_paused_as("ops", "fifo", True)
    rid = h1.submit(queue="fifo")
    await h1.settle()
    await h1.engine.close()
    h1.store.put_config({"admins": ["ops"], "queues": [{"name": "q"}], "projects": []}, source="t", by="t", at=0)
    (tmp_path / "db").mkdir(exist_ok=True)
    h2 = Harness(tmp_path / "db", FakeExecutor(gpus=1))
    await h2.start()
    try:
        assert h2.status(rid) == "failed"
        assert h2.timeline(rid)[-1]["reason"] == "Lost"
    finally:
        await h2.close()
