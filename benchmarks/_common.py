"""Helpers shared by the benchmark scripts: statistics, tables, fast population of a store.

Not part of the product. The scripts put `benchmarks/` on sys.path by being run as
`python benchmarks/<name>.py`, so this module imports as `_common`.
"""

from __future__ import annotations

import math
import os
import platform
import statistics
import time
from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import insert

from jupyter_gpuplat.core.status import Reason, Status
from jupyter_gpuplat.store import schema
from jupyter_gpuplat.store.store import Store


# ---- statistics -------------------------------------------------------------------------
def pct(samples: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of a non-empty sample."""
    s = sorted(samples)
    k = max(0, min(len(s) - 1, math.ceil(q / 100 * len(s)) - 1))
    return s[k]


def summary(samples: Sequence[float]) -> dict[str, float]:
    return {
        "n": len(samples),
        "p50": statistics.median(samples),
        "p95": pct(samples, 95),
        "min": min(samples),
        "max": max(samples),
    }


def rounds_summary(rounds: Sequence[Sequence[float]]) -> dict[str, float]:
    """Median over rounds of each round's p50 and p95, plus the spread of the p50s.

    Other work may share the machine: one noisy round moves the spread, not the figure.
    """
    p50s = [statistics.median(r) for r in rounds]
    p95s = [pct(r, 95) for r in rounds]
    return {
        "n": sum(len(r) for r in rounds),
        "rounds": len(rounds),
        "p50": statistics.median(p50s),
        "p95": statistics.median(p95s),
        "p50_lo": min(p50s),
        "p50_hi": max(p50s),
    }


def ms(seconds: float) -> str:
    v = seconds * 1e3
    if v >= 100:
        return f"{v:.0f}"
    if v >= 10:
        return f"{v:.1f}"
    return f"{v:.3f}"


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    rows = [[str(c) for c in r] for r in rows]
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    line = "  ".join("-" * w for w in widths)
    out = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)), line]
    for r in rows:
        out.append("  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True))))
    return "\n".join(out)


def machine() -> str:
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return (
        f"{platform.python_implementation()} {platform.python_version()}, {os.cpu_count()} cores, "
        f"{platform.machine()}, load avg {load:.2f}, {time.strftime('%Y-%m-%d %H:%M')}"
    )


# ---- population -----------------------------------------------------------------------
def run_row(
    *,
    rid: str,
    project: str,
    user: str,
    queue: str,
    request: dict[str, Any],
    resolved: dict[str, Any],
    provenance: dict[str, str],
    gpu: int,
    cpu_milli: int,
    memory_bytes: int,
    at: float,
    status: str = Status.QUEUED.value,
    name: str | None = None,
) -> dict[str, Any]:
    """A runs-table row of the shape `Engine.submit` writes (then moved on to `status`)."""
    row: dict[str, Any] = {
        "id": rid,
        "project": project,
        "user": user,
        "name": name,
        "kind": resolved.get("kind", "job"),
        "queue": queue,
        "status": Status.QUEUED.value,
        "reason": Reason.SUBMITTED.value,
        "message": f"waiting for dispatch in queue {queue}",
        "request": request,
        "resolved": resolved,
        "provenance": provenance,
        "gpu": gpu,
        "cpu_milli": cpu_milli,
        "memory_bytes": memory_bytes,
        "created_at": at,
        "queued_at": at,
        "updated_at": at,
    }
    if status == Status.SUCCEEDED.value:
        row.update(
            status=status,
            reason=Reason.COMPLETED.value,
            message="exited with code 0",
            devices=[0] if gpu else [],
            handle={"executor": "local", "pid": 4242, "create_time": at + 0.2},
            exit_code=0,
            dispatched_at=at + 0.1,
            started_at=at + 0.2,
            finished_at=at + 60.0,
            updated_at=at + 60.0,
        )
    return row


def timeline(row: dict[str, Any]) -> list[dict[str, Any]]:
    """The timeline events a run in this row's status has, as the engine records them."""
    at, q = row["created_at"], row["queue"]
    evs = [
        {"status": "created", "reason": "Submitted", "message": f"submitted by {row['user']}", "at": at},
        {"status": "queued", "reason": "Submitted", "message": f"waiting for dispatch in queue {q}", "at": at},
    ]
    if row["status"] == Status.SUCCEEDED.value:
        evs += [
            {"status": "dispatched", "reason": "Admitted", "message": f"admitted by queue {q}", "at": at + 0.1},
            {"status": "running", "reason": "Started", "message": "started as pid 4242", "at": at + 0.2},
            {"status": "succeeded", "reason": "Completed", "message": "exited with code 0", "at": at + 60.0},
        ]
    return evs


def bulk_insert(store: Store, rows: Iterable[dict[str, Any]], *, with_events: bool = True, batch: int = 5000) -> int:
    """Insert runs (and their timeline events) in large transactions into the store's own tables.

    `Store.create_run` costs about a millisecond per run (one transaction each); this
    writes the same rows with executemany, so 100,000 runs take seconds, not minutes.
    Runs get seq in insertion order, as submissions would.
    """
    n = 0
    buf: list[dict[str, Any]] = []

    def flush() -> None:
        if not buf:
            return
        # Columns differ between queued and finished rows: insert each shape separately.
        shapes: dict[tuple[str, ...], list[dict[str, Any]]] = {}
        for r in buf:
            shapes.setdefault(tuple(sorted(r)), []).append(r)
        with store.engine.begin() as conn:
            for group in shapes.values():
                conn.execute(insert(schema.runs), group)
            if with_events:
                evs = [{"run_id": r["id"], "project": r["project"], **e} for r in buf for e in timeline(r)]
                conn.execute(insert(schema.events), evs)
        buf.clear()

    for row in rows:
        buf.append(row)
        n += 1
        if len(buf) >= batch:
            flush()
    flush()
    return n
