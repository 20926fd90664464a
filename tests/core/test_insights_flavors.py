"""core.insights per flavor, as a table: which flavors are listed, against which quota, and that a run
counts in its flavor (in all and in its queue) and in no flavor where it has none."""

from __future__ import annotations

from typing import Any

from jupyter_gpuplat.core.insights import insights

HOUR = 3600.0


def _run(rid: str, queue: str, flavor: str | None, gpu: int, start: float, end: float) -> dict[str, Any]:
    return {
        "id": rid, "project": "p", "user": "u", "queue": queue, "status": "succeeded", "reason": None, "gpu": gpu,
        "created_at": start, "queued_at": start, "dispatched_at": start, "started_at": start, "finished_at": end,
        "flavor": flavor,
    }  # fmt: skip


def _answer(runs: list[dict[str, Any]], queues: dict[str, dict[str, int]]) -> dict[str, Any]:
    return insights(
        runs,
        {},
        since=0.0,
        until=10 * HOUR,
        bucket=HOUR,
        now=10 * HOUR,
        quota_gpu=dict.fromkeys(queues),
        machine_gpus=None,
        flavors=["h100", "a100", "l4"],
        queue_flavors=queues,
        machine_flavors=None,
    )


def test_flavors_listed_against_their_quotas_in_the_selected_queues() -> None:
    runs = [
        _run("a", "x", "h100", 2, 0, 2 * HOUR),  # 4 GPU-h
        _run("b", "y", "h100", 1, HOUR, 2 * HOUR),  # 1
        _run("c", "x", "a100", 1, 0, 8 * HOUR + 20 * HOUR),  # clipped to the range: 10
        _run("d", "x", None, 3, 0, HOUR),  # no flavor: in the total only
        _run("e", "y", "l4", 1, 0, HOUR),  # a flavor y no longer offers
    ]
    out = _answer(runs, {"x": {"a100": 4, "h100": 2}, "y": {"h100": 1}})
    got = {
        f["name"]: (f["gpu_hours"], f["quota_gpu"], f["allowance_gpu_hours"], f["utilisation"]) for f in out["flavors"]
    }
    assert list(got) == ["h100", "a100", "l4"]  # the platform's order
    assert got["h100"] == (5.0, 3, 30.0, round(5 / 30, 6))  # both queues' h100 quotas
    assert got["a100"] == (10.0, 4, 40.0, 0.25)
    assert got["l4"] == (1.0, None, None, None)
    assert out["total"]["gpu_hours"] == 5 + 10 + 3 + 1
    assert all(f["machine_gpus"] is None and f["machine_gpu_hours"] is None for f in out["flavors"])
    queues = {q["name"]: [(f["name"], f["gpu_hours"], f["quota_gpu"]) for f in q["flavors"]] for q in out["queues"]}
    # each queue's in the order it tries them, then one it no longer offers
    assert queues == {"x": [("a100", 10.0, 4), ("h100", 4.0, 2)], "y": [("h100", 1.0, 1), ("l4", 1.0, None)]}


def test_no_flavor_offered_or_used_no_rows() -> None:
    out = _answer([_run("d", "x", None, 1, 0, HOUR)], {"x": {}})
    assert out["flavors"] == [] and out["queues"][0]["flavors"] == []
    assert out["total"]["gpu_hours"] == 1.0
