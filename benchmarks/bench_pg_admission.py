"""Admission throughput on the PostgreSQL store of team mode: runs submitted and admitted per second, sustained.

What runs for real: `jupyter_gpuplat.engine.Engine` with the product's admission code over a
real `Store` on a real PostgreSQL (GPUPLAT_TEST_PG_URL, else a throw-away server that
`tests/pg.py` starts: initdb, fsync off as in the tests), fenced with a leader epoch as the
team-mode leader's store is (every commit checks the epoch). What stands in, at the executor
boundary: `FakeClusterExecutor` (the tests' scripted executor; it places work itself, like
Kubernetes, so thousands of runs can be admitted) — it starts nothing and its runs never end.

Workload (the acceptance's shape): 20 users in 5 projects submit across 5 queues (one per
project, priorities 0-40; no limits, so every run is admitted); each loop turn a burst of
`--burst` submissions arrives through `Engine.submit` (each one transaction: the run and its
`created`/`queued` events), then the loop turns: the merged admission cycle records every
`dispatched` of the turn in one transaction and hands each run to the executor (its `starting`
recorded in a transaction of its own). It runs for `--seconds`; the first second is warm-up.

Measured (sustained, over the window after warm-up):
* admissions/s: runs recorded as `dispatched` per second of wall time (submits included).
* submit → dispatched p50/p95: from `Engine.submit` entered to its `dispatched` event published.
* the same workload on PostgreSQL unfenced, and on embedded SQLite (WAL, temp dir): the baselines.
* the cost of fencing per write: `Store.transition` p50 on PostgreSQL, fenced minus unfenced.

Reference: Kueue's envtest scheduler benchmark admits ~100 Workloads/s (as the issue gives it).
Target: ≥ 2,000 admissions/s sustained on PostgreSQL.

Run: python benchmarks/bench_pg_admission.py [--seconds 8] [--burst 50] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
from sqlalchemy.engine import make_url

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests/pg.py starts PostgreSQL

from _common import bulk_insert, machine, ms, pct, run_row, table

from jupyter_gpuplat.core.config import dump_config, parse_config
from jupyter_gpuplat.core.policy import resolve
from jupyter_gpuplat.core.request import RunRequest
from jupyter_gpuplat.engine.engine import Engine
from jupyter_gpuplat.executors.fake import FakeClusterExecutor, FakeExecutor, Script
from jupyter_gpuplat.store.leader import LeaderLock
from jupyter_gpuplat.store.store import Store

PROJECTS = [f"team-{i}" for i in range(5)]
USERS = {p: [f"u{i * 4 + j}" for j in range(4)] for i, p in enumerate(PROJECTS)}  # 20 users


# ---- PostgreSQL -------------------------------------------------------------------------------
@contextlib.contextmanager
def postgres() -> Iterator[str]:
    """An admin URL of a live PostgreSQL: GPUPLAT_TEST_PG_URL, else a throw-away local server."""
    external = os.environ.get("GPUPLAT_TEST_PG_URL")
    if external:
        yield external
        return
    from tests.pg import LocalCluster

    cluster = LocalCluster()
    try:
        yield cluster.start()
    finally:
        cluster.stop()


@contextlib.contextmanager
def fresh_database(admin_url: str) -> Iterator[str]:
    """A new, empty database with the store's schema and the leader row (dropped afterwards)."""
    name = f"gpuplat_bench_{uuid.uuid4().hex[:12]}"
    admin = make_url(admin_url).set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = make_url(admin_url).set(drivername="postgresql+psycopg", database=name).render_as_string(False)
    try:
        prepare(url)
        yield url
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def prepare(url: str) -> None:
    """Migrate (revision 0008 makes the leader row)."""
    Store(url).close()


# ---- the workload -----------------------------------------------------------------------------
def platform_config() -> Any:
    return parse_config(
        {
            "admins": ["ops"],
            "queues": [{"name": f"q-{p}", "priority": 10 * i} for i, p in enumerate(PROJECTS)],
            "projects": [{"name": p, "members": {u: "member" for u in USERS[p]}} for p in PROJECTS],
        }
    )


def requests() -> list[tuple[str, RunRequest]]:
    out = []
    for p in PROJECTS:
        for u in USERS[p]:
            body = {"project": p, "queue": f"q-{p}", "command": ["python", "train.py"], "resources": {"gpu": 1}}
            out.append((u, RunRequest.model_validate(body)))
    return out


async def sustained(url: str, *, fenced: bool, seconds: float, burst: int) -> dict[str, Any]:
    """Submit bursts for `seconds`; admissions/s and submit→dispatched latencies after the first second."""
    tmp = tempfile.mkdtemp(prefix="gpuplat-bench-pgadm-")
    store = Store(url)
    lock = None
    if fenced:
        lock = LeaderLock(url, holder="bench")
        epoch = lock.try_acquire()
        assert epoch is not None
        store.fence(epoch)
    ex = FakeClusterExecutor(gpus=0, default=Script.never_ends())
    engine = Engine(store, ex, artifacts_root=os.path.join(tmp, "artifacts"), safety_tick_seconds=3600)
    submitted_at: dict[str, float] = {}
    dispatched_at: dict[str, float] = {}
    publish = engine.bus.publish

    def noting(ev: dict[str, Any]) -> None:  # when each dispatch is published (after its commit)
        if ev.get("status") == "dispatched":
            dispatched_at[ev["run_id"]] = time.perf_counter()
        publish(ev)

    engine.bus.publish = noting  # type: ignore[method-assign,assignment]
    try:
        await engine.start(platform_config(), source="bench", by="bench")
        reqs = requests()
        gc.collect()
        t_start = time.perf_counter()
        warm_until = t_start + 1.0
        end = t_start + seconds
        i = 0
        while time.perf_counter() < end:
            for _ in range(burst):
                user, req = reqs[i % len(reqs)]
                i += 1
                t = time.perf_counter()
                rid = engine.submit(user, req)["id"]
                submitted_at[rid] = t
            await asyncio.sleep(0)  # the loop turns: the merged cycle, the hand-offs
        await engine.settle()
        t_end = time.perf_counter()
    finally:
        await engine.close()
        store.close()
        if lock is not None:
            lock.release()
        shutil.rmtree(tmp, ignore_errors=True)
    in_window = [rid for rid, t in dispatched_at.items() if warm_until <= t <= end]
    lat = [dispatched_at[r] - submitted_at[r] for r in dispatched_at if submitted_at[r] >= warm_until]
    return {
        "submitted": len(submitted_at),
        "dispatched": len(dispatched_at),
        "rate": len(in_window) / (end - warm_until),
        "p50": statistics.median(lat) if lat else float("nan"),
        "p95": pct(lat, 95) if lat else float("nan"),
        "tail_s": t_end - end,
    }


def populate_backlog(store: Store, cfg: Any, n: int) -> None:
    """N pending runs over the 5 queues and 20 users (bulk-inserted rows of the shape `Engine.submit` writes)."""
    shapes = {}
    for p in PROJECTS:
        body = {"project": p, "queue": f"q-{p}", "command": ["python", "train.py"], "resources": {"cpu": "1"}}
        req = RunRequest.model_validate(body)
        res = resolve(cfg, USERS[p][0], req)
        res.raise_first()
        shapes[p] = (req.model_dump(mode="json", exclude_unset=True), res.resolved, res.provenance, res.resources)
    now = time.time() - 3600

    def rows() -> Iterator[dict[str, Any]]:
        for i in range(n):
            p = PROJECTS[i % len(PROJECTS)]
            request, resolved, provenance, r = shapes[p]
            yield run_row(
                rid=f"r-{i:010x}",
                project=p,
                user=USERS[p][(i // len(PROJECTS)) % 4],
                queue=f"q-{p}",
                request=request,
                resolved=resolved,
                provenance=provenance,
                gpu=r.gpu,
                cpu_milli=r.cpu_milli,
                memory_bytes=r.memory_bytes,
                at=now + i * 0.001,
            )

    bulk_insert(store, rows())


async def waves(url: str, *, fenced: bool, n: int, per_wave: int) -> dict[str, Any]:
    """Admission alone, sustained: a backlog of N; each wave frees `per_wave` slots per queue, one cycle admits them.

    The freeing is one config write (every queue's concurrency raised), as when runs end or an
    admin raises a limit; launches wait in the executor (FakeExecutor, slow start), so only the
    admission writes are timed: the cycle's one transaction of `dispatched` events per wave.
    """
    tmp = tempfile.mkdtemp(prefix="gpuplat-bench-pgwaves-")
    store = Store(url)
    lock = None
    cfg = parse_config(
        {
            **dump_config(platform_config()),
            "queues": [{"name": f"q-{p}", "priority": 10 * i, "concurrency": 1} for i, p in enumerate(PROJECTS)],
        }
    )
    populate_backlog(store, cfg, n)
    if fenced:
        lock = LeaderLock(url, holder="bench")
        epoch = lock.try_acquire()
        assert epoch is not None
        store.fence(epoch)
    ex = FakeExecutor(gpus=0, default=Script.slow())
    engine = Engine(store, ex, artifacts_root=os.path.join(tmp, "artifacts"), safety_tick_seconds=3600)
    try:
        await engine.start(cfg, source="bench", by="bench")
        await asyncio.sleep(0)
        if engine.dispatcher.cycle_handle is not None:
            engine.dispatcher.cycle_handle.cancel()
            engine.dispatcher.cycle_handle = None
        engine.run_cycle()
        await asyncio.sleep(0)
        admitted = 0
        conc = 1
        gc.collect()
        t0 = time.perf_counter()
        while admitted < n - len(PROJECTS):
            conc += per_wave

            def raise_limits(body: dict[str, Any], conc: int = conc) -> None:
                for q in body["queues"]:
                    q["concurrency"] = conc

            engine.admin.update_config("ops", raise_limits, source="bench")
            if engine.dispatcher.cycle_handle is not None:  # the merged cycle, run in line
                engine.dispatcher.cycle_handle.cancel()
                engine.dispatcher.cycle_handle = None
            got = len(engine.run_cycle())
            if not got:
                break
            admitted += got
            await asyncio.sleep(0)  # the launch tasks start and park in the executor
        elapsed = time.perf_counter() - t0
    finally:
        await engine.close()
        store.close()
        if lock is not None:
            lock.release()
        shutil.rmtree(tmp, ignore_errors=True)
    return {"admitted": admitted, "seconds": elapsed, "rate": admitted / elapsed, "waves": conc // per_wave}


def write_cost(url: str, *, n: int) -> tuple[float, float]:
    """p50 seconds of one `Store.transition` (a run's row and one event) unfenced and fenced, interleaved.

    Two stores on one database, one write each in turn, so that load on a shared machine hits
    both alike; the difference of the medians is the cost of the epoch check.
    """
    plain, fenced = Store(url), Store(url)
    lock = LeaderLock(url, holder="bench-writes")
    try:
        epoch = lock.try_acquire()
        assert epoch is not None
        fenced.fence(epoch)
        ev = {"status": "running", "reason": "Started", "message": "bench", "at": 1.0}
        samples: dict[Store, list[float]] = {plain: [], fenced: []}
        for _ in range(n):
            for store in (plain, fenced):
                t = time.perf_counter()
                store.transition("r-none", "p", {"updated_at": 1.0}, ev)
                samples[store].append(time.perf_counter() - t)
        return statistics.median(samples[plain]), statistics.median(samples[fenced])
    finally:
        plain.close()
        fenced.close()
        lock.release()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=8.0, help="how long each round submits")
    ap.add_argument("--burst", type=int, default=50, help="submissions per loop turn")
    ap.add_argument("--rounds", type=int, default=3, help="rounds per store (the median is reported)")
    ap.add_argument("--backlog", type=int, default=20_000, help="pending runs for the admission waves")
    ap.add_argument("--per-wave", type=int, default=200, help="slots freed per queue and wave (5 queues)")
    ap.add_argument("--writes", type=int, default=2000, help="transitions timed for the cost of fencing")
    args = ap.parse_args()
    print(f"bench_pg_admission: {machine()}\n")
    results: dict[str, list[dict[str, Any]]] = {}
    with postgres() as admin:
        for label, backend, fenced in (
            ("PostgreSQL, fenced (team-mode leader)", "pg", True),
            ("PostgreSQL, unfenced", "pg", False),
            ("SQLite WAL (embedded)", "sqlite", False),
        ):
            for _ in range(args.rounds):
                with contextlib.ExitStack() as stack:
                    if backend == "pg":
                        url = stack.enter_context(fresh_database(admin))
                    else:
                        d = tempfile.mkdtemp(prefix="gpuplat-bench-sqlite-")
                        stack.callback(shutil.rmtree, d, True)
                        url = f"sqlite:///{d}/gpuplat.db"
                    r = asyncio.run(sustained(url, fenced=fenced, seconds=args.seconds, burst=args.burst))
                results.setdefault(label, []).append(r)
                print(
                    f"  {label}: {r['rate']:,.0f} admissions/s, p50 {ms(r['p50'])} ms, "
                    f"{r['dispatched']:,}/{r['submitted']:,} dispatched",
                    flush=True,
                )
                gc.collect()
        wave_rows = []
        for label, backend, fenced in (
            ("PostgreSQL, fenced (team-mode leader)", "pg", True),
            ("PostgreSQL, unfenced", "pg", False),
            ("SQLite WAL (embedded)", "sqlite", False),
        ):
            rs = []
            for _ in range(args.rounds):
                with contextlib.ExitStack() as stack:
                    if backend == "pg":
                        url = stack.enter_context(fresh_database(admin))
                    else:
                        d = tempfile.mkdtemp(prefix="gpuplat-bench-sqlite-")
                        stack.callback(shutil.rmtree, d, True)
                        url = f"sqlite:///{d}/gpuplat.db"
                    w = asyncio.run(waves(url, fenced=fenced, n=args.backlog, per_wave=args.per_wave))
                rs.append(w)
                print(f"  waves, {label}: {w['rate']:,.0f} admissions/s ({w['admitted']:,} in {w['seconds']:.2f} s)")
                gc.collect()
            wave_rows.append((label, rs))
        with fresh_database(admin) as url:
            unfenced, fenced_cost = write_cost(url, n=args.writes)

    rows = []
    base = statistics.median(r["rate"] for r in results["SQLite WAL (embedded)"])
    for label, rs in results.items():
        rate = statistics.median(r["rate"] for r in rs)
        rows.append(
            [
                label,
                f"{rate:,.0f}",
                f"{min(r['rate'] for r in rs):,.0f}-{max(r['rate'] for r in rs):,.0f}",
                ms(statistics.median(r["p50"] for r in rs)),
                ms(statistics.median(r["p95"] for r in rs)),
                f"{rate / base:.2f}x",
            ]
        )
    print()
    print(
        table(
            ["store", "admissions/s (median)", "rounds' range", "submit→dispatched p50 ms", "p95 ms", "vs SQLite"],
            rows,
        )
    )
    print()
    wbase = statistics.median(r["rate"] for r in wave_rows[-1][1])
    print(
        table(
            ["admission alone (waves over a backlog)", "admissions/s (median)", "rounds' range", "vs SQLite"],
            [
                [
                    label,
                    f"{statistics.median(r['rate'] for r in rs):,.0f}",
                    f"{min(r['rate'] for r in rs):,.0f}-{max(r['rate'] for r in rs):,.0f}",
                    f"{statistics.median(r['rate'] for r in rs) / wbase:.2f}x",
                ]
                for label, rs in wave_rows
            ],
        )
    )
    print()
    print(
        table(
            ["one write (Store.transition) on PostgreSQL", "p50 ms"],
            [
                ["unfenced", ms(unfenced)],
                ["fenced (+ SELECT epoch ... FOR SHARE in the transaction)", ms(fenced_cost)],
                ["cost of fencing per write", ms(fenced_cost - unfenced)],
            ],
        )
    )
    print("\ntarget: >= 2,000 admissions/s sustained on PostgreSQL; Kueue's envtest benchmark: ~100 Workloads/s")


if __name__ == "__main__":
    main()
