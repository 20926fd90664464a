"""Metrics: ingest from a run, server-side compare, downsampling of a long curve.

1. ingest: a run logs N points with jupyter_gpuplat.tracking (crash-safe as in a real run:
   records copied into the mmap'd binary log, or with GPUPLAT_METRICS_FORMAT=csv one
   unbuffered write per call), while the control plane's indexer reads them into the store
   (SQLite). End to end = the run's process start → every point queryable in the store.
   Both formats are measured side by side; the earlier figure (before the binary log,
   issue 9) was 380,000 points/s end to end.
2. compare: 100 runs x 1,000 steps x 3 metrics in the store; the time of the server's
   compare (summaries, params, config differences, downsampled curves) and of encoding
   its JSON answer.
3. downsample: one 1,000,000-point series read from the store and cut to <= 2,000
   points keeping extremes (the metrics endpoint's work).

Peers (figures as given in the issue, measured on this machine class, not here):
MLflow ingested 5,800 points/s; MLflow took 5.2 s and Aim 2.6 s to load 100 runs x
1,000 steps for a comparison; MLflow read a 1M-point series raw in 48 s.

    python benchmarks/bench_metrics.py [--points 1000000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import bulk_insert, machine, run_row, table

from jupyter_gpuplat.core.config import load_config_text
from jupyter_gpuplat.engine.compare import compare, metrics_of
from jupyter_gpuplat.engine.engine import Engine
from jupyter_gpuplat.engine.metrics import MetricsIndexer
from jupyter_gpuplat.executors.artifacts import LocalArtifactReader
from jupyter_gpuplat.executors.local.executor import LocalExecutor
from jupyter_gpuplat.store import Store

EXAMPLE = Path(__file__).resolve().parents[1] / "jupyter_gpuplat" / "platform.example.yaml"

WRITER = """
import sys, time
from jupyter_gpuplat import tracking
n = int(sys.argv[1]) // 3
t0, c0 = time.perf_counter(), time.process_time()
for step in range(n):
    tracking.log_metrics(step=step, loss=1.0 / (step + 1), acc=step / n, lr=3e-4)
print(time.perf_counter() - t0, time.process_time() - c0)
"""


EARLIER_POINTS_PER_S = 380_000  # end to end, one write() per call (issue 9, item 11)


def ingest(root: Path, points: int, fmt: str) -> dict[str, float]:
    """The run writes while the control plane indexes, as in production (pipelined)."""
    store = Store(f"sqlite:///{root / 'ingest.db'}")
    rid = f"r-ingest{time.monotonic_ns()}"
    workdir = root / "art" / rid
    env = {**os.environ, "GPUPLAT_ARTIFACTS_DIR": str(workdir), "GPUPLAT_RUN_ID": rid, "GPUPLAT_METRICS_FORMAT": fmt}
    indexer = MetricsIndexer(store, LocalArtifactReader(str(root / "art")))
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(points)], env=env, stdout=subprocess.PIPE, text=True)
    added, index_busy = 0, 0.0
    while proc.poll() is None:
        t = time.perf_counter()
        added += indexer.catch_up(rid)
        index_busy += time.perf_counter() - t
        try:  # the engine indexes about once a second; more often here, and at once when the run ends
            proc.wait(timeout=0.2)
        except subprocess.TimeoutExpired:
            pass
    t1 = time.perf_counter()
    t = time.perf_counter()
    added += indexer.catch_up(rid)
    index_busy += time.perf_counter() - t
    t2 = time.perf_counter()
    write_s, write_cpu_s = map(float, proc.stdout.read().split()) if proc.stdout else (math.nan, math.nan)
    assert store.metrics.summaries([rid])[rid]["loss"]["count"] == points // 3
    store.close()
    return {
        "points": added,
        "write_s": write_s,
        "write_cpu_s": write_cpu_s,
        "index_s": index_busy,
        "tail_s": t2 - t1,
        "end_to_end_s": t2 - t0,
    }


def make_engine(root: Path) -> Engine:
    store = Store(f"sqlite:///{root / 'compare.db'}")
    engine = Engine(store, LocalExecutor(gpus=0), artifacts_root=str(root / "art"))
    engine.apply_config(load_config_text(EXAMPLE.read_text()), source="bench", by="bench")
    return engine


def populate_compare(engine: Engine, runs: int, steps: int) -> list[str]:
    import numpy as np

    now = time.time()
    ids = [f"r-cmp{i:04d}" for i in range(runs)]
    rows = [
        run_row(
            rid=rid, project="team-a", user="alice", queue="team-a-train", name=f"sweep-{i}",
            request={"project": "team-a", "command": "true", "params": {"lr": 10 ** -(i % 5), "seed": i}},
            resolved={"queue": "team-a-train", "command": ["python", "train.py"], "resources": {"gpu": 1},
                      "env": [{"name": "SEED", "value": str(i)}], "kind": "job"},
            provenance={}, gpu=1, cpu_milli=0, memory_bytes=0, at=now, status="succeeded",
        )
        for i, rid in enumerate(ids)
    ]  # fmt: skip
    bulk_insert(engine.store, rows)
    s = np.arange(steps, dtype=np.int64)
    for i, rid in enumerate(ids):
        series = {m: (s, np.sin(s / 50 + i + k) + k) for k, m in enumerate(("loss", "acc", "lr"))}
        engine.store.metrics.append(rid, series, params={"batch": 64}, metrics_offset=0, params_offset=0, log_offset=0)
    return ids


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--points", type=int, default=1_000_000, help="points one run logs in the ingest test")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    print(machine())
    with tempfile.TemporaryDirectory(prefix="gpuplat-bench-metrics-") as tmp:
        root = Path(tmp)
        rows = []
        for fmt, label in (("bin", "binary log (mmap)"), ("csv", "metrics.csv (write per call)")):
            ing = [ingest(root, args.points, fmt) for _ in range(args.rounds)]
            med = {k: statistics.median(r[k] for r in ing) for k in ing[0]}
            pts = med["points"]
            e2e = pts / med["end_to_end_s"]
            rows += [
                [f"{label}: tracking writes (in the run)", f"{med['write_s']:.2f}", f"{pts / med['write_s']:,.0f}",
                 "", ""],
                [f"{label}: the same, CPU time of the run", f"{med['write_cpu_s']:.2f}",
                 f"{pts / med['write_cpu_s']:,.0f}", "", ""],
                [f"{label}: indexer, file → store (busy)", f"{med['index_s']:.2f}", f"{pts / med['index_s']:,.0f}",
                 "", ""],
                [f"{label}: indexing left after the run", f"{med['tail_s']:.2f}", "", "", ""],
                [f"{label}: end to end", f"{med['end_to_end_s']:.2f}", f"{e2e:,.0f}",
                 "≥ 1,000,000/s" if fmt == "bin" else "", f"{e2e / EARLIER_POINTS_PER_S:.1f}×"],
            ]  # fmt: skip
        print("\ningest: one run logs", f"{int(pts):,}", "points (3 metrics per call);", machine())
        print(table(["stage", "seconds (median)", "points/s", "target", "vs earlier 380,000/s"], rows))

        engine = make_engine(root)
        ids = populate_compare(engine, 100, 1000)
        times, enc = [], []
        for _ in range(max(5, args.rounds * 3)):
            t0 = time.perf_counter()
            data = compare(engine, "alice", ids, ["loss", "acc", "lr"], 500)
            t1 = time.perf_counter()
            json.dumps(data)
            t2 = time.perf_counter()
            times.append(t1 - t0)
            enc.append(t2 - t1)
        c, e = statistics.median(times), statistics.median(enc)
        print("\ncompare: 100 runs x 1,000 steps x 3 metrics, curves at <= 500 points each")
        print(
            table(
                ["stage", "ms (median)", "target", "vs MLflow 5.2 s", "vs Aim 2.6 s"],
                [
                    ["compare (store reads + summaries + diffs + curves)", f"{c * 1e3:.1f}", "≤ 100", "", ""],
                    ["+ JSON encoding of the answer", f"{(c + e) * 1e3:.1f}", "", f"{5.2 / (c + e):,.0f}×",
                     f"{2.6 / (c + e):,.0f}×"],
                ],
            )
        )  # fmt: skip

        big = "r-big"
        row = run_row(rid=big, project="team-a", user="alice", queue="team-a-train", request={},
                      resolved={"queue": "team-a-train"}, provenance={}, gpu=0, cpu_milli=0, memory_bytes=0,
                      at=time.time(), status="succeeded")  # fmt: skip
        bulk_insert(engine.store, [row])
        import numpy as np

        n = 1_000_000
        s = np.arange(n, dtype=np.int64)
        engine.store.metrics.append(big, {"loss": (s, np.random.default_rng(0).normal(size=n))}, params={},
                                    metrics_offset=0, params_offset=0)  # fmt: skip
        ds = []
        for _ in range(max(5, args.rounds * 3)):
            t0 = time.perf_counter()
            out = metrics_of(engine, "alice", big, ["loss"], 2000)
            ds.append(time.perf_counter() - t0)
        d = statistics.median(ds)
        print("\ndownsample: one 1,000,000-point series → <= 2,000 points (read from the store + cut + to lists)")
        print(
            table(
                ["stage", "ms (median)", "points out", "target", "vs MLflow raw read 48 s"],
                [["metrics endpoint work", f"{d * 1e3:.1f}", len(out["loss"]["steps"]), "≤ 200", f"{48 / d:,.0f}×"]],
            )
        )
        engine.store.close()


if __name__ == "__main__":
    main()
