"""The Insights tab per flavor, in a real browser: a platform with typed devices (h100: 0-1, a100:
2-5) and a queue `typed` trying h100 (quota 2) then a100 (quota 4), a few short real runs on each
flavor (placed by `gpu_type`) and one on a queue without flavors. The tab's "Per flavor" table has a
row per flavor in the server's order whose cells are the API's figures as the tab formats them (the
server computes each figure; the sidebar only formats it), and the queue `typed` its own flavors;
a scope without flavors (queue team-a-train) shows no such table. (A platform without flavors:
tests/ui/test_insights_tab.py.)

The table is this tree's frontend: serve it with GPUPLAT_UI_LABEXTENSIONS (tests/ui/conftest.py)
until the installed one is rebuilt."""

from __future__ import annotations

import math
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from playwright.sync_api import expect

from ..conftest import EXAMPLE
from ..flavored import add_flavors
from .conftest import Lab, widen_left_sidebar

SIDEBAR = "#jupyter-gpuplat-sidebar"
PAGE = f"{SIDEBAR} #jp-GpuPlat-page-insights"
DASH = "—"


def short(seconds: float) -> list[str]:
    return [sys.executable, "-c", f"import time; time.sleep({seconds})"]


@pytest.fixture(scope="module")
def flavored(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Lab, dict[str, dict[str, Any]]]]:
    """Its own server (6 GPUs declared per flavor, as tests/service/test_insights_flavors.py) and its
    finished runs by name: two one-GPU runs on h100, a four-GPU one on a100, one on team-a-train."""
    root = tmp_path_factory.mktemp("insights-flavors-lab")
    cfg = add_flavors(yaml.safe_load(EXAMPLE.read_text()))
    for p in cfg["projects"]:
        p["max_run_resources"] = {"gpu": 4}  # a run may take all of a100
    config_file = root / "platform.yaml"
    config_file.write_text(yaml.safe_dump(cfg))
    lab = Lab(root / "server", gpus=6, config_file=config_file)
    lab.start(timeout=90)
    try:
        plan = {
            "h1": ("typed", 1, "h100", 1.5),
            "h2": ("typed", 1, "h100", 1.0),
            "a1": ("typed", 4, "a100", 2.0),
            "plain": ("team-a-train", 1, None, 0.5),
        }
        ids = {}
        for name, (queue, gpu, gpu_type, seconds) in plan.items():
            body: dict[str, Any] = {
                "project": "team-a",
                "queue": queue,
                "name": name,
                "command": short(seconds),
                "resources": {"gpu": gpu},
            }
            if gpu_type:
                body["placement"] = {"gpu_type": gpu_type}
            ids[name] = lab.ok("POST", "runs", body=body)["id"]
        runs = {name: lab.wait_status(rid, "succeeded", "failed", timeout=60) for name, rid in ids.items()}
        yield lab, runs
    finally:
        try:
            lab.stop_all_runs()
        finally:
            lab.stop()


# The tab's formatting (labextension/src/models/insightsmodel.ts, insightsgpu.ts, format.ts): the API's
# figures as it shows them.
def hours(v: float) -> str:
    if 0 < v < 0.01:  # a small non-zero figure stays visible
        return "<0.0001" if v < 0.0001 else repr(float(f"{v:.2g}"))
    return f"{v:.0f}" if v >= 100 else f"{v:.1f}" if v >= 10 else f"{v:.2f}"


def busy(f: dict[str, Any]) -> str:
    """Held GPU-hours measured and busy (these runs' devices were not sampled: "not measured")."""
    if f["busy_fraction"] is None:
        return "not measured"
    return f"{hours(f['gpu_hours_busy'])} of {hours(f['gpu_hours_measured'])} ({percent(f['busy_fraction'])})"


def percent(v: float | None) -> str:
    if v is None:
        return DASH
    x = 100 * v
    if x == 0:
        return "0%"
    if x >= 10:
        return f"{x:.0f}%"
    if x >= 0.1:
        return f"{x:.1f}%"
    return f"{float(f'{x:.2g}')!r}%" if x >= 0.001 else "<0.001%"


def duration(s: float | None) -> str:
    assert s is None or s < 60, s  # short runs: waits under a minute
    if s is None:
        return DASH
    return f"{math.floor(max(0.0, s) * 10) / 10:.1f}s" if s < 1 else f"{math.floor(s)}s"


def count(v: int | None) -> str:
    return DASH if v is None else str(v)


def row(f: dict[str, Any], machine: bool) -> list[str]:
    cells = [
        f["name"],
        str(f["runs"]),
        hours(f["gpu_hours"]),
        busy(f),
        count(f["quota_gpu"]),
        percent(f["utilisation"]),
    ]
    if machine:
        cells += [count(f["machine_gpus"]), percent(f["machine_utilisation"])]
    return [*cells, duration(f["queue_wait"]["p90"])]


def open_insights(lab: Lab, context: Any, user: str) -> Any:
    page = context.new_page()
    page.set_default_timeout(30_000)
    page.goto(f"{lab.url}lab/workspaces/insights-flavors-{user}?token=tok-{user}")
    page.locator('li[data-id="jupyter-gpuplat-sidebar"]').click()
    widen_left_sidebar(page, 560)
    page.locator(f'{SIDEBAR} .jp-GpuPlat-tab[data-tab="insights"]').click()
    expect(page.locator(PAGE)).to_be_visible()
    return page


def test_per_flavor_rows_are_the_apis_figures(
    flavored: tuple[Lab, dict[str, dict[str, Any]]], browser_context: Any, screenshots: Path
) -> None:
    lab, runs = flavored
    assert {n: (r["status"], r["flavor"]) for n, r in runs.items()} == {
        "h1": ("succeeded", "h100"),
        "h2": ("succeeded", "h100"),
        "a1": ("succeeded", "a100"),
        "plain": ("succeeded", None),
    }
    # the tab's query for "Last 24 h" (insightsQuery): a fixed 24 h back from the server's clock, so
    # the figures of these finished runs hold while the page reads them again
    api = lab.ok("GET", "insights", user="ops", since="24h", bucket="1h")
    flavors = api["flavors"]
    assert [(f["name"], f["runs"], f["quota_gpu"], f["machine_gpus"]) for f in flavors] == [
        ("h100", 2, 2, 2),
        ("a100", 1, 4, 4),
    ]
    assert all(f["gpu_hours"] > 0 and f["utilisation"] and f["machine_utilisation"] for f in flavors), flavors
    typed = next(q for q in api["queues"] if q["name"] == "typed")
    plain = next(q for q in api["queues"] if q["name"] == "team-a-train")
    assert [f["name"] for f in typed["flavors"]] == ["h100", "a100"] and plain["flavors"] == []

    page = open_insights(lab, browser_context, "ops")
    try:
        page.locator(f"{PAGE} .jp-GpuPlat-insightsSince").select_option("24h")
        table = page.locator(f'{PAGE} [data-table="flavors"]')
        expect(table.locator("figcaption")).to_have_text("Per flavor", timeout=15_000)  # loaded twice: 7d, 24h
        expect(table.locator("th")).to_have_text(
            [
                "Flavor",
                "Runs",
                "GPU-hours",
                "Busy of measured GPU-h",
                "Quota GPUs",
                "Utilisation",
                "Machine GPUs",
                "Machine use",
                "Wait p90",
            ]
        )
        rows = table.locator("tbody tr")
        expect(rows).to_have_count(2)
        for i, f in enumerate(flavors):  # the server's order, each cell its figure
            expect(rows.nth(i)).to_have_attribute("data-key", f["name"])
            expect(rows.nth(i).locator("td")).to_have_text(row(f, machine=True))

        # the queue `typed`: its flavors in the order it tries them, against its quota on each
        queue = page.locator(f'{PAGE} .jp-GpuPlat-insightsQueue[data-queue="typed"]')
        own = queue.locator('[data-table="queueFlavors"]')
        expect(own.locator("th")).to_have_text(
            ["Flavor", "Runs", "GPU-hours", "Busy of measured GPU-h", "Quota GPUs", "Utilisation", "Wait p90"]
        )
        expect(own.locator("tbody tr")).to_have_count(2)
        for i, f in enumerate(typed["flavors"]):
            expect(own.locator("tbody tr").nth(i).locator("td")).to_have_text(row(f, machine=False))
        # a queue without flavors has no such table
        other = page.locator(f'{PAGE} .jp-GpuPlat-insightsQueue[data-queue="team-a-train"]')
        expect(other.locator(".jp-GpuPlat-sectionTitle")).to_contain_text("1 runs")
        expect(other.locator('[data-table="queueFlavors"]')).to_have_count(0)
        page.set_viewport_size({"width": 1400, "height": 1400})
        page.screenshot(path=screenshots / "insights-flavors.png")
        page.set_viewport_size({"width": 1400, "height": 900})

        # one queue without flavors: the answer lists none, and the tab shows no per-flavor table
        assert lab.ok("GET", "insights", user="ops", since="24h", bucket="1h", queue="team-a-train")["flavors"] == []
        page.locator(f"{PAGE} .jp-GpuPlat-insightsScope").select_option("queue:team-a-train")
        expect(page.locator(f"{PAGE} .jp-GpuPlat-insightsQueue")).to_have_count(1)
        expect(page.locator(f'{PAGE} .jp-GpuPlat-insightsQueue[data-queue="team-a-train"]')).to_be_visible()
        expect(page.locator(f'{PAGE} [data-table="flavors"]')).to_have_count(0)
    finally:
        page.close()
