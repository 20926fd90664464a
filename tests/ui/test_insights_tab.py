"""The sidebar's Insights tab in a real browser: a seeded history (short real runs through the
API; a third run on team-a-train waits for the first two), its charts and tables for a member
(team-a's queues only) and a platform admin (every queue), and a what-if on that history."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from ..waiting import until
from .conftest import Lab, widen_left_sidebar

SIDEBAR = "#jupyter-gpuplat-sidebar"
PAGE = f"{SIDEBAR} #jp-GpuPlat-page-insights"


def short(seconds: float, code: int = 0) -> list[str]:
    return [sys.executable, "-c", f"import time, sys; time.sleep({seconds}); sys.exit({code})"]


def finished(lab: Lab, run_id: str, user: str) -> dict[str, Any]:
    def done() -> dict[str, Any]:
        run: dict[str, Any] = lab.ok("GET", f"runs/{run_id}", user=user)
        return run if run["status"] in ("succeeded", "failed") else {}

    return until(done, f"run {run_id} ends", timeout=60)


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Lab, dict[str, Any]]]:
    """Its own server (other browser tests' runs stay out): team-a-train has 2 GPUs of quota, so
    alice's third one-GPU run waits; one of hers fails; one is refused; dave runs once on team-b-train."""
    lab = Lab(tmp_path_factory.mktemp("insights-lab"))
    lab.start(timeout=90)
    try:
        body = {"project": "team-a", "queue": "team-a-train", "presets": ["single-gpu"]}
        ids = [lab.ok("POST", "runs", body={**body, "name": f"t{i}", "command": short(1.0)})["id"] for i in range(3)]
        ids.append(lab.ok("POST", "runs", body={**body, "name": "broken", "command": short(0.1, 3)})["id"])
        code, refused = lab.call("POST", "runs", body={**body, "queue": "team-b-train", "command": short(0.1)})
        assert code == 403, (code, refused)  # team-a may not use team-b's queue: a refusal on the record
        dave = lab.ok(
            "POST",
            "runs",
            user="dave",
            body={"project": "team-b", "queue": "team-b-train", "presets": ["single-gpu"], "command": short(0.1)},
        )
        runs = {i: finished(lab, i, "alice") for i in ids}
        runs[dave["id"]] = finished(lab, dave["id"], "dave")
        yield lab, runs
    finally:
        lab.stop()


def open_insights(lab: Lab, context: Any, user: str) -> Any:
    page = context.new_page()
    page.set_default_timeout(30_000)
    page.goto(f"{lab.url}lab/workspaces/insights-{user}?token=tok-{user}")
    page.locator('li[data-id="jupyter-gpuplat-sidebar"]').click()
    widen_left_sidebar(page, 520)
    page.locator(f'{SIDEBAR} .jp-GpuPlat-tab[data-tab="insights"]').click()
    expect(page.locator(PAGE)).to_be_visible()
    return page


def test_member_sees_their_queues_charts_and_tables(
    history: tuple[Lab, dict[str, Any]], browser_context: Any, screenshots: Path
) -> None:
    lab, runs = history
    api = lab.ok("GET", "insights", since="7d")
    page = open_insights(lab, browser_context, "alice")
    try:
        train = page.locator(f'{PAGE} .jp-GpuPlat-insightsQueue[data-queue="team-a-train"]')
        expect(train).to_be_visible()
        expect(page.locator(f'{PAGE} .jp-GpuPlat-insightsQueue[data-queue="team-b-train"]')).to_have_count(0)
        # the numbers are the API's: alice's 4 runs on team-a-train (the third waited), one failure
        queue = next(q for q in api["queues"] if q["name"] == "team-a-train")
        assert queue["runs"] == 4 and queue["queue_wait"]["p99"] > 0, queue
        assert [q["name"] for q in api["queues"] if q["name"] == "team-b-train"] == [], api["queues"]
        expect(train.locator(".jp-GpuPlat-sectionTitle")).to_contain_text("4 runs")
        expect(train.locator('[data-chart="waits"] .jp-GpuPlat-barRow')).to_have_count(6)
        held = [c for c, s in queue["waits_by_category"].items() if s > 0]
        expect(train.locator('[data-chart="reasons"] .jp-GpuPlat-barRow')).to_have_count(len(held))
        assert held, queue["waits_by_category"]
        expect(page.locator(f'{PAGE} [data-chart="usage"] svg path')).not_to_have_count(0)
        expect(page.locator(f'{PAGE} [data-chart="goodput"] [data-label="team-a-train"]')).to_be_visible()
        users = page.locator(f'{PAGE} [data-table="users"]')
        expect(users.locator('tr[data-key="alice"] td').nth(2)).to_have_text("4")
        expect(users.locator('tr[data-key="dave"]')).to_have_count(0)
        for f in api["total"]["failures"]:
            expect(page.locator(f'{PAGE} [data-table="failures"] tr[data-key="{f["reason"]}"]')).to_contain_text(
                str(f["count"])
            )
        assert api["refusals"], api["refusals"]
        for r in api["refusals"]:
            expect(page.locator(f'{PAGE} [data-table="refusals"] tr[data-key="{r["rule"]}"]')).to_contain_text(
                str(r["count"])
            )
        failed = [r for r in runs.values() if r["status"] == "failed"]
        assert [r["name"] for r in failed] == ["broken"], failed
        assert sum(f["count"] for f in api["total"]["failures"]) == 1, api["total"]
        # the selector: one queue at a time
        page.locator(f"{PAGE} .jp-GpuPlat-insightsScope").select_option("queue:team-a-train")
        expect(page.locator(f"{PAGE} .jp-GpuPlat-insightsQueue")).to_have_count(1)

        # what-if: twice the quota lets the third run start at once
        form = page.locator(f"{PAGE} .jp-GpuPlat-whatifForm")
        form.locator('select[name="queue"]').select_option("team-a-train")
        form.locator('input[name="quota_gpu"]').fill("4")
        form.locator('input[name="concurrency"]').fill("4")
        form.get_by_role("button", name="Run what-if").click()
        table = page.locator(f"{PAGE} .jp-GpuPlat-whatifTable")
        expect(table).to_be_visible()
        expect(table.locator('tr[data-row="queue wait p99"] .jp-GpuPlat-whatifPredicted')).to_have_class(
            "jp-GpuPlat-whatifPredicted jp-mod-better"
        )
        expect(page.locator(f"{PAGE} .jp-GpuPlat-whatifAssumptions li")).not_to_have_count(0)
        page.set_viewport_size({"width": 1400, "height": 1700})  # the whole tab, charts and what-if, in one shot
        page.screenshot(path=screenshots / "insights-tab.png")
        page.set_viewport_size({"width": 1400, "height": 900})

        # a refused what-if shows the service's message
        form.locator('input[name="quota_gpu"]').fill("")
        form.locator('input[name="concurrency"]').fill("")
        form.locator('input[name="max_per_user"]').fill("0")
        form.get_by_role("button", name="Run what-if").click()
        expect(page.locator(f"{PAGE} .jp-GpuPlat-whatifResult .jp-GpuPlat-error")).to_contain_text("max_per_user")
        # a flavor's quota goes by name; a queue without flavors is refused, saying so
        form.locator('input[name="max_per_user"]').fill("")
        form.locator('input[name="flavors"]').fill("h100=1")
        form.get_by_role("button", name="Run what-if").click()
        expect(page.locator(f"{PAGE} .jp-GpuPlat-whatifResult .jp-GpuPlat-error")).to_contain_text(
            "queue team-a-train does not offer flavor 'h100' (it offers no flavors)"
        )
    finally:
        page.close()


def test_admin_sees_every_queue(history: tuple[Lab, dict[str, Any]], browser_context: Any) -> None:
    lab, _ = history
    page = open_insights(lab, browser_context, "ops")
    try:
        expect(page.locator(f'{PAGE} .jp-GpuPlat-insightsQueue[data-queue="team-b-train"]')).to_be_visible()
        expect(page.locator(f'{PAGE} .jp-GpuPlat-insightsQueue[data-queue="team-a-train"]')).to_be_visible()
        expect(page.locator(f'{PAGE} [data-table="users"] tr[data-key="dave"]')).to_be_visible()
        # a platform without flavors: none in the answer, no per-flavor table (flavors: test_insights_flavors_tab.py)
        api = lab.ok("GET", "insights", user="ops", since="7d")
        assert api["flavors"] == [] and all(q["flavors"] == [] for q in api["queues"]), api["flavors"]
        expect(page.locator(f'{PAGE} [data-table="flavors"]')).to_have_count(0)
        expect(page.locator(f'{PAGE} [data-table="queueFlavors"]')).to_have_count(0)
        options = page.locator(f"{PAGE} .jp-GpuPlat-insightsScope option")
        expect(options.filter(has_text="Queue team-b-train")).to_have_count(1)
    finally:
        page.close()
