"""The dispatcher with the scripted FakeExecutor and a FakeClock: no processes, no sleeps.

Priority across queues, strict vs best-effort FIFO, quota / concurrency / per-user limits,
pause/resume, local capacity, and free GPUs with no number (a cluster executor).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from jupyter_gpuplat.core.errors import Forbidden, NotFound, Unprocessable
from jupyter_gpuplat.core.request import RunRequest
from jupyter_gpuplat.executors.fake import FakeClusterExecutor, FakeExecutor, Script

from ..fake_engine import Harness, config, turns_until

Make = Callable[..., Any]


@pytest.fixture
def make(tmp_path: Path, jp_asyncio_loop: asyncio.AbstractEventLoop) -> Iterator[Make]:
    made: list[Harness] = []

    async def _make(queues: list[dict[str, Any]], ex: FakeExecutor | None = None, **extra: Any) -> Harness:
        (tmp_path / f"h{len(made)}").mkdir()
        h = Harness(tmp_path / f"h{len(made)}", ex or FakeExecutor(gpus=4))
        made.append(h)
        return await h.start(config(queues, **extra))

    yield _make
    for h in made:
        jp_asyncio_loop.run_until_complete(h.close())


async def test_higher_priority_queue_dispatches_first(make: Make) -> None:
    h = await make([{"name": "low", "priority": 0}, {"name": "high", "priority": 50}], FakeExecutor(gpus=1))
    blocker = h.submit(queue="low")
    await h.settle()
    low = h.submit(queue="low")  # submitted first
    high = h.submit(queue="high")
    await h.settle()
    assert h.statuses(blocker, low, high) == ["running", "queued", "queued"]
    assert h.timeline(low)[-1]["reason"] == "NoCapacity"
    h.ex.finish(blocker)
    await h.advance()
    assert h.statuses(low, high) == ["queued", "running"]
    assert h.ex.launched[high].devices == (0,)


async def test_best_effort_fifo_lets_a_smaller_run_pass_a_blocked_head(make: Make) -> None:
    h = await make([{"name": "q", "quota": {"gpu": 3}}])
    first = h.submit(gpu=2)
    await h.settle()
    big = h.submit(gpu=2)  # quota: 2 + 2 > 3
    small = h.submit(gpu=1, user="erin")
    await h.settle()
    assert h.statuses(first, big, small) == ["running", "queued", "running"]
    assert h.timeline(big)[-1]["reason"] == "QueueQuota"


async def test_strict_fifo_holds_everyone_behind_the_head(make: Make) -> None:
    h = await make([{"name": "q", "quota": {"gpu": 3}, "ordering": "strict_fifo"}])
    first = h.submit(gpu=2)
    await h.settle()
    big = h.submit(gpu=2)
    small = h.submit("erin", gpu=1)
    await h.settle()
    assert h.statuses(first, big, small) == ["running", "queued", "queued"]
    assert h.timeline(small)[-1]["reason"] == "BehindQueueHead"
    h.ex.finish(first)
    await h.advance()
    assert h.statuses(first, big, small) == ["succeeded", "running", "running"]


async def test_concurrency_limit(make: Make) -> None:
    h = await make([{"name": "q", "concurrency": 2}])
    ids = [h.submit(user=u) for u in ("bob", "erin", "alice")]
    await h.settle()
    assert h.statuses(*ids) == ["running", "running", "queued"]
    assert h.timeline(ids[2])[-1]["reason"] == "QueueConcurrency"
    h.ex.finish(ids[0], 3)
    await h.advance()
    assert h.statuses(*ids) == ["failed", "running", "running"]


async def test_max_per_user_lets_other_users_pass(make: Make) -> None:
    h = await make([{"name": "q", "max_per_user": 1}])
    b1, b2, e1 = h.submit("bob"), h.submit("bob"), h.submit("erin")
    await h.settle()
    assert h.statuses(b1, b2, e1) == ["running", "queued", "running"]
    assert h.timeline(b2)[-1]["reason"] == "UserLimit"
    h.ex.finish(b1)
    await h.advance()
    assert h.status(b2) == "running"


async def test_local_capacity_wakes_a_waiting_queue_when_devices_free(make: Make) -> None:
    h = await make([{"name": "a", "priority": 1}, {"name": "b"}], FakeExecutor(gpus=2))
    holder = h.submit(queue="a", gpu=2)
    await h.settle()
    waiting = h.submit(queue="b", gpu=1)
    await h.settle()
    assert h.timeline(waiting)[-1]["reason"] == "NoCapacity"
    assert h.engine.free_gpus == 0
    h.ex.finish(holder)
    await h.advance()
    assert h.status(waiting) == "running"
    assert h.engine.free_gpus == 1


async def test_pause_holds_runs_and_resume_dispatches_them(make: Make) -> None:
    h = await make([{"name": "q", "paused": True}])
    rid = h.submit()
    await h.settle()
    assert h.status(rid) == "queued"
    assert h.timeline(rid)[-1]["reason"] == "QueuePaused"
    with pytest.raises(Forbidden):
        h.engine.admin.set_paused_as("bob", "q", False)
    with pytest.raises(NotFound):
        h.engine.admin.set_paused_as("ops", "nope", False)
    h.engine.admin.set_paused_as("ops", "q", False)
    await h.settle()
    assert h.status(rid) == "running"
    h.engine.admin.set_paused_as("ops", "q", True)
    later = h.submit("erin")
    await h.settle()
    assert h.statuses(rid, later) == ["running", "queued"]


async def test_submit_checks_policy_and_capacity_before_a_run_exists(make: Make) -> None:
    h = await make([{"name": "q"}], FakeExecutor(gpus=2))
    with pytest.raises(Unprocessable) as exc:
        h.submit(gpu=3)
    assert exc.value.code == "NoCapacity"
    with pytest.raises(Forbidden):
        h.submit("carol")  # a viewer
    with pytest.raises(NotFound):
        h.engine.submit("mallory", RunRequest.model_validate({"project": "p", "queue": "q", "command": ["x"]}))
    assert h.store.list_runs(["p"], limit=10) == []


async def test_a_cluster_executor_counts_no_free_gpus(make: Make) -> None:
    ex = FakeClusterExecutor(gpus=0, default=Script.succeeds(after=5))
    h = await make([{"name": "q", "quota": {"gpu": 8}}], ex)
    assert h.engine.free_gpus is None
    ids = [h.submit(gpu=4), h.submit("erin", gpu=4)]
    await h.settle()
    # No device of ours bounds them: only the queue's quota does; the cluster reports running itself.
    assert h.statuses(*ids) == ["starting", "starting"]
    assert h.ex.launched[ids[0]].devices == ()
    await h.advance()
    assert h.statuses(*ids) == ["running", "running"]
    third = h.submit(gpu=1)
    await h.settle()
    assert h.timeline(third)[-1]["reason"] == "QueueQuota"
    await h.advance(5)
    assert h.statuses(*ids, third) == ["succeeded", "succeeded", "running"]
    caps = h.engine.reads.capacity("bob")
    assert caps["free_gpus"] is None


async def test_start_failure_is_a_finish_and_frees_the_slot(make: Make) -> None:
    ex = FakeExecutor(gpus=1, scripts={"broken": Script.cannot_start("image not found")})
    h = await make([{"name": "q"}], ex)
    bad = h.submit(name="broken")
    good = h.submit()
    await h.settle()
    assert h.statuses(bad, good) == ["failed", "running"]
    assert h.timeline(bad)[-1]["reason"] == "StartFailed"
    assert "image not found" in h.timeline(bad)[-1]["message"]
    assert h.assert_timeline_valid(bad)[-2:] == [("dispatched", "Admitted"), ("failed", "StartFailed")]


async def test_preview_verdict_includes_capacity(make: Make) -> None:
    h = await make([{"name": "q"}], FakeExecutor(gpus=2))
    req = RunRequest.model_validate({"project": "p", "queue": "q", "command": ["x"], "resources": {"gpu": 3}})
    v = h.engine.preview("bob", req)["verdict"]
    assert v["allowed"] is False
    assert [x["code"] for x in v["violations"]] == ["NoCapacity"]
    # Judged as submit judges it (core/refusal): the rule and an alternative the policy accepts.
    assert [r["rule"] for r in v["rules"]] == ["NoCapacity"]
    assert [a["changes"] for a in v["alternatives"]] == [{"resources": {"gpu": 2}}], v
    ok = RunRequest.model_validate({"project": "p", "queue": "q", "command": ["x"], "resources": {"gpu": 2}})
    assert h.engine.preview("bob", ok)["verdict"] == {
        "allowed": True,
        "violations": [],
        "rules": [],
        "alternatives": [],
    }


async def test_a_refused_submit_carries_every_rule_and_the_alternatives_judged_once(make: Make) -> None:
    """The engine's own refusal is the API's answer: no second judgement in the service."""
    h = await make([{"name": "q"}], FakeExecutor(gpus=2))
    req = RunRequest.model_validate({"project": "p", "queue": "q", "command": ["x"], "resources": {"gpu": 3}})
    with pytest.raises(Unprocessable) as refused:
        h.engine.submit("bob", req)
    body = refused.value.to_dict()
    assert body["code"] == "NoCapacity" and [r["rule"] for r in body["rules"]] == ["NoCapacity"], body
    assert [a["changes"] for a in body["alternatives"]] == [{"resources": {"gpu": 2}}], body
    assert "2 gpu" in body["hint"], body


async def test_run_cycle_merges_wake_ups(make: Make) -> None:
    h = await make([{"name": "q", "paused": True}])
    before = h.engine.cycles
    for _ in range(20):
        h.submit()
    await h.settle()
    assert h.engine.cycles == before + 1


async def test_a_run_reported_running_before_its_submit_returned_stays_running(make: Make) -> None:
    """A cluster reports "running" before the submit returns (or before a restart re-submits a run whose
    handle was never saved): the late hand-over is recorded, never a step back to "starting" (found by
    the engine state machine)."""
    ex = FakeClusterExecutor(gpus=0, default=Script.crashes_after_submit())
    h = await make([{"name": "q"}], ex)
    rid = h.submit()
    h.engine.run_cycle()
    await turns_until(lambda: rid in ex.workloads.handles, "the work to start")
    assert h.status(rid) == "dispatched"  # the work runs; submit has not returned
    ex.emit(rid, "running", "Started", "fake: running")
    ex.deliver()
    assert h.status(rid) == "running"
    ex.start(rid)  # the submit returns after all
    await h.advance()
    assert h.status(rid) == "running"
    assert h.assert_timeline_valid(rid)[-2:] == [("running", "Submitted"), ("running", "Started")]
    assert h.store.get_run(rid)["handle"] is not None  # type: ignore[index]
