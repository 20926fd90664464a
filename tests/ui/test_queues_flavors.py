"""Resource flavors in the sidebar, in a real browser: a platform with typed devices (h100: 0-1,
a100: 2-5) and a queue `typed` trying h100 (quota 2) then a100 (quota 4). The Queues tab shows one
meter per flavor in that order with what the queue's runs hold and the free devices of each, and
they move when runs end; a run's detail names the flavor it got; a run asking for h100 waits while
a100 is free, and its explanation (and the queue's line) says it is h100's quota that holds it; one
asking for 4 GPUs, either flavor, is explained per flavor (h100's quota, then a100's).

The per-flavor explanation is this tree's frontend: serve it with GPUPLAT_UI_LABEXTENSIONS
(tests/ui/conftest.py) until the installed one is rebuilt."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from playwright.sync_api import expect

from ..conftest import EXAMPLE
from ..flavored import A100, H100, add_flavors
from .conftest import SHOW_SIDEBAR, Lab, goto_reset, widen_left_sidebar
from .sidebar_helpers import SIDEBAR, back_to_runs, open_from_list, release, show_tab

QUEUE = f'{SIDEBAR} .jp-GpuPlat-queue[data-queue="typed"]'
# The Queues tab reloads on status events (coalesced): under load a change shows a few seconds later.
LIVE = 15_000
H100_FOUR = "h100: 2/2 in use (4 more needed) (queue typed's h100 quota)"

# Waits, quietly, until the gate file named by its argument exists.
GATE_PY = """\
import pathlib, sys, time
gate = pathlib.Path(sys.argv[1])
while not gate.exists():
    time.sleep(0.1)
"""


@pytest.fixture(scope="module")
def flavored(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    """Its own server (6 GPUs, declared per flavor as in tests/service/test_flavors_local.py): other
    browser tests' runs stay out of its queue."""
    root = tmp_path_factory.mktemp("flavors-lab")
    cfg = add_flavors(yaml.safe_load(EXAMPLE.read_text()))
    for p in cfg["projects"]:
        p["max_run_resources"] = {"gpu": 4}  # a run may take all of a100
    config_file = root / "platform.yaml"
    config_file.write_text(yaml.safe_dump(cfg))
    lab = Lab(root / "server", gpus=6, config_file=config_file)
    (lab.work / "gate.py").write_text(GATE_PY)
    lab.start(timeout=90)
    try:
        yield lab
    finally:
        try:
            lab.stop_all_runs()
        finally:
            lab.stop()


@pytest.fixture
def page(flavored: Lab, browser_context: Any) -> Iterator[Any]:
    page = browser_context.new_page()
    page.set_default_timeout(30_000)
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    browser_context.clear_cookies()  # the server's token (alice), not another page's login
    goto_reset(page, f"{flavored.url}lab?reset&token={flavored.token}")
    expect(page.locator('li[data-id="jupyter-gpuplat-sidebar"]')).to_be_visible(timeout=60_000)
    page.evaluate(SHOW_SIDEBAR)
    expect(page.locator(SIDEBAR)).to_be_visible()
    widen_left_sidebar(page, 460)
    yield page
    page.close()
    assert errors == []


def submit(lab: Lab, name: str, gpu: int = 1, gpu_type: str | None = None) -> str:
    body: dict[str, Any] = {
        "project": "team-a",
        "queue": "typed",
        "name": name,
        "command": [sys.executable, str(lab.work / "gate.py"), str(lab.work / f"gate-{name}")],
        "resources": {"gpu": gpu},
    }
    if gpu_type:
        body["placement"] = {"gpu_type": gpu_type}
    return str(lab.ok("POST", "runs", body=body)["id"])


def expect_meters(page: Any, *meters: tuple[str, str]) -> None:
    """The queue's meters, top to bottom: (label, text) each; a full one's bar says so."""
    rows = page.locator(f"{QUEUE} .jp-GpuPlat-meter")
    expect(rows.locator(".jp-GpuPlat-meterLabel")).to_have_text([label for label, _ in meters], timeout=LIVE)
    expect(rows.locator(".jp-GpuPlat-meterText")).to_have_text([text for _, text in meters], timeout=LIVE)
    for i, (label, text) in enumerate(meters):
        track = rows.nth(i).locator('[role="meter"]')
        expect(track).to_have_attribute("aria-label", f"{label}: {text}", timeout=LIVE)


def test_per_flavor_meters_detail_and_wait(flavored: Lab, page: Any, screenshots: Path) -> None:
    lab = flavored
    names = ("h1", "h2", "a1", "asks-h100", "four")
    try:
        # the queue tries h100 first: two one-GPU runs fill it, the third goes on a100
        ids = {n: submit(lab, n) for n in ("h1", "h2")}
        for n in ("h1", "h2"):
            lab.wait_status(ids[n], "running")
        ids["a1"] = submit(lab, "a1")
        lab.wait_status(ids["a1"], "running")
        assert [lab.ok("GET", f"runs/{ids[n]}")["flavor"] for n in ("h1", "h2", "a1")] == ["h100", "h100", "a100"]

        show_tab(page, "queues")
        expect(page.locator(QUEUE)).to_be_visible()
        usage = ("GPUs", "3 GPUs (no quota)")
        runs = ("Runs", "3 runs dispatched")
        expect_meters(page, usage, ("h100", "2/2 GPUs · 0 free here"), ("a100", "1/4 GPUs · 3 free here"), runs)
        full = page.locator(f"{QUEUE} .jp-GpuPlat-meter").nth(1).locator(".jp-GpuPlat-meterBar")
        expect(full).to_have_class(re.compile("jp-mod-full"))  # h100 is at its quota

        # a run asking for h100 waits for h100 while a100 has 3 free; one asking 4 waits for a100
        ids["asks-h100"] = submit(lab, "asks-h100", gpu_type="h100")
        ids["four"] = submit(lab, "four", gpu=4)
        expect(page.locator(f"{QUEUE} .jp-GpuPlat-queuePending")).to_contain_text("2 pending", timeout=LIVE)
        expect(page.locator(f"{QUEUE} .jp-GpuPlat-queueWait")).to_have_text(
            "h100: 2/2 in use (1 more needed) (queue typed's h100 quota)"
        )
        expect(page.locator(f"{QUEUE} .jp-GpuPlat-pendingRun")).to_have_text(
            ["1st · asks-h100 (alice)", "2nd · four (alice)"]
        )
        page.screenshot(path=screenshots / "queues-flavors.png")

        # the run's detail names the flavor it got, beside its GPUs and devices
        detail = open_from_list(page, ids["a1"])
        summary = detail.locator(".jp-GpuPlat-summary")
        expect(summary).to_contain_text(re.compile(r"1 GPU a100 on GPU [2-5]\b"))
        detail = open_from_list(page, ids["h1"])
        expect(detail.locator(".jp-GpuPlat-summary")).to_contain_text(re.compile(r"1 GPU h100 on GPU [01]\b"))

        # the waiting run's explanation: its one flavor's quota, the a100 it may not use still free
        detail = open_from_list(page, ids["asks-h100"])
        explain = detail.locator(".jp-GpuPlat-explain")
        expect(explain.locator(".jp-GpuPlat-explainMessage")).to_have_text(
            "h100: 2/2 in use (1 more needed) (queue typed's h100 quota)"
        )
        expect(explain.locator(".jp-GpuPlat-explainNumbers")).to_contain_text("2/2 in use")
        expect(explain.locator(".jp-GpuPlat-explainNumbers")).to_contain_text("3 GPU(s) free on the machine")
        blockers = explain.locator(".jp-GpuPlat-explainBlockers a.jp-GpuPlat-runLink")
        expect(blockers).to_have_count(2)
        assert {blockers.nth(i).get_attribute("data-run-id") for i in range(2)} == {ids["h1"], ids["h2"]}
        expect(detail.locator(".jp-GpuPlat-summary")).not_to_contain_text("h100")  # no flavor before admission
        expect(explain.locator(".jp-GpuPlat-explainFlavors")).to_have_count(0)  # its one flavor: the message says it

        # the run asking 4 may use either flavor: each one's wait, in the order the queue tries them
        detail = open_from_list(page, ids["four"])
        explain = detail.locator(".jp-GpuPlat-explain")
        expect(explain.locator(".jp-GpuPlat-explainMessage")).to_have_text(H100_FOUR)
        expect(explain.locator(".jp-GpuPlat-explainFlavors li")).to_have_text(
            [H100_FOUR, "a100: 1/4 in use (1 more needed) (queue typed's a100 quota)"]
        )
        page.screenshot(path=screenshots / "run-waiting-flavors.png")

        # a1 ends: `four` takes all of a100
        release(lab, "gate-a1")
        lab.wait_status(ids["a1"], "succeeded")
        lab.wait_status(ids["four"], "running")
        assert set(lab.ok("GET", f"runs/{ids['four']}")["devices"]) == A100
        show_tab(page, "queues")
        expect_meters(
            page,
            ("GPUs", "6 GPUs (no quota)"),
            ("h100", "2/2 GPUs · 0 free here"),
            ("a100", "4/4 GPUs · 0 free here"),
            ("Runs", "3 runs dispatched"),
        )
        expect(page.locator(f"{QUEUE} .jp-GpuPlat-pendingRun")).to_have_text(["1st · asks-h100 (alice)"], timeout=LIVE)

        # h1 ends: the run asking for h100 starts there; then h2 ends and h100 has one free
        release(lab, "gate-h1")
        lab.wait_status(ids["asks-h100"], "running")
        got = lab.ok("GET", f"runs/{ids['asks-h100']}")
        assert got["flavor"] == "h100" and set(got["devices"]) <= H100
        release(lab, "gate-h2")
        lab.wait_status(ids["h2"], "succeeded")
        expect_meters(
            page,
            ("GPUs", "5 GPUs (no quota)"),
            ("h100", "1/2 GPUs · 1 free here"),
            ("a100", "4/4 GPUs · 0 free here"),
            ("Runs", "2 runs dispatched"),
        )
        expect(page.locator(f"{QUEUE} .jp-GpuPlat-pendingRun")).to_have_count(0, timeout=LIVE)
        expect(page.locator(f"{QUEUE} .jp-GpuPlat-queueWait")).to_have_count(0)
        detail = open_from_list(page, ids["asks-h100"])
        expect(detail.locator(".jp-GpuPlat-summary")).to_contain_text(re.compile(r"1 GPU h100 on GPU [01]\b"))
    finally:
        release(lab, *(f"gate-{n}" for n in names))
        back_to_runs(page)
