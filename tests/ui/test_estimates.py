"""Start estimates in a real browser (issue 26): a waiting run's row, its run view and the first
notice say when it is expected to start, in the service's words, and follow a blocker that ends
early; a waiting GPU session's notebook says it too, and follows a higher-priority run that arrives
(an `eta` event: no status event of the session's queue tells the notebook its start moved).

Every time here is a time limit and nothing has history, so each estimate is the hand-computed one;
the service words it as of when it is read ("~10 min" may read "~9 min" a while later)."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import nbformat
from playwright.sync_api import expect

from ..waiting import until
from .conftest import Lab, goto_reset, submit_dialog
from .sidebar_helpers import (
    BAR,
    MAIN,
    SIDEBAR,
    back_to_runs,
    close_main_tabs,
    drain,
    execute,
    release,
    row,
    submit_gated,
)

GATES = ("gate-eta-h1", "gate-eta-h2", "gate-eta-w1", "gate-eta-w2")


def about(minutes: int) -> re.Pattern[str]:
    """The service's "starts in ~N min (p90 N min)", read up to a minute after it was computed."""
    n = f"({minutes - 1}|{minutes})"
    return re.compile(rf"starts in ~{n} min \(p90 {n} min\)")


def test_rows_and_the_run_view_show_the_estimate_and_follow_a_blocker_that_ends_early(
    lab: Lab, lab_page: Any, screenshots: Path
) -> None:
    page = lab_page
    drain(lab)
    back_to_runs(page)
    runs: list[dict[str, Any]] = []
    try:
        # team-a-train dispatches 2 at a time: holders for 10 and 20 minutes, then two waiting runs
        for name, gate, limit in (("eta-h1", GATES[0], 600), ("eta-h2", GATES[1], 1200)):
            runs.append(submit_gated(lab, name, gate, limit_seconds=limit))
        for r in runs:
            lab.wait_status(r["id"], "running")
        w1 = submit_gated(lab, "eta-w1", GATES[2], limit_seconds=600)
        w2 = submit_gated(lab, "eta-w2", GATES[3], limit_seconds=600)
        runs += [w1, w2]
        # w1 starts when h1 ends (10 min); w2 when h2 and w1 end (20 min)
        toast = page.locator(".Toastify__toast", has_text="Run eta-w2 waits in team-a-train: starts in ~")
        expect(toast).to_contain_text(about(20))
        eta = row(page, w2["id"]).locator(".jp-GpuPlat-runEta")
        expect(eta).to_have_text(about(20))
        expect(eta).to_have_attribute("title", re.compile("admission run forward once"))
        expect(row(page, w1["id"]).locator(".jp-GpuPlat-runEta")).to_have_text(about(10))

        # The run view (a main-area tab, the sidebar's list beside it): the estimate, its basis, when computed.
        execute(page, "gpuplat:open-run", {"id": w2["id"], "sidebar": False})
        view = page.locator(f'{MAIN} .jp-GpuPlat-runTab[data-run-id="{w2["id"]}"] .jp-GpuPlat-eta')
        expect(view.locator(".jp-GpuPlat-etaText")).to_have_text(about(20))
        expect(view.locator(".jp-GpuPlat-etaWhy")).to_contain_text(
            "Basis: this platform's admission run forward once (every time fixed)"
        )
        expect(view.locator(".jp-GpuPlat-etaAt")).to_contain_text("Computed at")
        expect(eta).to_be_visible()
        page.screenshot(path=screenshots / "run-estimate.png")

        # The submit dialog: a run sent now would start with w2 (20 min); the interactive queue would start it now.
        execute(page, "gpuplat:submit", {"path": "train.py"})
        dialog = submit_dialog(page)
        preview = dialog.locator(".jp-GpuPlat-preview")
        expect(preview.locator(".jp-GpuPlat-previewEta")).to_have_text(re.compile("^would start: " + about(20).pattern))
        sooner = preview.locator(".jp-GpuPlat-sooner")
        expect(sooner).to_have_count(1)
        expect(sooner).to_have_text("use queue interactive: starts nowUse")
        dialog.locator(".jp-Dialog-content").screenshot(path=screenshots / "submit-estimate.png")
        sooner.get_by_role("button", name="Use").click()
        expect(dialog.locator('select[name="queue"]')).to_have_value("interactive")
        expect(preview.locator(".jp-GpuPlat-previewEta")).to_have_text("would start: starts now")
        expect(sooner).to_have_count(0)
        dialog.get_by_role("button", name="Cancel").click()
        expect(dialog).to_have_count(0)

        # h1 ends 10 minutes early: w1 starts now, w2 then starts when w1 or h2 ends, 10 minutes closer.
        lab.ok("POST", f"runs/{runs[0]['id']}/stop")
        lab.wait_status(w1["id"], "running")
        expect(eta).to_have_text(about(10))
        expect(eta).to_be_visible()
        expect(view.locator(".jp-GpuPlat-etaText")).to_have_text(about(10))
        expect(row(page, w1["id"]).locator(".jp-GpuPlat-runEta")).to_have_text("")  # started: no estimate
        expect(page.locator(f"{SIDEBAR} .jp-GpuPlat-runRow .jp-GpuPlat-runEta", has_text="starts in")).to_have_count(1)
    finally:
        release(lab, *GATES)
        for r in runs:
            lab.call("POST", f"runs/{r['id']}/stop")
        for r in runs:
            lab.wait_status(r["id"], "succeeded", "failed", "stopped")
        close_main_tabs(page)


def sleeper(queue: str, gpus: int, limit: int) -> dict[str, Any]:
    """A run of dave's (team-b) holding `gpus` GPUs until stopped, `limit` seconds at most."""
    return {
        "project": "team-b",
        "name": f"hold-{queue}-{gpus}",
        "queue": queue,
        "command": [sys.executable, "-c", f"import time; time.sleep({limit})"],
        "resources": {"gpu": gpus},
        "termination": {"timeout_seconds": limit},
    }


def test_a_waiting_gpu_session_says_when_it_should_start_and_follows_a_run_that_goes_first(
    session_lab: Lab, session_page: Any, screenshots: Path
) -> None:
    lab = session_lab
    page = session_page
    lab.stop_all_runs()
    try:
        # dave's batch runs hold the 4 GPUs: one for 10 minutes at most, three for 20.
        for gpus, limit in ((1, 600), (3, 1200)):
            rid = lab.ok("POST", "runs", user="dave", body=sleeper("batch", gpus, limit))["id"]
            until(lambda: lab.ok("GET", f"runs/{rid}", user="dave")["status"] == "running", f"{rid} running")  # noqa: B023
        # A notebook on `capped` (queue lab, 1 GPU): its lease waits for a GPU, the first that frees (10 min).
        nb = nbformat.v4.new_notebook()
        nb.metadata["kernelspec"] = {
            "name": "gpuplat-capped",
            "display_name": "Python 3 (GPU · capped)",
            "language": "python",
        }
        nbformat.write(nb, lab.work / "eta.ipynb")
        goto_reset(page, f"{lab.url}lab/tree/eta.ipynb?reset&token={lab.token}")
        bar = page.locator(BAR)
        expect(bar).to_contain_text("queued — position 1 of 1 in lab", timeout=60_000)
        expect(bar).to_contain_text(about(10))
        # the estimate leads the line: the toolbar cuts it short and JupyterLab cuts a notice at 140 characters
        expect(bar).to_contain_text(re.compile(r"^GPU: starts in ~"))
        notice = page.get_by_role("alert").filter(has_text="GPU session for eta.ipynb: starts in ~")
        expect(notice).to_contain_text(about(10))

        # A run of the interactive queue (priority 100 over lab's 50) arrives: it takes that GPU, and
        # the session's start moves to when the three GPUs free (20 min). Only an `eta` event says so.
        lab.ok("POST", "runs", user="dave", body=sleeper("interactive", 1, 3600))
        expect(bar).to_contain_text(about(20))
        expect(notice).to_contain_text(about(20))
        expect(bar).to_contain_text("queued — position 1 of 1 in lab")
        page.screenshot(path=screenshots / "session-estimate.png")
    finally:
        lab.stop_all_runs()
        (lab.work / "eta.ipynb").unlink(missing_ok=True)
