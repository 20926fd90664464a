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
3. CPU per POST of each server process (load-independent, unlike the latencies).

`--team` repeats 1 and 2 behind a real JupyterHub (tests/hubenv.py: Hub, configurable-http-proxy,
`gpuplat server` as a Hub-managed service on a real PostgreSQL, tests/pg.py): POSTs as alice to
her `jupyterhub-singleuser` server in remote mode, directly with the server's own token (as her
kernels and the CLI do) and through the proxy with her Hub token (the browser's path, one more
hop than embedded), against the embedded server's POSTs.

Run: python benchmarks/bench_remote.py [--rounds 5] [--posts 100] [--events 200] [--team]
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
from typing import Any
from urllib.parse import urlsplit

import psutil
import requests

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT))

from _common import machine, ms, rounds_summary, summary, table  # noqa: E402

from tests.server import ServerProcess  # noqa: E402

BODY = {"project": "bench", "queue": "bench-paused", "command": ["true"]}


class Events(threading.Thread):
    """An SSE reader over a raw HTTP/1.0 socket: arrival time of each run's first status event."""

    def __init__(self, port: int, path: str, token: str = "tok-ops") -> None:
        super().__init__(daemon=True)
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.sendall(f"GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\nAuthorization: token {token}\r\n\r\n".encode())
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
    """One POST runs to `base` (a server's URL, its API under it); (seconds, run id)."""
    t0 = time.perf_counter()
    r = s.post(base + "gpuplat/api/runs", json=BODY, timeout=60)
    took = time.perf_counter() - t0
    if r.status_code != 201:
        raise RuntimeError(f"POST runs: {r.status_code} {r.text}")
    return took, str(r.json()["id"])


def session(token: str = "tok-ops") -> requests.Session:
    s = requests.Session()
    s.headers["Authorization"] = f"token {token}"
    return s


def cpu_seconds(server: ServerProcess) -> float:
    assert server.proc is not None
    t = psutil.Process(server.proc.pid).cpu_times()
    return float(t.user + t.system)


def post_rounds(a: tuple[requests.Session, str], b: tuple[requests.Session, str], rounds: int, posts: int) -> Any:
    """POST latencies to two targets, interleaved (noise on a shared machine hits both), as rounds summaries."""
    for _ in range(20):  # warm-up: connections, lazy imports, caches (the Hub's token cache too)
        post(*a)
        post(*b)
    a_rounds, b_rounds = [], []
    for _ in range(rounds):
        ra, rb = [], []
        for _ in range(posts):
            ra.append(post(*a)[0])
            rb.append(post(*b)[0])
        a_rounds.append(ra)
        b_rounds.append(rb)
    return rounds_summary(a_rounds), rounds_summary(b_rounds)


def event_lag(direct: Events, via: Events, submit: tuple[requests.Session, str], n: int) -> list[float]:
    """Seconds the forwarded stream delivers each run's first status event after the direct one."""
    for e in (direct, via):
        e.start()
        if not e.ready.wait(30):
            raise RuntimeError("an events stream did not open")
    lag = []
    for _ in range(n):
        _, run_id = post(*submit)
        lag.append(via.wait(run_id) - direct.wait(run_id))
    direct.close()
    via.close()
    return lag


def report(title: str, emb: Any, rem: Any, lag: list[float]) -> None:
    lags = summary(lag)
    print(f"## {title}")
    rows = [
        ["POST runs, embedded", emb["n"], ms(emb["p50"]), ms(emb["p95"]), f"{ms(emb['p50_lo'])}-{ms(emb['p50_hi'])}"],
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
    ratio = rem["p50"] / emb["p50"]
    print(f"POST runs p50 ratio remote/embedded: {ratio:.2f}x (target <= 2x) {'OK' if ratio <= 2 else 'MISSED'}")
    extra = lags["p50"] * 1e3
    print(
        f"events through the forwarded SSE: {extra:+.2f} ms p50 (target <= 20 ms) {'OK' if extra <= 20 else 'MISSED'}"
    )
    print(f"(mean extra {statistics.mean(lag) * 1e3:.2f} ms, max {lags['max'] * 1e3:.2f} ms)")
    print()


def setup_paused(call: Any, members: dict[str, Any]) -> None:
    call("PUT", "queues/bench-paused", {"name": "bench-paused", "priority": 0, "paused": True})
    call("PUT", "projects/bench", {"name": "bench", **members, "allowed_queues": ["bench-paused"]})


def port_of(url: str) -> int:
    return int(urlsplit(url).port or 80)


def singleuser(hub_pid: int, user: str) -> tuple[str, str]:
    """The user's server's own URL and token, as its kernels and the CLI have them (no proxy): from its environment."""
    for proc in psutil.Process(hub_pid).children(recursive=True):  # this Hub's: other Hubs may run an alice too
        try:
            if any("jupyterhub-singleuser" in a for a in proc.cmdline()):
                env = proc.environ()
                if env.get("JUPYTERHUB_USER") == user:
                    return env["JUPYTERHUB_SERVICE_URL"].rstrip("/") + "/", env["JUPYTERHUB_API_TOKEN"]
        except (psutil.Error, KeyError):
            continue
    raise RuntimeError(f"no jupyterhub-singleuser process of {user}")


def team(args: argparse.Namespace, embedded: ServerProcess) -> None:
    """The same figures behind a real JupyterHub: alice's singleuser server -> `gpuplat server` on PostgreSQL."""
    from tests.hubenv import ACCESS_SCOPE, TEAM_CONFIG, HubEnv, fresh_database
    from tests.pg import LocalCluster

    pg = LocalCluster()
    try:
        pg_url = pg.start()
        with tempfile.TemporaryDirectory() as tmp, fresh_database(pg_url) as db_url:
            conf = Path(tmp) / "platform.yaml"
            conf.write_text(TEAM_CONFIG)
            hub = HubEnv(Path(tmp) / "hub", db_url, conf).start()
            try:
                user_url = hub.spawn("alice")
                tok = hub.token("alice", [ACCESS_SCOPE, "access:servers!user=alice"])

                def admin(method: str, path: str, body: Any) -> None:
                    code, out = hub.call(method, f"gpuplat/api/{path}", hub.admin_token, body, direct=True)
                    if code >= 300:
                        raise RuntimeError(f"{method} {path}: {code} {out}")

                setup_paused(admin, {"groups": {"team-a": "member"}})
                assert hub.proc is not None
                # The owner's path: the server's own token, forwarded as hers.
                own, own_token = singleuser(hub.proc.pid, "alice")
                emb, rem = post_rounds((session(), embedded.url), (session(own_token), own), args.rounds, args.posts)
                emb_p, rem_p = post_rounds((session(), embedded.url), (session(tok), user_url), args.rounds, args.posts)
                direct = Events(port_of(hub.control_plane_url), "/services/gpuplat/gpuplat/api/events", tok)
                via = Events(port_of(own), "/user/alice/gpuplat/api/events", own_token)
                lag = event_lag(direct, via, (session(tok), hub.control_plane_url), args.events)
                direct = Events(port_of(hub.control_plane_url), "/services/gpuplat/gpuplat/api/events", tok)
                via = Events(hub.public_port, "/user/alice/gpuplat/api/events", tok)
                lag_p = event_lag(direct, via, (session(tok), hub.control_plane_url), args.events)
            finally:
                hub.stop()
        what = "gpuplat server (PostgreSQL, Hub identity) vs embedded (SQLite)"
        report(f"team: alice's singleuser server direct (as her kernels, CLI) -> {what}", emb, rem, lag)
        report(f"team: alice's singleuser server through CHP (the browser's path) -> {what}", emb_p, rem_p, lag_p)
    finally:
        pg.stop()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--posts", type=int, default=100, help="POSTs per round and target")
    ap.add_argument("--events", type=int, default=200)
    ap.add_argument(
        "--team", action="store_true", help="also behind a real JupyterHub with gpuplat server (PostgreSQL)"
    )
    args = ap.parse_args()
    print(machine())
    print()
    with tempfile.TemporaryDirectory() as tmp:
        up = ServerProcess(Path(tmp) / "control-plane")
        remote_cfg = {"GpuPlat": {"mode": "remote", "control_plane_url": up.url, "control_plane_token": "tok-alice"}}
        user = ServerProcess(Path(tmp) / "user-server", extra_config=remote_cfg)
        up.start()
        user.start()
        try:
            setup_paused(lambda m, p, b: up.ok(m, p, "ops", b), {"members": {"ops": "admin"}})
            cpu0 = [cpu_seconds(s) for s in (up, user)]
            emb, rem = post_rounds((session(), up.url), (session(), user.url), args.rounds, args.posts)
            cpu1 = [cpu_seconds(s) for s in (up, user)]
            d_ev = Events(up.port, "/gpuplat/api/events")
            r_ev = Events(user.port, "/gpuplat/api/events")
            lag = event_lag(d_ev, r_ev, (session(), up.url), args.events)
        finally:
            user.stop()
        report("forwarding alone: an embedded server as the control plane, a remote server in front", emb, rem, lag)
        # CPU per POST does not depend on what else the machine runs, unlike the latencies (20 warm-up each too).
        n = args.rounds * args.posts + 20
        per_post = (cpu1[0] - cpu0[0]) / (2 * n)  # the control plane served both the direct and the forwarded
        forwarding = (cpu1[1] - cpu0[1]) / n
        print(
            f"CPU per POST: embedded {per_post * 1e3:.2f} ms; remote {(per_post + forwarding) * 1e3:.2f} ms "
            f"(control plane + {forwarding * 1e3:.2f} ms in the forwarding server): "
            f"{(per_post + forwarding) / per_post:.2f}x"
        )
        print()
        try:
            if args.team:
                team(args, up)
        finally:
            up.stop()


if __name__ == "__main__":
    main()
