"""`gpuplat report --format html`: the self-contained page opens in Chromium with its four charts drawn."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from jupyter_gpuplat.cli import report
from jupyter_gpuplat.client import Client

from .conftest import Lab


def test_the_html_report_renders_its_charts(lab: Lab, browser_context: Any, screenshots: Path, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    c = Client(lab.url, lab.token)
    runs = [c.submit("team-a", [sys.executable, "-c", "pass"], gpus=1, name=f"report-{i}") for i in range(2)]
    for r in runs:
        assert c.wait(r["id"], timeout=120)["status"] == "succeeded"
    out = tmp_path / "report.html"
    assert (
        report.main(["--url", lab.url, "--token", lab.token, "--since", "1d", "--format", "html", "--out", str(out)])
        == 0
    )
    text = out.read_text()
    assert "<script" in text and "<script src=" not in text  # plotly.js inline: opens without a network
    page = browser_context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(out.as_uri())
    svgs = page.locator(".chart .main-svg")
    expect(page.locator(".chart .plot-container")).to_have_count(4, timeout=30_000)
    assert svgs.count() >= 4
    for title in ("Queue wait percentiles", "Waits by reason", "GPU-hours against quota", "Goodput"):
        expect(page.locator(".gtitle", has_text=title)).to_have_count(1)
    assert page.locator(".chart .bars path, .chart .scatterlayer path").count() > 0  # data drawn, not empty axes
    assert not errors, errors
    page.screenshot(path=screenshots / "report.png", full_page=True)
    page.close()
