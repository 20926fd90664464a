"""The submit dialog's honest defaults in a real browser (example platform): Submit is disabled
while the preview refuses, with the policy's reason beside it, and while no file is given (no
"✓ Policy allows" then); a run with 0 GPUs says so, under a caution; the preview says where the run
starts and what it would wait for; a session preset is never offered for a file."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

from playwright.sync_api import expect

from .conftest import Lab, submit_dialog
from .sidebar_helpers import SIDEBAR, back_to_runs, drain, release, show_tab, stream_script


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
    # Above that note the verdict reads as a caution, not a green "allows" (issue 23).
    verdict = preview.locator(".jp-GpuPlat-verdict")
    expect(verdict).to_have_class(re.compile("jp-mod-caution"))
    expect(verdict.locator(".jp-GpuPlat-verdictTitle")).to_have_text("⚠ Policy allows this run, with a caution")
    # Where it starts, as the service resolved it: the file's folder (the Jupyter root here).
    expect(preview.locator(".jp-GpuPlat-workingDir")).to_have_text(f"Runs in {lab.work}")

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
    expect(preview.locator(".jp-GpuPlat-verdict")).to_have_class(re.compile("jp-mod-allowed"))
    expect(preview.locator(".jp-GpuPlat-willWait")).to_have_count(0)  # the queue is free: it starts next cycle

    # Without a file nothing is judged: no "✓ Policy allows", and Submit waits for the file.
    dialog.locator('input[name="script"]').fill("")
    expect(preview).to_have_attribute("data-verdict", "incomplete")
    expect(preview).not_to_contain_text("Policy allows")
    expect(submit).to_be_disabled()
    expect(reason).to_have_text("Choose a .py or .ipynb file.")
    cancel(dialog)


def test_a_file_is_offered_job_presets_only(lab: Lab, lab_page: Any, screenshots: Path) -> None:
    # `notebook` (kind: session) runs a kernel: the service refuses it for a file, so neither its
    # preset card nor the dialog offers it for one (issue 23).
    page = lab_page
    show_tab(page, "presets")
    notebook = page.locator(f'{SIDEBAR} .jp-GpuPlat-preset[data-preset="notebook"]')
    single = page.locator(f'{SIDEBAR} .jp-GpuPlat-preset[data-preset="single-gpu"]')
    expect(single.get_by_role("button", name="Submit a file…")).to_be_enabled()
    expect(notebook.get_by_role("button", name="Start GPU session")).to_be_visible()
    expect(notebook.get_by_role("button", name="Submit a file…")).to_have_count(0)
    back_to_runs(page)

    dialog = open_dialog(page)
    add = dialog.locator('select[name="preset-add"]')
    expect(add.locator('option[value="single-gpu"]')).to_have_count(1)
    expect(add.locator('option[value="multi-gpu"]')).to_have_count(1)
    expect(add.locator('option[value="notebook"]')).to_have_count(0)
    expect(dialog.locator(".jp-GpuPlat-preview")).to_have_attribute("data-verdict", "allowed")
    cancel(dialog)


def test_the_preview_says_what_the_run_would_wait_for(lab: Lab, lab_page: Any, screenshots: Path) -> None:
    # The service's preview judges the wait (as explain would); the dialog only renders it.
    drain(lab)
    script = str(stream_script(lab))
    holders = [
        lab.ok(
            "POST",
            "runs",
            body={
                "project": "team-a",
                "name": f"hold{i}",
                "presets": ["single-gpu"],
                "command": [sys.executable, script, str(lab.work / f"gate-wait{i}")],
            },
        )
        for i in range(2)
    ]
    try:
        for r in holders:
            lab.wait_status(r["id"], "running")
        dialog = open_dialog(lab_page)
        dialog.locator('select[name="preset-add"]').select_option("single-gpu")
        preview = dialog.locator(".jp-GpuPlat-preview")
        expect(preview).to_have_attribute("data-verdict", "allowed")
        wait = preview.locator(".jp-GpuPlat-willWait")
        expect(wait).to_contain_text("will wait: ")
        expect(wait).to_contain_text("2/2")
        expect(wait).to_contain_text("position 1")
        expect(wait).to_have_attribute("data-reason", "QueueConcurrency")
        expect(preview.locator(".jp-GpuPlat-noGpu")).to_have_count(0)
        expect(preview.locator(".jp-GpuPlat-verdict")).to_have_class(re.compile("jp-mod-allowed"))
        dialog.locator(".jp-Dialog-content").screenshot(path=screenshots / "submit-will-wait.png")
        cancel(dialog)
    finally:
        release(lab, "gate-wait0", "gate-wait1")
        for r in holders:
            lab.wait_status(r["id"], "succeeded", "failed", "stopped")
