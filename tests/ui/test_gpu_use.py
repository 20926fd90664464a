"""A run's GPU use in a real browser (issue 27): the run view's "GPU use" section shows the server's
line, busy share and memory peak, and charts of the run's GPU series; a run whose GPU was not
measured shows why and no chart; Compare has the server's GPU rows.

NVML is hardware: the lab server has declared GPUs only, so the readings NVML would give are written
where the sampler writes them (tests/gpu_samples.py), the one boundary faked."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from playwright.sync_api import expect

from ..gpu_samples import GiB, write_samples_to
from .conftest import Lab
from .sidebar_helpers import MAIN, back_to_runs, close_main_tabs, drain, execute, open_from_list


def holder(name: str) -> dict[str, Any]:
    """A run of alice's holding one GPU until stopped (two minutes at most)."""
    return {
        "project": "team-a",
        "name": name,
        "command": [sys.executable, "-c", "import time; time.sleep(120)"],
        "resources": {"gpu": 1},
        "termination": {"timeout_seconds": 120},
    }


def test_the_run_view_shows_busy_share_memory_peak_and_charts_or_why_not(
    lab: Lab, lab_page: Any, screenshots: Path
) -> None:
    page = lab_page
    drain(lab)
    back_to_runs(page)
    runs = [lab.ok("POST", "runs", body=holder(n)) for n in ("gpu-sampled", "gpu-blind")]
    try:
        for r in runs:
            lab.wait_status(r["id"], "running")
        sampled, blind = (lab.ok("GET", f"runs/{r['id']}") for r in runs)
        write_samples_to(
            lab.root, sampled["id"], sampled["devices"][0], [90.0, 90.0, 90.0, 2.0], [GiB, 3 * GiB, 2 * GiB, GiB]
        )
        reason = lab.ok("GET", f"runs/{blind['id']}")["gpu_usage"]["reason"]

        detail = open_from_list(page, sampled["id"])
        gpu = detail.locator(".jp-GpuPlat-gpuSection")
        expect(gpu).to_be_visible()
        expect(gpu.locator(".jp-GpuPlat-gpuText")).to_have_text(
            "GPU busy 75% of 40 s · mean util 68% · memory peak 3.0 GiB"
        )
        expect(gpu.locator('[data-gpu="busy"]')).to_have_text("GPU busy75%")
        expect(gpu.locator('[data-gpu="memory_peak"]')).to_have_text("Memory peak3.0 GiB")
        charts = gpu.locator(".jp-GpuPlat-metric")
        expect(charts).to_have_count(2)
        device = sampled["devices"][0]
        expect(gpu.locator(f'[data-metric="system/gpu{device}/util"] .jp-GpuPlat-metricLast')).to_have_text("2")
        memory = gpu.locator(f'[data-metric="system/gpu{device}/memory_bytes"]')
        expect(memory.locator(".jp-GpuPlat-metricName")).to_have_text(f"system/gpu{device}/memory_bytes (GiB)")
        expect(memory.locator(".jp-GpuPlat-metricLast")).to_have_text("1")
        # the run's own metrics are not mixed with the GPU series
        expect(detail.locator(".jp-GpuPlat-metricSection .jp-GpuPlat-metric")).to_have_count(0)
        gpu.screenshot(path=screenshots / "run-gpu-use.png")

        detail = open_from_list(page, blind["id"])
        gpu = detail.locator(".jp-GpuPlat-gpuSection")
        expect(gpu).to_be_visible()
        expect(gpu).to_have_attribute("data-measured", "false")
        expect(gpu.locator(".jp-GpuPlat-gpuText")).to_have_text(f"GPU use not measured: {reason}")
        expect(gpu.locator("[data-gpu]")).to_have_count(0)
        expect(gpu.locator(".jp-GpuPlat-metric")).to_have_count(0)  # no empty chart
        expect(gpu.locator(".jp-GpuPlat-gpuCharts")).to_be_hidden()

        # Compare: the server's GPU rows, one cell per run.
        ids = [sampled["id"], blind["id"]]
        execute(page, "gpuplat:compare", {"ids": ids})
        tab = page.locator(f"{MAIN} .jp-GpuPlat-compareTab")
        busy = tab.locator('tr[data-row="GPU busy"] td')
        expect(busy).to_have_text(["GPU busy", "75%", "not measured"])
        expect(tab.locator('tr[data-row="GPU memory peak"] td')).to_have_text(
            ["GPU memory peak", "3.0 GiB", "not measured"]
        )
    finally:
        for r in runs:
            lab.call("POST", f"runs/{r['id']}/stop")
        for r in runs:
            lab.wait_status(r["id"], "succeeded", "failed", "stopped")
        close_main_tabs(page)
        back_to_runs(page)
