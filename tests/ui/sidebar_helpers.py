"""Helpers the browser tests share: runs driven by gate files, the panel's locators, the main
area's commands and tabs, GPU sessions' bar and their stop."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import requests
from playwright.sync_api import expect

from .conftest import Lab

SIDEBAR = "#jupyter-gpuplat-sidebar"

# Prints a longish line every 0.2 s until its gate file exists, so its log (and so its
# output.log) grows while the test watches; exits with the code in argv[2] (default 0).
STREAM_PY = """\
import pathlib, sys, time
gate = pathlib.Path(sys.argv[1])
i = 0
while not gate.exists():
    print(f"line {i} " + "x" * 200, flush=True)
    i += 1
    time.sleep(0.2)
print("finished", flush=True)
sys.exit(int(sys.argv[2]) if len(sys.argv) > 2 else 0)
"""


def stream_script(lab: Lab) -> Path:
    path = lab.work / "stream.py"
    if not path.exists():
        path.write_text(STREAM_PY)
    return path


def submit_gated(
    lab: Lab, name: str, gate: str, queue: str | None = None, user: str = "alice", limit_seconds: float | None = None
) -> dict[str, Any]:
    """A run that runs (printing) until `lab.work/gate` exists; `limit_seconds`: its time limit."""
    body: dict[str, Any] = {
        "project": "team-a" if user in ("alice", "bob") else "team-b",
        "name": name,
        "command": [sys.executable, str(stream_script(lab)), str(lab.work / gate)],
    }
    if queue:
        body["queue"] = queue
    if limit_seconds is not None:
        body["termination"] = {"timeout_seconds": limit_seconds}
    return dict(lab.ok("POST", "runs", user=user, body=body))


def drain(lab: Lab, queue: str = "team-a-train") -> None:
    """Free the queue of what earlier tests left active (stopped, as the platform admin) and resume it."""
    lab.call("POST", f"queues/{queue}/resume", user="ops")
    active = lab.ok("GET", "runs", user="ops", queue=queue, status="created,queued,dispatched,starting,running")["runs"]
    for r in active:
        lab.call("POST", f"runs/{r['id']}/stop", user="ops")
    for r in active:
        lab.wait_status(r["id"], "succeeded", "failed", "stopped")


def release(lab: Lab, *gates: str) -> None:
    for g in gates:
        (lab.work / g).touch()


def show_tab(page: Any, name: str) -> None:
    page.locator(f'{SIDEBAR} .jp-GpuPlat-tab[data-tab="{name}"]').click()


def back_to_runs(page: Any) -> None:
    show_tab(page, "runs")
    back = page.locator(f"{SIDEBAR} .jp-GpuPlat-back")
    if back.is_visible():
        back.click()
    expect(page.locator(f"{SIDEBAR} .jp-GpuPlat-runList")).to_be_visible()


def row(page: Any, run_id: str) -> Any:
    return page.locator(f'{SIDEBAR} .jp-GpuPlat-runRow[data-run-id="{run_id}"]')


def open_from_list(page: Any, run_id: str) -> Any:
    """Click the run's row (the compact summary in the sidebar, not a main-area tab)."""
    back_to_runs(page)
    r = row(page, run_id)
    expect(r).to_be_visible()
    r.locator(".jp-GpuPlat-runName").click()
    detail = page.locator(f'{SIDEBAR} .jp-GpuPlat-detail[data-run-id="{run_id}"]')
    expect(detail).to_be_visible()
    return detail


def format_duration(seconds: float) -> str:
    """The sidebar's formatDuration for the ranges these tests meet."""
    s = max(0.0, seconds)
    if s < 1:
        return f"{int(s * 10) / 10:.1f}s"
    if s < 60:
        return f"{int(s)}s"
    return f"{int(s // 60)}m {int(s % 60):02d}s"


# ---- the main area (tests/ui/test_mainarea_*) ----

MAIN = "#jp-main-dock-panel"


def execute(page: Any, command: str, args: dict[str, Any]) -> None:
    """Execute a command without waiting for it (a dialog's command resolves when it closes)."""
    page.evaluate(f"void window.jupyterapp.commands.execute({json.dumps(command)}, {json.dumps(args)})")


def workspace(lab: Lab) -> Any:
    return requests.get(
        f"{lab.url}lab/api/workspaces/default", headers={"Authorization": f"token {lab.token}"}, timeout=30
    ).json()


def close_main_tabs(page: Any) -> None:
    page.evaluate("window.jupyterapp.commands.execute('application:close-all')")
    # (JupyterLab opens a Launcher in an empty main area)
    expect(page.locator(f"{MAIN} .jp-GpuPlat-runTab, {MAIN} .jp-GpuPlat-compareTab")).to_have_count(0)


# ---- GPU sessions (tests/ui/test_session*) ----

BAR = ".jp-NotebookPanel:not(.lm-mod-hidden) .jp-GpuPlat-sessionBar"
FINAL = ("stopped", "failed", "succeeded")


def sessions(lab: Lab) -> list[dict[str, Any]]:
    return list(lab.ok("GET", "sessions")["sessions"])


def stop_all(lab: Lab) -> None:
    for s in sessions(lab):
        lab.call("POST", f"runs/{s['id']}/stop")
        lab.wait_status(s["id"], *FINAL)
