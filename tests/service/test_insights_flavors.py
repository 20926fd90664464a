"""Insights per flavor through a real Jupyter server, with real processes on declared typed devices
(h100: 0-1, a100: 2-5; queue `typed` with h100: 2 then a100: 4): each flavor's GPU-hours equal a
recount from the runs' records (gpu x the part of [started_at, finished_at) in the range, per
`flavor`), over the whole range and a range that cuts a run; utilisation is against the flavor's
quota and the machine's devices of it; a run of a queue without flavors counts in the total only.
`gpuplat report` shows the flavor rows. (A platform without flavors: tests/engine/test_insights.py.)"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import pytest

from jupyter_gpuplat.cli import report
from jupyter_gpuplat.service.schemas.insights import Insights

from ..conftest import EXAMPLE
from ..flavored import flavored_config


@pytest.fixture
def platform_config_file(tmp_path: Path) -> Path:
    return flavored_config(EXAMPLE, tmp_path / "platform.yaml")


@pytest.fixture
def jp_server_config(jp_server_config: dict[str, Any]) -> dict[str, Any]:
    jp_server_config["LocalExecutor"]["gpus"] = 6
    return jp_server_config


def recount(records: list[dict[str, Any]], since: float, until: float) -> dict[str | None, float]:
    """GPU-hours per flavor from the records alone: gpu x the part of [started_at, finished_at) in the range."""
    seconds: dict[str | None, float] = {}
    for r in records:
        if r["started_at"] is None:  # never ran: no GPU time
            continue
        inside = max(0.0, min(r["finished_at"], until) - max(r["started_at"], since))
        seconds[r["flavor"]] = seconds.get(r["flavor"], 0.0) + r["resources"]["gpu"] * inside
    return {f: round(s / 3600, 6) for f, s in seconds.items()}


async def test_gpu_hours_per_flavor_equal_a_recount_of_the_records(api: Any, tmp_path: Path) -> None:
    release = tmp_path / "release"
    # Each run holds its GPUs until the test lets it end, so that all are admitted together.
    hold = [sys.executable, "-c", f"import os, time\nwhile not os.path.exists({str(release)!r}): time.sleep(0.02)"]
    since = f"{time.time() - 1:.6f}"
    ids = {}
    for name, gpu in (("a", 2), ("b", 1), ("c", 2)):
        ids[name] = (await api.submit(name=name, queue="typed", command=hold, resources={"gpu": gpu}))["id"]
    ids["plain"] = (await api.submit(name="plain", queue="team-a-train", command=hold, resources={"gpu": 1}))["id"]
    for rid in ids.values():
        await api.wait_status(rid, "running")
    assert [(await api.run(ids[n]))["flavor"] for n in ("a", "b", "c", "plain")] == ["h100", "a100", "a100", None]
    release.touch()
    for rid in ids.values():
        await api.wait_status(rid, "succeeded")
    # a later one finds h100 free again
    ids["e"] = (await api.submit(name="e", queue="typed", command=hold, resources={"gpu": 1}))["id"]
    assert (await api.wait_status(ids["e"], "succeeded"))["flavor"] == "h100"
    records = [await api.run(rid) for rid in ids.values()]

    out = await api.ok("GET", "insights", "ops", since=since)
    Insights.model_validate(out)
    span = out["until"] - out["since"]
    expected = recount(records, out["since"], out["until"])
    flavors = {f["name"]: f for f in out["flavors"]}
    assert list(flavors) == ["h100", "a100"]  # the platform config's order
    for name, quota, machine, runs in (("h100", 2, 2, 2), ("a100", 4, 4, 2)):
        f = flavors[name]
        assert f["gpu_hours"] == pytest.approx(expected[name], abs=2e-6), name
        assert f["runs"] == f["ended_runs"] == runs and f["quota_gpu"] == quota and f["machine_gpus"] == machine
        assert f["allowance_gpu_hours"] == round(quota * span / 3600, 6)
        assert f["utilisation"] == round(f["gpu_hours"] / f["allowance_gpu_hours"], 6)
        assert f["machine_gpu_hours"] == round(machine * span / 3600, 6)
        assert f["machine_utilisation"] == round(f["gpu_hours"] / f["machine_gpu_hours"], 6)
        assert f["gpu_hours"] > 0 and f["goodput"] is not None
    # the run of a queue without flavors counts in the total, in no flavor
    assert out["total"]["gpu_hours"] == pytest.approx(sum(expected.values()), abs=4e-6)
    assert expected[None] > 0
    queues = {q["name"]: q for q in out["queues"]}
    assert [(f["name"], f["quota_gpu"]) for f in queues["typed"]["flavors"]] == [("h100", 2), ("a100", 4)]
    for f in queues["typed"]["flavors"]:  # typed is the only queue offering them
        assert f["gpu_hours"] == flavors[f["name"]]["gpu_hours"] and f["runs"] == flavors[f["name"]]["runs"]
    assert queues["team-a-train"]["flavors"] == [] and queues["team-a-train"]["gpu_hours"] > 0

    # A range starting inside b's run: each flavor's GPU-hours are clipped to it, as the recount's.
    b = next(r for r in records if r["id"] == ids["b"])
    cut = await api.ok("GET", "insights", "ops", since=f"{(b['started_at'] + b['finished_at']) / 2:.6f}")
    expected = recount(records, cut["since"], cut["until"])
    for f in cut["flavors"]:
        assert f["gpu_hours"] == pytest.approx(expected.get(f["name"], 0.0), abs=2e-6), f["name"]

    # One queue: only its flavors; a queue without flavors: none.
    typed = await api.ok("GET", "insights", "ops", since=since, queue="typed")
    assert [f["name"] for f in typed["flavors"]] == ["h100", "a100"]
    assert (await api.ok("GET", "insights", "ops", since=since, queue="team-a-train"))["flavors"] == []

    # `gpuplat report`: a row per flavor (all queues, then each queue offering it), in every format.
    table = report.render_table(out, width=250)
    assert "GPU-hours per flavor" in table
    lines = table.splitlines()
    h100 = next(line for line in lines if line.split()[:2] == ["h100", "(all)"])
    assert f"{flavors['h100']['gpu_hours']:.2f}" in h100 and "2" in h100.split()
    assert any(line.split()[:2] == ["a100", "typed"] for line in lines)
    csv_rows = [line.split(",") for line in report.render_csv(out).splitlines()]
    assert csv_rows[0][-1] == "flavor"
    by_flavor = {(r[0], r[-1]): r for r in csv_rows[1:] if r[-1]}
    assert set(by_flavor) == {("(all)", "h100"), ("(all)", "a100"), ("typed", "h100"), ("typed", "a100")}
    assert float(by_flavor[("(all)", "a100")][COLUMN_GPU_HOURS]) == flavors["a100"]["gpu_hours"]
    page = report.render_html(out)
    assert "GPU-hours per flavor" in page and "<td>a100</td>" in page


COLUMN_GPU_HOURS = report.COLUMNS.index("gpu_hours")
