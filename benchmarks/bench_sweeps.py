"""Sweeps: creating a 10,000-child sweep, and the engine's reaction with 10,000 of its children pending.

What runs for real: `Engine` over a real SQLite store (WAL, temp dir) with the product's
admission and sweep code. What stands in: `FakeExecutor` at the executor boundary (it starts
nothing; a run's end is reported through the observer path, as the real executors do).

1. create: `Engine.submit` of a 100 × 100 grid (10,000 children, concurrency 8): the parent,
   every child and their first events in one transaction, the children pending. Server side,
   what `POST runs` costs beyond parsing; target ≤ 1 s. Baseline: 10,000 separate
   `Engine.submit` calls of one run each (what a client looping over the grid would cost).
2. reaction: with the sweep's 8 children running and 9,992 pending, a running child finishes →
   the next child is dispatched (the finish recorded, one cycle, the hand-off to the executor);
   p50 over many; target ≤ 1 ms p50 (as for ordinary runs in bench_engine.py).

Run: python benchmarks/bench_sweeps.py [--children 10000] [--reactions 300]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _common import machine, ms, summary  # noqa: E402

from jupyter_gpuplat.core.request import RunRequest  # noqa: E402
from jupyter_gpuplat.executors.fake import FakeExecutor, Script  # noqa: E402
from tests.fake_engine import Harness, config  # noqa: E402


def grid(n: int) -> dict[str, object]:
    side = max(1, int(n**0.5))
    return {
        "kind": "grid",
        "params": {"a": {"range": [0, side, 1]}, "b": {"range": [0, n // side, 1]}},
        "concurrency": 8,
    }


async def bench(children: int, reactions: int) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-sweeps-") as tmp:
        ex = FakeExecutor(gpus=1000, default=Script.never_ends())
        h = await Harness(Path(tmp), ex).start(config([{"name": "q"}, {"name": "loop", "concurrency": 8}]))
        body = {"project": "p", "queue": "q", "command": ["train"], "resources": {"gpu": 1}, "matrix": grid(children)}
        req = RunRequest.model_validate(body)
        t0 = time.perf_counter()
        parent = h.engine.submit("bob", req)
        created = time.perf_counter() - t0
        await h.settle()
        total = parent["resolved"]["sweep"]["total"]

        # baseline: the same number of runs, one submit each
        n_base = min(total, 2000)
        t0 = time.perf_counter()
        for i in range(n_base):
            one = {"project": "p", "queue": "loop", "command": ["train"], "resources": {"gpu": 1}, "params": {"i": i}}
            h.engine.submit("erin", RunRequest.model_validate(one))
        per_run = (time.perf_counter() - t0) / n_base
        await h.settle()

        sw = h.engine.sweeps.of(parent["id"])
        assert sw is not None

        def loop_running() -> list[str]:
            return [a.id for a in h.engine.active.values() if a.queue == "loop" and a.status.value == "running"]

        async def react(pick: object) -> list[float]:
            times = []
            for _ in range(reactions):
                running = pick()  # type: ignore[operator]
                t0 = time.perf_counter()
                ex.finish(running[0])
                ex.deliver()
                h.engine.run_cycle()
                times.append(time.perf_counter() - t0)
                await h.settle()
            return times

        times = await react(lambda: [c for c in sw.children if h.engine.active[c].status.value == "running"])
        plain = await react(loop_running)  # the same reaction for ordinary runs, same store and loop
        await h.close()
    r, b = summary(times), summary(plain)
    print(
        f"1. create a {total:,}-child sweep (Engine.submit, one transaction): {created:.3f} s  (target ≤ 1 s: "
        f"{'met' if created <= 1 else 'MISSED'})"
    )
    print(
        f"   baseline, one submit per run: {ms(per_run)} ms each → {per_run * total:.1f} s for {total:,} "
        f"({per_run * total / created:.0f}x the sweep)"
    )
    print(
        f"2. reaction, {total - 8:,} children pending: finish → next child dispatched  p50 {ms(r['p50'])} ms  "
        f"p95 {ms(r['p95'])} ms  n={r['n']}  (target ≤ 1 ms p50: {'met' if r['p50'] <= 0.001 else 'MISSED'})"
    )
    print(
        f"   the same for ordinary runs ({n_base:,} pending, same store): p50 {ms(b['p50'])} ms  "
        f"p95 {ms(b['p95'])} ms  (sweep / ordinary {r['p50'] / b['p50']:.2f}x)"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--children", type=int, default=10_000)
    ap.add_argument("--reactions", type=int, default=300)
    args = ap.parse_args()
    print(machine())
    asyncio.run(bench(args.children, args.reactions))


if __name__ == "__main__":
    main()
