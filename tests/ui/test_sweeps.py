"""Sweeps in the sidebar, in a real browser: a 3x4 grid with concurrency 2 is one row whose
child counts follow the events live, it expands to its children (with their params), its
concurrency is raised to 4 from its detail (4 then run), pausing shows on its timeline, and
releasing the children's gate ends the sweep succeeded."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from .conftest import Lab, widen_left_sidebar

SIDEBAR = "#jupyter-gpuplat-sidebar"

# A queue roomy enough that only the sweep's own concurrency holds its children.
PLATFORM = """\
admins: [ops]
queues:
  - name: sweeps
    priority: 10
    concurrency: 10
presets: []
projects:
  - name: team-a
    members: {alice: admin, bob: member}
    default_queue: sweeps
"""

# Each child waits for the gate file (an absolute path, its first argument).
WAIT_FOR_GATE = "import pathlib, sys, time\nwhile not pathlib.Path(sys.argv[1]).exists():\n    time.sleep(0.05)\n"
# The grid's children report loss = lr * batch, then wait for the gate.
CHILD_PY = (
    "from jupyter_gpuplat import tracking\n"
    "p = tracking.params()\n"
    "tracking.log_metrics(step=0, loss=p['lr'] * p['batch'])\n" + WAIT_FOR_GATE
)


@pytest.fixture(scope="module")
def sweep_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    root = tmp_path_factory.mktemp("sweep-lab")
    config = root / "platform.yaml"
    config.write_text(PLATFORM)
    server = Lab(root, config_file=config)
    server.start(timeout=90)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def sweep_page(sweep_lab: Lab, browser_context: Any) -> Iterator[Any]:
    page = browser_context.new_page()
    page.set_default_timeout(30_000)
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(sweep_lab.lab_url)
    tab = page.locator('li[data-id="jupyter-gpuplat-sidebar"]')
    expect(tab).to_be_visible(timeout=60_000)
    if not page.locator(SIDEBAR).is_visible():
        tab.click()
    expect(page.locator(SIDEBAR)).to_be_visible()
    widen_left_sidebar(page, 460)
    yield page
    assert not errors, errors
    page.close()


def test_a_sweep_is_one_live_row_whose_concurrency_changes_from_the_panel(
    sweep_lab: Lab, sweep_page: Any, screenshots: Path, tmp_path: Path
) -> None:
    page, lab = sweep_page, sweep_lab
    gate = tmp_path / "go"
    sweep = lab.ok(
        "POST",
        "runs",
        body={
            "project": "team-a",
            "name": "grid",
            "command": [sys.executable, "-c", CHILD_PY, str(gate)],
            "matrix": {
                "kind": "grid",
                "params": {"lr": {"values": [0.1, 0.01, 0.001]}, "batch": {"values": [8, 16, 32, 64]}},
                "concurrency": 2,
                "objective": {"metric": "loss", "optimization": "minimize"},
            },
        },
    )
    assert sweep["kind"] == "sweep" and sweep["children"]["total"] == 12

    # One row for the sweep and its 12 children, counts followed live from the events.
    rows = page.locator(f"{SIDEBAR} .jp-GpuPlat-runRow:visible")
    row = page.locator(f'{SIDEBAR} .jp-GpuPlat-runRow[data-run-id="{sweep["id"]}"]')
    expect(row).to_have_class("jp-GpuPlat-runRow jp-mod-sweep")
    expect(row).to_contain_text("2 running · 10 queued")
    expect(row).to_contain_text("0/12 ended")
    expect(rows).to_have_count(1)

    # Expanded: its children under it, each with its params; collapsed again.
    row.locator(".jp-GpuPlat-sweepToggle").click()
    children = page.locator(f"{SIDEBAR} .jp-GpuPlat-runRow.jp-mod-child:visible")
    expect(children).to_have_count(12)
    expect(children.filter(has_text="lr=0.1 · batch=8")).to_have_count(1)
    expect(children.filter(has_text="lr=0.001 · batch=64")).to_have_count(1)
    expect(children.filter(has_text="running")).to_have_count(2)
    page.screenshot(path=screenshots / "sweep-expanded.png")
    row.locator(".jp-GpuPlat-sweepToggle").click()
    expect(rows).to_have_count(1)

    # The detail: raise the concurrency to 4 from the panel; 2 more children start at once.
    row.click()
    detail = page.locator(f'{SIDEBAR} .jp-GpuPlat-detail[data-run-id="{sweep["id"]}"]')
    part = detail.locator(".jp-GpuPlat-sweep")
    expect(part.locator(".jp-GpuPlat-sweepCounts")).to_have_text("2 running · 10 queued")
    expect(part.locator(".jp-GpuPlat-sweepGate")).to_have_text("Dispatches at most 2 at once")
    part.get_by_label("Children dispatched at once, at most").fill("4")
    part.get_by_role("button", name="Apply").click()
    expect(part.locator(".jp-GpuPlat-sweepGate")).to_have_text("Dispatches at most 4 at once")
    expect(part.locator(".jp-GpuPlat-sweepCounts")).to_have_text("4 running · 8 queued")
    expect(detail.locator(".jp-GpuPlat-timeline")).to_contain_text("ConcurrencyChanged")
    assert lab.ok("GET", f"runs/{sweep['id']}")["concurrency"] == 4

    # Pause and resume, as the timeline records.
    part.get_by_role("button", name="Pause").click()
    expect(part.get_by_role("button", name="Resume")).to_be_visible()
    expect(detail.locator(".jp-GpuPlat-timeline")).to_contain_text("SweepPaused")
    assert lab.ok("GET", f"runs/{sweep['id']}")["paused"] is True
    part.get_by_role("button", name="Resume").click()
    expect(detail.locator(".jp-GpuPlat-timeline")).to_contain_text("SweepResumed")
    page.screenshot(path=screenshots / "sweep-detail.png")

    # The list's row says the same.
    detail.locator(".jp-GpuPlat-back").click()
    expect(row).to_contain_text("4 running · 8 queued")

    # Expanded while its children change: each child row says the service's clocks, its record
    # re-read on its events (the queued ones start, then all end: "ran …", the service's run time).
    row.locator(".jp-GpuPlat-sweepToggle").click()
    phase = children.locator(".jp-GpuPlat-runPhase")
    expect(phase.filter(has_text=re.compile(r"^running \d"))).to_have_count(4)

    # The gate opens: every child ends, the sweep succeeds, the row fills up.
    gate.write_text("go")
    expect(phase.filter(has_text=re.compile(r"^ran \d"))).to_have_count(12, timeout=60_000)
    row.locator(".jp-GpuPlat-sweepToggle").click()
    expect(row).to_contain_text("12 succeeded", timeout=60_000)
    expect(row).to_contain_text("12/12 ended")
    expect(row.locator(".jp-GpuPlat-status")).to_have_text("succeeded")
    expect(rows).to_have_count(1)
    assert lab.ok("GET", f"runs/{sweep['id']}")["status"] == "succeeded"

    # Its detail: the best child (the smallest loss, lr 0.001 x batch 8) and every child on the chart.
    row.click()
    expect(part.locator(".jp-GpuPlat-sweepBestParams")).to_have_text("lr=0.001 · batch=8")
    expect(part.locator(".jp-GpuPlat-sweepBestTitle")).to_contain_text("loss min 0.008000")
    expect(part.locator(".jp-GpuPlat-sweepControls")).to_be_hidden()  # ended: nothing to change
    expect(part.locator(".jp-GpuPlat-dot")).to_have_count(12)
    expect(part.locator(".jp-GpuPlat-dot.jp-mod-best")).to_have_count(1)
    expect(part.locator(".jp-GpuPlat-scatterAxis")).to_have_text("lr (log): 0.00100 … 0.100")
    part.get_by_label("Param on the x axis").select_option("batch")
    expect(part.locator(".jp-GpuPlat-scatterAxis")).to_have_text("batch: 8 … 64")
    page.screenshot(path=screenshots / "sweep-best.png")
    detail.locator(".jp-GpuPlat-back").click()


def test_who_may_not_stop_a_sweep_sees_no_controls(sweep_lab: Lab, browser_context: Any, tmp_path: Path) -> None:
    # alice's sweep, seen by bob: a member of its project who does not own it may not stop it
    sweep = sweep_lab.ok(
        "POST",
        "runs",
        body={
            "project": "team-a",
            "name": "alices",
            "command": [sys.executable, "-c", WAIT_FOR_GATE, str(tmp_path / "never")],
            "matrix": {"kind": "grid", "params": {"x": {"values": [1, 2]}}, "concurrency": 1},
        },
    )
    page = browser_context.new_page()
    try:
        page.goto(f"{sweep_lab.url}lab/workspaces/bob?token=tok-bob")
        page.locator('li[data-id="jupyter-gpuplat-sidebar"]').click()
        widen_left_sidebar(page, 460)
        row = page.locator(f'{SIDEBAR} .jp-GpuPlat-runRow[data-run-id="{sweep["id"]}"]')
        expect(row).to_contain_text("1 running · 1 queued")
        row.click()
        part = page.locator(f'{SIDEBAR} .jp-GpuPlat-detail[data-run-id="{sweep["id"]}"] .jp-GpuPlat-sweep')
        expect(part.locator(".jp-GpuPlat-sweepCounts")).to_have_text("1 running · 1 queued")
        expect(part.locator(".jp-GpuPlat-sweepControls")).to_be_hidden()
        # nor Stop: the run's `actions` (core/policy.run_actions) lack it; the old sidebar offered it to all
        stop = page.locator(f'{SIDEBAR} .jp-GpuPlat-detail[data-run-id="{sweep["id"]}"] .jp-GpuPlat-stop')
        expect(stop).to_be_disabled()
        expect(stop).to_have_attribute("title", "You may not stop this run")
        code, _ = sweep_lab.call("PATCH", f"runs/{sweep['id']}", "bob", {"concurrency": 2})
        assert code == 403  # the server says the same
    finally:
        page.close()
        sweep_lab.ok("POST", f"runs/{sweep['id']}/stop")


def test_a_wide_sweep_announced_at_once_is_still_one_row(sweep_lab: Lab, sweep_page: Any, tmp_path: Path) -> None:
    # 30 children announced in one frame: the sidebar reads them as one page, not 30 requests
    page, lab = sweep_page, sweep_lab
    page.locator(f"{SIDEBAR} .jp-GpuPlat-search").fill("wide")
    sweep = lab.ok(
        "POST",
        "runs",
        body={
            "project": "team-a",
            "name": "wide",
            "command": [sys.executable, "-c", WAIT_FOR_GATE, str(tmp_path / "never")],
            "matrix": {"kind": "grid", "params": {"x": {"range": [0, 30, 1]}}, "concurrency": 1},
        },
    )
    rows = page.locator(f"{SIDEBAR} .jp-GpuPlat-runRow:visible")
    row = page.locator(f'{SIDEBAR} .jp-GpuPlat-runRow[data-run-id="{sweep["id"]}"]')
    expect(row).to_contain_text("1 running · 29 queued")
    expect(rows).to_have_count(1)  # the children match the search too, but their sweep stands for them
    lab.ok("POST", f"runs/{sweep['id']}/stop")
    expect(row).to_contain_text("30 stopped")
    expect(row.locator(".jp-GpuPlat-status")).to_have_text("stopped")
    expect(rows).to_have_count(1)
    page.locator(f"{SIDEBAR} .jp-GpuPlat-search").fill("")
