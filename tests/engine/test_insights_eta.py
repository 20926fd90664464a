"""Insights' `eta_calibration` equals a recount from the runs' records: the engine (FakeExecutor, FakeClock)
records each waiting run's first start estimate; the test recounts from `gpuplat_runs` and `gpuplat_run_etas`.

Queue `one` (concurrency 1), every run limited to 1,000 s. At 0: W1 (100 s) runs, W2 waits; with no history its
estimate is W1's whole limit (1,000), it starts at 100 (before the window). At 200, with two 100 s runs of `w` as
history: H (300 s, one) runs; M (w, 50 s), dave's D (10 s) and E (20 s) wait behind it, estimated at 300, 400
and 1,400 (D has no history: its limit); H runs long, so they start at 500, 550 and 560: M and D after their p90,
E before. Queue `two`: U (no time limit, no history, 400 s) runs and X waits behind it with no estimate
("unknown"), starting at 600 uncounted. The window is [150, 3600).
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from jupyter_gpuplat.executors.fake import FakeExecutor, Script
from jupyter_gpuplat.service.schemas.insights import Insights

from ..fake_engine import Harness, config

LIMIT = {"timeout_seconds": 1000}
QUEUES = [{"name": "one", "concurrency": 1}, {"name": "two", "concurrency": 1}]
SINCE, UNTIL = 150.0, 3600.0


@pytest.fixture
def history(
    tmp_path: Path, jp_asyncio_loop: asyncio.AbstractEventLoop
) -> Iterator[tuple[Harness, float, dict[str, str]]]:
    took = {"W1": 100, "W2": 100, "H": 300, "M": 50, "D": 10, "E": 20, "U": 400, "X": 10}
    h = Harness(tmp_path, FakeExecutor(gpus=8, scripts={n: Script.succeeds(after=d) for n, d in took.items()}))

    async def run() -> tuple[float, dict[str, str]]:
        await h.start(config(QUEUES))
        t0 = h.clock()
        ids = {n: h.submit(queue="one", name=n, command=["w"], termination=LIMIT) for n in ("W1", "W2")}
        await h.settle()
        h.engine.estimates.changed()  # what the estimator's loop does after a change, now (whatever it took)
        h.engine.estimates.refresh()
        for step in (100, 100):
            await h.advance(step)
        ids["H"] = h.submit(queue="one", name="H", command=["w"], termination=LIMIT)
        ids["M"] = h.submit(queue="one", name="M", command=["w"], termination=LIMIT)
        ids["D"] = h.submit("dave", queue="one", name="D", project="other", command=["d"], termination=LIMIT)
        ids["E"] = h.submit(queue="one", name="E", command=["e"], termination=LIMIT)
        ids["U"] = h.submit(queue="two", name="U", command=["u"])  # no time limit
        ids["X"] = h.submit(queue="two", name="X", command=["x"], termination=LIMIT)
        await h.settle()
        h.engine.estimates.changed()
        h.engine.estimates.refresh()
        for step in (300, 50, 10, 20, 20, 10):  # to 500, 550, 560, 580, 600, 610
            await h.advance(step)
        assert set(h.statuses(*ids.values())) == {"succeeded"}
        return t0, ids

    t0, ids = jp_asyncio_loop.run_until_complete(run())
    yield h, t0, ids
    jp_asyncio_loop.run_until_complete(h.close())


def _first_estimates(h: Harness) -> dict[str, dict[str, Any]]:
    """gpuplat_run_etas as written, read with plain SQL, and each run's record beside it."""
    with h.store.engine.connect() as conn:
        rows = conn.execute(text("SELECT run_id, computed_at, p50_at, p90_at FROM gpuplat_run_etas")).mappings()
        found = {r["run_id"]: dict(r) for r in rows}
    for rid, row in found.items():
        run = h.store.get_run(rid)
        assert run is not None
        row |= {k: run[k] for k in ("queue", "project", "queued_at", "dispatched_at")}
    return found


def recount(h: Harness, since: float, until: float, queues: set[str], projects: set[str]) -> dict[str, Any]:
    """n, the share dispatched by their p90, the mean and the nearest-rank median of |dispatched - p50|."""
    rows = [
        r
        for r in _first_estimates(h).values()
        if r["queue"] in queues and r["project"] in projects and r["dispatched_at"] is not None
        if since <= r["dispatched_at"] < until
    ]
    errors = sorted(abs(r["dispatched_at"] - r["p50_at"]) for r in rows)
    n = len(rows)
    return {
        "n": n,
        "p90_hit_rate": sum(r["dispatched_at"] <= r["p90_at"] for r in rows) / n if n else None,
        "p50_abs_error_seconds": sum(errors) / n if n else None,
        "p50_abs_error_median_seconds": errors[math.ceil(n / 2) - 1] if n else None,
    }


def _same(got: dict[str, Any], want: dict[str, Any]) -> None:
    assert set(got) == set(want), got
    for k, v in want.items():
        assert got[k] == (v if v is None or k == "n" else pytest.approx(v, abs=1e-3)), (k, got, want)


def _insights(h: Harness, user: str, t0: float, until: float = UNTIL, **kw: str) -> dict[str, Any]:
    out = h.engine.insights(user, since=str(int(t0 + SINCE)), until=str(int(t0 + until)), **kw)
    Insights.model_validate(out)
    return out


def test_calibration_in_insights_equals_a_recount_from_the_records(
    history: tuple[Harness, float, dict[str, str]],
) -> None:
    h, t0, ids = history
    rows = _first_estimates(h)  # the scenario, as the engine recorded it
    # Only runs that waited with a known estimate have one: not those dispatched at once, not X (unknown).
    assert set(rows) == {ids[n] for n in ("W2", "M", "D", "E")}
    x = h.store.get_run(ids["X"])
    assert x is not None and x["dispatched_at"] == t0 + 600 and x["queued_at"] == t0 + 200  # it waited, uncounted
    late = {n for n in ("M", "D", "E") if rows[ids[n]]["dispatched_at"] > rows[ids[n]]["p90_at"]}
    assert late == {"M", "D"}  # H ran 300 s where its history said 100; E was estimated from D's limit
    assert rows[ids["W2"]]["dispatched_at"] == t0 + 100  # before the window
    everyone, bobs = {"p", "other"}, {"p"}
    lo, hi = t0 + SINCE, t0 + UNTIL
    out = _insights(h, "ops", t0)
    _same(out["total"]["eta_calibration"], recount(h, lo, hi, {"one", "two"}, everyone))
    one, two = (next(q for q in out["queues"] if q["name"] == n) for n in ("one", "two"))
    _same(one["eta_calibration"], recount(h, lo, hi, {"one"}, everyone))
    _same(two["eta_calibration"], recount(h, lo, hi, {"two"}, everyone))
    # By hand: M (200 s late of its p50, after its p90), D (150 s, after), E (840 s early, by its p90).
    assert out["total"]["eta_calibration"] == {
        "n": 3,
        "p90_hit_rate": round(1 / 3, 6),
        "p50_abs_error_seconds": round((200 + 150 + 840) / 3, 3),
        "p50_abs_error_median_seconds": 200.0,
    }
    assert two["eta_calibration"] == {
        "n": 0,
        "p90_hit_rate": None,
        "p50_abs_error_seconds": None,
        "p50_abs_error_median_seconds": None,
    }
    # A member counts only their projects' runs (not dave's D); one queue asked for; a window ending at E's dispatch.
    mine = _insights(h, "bob", t0)
    _same(mine["total"]["eta_calibration"], recount(h, lo, hi, {"one", "two"}, bobs))
    assert mine["total"]["eta_calibration"]["n"] == 2
    only = _insights(h, "ops", t0, queue="one")
    _same(only["total"]["eta_calibration"], recount(h, lo, hi, {"one"}, everyone))
    short = _insights(h, "ops", t0, until=560.0)
    _same(short["total"]["eta_calibration"], recount(h, lo, t0 + 560, {"one", "two"}, everyone))
    assert short["total"]["eta_calibration"]["n"] == 2 and short["total"]["eta_calibration"]["p90_hit_rate"] == 0


def test_the_report_says_it(history: tuple[Harness, float, dict[str, str]]) -> None:
    from jupyter_gpuplat.cli import report

    h, t0, _ = history
    out = _insights(h, "ops", t0)
    table = " ".join(report.render_table(out, width=100).split())
    assert "one: 3 runs, 33% started by their p90, p50 off by 6m 37s on average (median 3m 20s)" in table
    assert "two: no run with an estimate was dispatched" in table
    lines = report.render_csv(out).splitlines()
    cols = lines[0].split(",")
    one = dict(zip(cols, next(line for line in lines if line.startswith("one,")).split(","), strict=True))
    assert one["eta_runs"] == "3" and one["eta_p90_hit_rate"] == str(round(1 / 3, 6))
