"""The one renderer of an explanation (jupyter_gpuplat/explaining.py), over answers shaped as the API gives them."""

from __future__ import annotations

from typing import Any

from jupyter_gpuplat.client.explaining import (
    explanation_lines,
    explanation_text,
    start_cell,
    start_text,
    waiting_summary,
)

QUEUED: dict[str, Any] = {
    "run_id": "r-1",
    "status": "queued",
    "queue": "team-a-train",
    "layer": "queue",
    "reason": "QueueConcurrency",
    "message": "queue team-a-train is at its concurrency limit: 2/2 runs dispatched",
    "numbers": {"used": 2, "limit": 2},
    "position": 1,
    "pending_in_queue": 3,
    "blockers": [
        {"id": "r-0", "name": "warm", "user": "alice", "project": "team-a", "status": "running", "gpu": 1},
        {"id": None, "name": None, "user": None, "project": "team-b", "status": "running", "gpu": 2},
    ],
    "queue_usage": {"runs": 2, "concurrency": 2, "gpu": 1, "gpu_quota": None, "pending": 3, "free_gpus": None},
    "who_can_act": [{"who": "ops", "can": "raise the concurrency of queue team-a-train"}],
}
WAITING_ON_KUBERNETES: dict[str, Any] = {
    "run_id": "r-2",
    "status": "running",
    "queue": "team-a-train",
    "layer": "executor",
    "reason": "InsufficientGPU",
    "message": "Admitted by the queue, but no node has 1 free nvidia.com/gpu right now: 1 of 1 nodes lack free GPUs.",
    "position": None,
    "blockers": [],
    "details": {"layer": "executor", "raw": "0/1 nodes are available: 1 Insufficient nvidia.com/gpu."},
    "who_can_act": [{"who": "the run's owner", "can": "wait for GPUs to free up, or stop the run"}],
}


def test_a_queued_run_in_lines() -> None:
    text = explanation_text(QUEUED)
    assert text.splitlines() == [
        "layer: queue",
        "where: held by our queue (dispatch)",
        "why: queue team-a-train is at its concurrency limit: 2/2 runs dispatched [QueueConcurrency]",
        "numbers: 2/2 in use",
        "position: 1 of 3 waiting in queue team-a-train",
        "queue: 2/2 runs, 1/∞ GPUs in use, 3 pending",  # free_gpus null: no number claimed
        "blocked by: r-0 (warm, alice, running, 1 GPU); a run of project team-b (running, 2 GPU)",
        "who can act: ops: raise the concurrency of queue team-a-train",
    ]
    counted = {**QUEUED, "queue_usage": {**QUEUED["queue_usage"], "free_gpus": 3}}
    assert "3 GPU(s) free on the machine" in explanation_text(counted)


def test_an_executor_wait_names_the_layer_and_the_raw_message() -> None:
    lines = dict(explanation_lines(WAITING_ON_KUBERNETES))
    assert lines["layer"] == "executor"
    assert lines["where"] == "dispatched; the executor has not started it yet (execution)"
    assert lines["executor said"] == "0/1 nodes are available: 1 Insufficient nvidia.com/gpu."
    assert "position" not in lines and "queue" not in lines


def test_a_run_record_decides_ended_and_not_yet_asked() -> None:
    done = {"status": "succeeded", "message": "exited with code 0", "reason": "Completed"}
    assert explanation_text(QUEUED, done) == "ended: succeeded: exited with code 0"
    assert explanation_text(None, {"status": "queued", "message": "submitted"}) == "status: queued: submitted"


def test_the_status_line_summary() -> None:
    assert waiting_summary(QUEUED) == (
        "QueueConcurrency: queue team-a-train is at its concurrency limit: 2/2 runs dispatched (position 1 of 3)"
    )
    assert waiting_summary(WAITING_ON_KUBERNETES).startswith("InsufficientGPU: Admitted by the queue")
    numbers = {**QUEUED, "numbers": {"gpu": {"used": 1}, "free": None}}
    assert dict(explanation_lines(numbers))["numbers"] == 'gpu {"used":1}, free —'


ESTIMATED: dict[str, Any] = {
    **QUEUED,
    "eta": {
        "p50_at": 1000.0,
        "p90_at": 2500.0,
        "p50_seconds": 360.0,
        "p90_seconds": 1500.0,
        "basis": "100 scenarios over 2 runs (times from history for 2)",
        "computed_at": 640.0,
        "text": "starts in ~6 min (p90 25 min)",
    },
    "eta_unknown": None,
}
K8S_UNKNOWN = "dispatched to Kubernetes, which holds it until a node has room; our estimate covers our queue only"


def test_the_start_estimate_is_the_servers_text_with_its_basis() -> None:
    lines = explanation_lines(ESTIMATED)
    at = lines.index(("start", "starts in ~6 min (p90 25 min)"))
    assert lines[at + 1] == ("start basis", "100 scenarios over 2 runs (times from history for 2)")
    assert lines[at - 1][0] == "queue" and lines[at + 2][0] == "blocked by"  # after the numbers, before blockers
    unknown = dict(explanation_lines({**WAITING_ON_KUBERNETES, "eta": None, "eta_unknown": K8S_UNKNOWN}))
    assert unknown["start"] == f"unknown: {K8S_UNKNOWN}" and "start basis" not in unknown
    assert not any(label.startswith("start") for label, _ in explanation_lines(QUEUED))  # an older service's


def test_a_table_cell_shortens_why_a_start_is_unknown() -> None:
    assert start_cell(ESTIMATED) == start_text(ESTIMATED) == "starts in ~6 min (p90 25 min)"
    k8s = {"eta": None, "eta_unknown": K8S_UNKNOWN}
    assert start_cell(k8s) == "unknown: dispatched to Kubernetes, which holds it until a node has room"  # 1st clause
    assert start_text(k8s) == f"unknown: {K8S_UNKNOWN}"  # whole where there is room
    many = "r-1 has no time limit and no history (and 3 more runs with no basis hold what it waits for)"
    assert start_cell({"eta": None, "eta_unknown": many}) == (
        "unknown: r-1 has no time limit and no history (and 3 more runs with no …"
    )
    short = {"eta": None, "eta_unknown": "r-1 has no time limit and no history"}
    assert start_cell(short) == "unknown: r-1 has no time limit and no history"
    assert start_cell({"eta": None, "eta_unknown": None}) == start_cell({}) == ""
