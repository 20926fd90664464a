"""Helpers for the sidebar_* browser tests: runs driven by gate files, the panel's locators."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

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


def submit_gated(lab: Lab, name: str, gate: str, queue: str | None = None, user: str = "alice") -> dict[str, Any]:
    """A run that runs (printing) until `lab.work/gate` exists."""
    body: dict[str, Any] = {
        "project": "team-a" if user in ("alice", "bob") else "team-b",
        "name": name,
        "command": [sys.executable, str(stream_script(lab)), str(lab.work / gate)],
    }
    if queue:
        body["queue"] = queue
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
