"""Insights: a scripted week made by the engine (FakeExecutor, FakeClock) gives hand-computed figures.

Day 0, queue busy (concurrency 2): A, B (100 s), C (50 s), D (50 s, dave's other project) at 0, E (20 s) at 30:
A, B run at once; C, D wait on concurrency until 100; E until 150. Day 3, queue quota (2 GPUs): G, H, I (40 s)
at once: I waits on quota 40 s. Day 5, queue peruser (max 1 a user): K, L (30 s): L waits 30 s on the
per-user limit. J fails on interactive at 30 s (the fake delivers its end at the next step); a 99-GPU submit is refused.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from jupyter_gpuplat.core.clocks import clocks
from jupyter_gpuplat.core.errors import GpuPlatError, InvalidInput, NotFound
from jupyter_gpuplat.core.insights import percentile
from jupyter_gpuplat.executors.fake import FakeExecutor, Script
from jupyter_gpuplat.service.schemas.insights import Insights

from ..fake_engine import Harness, config

DAY = 86400.0
Make = Callable[..., Any]
QUEUES = [
    {"name": "busy", "concurrency": 2},
    {"name": "quota", "quota": {"gpu": 2}},
    {"name": "peruser", "max_per_user": 1},
    {"name": "interactive"},
]


@pytest.fixture
def week(tmp_path: Path, jp_asyncio_loop: asyncio.AbstractEventLoop) -> Iterator[tuple[Harness, float, dict[str, str]]]:
    durations = {"A": 100, "B": 100, "C": 50, "D": 50, "E": 20, "G": 40, "H": 40, "I": 40, "K": 30, "L": 30}
    scripts = {n: Script.succeeds(after=d) for n, d in durations.items()} | {"J": Script.fails(1, after=10)}
    ex = FakeExecutor(gpus=8, scripts=scripts)
    h = Harness(tmp_path, ex)

    async def history() -> tuple[float, dict[str, str]]:
        await h.start(config(QUEUES))
        t0 = h.clock()
        ids = {n: h.submit(queue="busy", name=n) for n in "ABC"}
        ids["D"] = h.submit("dave", queue="busy", name="D", project="other")
        ids["J"] = h.submit(queue="interactive", name="J")
        await h.settle()
        await h.advance(30)
        ids["E"] = h.submit(queue="busy", name="E")
        await h.settle()
        for step in (70, 50, 20, 30):
            await h.advance(step)
        await h.advance(3 * DAY - 200)
        ids |= {n: h.submit(queue="quota", name=n) for n in "GHI"}
        await h.settle()
        await h.advance(40)
        await h.advance(40)
        await h.advance(2 * DAY - 80)
        ids |= {n: h.submit(queue="peruser", name=n) for n in "KL"}
        await h.settle()
        await h.advance(30)
        await h.advance(30)
        with pytest.raises(GpuPlatError):
            h.submit(queue="busy", gpu=99, name="big")
        await h.advance(2 * DAY - 60)
        assert set(h.statuses(*ids.values())) == {"succeeded", "failed"}
        return t0, ids

    t0, ids = jp_asyncio_loop.run_until_complete(history())
    yield h, t0, ids
    jp_asyncio_loop.run_until_complete(h.close())


def _get(h: Harness, user: str, t0: float, **kw: str) -> dict[str, Any]:
    out = h.engine.insights(user, since=str(int(t0)), until=str(int(t0 + 7 * DAY)), **kw)
    Insights.model_validate(out)  # the answer fits its response model
    return out


def _queue(out: dict[str, Any], name: str) -> dict[str, Any]:
    return next(q for q in out["queues"] if q["name"] == name)


def test_nearest_rank_percentiles() -> None:
    xs = [0.0, 0.0, 100.0, 100.0, 120.0]
    assert [percentile(xs, p) for p in (50, 90, 99)] == [100.0, 120.0, 120.0]
    assert percentile([], 50) is None and percentile([7.0], 1) == 7.0


def test_a_week_gives_the_hand_computed_figures(week: tuple[Harness, float, dict[str, str]]) -> None:
    h, t0, _ = week
    out = _get(h, "ops", t0, bucket="1d")
    busy = _queue(out, "busy")
    assert busy["runs"] == 5
    assert busy["queue_wait"] == {"n": 5, "p50": 100.0, "p90": 120.0, "p99": 120.0, "max": 120.0, "mean": 64.0}
    assert busy["start_wait"]["p99"] == 0.0
    assert busy["waits_by_category"]["concurrency"] == 320.0
    assert {r["reason"]: r["seconds"] for r in busy["waits_by_reason"] if r["seconds"]} == {"QueueConcurrency": 320.0}
    assert busy["gpu_hours"] == round(320 / 3600, 6)
    assert busy["goodput"] == 0.5  # (100+100+50+50+20) / (100+100+150+150+140)
    assert busy["allowance_gpu_hours"] is None and busy["quota_gpu"] is None
    quota = _queue(out, "quota")
    assert quota["queue_wait"]["p50"] == 0.0 and quota["queue_wait"]["max"] == 40.0
    assert quota["waits_by_category"]["quota"] == 40.0
    assert quota["gpu_hours"] == round(120 / 3600, 6)
    assert quota["allowance_gpu_hours"] == 2 * 7 * 24.0
    assert quota["utilisation"] == round((120 / 3600) / (2 * 7 * 24), 6)
    assert quota["goodput"] == round(120 / (40 + 40 + 80), 6)
    peruser = _queue(out, "peruser")
    assert peruser["waits_by_category"]["max_per_user"] == 30.0 and peruser["queue_wait"]["max"] == 30.0
    inter = _queue(out, "interactive")
    assert inter["failures"] == [{"reason": "Error", "count": 1}]
    assert inter["goodput"] == 1.0
    total = out["total"]
    assert total["runs"] == 11 and total["failures"] == [{"reason": "Error", "count": 1}]
    assert total["gpu_hours"] == round((320 + 30 + 120 + 60) / 3600, 6)
    assert total["machine_gpu_hours"] == 8 * 7 * 24.0  # the fake machine's 8 GPUs
    # The daily series: busy and J on day 0, quota on day 3, peruser on day 5.
    assert len(out["series"]) == 7
    assert [s["gpu_hours"] for s in out["series"]] == [round(x / 3600, 6) for x in (350, 0, 0, 120, 0, 60, 0)]
    assert out["series"][0]["queued"] == 6 and out["series"][0]["queue_wait_p90"] == 120.0
    assert out["series"][3]["machine_gpu_hours"] == 8 * 24.0
    assert out["refusals"] and sum(r["count"] for r in out["refusals"]) == 1
    assert out["top_users"][0] == {
        "user": "bob",
        "project": "p",
        "runs": 10,
        "gpu_hours": round(480 / 3600, 6),
        # no GPU sampling on this executor: nothing measured, never counted as busy or idle
        "gpu_hours_measured": 0.0,
        "gpu_hours_busy": None,
        "busy_fraction": None,
    }
    # A platform without flavors: no flavor rows, in all or in any queue.
    assert out["flavors"] == [] and all(q["flavors"] == [] for q in out["queues"])


def test_one_queue_and_the_answer_is_a_recount(week: tuple[Harness, float, dict[str, str]]) -> None:
    h, t0, ids = week
    out = _get(h, "ops", t0, queue="busy")
    assert [q["name"] for q in out["queues"]] == ["busy"]
    assert out["total"]["queue_wait"] == _queue(out, "busy")["queue_wait"]
    # Recounted here from each run's record (times and timeline) through core.clocks.
    rows = [h.store.get_run(ids[n]) for n in "ABCDE"]
    waits = sorted(clocks(r, r["timeline"], h.clock())["queue_wait_seconds"] for r in rows if r)
    assert [out["total"]["queue_wait"][f"p{p}"] for p in (50, 90, 99)] == [percentile(waits, p) for p in (50, 90, 99)]
    assert sum(r["refusals"][0]["count"] for r in [out]) == 1  # the big submit was for busy


def test_a_member_sees_only_their_projects(week: tuple[Harness, float, dict[str, str]]) -> None:
    h, t0, _ = week
    out = _get(h, "bob", t0, queue="busy")
    busy = _queue(out, "busy")
    assert busy["queue_wait"]["n"] == 4 and busy["queue_wait"]["p50"] == 0.0  # A, B, C, E: not dave's D
    assert "dave" not in str(out) and "'other'" not in str(out).replace("'other': 0.0", "")
    dave = _get(h, "dave", t0, queue="busy")
    assert dave["total"]["queue_wait"]["n"] == 1 and "bob" not in str(dave) and "'p'" not in str(dave)
    assert not out["platform_admin"]
    with pytest.raises(NotFound, match="project 'other' not found"):
        _get(h, "bob", t0, project="other")


@pytest.mark.parametrize(
    ("args", "error", "words"),
    [
        ({"queue": "nope"}, NotFound, "queue 'nope' not found"),
        ({"since": "yesterday"}, InvalidInput, "since must be"),
        ({"since": "100", "until": "50"}, InvalidInput, "before until"),
        ({"since": "999d"}, InvalidInput, "at most 400 days"),
        ({"bucket": "1s"}, InvalidInput, "between 1m and 400d"),
        ({"since": "30d", "bucket": "1m"}, InvalidInput, "at most 2000"),
    ],
)
def test_bad_inputs_are_refused(week: tuple[Harness, float, dict[str, str]], args: Any, error: Any, words: str) -> None:
    h, _, _ = week
    with pytest.raises(error, match=words):
        h.engine.insights("ops", **args)


def test_the_report_as_table_and_csv(week: tuple[Harness, float, dict[str, str]]) -> None:
    from jupyter_gpuplat.cli import report

    h, t0, _ = week
    out = _get(h, "ops", t0, bucket="1d")
    lines = report.render_csv(out).splitlines()
    assert lines[0].split(",")[:5] == ["queue", "runs", "qwait_p50", "qwait_p90", "qwait_p99"]
    busy = next(line.split(",") for line in lines if line.startswith("busy,"))
    assert busy[1:5] == ["5", "100.0", "120.0", "120.0"]
    assert len(lines) == 1 + len(QUEUES) + 1  # header, one row a queue, all
    table = report.render_table(out)
    assert "busy" in table and "refusals: NoCapacity 1" in table and "bob (p)" in table
    assert report.FLAVORS_TITLE not in table and report.FLAVORS_TITLE not in report.render_html(out)
    assert lines[0].endswith(",flavor") and busy[-1] == ""  # no flavor rows, the column empty
