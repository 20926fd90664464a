"""Clocks and states that tick (issue 14, item 1), against a real server and real runs, no browser.

The RunMonitor's run-time clock advances while a run runs and stops at the record's final value;
its output sizes grow while the run writes; the magics' status line (StatusLine) follows a run
from waiting to running to its final state; Compare's column heads show live durations.
Every wait is on a condition (tests/waiting.until), never a sleep.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jupyter_gpuplat.client import Client
from jupyter_gpuplat.notebook.widgets import Compare, RunMonitor
from jupyter_gpuplat.notebook.widgets.clocks import LiveClocks, duration, ticking_clock
from jupyter_gpuplat.notebook.widgets.statusline import StatusLine, status_text

from ..server import ServerProcess
from ..waiting import until
from ..widget_env import served, threads_ended

PY = sys.executable

# Prints a line, waits for gate 1, prints 200 more lines, waits for gate 2.
TWO_GATES = """
import pathlib, sys, time
print("first", flush=True)
one, two = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
while not one.exists():
    time.sleep(0.02)
for i in range(200):
    print(f"line {i} " + "x" * 40, flush=True)
while not two.exists():
    time.sleep(0.02)
print("done", flush=True)
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    yield from served(tmp_path_factory, "widgets-live")


@pytest.fixture(autouse=True)
def no_thread_left() -> Iterator[None]:
    yield
    threads_ended()


@pytest.fixture
def gates(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    one, two = tmp_path / "one", tmp_path / "two"
    yield one, two
    one.touch()  # release whatever a failed test left waiting
    two.touch()


def two_gate_run(client: Client, gates: tuple[Path, Path], name: str, **kw: Any) -> dict[str, Any]:
    return client.submit("team-a", command=[PY, "-c", TWO_GATES, *map(str, gates)], name=name, **kw)


def shown_run_time(mon: RunMonitor) -> str:
    m = re.search(r"run time <b>([^<]*)</b>", mon.timeline.value)
    assert m is not None, mon.timeline.value
    return m.group(1)


# ---- the pure parts ------------------------------------------------------------------------------
def test_live_clocks_tick_only_the_current_phase_and_never_once_final() -> None:
    # Which clock ticks is the service's answer (`clocks.ticking`, core/clocks.py): rendered, not derived.
    running = {"status": "running", "clocks": {"queue_wait_seconds": 2.0, "run_seconds": 1.5, "ticking": "run_seconds"}}
    live = LiveClocks.of(running, read_at=100.0)
    assert live.ticking == "run_seconds" and not live.final
    assert live.at(103.0) == {"queue_wait_seconds": 2.0, "run_seconds": 4.5}
    queued = LiveClocks.of(
        {"status": "queued", "clocks": {"queue_wait_seconds": None, "ticking": "queue_wait_seconds"}}, read_at=10.0
    )
    assert queued.at(12.5) == {"queue_wait_seconds": 2.5}  # the phase began by its status
    done = LiveClocks.of({"status": "succeeded", "clocks": {"run_seconds": 7.25, "ticking": None}}, read_at=0.0)
    assert done.final and done.at(1e9) == {"run_seconds": 7.25}
    # Running, but its replacement pod waits again: the service says the start wait ticks.
    again = {
        "status": "running",
        "clocks": {"start_wait_seconds": 3.0, "run_seconds": 9.0, "ticking": "start_wait_seconds"},
    }
    assert ticking_clock(again) == "start_wait_seconds"
    assert LiveClocks.of(again, read_at=0.0).at(2.0) == {"start_wait_seconds": 5.0, "run_seconds": 9.0}
    assert [duration(s) for s in (None, 0.44, 42.9, 245, 7380, 97200)] == [
        "—",
        "0.4s",
        "42s",
        "4m 05s",
        "2h 03m",
        "1d 3h",
    ]


def test_status_text_for_each_phase() -> None:
    ex = {"reason": "QueuePaused", "message": "queue q is paused", "position": 1, "pending_in_queue": 2}
    run = {"id": "r-1", "queue": "q", "status": "queued", "devices": []}
    assert (
        status_text(run, ex, {"queue_wait_seconds": 4.2})
        == "r-1 queued in queue q — QueuePaused: queue q is paused (position 1 of 2) · waiting 4s"
    )
    running = {**run, "status": "running", "devices": [0, 1]}
    assert status_text(running, ex, {"run_seconds": 65}) == "r-1 running in queue q on GPU 0,1 — running for 1m 05s"
    done = {**run, "status": "succeeded", "message": "exited with code 0"}
    assert status_text(done, None, {"run_seconds": 3.5}) == "r-1 succeeded in queue q — exited with code 0 · ran 3s"
    never = {**run, "status": "stopped", "message": "stopped by alice"}
    text = status_text(never, None, {"queue_wait_seconds": 12, "run_seconds": None})
    assert text == "r-1 stopped in queue q — stopped by alice · waited 12s"


# ---- RunMonitor ------------------------------------------------------------------------------------
def test_monitor_run_time_advances_while_running_and_stops_at_the_final_value(
    client: Client, gates: tuple[Path, Path]
) -> None:
    run = two_gate_run(client, gates, "ticking")
    mon = RunMonitor(run["id"], client)
    try:
        until(lambda: mon.status == "running" and mon.log_lines == ["first"], "the run to run")
        first = shown_run_time(mon)
        # No event comes while it waits for the gate: the clock moves by itself.
        until(lambda: shown_run_time(mon) != first, "the run-time clock to advance", timeout=10)
        later = mon.clocks["run_seconds"]
        assert later is not None and later > 0
        until(lambda: (mon.clocks["run_seconds"] or 0) > later, "it to go on advancing", timeout=10)
        # "Why is it here?" says how long it runs from the same clock, not the answer's stale "running for 0s".
        until(lambda: re.search(r"why: running for [2-9]s \[Running\]", mon.explain_text), "explain to tick")
        assert mon.status == "running"
        gates[0].touch()
        gates[1].touch()
        until(lambda: mon.status == "succeeded", "the run to succeed")
        for t in mon.threads:
            t.join(10)
            assert not t.is_alive()
        final = client.get(run["id"])["clocks"]["run_seconds"]
        assert mon.clocks["run_seconds"] == final == mon.run["clocks"]["run_seconds"]  # stopped: the record's
        assert shown_run_time(mon) == f"{final:.1f}s"
    finally:
        mon.close()


def test_monitor_output_sizes_grow_while_the_log_streams(client: Client, gates: tuple[Path, Path]) -> None:
    run = two_gate_run(client, gates, "growing")
    mon = RunMonitor(run["id"], client)
    mon.metrics_refresh_seconds = 0.5  # the outputs' re-read interval, short for the test
    try:
        until(lambda: mon.status == "running" and mon.log_lines == ["first"], "the first line")

        def sizes() -> dict[str, int]:
            return {o["path"]: o["size"] for o in mon.outputs}

        until(lambda: any(s > 0 for s in sizes().values()), "a non-empty output listed")
        before = sizes()
        gates[0].touch()  # 200 more lines while it still runs
        until(lambda: mon.log_count == 201, "the 200 lines in the log")
        until(lambda: any(sizes().get(p, 0) > n for p, n in before.items()), "an output to grow", timeout=10)
        grown = sizes()
        assert mon.status == "running" and client.get(run["id"])["status"] == "running"
        log_file = max(grown, key=lambda p: grown[p])
        assert grown[log_file] > 200 * 40
        assert f'data-path="{log_file}"' in mon.log_html.value and "KiB" in mon.log_html.value
        gates[1].touch()
        until(lambda: mon.status == "succeeded", "the end")
        until(lambda: mon.log_lines[-1:] == ["done"], "the last line")
    finally:
        mon.close()


# ---- the magics' status line ---------------------------------------------------------------------
def test_status_line_follows_a_run_from_waiting_to_its_final_state(
    server: ServerProcess, client: Client, gates: tuple[Path, Path]
) -> None:
    server.ok("POST", "queues/team-a-train/pause", "ops")
    try:
        run = two_gate_run(client, gates, "status-line")
        shown: list[str] = []
        line = StatusLine(run, client, shown.append, client.explain(run["id"]))
        assert line.text.startswith(f"{run['id']} queued in queue team-a-train — QueuePaused: ")
        line.start()
        # While it waits its wait clock ticks (no event comes while the queue is paused), before the
        # server's start estimate (unknown while paused).
        until(lambda: any(re.search(r"· waiting [1-9]\d*s( · |$)", t) for t in shown), "the wait clock to tick")
    finally:
        server.ok("POST", "queues/team-a-train/resume", "ops")
    until(lambda: "running for" in line.text, "the line to say it runs")
    first = line.text
    until(lambda: line.text != first and "running for" in line.text, "the run clock to advance", timeout=10)
    gates[0].touch()
    gates[1].touch()
    assert line.thread is not None
    line.thread.join(20)
    assert not line.thread.is_alive()
    final = client.get(run["id"])
    assert final["status"] == "succeeded"
    expected = f"{run['id']} succeeded in queue team-a-train — exited with code 0 · ran "
    assert shown[-1] == line.text and line.text.startswith(expected)
    assert line.text.endswith(duration(final["clocks"]["run_seconds"]))
    assert not any("Running: running for 0s" in t for t in shown)  # the stale explain text is never shown


def test_status_line_of_a_final_run_needs_no_thread(client: Client) -> None:
    run = client.wait(client.submit("team-a", command=[PY, "-c", "pass"], name="quick")["id"], timeout=30)
    line = StatusLine(run, client, lambda _: None).start()
    assert line.thread is None and line.final and "succeeded in queue team-a-train" in line.text


# ---- Compare ---------------------------------------------------------------------------------------
def test_compare_heads_show_live_durations(client: Client, gates: tuple[Path, Path]) -> None:
    done = client.wait(client.submit("team-a", command=[PY, "-c", "pass"], name="done")["id"], timeout=30)
    live = two_gate_run(client, gates, "live")
    client.wait(live["id"], timeout=30, statuses=["running"])
    cmp = Compare([done["id"], live["id"]], client)
    try:
        assert cmp.clock_text(done["id"]) == f"ran {duration(done['clocks']['run_seconds'])}"
        first = until(
            lambda: re.fullmatch(r"running for \d+s", cmp.clock_text(live["id"])) and cmp.clock_text(live["id"]),
            "a running clock",
        )
        until(lambda: first not in cmp.table.value and "running for" in cmp.table.value, "the head to tick", timeout=10)
        gates[0].touch()
        gates[1].touch()
        until(lambda: cmp.data["runs"][1]["status"] == "succeeded", "the comparison to see the end")
        assert cmp.thread is not None
        cmp.thread.join(10)
        assert not cmp.thread.is_alive()
        ran = client.get(live["id"])["clocks"]["run_seconds"]
        assert cmp.clock_text(live["id"]) == f"ran {duration(ran)}"
        assert '<span class="gpuplat-run-clock">' in cmp.table_html and "running for" not in cmp.table_html
    finally:
        cmp.close()
