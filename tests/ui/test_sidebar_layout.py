"""The sidebar at JupyterLab's default sidebar width in a 1280×720 window: nothing is cut to
zero width, the filters show their whole text, the resolved-config table keeps "Set by" in
view and never breaks a number mid-digit."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from .conftest import SHOW_SIDEBAR, Lab
from .sidebar_helpers import SIDEBAR, back_to_runs, open_from_list

# What must never render 0 px wide (or spill out of the sidebar).
PARTS = [
    ".jp-GpuPlat-title",
    ".jp-GpuPlat-user",
    ".jp-GpuPlat-conn",
    ".jp-GpuPlat-submitButton",
    ".jp-GpuPlat-tab",
    ".jp-GpuPlat-search",
    ".jp-GpuPlat-filterRow > select",
    ".jp-GpuPlat-counts",
    ".jp-GpuPlat-runRow:visible .jp-GpuPlat-runName",
    ".jp-GpuPlat-runRow:visible .jp-GpuPlat-status",
]

# Shown whole: their text is not cut (no ellipsis) at the default width.
WHOLE = {
    ".jp-GpuPlat-title",
    ".jp-GpuPlat-user",
    ".jp-GpuPlat-submitButton",
    ".jp-GpuPlat-tab",
    ".jp-GpuPlat-filterRow > select",
    ".jp-GpuPlat-queueName",
}

# Per element: its box, whether its own content is cut (scrollWidth > clientWidth), and for a
# select whether its chosen option's text (measured in its font) fits inside it.
MEASURE = """(sel) => {
  const canvas = document.createElement('canvas').getContext('2d');
  return [...document.querySelectorAll(sel)].filter(e => e.offsetParent !== null).map(e => {
    const r = e.getBoundingClientRect();
    const cs = getComputedStyle(e);
    let textFits = true;
    if (e.tagName === 'SELECT') {
      canvas.font = `${cs.fontWeight} ${cs.fontSize} ${cs.fontFamily}`;
      const text = e.selectedOptions[0]?.textContent ?? '';
      const room = e.clientWidth - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight) - 12; // the arrow
      textFits = canvas.measureText(text).width <= room;
    }
    return {left: r.left, right: r.right, width: r.width, scroll: e.scrollWidth, client: e.clientWidth,
            textFits, text: (e.textContent || e.value || '').slice(0, 40)};
  });
}"""


@pytest.fixture
def narrow_page(lab: Lab, browser_context: Any) -> Iterator[Any]:
    """A 1280×720 window on a fresh workspace: the sidebar at JupyterLab's default width."""
    page = browser_context.new_page()
    page.set_viewport_size({"width": 1280, "height": 720})
    page.set_default_timeout(30_000)
    browser_context.clear_cookies()  # the server's token (alice), not a cookie an earlier page as ops left
    page.goto(f"{lab.url}lab/workspaces/narrow-sidebar?token={lab.token}")
    tab = page.locator('li[data-id="jupyter-gpuplat-sidebar"]')
    expect(tab).to_be_visible(timeout=60_000)
    # Not a click: a restored layout may show it already (or a moment later), and a click would close it.
    page.evaluate(SHOW_SIDEBAR)
    expect(page.locator(SIDEBAR)).to_be_visible(timeout=15_000)
    yield page
    page.close()


def sidebar_box(page: Any) -> dict[str, float]:
    box = page.locator(SIDEBAR).bounding_box()
    assert box is not None
    return dict(box)


def assert_nothing_cut(page: Any, selectors: list[str]) -> None:
    side = sidebar_box(page)
    for sel in selectors:
        found = page.evaluate(MEASURE, f"{SIDEBAR} {sel}".replace(":visible", ""))
        assert found, f"nothing matches {sel}"
        for e in found:
            assert e["width"] >= 12, (sel, e)  # not squeezed to nothing
            assert e["left"] >= side["x"] - 1 and e["right"] <= side["x"] + side["width"] + 1, (sel, e, side)
            if sel in WHOLE:
                assert e["scroll"] <= e["client"], (sel, e)  # its text shown whole, not cut
            if sel.endswith("select"):
                assert e["textFits"], (sel, e)  # "All projects", not "All proje"


def test_the_sidebar_at_its_default_width_in_a_1280x720_window(lab: Lab, narrow_page: Any, screenshots: Path) -> None:
    page = narrow_page
    run = lab.ok(
        "POST", "runs", body={"project": "team-a", "name": "layout", "command": [sys.executable, "-c", "print('ok')"]}
    )
    lab.wait_status(run["id"], "succeeded")
    back_to_runs(page)
    expect(page.locator(f'{SIDEBAR} .jp-GpuPlat-runRow[data-run-id="{run["id"]}"]')).to_be_visible()
    width = sidebar_box(page)["width"]
    assert 200 <= width <= 420, width  # JupyterLab's default, not a widened sidebar
    expect(page.locator(f"{SIDEBAR} .jp-GpuPlat-user")).to_have_text("alice")
    assert_nothing_cut(page, PARTS)
    page.screenshot(path=screenshots / "sidebar-default-width.png")

    detail = open_from_list(page, run["id"])
    config = detail.locator(".jp-GpuPlat-configTable")
    config.scroll_into_view_if_needed()
    side = sidebar_box(page)
    set_by = config.locator("th", has_text="Set by")
    box = set_by.bounding_box()
    assert box is not None and box["width"] > 20, box
    assert box["x"] + box["width"] <= side["x"] + side["width"] + 1, (box, side)  # "Set by" in view
    # 86400 on one line: its text's boxes share one line (not 8640 / 0)
    value = config.locator('tr[data-path="termination.timeout_seconds"] td.jp-GpuPlat-configValue')
    expect(value).to_have_text("86400")
    lines = page.evaluate(
        """(el) => { const r = document.createRange(); r.selectNodeContents(el);
                     return new Set([...r.getClientRects()].map(b => Math.round(b.top))).size; }""",
        value.element_handle(),
    )
    assert lines == 1, lines
    # a word value is never broken inside (team-a-train, not team-/a-/train)
    queue = config.locator('tr[data-path="queue"] td.jp-GpuPlat-configValue')
    expect(queue).to_have_text("team-a-train")
    assert (
        page.evaluate(
            """(el) => { const r = document.createRange(); r.selectNodeContents(el);
                     return new Set([...r.getClientRects()].map(b => Math.round(b.top))).size; }""",
            queue.element_handle(),
        )
        == 1
    )
    for layer in config.locator(".jp-GpuPlat-layer").all():
        b = layer.bounding_box()
        assert b is not None and b["width"] > 10 and b["x"] + b["width"] <= side["x"] + side["width"] + 1, b
    page.screenshot(path=screenshots / "sidebar-default-width-config.png")
    back_to_runs(page)


def test_queues_and_presets_fit_the_default_width(narrow_page: Any, screenshots: Path) -> None:
    page = narrow_page
    page.locator(f'{SIDEBAR} .jp-GpuPlat-tab[data-tab="queues"]').click()
    expect(page.locator(f"{SIDEBAR} .jp-GpuPlat-queue").first).to_be_visible()
    assert_nothing_cut(page, [".jp-GpuPlat-queueName", ".jp-GpuPlat-meterText", ".jp-GpuPlat-queueRules"])
    page.screenshot(path=screenshots / "sidebar-default-width-queues.png")
    page.locator(f'{SIDEBAR} .jp-GpuPlat-tab[data-tab="runs"]').click()


ROWS_IN_ORDER = """(sel) => [...document.querySelectorAll(sel)].filter(e => e.offsetParent !== null && e.dataset.runId)
  .map(e => ({id: e.dataset.runId, top: e.getBoundingClientRect().top}))"""


def test_rows_read_in_the_order_they_are_drawn_and_long_names_wrap(lab: Lab, narrow_page: Any) -> None:
    """A run that arrives later is drawn on top: keyboard and screen-reader order (the DOM's) is
    the same, and a long name takes a second line instead of being cut at the sidebar's width."""
    page = narrow_page
    back_to_runs(page)
    cmd = [sys.executable, "-c", "print('ok')"]
    first = lab.ok("POST", "runs", body={"project": "team-a", "name": "order-first", "command": cmd})
    expect(page.locator(f'{SIDEBAR} .jp-GpuPlat-runRow[data-run-id="{first["id"]}"]')).to_be_visible()
    second = lab.ok("POST", "runs", body={"project": "team-a", "name": "order-second", "command": cmd})
    expect(page.locator(f'{SIDEBAR} .jp-GpuPlat-runRow[data-run-id="{second["id"]}"]')).to_be_visible()
    long_name = "train.py · lr=0.001, bs=64"
    later = lab.ok("POST", "runs", body={"project": "team-a", "name": long_name, "command": cmd})
    name = page.locator(f'{SIDEBAR} .jp-GpuPlat-runRow[data-run-id="{later["id"]}"] .jp-GpuPlat-runName')
    expect(name).to_have_text(long_name)
    rows = page.evaluate(ROWS_IN_ORDER, f"{SIDEBAR} .jp-GpuPlat-runRow")
    ids = [r["id"] for r in rows]
    assert ids.index(later["id"]) < ids.index(second["id"]) < ids.index(first["id"]), rows  # newest on top
    assert [r["top"] for r in rows] == sorted(r["top"] for r in rows), rows  # DOM order = drawn order
    lines = page.evaluate(
        """(el) => { const r = document.createRange(); r.selectNodeContents(el);
                     return new Set([...r.getClientRects()].map(b => Math.round(b.top))).size; }""",
        name.element_handle(),
    )
    assert lines == 2, lines
    assert page.evaluate("(el) => el.scrollHeight <= el.clientHeight + 1", name.element_handle())  # not cut
    for run in (first, second, later):
        lab.wait_status(run["id"], "succeeded")
