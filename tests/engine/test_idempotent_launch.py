"""Idempotent launch: a crash between "dispatch recorded" and "handle saved" starts nothing twice.

The engine over a real SQLite store with the scripted FakeExecutor. The first engine records
the dispatch and hands the run over; the work starts (`Script.crashes_after_submit`), and the
engine is closed before the executor's answer arrives, so no handle is saved. The restarted
engine sees a dispatched run without a handle and submits it again, exactly once; an executor
that finds the run's work already there adopts it, so the work was started once in all.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from jupyter_gpuplat.executors.fake import FakeClock, FakeClusterExecutor, FakeExecutor, FakeWorkloads, Script

from ..fake_engine import Harness, config, turns_until

QUEUES = [{"name": "q", "concurrency": 1}]
Make = Callable[[FakeExecutor], Any]


@pytest.fixture
def make(tmp_path: Path, jp_asyncio_loop: asyncio.AbstractEventLoop) -> Iterator[Make]:
    """make(executor): an engine over the same SQLite file each time (a second call is a restart)."""
    made: list[Harness] = []

    async def _make(ex: FakeExecutor) -> Harness:
        h = Harness(tmp_path, ex)
        made.append(h)
        await h.engine.start(config(QUEUES), source="test", by="test")
        return h

    yield _make
    for h in made:
        jp_asyncio_loop.run_until_complete(h.close())


@pytest.mark.parametrize("kind", [FakeExecutor, FakeClusterExecutor])
async def test_crash_after_the_work_started_adopts_it_on_restart(make: Make, kind: type[FakeExecutor]) -> None:
    clock, world = FakeClock(), FakeWorkloads()
    h1 = await make(kind(gpus=1, clock=clock, workloads=world, default=Script.crashes_after_submit()))
    rid = h1.submit()
    behind = h1.submit("erin")  # waits behind it (concurrency 1): must not take its place
    await turns_until(lambda: rid in world.handles, "the first start of the work")
    assert h1.status(rid) == "dispatched"
    row = h1.store.get_run(rid)
    assert row is not None and row["handle"] is None  # the window: dispatch recorded, handle not saved
    await h1.engine.close()  # the crash: the executor's answer never reaches the engine

    h2 = await make(kind(gpus=1, clock=clock, workloads=world))
    await h2.advance()
    assert h2.ex.submitted == [rid]  # the restarted engine submits it again, once
    assert h2.ex.adopted == [rid]  # and the executor adopts the work it finds
    assert world.starts[rid] == 1  # started once in all
    assert h2.statuses(rid, behind) == ["running", "queued"]
    saved = h2.store.get_run(rid)
    assert saved is not None and saved["handle"]["adopted"] is True
    assert saved["devices"] == row["devices"]

    h2.ex.finish(rid)
    await h2.advance()
    assert h2.statuses(rid, behind) == ["succeeded", "running"]
    steps = h2.assert_timeline_valid(rid)
    assert [s for s, _ in steps].count("dispatched") == 1  # one dispatch episode, recorded once
    assert world.starts == {rid: 1, behind: 1}
    assert h2.ex.submitted == [rid, behind]


async def test_a_saved_handle_is_attached_not_submitted_again(make: Make) -> None:
    clock, world = FakeClock(), FakeWorkloads()
    h1 = await make(FakeExecutor(gpus=1, clock=clock, workloads=world))
    rid = h1.submit()
    await h1.settle()
    assert h1.status(rid) == "running"
    await h1.engine.close()
    h2 = await make(FakeExecutor(gpus=1, clock=clock, workloads=world))
    await h2.advance()
    assert h2.ex.submitted == [] and h2.ex.attached == [rid]
    assert world.starts[rid] == 1
