"""Load: N concurrent clients, mixed reads and writes, as several users of two projects.

Everything is real: `python -m jupyter server` in a subprocess with the extension, the example
platform config, SQLite in a temp dir, the local executor (4 declared GPUs) starting real
processes. Loopback only. Each client is a thread with its own `requests.Session` (keep-alive),
acting as one user; users rotate over the clients:

    alice (admin of load-x), bob (member of load-x), carol (viewer of load-x: reads only),
    dave (admin of load-y), erin (member of load-y)

As the server's owner `ops` the script first creates two queues, `load-paused` (paused: what is
posted there waits, so explain has something to say) and `load-open` (no limits: each run is
dispatched and started as a process by the same server, `true`), and the two projects using
them. Then every client makes `--requests` calls (or stops at `--seconds`), each one drawn
(seeded) from this mix:

    POST runs → load-paused  10      GET runs?limit=50         20
    POST runs → load-open    10      GET runs/{id}             20
    GET runs/{id}/explain    15      GET runs/{id}/metrics     15
    GET queues               10

(viewers redraw a write as a read). Reported per kind: count, p50/p95/p99/max latency
(client-observed), 4xx and 5xx; overall: requests per second over the wall time of the whole
load. Then the check: every run a 201 answered exists exactly once in the listing of both
projects, and no run exists that no 201 answered. Exit status 1 on any 5xx or a failed check.

Run: python benchmarks/bench_load.py [--clients 30] [--requests 100] [--seconds 120] [--seed 9]
"""

from __future__ import annotations

import argparse
import collections
import random
import shutil
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import machine, ms, pct, table
from bench_api import Server

OPS_TOKEN = "load-ops-token"
USERS = ("alice", "bob", "carol", "dave", "erin")
PROJECT_OF = {"alice": "load-x", "bob": "load-x", "carol": "load-x", "dave": "load-y", "erin": "load-y"}
READ_ONLY = {"carol"}
MIX = {
    "post paused": 10,
    "post open": 10,
    "list runs": 20,
    "run detail": 20,
    "explain": 15,
    "metrics": 15,
    "queues": 10,
}
WRITES = ("post paused", "post open")
READ_PATHS = {"run detail": "runs/{}", "explain": "runs/{}/explain", "metrics": "runs/{}/metrics"}


def token(user: str) -> str:
    return f"load-{user}-token"


def auth(tok: str) -> dict[str, str]:
    return {"Authorization": f"token {tok}"}


def setup(base: str) -> None:
    s = requests.Session()
    s.headers.update(auth(OPS_TOKEN))
    api = base + "/gpuplat/api/"
    calls: list[tuple[str, dict[str, Any]]] = [
        ("queues/load-paused", {"name": "load-paused", "priority": 0, "paused": True}),
        ("queues/load-open", {"name": "load-open", "priority": 0}),
        (
            "projects/load-x",
            {
                "name": "load-x",
                "members": {"alice": "admin", "bob": "member", "carol": "viewer"},
                "allowed_queues": ["load-paused", "load-open"],
                "default_queue": "load-paused",
            },
        ),
        (
            "projects/load-y",
            {
                "name": "load-y",
                "members": {"dave": "admin", "erin": "member"},
                "allowed_queues": ["load-paused", "load-open"],
                "default_queue": "load-paused",
            },
        ),
    ]
    for path, body in calls:
        r = s.put(api + path, json=body, timeout=30)
        if r.status_code >= 300:
            raise RuntimeError(f"PUT {path}: {r.status_code} {r.text}")


@dataclass
class Shared:
    """What the clients learn as they go: run ids per project (for reads), and every 201."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    runs: dict[str, list[str]] = field(default_factory=lambda: collections.defaultdict(list))
    paused: dict[str, list[str]] = field(default_factory=lambda: collections.defaultdict(list))
    created: list[str] = field(default_factory=list)
    unknown: int = 0  # POSTs whose answer never came (a timeout): may or may not have created a run

    def add(self, project: str, run_id: str, paused: bool) -> None:
        with self.lock:
            self.created.append(run_id)
            self.runs[project].append(run_id)
            if paused:
                self.paused[project].append(run_id)

    def pick(self, project: str, rng: random.Random, paused: bool = False) -> str | None:
        with self.lock:
            ids = (self.paused if paused else self.runs)[project]
            return rng.choice(ids) if ids else None


@dataclass
class Sample:
    kind: str
    seconds: float
    status: int  # 0: no answer (connection error or timeout)


def client(
    base: str, user: str, n: int, deadline: float, seed: int, shared: Shared, start: threading.Barrier
) -> list[Sample]:
    rng = random.Random(seed)
    s = requests.Session()
    s.headers.update(auth(token(user)))
    api = base + "/gpuplat/api/"
    project = PROJECT_OF[user]
    kinds, weights = list(MIX), list(MIX.values())
    out: list[Sample] = []
    start.wait()
    for i in range(n):
        if time.monotonic() > deadline:
            break
        kind = rng.choices(kinds, weights)[0]
        while user in READ_ONLY and kind in WRITES:
            kind = rng.choices(kinds, weights)[0]
        method, path, body, params = "GET", "", None, None
        if kind in WRITES:
            queue = "load-paused" if kind == "post paused" else "load-open"
            method, path = "POST", "runs"
            body = {"project": project, "queue": queue, "name": f"{user}-{i}", "command": ["true"]}
        elif kind == "list runs":
            path, params = "runs", {"limit": 50}
        elif kind == "queues":
            path = "queues"
        else:
            rid = shared.pick(project, rng, paused=kind == "explain")
            if rid is None:
                path = "queues"  # nothing to read yet: a cheap read instead, counted as such
                kind = "queues"
            else:
                path = READ_PATHS[kind].format(rid)
        t0 = time.perf_counter()
        try:
            r = s.request(method, api + path, json=body, params=params, timeout=60)
            status = r.status_code
        except requests.RequestException:
            status = 0
        took = time.perf_counter() - t0
        out.append(Sample(kind, took, status))
        if kind in WRITES:
            if status == 201:
                shared.add(project, r.json()["id"], kind == "post paused")
            elif status == 0:
                with shared.lock:
                    shared.unknown += 1
    return out


def list_all(base: str, project: str) -> list[str]:
    s = requests.Session()
    s.headers.update(auth(OPS_TOKEN))
    ids: list[str] = []
    before: int | None = None
    while True:
        params: dict[str, Any] = {"project": project, "limit": 1000}
        if before is not None:
            params["before"] = before
        r = s.get(base + "/gpuplat/api/runs", params=params, timeout=60)
        r.raise_for_status()
        page = r.json()
        ids += [run["id"] for run in page["runs"]]
        before = page["next_before"]
        if before is None:
            return ids


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clients", type=int, default=30)
    ap.add_argument("--requests", type=int, default=100, help="requests per client")
    ap.add_argument("--seconds", type=float, default=120.0, help="stop every client after this long")
    ap.add_argument("--seed", type=int, default=9)
    args = ap.parse_args()

    tmp = tempfile.mkdtemp(prefix="gpuplat-load-")
    server = Server(
        tmp, f"sqlite:///{Path(tmp, 'gpuplat.db')}", tokens={token(u): u for u in USERS}, server_token=OPS_TOKEN
    )
    try:
        server.wait_ready()
        setup(server.base)
        shared = Shared()
        start = threading.Barrier(args.clients + 1)
        results: list[list[Sample]] = [[] for _ in range(args.clients)]
        deadline = time.monotonic() + args.seconds

        def work(k: int) -> None:
            user = USERS[k % len(USERS)]
            results[k] = client(server.base, user, args.requests, deadline, args.seed * 1000 + k, shared, start)

        threads = [threading.Thread(target=work, args=(k,)) for k in range(args.clients)]
        for t in threads:
            t.start()
        start.wait()
        t0 = time.perf_counter()
        for t in threads:
            t.join()
        wall = time.perf_counter() - t0
        samples = [x for r in results for x in r]

        listed = collections.Counter(i for p in ("load-x", "load-y") for i in list_all(server.base, p))
        created = collections.Counter(shared.created)
        doubled = [i for i, n in listed.items() if n != 1] + [i for i, n in created.items() if n != 1]
        missing = [i for i in created if i not in listed]
        extra = [i for i in listed if i not in created]
    finally:
        server.stop()
        shutil.rmtree(tmp, ignore_errors=True)

    by_kind: dict[str, list[Sample]] = collections.defaultdict(list)
    for x in samples:
        by_kind[x.kind].append(x)
    rows = []
    for kind in [*MIX, "all"]:
        xs = samples if kind == "all" else by_kind.get(kind, [])
        if not xs:
            continue
        lat = [x.seconds for x in xs]
        rows.append(
            [
                kind,
                len(xs),
                f"{len(xs) / wall:.0f}",
                ms(pct(lat, 50)),
                ms(pct(lat, 95)),
                ms(pct(lat, 99)),
                ms(max(lat)),
                sum(1 for x in xs if 400 <= x.status < 500),
                sum(1 for x in xs if x.status >= 500),
                sum(1 for x in xs if x.status == 0),
            ]
        )
    fivexx = sum(1 for x in samples if x.status >= 500)
    print(f"bench_load: {args.clients} clients × ≤{args.requests} requests, users {', '.join(USERS)}; {machine()}")
    print(f"wall {wall:.2f} s, {len(samples)} requests, {len(samples) / wall:.0f} req/s overall\n")
    print(table(["kind", "n", "req/s", "p50 ms", "p95 ms", "p99 ms", "max ms", "4xx", "5xx", "no answer"], rows))
    # A run no 201 answered is a failure, unless as many POSTs got no answer at all (a timeout).
    ok = fivexx == 0 and not doubled and not missing and len(extra) <= shared.unknown
    print(
        f"\nruns: {len(created)} created (201), {sum(listed.values())} listed, {len(doubled)} doubled, "
        f"{len(missing)} missing, {len(extra)} never acknowledged ({shared.unknown} POSTs without an answer); "
        f"5xx: {fivexx} → {'OK' if ok else 'FAILED'}"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
