"""The one renderer of an explanation (jupyter_gpuplat/explaining.py), over answers shaped as the API gives them."""

from __future__ import annotations

from typing import Any

from jupyter_gpuplat.client.explaining import explanation_lines, explanation_text, waiting_summary

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
