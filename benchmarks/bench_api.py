"""REST API latency through a real Jupyter server with the extension, over real HTTP.

Everything is real: `python -m jupyter server` in a subprocess with the extension, the
example platform config, SQLite in a temp dir, the local executor (4 declared GPUs) starting
real processes. The client is `requests` with one keep-alive session per user.

Before the server starts, the store is filled with R finished runs (default 100,000; status
succeeded, 80% project team-a, 20% team-b, with their five timeline events each), bulk-inserted
into the store's own tables in rows of the shape `Engine.submit` writes (specs resolved by the
real policy code). `Store.create_run` in a loop would take ~2 minutes for 100,000.

Then, as the server's owner `ops` (a platform admin), the script creates through the API a
project `bench` and two queues: `bench-paused` (paused: nothing is dispatched) and
`bench-open` (no concurrency limit, no quota), and measures:

1. `POST /gpuplat/api/runs` latency (client-observed, p50/p95) into the paused queue (the
   request path alone) and into the open queue (each run is also dispatched and started as
   a process by the same server, so requests share the loop with that work).
2. create → running for a trivial local job (`sh -c 'date +%s.%N'`), one run at a time:
   server: POST send time (client clock) → the run's `started_at` and its first `running`
   timeline event `at` (server clock; same machine, same clock);
   client: POST send time → the `running` status event arriving on the `events` SSE stream;
   and, for reference, POST send time → the time the command itself printed (the local
   executor records `running` when its launcher is forked by the warm launcher, or exec'd
   with `--direct-launcher`; the command starts once the launcher has written its launch
   record). Compared with Polyaxon local mode (0.6 s) and jupyter-scheduler (4.5 s).
   Also the CPU the open-queue POSTs cost the machine per started run, as user + system
   CPU time (load-independent, unlike the latencies on a shared 2-core machine): the server
   process itself (HTTP, engine, store), and what it started (the warm launcher, every
   launcher and every command, `true`).
3. `GET /gpuplat/api/runs?limit=100` with R runs in the store: the first page and deep pages
   (`before=` near the oldest runs), as ops (sees both projects) and as alice (team-a only).

Run: python benchmarks/bench_api.py [--runs 100000] [--rounds 5] [--direct-launcher]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import psutil
import requests

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import bulk_insert, machine, ms, rounds_summary, run_row, summary, table

from jupyter_gpuplat.core.config import load_config_text
from jupyter_gpuplat.core.policy import resolve
from jupyter_gpuplat.core.request import RunRequest
from jupyter_gpuplat.store.store import Store

EXAMPLE = Path(__file__).resolve().parents[1] / "jupyter_gpuplat" / "platform.example.yaml"
SERVER_TOKEN = "bench-ops-token"
ALICE_TOKEN = "bench-alice-token"
PEERS = {"Polyaxon local mode": 0.6, "jupyter-scheduler": 4.5}
TARGET_POST_S = 0.005
TARGET_RUNNING_S = 0.005  # server side (issue 9)
TARGET_PAGE_S = 0.020


# ---- setup ------------------------------------------------------------------------------
def populate(db_url: str, n: int, seed: int, with_events: bool) -> float:
    cfg = load_config_text(EXAMPLE.read_text())
    store = Store(db_url)
    rng = random.Random(seed)
    shapes = {}
    for project, user in (("team-a", "alice"), ("team-b", "dave")):
        for presets in ([], ["single-gpu"]):
            req = RunRequest(project=project, command=["python", "train.py", "--epochs", "3"], presets=presets)
            res = resolve(cfg, user, req)
            res.raise_first()
            shapes[(project, bool(presets))] = (req.model_dump(mode="json", exclude_unset=True), res)
    users = {"team-a": ("alice", "bob"), "team-b": ("dave", "erin")}
    start = time.time() - 86400 * 30

    def rows():  # type: ignore[no-untyped-def]
        for i in range(n):
            project = "team-b" if i % 5 == 4 else "team-a"
            request, res = shapes[(project, rng.random() < 0.5)]
            r = res.resources
            yield run_row(
                rid=f"r-{i:010x}",
                project=project,
                user=rng.choice(users[project]),
                queue=res.queue,
                request=request,
                resolved=res.resolved,
                provenance=res.provenance,
                gpu=r.gpu,
                cpu_milli=r.cpu_milli,
                memory_bytes=r.memory_bytes,
                at=start + i * 20.0,
                status="succeeded",
                name=f"exp-{i % 997}",
            )

    t = time.perf_counter()
    bulk_insert(store, rows(), with_events=with_events)
    took = time.perf_counter() - t
    store.close()
    return took


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """`python -m jupyter server` with the extension, in its own Jupyter dirs under tmp."""

    def __init__(
        self,
        tmp: str,
        db_url: str,
        profile: str | None = None,
        extra_args: tuple[str, ...] = (),
        *,
        tokens: dict[str, str] | None = None,
        server_token: str = SERVER_TOKEN,
        artifacts_root: str | None = None,
    ) -> None:
        self.tmp = tmp
        self.server_token = server_token
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        conf = Path(tmp, "jupyter-config")
        conf.mkdir()
        (conf / "jupyter_server_config.json").write_text(
            json.dumps(
                {
                    "ServerApp": {
                        "jpserver_extensions": {"jupyter_gpuplat": True},
                        "identity_provider_class": "jupyter_gpuplat.auth.TokenMapIdentityProvider",
                    },
                    "TokenMapIdentityProvider": {"tokens": tokens or {ALICE_TOKEN: "alice"}},
                }
            )
        )
        env = dict(os.environ)
        env.update(
            JUPYTER_CONFIG_DIR=str(conf),
            JUPYTER_DATA_DIR=str(Path(tmp, "jupyter-data")),
            JUPYTER_RUNTIME_DIR=str(Path(tmp, "jupyter-runtime")),
            JUPYTER_PLATFORM_DIRS="1",
        )
        # `jupyter server` execs `jupyter-server`; under the profiler run the module itself.
        cmd = (
            ["-m", "cProfile", "-o", os.path.abspath(profile), "-m", "jupyter_server"]
            if profile
            else ["-m", "jupyter", "server"]
        )
        argv = [
            sys.executable,
            *cmd,
            "--no-browser",
            "--allow-root",
            "--ip=127.0.0.1",
            f"--port={self.port}",
            f"--ServerApp.token={server_token}",
            f"--ServerApp.root_dir={tmp}",
            f"--GpuPlat.config_file={EXAMPLE}",
            f"--GpuPlat.db_url={db_url}",
            f"--GpuPlat.artifacts_root={artifacts_root or Path(tmp, 'art')}",
            "--GpuPlat.default_user=ops",
            "--LocalExecutor.gpus=4",
            *extra_args,
        ]  # fmt: skip  (jpserver_extensions and the identity provider are in the config file above)
        self.log_path = Path(tmp, "server.log")
        self._log = self.log_path.open("wb")
        self.proc = subprocess.Popen(argv, stdout=self._log, stderr=subprocess.STDOUT, env=env, cwd=tmp)

    def wait_ready(self, timeout: float = 120) -> float:
        t0 = time.perf_counter()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode}:\n{self.tail()}")
            try:
                r = requests.get(f"{self.base}/gpuplat/api/whoami", headers=auth(self.server_token), timeout=5)
                if r.status_code == 200:
                    return time.perf_counter() - t0
            except requests.RequestException:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"server not ready after {timeout} s:\n{self.tail()}")

    def tail(self, n: int = 40) -> str:
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"token {token}"}


class Client:
    def __init__(self, base: str, token: str) -> None:
        self.base = base + "/gpuplat/api/"
        self.s = requests.Session()
        self.s.headers.update(auth(token))

    def call(self, method: str, path: str, body: Any = None, **params: Any) -> Any:
        r = self.s.request(method, self.base + path, json=body, params=params or None, timeout=60)
        if r.status_code >= 300:
            raise RuntimeError(f"{method} {path}: {r.status_code} {r.text}")
        return r.json()


class EventStream:
    """Reads the `events` SSE stream in a thread and notes when each (run, status) arrives."""

    def __init__(self, base: str, token: str) -> None:
        self.seen: dict[tuple[str, str], float] = {}
        self.cond = threading.Condition()
        self.ready = threading.Event()
        self.resp = requests.get(base + "/gpuplat/api/events", headers=auth(token), stream=True, timeout=(10, None))
        self.resp.raise_for_status()
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()
        if not self.ready.wait(30):
            raise RuntimeError("events stream never sent its ready event")

    def _read(self) -> None:
        buf = b""
        event, data = "", []
        try:
            for chunk in self.resp.iter_content(chunk_size=None):
                now = time.time()
                buf += chunk
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    text = line.decode()
                    if text.startswith("event: "):
                        event = text[7:]
                    elif text.startswith("data: "):
                        data.append(text[6:])
                    elif text == "":
                        if event == "ready":
                            self.ready.set()
                        elif event == "status" and data:
                            ev = json.loads("\n".join(data))
                            with self.cond:
                                self.seen.setdefault((ev["run_id"], ev["status"]), now)
                                self.cond.notify_all()
                        event, data = "", []
        except (requests.RequestException, ValueError, AttributeError):
            return

    def wait(self, run_id: str, status: str, timeout: float = 30) -> float:
        with self.cond:
            if not self.cond.wait_for(lambda: (run_id, status) in self.seen, timeout):
                raise RuntimeError(f"no {status!r} event for {run_id} within {timeout} s")
            return self.seen[(run_id, status)]

    def close(self) -> None:
        self.resp.close()


# ---- measurements ---------------------------------------------------------------------------
def setup_bench_project(ops: Client) -> None:
    ops.call("PUT", "queues/bench-paused", {"name": "bench-paused", "priority": 0, "paused": True})
    ops.call("PUT", "queues/bench-open", {"name": "bench-open", "priority": 0})
    ops.call(
        "PUT",
        "projects/bench",
        {"name": "bench", "members": {"ops": "admin"}, "allowed_queues": ["bench-paused", "bench-open"]},
    )


def cpu_seconds(pid: int) -> tuple[float, float]:
    """User + system CPU: (the server process itself, everything it started: launchers, commands, warm launcher)."""
    root = psutil.Process(pid)
    t = root.cpu_times()
    own, started = t.user + t.system, t.children_user + t.children_system
    for p in root.children(recursive=True):  # alive: the warm launcher (and what it reaped)
        try:
            c = p.cpu_times()
        except psutil.Error:
            continue
        started += c.user + c.system + c.children_user + c.children_system
    return own, started


def time_posts(ops: Client, queue: str, rounds: int, per_round: int, events: EventStream | None) -> dict[str, float]:
    body = {"project": "bench", "queue": queue, "command": ["true"]}
    for _ in range(10):  # warm-up
        ops.call("POST", "runs", body)
    out = []
    last = ""
    for _ in range(rounds):
        samples = []
        for _ in range(per_round):
            t0 = time.perf_counter()
            r = ops.s.post(ops.base + "runs", json=body, timeout=60)
            samples.append(time.perf_counter() - t0)
            if r.status_code != 201:
                raise RuntimeError(f"POST runs: {r.status_code} {r.text}")
            last = r.json()["id"]
        out.append(samples)
    if events is not None and last:  # let the open queue drain before the next measurement
        events.wait(last, "succeeded", 60)
        time.sleep(0.5)
    return rounds_summary(out)


def create_to_running(ops: Client, events: EventStream, n: int) -> dict[str, dict[str, float]]:
    # A trivial command that also says when it really ran: `running` is recorded once the
    # launcher is exec'd; the command itself starts after the launcher (a Python process) is up.
    body = {"project": "bench", "queue": "bench-open", "command": ["sh", "-c", "date +%s.%N"]}
    srv_started, srv_event, cli_sse, post_rtt, cmd_ran, srv_created, srv_dispatched = [], [], [], [], [], [], []
    for i in range(n + 3):
        t_send = time.time()
        t0 = time.perf_counter()
        r = ops.s.post(ops.base + "runs", json=body, timeout=60)
        rtt = time.perf_counter() - t0
        if r.status_code != 201:
            raise RuntimeError(f"POST runs: {r.status_code} {r.text}")
        rid = r.json()["id"]
        t_sse = events.wait(rid, "running")
        events.wait(rid, "succeeded")
        run = ops.call("GET", f"runs/{rid}")
        first_running = next(e["at"] for e in run["timeline"] if e["status"] == "running")
        created = next(e["at"] for e in run["timeline"] if e["status"] == "created")
        dispatched = next(e["at"] for e in run["timeline"] if e["status"] == "dispatched")
        log = ops.s.get(ops.base + f"runs/{rid}/logs", params={"format": "text"}, timeout=60).text
        if i >= 3:  # the first few warm up imports and caches
            cmd_ran.append(float(log.split()[0]) - t_send)
            srv_started.append(run["started_at"] - t_send)
            srv_event.append(first_running - t_send)
            srv_created.append(created - t_send)
            srv_dispatched.append(dispatched - t_send)
            cli_sse.append(t_sse - t_send)
            post_rtt.append(rtt)
        time.sleep(0.05)
    return {
        "server: send → started_at": summary(srv_started),
        "server: send → first running event at": summary(srv_event),
        "client: send → running on events SSE": summary(cli_sse),
        "(POST round trip in the same runs)": summary(post_rtt),
        "(server: send → created event at)": summary(srv_created),
        "(server: send → dispatched event at)": summary(srv_dispatched),
        "(send → the command's own clock: date +%s.%N)": summary(cmd_ran),
    }


def floor(client: Client, rounds: int, per_round: int) -> list[list[Any]]:
    """Requests that do almost nothing: what HTTP, jupyter_server's auth and the client cost alone."""
    rows = []
    for name, path, params in (("GET whoami", "whoami", {}), ("GET runs?limit=1", "runs", {"limit": 1})):
        for _ in range(5):
            client.s.get(client.base + path, params=params, timeout=60)
        out = []
        for _ in range(rounds):
            samples = []
            for _ in range(per_round):
                t0 = time.perf_counter()
                client.s.get(client.base + path, params=params, timeout=60)
                samples.append(time.perf_counter() - t0)
            out.append(samples)
        s = rounds_summary(out)
        rows.append(
            [f"(floor) {name}: HTTP + auth + routing", ms(s["p50"]), ms(s["p95"]), "", "", f"{s['n']} requests"]
        )
    return rows


def list_pages(client: Client, label: str, n_runs: int, rounds: int, per_round: int) -> list[list[Any]]:
    rows = []
    cases: list[tuple[str, dict[str, int]]] = [("first page", {})]
    for frac, name in ((0.5, "middle page (before= half way)"), (0.01, "deep page (before= oldest 1%)")):
        cases.append((name, {"before": max(250, int(n_runs * frac))}))
    for name, extra in cases:
        for _ in range(5):
            client.s.get(client.base + "runs", params={"limit": 100, **extra}, timeout=60)
        out = []
        got = 0
        for _ in range(rounds):
            samples = []
            for _ in range(per_round):
                t0 = time.perf_counter()
                r = client.s.get(client.base + "runs", params={"limit": 100, **extra}, timeout=60)
                samples.append(time.perf_counter() - t0)
                got = len(r.json()["runs"])
            out.append(samples)
        s = rounds_summary(out)
        rows.append(
            [
                f"GET runs?limit=100 as {label}: {name}",
                ms(s["p50"]),
                ms(s["p95"]),
                f"≤ {TARGET_PAGE_S * 1e3:.0f}",
                verdict(s["p50"], TARGET_PAGE_S),
                f"{got} rows",
            ]
        )
    return rows


def verdict(value: float, target: float) -> str:
    return "meets" if value <= target else "MISSES"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=100_000, help="finished runs put in the store before the server starts")
    ap.add_argument("--no-events", action="store_true", help="insert the runs without their timeline events")
    ap.add_argument("--rounds", type=int, default=5, help="rounds per measurement; figures are medians over rounds")
    ap.add_argument("--posts", type=int, default=60, help="POSTs per round")
    ap.add_argument("--started", type=int, default=30, help="runs measured for create → running")
    ap.add_argument("--pages", type=int, default=30, help="page GETs per round")
    ap.add_argument("--keep", action="store_true", help="keep the temp dir (server log, database)")
    ap.add_argument(
        "--only", default="post,start,list", help="which measurements to run: post, start, list (comma-separated)"
    )
    ap.add_argument(
        "--profile",
        metavar="FILE",
        help="run the server under cProfile and write its stats here (read with python -m pstats FILE)",
    )
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument(
        "--direct-launcher",
        action="store_true",
        help="spawn launcher.py per run (LocalExecutor.warm_launcher=False) instead of the warm launcher",
    )
    args = ap.parse_args()

    print(f"bench_api — {machine()}")
    print("launcher: " + ("launcher.py spawned per run" if args.direct_launcher else "warm launcher (forks)"))
    tmp = tempfile.mkdtemp(prefix="gpuplat-bench-api-")
    db_url = f"sqlite:///{tmp}/gpuplat.db"
    server: Server | None = None
    events: EventStream | None = None
    try:
        took = populate(db_url, args.runs, args.seed, not args.no_events)
        print(f"store: {args.runs:,} finished runs bulk-inserted in {took:.1f} s ({tmp})", flush=True)
        extra = ("--LocalExecutor.warm_launcher=False",) if args.direct_launcher else ()
        server = Server(tmp, db_url, args.profile, extra)
        print(f"server: ready in {server.wait_ready():.1f} s on port {server.port}", flush=True)
        ops = Client(server.base, SERVER_TOKEN)
        alice = Client(server.base, ALICE_TOKEN)
        setup_bench_project(ops)
        events = EventStream(server.base, SERVER_TOKEN)

        only = set(args.only.split(","))
        rows: list[list[Any]] = floor(ops, args.rounds, args.pages)
        if "post" in only:
            s = time_posts(ops, "bench-paused", args.rounds, args.posts, None)
            rows.append(
                [
                    "POST runs → paused queue (request path only)",
                    ms(s["p50"]),
                    ms(s["p95"]),
                    f"≤ {TARGET_POST_S * 1e3:.0f}",
                    verdict(s["p50"], TARGET_POST_S),
                    f"{s['n']} posts",
                ]
            )
            cpu0 = cpu_seconds(server.proc.pid)
            s = time_posts(ops, "bench-open", args.rounds, args.posts // 2, events)
            started = args.rounds * (args.posts // 2) + 10  # with the warm-up posts
            cpu1 = cpu_seconds(server.proc.pid)
            server_cpu, launch_cpu = ((b - a) / started for a, b in zip(cpu0, cpu1, strict=True))
            rows.append(
                [
                    "POST runs → open queue (each run also starts)",
                    ms(s["p50"]),
                    ms(s["p95"]),
                    f"≤ {TARGET_POST_S * 1e3:.0f}",
                    verdict(s["p50"], TARGET_POST_S),
                    f"{s['n']} posts",
                ]
            )
            for label, value in (
                ("(CPU per started run: the server process)", server_cpu),
                ("(CPU per started run: launchers, warm launcher, `true`)", launch_cpu),
            ):
                rows.append([label, ms(value), "", "", "", f"{started} runs"])
            print("measured POST latency", flush=True)

        c2r: dict[str, dict[str, float]] = {}
        if "start" in only:
            c2r = create_to_running(ops, events, args.started)
            for label, s2 in c2r.items():
                target = TARGET_RUNNING_S if label.startswith("server") else None
                rows.append(
                    [
                        f"create → running, {label}",
                        ms(s2["p50"]),
                        ms(s2["p95"]),
                        f"≤ {TARGET_RUNNING_S * 1e3:.0f}" if target else "",
                        verdict(s2["p50"], TARGET_RUNNING_S) if target else "",
                        f"{s2['n']} runs",
                    ]
                )
            print("measured create → running", flush=True)

        if "list" in only:
            rows += list_pages(ops, "ops (2 projects)", args.runs, args.rounds, args.pages)
            rows += list_pages(alice, "alice (team-a)", args.runs, args.rounds, args.pages)
        print()
        print(table(["measurement", "p50 ms", "p95 ms", "target ms", "", "samples/result"], rows))

        if c2r:
            sse = c2r["client: send → running on events SSE"]["p50"]
            srv = c2r["server: send → started_at"]["p50"]
            cmd = c2r["(send → the command's own clock: date +%s.%N)"]["p50"]
            print("\ncreate → running vs peers (peer figure / ours, p50; peer figures as given, not measured here):")
            print(
                table(
                    ["peer", "peer s", "vs server started_at", "vs client SSE", "vs command's own clock"],
                    [
                        [name, f"{v:.1f}", f"{v / srv:.0f}×", f"{v / sse:.0f}×", f"{v / cmd:.0f}×"]
                        for name, v in PEERS.items()
                    ],
                )
            )
        print(f"\n{args.runs:,} runs in the store; server log: {server.log_path if args.keep else '(removed)'}")
    finally:
        if events is not None:
            events.close()
        if server is not None:
            server.stop()
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
