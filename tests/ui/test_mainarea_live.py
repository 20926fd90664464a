"""The main-area tabs while runs change and after a reload (issue 23): the current phase of a run's
timeline counts live, a run tab's title follows the run's status, and a Compare tab draws the
metric every run shares first, says "code differs" once with the diff on demand, and draws its
curves again when the layout restores it."""

from __future__ import annotations

import json
import re
import sys
from typing import Any

from playwright.sync_api import expect

from ..waiting import until
from .conftest import Lab
from .sidebar_helpers import MAIN, close_main_tabs, execute, workspace

# The run's own code waits for its gate file (the test waits on conditions, never sleeps).
GATED = "import os, time\nwhile not os.path.exists({gate!r}):\n    time.sleep(0.05)\nprint('gate open', flush=True)\n"

# Both runs log `loss`; only the first also logs `a_extra`, whose name sorts first.
COMPARED = """\
K = {k}
from jupyter_gpuplat import tracking
for s in range(10):
    tracking.log_metrics(step=s, loss=K / (s + 1))
    if K == 1:
        tracking.log_metrics(step=s, a_extra=s)
"""


def test_timeline_phase_ticks_and_the_tab_title_follows_the_status(lab: Lab, lab_page: Any) -> None:
    page = lab_page
    gate = lab.work / "tick-gate"
    code = GATED.format(gate=str(gate))
    run = lab.ok("POST", "runs", body={"project": "team-a", "name": "ticking", "command": [sys.executable, "-c", code]})
    lab.wait_status(run["id"], "running")
    execute(page, "gpuplat:open-run", {"id": run["id"]})
    tab = page.locator(f'{MAIN} .jp-GpuPlat-runTab[data-run-id="{run["id"]}"]')
    expect(tab.locator(".jp-GpuPlat-detailHeader .jp-GpuPlat-status")).to_have_text("running")

    # The running phase's duration advances by itself (it was drawn once, when the record came).
    current = tab.locator('.jp-GpuPlat-phase[data-phase="run"] .jp-GpuPlat-phaseTime')
    expect(current).to_have_text(re.compile(r"\d"))
    first = current.inner_text()
    expect(current).not_to_have_text(first, timeout=5_000)
    title = page.locator(f"{MAIN} .lm-TabBar-tab", has_text="ticking · ")
    expect(title).to_have_text(re.compile("ticking · running"))

    # The record read after the run's end answers slowly (as on a loaded server): held until the
    # event has been shown, then let through. The title must not keep the status read before.
    held: list[Any] = []
    released = False
    record = re.compile(rf"/gpuplat/api/runs/{run['id']}(\?[^/]*)?$")
    page.route(record, lambda route: route.continue_() if released else held.append(route))
    try:
        with page.expect_request(record):  # (the route's handler runs while Playwright waits)
            gate.touch()
        expect(tab.locator(".jp-GpuPlat-detailHeader .jp-GpuPlat-status")).to_have_text("succeeded")
        assert held, "the record read after the end is held"
    finally:
        released = True
        for route in held:
            route.continue_()
        page.unroute(record)
    expect(title).to_have_text(re.compile("ticking · succeeded"))
    # An ended run's phases stand still: none counts live.
    expect(tab.locator(".jp-GpuPlat-phaseTime.jp-mod-live")).to_have_count(0)
    close_main_tabs(page)


def test_compare_shared_metric_first_code_once_and_curves_after_a_reload(lab: Lab, lab_page: Any) -> None:
    page = lab_page
    ids = [
        lab.ok("POST", "runs", body={"project": "team-a", "name": f"cmp-{k}", "code": COMPARED.format(k=k)})["id"]
        for k in (1, 2)
    ]
    for rid in ids:
        lab.wait_status(rid, "succeeded")
    data = lab.ok("GET", "compare", runs=",".join(ids))
    assert data["default_metric"] == "loss" and data["metric_runs"] == {"a_extra": 1, "loss": 2}
    code = next(d for d in data["config"]["differ"] if d["path"] == "entrypoint.code")
    assert set(code["values"].values()) == {"first run's code", "code differs"}
    assert "-K = 1\n+K = 2" in code["diff"]

    execute(page, "gpuplat:compare", {"ids": ids})
    tab = page.locator(f"{MAIN} .jp-GpuPlat-compareTab")
    charts = tab.locator(".jp-GpuPlat-compareMetric")
    # The metric both runs logged comes first; the one only a run logged says so.
    expect(charts).to_have_count(2)
    expect(charts.first).to_have_attribute("data-metric", "loss")
    expect(charts.nth(1).locator(".jp-GpuPlat-metricRuns")).to_have_text(" · logged by 1 of 2 runs")
    # The code is not printed once per run: "code differs", and the diff when asked for.
    row = tab.locator('tr[data-row="entrypoint.code"]')
    expect(row.locator("summary")).to_contain_text("code differs")
    assert row.inner_text().count("tracking.log_metrics") == 0
    row.locator("summary").click()
    expect(row.locator("pre")).to_be_visible()
    expect(row.locator("pre")).to_contain_text("+K = 2")
    loss = tab.locator('.jp-GpuPlat-compareMetric[data-metric="loss"] path')
    expect(loss).to_have_count(2)
    for path in loss.all():
        expect(path).to_have_attribute("d", re.compile(r"^M[^ML]+L"))

    # Restored by the layout after a reload, the tab reads the comparison again and draws both curves.
    until(lambda: f"gpuplat-compare:{','.join(ids)}" in json.dumps(workspace(lab)), "the Compare tab saved")
    page.reload()
    expect(tab).to_be_visible(timeout=60_000)
    expect(loss).to_have_count(2)
    for path in loss.all():
        expect(path).to_have_attribute("d", re.compile(r"^M[^ML]+L"))
    close_main_tabs(page)
