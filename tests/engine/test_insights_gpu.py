"""Insights' GPU-hours busy equal a recount of the stored samples (issue 27), with the scripted executor.

NVML is hardware: the FakeExecutor's `gpu_reading` stands in for it at that boundary (readings scripted per
device and time). At t0 erin's `blind` runs 100 s while nothing can be read: held, never measured. Then the
readings come and four runs start: bob's `a` (queue one, 600 s, busy one sample in four), dave's `b` (project
other, queue two, 400 s, busy one in two), bob's `c` (queue two, 2 GPUs, still running, always busy) and erin's
`d` (queue one, 300 s, never busy). The test recounts from `gpuplat_metric_chunks` with plain SQL: each sample
stands for the time to its device's next one (at most 20 s; the last 10 s), counted where it was taken in the range.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sqlalchemy import text

from jupyter_gpuplat.executors.fake import FakeExecutor, Script
from jupyter_gpuplat.service.schemas.insights import Insights

from ..fake_engine import Harness, config

QUEUES = [{"name": "one"}, {"name": "two"}]
# device -> busy when (at - t0) % n == 0 (0: never); devices go a: 0, d: 1 (queue one first), b: 2, c: 3-4
BUSY_EVERY = {0: 40, 1: 0, 2: 20, 3: 10, 4: 10}


@pytest.fixture
def history(
    tmp_path: Path, jp_asyncio_loop: asyncio.AbstractEventLoop
) -> Iterator[tuple[Harness, float, dict[str, str]]]:
    took = {"blind": 100, "a": 600, "b": 400, "d": 300}
    ex = FakeExecutor(gpus=5, scripts={n: Script.succeeds(after=s) for n, s in took.items()}, gpu_sample_seconds=10)
    h = Harness(tmp_path, ex)
    t0 = ex.clock()

    def reading(device: int, at: float) -> tuple[float, int]:
        every = BUSY_EVERY[device]
        return (90.0 if every and int(at - t0) % every == 0 else 2.0), 1 << 30

    async def run() -> dict[str, str]:
        await h.start(config(QUEUES))
        ids = {"blind": h.submit("erin", queue="one", name="blind", gpu=1)}
        await h.settle()
        for _ in range(11):
            await h.engine.gpu.tick()  # the executor cannot see: nothing stored
            await h.advance(10)
        ex.gpu_reading = reading
        ids["a"] = h.submit("bob", queue="one", name="a", gpu=1)
        ids["b"] = h.submit("dave", queue="two", name="b", project="other", gpu=1)
        ids["c"] = h.submit("bob", queue="two", name="c", gpu=2)
        ids["d"] = h.submit("erin", queue="one", name="d", gpu=1)
        await h.settle()
        for _ in range(70):
            await h.engine.gpu.tick()
            await h.advance(10)
        await h.engine.gpu.drain()
        assert h.statuses(*ids.values()) == ["succeeded", "succeeded", "succeeded", "running", "succeeded"]
        return ids

    ids = jp_asyncio_loop.run_until_complete(run())
    yield h, t0, ids
    jp_asyncio_loop.run_until_complete(h.close())


def recount(h: Harness, since: float, until: float) -> dict[str, tuple[float, float]]:
    """Per run: (device-seconds sampled, busy) of the samples taken in [since, until), from plain SQL."""
    with h.store.engine.connect() as conn:
        rows = conn.execute(
            text(
                'SELECT run_id, name, steps, "values" FROM gpuplat_metric_chunks '
                "WHERE name LIKE 'system/gpu%/util' ORDER BY run_id, name, chunk"
            )
        ).all()
    series: dict[tuple[str, str], list[tuple[int, float]]] = defaultdict(list)
    for rid, name, steps, values in rows:
        series[(rid, name)] += zip(
            np.frombuffer(steps, np.int64).tolist(), np.frombuffer(values, np.float64).tolist(), strict=True
        )
    out: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for (rid, _), points in series.items():
        for i, (at, util) in enumerate(points):
            span = min(points[i + 1][0] - at, 20) if i + 1 < len(points) else 10
            if since <= at < until:
                out[rid][0] += span
                out[rid][1] += span if util >= 5 else 0
    return {rid: (m, b) for rid, (m, b) in out.items()}


def _figures(counted: dict[str, tuple[float, float]], ids: list[str]) -> dict[str, float | None]:
    m = sum(counted[r][0] for r in ids if r in counted)
    b = sum(counted[r][1] for r in ids if r in counted)
    if not m:
        return {"gpu_hours_measured": 0.0, "gpu_hours_busy": None, "busy_fraction": None}
    return {
        "gpu_hours_measured": round(m / 3600, 6),
        "gpu_hours_busy": round(b / 3600, 6),
        "busy_fraction": round(b / m, 6),
    }


def _busy(view: dict[str, Any]) -> dict[str, Any]:
    return {k: view[k] for k in ("gpu_hours_measured", "gpu_hours_busy", "busy_fraction")}


@pytest.mark.parametrize("window", [(0, 3600), (300, 3600), (0, 450)], ids=["whole", "cuts-starts", "cuts-ends"])
def test_busy_gpu_hours_equal_a_recount_of_the_samples(
    history: tuple[Harness, float, dict[str, str]], window: tuple[float, float]
) -> None:
    h, t0, ids = history
    since, until = t0 + window[0], t0 + window[1]
    counted = recount(h, since, until)
    assert ids["blind"] not in recount(h, 0, 1e12)  # never measured: no samples at all
    out = h.engine.insights("ops", since=str(since), until=str(until))
    Insights.model_validate(out)
    everyone = list(ids.values())
    assert _busy(out["total"]) == _figures(counted, everyone)
    if window[0] < 100:  # blind held a GPU in the range, unmeasured: held, never measured
        assert out["total"]["gpu_hours_measured"] < out["total"]["gpu_hours"]
    by_queue = {"one": [ids[n] for n in ("blind", "a", "d")], "two": [ids["b"], ids["c"]]}
    for q in out["queues"]:
        assert _busy(q) == _figures(counted, by_queue[q["name"]]), q["name"]
    by_project = {"p": [ids[n] for n in ("blind", "a", "c", "d")], "other": [ids["b"]]}
    assert {p["project"]: _busy(p) for p in out["projects"]} == {p: _figures(counted, r) for p, r in by_project.items()}
    by_user = {("p", "bob"): ["a", "c"], ("p", "erin"): ["blind", "d"], ("other", "dave"): ["b"]}
    for u in out["top_users"]:
        assert _busy(u) == _figures(counted, [ids[n] for n in by_user[(u["project"], u["user"])]])
    # Idle holders: measured, not busy; the worst run first. Erin's blind run is never counted as idle.
    for holder in out["idle_holders"]:
        mine = [ids[n] for n in by_user[(holder["project"], holder["user"])]]
        idle = sum(counted[r][0] - counted[r][1] for r in mine if r in counted)
        assert holder["gpu_hours_idle"] == round(idle / 3600, 6)
        assert ids["blind"] not in [r["id"] for r in holder["worst_runs"]]
        worst = [r["gpu_hours_idle"] for r in holder["worst_runs"]]
        assert worst == sorted(worst, reverse=True)
    idles = [h_["gpu_hours_idle"] for h_ in out["idle_holders"]]
    assert idles == sorted(idles, reverse=True) and all(i > 0 for i in idles)


def test_the_whole_range_by_hand_and_who_sees_which_idle_holders(
    history: tuple[Harness, float, dict[str, str]],
) -> None:
    h, t0, ids = history
    out = h.engine.insights("ops", since=str(t0), until=str(t0 + 3600))
    holders = [(x["project"], x["user"]) for x in out["idle_holders"]]
    # By hand: d idles 300 s on one GPU; a 450 of its 600 s; b 200 of 400 s; c (2 GPUs) is always busy.
    assert holders == [("p", "bob"), ("p", "erin"), ("other", "dave")]
    bob = out["idle_holders"][0]
    assert [r["id"] for r in bob["worst_runs"]] == [ids["a"]]  # c was never idle
    assert (
        bob["worst_runs"][0]["gpu_hours_idle"] == round(450 / 3600, 6) and bob["worst_runs"][0]["busy_fraction"] == 0.25
    )
    erin = out["idle_holders"][1]
    assert (erin["gpu_hours_idle"], erin["busy_fraction"], erin["measured_runs"]) == (round(300 / 3600, 6), 0.0, 1)
    # A member sees only their projects' holders; dave (admin of other) only his.
    mine = h.engine.insights("bob", since=str(t0), until=str(t0 + 3600))
    assert {x["project"] for x in mine["idle_holders"]} == {"p"} and {p["project"] for p in mine["projects"]} == {"p"}
    davs = h.engine.insights("dave", since=str(t0), until=str(t0 + 3600))
    assert [(x["project"], x["user"]) for x in davs["idle_holders"]] == [("other", "dave")]


def test_the_report_prints_held_against_busy_and_the_idle_holders(
    history: tuple[Harness, float, dict[str, str]],
) -> None:
    from jupyter_gpuplat.cli import report

    h, t0, ids = history
    out = h.engine.insights("ops", since=str(t0), until=str(t0 + 3600))
    table = " ".join(report.render_table(out, width=120).split())
    assert "GPU-hours held against busy (util ≥ 5%)" in table
    one = next(q for q in out["queues"] if q["name"] == "one")
    assert f"one: {one['gpu_hours']:.2f} held, {one['gpu_hours_measured']:.2f} measured, " in table
    assert f"bob (p): {out['idle_holders'][0]['gpu_hours_idle']:.2f} GPU-hours idle" in table
    assert ids["a"] in table
