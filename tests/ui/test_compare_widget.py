"""The Compare widget rendered by JupyterLab in a real notebook (issue: kernel side), and again after
the page is reloaded (issue 23: its curves were empty)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import nbformat

from .conftest import Lab

MAIN = "#jp-main-dock-panel"

CELL = """\
from jupyter_gpuplat.client import Client
from jupyter_gpuplat.widgets import Compare
gp = Client()  # the kernel finds the server that started it
code = "from jupyter_gpuplat import tracking\\nfor s in range(30): tracking.log_metrics(step=s, loss=K / (s + 1))"
ids = [gp.submit("team-a", code="K = %d\\n" % k + code, name=f"compare-{k}", params={"k": k})["id"] for k in (1, 2)]
for i in ids:
    gp.wait(i)
c = Compare(ids, metrics=["loss"])
print("compared", len(c.data["runs"]), "runs")
c
"""


def test_compare_renders_in_jupyterlab(lab: Lab, browser_context: Any, screenshots: Path) -> None:
    from playwright.sync_api import expect

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(CELL)])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
    nbformat.write(nb, lab.work / "compare.ipynb")
    page = browser_context.new_page()
    page.set_default_timeout(60_000)
    try:
        page.goto(f"{lab.url}lab/tree/compare.ipynb?token={lab.token}")
        # Shift+Enter before the kernel is connected does nothing: wait for it to be idle.
        expect(page.get_by_role("button", name="Python 3 (ipykernel) | Idle")).to_be_visible(timeout=90_000)
        page.locator(".jp-Cell .jp-InputArea-editor").first.click()
        page.keyboard.press("Shift+Enter")
        output = page.locator(".jp-OutputArea-output").filter(has_text="compared 2 runs")
        expect(output).to_be_visible(timeout=90_000)
        widget = page.locator(".jp-OutputArea .widget-vbox, .jp-OutputArea .jupyter-widgets").first
        expect(widget).to_be_visible()
        # The comparison table names both runs and the differing param; plotly draws the curves.
        expect(page.locator(".jp-OutputArea table").get_by_text("compare-2").first).to_be_visible()
        expect(page.locator(".jp-OutputArea .js-plotly-plot").first).to_be_visible(timeout=60_000)
        expect(page.locator(".jp-OutputArea .js-plotly-plot .scatterlayer .trace")).to_have_count(2)
        page.locator(".jp-OutputArea .js-plotly-plot").first.scroll_into_view_if_needed()
        page.screenshot(path=str(screenshots / "compare-widget.png"), full_page=False)

        # Saved and reloaded with the kernel alive, the widget is drawn again from its state: both
        # curves, not an empty plot (the traces were sent as messages and missing from that state).
        page.keyboard.press("Control+s")
        expect(page.locator(f"{MAIN} .lm-TabBar-tab.jp-mod-dirty")).to_have_count(0)
        page.reload()
        expect(page.get_by_role("button", name="Python 3 (ipykernel) | Idle")).to_be_visible(timeout=90_000)
        expect(page.locator(".jp-OutputArea .js-plotly-plot").first).to_be_visible(timeout=60_000)
        expect(page.locator(".jp-OutputArea .js-plotly-plot .scatterlayer .trace")).to_have_count(2)
    finally:
        page.close()
