"""The Insights tab's GPU-hours held against busy and its idle holders in a real browser (issue 27).

NVML is hardware: the lab server has declared GPUs only, so a held device's readings are written
where the sampler writes them (tests/gpu_samples.py), the one boundary faked. They are taken in the
tab's range (the last 7 days, up to now: docs/insights.md counts the samples taken in it), while
the run still holds its GPU, so the server recounts them from the stored series.
"""

from __future__ import annotations

import sys
import time
from typing import Any

from playwright.sync_api import expect

from jupyter_gpuplat.cli.report import percent

from ..gpu_samples import GiB, write_samples_to
from .conftest import Lab
from .sidebar_helpers import SIDEBAR, back_to_runs, drain, show_tab

PAGE = f"{SIDEBAR} #jp-GpuPlat-page-insights"


def hours(v: float) -> str:
    """The sidebar's formatHours (a small non-zero figure stays visible)."""
    if 0 < v < 0.01:
        return "<0.0001" if v < 0.0001 else repr(float(f"{v:.2g}"))
    return f"{v:.0f}" if v >= 100 else f"{v:.1f}" if v >= 10 else f"{v:.2f}"


def busy(v: dict[str, Any]) -> str:
    """What the tab says of a view's busy figures, from the service's answer (formatted, not recomputed)."""
    if v["busy_fraction"] is None:
        return "GPU use not measured"
    return (
        f"busy {hours(v['gpu_hours_busy'])} of {hours(v['gpu_hours_measured'])} measured GPU-hours "
        f"({percent(v['busy_fraction'])})"
    )


def test_busy_figures_and_idle_holders_with_links_to_their_runs(lab: Lab, lab_page: Any) -> None:
    page = lab_page
    drain(lab)
    body = {
        "project": "team-a",
        "queue": "team-a-train",
        "name": "gpu-mostly-idle",
        "command": [sys.executable, "-c", "import time; time.sleep(120)"],
        "resources": {"gpu": 1},
        "termination": {"timeout_seconds": 120},
    }
    run = lab.ok("POST", "runs", body=body)
    try:
        held = lab.wait_status(run["id"], "running")
        # 30 readings under the 5% threshold, then 10 busy ones, every 10 s up to 10 s ago
        start = int(time.time()) - 400
        write_samples_to(lab.root, run["id"], held["devices"][0], [2.0] * 30 + [90.0] * 10, [GiB] * 40, start)
        api = lab.ok("GET", "insights", since="7d", bucket="6h")  # the tab's default query, as alice
        assert api["busy_percent"] == 5 and api["total"]["busy_fraction"] is not None, api["total"]
        holder = next(x for x in api["idle_holders"] if (x["project"], x["user"]) == ("team-a", "alice"))
        assert run["id"] in [r["id"] for r in holder["worst_runs"]], holder

        show_tab(page, "insights")
        total = page.locator(f'{PAGE} .jp-GpuPlat-insightsBusy[data-view="total"]')
        expect(total).to_contain_text(f"GPU-hours held · {busy(api['total'])} · busy: util ≥ 5%")
        for q in api["queues"]:
            line = page.locator(f'{PAGE} .jp-GpuPlat-insightsQueue[data-queue="{q["name"]}"] .jp-GpuPlat-insightsBusy')
            expect(line).to_contain_text(busy(q))
            expect(line).to_have_attribute("data-measured", str(q["busy_fraction"] is not None).lower())

        idle = page.locator(f'{PAGE} [data-table="idle"]')
        expect(idle.locator("figcaption")).to_have_text("Idle GPU time (measured, util < 5%)")
        row = idle.locator('.jp-GpuPlat-idleHolder[data-user="alice"][data-project="team-a"]')
        expect(row.locator(".jp-GpuPlat-idleHolderText")).to_have_text(
            f"alice (team-a): {hours(holder['gpu_hours_idle'])} GPU-hours idle of "
            f"{hours(holder['gpu_hours_measured'])} measured (busy {percent(holder['busy_fraction'])})"
            f" · {holder['measured_runs']} measured run{'' if holder['measured_runs'] == 1 else 's'}"
        )
        expect(row.locator(".jp-GpuPlat-idleRun a.jp-GpuPlat-runLink")).to_have_text(
            [r["id"] for r in holder["worst_runs"]]
        )
        # a worst run opens its run view
        row.locator(f'a[data-run-id="{run["id"]}"]').click()
        expect(page.locator(f'{SIDEBAR} .jp-GpuPlat-detail[data-run-id="{run["id"]}"]')).to_be_visible()
    finally:
        lab.call("POST", f"runs/{run['id']}/stop")
        lab.wait_status(run["id"], "succeeded", "failed", "stopped")
        back_to_runs(page)
