"""The submit dialog's honest defaults in a real browser (example platform): Submit is disabled
while the preview refuses, with the policy's reason beside it, and while no file is given (no
"✓ Policy allows" then); a run with 0 GPUs says so; the `notebook` preset's locked queue shows
as locked (`interactive 🔒 set by preset notebook`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from playwright.sync_api import expect

from .conftest import Lab, submit_dialog


def open_dialog(page: Any, path: str = "train.py") -> Any:
    page.evaluate(f"void window.jupyterapp.commands.execute('gpuplat:submit', {json.dumps({'path': path})})")
    dialog = submit_dialog(page)
    # The dialog remembers the last presets: start each test from none.
    removes = dialog.locator('.jp-GpuPlat-presetChosen:not([data-default]) button[aria-label^="Remove"]')
    while removes.count():
        removes.first.click()
    return dialog


def cancel(dialog: Any) -> None:
    dialog.get_by_role("button", name="Cancel").click()
    expect(dialog).to_have_count(0)


def test_submit_is_disabled_while_the_preview_refuses(lab: Lab, lab_page: Any, screenshots: Path) -> None:
    page = lab_page
    dialog = open_dialog(page)
    preview = dialog.locator(".jp-GpuPlat-preview")
    submit = dialog.get_by_role("button", name="Submit")
    reason = dialog.locator(".jp-GpuPlat-submitReason")
    expect(preview).to_have_attribute("data-verdict", "allowed")
    expect(submit).to_be_enabled()
    # No preset, no override: the run gets no GPU, and the preview says so plainly.
    expect(preview.locator(".jp-GpuPlat-noGpu")).to_have_text(
        "This run gets no GPU (0 GPUs): it runs on CPU only. Add a GPU preset or set GPUs to use one."
    )

    dialog.locator('input[name="gpu"]').fill("3")
    expect(preview).to_have_attribute("data-verdict", "refused")
    expect(submit).to_be_disabled()
    expect(reason).to_be_visible()
    expect(reason).to_contain_text("Refused: ")
    first = preview.locator(".jp-GpuPlat-violation .jp-GpuPlat-errorMessage").first.inner_text()
    expect(reason).to_have_text(f"Refused: {first}")
    expect(preview.locator(".jp-GpuPlat-noGpu")).to_have_count(0)
    dialog.locator(".jp-Dialog-content").screenshot(path=screenshots / "submit-disabled.png")
    # Enter does not send a refused run either.
    dialog.locator('input[name="gpu"]').press("Enter")
    expect(dialog).to_be_visible()

    dialog.locator('input[name="gpu"]').fill("1")
    expect(preview).to_have_attribute("data-verdict", "allowed")
    expect(submit).to_be_enabled()
    expect(reason).to_be_hidden()

    # Without a file nothing is judged: no "✓ Policy allows", and Submit waits for the file.
    dialog.locator('input[name="script"]').fill("")
    expect(preview).to_have_attribute("data-verdict", "incomplete")
    expect(preview).not_to_contain_text("Policy allows")
    expect(submit).to_be_disabled()
    expect(reason).to_have_text("Choose a .py or .ipynb file.")
    cancel(dialog)


def test_the_locked_queue_shows_as_locked(lab: Lab, lab_page: Any, screenshots: Path) -> None:
    page = lab_page
    dialog = open_dialog(page)
    queue = dialog.locator('select[name="queue"]')
    preview = dialog.locator(".jp-GpuPlat-preview")
    expect(queue).to_be_enabled()
    # Unlocked, the default option names the queue the run gets and who chose it.
    expect(preview).to_have_attribute("data-verdict", "allowed")
    expect(queue.locator("option").first).to_have_text("team-a-train · set by project team-a")

    dialog.locator('select[name="preset-add"]').select_option("notebook")
    expect(queue).to_be_disabled()
    expect(queue.locator("option")).to_have_count(1)
    expect(queue.locator("option")).to_have_text("interactive 🔒 set by preset notebook")
    expect(queue).to_have_attribute("data-locked", "notebook")
    # `notebook` is a session preset: the service refuses it for a script, and Submit says why.
    expect(preview).to_have_attribute("data-verdict", "error")
    expect(preview).to_contain_text("a session runs a kernel, not script")
    expect(dialog.get_by_role("button", name="Submit")).to_be_disabled()
    expect(dialog.locator(".jp-GpuPlat-submitReason")).to_have_text("Refused: a session runs a kernel, not script")
    dialog.locator(".jp-Dialog-content").screenshot(path=screenshots / "submit-locked-queue.png")

    # Removing the preset unlocks the queue again.
    dialog.get_by_role("button", name="Remove notebook").click()
    expect(queue).to_be_enabled()
    expect(queue.locator("option", has_text="interactive")).to_have_count(1)
    cancel(dialog)
