"""The ipywidgets Launcher in JupyterLab (issue 14, item 2), in Chromium.

A platform of its own: team-a's default preset is `single-gpu`; `pinned` locks the queue to
interactive; `elsewhere` sends runs to team-b-train, which team-a may not use. One Launcher
with `pinned` shows the queue locked and says nothing is allowed until a command is typed;
one with `elsewhere` has Submit disabled with the policy's reason beside it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest

from ..widget_env import launcher_config
from .conftest import SHOW_SIDEBAR, Lab, submit_dialog

CELLS = [
    "from jupyter_gpuplat.widgets import Launcher\npinned = Launcher(project='team-a', presets=['pinned'])\npinned",
    "refused = Launcher(project='team-a', presets=['elsewhere'])\nrefused",
]


@pytest.fixture(scope="module")
def launcher_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    root = tmp_path_factory.mktemp("launcher-lab")
    config = launcher_config(root)
    server = Lab(root / "srv", config_file=config)
    server.start(timeout=90)
    yield server
    server.stop()


def test_launcher_shows_locks_defaults_and_a_refusing_submit(
    launcher_lab: Lab, browser_context: Any, screenshots: Path
) -> None:
    from playwright.sync_api import expect

    lab = launcher_lab
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in CELLS])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
    nbformat.write(nb, lab.work / "launch.ipynb")
    page = browser_context.new_page()
    page.set_default_timeout(60_000)
    try:
        page.goto(f"{lab.url}lab/workspaces/gpuplat-launcher/tree/launch.ipynb?token={lab.token}")
        expect(page.get_by_role("button", name="Python 3 (ipykernel) | Idle")).to_be_visible(timeout=90_000)
        page.locator(".jp-Cell .jp-InputArea-editor").first.click()
        for _ in CELLS:
            page.keyboard.press("Shift+Enter")
        cells = page.locator(".jp-Notebook .jp-Cell")
        pinned, refused = cells.nth(0).locator(".gpuplat-launcher"), cells.nth(1).locator(".gpuplat-launcher")
        expect(pinned).to_be_visible(timeout=90_000)

        # The locked queue: its value, the lock and the preset, and it cannot be changed.
        queue = pinned.locator(".widget-dropdown", has_text="queue").locator("select")
        expect(queue).to_be_disabled()
        expect(queue.locator("option:checked")).to_have_text("interactive — locked, set by preset pinned")
        expect(pinned.locator(".gpuplat-default-presets")).to_contain_text(
            "project defaults, applied first: single-gpu"
        )
        # Nothing to run yet: no "allowed"; once typed, the verdict.
        verdict = pinned.locator(".gpuplat-verdict")
        expect(verdict).to_contain_text("Enter what to run")
        expect(pinned).not_to_contain_text("✓ allowed")
        pinned.locator("textarea").fill("echo pinned")
        expect(verdict).to_contain_text("✓ allowed — queue interactive, 1 GPU")
        expect(pinned.get_by_role("button", name="Submit")).to_be_enabled()

        # A refused preview: Submit disabled, the reason beside it.
        expect(refused.locator(".gpuplat-verdict")).to_contain_text("✗ refused by policy")
        submit = refused.get_by_role("button", name="Submit")
        expect(submit).to_be_disabled()
        reason = refused.locator(".gpuplat-submit-reason")
        expect(reason).to_have_text("Policy would refuse: queue 'team-b-train' is not allowed in project team-a")
        # Not locked: its default says what the presets make it, not the project's default queue.
        refused_queue = refused.locator(".widget-dropdown", has_text="queue").locator("select")
        expect(refused_queue.locator("option:checked")).to_have_text("default: team-b-train (preset elsewhere)")
        expect(refused_queue).to_be_enabled()
        refused.locator("textarea").fill("echo never")
        expect(refused.locator(".gpuplat-preview")).to_contain_text("echo never")
        expect(submit).to_be_disabled()
        submit.scroll_into_view_if_needed()
        page.screenshot(path=str(screenshots / "launcher-refused.png"), full_page=False)
        assert lab.ok("GET", "runs")["runs"] == []  # nothing was submitted
    finally:
        page.close()


def test_the_submit_dialog_shows_a_queue_a_preset_locks(
    launcher_lab: Lab, browser_context: Any, screenshots: Path
) -> None:
    """The sidebar's dialog on the same platform: `pinned` (a job preset) fixes the queue, which
    shows as locked with JupyterLab's lock icon (not an emoji) and cannot be changed."""
    from playwright.sync_api import expect

    lab = launcher_lab
    page = browser_context.new_page()
    page.set_default_timeout(60_000)
    try:
        page.goto(f"{lab.url}lab/workspaces/gpuplat-dialog-lock?token={lab.token}")
        expect(page.locator('li[data-id="jupyter-gpuplat-sidebar"]')).to_be_visible(timeout=90_000)
        page.evaluate(SHOW_SIDEBAR)
        page.evaluate("void window.jupyterapp.commands.execute('gpuplat:submit', {path: 'train.py'})")
        dialog = submit_dialog(page)
        queue = dialog.locator('select[name="queue"]')
        expect(queue).to_be_enabled()
        dialog.locator('select[name="preset-add"]').select_option("pinned")
        expect(queue).to_be_disabled()
        expect(queue).to_have_attribute("data-locked", "preset:pinned")  # the layer, as the preview names it
        expect(queue.locator("option")).to_have_text("interactive — locked, set by preset pinned")
        note = dialog.locator(".jp-GpuPlat-lockNote")
        expect(note).to_have_text("locked")
        expect(note.locator(".jp-GpuPlat-lockIcon svg")).to_have_count(1)
        page.screenshot(path=screenshots / "submit-dialog-locked-queue.png")
        dialog.get_by_role("button", name="Cancel").click()
    finally:
        page.close()
