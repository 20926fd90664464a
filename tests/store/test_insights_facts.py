"""The facts recorded as runs end (store/facts.py) give the same insights as a full recount.

Random histories are written through the Store's own transitions (one at a time and batched, on
SQLite and PostgreSQL): queue waits by several reasons, executor waits, re-waits after a start,
runs still live at `now`, runs ended before or after the range. The answer read with the facts
must equal the one recounted from every run's timeline, figure for figure.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import delete, func, select

from jupyter_gpuplat.core.insights import insights, run_facts
from jupyter_gpuplat.store import Store, facts, schema
from jupyter_gpuplat.store.insights import timelines, window_runs

T0 = 1_700_000_000.0
QUEUES = ["a", "b"]
PROJECTS = ["p", "q"]
HOLDS = ["QueueConcurrency", "QueueQuota", "UserLimit", "NoCapacity", "InsufficientGPU", "UntoleratedTaint"]


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    url = f"sqlite:///{tmp_path / 'gpuplat.db'}" if request.param == "sqlite" else request.getfixturevalue("pg_db_url")
    s = Store(str(url))
    yield s
    s.close()


def _row(i: int, rnd: random.Random, at: float) -> dict[str, Any]:
    q, p = rnd.choice(QUEUES), rnd.choice(PROJECTS)
    return {
        "id": f"r{i:05d}",
        "project": p,
        "user": f"u{i % 3}",
        "name": None,
        "kind": "job",
        "queue": q,
        "status": "queued",
        "reason": "Submitted",
        "message": "",
        "request": {},
        "resolved": {},
        "provenance": {},
        "gpu": rnd.randint(0, 4),
        "cpu_milli": 0,
        "memory_bytes": 0,
        "created_at": at,
        "queued_at": at,
        "updated_at": at,
    }


def _ev(status: str, reason: str, at: float) -> dict[str, Any]:
    return {"status": status, "reason": reason, "message": "", "at": at}


def _history(store: Store, n: int, seed: int) -> float:
    """`n` runs written as the engine writes them; returns `now` (some runs are still live at it)."""
    rnd = random.Random(seed)
    now = T0 + 10_000
    batch: list[tuple[str, str, dict[str, Any], dict[str, Any]]] = []
    for i in range(n):
        at = T0 + rnd.uniform(-2_000, 9_000)
        row = _row(i, rnd, at)
        store.create_run(row, [_ev("created", "Submitted", at), _ev("queued", "Submitted", at)])
        rid, p, t = row["id"], row["project"], at
        steps: list[tuple[dict[str, Any], dict[str, Any]]] = []
        if rnd.random() < 0.6:  # waits in the queue, perhaps for two reasons one after the other
            for _ in range(rnd.randint(1, 2)):
                t += rnd.uniform(0, 300)
                steps.append(({"reason": rnd.choice(HOLDS[:4])}, _ev("queued", rnd.choice(HOLDS[:4]), t)))
        t += rnd.uniform(0, 200)
        steps.append(({"status": "dispatched", "dispatched_at": t}, _ev("dispatched", "Admitted", t)))
        if rnd.random() < 0.3:  # the executor holds it before it starts
            t += rnd.uniform(0, 100)
            steps.append(({"reason": HOLDS[4]}, _ev("dispatched", rnd.choice(HOLDS[4:]), t)))
        t += rnd.uniform(0, 60)
        steps.append(({"status": "running", "started_at": t}, _ev("running", "Started", t)))
        if rnd.random() < 0.25:  # preempted: a second start-wait episode, then running again
            t += rnd.uniform(10, 400)
            steps.append(({}, _ev("running", "InsufficientGPU", t)))
            t += rnd.uniform(10, 400)
            steps.append(({}, _ev("running", "Started", t)))
        end = t + rnd.expovariate(1 / 900)
        final = rnd.choice(["succeeded", "failed", "stopped"])
        steps.append(({"status": final, "finished_at": end, "reason": "Done"}, _ev(final, "Done", end)))
        steps = [(f, e) for f, e in steps if e["at"] <= now]  # what had happened by now
        for fields, e in steps:
            if i % 2:  # half through single transitions, half through the dispatcher's batches
                store.transition(rid, p, fields, e)
            else:
                batch.append((rid, p, fields, e))
        if len(batch) > 40:
            store.transition_many(batch)
            batch.clear()
    store.transition_many(batch)
    return now


def _answer(store: Store, now: float, since: float, until: float, *, with_facts: bool) -> dict[str, Any]:
    runs, known = window_runs(store.engine, QUEUES, PROJECTS, since, until)
    if not with_facts:
        known = {}
    tls = timelines(store.engine, [r["id"] for r in runs if r["id"] not in known])
    quota = {"a": 8, "b": None}
    return insights(
        runs, tls, since=since, until=until, bucket=1800, now=now, quota_gpu=quota, machine_gpus=8, facts=known
    )


@pytest.mark.parametrize("seed", [1, 2])
def test_recorded_facts_equal_a_full_recount(store: Store, seed: int) -> None:
    now = _history(store, 150, seed)
    with store.engine.connect() as conn:
        ended = conn.execute(
            select(func.count()).select_from(schema.runs).where(schema.runs.c.finished_at.is_not(None))
        ).scalar_one()
        recorded = conn.execute(select(func.count()).select_from(facts.run_facts_table)).scalar_one()
    assert recorded == ended > 0  # every ended run got its facts in the transaction that ended it
    for since, until in [(T0, T0 + 7_200), (T0 - 3_000, now), (T0 + 5_000, now + 5_000)]:
        fast = _answer(store, now, since, until, with_facts=True)
        assert fast == _answer(store, now, since, until, with_facts=False)
    runs, known = window_runs(store.engine, QUEUES, PROJECTS, T0 - 3_000, now)
    assert known and len(known) < len(runs)  # both paths were taken: facts and live recounts
    assert any(w for *_, w in known.values())  # and facts with waits by reason in them


def test_backfill_writes_the_same_facts(store: Store) -> None:
    _history(store, 60, 3)
    table = facts.run_facts_table
    with store.engine.begin() as conn:
        before = sorted(conn.execute(select(table)).all())
        conn.execute(delete(table))
        assert facts.backfill(conn) == len(before)
        assert sorted(conn.execute(select(table)).all()) == before


def test_run_facts_ignore_events_after_the_end() -> None:
    run = {"queued_at": 0.0, "dispatched_at": 10.0, "started_at": 12.0, "finished_at": 50.0}
    tl = [
        {"status": "queued", "reason": "QueueQuota", "at": 0.0},
        {"status": "dispatched", "reason": "Admitted", "at": 10.0},
        {"status": "running", "reason": "Started", "at": 12.0},
        {"status": "running", "reason": "InsufficientGPU", "at": 20.0},
        {"status": "running", "reason": "Started", "at": 30.0},
        {"status": "succeeded", "reason": "Completed", "at": 50.0},
        {"status": "succeeded", "reason": "NoCapacity", "at": 60.0},  # a late event changes nothing
    ]
    held = [("QueueQuota", 10.0), ("Admitted", 2.0), ("InsufficientGPU", 10.0)]  # Admitted: dispatched, not started
    assert run_facts(run, tl) == (10.0, 12.0, 28.0, held)
