"""GPU samples kept as each run's system metrics, and its `gpu_usage` (issue 27), with the scripted executor.

NVML is hardware: the FakeExecutor's `gpu_reading` stands in for it at that boundary (the same reading per
device and time that NVML would give). Samples land on the run holding the device; `gpu_usage` equals a
count by hand; an executor that cannot see says why; a run's own `system/…` metrics are not taken."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from jupyter_gpuplat.core.gpu_usage import NotMeasured, Sample, summary
from jupyter_gpuplat.engine.metrics import MetricsIndexer
from jupyter_gpuplat.executors.artifacts import LocalArtifactReader
from jupyter_gpuplat.executors.fake import FakeExecutor, Script
from jupyter_gpuplat.store import Store

from ..fake_engine import Harness, config

GiB = 1 << 30


@pytest.fixture
def harnesses(jp_asyncio_loop: asyncio.AbstractEventLoop) -> Iterator[list[Harness]]:
    made: list[Harness] = []
    yield made
    for h in made:
        jp_asyncio_loop.run_until_complete(h.close())


def _reading(device: int, at: float) -> tuple[float, int]:
    """Device 0 busy on every other sample, device 1 idle, device 2 at 30%; memory grows with time."""
    util = {0: 90.0 if int(at) % 20 == 0 else 2.0, 1: 0.0, 2: 30.0}.get(device, 0.0)
    return util, (device + 1) * GiB + int(at) % 100


async def test_samples_land_on_the_holding_run_and_gpu_usage_equals_a_recount(
    tmp_path: Path, harnesses: list[Harness]
) -> None:
    ex = FakeExecutor(gpus=4, default=Script.never_ends(), gpu_sample_seconds=10)
    ex.gpu_reading = _reading
    h = Harness(tmp_path, ex)
    harnesses.append(h)
    await h.start(config([{"name": "q"}]))
    two = h.submit(name="two", gpu=2)
    one = h.submit(name="one", gpu=1)
    cpu = h.submit(name="cpu", gpu=0)
    await h.settle()
    held = {rid: h.engine.active[rid].devices for rid in (two, one)}
    assert held[two] == (0, 1) and held[one] == (2,)
    expected: dict[str, list[Sample]] = {two: [], one: []}
    for _ in range(4):
        at = float(int(h.clock()))
        assert await h.engine.gpu.tick() == 3
        for rid, devices in held.items():
            expected[rid] += [Sample(at, d, *_reading(d, at)) for d in devices]
        await h.advance(10)
    series = h.store.metrics.series(two)
    assert sorted(series) == [
        "system/gpu0/memory_bytes",
        "system/gpu0/util",
        "system/gpu1/memory_bytes",
        "system/gpu1/util",
    ]
    assert series["system/gpu0/util"][1].tolist() == [s.util_percent for s in expected[two] if s.device == 0]
    for rid in (two, one):
        row = h.store.get_run(rid)
        assert row is not None
        got = h.engine.reads.gpu_usage(row)
        assert got == summary(expected[rid], interval_seconds=10)
    two_usage = h.engine.reads.gpu_usage(h.store.get_run(two))  # type: ignore[arg-type]
    # By hand: 8 device-samples of 10 s; device 0 busy on 2 of its 4, device 1 never: 20 of 80 s busy.
    assert two_usage is not None
    assert (two_usage["seconds_sampled"], two_usage["seconds_busy"], two_usage["busy_fraction"]) == (80.0, 20.0, 0.25)
    assert two_usage["memory_peak_bytes"] == max(s.memory_bytes for s in expected[two])
    assert h.engine.reads.gpu_usage(h.store.get_run(cpu)) is None  # type: ignore[arg-type]  # held no GPU


async def test_an_executor_that_cannot_see_says_why(tmp_path: Path, harnesses: list[Harness]) -> None:
    ex = FakeExecutor(gpus=2, default=Script.never_ends(), gpu_sample_seconds=10)  # no readings scripted
    h = Harness(tmp_path, ex)
    harnesses.append(h)
    await h.start(config([{"name": "q"}]))
    rid = h.submit(name="blind", gpu=1)
    await h.settle()
    assert await h.engine.gpu.tick() == 0
    got = h.engine.reads.gpu_usage(h.store.get_run(rid))  # type: ignore[arg-type]
    assert got is not None and (got["measured"], got["reason"]) == (False, "the fake executor does not sample GPUs")
    assert got["text"] == "GPU use not measured: the fake executor does not sample GPUs"
    assert h.store.metrics.series(rid) == {}
    assert NotMeasured("x") != NotMeasured("y")


def test_a_runs_own_system_metrics_are_not_taken(tmp_path: Path) -> None:
    """A run could log `system/gpu0/util` itself to look busy: the platform's series are its own."""
    rid = "r-spoof"
    art = tmp_path / "art" / rid
    env = {**os.environ, "GPUPLAT_ARTIFACTS_DIR": str(art), "GPUPLAT_RUN_ID": rid}
    code = (
        "from jupyter_gpuplat import tracking\ntracking.log_metrics(step=0, **{'system/gpu0/util': 100.0, 'loss': 1.0})"
    )
    subprocess.run([sys.executable, "-c", code], env=env, check=True, timeout=60)
    store = Store(f"sqlite:///{tmp_path / 'db.sqlite'}")
    try:
        MetricsIndexer(store, LocalArtifactReader(str(tmp_path / "art"))).catch_up(rid)
        assert sorted(store.metrics.series(rid)) == ["loss"]
    finally:
        store.close()
