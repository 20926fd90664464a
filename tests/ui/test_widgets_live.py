"""The magics and widgets live in JupyterLab (issue 14, items 1 and 4), in Chromium.

A notebook submits two cells with `%%gpu_submit --param lr=…`. The first one's status line
ticks ("running for Ns" advancing) after its cell has finished and ends as "succeeded"; its
RunMonitor's run-time clock advances while it runs and stops at the record's final value; a
Compare of both runs labels them by notebook, cell and the one param that differs, in its
legend and column heads; the sidebar's run list shows the same name.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import nbformat

from .conftest import Lab

GATED = """%%gpu_submit --param lr=0.1 --param epochs=3
import pathlib, time
from jupyter_gpuplat import tracking
for s in range(5):
    tracking.log_metrics(step=s, loss=1 / (s + 1))
while not pathlib.Path("gate-live").exists():
    time.sleep(0.05)
print("released")
"""
QUICK = """%%gpu_submit --param lr=0.03 --param epochs=3 --wait
from jupyter_gpuplat import tracking
for s in range(5):
    tracking.log_metrics(step=s, loss=0.5 / (s + 1))
"""
COMPARE = """from jupyter_gpuplat.widgets import Compare
c = Compare([first, gpu_last_run["id"]], metrics=["loss"])
c
"""


def test_status_line_monitor_clock_and_compare_legend_in_jupyterlab(
    lab: Lab, browser_context: Any, screenshots: Path
) -> None:
    from playwright.sync_api import expect

    cells = ["%load_ext jupyter_gpuplat", GATED, "first = gpu_last_run['id']\nprint('first', first)", QUICK, COMPARE]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
    nbformat.write(nb, lab.work / "live.ipynb")
    gate = lab.work / "gate-live"
    page = browser_context.new_page()
    page.set_default_timeout(60_000)
    try:
        # A workspace of its own: the default one would reopen this notebook in the tests after this one.
        page.goto(f"{lab.url}lab/workspaces/gpuplat-live/tree/live.ipynb?token={lab.token}")
        expect(page.get_by_role("button", name="Python 3 (ipykernel) | Idle")).to_be_visible(timeout=90_000)
        page.locator(".jp-Cell .jp-InputArea-editor").first.click()
        for _ in cells:
            page.keyboard.press("Shift+Enter")
        submitted = page.locator(".jp-Notebook .jp-Cell").nth(1)
        summary = submitted.locator(".gpuplat-summary")
        # The status line follows the run after its cell finished: running, the clock advancing.
        expect(summary).to_contain_text(re.compile(r"running in queue team-a-train — running for \d+s"), timeout=30_000)
        ticking = summary.inner_text()
        expect(summary).not_to_have_text(ticking, timeout=15_000)
        expect(summary).to_contain_text("running for")
        run_id = re.match(r"(r-[0-9a-f]+) ", summary.inner_text()).group(1)  # type: ignore[union-attr]
        # The RunMonitor's run-time clock advances while the run runs (no event comes meanwhile).
        clock = submitted.locator(".gpuplat-clocks")
        before = clock.inner_text()
        assert "run time" in before
        expect(clock).not_to_have_text(before, timeout=15_000)

        # Compare (built while the first still runs): labels by notebook, cell and the differing param.
        compared = page.locator(".jp-Notebook .jp-Cell").nth(4)
        legend = compared.locator(".js-plotly-plot .legendtext")
        expect(legend).to_have_count(2, timeout=90_000)
        assert legend.all_text_contents() == ["live.ipynb · cell 2 · lr=0.1", "live.ipynb · cell 4 · lr=0.03"]
        table = compared.locator(".gpuplat-compare-table")
        heads = table.locator("tr").first
        expect(heads).to_contain_text("live.ipynb · cell 2 · lr=0.1")
        expect(heads).not_to_contain_text("epochs=3")  # common to both: not in the labels
        head_clock = table.locator(".gpuplat-run-clock").nth(0)
        expect(head_clock).to_contain_text("running for")
        page.screenshot(path=str(screenshots / "magic-status-line.png"), full_page=False)
        compared.locator(".js-plotly-plot").first.scroll_into_view_if_needed()
        page.screenshot(path=str(screenshots / "compare-magic-names.png"), full_page=False)

        # The sidebar's run list shows the magic's run by its name.
        page.locator('li[data-id="jupyter-gpuplat-sidebar"]').click()
        sidebar = page.locator("#jupyter-gpuplat-sidebar")
        expect(sidebar.get_by_text("live.ipynb · cell 2 · lr=0.1, epochs=3").first).to_be_visible()

        gate.touch()
        expect(summary).to_contain_text(f"{run_id} succeeded in queue team-a-train — exited with code 0 · ran ")
        expect(submitted.locator(".gpuplat-status-succeeded").first).to_be_visible()
        record = lab.ok("GET", f"runs/{run_id}")
        final = f"run time {record['clocks']['run_seconds']:.1f}s"
        expect(clock).to_contain_text(final)  # stopped at the record's final value
        expect(head_clock).to_contain_text("ran ")
        assert "running for" not in summary.inner_text()
    finally:
        gate.touch()
        page.close()
