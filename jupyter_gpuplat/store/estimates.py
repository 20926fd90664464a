"""Start estimates: the history they are predicted from, and each run's first estimate, kept for calibration (v12).

A run's first known estimate (what its owner saw at submit) is written once; insights compare it
with when the run was dispatched (`calibration_rows`), so how often the platform's estimates were
right is a recount from records, not a figure kept in memory.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import Column, Float, String, Table, and_, insert, select
from sqlalchemy.engine import Engine

from ..core.status import FINAL
from . import schema

run_etas = Table(
    "gpuplat_run_etas",
    schema.metadata,
    Column("run_id", String(32), primary_key=True),
    Column("queue", String(63), nullable=False),
    Column("computed_at", Float, nullable=False),
    Column("p50_at", Float, nullable=False),
    Column("p90_at", Float, nullable=False),
)

_CHUNK = 900  # SQLite's bound-parameter limit, with room


def history(engine: Engine, limit: int) -> list[dict[str, Any]]:
    """The latest `limit` finished runs that were dispatched and not stopped by someone (sweeps' parents left
    out), oldest first."""
    r = schema.runs.c
    q = (
        select(
            r.id,
            r.user,
            r.parent,
            r.dispatched_at,
            r.finished_at,
            r.resolved["presets"].label("presets"),
            r.resolved["command"].label("command"),
        )
        .where(r.status.in_([s.value for s in FINAL]), r.finished_at.is_not(None), r.dispatched_at.is_not(None))
        .where(r.kind != "sweep", r.stop_requested_by.is_(None))  # a person's stop is not how long it takes
        .order_by(r.finished_at.desc())
        .limit(limit)
    )
    with engine.connect() as conn:
        rows = [dict(m) for m in conn.execute(q).mappings()]
    rows.reverse()
    return rows


def recorded(engine: Engine, run_ids: Sequence[str]) -> set[str]:
    """Those of `run_ids` whose first estimate is recorded."""
    found: set[str] = set()
    e = run_etas.c
    with engine.connect() as conn:
        for i in range(0, len(run_ids), _CHUNK):
            found.update(conn.execute(select(e.run_id).where(e.run_id.in_(list(run_ids[i : i + _CHUNK])))).scalars())
    return found


def record_first(engine: Engine, rows: Iterable[tuple[str, str, float, float, float]]) -> None:
    """(run id, queue, computed_at, p50_at, p90_at) of runs whose first estimate this is; one already kept stays."""
    rows = list(rows)
    with engine.begin() as conn:
        known: set[str] = set()
        for i in range(0, len(rows), _CHUNK):
            ids = [r[0] for r in rows[i : i + _CHUNK]]
            known.update(conn.execute(select(run_etas.c.run_id).where(run_etas.c.run_id.in_(ids))).scalars())
        new = [
            {"run_id": rid, "queue": q, "computed_at": c, "p50_at": p50, "p90_at": p90}
            for rid, q, c, p50, p90 in rows
            if rid not in known
        ]
        if new:
            conn.execute(insert(run_etas), new)


def calibration_rows(
    engine: Engine, queues: Sequence[str], projects: Sequence[str], since: float, until: float
) -> list[dict[str, Any]]:
    """Runs of these queues and projects dispatched in [since, until) that had an estimate: when each was
    submitted, estimated and dispatched, and its first estimate's p50 and p90."""
    r, e = schema.runs.c, run_etas.c
    q = (
        select(r.id, r.queue, r.queued_at, r.dispatched_at, e.computed_at, e.p50_at, e.p90_at)
        .select_from(schema.runs.join(run_etas, e.run_id == r.id))
        .where(r.queue.in_(list(queues)), r.project.in_(list(projects)))
        .where(and_(r.dispatched_at >= since, r.dispatched_at < until))
    )
    with engine.connect() as conn:
        return [dict(m) for m in conn.execute(q).mappings()]
