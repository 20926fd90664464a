"""Compare of a 1,000-child sweep, server side (target ≤ 300 ms).

A real Engine over a real SQLite store (WAL, temp dir; LocalExecutor with no GPUs, nothing
runs). One grid sweep of N children (lr × batch × opt, opt categorical) is submitted through
`Engine.submit` (the parent and every child in one transaction), then every child's metrics
(loss and acc, S steps each) are written with the store's own `metrics.append`, as the
indexer does. Measured, median over rounds:

- read model: `engine.compare.compare_sweep`: the children (parent index), the objective's
  chunk summaries, the top 5's curves; what a `GET compare?sweep=ID` route would run.
- + JSON: the same and encoding its answer.
- today's REST path: what Compare(sweep_id) asks of the service now: `GET runs?parent=` in
  pages of 1,000 (store list), `GET compare` on the objective in chunks of 500
  (`engine.compare.compare`, curves at 4 points), then `GET compare` of the top 5 at 500
  points; in-process (no HTTP), and without `index_metrics` per run (a stat per child).
- engine best: `ReadModel.sweep_view`'s best child (what `GET runs/{id}` adds for a sweep).

    python benchmarks/bench_sweep_compare.py [--children 1000] [--steps 1000] [--rounds 7]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from _common import machine, ms, table

from jupyter_gpuplat.core.config import load_config_text
from jupyter_gpuplat.core.request import RunRequest
from jupyter_gpuplat.core.sweep_compare import Objective, ranked, top
from jupyter_gpuplat.engine.compare import compare, compare_sweep
from jupyter_gpuplat.engine.engine import Engine
from jupyter_gpuplat.executors.local.executor import LocalExecutor
from jupyter_gpuplat.store import Store

EXAMPLE = Path(__file__).resolve().parents[1] / "jupyter_gpuplat" / "platform.example.yaml"


def make_sweep(root: Path, children: int, steps: int) -> tuple[Engine, str]:
    store = Store(f"sqlite:///{root / 'sweep.db'}")
    engine = Engine(store, LocalExecutor(gpus=0), artifacts_root=str(root / "art"))
    engine.apply_config(load_config_text(EXAMPLE.read_text()), source="bench", by="bench")
    lrs = [float(x) for x in np.geomspace(1e-5, 1e-1, max(1, children // 20))]
    matrix = {
        "kind": "grid",
        "params": {
            "lr": {"values": lrs},
            "batch": {"values": [16, 32, 64, 128, 256]},
            "opt": {"values": ["adam", "sgd", "adamw", "lion"]},
        },
        "num_runs": children,
        "concurrency": 1,
        "objective": {"metric": "loss", "optimization": "minimize"},
    }  # fmt: skip
    body = {"project": "team-a", "command": ["python", "train.py"], "matrix": matrix}
    sweep = engine.submit("alice", RunRequest.model_validate(body))
    kids = store.list_runs(["team-a"], parent=sweep["id"], limit=children)
    s = np.arange(steps, dtype=np.int64)
    rng = np.random.default_rng(0)
    for i, c in enumerate(kids):
        base = rng.uniform(0.1, 2.0)
        series = {
            "loss": (s, base / (1 + s / 100) + rng.normal(0, 0.01, steps)),
            "acc": (s, 1 - 1 / (1 + s / (50 + i))),
        }
        store.metrics.append(c["id"], series, params={}, metrics_offset=0, params_offset=0)
    return engine, sweep["id"]


def rest_path(engine: Engine, sweep_id: str) -> dict[str, Any]:
    """The reads Compare(sweep_id) makes through today's endpoints, in-process."""
    ids: list[str] = []
    before = None
    while True:
        page = engine.store.list_runs(["team-a"], parent=sweep_id, before_seq=before, limit=1000)
        ids += [r["id"] for r in page]
        if len(page) < 1000:
            break
        before = page[-1]["seq"]
    summaries: dict[str, Any] = {}
    for i in range(0, len(ids), 500):
        part = compare(engine, "alice", ids[i : i + 500], ["loss"], 4)
        summaries.update({r["id"]: r["metrics"] for r in part["runs"]})
    objective = Objective("loss")
    values = {rid: objective.value(summaries[rid].get("loss")) for rid in ids}
    ranked(ids, values, objective)
    return compare(engine, "alice", top(ids, values, objective, 5), None, 500)


def timed(fn: Callable[[], Any], rounds: int) -> float:
    fn()  # warm: first reads fill SQLite's page cache
    out = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return statistics.median(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--children", type=int, default=1000)
    ap.add_argument("--steps", type=int, default=1000, help="steps each child logged (loss and acc)")
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    print(machine())
    with tempfile.TemporaryDirectory(prefix="gpuplat-bench-sweep-compare-") as tmp:
        t0 = time.perf_counter()
        engine, sweep_id = make_sweep(Path(tmp), args.children, args.steps)
        print(
            f"populated {args.children} children x {args.steps} steps x 2 metrics in {time.perf_counter() - t0:.1f} s"
        )
        out = compare_sweep(engine, "alice", sweep_id, None, 5, 500)
        assert len(out["children"]) == args.children and len(out["top"]) == 5
        row = engine.store.get_run(sweep_id)
        assert row is not None
        view = engine.reads.sweep_view(row)
        assert view is not None and view["best"]["id"] == out["best"], (view["best"], out["best"])
        model = timed(lambda: compare_sweep(engine, "alice", sweep_id, None, 5, 500), args.rounds)
        with_json = timed(lambda: json.dumps(compare_sweep(engine, "alice", sweep_id, None, 5, 500)), args.rounds)
        rest = timed(lambda: rest_path(engine, sweep_id), args.rounds)
        best = timed(lambda: engine.reads.sweep_view(row), args.rounds)
        size = len(json.dumps(out))
        print(f"\ncompare of a {args.children}-child sweep (median of {args.rounds}); answer {size / 1e3:.0f} kB")
        print(
            table(
                ["stage", "ms (median)", "target"],
                [
                    ["read model (compare_sweep)", ms(model), "≤ 300"],
                    ["read model + JSON encoding", ms(with_json), "≤ 300"],
                    ["today's REST path (runs?parent + compare x2 + top 5)", ms(rest), "≤ 300"],
                    ["engine's best child (sweep_view), for scale", ms(best), ""],
                ],
            )
        )
        print(machine())


if __name__ == "__main__":
    main()
