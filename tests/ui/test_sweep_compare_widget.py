"""Compare(sweep_id) rendered by JupyterLab in a real notebook: the parallel-coordinates plot."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import nbformat

from .conftest import Lab

CELL = """\
from jupyter_gpuplat.client import Client
from jupyter_gpuplat.widgets import Compare
gp = Client()  # the kernel finds the server that started it
code = (
    "from jupyter_gpuplat import tracking\\n"
    "p = tracking.params()\\n"
    "for s in range(3): tracking.log_metrics(step=s, loss=(p['lr'] - 0.3) ** 2 + s * 0.01 + (p['opt'] == 'sgd'))"
)
matrix = {"kind": "grid", "params": {"lr": {"values": [0.1, 0.3, 0.5]}, "opt": {"choice": ["adam", "sgd"]}},
          "concurrency": 6, "objective": {"metric": "loss", "optimization": "minimize"}}
sweep = gp.submit("team-a", code=code, name="cmp-sweep", matrix=matrix)
gp.wait(sweep["id"])
c = Compare(sweep["id"], top=3)
print("best", c.best)
c
"""


def test_a_sweep_compares_with_parallel_coordinates_in_jupyterlab(
    lab: Lab, browser_context: Any, screenshots: Path
) -> None:
    from playwright.sync_api import expect

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(CELL)])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
    nbformat.write(nb, lab.work / "sweep-compare.ipynb")
    page = browser_context.new_page()
    page.set_default_timeout(60_000)
    try:
        page.goto(f"{lab.url}lab/tree/sweep-compare.ipynb?token={lab.token}")
        expect(page.get_by_role("button", name="Python 3 (ipykernel) | Idle")).to_be_visible(timeout=90_000)
        page.locator(".jp-Cell .jp-InputArea-editor").first.click()
        page.keyboard.press("Shift+Enter")
        expect(page.locator(".jp-RenderedText").filter(has_text="best r-")).to_be_visible(timeout=120_000)
        # plotly draws the parallel coordinates: one axis per param and the objective.
        parcoords = page.locator(".jp-OutputArea .js-plotly-plot .parcoords")
        expect(parcoords.first).to_be_visible(timeout=60_000)
        expect(parcoords.first.locator(".y-axis")).to_have_count(3)
        expect(page.locator(".jp-OutputArea table").get_by_text("★ best").first).to_be_visible()
        parcoords.first.scroll_into_view_if_needed()
        page.screenshot(path=str(screenshots / "sweep-compare.png"), full_page=False)
    finally:
        page.close()
