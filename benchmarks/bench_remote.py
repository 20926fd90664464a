"""Remote mode's cost: a user's Jupyter server forwarding to the control plane, against direct.

Two real Jupyter servers as subprocesses (tests/server.py): the control plane in embedded
mode (example config, SQLite, local executor) and a user's server in remote mode pointed at
it (`GpuPlat.mode=remote`). The client is `requests`, one keep-alive session per target, as
the platform admin `ops` in a project `bench` whose queue `bench-paused` is paused, so a POST
measures the request path alone (no dispatch work shares the loop).

1. `POST /gpuplat/api/runs` latency, direct to the control plane (what embedded mode costs a
   client of its own server) and through the remote server, interleaved per round (noise on
   a shared machine hits both). Target: remote p50 ≤ 2 × embedded p50.
2. Status events: one `events` SSE stream direct and one through the remote server, both
   open at once; each POST's `queued` event is timestamped (time.perf_counter in the reading
   threads) as it arrives on each; the figure is remote − direct per event. Target: ≤ 20 ms p50.

Run: python benchmarks/bench_remote.py [--rounds 5] [--posts 100] [--events 200]
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT))

from _common import machine, ms, rounds_summary, summary, table  # noqa: E402

from tests.server import ServerProcess  # noqa: E402

BODY = {"project": "bench", "queue": "bench-paused", "command": ["true"]}


class Events(threading.Thread):
    """An SSE reader over a raw HTTP/1.0 socket: arrival time of each run's first status event."""

    def __init__(self, port: int, path: str) -> None:
        super().__init__(daemon=True)
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.sendall(f"GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\nAuthorization: token tok-ops\r\n\r\n".encode())
        self.seen: dict[str, float] = {}
        self.ready = threading.Event()
        self.cond = threading.Condition()

    def run(self) -> None:
        f = self.sock.makefile("rb")
        event = ""
        for raw in f:
            now = time.perf_counter()
            line = raw.decode().rstrip("\r\n")
            if line.startswith("event: "):
                event = line[7:]
                if event == "ready":
                    self.ready.set()
            elif line.startswith("data: ") and event == "status":
                run_id = json.loads(line[6:])["run_id"]
                with self.cond:
                    self.seen.setdefault(run_id, now)
                    self.cond.notify_all()

    def wait(self, run_id: str, timeout: float = 30) -> float:
        with self.cond:
            if not self.cond.wait_for(lambda: run_id in self.seen, timeout):
                raise RuntimeError(f"no event for {run_id} within {timeout} s")
            return self.seen[run_id]

    def close(self) -> None:
        self.sock.close()


def post(s: requests.Session, base: str) -> tuple[float, str]:
    t0 = time.perf_counter()
    r = s.post(base + "gpuplat/api/runs", json=BODY, timeout=60)
    took = time.perf_counter() - t0
    if r.status_code != 201:
        raise RuntimeError(f"POST runs: {r.status_code} {r.text}")
    return took, str(r.json()["id"])


def session() -> requests.Session:
    s = requests.Session()
    s.headers["Authorization"] = "token tok-ops"
    return s


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--posts", type=int, default=100, help="POSTs per round and target")
    ap.add_argument("--events", type=int, default=200)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        up = ServerProcess(Path(tmp) / "control-plane")
        remote_cfg = {"GpuPlat": {"mode": "remote", "control_plane_url": up.url, "control_plane_token": "tok-alice"}}
        user = ServerProcess(Path(tmp) / "user-server", extra_config=remote_cfg)
        up.start()
        user.start()
        try:
            up.ok("PUT", "queues/bench-paused", "ops", {"name": "bench-paused", "priority": 0, "paused": True})
            project = {"name": "bench", "members": {"ops": "admin"}, "allowed_queues": ["bench-paused"]}
            up.ok("PUT", "projects/bench", "ops", project)
            direct, via = session(), session()
            for _ in range(20):  # warm-up: connections, caches, JIT-less but lazy imports
                post(direct, up.url)
                post(via, user.url)
            d_rounds, r_rounds = [], []
            for _ in range(args.rounds):
                d, r = [], []
                for _ in range(args.posts):
                    d.append(post(direct, up.url)[0])
                    r.append(post(via, user.url)[0])
                d_rounds.append(d)
                r_rounds.append(r)
            emb, rem = rounds_summary(d_rounds), rounds_summary(r_rounds)

            d_ev = Events(up.port, "/gpuplat/api/events")
            r_ev = Events(user.port, "/gpuplat/api/events")
            for e in (d_ev, r_ev):
                e.start()
                if not e.ready.wait(30):
                    raise RuntimeError("an events stream did not open")
            lag = []
            for _ in range(args.events):
                _, run_id = post(direct, up.url)
                lag.append(r_ev.wait(run_id) - d_ev.wait(run_id))
            d_ev.close()
            r_ev.close()
        finally:
            user.stop()
            up.stop()
    lags = summary(lag)
    print(machine())
    print()
    rows = [
        [
            "POST runs, embedded (direct)",
            emb["n"],
            ms(emb["p50"]),
            ms(emb["p95"]),
            f"{ms(emb['p50_lo'])}-{ms(emb['p50_hi'])}",
        ],
        [
            "POST runs, through remote",
            rem["n"],
            ms(rem["p50"]),
            ms(rem["p95"]),
            f"{ms(rem['p50_lo'])}-{ms(rem['p50_hi'])}",
        ],
        ["events: remote - direct arrival", lags["n"], ms(lags["p50"]), ms(lags["p95"]), ""],
    ]
    print(table(["measure", "n", "p50 ms", "p95 ms", "round p50s ms"], rows))
    print()
    ratio = rem["p50"] / emb["p50"]
    print(f"POST runs p50 ratio remote/embedded: {ratio:.2f}x (target <= 2x) {'OK' if ratio <= 2 else 'MISSED'}")
    extra = lags["p50"] * 1e3
    print(
        f"events through the forwarded SSE: +{extra:.2f} ms p50 (target <= 20 ms) {'OK' if extra <= 20 else 'MISSED'}"
    )
    print(f"(mean extra {statistics.mean(lag) * 1e3:.2f} ms, max {lags['max'] * 1e3:.2f} ms)")


if __name__ == "__main__":
    main()
