"""The sidebar's live state in a real browser: the run clock and explain's "running for …"
advance while a run runs and stop when it ends (the panel's timer stops too); output sizes
refresh while the log streams; success toasts close by themselves; failures collapse into
one notice, updated in place, with a link per run."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

from playwright.sync_api import expect

from .conftest import Lab
from .sidebar_helpers import SIDEBAR, back_to_runs, drain, format_duration, open_from_list, release, row, submit_gated


def test_the_clock_advances_while_the_run_runs_and_stops_when_it_ends(
    lab: Lab, lab_page: Any, screenshots: Path
) -> None:
    page = lab_page
    panel = page.locator(SIDEBAR)
    drain(lab)
    run = submit_gated(lab, "clock", "gate-clock")
    try:
        lab.wait_status(run["id"], "running")
        detail = open_from_list(page, run["id"])
        expect(detail).to_have_attribute("data-status", "running")
        expect(panel).to_have_attribute("data-ticking", "true")
        clock = detail.locator('[data-clock="run"] .jp-GpuPlat-clockValue')
        expect(clock).not_to_have_text("—")
        first = clock.inner_text()
        expect(clock).not_to_have_text(first, timeout=5_000)  # it counts on by itself, no event needed
        # explain was read once, near the start: its "running for" counts on too (not "0s" forever)
        message = detail.locator(".jp-GpuPlat-explainMessage")
        expect(message).to_have_text(re.compile(r"running for ([3-9]|\d\d)s"), timeout=10_000)
        # the log streams into output.log: its listed size grows while the run runs
        size = detail.locator(".jp-GpuPlat-output", has_text="output.log").locator(".jp-GpuPlat-muted")
        expect(size).not_to_have_text("0 B")
        before = size.inner_text()
        expect(size).not_to_have_text(before, timeout=10_000)
        assert lab.ok("GET", f"runs/{run['id']}")["status"] == "running"
        detail.locator(".jp-GpuPlat-clocks").scroll_into_view_if_needed()
        page.screenshot(path=screenshots / "run-clock-live.png")

        release(lab, "gate-clock")
        expect(detail.locator(".jp-GpuPlat-detailHeader .jp-GpuPlat-status")).to_have_text("succeeded")
        # final: the timer stopped, the clock shows the run's recorded time
        expect(panel).to_have_attribute("data-ticking", "false")
        done = lab.ok("GET", f"runs/{run['id']}")
        expect(clock).to_have_text(format_duration(done["finished_at"] - done["started_at"]))
        expect(detail.locator('[data-clock="run"]')).not_to_have_class(re.compile("jp-mod-live"))
        # success toasts close by themselves (the notification centre keeps them)
        toast = page.locator(".Toastify__toast", has_text="Run clock succeeded")
        expect(toast).to_be_visible()
        expect(toast).to_have_count(0, timeout=15_000)
    finally:
        release(lab, "gate-clock")
        lab.wait_status(run["id"], "succeeded", "failed", "stopped")
        back_to_runs(page)


def test_failures_collapse_into_one_notice_with_links(lab: Lab, lab_page: Any, screenshots: Path) -> None:
    page = lab_page
    back_to_runs(page)
    ids = []
    for name in ("fail-a", "fail-b", "fail-c"):
        body = {"project": "team-a", "name": name, "command": [sys.executable, "-c", "import sys; sys.exit(3)"]}
        ids.append(lab.ok("POST", "runs", body=body)["id"])
    for rid in ids:
        lab.wait_status(rid, "failed")
    notice = page.locator(".Toastify__toast", has_text="runs failed")
    # newest first: the order they ended in (the stream brings the three ends; a loaded CI took over 5 s)
    expect(notice).to_contain_text("3 runs failed: ", timeout=20_000)
    for name in ("fail-a", "fail-b", "fail-c"):
        expect(notice).to_contain_text(name)
    # one notice, updated in place: no toast per failure
    expect(page.locator(".Toastify__toast", has_text="failed")).to_have_count(1)
    expect(notice).to_be_in_viewport(ratio=1)  # slid in, for the screenshot
    page.screenshot(path=screenshots / "failures-notice.png")
    # a link per run: it opens that run in the sidebar (and keeps the notice for the others)
    notice.get_by_role("button", name="Open fail-b").click()
    expect(page.locator(f'{SIDEBAR} .jp-GpuPlat-detail[data-run-id="{ids[1]}"]')).to_be_visible()
    expect(notice).to_be_visible()
    page.mouse.move(5, 5)  # a hovered toast waits for the user; they move on
    # and it does not stay over the notebook for minutes
    expect(notice).to_have_count(0, timeout=25_000)
    back_to_runs(page)
    expect(row(page, ids[0])).to_contain_text("failed")
