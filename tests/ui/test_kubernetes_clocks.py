"""A preempted Kubernetes run shows the same three clocks in the sidebar, the CLI and the widgets (issue 24).

The service computes them once (core/clocks.py: the replacement pod's wait after a preemption is
start wait, not run time); every client renders them. The old sidebar recomputed them from the
timestamps and showed the wait again as run time. A Lab on the project's Kubernetes emulator.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from kube_emulator import EmulatedCluster
from playwright.sync_api import expect

from jupyter_gpuplat.client import Client
from jupyter_gpuplat.widgets import RunMonitor

from ..k8s import NAMESPACE, deployed_cluster, executor_config, run_selector
from ..waiting import until
from .conftest import SHOW_SIDEBAR, Lab, widen_left_sidebar
from .sidebar_helpers import SIDEBAR, format_duration, open_from_list

URGENT = 1_000_000_000  # another team's pod, above every priority class of the platform
THREE = ("queue_wait_seconds", "start_wait_seconds", "run_seconds")


@pytest.fixture(scope="module")
def cluster() -> Iterator[EmulatedCluster]:
    c = deployed_cluster(taint_wording="v1.25")
    c.add_node("gpu-1", gpus=1)
    yield c
    c.stop()
    assert not c.errors, c.errors


@pytest.fixture(scope="module")
def k8s_lab(tmp_path_factory: pytest.TempPathFactory, cluster: EmulatedCluster) -> Iterator[Lab]:
    root = tmp_path_factory.mktemp("k8s-lab")
    executor = executor_config(cluster, root, root / "artifacts")
    kube = {"GpuPlat": {"executor_class": "jupyter_gpuplat.executors.kubernetes.KubernetesExecutor"}}
    server = Lab(root, extra_config={**kube, "KubernetesExecutor": executor})
    server.start(timeout=90)
    yield server
    try:
        server.stop_all_runs()
    finally:
        server.stop()


def explained(lab: Lab, run_id: str, reason: str) -> dict[str, Any]:
    return until(
        lambda: (ex := lab.ok("GET", f"runs/{run_id}/explain"))["reason"] == reason and ex,
        f"explain of {run_id} to say {reason}",
        timeout=30,
    )


def open_sidebar(lab: Lab, browser_context: Any) -> Any:
    page = browser_context.new_page()
    browser_context.clear_cookies()
    page.goto(f"{lab.url}lab?reset&token={lab.token}")
    expect(page.locator('li[data-id="jupyter-gpuplat-sidebar"]')).to_be_visible(timeout=60_000)
    page.evaluate(SHOW_SIDEBAR)
    expect(page.locator(SIDEBAR)).to_be_visible()
    widen_left_sidebar(page, 460)
    return page


def waiting_again(lab: Lab, rid: str, browser_context: Any) -> None:
    """A preempted run still `running` whose replacement pod waits: its row ticks the start wait
    (`starting …`), and its timeline's Running phase is the run clock, standing while it waits.
    The old sidebar counted both from started_at ("running N s" with the wait in it)."""
    page = open_sidebar(lab, browser_context)
    try:
        row = page.locator(f'{SIDEBAR} .jp-GpuPlat-runRow[data-run-id="{rid}"]')
        expect(row.locator(".jp-GpuPlat-status")).to_have_text("running")
        expect(row.locator(".jp-GpuPlat-runPhase")).to_have_text(re.compile(r"^starting \d"))
        detail = open_from_list(page, rid)
        ran = lab.ok("GET", f"runs/{rid}")["clocks"]
        assert ran["ticking"] == "start_wait_seconds", ran
        ran_text = format_duration(ran["run_seconds"])
        expect(detail.locator('.jp-GpuPlat-phase[data-phase="run"] .jp-GpuPlat-phaseTime')).to_have_text(ran_text)
        expect(detail.locator('[data-clock="run"] .jp-GpuPlat-clockValue')).to_have_text(ran_text)
        expect(detail.locator('[data-clock="start_wait"]')).to_have_class(re.compile("jp-mod-live"))
    finally:
        page.close()


def running_again(lab: Lab, rid: str, browser_context: Any) -> None:
    """Running again after the wait: explain's "running for" is the run clock (the wait left out),
    the same text as the Run time clock beside it. The old sidebar counted it from started_at."""
    page = open_sidebar(lab, browser_context)
    try:
        detail = open_from_list(page, rid)
        message = detail.locator(".jp-GpuPlat-explainMessage")
        expect(message).to_contain_text("running for")
        run_clock = detail.locator('[data-clock="run"] .jp-GpuPlat-clockValue')

        def same() -> bool:
            # both are drawn on the same tick; read together, they agree unless a tick fell between
            said, clock = message.text_content() or "", run_clock.text_content() or ""
            return f"running for {clock} " in f"{said} "

        until(same, "explain's running for to say the run clock", timeout=10)
    finally:
        page.close()


def test_a_preempted_run_shows_the_services_clocks_in_the_sidebar_the_cli_and_the_widgets(
    k8s_lab: Lab, cluster: EmulatedCluster, browser_context: Any
) -> None:
    lab = k8s_lab
    run = lab.ok(
        "POST", "runs", body={"project": "team-a", "presets": ["single-gpu"], "command": "echo attempt; gate again"}
    )
    rid = run["id"]
    lab.wait_status(rid, "running")
    until(lambda: b"attempt" in lab.ok("GET", f"runs/{rid}/logs", format="text"), "the first pod's log")
    # Another team's pod takes the only GPU; the replacement pod waits for it.
    cluster.add_pod("research", "urgent", gpus=1, command="gate release", priority=URGENT)
    pod = cluster.pods(NAMESPACE, run_selector(rid))[0]
    cluster.preempt(NAMESPACE, pod["metadata"]["name"], by="research/urgent")
    explained(lab, rid, "InsufficientGPU")
    held = lab.ok("GET", f"runs/{rid}")
    until(
        lambda: (
            lab.ok("GET", f"runs/{rid}")["clocks"]["start_wait_seconds"] >= held["clocks"]["start_wait_seconds"] + 1.5
        ),
        "the replacement to wait a while",
    )
    # Still `running`, waiting again: the sidebar says the service's clocks, not time since it started.
    waiting_again(lab, rid, browser_context)
    cluster.open_gate("release")
    explained(lab, rid, "Running")
    running_again(lab, rid, browser_context)
    cluster.open_gate("again")
    done = lab.wait_status(rid, "succeeded")
    c = done["clocks"]
    # The wait again is not run time: timestamps alone would show at least this much more.
    assert done["finished_at"] - done["started_at"] - c["run_seconds"] >= 1.5, done

    # The CLI prints the service's clocks.
    line = next(ln for ln in lab.gpuplat("runs", "show", rid).stdout.splitlines() if ln.startswith("clocks: "))
    assert line == "clocks: " + ", ".join(f"{k} {c[k]}" for k in THREE), line
    # The notebook widget shows them.
    mon = RunMonitor(rid, Client(lab.url, "tok-alice"))
    try:
        assert mon.clocks == {k: c[k] for k in THREE}
    finally:
        mon.close()
    # The sidebar shows them.
    page = open_sidebar(lab, browser_context)
    try:
        detail = open_from_list(page, rid)
        for key, field in (("queue_wait", THREE[0]), ("start_wait", THREE[1]), ("run", THREE[2])):
            value = detail.locator(f'[data-clock="{key}"] .jp-GpuPlat-clockValue')
            expect(value).to_have_text(format_duration(c[field]))
        # The list row's "ran" is the run clock too, not finished − started.
        row = page.locator(f'{SIDEBAR} .jp-GpuPlat-runRow[data-run-id="{rid}"]')
        page.locator(f"{SIDEBAR} .jp-GpuPlat-back").click()
        expect(row).to_contain_text(f"ran {format_duration(c['run_seconds'])}")
    finally:
        page.close()
