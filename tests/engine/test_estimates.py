"""Start estimates kept by the engine (issue 26), with the scripted executor and a fake clock: durations learnt
from the store's finished runs (and kept across a restart), the hand-computed start for fixed times, a run's
first estimate recorded once, runs no one's stop teaches, and a cluster's dispatched run left to Kubernetes."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from jupyter_gpuplat.core.eta import Eta, EtaUnknown
from jupyter_gpuplat.engine.estimates import traits
from jupyter_gpuplat.executors.fake import FakeClusterExecutor, FakeExecutor, Script
from jupyter_gpuplat.store.estimates import run_etas

from ..fake_engine import Harness, config
from ..waiting import wait_for

QUEUE = [{"name": "q", "concurrency": 1}]


@pytest.fixture
def harnesses(tmp_path: Path, jp_asyncio_loop: asyncio.AbstractEventLoop) -> Iterator[list[Harness]]:
    made: list[Harness] = []
    yield made
    for h in made:
        jp_asyncio_loop.run_until_complete(h.close())


async def _start(made: list[Harness], tmp: Path, ex: FakeExecutor, queues: list[dict[str, Any]] = QUEUE) -> Harness:
    h = Harness(tmp, ex)
    made.append(h)
    return await h.start(config(queues))


def _known(h: Harness, rid: str) -> Eta | EtaUnknown:
    h.engine.estimates.changed()  # every queue: the loop's own recompute may have taken what was marked
    h.engine.estimates.refresh()
    k = h.engine.estimates.of(rid)
    assert k is not None, f"no estimate for {rid}"
    return k.estimate


async def _history(h: Harness, seconds: float, n: int = 3) -> None:
    """`n` finished runs of the same command that each held the queue's one slot for `seconds`."""
    for i in range(n):
        h.ex.scripts[f"past-{i}"] = Script.succeeds(after=seconds)
        h.submit(name=f"past-{i}")
    await h.settle()
    for _ in range(n):
        await h.advance(seconds)


async def test_history_predicts_each_start_and_survives_a_restart(tmp_path: Path, harnesses: list[Harness]) -> None:
    h = await _start(harnesses, tmp_path, FakeExecutor(gpus=4, default=Script.never_ends()))
    await _history(h, 100.0)
    holder = h.submit(name="holder")
    await h.settle()
    await h.advance(30)  # the holder has run 30 s of its ~100
    first, second = h.submit(name="first"), h.submit(name="second")
    await h.settle()
    assert h.statuses(holder, first, second) == ["running", "queued", "queued"]
    # Every similar run took exactly 100 s: one scenario, the hand-computed starts.
    a, b = _known(h, first), _known(h, second)
    assert isinstance(a, Eta) and isinstance(b, Eta)
    assert (a.p50_seconds, a.p90_seconds) == (70.0, 70.0)
    assert (b.p50_seconds, b.p90_seconds) == (170.0, 170.0)
    assert "times from similar finished runs for 3" in a.basis, a.basis
    computed_at = h.engine.estimates.of(first).computed_at  # type: ignore[union-attr]
    # A restart reads the same history from the store: the same answer.
    await h.close()
    harnesses.remove(h)
    again = await _start(harnesses, tmp_path, FakeExecutor(gpus=4, default=Script.never_ends(), clock=h.clock))
    b2 = _known(again, second)
    assert isinstance(b2, Eta) and b2.p50_seconds == pytest.approx(170.0), b2
    # Each run's first estimate was recorded once: the restart's recompute changed none of them.
    with again.store.engine.connect() as conn:
        rows = {r.run_id: r for r in conn.execute(select(run_etas))}
    # (the history's runs waited too, and the loop's own recompute may have estimated them: not asserted)
    assert {first, second} <= set(rows)
    assert rows[second].computed_at == computed_at and rows[second].p50_at == computed_at + 170.0


async def test_a_stop_teaches_nothing_and_a_run_with_no_basis_is_named(
    tmp_path: Path, harnesses: list[Harness]
) -> None:
    h = await _start(harnesses, tmp_path, FakeExecutor(gpus=4, default=Script.never_ends()))
    holder = h.submit(name="holder")  # no time limit, no history
    await h.settle()
    behind = h.submit(name="behind", termination={"timeout_seconds": 600})
    await h.settle()
    e = _known(h, behind)
    assert e == EtaUnknown(f"{holder} has no time limit and no history")
    await h.engine.stop("bob", holder)
    await h.advance(0)
    # The holder was stopped after 0 s: that is someone's decision, not how long such runs take.
    assert h.status(holder) == "stopped"
    assert h.engine.estimates.model.similar(traits(h.engine.active[behind])) is None


async def test_on_a_cluster_a_dispatched_run_is_left_to_kubernetes(tmp_path: Path, harnesses: list[Harness]) -> None:
    ex = FakeClusterExecutor(default=Script.slow())
    h = await _start(harnesses, tmp_path, ex, [{"name": "q", "concurrency": 1, "quota": {"gpu": 8}}])
    placed = h.submit(name="placed", termination={"timeout_seconds": 600})
    await h.settle()
    behind = h.submit(name="behind", termination={"timeout_seconds": 600})
    await h.settle()
    assert h.statuses(placed, behind) == ["starting", "queued"]  # handed to the cluster, not running
    e = _known(h, behind)
    assert isinstance(e, Eta) and e.p50_seconds == 600.0
    assert "covers our queue only" in e.basis
    row = h.store.get_run(placed)
    assert row is not None
    eta, unknown = h.engine.reads.eta(row)
    assert eta is None and unknown is not None and unknown.startswith("dispatched to Kubernetes, which holds it")


async def test_a_big_recompute_runs_in_a_worker_process_with_the_same_answer(
    tmp_path: Path, harnesses: list[Harness]
) -> None:
    h = await _start(harnesses, tmp_path, FakeExecutor(gpus=4, default=Script.never_ends()))
    await _history(h, 100.0)
    h.submit(name="holder")
    ids = [h.submit(name=f"w{i}") for i in range(3)]
    await h.settle()
    est = h.engine.estimates
    in_thread = {rid: _known(h, rid) for rid in ids}
    est.process_from = 1  # as if 1,000 runs waited: the loop hands the simulation to its worker process
    est.changed("q")
    await wait_for(lambda: est._pool is not None, 30, "the worker process")
    # From here every recompute is the worker's (one in flight in a thread finished before the pool started).
    before = est.recomputes
    est.changed("q")
    await wait_for(lambda: est.recomputes > before, 30, "a recompute in the worker process")
    assert {rid: est.of(rid).estimate for rid in ids} == in_thread  # type: ignore[union-attr]
