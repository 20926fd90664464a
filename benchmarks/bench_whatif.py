"""What-if replay of 100,000 runs (target ≤ 5 s): core.whatif.replay + summarize, the record already read.

A busy week on 128 GPUs: five queues (priorities, concurrency, GPU quota, per-user limits, one
strict FIFO), 40 users, arrivals in bursts of 1 to 40, 1 to 4 GPUs, runs of 30 s to 11 min
(about 0.8 of the GPUs offered on average, far more during bursts).
Replayed under the recorded settings and under raised concurrency; prints wall and CPU seconds
(on a shared, loaded machine the CPU seconds are the replay's own cost) and the ratio (wall / target).

    python benchmarks/bench_whatif.py [--runs 100000] [--core-only]
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from pathlib import Path

from sqlalchemy import insert

from jupyter_gpuplat.core.admission import QueueLimits
from jupyter_gpuplat.core.config import parse_config
from jupyter_gpuplat.core.resources import Quota, Resources
from jupyter_gpuplat.core.whatif import RecordedRun, replay, summarize
from jupyter_gpuplat.engine.engine import Engine
from jupyter_gpuplat.engine.whatif import recorded_runs, what_if
from jupyter_gpuplat.executors.fake import FakeClock, FakeExecutor
from jupyter_gpuplat.store import Store, schema

TARGET_S = 5.0
GPUS = 128


def history(n: int, seed: int = 13) -> tuple[list[RecordedRun], list[QueueLimits], float, float]:
    rnd = random.Random(seed)
    limits = [
        QueueLimits("interactive", priority=100, concurrency=32, quota=Quota(gpu=32), max_per_user=1),
        QueueLimits("team-a-train", priority=10, concurrency=16, quota=Quota(gpu=40)),
        QueueLimits("team-b-train", priority=10, concurrency=16, quota=Quota(gpu=32), ordering="strict_fifo"),
        QueueLimits("batch", priority=0, concurrency=None, quota=Quota(gpu=64), max_per_user=3),
        QueueLimits("scavenger", priority=-10),
    ]
    since = 1_700_000_000.0
    span = 7 * 86400
    runs = []
    t = since
    burst = 0
    for i in range(n):
        if burst == 0:  # submissions come in bursts (a script, a sweep): 1 to 40 runs at one instant
            burst = rnd.randint(1, 40)
            t += rnd.expovariate(n / 20.5 / span)
        burst -= 1
        q = rnd.choices(limits, weights=[3, 4, 3, 5, 1])[0]
        gpu = rnd.choice([1, 1, 1, 2, 2, 4])
        hold = rnd.uniform(30, 650)  # ~0.8 of the GPUs offered on average, bursts above
        runs.append(
            RecordedRun(
                f"r-{i:06d}", i + 1, q.name, f"p{i % 7}", f"u{rnd.randrange(40)}",
                Resources(gpu, 4000 * gpu, 16 << 30), t, t, t + hold,
            )
        )  # fmt: skip
    return runs, limits, since, t + 1


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=100_000)
    ap.add_argument("--core-only", action="store_true", help="skip the engine call on a SQLite record")
    args = ap.parse_args()
    runs, limits, since, until = history(args.runs)
    by_queue: dict[str, list[RecordedRun]] = {}
    for r in runs:
        by_queue.setdefault(r.queue, []).append(r)
    raised = [
        QueueLimits(q.name, q.priority, (q.concurrency or 0) * 2 or None, q.quota, q.max_per_user, q.ordering)
        for q in limits
    ]
    print(f"what-if replay: {len(runs):,} runs, {len(limits)} queues, {GPUS} GPUs, one week")
    print(
        f"{'settings':22}{'seconds':>10}{'cpu s':>10}{'target s':>10}{'ratio':>8}{'cycles':>10}  busiest queue p90 wait"
    )
    for label, lims in (("as recorded", limits), ("concurrency x2", raised)):
        t0, c0 = time.perf_counter(), time.process_time()
        rp = replay(runs, lims, devices=GPUS, since=since, until=until)
        figures = summarize(rp, by_queue, {q.name: q.quota.gpu or GPUS for q in lims})
        dt, cpu = time.perf_counter() - t0, time.process_time() - c0
        p90 = figures["team-a-train"]["predicted"]["wait_p90_seconds"]  # type: ignore[index]
        print(f"{label:22}{dt:>10.2f}{cpu:>10.2f}{TARGET_S:>10.1f}{dt / TARGET_S:>8.2f}{rp.cycles:>10,}  {p90:.0f} s")
    if not args.core_only:
        through_the_engine(runs, limits, since, until)


def through_the_engine(runs: list[RecordedRun], limits: list[QueueLimits], since: float, until: float) -> None:
    """POST whatif's engine call on a SQLite record of the same runs: the read, the replay, the answer."""
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(f"sqlite:///{Path(tmp) / 'gpuplat.db'}")
        clock = FakeClock(until)
        engine = Engine(store, FakeExecutor(gpus=GPUS, clock=clock), artifacts_root=tmp, clock=clock)
        queues = [
            {"name": q.name, "priority": q.priority, "concurrency": q.concurrency, "quota": {"gpu": q.quota.gpu},
             "max_per_user": q.max_per_user, "ordering": q.ordering}
            for q in limits
        ]  # fmt: skip
        projects = [{"name": f"p{i}", "members": {"u0": "member"}} for i in range(7)]
        engine.apply_config(
            parse_config({"admins": ["ops"], "queues": queues, "projects": projects}), source="b", by="b"
        )
        rows = [
            {"id": r.id, "project": r.project, "user": r.user, "kind": "job", "queue": r.queue, "status": "succeeded",
             "request": {}, "resolved": {}, "provenance": {}, "gpu": r.request.gpu, "cpu_milli": r.request.cpu_milli,
             "memory_bytes": r.request.memory_bytes, "created_at": r.queued_at, "queued_at": r.queued_at,
             "dispatched_at": r.dispatched_at, "started_at": r.dispatched_at, "finished_at": r.finished_at,
             "updated_at": r.finished_at}
            for r in runs
        ]  # fmt: skip
        with store.engine.begin() as conn:
            conn.execute(insert(schema.runs), rows)
        for user, label in (("ops", "admin, all queues"), ("u0", "member, 1/7 of the runs")):
            t0, c0 = time.perf_counter(), time.process_time()
            out = what_if(engine, user, {"team-a-train": {"concurrency": 32}}, since, until, max_run_rows=1000)
            dt, cpu = time.perf_counter() - t0, time.process_time() - c0
            print(
                f"engine what_if ({label}): {dt:.2f} s wall, {cpu:.2f} s CPU ({dt / TARGET_S:.2f} of the target), "
                f"{out['cycles']:,} cycles"
            )
        t0 = time.perf_counter()
        n = len(recorded_runs(engine, since, until))
        print(f"  of which reading the record ({n:,} runs from SQLite): {time.perf_counter() - t0:.2f} s")
        store.close()


if __name__ == "__main__":
    main()
