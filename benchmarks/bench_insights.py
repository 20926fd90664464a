"""Insights over a year of a busy platform: 1,000,000 runs in SQLite; one queue's 30 days <= 500 ms;
the HTML report of those 30 days <= 3 s. Prints the figures and their ratios to the targets.

    python benchmarks/bench_insights.py [--runs 1000000]

The store is filled in bulk (sqlite3 executemany), each run with the timeline the engine writes:
created, queued (Submitted), a wait reason if it waited, dispatched, running, its end; then the
facts the engine records as runs end (store/facts.py backfill, as the v10 migration does).
"""

from __future__ import annotations

import argparse
import json
import random
import sqlite3
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

from jupyter_gpuplat.cli import report
from jupyter_gpuplat.core.config import parse_config
from jupyter_gpuplat.engine.insights import compute
from jupyter_gpuplat.store import facts
from jupyter_gpuplat.store.store import Store

YEAR = 365 * 86400.0
QUEUES = [f"q{i}" for i in range(5)]
PROJECTS = [f"team-{i}" for i in range(10)]
WAITS = ["QueueConcurrency", "QueueQuota", "UserLimit", "NoCapacity"]


def fill(path: Path, n: int, now: float, seed: int = 1) -> None:
    Store(f"sqlite:///{path}").close()  # the schema, migrated to head
    rnd = random.Random(seed)
    db = sqlite3.connect(path)
    runs, events = [], []
    empty = json.dumps({})
    for i in range(n):
        created = now - YEAR + YEAR * i / n
        wait = rnd.choice((0.0, 0.0, rnd.expovariate(1 / 300)))
        disp, start = created + wait, created + wait + rnd.uniform(0, 5)
        end = start + rnd.expovariate(1 / 1800)
        failed = rnd.random() < 0.05
        status = "failed" if failed else "succeeded"
        rid, q, p = f"r{i:07d}", QUEUES[i % 5], PROJECTS[i % 10]
        runs.append(
            (
                rid,
                p,
                f"u{i % 50}",
                "job",
                q,
                status,
                "Error" if failed else "Completed",
                "",
                empty,
                empty,
                empty,
                1 + i % 4,
                0,
                0,
                created,
                created,
                disp,
                start,
                end,
                end,
            )
        )
        tl = [("created", "Submitted", created), ("queued", "Submitted", created)]
        if wait:
            tl.append(("queued", rnd.choice(WAITS), created))
        tl += [("dispatched", "Admitted", disp), ("running", "Started", start), (status, runs[-1][6], end)]
        events += [(rid, p, s, r, "", a) for s, r, a in tl]
        if len(runs) == 50_000:
            _flush(db, runs, events)
    _flush(db, runs, events)
    db.commit()
    db.close()
    # The facts the engine records as each run ends (store/facts.py), as the v10 migration fills them in.
    store = Store(f"sqlite:///{path}")
    with store.engine.begin() as conn:
        facts.backfill(conn)
        conn.exec_driver_sql("ANALYZE")
    store.close()


def _flush(db: sqlite3.Connection, runs: list, events: list) -> None:
    db.executemany(
        "INSERT INTO gpuplat_runs (id, project, user, kind, queue, status, reason, message, request, resolved,"
        " provenance, gpu, cpu_milli, memory_bytes, created_at, queued_at, dispatched_at, started_at, finished_at,"
        " updated_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
        runs,
    )
    db.executemany(
        "INSERT INTO gpuplat_events (run_id, project, status, reason, message, at) VALUES (?,?,?,?,?,?)", events
    )
    runs.clear()
    events.clear()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    now = 1_800_000_000.0
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "gpuplat.db"
        t = time.perf_counter()
        fill(path, args.runs, now)
        print(f"filled {args.runs:,} runs in {time.perf_counter() - t:.1f} s")
        store = Store(f"sqlite:///{path}")
        cfg = parse_config(
            {
                "admins": ["ops"],
                "queues": [{"name": q, "quota": {"gpu": 16}} for q in QUEUES],
                "projects": [{"name": p, "members": {"alice": "admin"}} for p in PROJECTS],
            }
        )
        state = SimpleNamespace(cfg=cfg, clock=lambda: now, store=store, assigns_devices=True, devices=[0] * 64)
        one, rep = [], []
        for _ in range(args.repeat):
            t = time.perf_counter()
            out = compute(state, "ops", queue="q0", since="30d", bucket="1d")  # type: ignore[arg-type]
            one.append(time.perf_counter() - t)
            t = time.perf_counter()
            whole = report.render_html(compute(state, "ops", since="30d", bucket="6h"))  # type: ignore[arg-type]
            rep.append(time.perf_counter() - t)
        q0 = out["queues"][0]
        print(
            f"q0, 30 days: {q0['runs']:,} runs, queue wait p50/p90/p99 {q0['queue_wait']['p50']:.1f}/"
            f"{q0['queue_wait']['p90']:.1f}/{q0['queue_wait']['p99']:.1f} s, goodput {q0['goodput']:.3f}"
        )
        best, worst = min(one), max(one)
        print(
            f"insights, one queue, 30 days: best {best * 1000:.0f} ms, worst {worst * 1000:.0f} ms"
            f" (ratio {worst / 0.5:.2f} to the 500 ms target)"
        )
        print(
            f"report, all queues, 30 days (insights + HTML, {len(whole) / 1e6:.1f} MB): worst {max(rep):.2f} s"
            f" (ratio {max(rep) / 3:.2f} to the 3 s target)"
        )
        store.close()


if __name__ == "__main__":
    main()
