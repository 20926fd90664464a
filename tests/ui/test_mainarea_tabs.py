"""The main-area views in a real browser: a run in its own dock tab (logs there, one tab per
run), two runs side by side in a Compare tab (the data of the Python Compare widget: legend
with the differing params, deltas against the baseline, overlaid curves), and "Submit again…"
prefilled from a run's record and submitted as a new run.

The commands are executed through `window.jupyterapp` (the lab exposes it), as the sidebar's
buttons execute them."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

from playwright.sync_api import expect

from ..waiting import until
from .conftest import Lab, submit_dialog
from .sidebar_helpers import MAIN, SIDEBAR, close_main_tabs, execute, workspace

LOGGING_CODE = """\
from jupyter_gpuplat import tracking
for s in range(20):
    tracking.log_metrics(step=s, loss=K / (s + 1))
print("trained with K", K, flush=True)
"""


def test_a_run_opens_in_a_dock_tab_once(lab: Lab, lab_page: Any, screenshots: Path) -> None:
    page = lab_page
    run = lab.ok(
        "POST",
        "runs",
        body={"project": "team-a", "name": "tabbed", "code": "K = 3\n" + LOGGING_CODE},
    )
    lab.wait_status(run["id"], "succeeded")
    execute(page, "gpuplat:open-run", {"id": run["id"]})
    tab = page.locator(f'{MAIN} .jp-GpuPlat-runTab[data-run-id="{run["id"]}"]')
    expect(tab).to_be_visible()
    # The whole record has room here: logs, metric charts, timeline and resolved config.
    expect(tab.locator(".jp-GpuPlat-logBody")).to_contain_text("trained with K 3")
    expect(tab.locator(".jp-GpuPlat-detailHeader .jp-GpuPlat-status")).to_have_text("succeeded")
    expect(tab.locator('.jp-GpuPlat-metric[data-metric="loss"]')).to_be_visible()
    expect(tab.locator(".jp-GpuPlat-phase")).to_have_count(4)
    expect(tab.locator('.jp-GpuPlat-configTable tr[data-path="env[HF_HOME]"]')).to_contain_text("org")
    expect(tab.locator(".jp-GpuPlat-back")).to_be_hidden()  # closed with its ✕, not "← Runs"
    title = page.locator(f"{MAIN} .lm-TabBar-tab", has_text="tabbed · succeeded")
    expect(title).to_have_count(1)
    # The sidebar keeps the compact summary of the same run.
    expect(page.locator(f'{SIDEBAR} .jp-GpuPlat-detail[data-run-id="{run["id"]}"]')).to_be_visible()
    page.screenshot(path=screenshots / "run-tab.png")

    # Opening it again activates the same tab rather than a second one.
    execute(page, "gpuplat:open-run", {"id": run["id"]})
    expect(page.locator(f"{MAIN} .jp-GpuPlat-runTab")).to_have_count(1)
    expect(title).to_have_class(re.compile("lm-mod-current"))

    # The layout keeps the tab: after a reload it is back, following the run again.
    until(lambda: f"gpuplat-run:{run['id']}" in json.dumps(workspace(lab)), "the tab saved in the workspace")
    page.reload()
    expect(tab).to_be_visible(timeout=60_000)
    expect(tab.locator(".jp-GpuPlat-logBody")).to_contain_text("trained with K 3")
    expect(page.locator(f"{MAIN} .jp-GpuPlat-runTab")).to_have_count(1)
    close_main_tabs(page)


def test_two_runs_in_a_compare_tab(lab: Lab, lab_page: Any, screenshots: Path) -> None:
    page = lab_page
    ids = []
    for k, lr in ((1, 0.1), (2, 0.03)):
        body = {"project": "team-a", "name": "sweep-lr", "code": f"K = {k}\n" + LOGGING_CODE, "params": {"lr": lr}}
        ids.append(lab.ok("POST", "runs", body=body)["id"])
    for rid in ids:
        lab.wait_status(rid, "succeeded")
    # Select both in the sidebar's list, then "Compare (2)".
    page.locator(f'{SIDEBAR} .jp-GpuPlat-tab[data-tab="runs"]').click()
    back = page.locator(f"{SIDEBAR} .jp-GpuPlat-back")
    if back.is_visible():
        back.click()
    for rid in ids:
        page.locator(f'{SIDEBAR} .jp-GpuPlat-runRow[data-run-id="{rid}"] .jp-GpuPlat-runSelect').check()
    page.locator(f"{SIDEBAR} button.jp-GpuPlat-compare", has_text="Compare (2)").click()
    tab = page.locator(f"{MAIN} .jp-GpuPlat-compareTab")
    expect(tab).to_be_visible()
    assert set((tab.get_attribute("data-runs") or "").split(",")) == set(ids)
    expect(tab.locator(".jp-GpuPlat-compareRun")).to_have_count(2)
    close_main_tabs(page)

    # The same through the command (in the order given: the first is the baseline).
    execute(page, "gpuplat:compare", {"ids": ids})
    expect(tab).to_be_visible()
    expect(tab).to_have_attribute("data-runs", ",".join(ids))
    expect(page.locator(f"{MAIN} .lm-TabBar-tab", has_text="Compare 2 runs")).to_have_count(1)
    # Both runs have the same name: the legend tells them apart by the param that differs.
    legend = tab.locator(".jp-GpuPlat-compareRun")
    expect(legend).to_have_count(2)
    expect(legend.nth(0)).to_contain_text("sweep-lr")
    expect(legend.nth(0)).to_contain_text("lr=0.1")
    expect(legend.nth(1)).to_contain_text("lr=0.03")
    expect(legend.nth(0)).to_contain_text("★ baseline")
    # The table: the param differs; the loss of run 2 is twice the baseline's (K=2 vs K=1).
    lr_row = tab.locator('tr[data-row="lr"]')
    expect(lr_row).to_have_class(re.compile("jp-GpuPlat-differ"))
    loss = tab.locator('tr[data-row="loss (last)"]')
    expect(loss).to_contain_text("0.05")
    expect(loss).to_contain_text("0.1")
    expect(loss.locator(".jp-GpuPlat-delta")).to_have_text(" (Δ +0.05, +100.0%)")
    expect(loss.locator(".jp-GpuPlat-delta")).to_have_class(re.compile("jp-mod-bad"))  # a higher loss is worse
    chart = tab.locator('.jp-GpuPlat-compareMetric[data-metric="loss"] path')
    expect(chart).to_have_count(2)
    # The same data as the Compare widget's (GET compare).
    data = lab.ok("GET", "compare", runs=",".join(ids))
    assert [r["id"] for r in data["runs"]] == ids
    assert data["params"]["differ"] == ["lr"]
    page.screenshot(path=screenshots / "compare-tab.png")

    # Another baseline: the deltas are against it now.
    tab.locator('select[name="baseline"]').select_option(ids[1])
    expect(legend.nth(1)).to_contain_text("★ baseline")
    expect(loss.locator(".jp-GpuPlat-delta")).to_have_text(" (Δ -0.05, -50.0%)")
    expect(loss.locator(".jp-GpuPlat-delta")).to_have_class(re.compile("jp-mod-good"))
    # Again with the same runs: the same tab.
    execute(page, "gpuplat:compare", {"ids": ids})
    expect(page.locator(f"{MAIN} .jp-GpuPlat-compareTab")).to_have_count(1)
    # A legend entry opens that run in its own tab.
    legend.nth(1).get_by_role("button", name="sweep-lr").click()
    expect(page.locator(f'{MAIN} .jp-GpuPlat-runTab[data-run-id="{ids[1]}"]')).to_be_visible()
    close_main_tabs(page)


def test_submit_again_prefilled_and_submitted(lab: Lab, lab_page: Any, screenshots: Path) -> None:
    page = lab_page
    command = [sys.executable, "-c", "print('hello again', flush=True)"]
    original = lab.ok(
        "POST",
        "runs",
        body={
            "project": "team-a",
            "name": "again",
            "command": command,
            "presets": ["single-gpu"],
            "params": {"lr": 0.1, "warmup": True},
            "resources": {"memory": "4Gi"},
            "env": [{"name": "MODE", "value": "fast"}],
        },
    )
    lab.wait_status(original["id"], "succeeded")
    execute(page, "gpuplat:resubmit", {"id": original["id"]})
    dialog = submit_dialog(page)
    expect(dialog.locator(".jp-Dialog-header")).to_contain_text("Submit again: again")
    # Prefilled from the record: command, name, presets, overrides, params.
    command_field = dialog.locator('input[name="command"]')
    expect(command_field).to_have_value(re.compile(r"-c \"print\('hello again', flush=True\)\""))
    expect(dialog.locator('input[name="script"]')).to_have_count(0)
    expect(dialog.locator('input[name="name"]')).to_have_value("again")
    expect(dialog.locator('.jp-GpuPlat-presetChosen[data-preset="single-gpu"]')).to_be_visible()
    expect(dialog.locator('input[name="memory"]')).to_have_value("4Gi")
    expect(dialog.locator('textarea[name="env"]')).to_have_value("MODE=fast")
    expect(dialog.locator('textarea[name="params"]')).to_have_value("lr=0.1\nwarmup=true")
    preview = dialog.locator(".jp-GpuPlat-preview")
    expect(preview).to_have_attribute("data-verdict", "allowed")
    expect(preview.locator('tr[data-path="resources.gpu"]')).to_contain_text("preset:single-gpu")
    # Edit before sending: another learning rate and name.
    dialog.locator('textarea[name="params"]').fill("lr=0.2\nwarmup=true")
    # The form is re-previewed on each edit: the next field is typed into once that preview is shown
    # (a full run once saw the name land in the command field while the form was being redrawn).
    expect(preview.locator('tr[data-path="params.lr"]')).to_contain_text("0.2")
    dialog.locator('input[name="name"]').fill("again-lr0.2")
    expect(preview).to_have_attribute("data-verdict", "allowed")
    dialog.locator(".jp-Dialog-content").screenshot(path=screenshots / "submit-again.png")
    submit = dialog.get_by_role("button", name="Submit")
    expect(submit).to_be_enabled()
    submit.click()
    expect(dialog).to_have_count(0)

    # A new run with the same command and presets, the edited params, through the normal API.
    def resubmitted() -> Any:
        runs = lab.ok("GET", "runs", search="again-lr0.2")["runs"]
        return runs[0] if runs else None

    new = until(resubmitted, "the resubmitted run")
    assert new["id"] != original["id"]
    record = lab.ok("GET", f"runs/{new['id']}")
    assert record["request"]["command"] == command
    assert record["request"]["presets"] == ["single-gpu"]
    assert record["request"]["params"] == {"lr": 0.2, "warmup": True}
    assert record["request"]["resources"] == {"memory": "4Gi"}
    assert record["request"]["env"] == [{"name": "MODE", "value": "fast"}]
    expect(page.locator(f'{SIDEBAR} .jp-GpuPlat-detail[data-run-id="{new["id"]}"]')).to_be_visible()
    lab.wait_status(new["id"], "succeeded")


def test_submit_again_of_a_file_run_keeps_its_file_and_folder(lab: Lab, lab_page: Any) -> None:
    """The record holds the absolute paths the server resolved: the dialog sends them back as they were
    (it cut the leading '/', and the relative remainder was refused as outside the root)."""
    page = lab_page
    (lab.work / "exp").mkdir(exist_ok=True)
    (lab.work / "exp" / "fit.py").write_text((lab.work / "train.py").read_text())
    (lab.work / "exp" / "again").touch()  # its gate: both runs end on their own (the sidebar tests count stopped runs)
    body = {"project": "team-a", "name": "file-run", "script": "exp/fit.py", "working_dir": "exp"}
    original = lab.ok("POST", "runs", body={**body, "presets": ["single-gpu"], "args": ["again"]})
    execute(page, "gpuplat:resubmit", {"id": original["id"]})
    dialog = submit_dialog(page)
    preview = dialog.locator(".jp-GpuPlat-preview")
    expect(preview).to_have_attribute("data-verdict", "allowed")
    dialog.locator('input[name="name"]').fill("file-run-again")
    submit = dialog.get_by_role("button", name="Submit")
    expect(submit).to_be_enabled()
    submit.click()
    expect(dialog).to_have_count(0)

    def resubmitted() -> Any:
        runs = lab.ok("GET", "runs", search="file-run-again")["runs"]
        return runs[0] if runs else None

    new = lab.ok("GET", f"runs/{until(resubmitted, 'the resubmitted file run')['id']}")
    old = lab.ok("GET", f"runs/{original['id']}")
    assert new["request"]["script"] == old["request"]["script"]
    assert new["request"]["working_dir"] == old["request"]["working_dir"]
    for run in (new, old):
        lab.wait_status(run["id"], "succeeded")
