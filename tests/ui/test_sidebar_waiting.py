"""Why runs wait, in a real browser: a queued row says its reason and numbers; the Queues tab
lists the pending runs with their positions, ordering and max_per_user; run ids in the
explanation are links that open the run; runs selected in the list → Compare (n)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from playwright.sync_api import expect

from .conftest import Lab
from .sidebar_helpers import SIDEBAR, back_to_runs, drain, open_from_list, release, row, show_tab, submit_gated

GATES = ("gate-hold-1", "gate-hold-2", "gate-third")


def test_waiting_rows_queues_and_links(lab: Lab, lab_page: Any, screenshots: Path) -> None:
    page = lab_page
    runs: list[dict[str, Any]] = []
    try:
        drain(lab)
        # team-a-train dispatches 2 runs at a time: two holders, the third waits for a slot
        runs.append(submit_gated(lab, "hold-1", GATES[0]))
        runs.append(submit_gated(lab, "hold-2", GATES[1]))
        for r in runs:
            lab.wait_status(r["id"], "running")
        third = submit_gated(lab, "third", GATES[2])
        runs.append(third)
        assert lab.ok("GET", f"runs/{third['id']}")["status"] == "queued"

        back_to_runs(page)
        why = row(page, third["id"]).locator(".jp-GpuPlat-runMeta")
        expect(why).to_have_class(re.compile("jp-mod-why"))
        expect(why).to_contain_text("Queue concurrency")
        expect(why).to_contain_text("2/2")
        expect(row(page, third["id"]).locator(".jp-GpuPlat-runPhase")).to_contain_text("waiting")
        page.screenshot(path=screenshots / "runs-waiting-why.png")

        # Queues: rules, and the pending run with its position, a link to it
        show_tab(page, "queues")
        queue = page.locator(f'{SIDEBAR} .jp-GpuPlat-queue[data-queue="team-a-train"]')
        expect(queue).to_contain_text("1 pending")
        # its longest wait counts on between events (the panel's clock, not a reload)
        line = queue.locator(".jp-GpuPlat-queuePending")
        expect(line).to_contain_text("longest wait")
        expect(page.locator(SIDEBAR)).to_have_attribute("data-ticking", "true")
        first = line.inner_text()
        expect(line).not_to_have_text(first, timeout=5_000)
        expect(queue.locator(".jp-GpuPlat-queueRules")).to_have_text("ordering best_effort_fifo · no per-user limit")
        interactive = page.locator(f'{SIDEBAR} .jp-GpuPlat-queue[data-queue="interactive"]')
        expect(interactive.locator(".jp-GpuPlat-queueRules")).to_contain_text("at most 1 dispatched per user")
        pending = queue.locator(".jp-GpuPlat-pendingRun")
        expect(pending).to_have_count(1)
        expect(pending.first).to_have_text("1st · third (alice)")
        page.screenshot(path=screenshots / "queues-pending.png")
        pending.first.locator("a").click()
        detail = page.locator(f'{SIDEBAR} .jp-GpuPlat-detail[data-run-id="{third["id"]}"]')
        expect(detail).to_be_visible()

        # explain names what holds it up: the run ids are links that open those runs
        links = detail.locator(".jp-GpuPlat-explainBlockers a.jp-GpuPlat-runLink")
        expect(links).to_have_count(2)
        target = links.first.get_attribute("data-run-id")
        assert target in {runs[0]["id"], runs[1]["id"]}
        expect(links.first).to_have_text(target)
        links.first.click()
        expect(page.locator(f'{SIDEBAR} .jp-GpuPlat-detail[data-run-id="{target}"]')).to_be_visible()

        # select two runs in the list (checkbox, then ctrl-click): Compare (2)
        back_to_runs(page)
        compare = page.locator(f"{SIDEBAR} .jp-GpuPlat-compare")
        expect(compare).to_be_hidden()
        row(page, runs[0]["id"]).locator(".jp-GpuPlat-runSelect").check()
        expect(compare).to_have_text("Compare (1)")
        expect(compare).to_be_disabled()
        row(page, runs[1]["id"]).locator(".jp-GpuPlat-runName").click(modifiers=["Control"])
        expect(compare).to_have_text("Compare (2)")
        expect(compare).to_be_enabled()
        expect(row(page, runs[1]["id"])).to_have_class(re.compile("jp-mod-selected"))
        # ctrl-click selects, it does not open the run
        expect(page.locator(f"{SIDEBAR} .jp-GpuPlat-detail")).to_have_count(0)
        page.locator(f"{SIDEBAR} .jp-GpuPlat-clearSelection").click()
        expect(compare).to_be_hidden()
        # from the keyboard: arrows to a run, Ctrl+Space selects it
        run_list = page.locator(f"{SIDEBAR} .jp-GpuPlat-runList")
        run_list.focus()
        page.keyboard.press("Home")
        page.keyboard.press("Control+Space")
        expect(compare).to_have_text("Compare (1)")
        expect(page.locator(f"{SIDEBAR} .jp-GpuPlat-runRow.jp-mod-selected")).to_have_count(1)
        page.locator(f"{SIDEBAR} .jp-GpuPlat-clearSelection").click()
    finally:
        release(lab, *GATES)
        for r in runs:
            lab.wait_status(r["id"], "succeeded", "failed", "stopped")
        back_to_runs(page)


def test_a_run_detail_opens_the_main_area_views_by_command(lab: Lab, lab_page: Any) -> None:
    page = lab_page
    run = submit_gated(lab, "buttons", "gate-buttons")
    try:
        lab.wait_status(run["id"], "running")
        detail = open_from_list(page, run["id"])
        # a row click showed the compact summary here, in the sidebar
        expect(detail.get_by_role("button", name="Open in tab")).to_be_visible()
        expect(detail.get_by_role("button", name="Run folder")).to_be_visible()
        expect(detail.locator(".jp-GpuPlat-output a.jp-GpuPlat-runLink", has_text="output.log")).to_be_visible()
    finally:
        release(lab, "gate-buttons")
        lab.wait_status(run["id"], "succeeded", "failed", "stopped")
    expect(detail.locator(".jp-GpuPlat-detailHeader .jp-GpuPlat-status")).to_have_text("succeeded")
    # a finished run: "alice can submit it again", with the button beside it
    who = detail.locator(".jp-GpuPlat-explainWho")
    expect(who).to_contain_text("can submit it again")
    expect(who.get_by_role("button", name="Submit again…")).to_be_visible()
    back_to_runs(page)
