"""Reads for insights, and the append-only record of refusals at submit (v9).

A refused submit creates no run, so without this table refusals would leave no trace.
Insights read the runs' times, the facts recorded when each ended (store/facts.py) and the
timelines of those still live: an index on (queue, created_at) keeps one queue's month a range scan.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Column, Float, Index, String, Table, Text, and_, func, select
from sqlalchemy.engine import Engine
from sqlalchemy.exc import SQLAlchemyError

from ..core.insights import RunFacts
from . import facts, schema
from .schema import Id64

refusals = Table(
    "gpuplat_refusals",
    schema.metadata,
    Column("id", Id64, primary_key=True, autoincrement=True),
    Column("at", Float, nullable=False),
    Column("project", String(63), nullable=False),
    Column("user", String(128), nullable=False),
    Column("queue", String(63), nullable=False, default=""),
    Column("code", String(64), nullable=False),
    Column("message", Text, nullable=False, default=""),
    Index("ix_refusals_at", "at"),
)

log = logging.getLogger("jupyter_gpuplat.insights")

_RUN_COLS = (
    "id",
    "project",
    "user",
    "queue",
    "status",
    "reason",
    "gpu",
    "created_at",
    "queued_at",
    "dispatched_at",
    "started_at",
    "finished_at",
    "flavor",
    "gpu_usage",
)


def record_refusal(engine: Engine, at: float, project: str, user: str, queue: str, error: Exception) -> None:
    """Append one refused submit: the rule is the error's code. Best effort: the refusal is answered anyway."""
    row = {"at": at, "project": project[:63], "user": user[:128], "queue": queue[:63]}
    row |= {"code": str(getattr(error, "code", type(error).__name__))[:64], "message": str(error)[:2000]}
    try:
        with engine.begin() as conn:
            conn.execute(refusals.insert().values(**row))
    except SQLAlchemyError:  # an unreachable store must not turn a 4xx into a 500
        log.warning("could not record a refused submit of project %s", project, exc_info=True)


def arrived_or_holding(engine: Engine, since: float, until: float, limit: int) -> list[Any]:
    """Runs (sweeps' parents left out) that arrived in [since, until), and those dispatched before
    `since` still holding at it, in submit order; at most `limit` + 1 (the caller says when it is too many)."""
    r = schema.runs.c
    cols = select(
        r.id, r.seq, r.queue, r.project, r.user, r.gpu, r.cpu_milli, r.memory_bytes, r.parent,
        r.created_at, r.queued_at, r.dispatched_at, r.finished_at, r.flavor,
        # The flavor it asked for: one JSON path, not the whole resolved spec of every run.
        r.resolved[("placement", "gpu_type")].as_string().label("gpu_type"),
    ).where(r.kind != "sweep")  # fmt: skip
    # Three index ranges (queued_at; finished_at), not one OR that scans every run ever recorded.
    parts = [
        and_(r.queued_at >= since, r.queued_at < until),
        and_(r.finished_at > since, r.dispatched_at < since),
        and_(r.finished_at.is_(None), r.dispatched_at < since),
    ]
    found: dict[str, Any] = {}
    with engine.connect() as conn:
        for cond in parts:
            for x in conn.execute(cols.where(cond).limit(limit + 1)):
                found.setdefault(x.id, x)
            if len(found) > limit:
                break
    return sorted(found.values(), key=lambda x: x.seq)


def window_runs(
    engine: Engine, queues: Sequence[str], projects: Sequence[str], since: float, until: float
) -> tuple[list[dict[str, Any]], dict[str, RunFacts]]:
    """Runs of these queues and projects alive at some point in [since, until), sweeps' parents left out,
    and the recorded facts of those that have ended (`store.facts`)."""
    r, f = schema.runs.c, facts.run_facts_table.c
    cols = [r[c] for c in _RUN_COLS] + [f.queue_wait, f.start_wait, f.run_seconds, f.waits]
    base = [r.queue.in_(list(queues)), r.project.in_(list(projects)), r.kind != "sweep"]
    # Three index ranges, not one OR: created in the range; created before it and ended in or after
    # it; created before it and not ended.
    parts = [
        and_(r.created_at >= since, r.created_at < until),
        and_(r.finished_at >= since, r.created_at < since),
        and_(r.finished_at.is_(None), r.created_at < since),
    ]
    runs: list[dict[str, Any]] = []
    known: dict[str, RunFacts] = {}
    n = len(_RUN_COLS)
    joined = schema.runs.outerjoin(facts.run_facts_table, f.run_id == r.id)
    with engine.connect() as conn:
        for cond in parts:
            for row in conn.execute(select(*cols).select_from(joined).where(*base, cond)):
                runs.append(dict(zip(_RUN_COLS, row[:n], strict=True)))
                if row[n + 3] is not None:
                    known[row[0]] = facts.decode(*row[n:])
    return runs, known


def timelines(engine: Engine, run_ids: Sequence[str]) -> dict[str, list[dict[str, Any]]]:
    """Each run's events (status, reason, at) in order."""
    e = schema.events.c
    out: dict[str, list[dict[str, Any]]] = {rid: [] for rid in run_ids}
    ids = list(run_ids)
    with engine.connect() as conn:
        for i in range(0, len(ids), 900):  # SQLite's bound-parameter limit
            chunk = ids[i : i + 900]
            rows = conn.execute(
                select(e.run_id, e.status, e.reason, e.at).where(e.run_id.in_(chunk)).order_by(e.run_id, e.id)
            )
            for rid, status, reason, at in rows.all():
                out[rid].append({"status": status, "reason": reason, "at": at})
    return out


def refusal_counts(
    engine: Engine, queues: Sequence[str] | None, projects: Sequence[str], since: float, until: float
) -> list[dict[str, Any]]:
    c = refusals.c
    cond = [c.project.in_(list(projects)), c.at >= since, c.at < until]
    if queues is not None:
        cond.append(c.queue.in_(list(queues)))
    q = select(c.code, func.count()).where(and_(*cond)).group_by(c.code).order_by(func.count().desc(), c.code)
    with engine.connect() as conn:
        return [{"rule": code, "count": int(n)} for code, n in conn.execute(q)]
