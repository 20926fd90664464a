"""The store rows of a sweep: its parent (a record and a gate) and its children, from one request.

The parent keeps what every child takes from the submitted request (`child`, in its resolved
spec), so children made later (bayes, as its search asks) are made the same way as the first.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..core.matrix import Matrix, count
from ..core.naming import child_name
from ..core.status import Reason, Status

# What a sweep's child takes from the submitted request (the rest is its own).
CHILD_FIELDS = (
    "project",
    "user",
    "queue",
    "request",
    "resolved",
    "provenance",
    "gpu",
    "cpu_milli",
    "memory_bytes",
    "working_dir",
    "code",
)


def parent_row(template: dict[str, Any], matrix: Matrix, params: dict[str, Any]) -> dict[str, Any]:
    """The sweep's own row: the submitted run's, holding no resources, with the sweep spec resolved."""
    total = count(matrix)
    dumped = matrix.model_dump(mode="json", exclude_none=True)
    child = {k: template[k] for k in CHILD_FIELDS}
    child["request"] = {k: v for k, v in template["request"].items() if k != "matrix"}
    child.update(base_name=template["name"] or "sweep", params=params)
    spec = {"matrix": dumped, "concurrency": matrix.concurrency, "paused": False, "total": total}
    spec.update(max_failures=matrix.max_failures, early_stopping=dumped.get("early_stopping") or [], child=child)
    return {
        **template,
        "kind": "sweep",
        "parent": None,  # every row of one INSERT names the same columns
        "gpu": 0,
        "cpu_milli": 0,
        "memory_bytes": 0,
        "message": f"{total} children; at most {matrix.concurrency} dispatched at once",
        "resolved": {**template["resolved"], "kind": "sweep", "sweep": spec},
    }


def child_rows(
    new_id: Callable[[], str],
    parent_id: str,
    child: dict[str, Any],
    points: list[dict[str, Any]],
    start: int,
    now: float,
) -> list[dict[str, Any]]:
    """One queued job per param dict, numbered from `start`, created at `now`."""
    rows = []
    for i, point in enumerate(points, start):
        params = {**point, **{k: v for k, v in child["params"].items() if k not in point}}  # what differs first
        name = child_name(child["base_name"], point) if point else f"{child['base_name']}-{i}"
        resolved = {**child["resolved"], "kind": "job", "params": params, "name": name}
        resolved.pop("sweep", None)
        row = {k: child[k] for k in CHILD_FIELDS if k != "resolved"}
        row.update(id=new_id(), name=name, kind="job", parent=parent_id, resolved=resolved)
        row.update(request={**child["request"], "params": params}, created_at=now, queued_at=now, updated_at=now)
        row.update(status=Status.QUEUED.value, reason=Reason.SUBMITTED.value)
        row["message"] = f"waiting for dispatch in queue {row['queue']}"
        rows.append(row)
    return rows


def child_events(rows: list[dict[str, Any]], parent_id: str) -> list[list[dict[str, Any]]]:
    """Each child's first timeline event: queued, as a child of its sweep."""
    return [
        [
            {
                "status": "queued",
                "reason": Reason.SUBMITTED.value,
                "message": f"waiting for dispatch in queue {row['queue']}; child of sweep {parent_id}",
                "at": row["created_at"],
            }
        ]
        for row in rows
    ]
