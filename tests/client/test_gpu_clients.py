"""A run's GPU use in the CLI, the RunMonitor and Compare (issue 27): each shows the server's words, as they move.

NVML is hardware: the server has declared GPUs only, so the readings NVML would give are written
where the sampler writes them (tests/gpu_samples.py), the one boundary faked.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator

import pytest

from jupyter_gpuplat.client import Client
from jupyter_gpuplat.notebook.widgets import Compare, RunMonitor

from ..gpu_samples import GiB, write_samples_to
from ..server import ServerProcess
from ..waiting import until
from ..widget_env import served, threads_ended

SLEEP = [sys.executable, "-c", "import time; time.sleep(120)"]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    yield from served(tmp_path_factory, "gpu-clients")


@pytest.fixture(autouse=True)
def no_thread_left() -> Iterator[None]:
    yield
    threads_ended()


@pytest.fixture
def running(client: Client) -> Iterator[list[dict[str, object]]]:
    """Two runs holding a GPU each (team-a's queue runs two at once); stopped after the test."""
    runs = [client.submit("team-a", command=SLEEP, name=n, resources={"gpu": 1}) for n in ("sampled", "blind")]
    yield [
        until(lambda r=r: client.get(r["id"])["status"] == "running" and client.get(r["id"]), "running") for r in runs
    ]
    for r in runs:
        client.stop(r["id"])


def test_runs_show_prints_the_servers_gpu_line(server: ServerProcess, running: list[dict[str, object]]) -> None:
    sampled, blind = running
    write_samples_to(server.root, str(sampled["id"]), sampled["devices"][0], [90.0, 0.0], [GiB, 2 * GiB])  # type: ignore[index]
    show = server.gpuplat("runs", "show", str(sampled["id"])).stdout.splitlines()
    assert "gpu: GPU busy 50% of 20 s · mean util 45% · memory peak 2.0 GiB" in show
    unseen = server.gpuplat("runs", "show", str(blind["id"])).stdout.splitlines()
    reason = server.ok("GET", f"runs/{blind['id']}")["gpu_usage"]["reason"]
    assert [line for line in unseen if line.startswith("gpu: ")] == [f"gpu: GPU use not measured: {reason}"]


def test_run_monitor_shows_the_gpu_text_and_follows_it(
    server: ServerProcess, client: Client, running: list[dict[str, object]]
) -> None:
    sampled = running[0]
    rid, device = str(sampled["id"]), sampled["devices"][0]  # type: ignore[index]
    write_samples_to(server.root, rid, device, [80.0, 80.0], [GiB, GiB])
    mon = RunMonitor(rid, client)
    try:
        assert mon.gpu_text == "GPU busy 100% of 20 s · mean util 80% · memory peak 1.0 GiB"
        assert "GPU busy 100% of 20 s" in mon.gpu_html.value and mon.gpu_html.layout.display == ""
        assert mon.gpu_html in mon.children
        # The run goes on idle: the sampler writes two more readings; the monitor re-reads the server's words.
        write_samples_to(server.root, rid, device, [0.0, 0.0], [3 * GiB, GiB], start=20)
        until(lambda: "busy 50% of 40 s" in mon.gpu_text, "the new GPU text", timeout=15)
        assert mon.gpu_text == "GPU busy 50% of 40 s · mean util 40% · memory peak 3.0 GiB"
        assert "memory peak 3.0 GiB" in mon.gpu_html.value
    finally:
        mon.close()


def test_run_monitor_of_a_run_without_gpus_shows_no_gpu_line(server: ServerProcess, client: Client) -> None:
    run = client.submit("team-a", command=[sys.executable, "-c", "pass"], name="cpu", resources={"gpu": 0})
    mon = RunMonitor(run["id"], client)
    try:
        assert mon.gpu_text == "" and mon.gpu_html.layout.display == "none"
    finally:
        mon.close()


def test_compare_widget_shows_the_servers_gpu_rows(
    server: ServerProcess, client: Client, running: list[dict[str, object]]
) -> None:
    sampled, blind = running
    write_samples_to(server.root, str(sampled["id"]), sampled["devices"][0], [90.0, 0.0], [GiB, 2 * GiB])  # type: ignore[index]
    cmp = Compare([str(sampled["id"]), str(blind["id"])], client)
    try:
        html = cmp.table_html
        busy = re.search(r"<tr[^>]*>(?:(?!</tr>).)*GPU busy.*?</tr>", html, re.S)
        peak = re.search(r"<tr[^>]*>(?:(?!</tr>).)*GPU memory peak.*?</tr>", html, re.S)
        assert busy and re.findall(r">([^<>]+)</td>", busy[0])[1:] == ["50%", "not measured"]
        assert peak and re.findall(r">([^<>]+)</td>", peak[0])[1:] == ["2.0 GiB", "not measured"]
    finally:
        cmp.close()
