"""The three clocks, from times and timeline alone (core/clocks.py is pure)."""

from __future__ import annotations

from typing import Any

from jupyter_gpuplat.core.clocks import clocks, run_clocks, ticking
from jupyter_gpuplat.core.status import FINAL, Phase, Status, phase_of

TIMES = {"queued_at": 100.0, "dispatched_at": 110.0, "started_at": 115.0, "finished_at": None}


def ev(at: float, status: str, reason: str) -> dict[str, Any]:
    return {"at": at, "status": status, "reason": reason, "message": ""}


def test_phases_without_a_timeline() -> None:
    assert clocks(TIMES, None, 130.0) == {"queue_wait_seconds": 10.0, "start_wait_seconds": 5.0, "run_seconds": 15.0}
    assert clocks({**TIMES, "started_at": None}, None, 130.0)["run_seconds"] is None
    assert clocks({**TIMES, "finished_at": 120.0}, None, 999.0)["run_seconds"] == 5.0
    waiting = {"queued_at": 100.0, "dispatched_at": None, "started_at": None, "finished_at": None}
    assert clocks(waiting, [], 104.5) == {"queue_wait_seconds": 4.5, "start_wait_seconds": None, "run_seconds": None}


def test_a_replacement_pod_waiting_after_a_preemption_is_start_wait_not_run_time() -> None:
    timeline = [
        ev(100, "queued", "Submitted"),
        ev(110, "dispatched", "Admitted"),
        ev(112, "starting", "InsufficientGPU"),  # before the start: the first start wait
        ev(115, "running", "Running"),
        ev(120, "running", "Preempted"),
        ev(121, "running", "InsufficientGPU"),
        ev(150, "running", "Running"),
    ]
    c = clocks(TIMES, timeline, 160.0)
    assert c == {"queue_wait_seconds": 10.0, "start_wait_seconds": 35.0, "run_seconds": 15.0}
    # Still waiting now: the open episode runs to `now`.
    c = clocks(TIMES, timeline[:-1], 140.0)
    assert c == {"queue_wait_seconds": 10.0, "start_wait_seconds": 25.0, "run_seconds": 5.0}
    # The run ended during the wait: the episode closes at its end.
    ended = [*timeline[:-1], ev(130, "failed", "TimedOut")]
    c = clocks({**TIMES, "finished_at": 130.0}, ended, 999.0)
    assert c == {"queue_wait_seconds": 10.0, "start_wait_seconds": 15.0, "run_seconds": 5.0}


def test_running_reasons_do_not_open_an_episode() -> None:
    timeline = [ev(115, "running", "Running"), ev(118, "running", "CrashLoop"), ev(119, "stopping", "StopRequested")]
    assert clocks(TIMES, timeline, 125.0)["run_seconds"] == 10.0


def test_two_episodes_add_up() -> None:
    timeline = [
        ev(115, "running", "Started"),
        ev(116, "running", "Evicted"),
        ev(118, "running", "Running"),
        ev(120, "running", "Preempted"),
        ev(124, "running", "Reattached"),
    ]
    c = clocks(TIMES, timeline, 130.0)
    assert c["run_seconds"] == 9.0 and c["start_wait_seconds"] == 11.0


def test_which_clock_ticks_is_decided_here_by_status_and_reason() -> None:
    # Clients tick this one clock between reads and compute none (issue 24).
    assert ticking("created", "Submitted") == ticking("queued", "QueuePaused") == "queue_wait_seconds"
    assert ticking("dispatched", "Admitted") == ticking("starting", "ImagePull") == "start_wait_seconds"
    assert ticking("running", "Running") == ticking("stopping", "StopRequested") == "run_seconds"
    # Running, its replacement pod waiting for a GPU: the wait again is start wait (as `clocks` counts it).
    assert ticking("running", "InsufficientGPU") == "start_wait_seconds"
    assert ticking("running", "Preempted") == "start_wait_seconds"  # the episode opens at the disruption
    assert all(ticking(s, "Completed") is None for s in ("succeeded", "failed", "stopped"))
    held = run_clocks({**TIMES, "status": "running", "reason": "InsufficientGPU", "timeline": None}, 130.0)
    assert held["ticking"] == "start_wait_seconds" and held["run_seconds"] == 15.0


def test_each_status_has_one_phase() -> None:
    assert [phase_of(s) for s in Status] == [
        Phase.DISPATCH,
        Phase.DISPATCH,
        Phase.EXECUTION,
        Phase.EXECUTION,
        Phase.RUN,
        Phase.RUN,
        Phase.END,
        Phase.END,
        Phase.END,
    ]
    assert {s for s in Status if phase_of(s) is Phase.END} == FINAL
