"""Each ended run's insight figures, written in the transaction that ends it (v10).

Insights recount every figure from the runs' times and timelines; for a run that has ended
those figures can no longer change, so the final transition stores them once (its three
clocks and its waits by reason) and a month of insights reads one row per run instead of
walking every event. The same pure function (`core.insights.run_facts`) computes them here
and in the recount of runs that are still live, and a test holds both answers equal.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import Column, Float, String, Table, Text, delete, insert, select
from sqlalchemy.engine import Connection

from ..core.insights import RunFacts, run_facts
from ..core.status import FINAL
from . import schema

run_facts_table = Table(
    "gpuplat_run_facts",
    schema.metadata,
    Column("run_id", String(32), primary_key=True),
    Column("queue_wait", Float, nullable=True),
    Column("start_wait", Float, nullable=True),
    Column("run_seconds", Float, nullable=True),
    Column("waits", Text, nullable=False),  # JSON [[reason, seconds], ...], in timeline order
)

_FINAL = [s.value for s in FINAL]
_CHUNK = 900  # SQLite's bound-parameter limit, with room
_TIMES = ("id", "queued_at", "dispatched_at", "started_at", "finished_at")


def encode(f: RunFacts) -> dict[str, Any]:
    qw, sw, rs, waits = f
    return {"queue_wait": qw, "start_wait": sw, "run_seconds": rs, "waits": json.dumps(waits)}


def decode(qw: float | None, sw: float | None, rs: float | None, waits: str) -> RunFacts:
    if waits == "[]":  # most runs never waited: no parse
        return qw, sw, rs, []
    return qw, sw, rs, [(str(r), float(s)) for r, s in json.loads(waits)]


def record(conn: Connection, run_ids: Iterable[str]) -> int:
    """(Re)write the facts of those runs that are final, from their row and timeline; how many."""
    ids = list(dict.fromkeys(run_ids))
    written = 0
    r, e, f = schema.runs.c, schema.events.c, run_facts_table.c
    for i in range(0, len(ids), _CHUNK):
        chunk = ids[i : i + _CHUNK]
        # By id alone: a status condition could lead the planner to the status index (every final run).
        rows = conn.execute(select(r.status, *(r[c] for c in _TIMES)).where(r.id.in_(chunk))).mappings()
        runs = [dict(m) for m in rows if m["status"] in _FINAL and m["finished_at"] is not None]
        if not runs:
            continue
        timeline: dict[str, list[dict[str, Any]]] = {run["id"]: [] for run in runs}
        events = select(e.run_id, e.status, e.reason, e.at).where(e.run_id.in_(list(timeline))).order_by(e.run_id, e.id)
        for rid, status, reason, at in conn.execute(events):
            timeline[rid].append({"status": status, "reason": reason, "at": at})
        conn.execute(delete(run_facts_table).where(f.run_id.in_(list(timeline))))
        conn.execute(
            insert(run_facts_table),
            [{"run_id": run["id"], **encode(run_facts(run, timeline[run["id"]]))} for run in runs],
        )
        written += len(runs)
    return written


def backfill(conn: Connection, batch: int = 5_000) -> int:
    """Facts for every final run that has none (the migration that adds the table; copies of old stores)."""
    r, f = schema.runs.c, run_facts_table.c
    missing = (
        select(r.id)
        .outerjoin(run_facts_table, f.run_id == r.id)
        .where(r.status.in_(_FINAL), r.finished_at.is_not(None), f.run_id.is_(None))
    )
    ids = [rid for (rid,) in conn.execute(missing)]
    return sum(record(conn, ids[i : i + batch]) for i in range(0, len(ids), batch))


def final_ids(changes: Sequence[tuple[str, dict[str, Any]]]) -> list[str]:
    """The runs among (run id, fields written) that these writes end."""
    return [rid for rid, fields in changes if fields.get("status") in _FINAL]
