"""A run's `gpu_usage` kept on its record when it ends, and a run that held GPUs mostly idle named to its owner
(issue 27), with the scripted executor and a fake clock.

NVML is hardware: the FakeExecutor's `gpu_reading` stands in for it at that boundary. Device 0 is busy on one
sample in three, device 1 always. `idle` (device 0) runs 700 s, `busy` (device 1) 700 s, `short` (device 0
after idle) 200 s: only `idle` held its GPU mostly idle over 10 min of sampled time.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sqlalchemy import text

from jupyter_gpuplat.core.gpu_usage import from_series, summary
from jupyter_gpuplat.executors.fake import FakeExecutor, Script

from ..fake_engine import Harness, config


@pytest.fixture
def ended(tmp_path: Path, jp_asyncio_loop: asyncio.AbstractEventLoop) -> Iterator[tuple[Harness, dict[str, str]]]:
    scripts = {"idle": Script.succeeds(after=700), "busy": Script.succeeds(after=700), "short": Script.succeeds(200)}
    ex = FakeExecutor(gpus=2, scripts=scripts, gpu_sample_seconds=10)
    t0 = ex.clock()
    ex.gpu_reading = lambda device, at: (80.0 if device == 1 or int(at - t0) % 30 == 0 else 1.0, (device + 1) << 30)
    h = Harness(tmp_path, ex)

    async def run() -> dict[str, str]:
        await h.start(config([{"name": "q"}]))
        ids = {n: h.submit(name=n, gpu=1) for n in ("idle", "busy", "short")}
        await h.settle()
        for _ in range(95):  # a sample every 10 s until all three have ended
            await h.engine.gpu.tick()
            await h.advance(10)
        await h.engine.gpu.drain()
        assert h.statuses(*ids.values()) == ["succeeded"] * 3
        return ids

    ids = jp_asyncio_loop.run_until_complete(run())
    yield h, ids
    jp_asyncio_loop.run_until_complete(h.close())


def _kept(h: Harness, rid: str) -> Any:
    """The record's column, read with plain SQL."""
    with h.store.engine.connect() as conn:
        raw = conn.execute(text("SELECT gpu_usage FROM gpuplat_runs WHERE id = :id"), {"id": rid}).scalar_one()
    return None if raw is None else __import__("json").loads(raw)


def test_the_record_keeps_the_summary_of_its_samples_and_reads_it_from_there(
    ended: tuple[Harness, dict[str, str]],
) -> None:
    h, ids = ended
    for name, rid in ids.items():
        kept = _kept(h, rid)
        assert kept == summary(from_series(h.store.metrics.series(rid)), interval_seconds=10), name  # type: ignore[arg-type]
    idle = _kept(h, ids["idle"])
    # By hand: 70 samples of 10 s (the run's 700 s), one in three at 80%: 24 of them busy.
    assert (idle["samples"], idle["seconds_sampled"], idle["seconds_busy"]) == (70, 700.0, 240.0)
    assert _kept(h, ids["busy"])["busy_fraction"] == 1.0
    # Read from the record, not recounted: a sample stored after the end changes no answer.
    late = np.array([int(h.clock())], np.int64)
    h.store.metrics.append_system({ids["idle"]: {"system/gpu0/util": (late, np.array([100.0]))}})
    row = h.store.get_run(ids["idle"])
    assert row is not None and h.engine.reads.gpu_usage(row) == idle
    listed = h.store.list_runs(["p"])
    assert {r["id"]: h.engine.reads.gpu_usage_listed(r) for r in listed} == {rid: _kept(h, rid) for rid in ids.values()}


def test_a_run_that_held_its_gpu_mostly_idle_is_named_to_its_owner_and_admins(
    ended: tuple[Harness, dict[str, str]],
) -> None:
    h, ids = ended
    told = [ev for ev in h.timeline(ids["idle"]) if ev["reason"] == "GpuMostlyIdle"]
    assert [ev["message"] for ev in told] == [f"{ids['idle']} held GPU 0 for 12 min; busy 34% of it (util ≥ 5%)"]
    assert told[0]["status"] == "succeeded" and told[0]["details"]["tell"] == ["bob", "alice"]  # owner, then admins
    row = h.store.get_run(ids["idle"])
    assert row is not None and (row["status"], row["reason"]) == ("succeeded", "Completed")  # its end unchanged
    # Busy throughout; idle but under 10 min of sampled time: nobody is told.
    for name in ("busy", "short"):
        assert all(ev["reason"] != "GpuMostlyIdle" for ev in h.timeline(ids[name])), name


def test_a_run_on_a_server_that_cannot_see_keeps_not_measured(tmp_path: Path, jp_asyncio_loop: Any) -> None:
    ex = FakeExecutor(gpus=1, scripts={"blind": Script.succeeds(after=30)}, gpu_sample_seconds=10)  # no readings
    h = Harness(tmp_path, ex)

    async def run() -> str:
        await h.start(config([{"name": "q"}]))
        rid = h.submit(name="blind", gpu=1)
        await h.settle()
        for _ in range(4):
            await h.engine.gpu.tick()
            await h.advance(10)
        await h.engine.gpu.drain()
        return rid

    try:
        rid = jp_asyncio_loop.run_until_complete(run())
        assert _kept(h, rid) == {
            "measured": False,
            "reason": "the fake executor does not sample GPUs",
            "busy_percent": 5.0,
            "text": "GPU use not measured: the fake executor does not sample GPUs",
            "busy_text": None,
            "memory_peak_text": None,
        }
        assert all(ev["reason"] != "GpuMostlyIdle" for ev in h.timeline(rid))
    finally:
        jp_asyncio_loop.run_until_complete(h.close())
