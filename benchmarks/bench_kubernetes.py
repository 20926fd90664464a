"""Kubernetes executor: API calls per run lifecycle, and engine + executor cost per observed event.

What runs for real: the `Engine` over a real SQLite `Store`, the `KubernetesExecutor` with
the official `kubernetes` client, over HTTP, against the project's Kubernetes API emulator
(`kube_emulator`: scheduler, Job controller, kubelet model) on
127.0.0.1. Nothing is mocked; the emulator stands in for the cluster.

1. API calls per run lifecycle. N runs (default 1,000) are submitted through
   `Engine.submit` and run to the end (`sh -c "echo hi"`, and a second time with a run
   that lasts 2 s). The emulator counts every request by verb and resource; the figure is
   (requests while the runs lived) / N, with the shared list+watch streams shown apart.
   Constant per run and independent of how long a run lasts = no polling.

2. Engine + executor cost per observed event with L live runs (default 100 and 1,000):
   L runs are started and held running. Then pod changes are fed, as the watch stream
   delivers them (a JSON line), through the executor's own path: `json.loads` →
   `ClusterCache.apply` → `KubernetesExecutor._process` (snapshot, `explain_run`, compare)
   → `Engine._observe` → `Store.transition` (SQLite commit) when the explanation changed.
   Two kinds: a change of explanation (CrashLoop restarts: a new timeline event each) and a
   change that explains the same (only the resourceVersion moves: nothing written).

Run: python benchmarks/bench_kubernetes.py [--runs 1000] [--live 100,1000] [--rounds 5] [--events 200]
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import math
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import machine, ms, rounds_summary, table
from kube_emulator import EmulatedCluster

from jupyter_gpuplat.core.config import PlatformConfig, parse_config
from jupyter_gpuplat.core.request import RunRequest
from jupyter_gpuplat.core.status import Status
from jupyter_gpuplat.engine.engine import Engine
from jupyter_gpuplat.executors.kubernetes.executor import KubernetesExecutor
from jupyter_gpuplat.store.store import Store

NAMESPACE = "gpuplat"
TARGET_EVENT_S = 0.001


def platform_config() -> PlatformConfig:
    return parse_config(
        {
            "admins": ["ops"],
            "queues": [{"name": "bench", "priority": 10, "concurrency": 100_000}],
            "projects": [{"name": "bench", "members": {"u": "member"}, "default_queue": "bench"}],
        }
    )


class TimedStore(Store):
    """The real store, noting the time spent in `transition` (the SQLite write of a timeline event)."""

    spent = 0.0

    def transition(self, *args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return super().transition(*args, **kwargs)
        finally:
            self.spent += time.perf_counter() - t0


class Setup:
    """An emulated cluster with enough GPUs, an engine with its store, the Kubernetes executor."""

    def __init__(self, gpus: int, tmp: Path) -> None:
        self.cluster = EmulatedCluster(bookmark_seconds=5.0)
        self.cluster.add_namespace(NAMESPACE)
        for i in range(math.ceil(gpus / 8)):
            self.cluster.add_node(f"gpu-{i:04d}", gpus=8, cpu="256", memory="2Ti")
        self.cluster.start()
        kubeconfig = self.cluster.write_kubeconfig(tmp / "kubeconfig", NAMESPACE)
        self.executor = KubernetesExecutor(
            kubeconfig=str(kubeconfig),
            namespace=NAMESPACE,
            priority_classes={},
            artifacts_mount_path=str(tmp / "artifacts"),
            max_log_streams=256,
        )
        self.store = TimedStore(f"sqlite:///{tmp / 'gpuplat.db'}")
        self.engine = Engine(self.store, self.executor, artifacts_root=str(tmp / "artifacts"))

    async def start(self) -> None:
        await self.engine.start(platform_config(), source="bench", by="bench")
        cache = self.executor._cache
        assert cache is not None
        await asyncio.to_thread(cache.wait_synced, 30)
        kinds = ("jobs", "pods", "events", "nodes")
        await self.wait(lambda: all(self.cluster.requests[("watch", k)] for k in kinds), 30, "the watches")

    def settled(self, ids: list[str]) -> bool:
        """Every run ended and its Job is deleted (the executor cleans up after the end is recorded)."""
        return not any(i in self.engine.active for i in ids) and not self.cluster.jobs_in(NAMESPACE)

    def submit(self, n: int, command: str) -> list[str]:
        return [
            self.engine.submit("u", RunRequest(project="bench", command=command, resources={"gpu": 1}))["id"]
            for _ in range(n)
        ]

    async def wait(self, cond: Any, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not cond():
            if time.monotonic() > deadline:
                raise SystemExit(f"timed out after {timeout:.0f}s waiting for {what}")
            await asyncio.sleep(0.05)  # polling a condition with a deadline

    async def close(self) -> None:
        await self.engine.close()
        self.store.close()
        self.cluster.stop()


# ---- 1. API calls per run lifecycle ---------------------------------------------------------
async def lifecycle(n: int, command: str, tmp: Path) -> dict[str, Any]:
    s = Setup(n, tmp)
    try:
        await s.start()
        before = Counter(s.cluster.requests)
        t0 = time.monotonic()
        ids = s.submit(n, command)
        await s.wait(lambda: s.settled(ids), 600, f"{n} runs to end and be cleaned up")
        wall = time.monotonic() - t0
        calls = Counter(s.cluster.requests)
        calls.subtract(before)
        done = [s.store.get_run(i) for i in ids]
        ok = sum(1 for r in done if r and r["status"] == Status.SUCCEEDED.value)
        logs = sum(1 for i in ids if (tmp / "artifacts" / i / "output.log").read_text().startswith("hi"))
        return {"calls": +calls, "wall": wall, "ok": ok, "logs": logs, "stats": s.executor.stats}
    finally:
        await s.close()


def report_lifecycle(results: list[tuple[int, str, dict[str, Any]]]) -> None:
    shared = {("list", r) for r in ("jobs", "pods", "events", "nodes")} | {
        ("watch", r) for r in ("jobs", "pods", "events", "nodes")
    }
    keys = sorted({k for _, _, r in results for k in r["calls"]} - shared)
    rows = []
    for n, label, r in results:
        calls: Counter[tuple[str, str]] = r["calls"]
        per_run = sum(calls[k] for k in keys) / n
        streams = sum(calls[k] for k in shared)
        rows.append(
            [f"{n} × {label}", *(f"{calls[k] / n:.2f}" for k in keys), f"{per_run:.2f}", str(streams),
             f"{r['ok']}/{n}", f"{r['logs']}/{n}", f"{r['wall']:.1f}"]
        )  # fmt: skip
    headers = ["runs", *(f"{v} {res}" for v, res in keys), "per run", "list+watch (all)", "succeeded", "logs", "wall s"]
    print(table(headers, rows))


# ---- 2. cost per observed event ---------------------------------------------------------------
def crash_variant(pod: dict[str, Any], restarts: int, rv: int) -> bytes:
    """The pod as a watch would deliver it after another CrashLoopBackOff restart."""
    p = copy.deepcopy(pod)
    p["metadata"]["resourceVersion"] = str(rv)
    cs = p["status"]["containerStatuses"][0]
    cs["restartCount"] = restarts
    cs["state"] = {"waiting": {"reason": "CrashLoopBackOff", "message": f"back-off {restarts}0s restarting"}}
    cs["lastState"] = {"terminated": {"exitCode": 1, "reason": "Error"}}
    return json.dumps({"type": "MODIFIED", "object": p}).encode()


def same_variant(pod: dict[str, Any], rv: int) -> bytes:
    p = dict(pod)
    p["metadata"] = {**pod["metadata"], "resourceVersion": str(rv)}
    return json.dumps({"type": "MODIFIED", "object": p}).encode()


async def per_event(live: int, rounds: int, events: int, tmp: Path) -> dict[str, Any]:
    s = Setup(live, tmp)
    try:
        await s.start()
        ids = s.submit(live, "echo up; gate hold")
        await s.wait(
            lambda: all(s.engine.active[i].status == Status.RUNNING for i in ids if i in s.engine.active),
            600,
            f"{live} runs to run",
        )
        cache = s.executor._cache
        assert cache is not None
        pods = {}
        for pod in list(cache.pods.values()):
            pods[pod["metadata"]["labels"]["gpuplat.io/run-id"]] = pod
        rv = 10**9
        out: dict[str, list[list[float]]] = {"changed": [], "same": [], "changed, outside SQLite": []}
        restarts: Counter[str] = Counter()
        for _ in range(rounds):
            for kind in ("changed", "same"):
                samples, outside = [], []
                for j in range(events):
                    rid = ids[(j * 7919) % live]
                    rv += 1
                    if kind == "changed":
                        restarts[rid] += 1
                        line = crash_variant(pods[rid], restarts[rid], rv)
                    else:
                        line = same_variant(pods[rid] if not restarts[rid] else json.loads(
                            crash_variant(pods[rid], restarts[rid], rv))["object"], rv)  # fmt: skip
                    in_store = s.store.spent
                    t0 = time.perf_counter()
                    ev = json.loads(line)
                    cache.apply("pods", ev["type"], ev["object"])
                    s.executor._process()
                    took = time.perf_counter() - t0
                    samples.append(took)
                    outside.append(took - (s.store.spent - in_store))
                out[kind].append(samples)
                if kind == "changed":
                    out["changed, outside SQLite"].append(outside)
                await asyncio.sleep(0)
        timeline = s.store.get_run(ids[0]) or {}
        return {"out": out, "events_recorded": len(timeline.get("timeline") or [])}
    finally:
        s.cluster.open_gate("hold")
        await s.close()


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", default="100,1000", help="runs per lifecycle measurement (comma list)")
    ap.add_argument("--live", default="100,1000", help="live runs for the per-event cost (comma list)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--events", type=int, default=200, help="events per round and kind")
    ap.add_argument("--only", default="calls,events")
    args = ap.parse_args()
    print(f"# bench_kubernetes.py — {machine()}\n")
    only = set(args.only.split(","))
    if "calls" in only:
        results = []
        for n in (int(x) for x in args.runs.split(",")):
            for label, command in (("echo hi", "echo hi"), ("2 s run", "echo hi; sleep 2")):
                tmp = Path(tempfile.mkdtemp(prefix="bench-k8s-"))
                try:
                    results.append((n, label, await lifecycle(n, command, tmp)))
                finally:
                    shutil.rmtree(tmp, ignore_errors=True)
        print("## Kubernetes API calls per run lifecycle (submit → succeeded, logs archived, Job deleted)\n")
        report_lifecycle(results)
        print()
    if "events" in only:
        rows = []
        for live in (int(x) for x in args.live.split(",")):
            tmp = Path(tempfile.mkdtemp(prefix="bench-k8s-"))
            try:
                r = await per_event(live, args.rounds, args.events, tmp)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
            for kind in ("changed", "changed, outside SQLite", "same"):
                summ = rounds_summary(r["out"][kind])
                rows.append([f"{live} live, {kind}", ms(summ["p50"]), ms(summ["p95"]),
                             f"{ms(summ['p50_lo'])}–{ms(summ['p50_hi'])}", summ["n"]])  # fmt: skip
        print("## Engine + executor cost per observed pod event (ms)\n")
        print(table(["live runs, event", "p50", "p95", "p50 spread", "n"], rows))
        print(f"\ntarget: ≤ {TARGET_EVENT_S * 1e3:.0f} ms per event with 1,000 live runs")


if __name__ == "__main__":
    asyncio.run(main())
