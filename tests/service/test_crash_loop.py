"""The crash loop: SIGKILL the server at random moments under a mixed workload; nothing lost or doubled.

A real Jupyter server with the extension (tests/server.py), the local executor starting real
processes, real SQLite. Several users of two projects submit runs into the example platform's
queues (concurrency, quotas, max_per_user, strict FIFO); each run prints numbered log lines,
logs a metric point per line through `jupyter_gpuplat.tracking`, and appends
"<run_id> <pid> <CUDA_VISIBLE_DEVICES> start|end <time> <lines done>" to a file outside the
artifacts, so starts are counted independently of the server. Some runs are short, some last
seconds, some fail with exit code 3, some are stopped through the API. Between submissions the
server is SIGKILLed (seeded random choice of moment: right after a submit, right after a run
started, right after a run ended, right after a stop was accepted) and started again.

At the end, with everything settled: every accepted run exists exactly once and no other does;
each reached the final status its script and stops explain (nothing Lost: the processes outlive
the server); one start per run in the shared file and one `dispatched` per run on its timeline;
no device shared by two runs whose lifetimes overlap; every printed line and every logged metric
point served exactly once. CI: GPUPLAT_CRASH_ITERATIONS kills (default 4); raise it for a long run.
"""

from __future__ import annotations

import collections
import os
import random
import signal
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ..server import ServerProcess
from ..waiting import until

KILLS = int(os.environ.get("GPUPLAT_CRASH_ITERATIONS", "4"))
SEED = int(os.environ.get("GPUPLAT_CRASH_SEED", "9"))
PER_ROUND = 6  # submissions between two kills
MOMENTS = ("after-submit", "after-start", "after-end", "after-stop")

RUN = r"""
import os, signal, sys, time
from jupyter_gpuplat import tracking
lines, seconds, code, shared = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
rid, dev = os.environ["GPUPLAT_RUN_ID"], os.environ["CUDA_VISIBLE_DEVICES"]
done = 0
def mark(what):
    fd = os.open(shared, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.write(fd, f"{rid} {os.getpid()} {dev} {what} {time.time():.6f} {done}\n".encode())  # one write: one line
    os.close(fd)
def stopped(signum, frame):
    mark("end")
    os._exit(128 + signum)
signal.signal(signal.SIGTERM, stopped)
mark("start")
for i in range(lines):
    tracking.log_metrics(step=i, loss=i * 0.5)  # before the line: a printed line's point is written
    os.write(1, f"line {i}\n".encode())
    done = i + 1
    time.sleep(seconds / lines)
signal.signal(signal.SIGTERM, signal.SIG_IGN)
mark("end")
sys.exit(code)
"""

# (user, project, spec fields): team-a and team-b users into the three queues of the example platform.
INTERACTIVE_JOB = {"queue": "interactive", "resources": {"gpu": 1}}  # a job there (its preset is a session)
WORK: list[tuple[str, str, dict[str, Any]]] = [
    ("alice", "team-a", {"presets": ["single-gpu"]}),  # team-a-train: concurrency 2, 2 GPUs
    ("bob", "team-a", {"presets": ["multi-gpu"]}),  # 2 GPUs at once: the whole quota of team-a-train
    ("bob", "team-a", INTERACTIVE_JOB),  # interactive: max_per_user 1, 2 GPUs
    ("dave", "team-b", {"presets": ["single-gpu"]}),  # team-b-train: strict FIFO, max_per_user 1
    ("erin", "team-b", {"presets": ["single-gpu"]}),
    ("erin", "team-b", INTERACTIVE_JOB),
]


@dataclass
class Submitted:
    id: str
    user: str
    lines: int
    exit_code: int
    long: bool
    stop_accepted: bool = False


@dataclass
class Mark:
    pid: int
    devices: tuple[int, ...]
    at: float
    done: int


class Marks:
    """The shared file the runs append to: starts and ends per run id, read independently of the server."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def lines(self) -> list[list[str]]:
        try:
            text = self.path.read_text()
        except FileNotFoundError:
            return []
        return [line.split() for line in text.splitlines() if line.endswith(tuple("0123456789"))]

    def count(self, what: str) -> int:
        return sum(1 for f in self.lines() if f[3] == what)

    def of(self, what: str) -> dict[str, list[Mark]]:
        out: dict[str, list[Mark]] = collections.defaultdict(list)
        for rid, pid, dev, kind, at, done in self.lines():
            if kind == what:
                devices = tuple(int(d) for d in dev.split(",")) if dev != "-" else ()
                out[rid].append(Mark(int(pid), devices, float(at), int(done)))
        return out


def all_runs(server: ServerProcess) -> list[dict[str, Any]]:
    """Every run, as the platform admin sees them, through every page of the list."""
    out: list[dict[str, Any]] = []
    before: int | None = None
    while True:
        params: dict[str, Any] = {"limit": 1000}
        if before is not None:
            params["before"] = before
        page = server.ok("GET", "runs", "ops", **params)
        out += page["runs"]
        before = page["next_before"]
        if before is None:
            return out


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    srv = ServerProcess(tmp_path)
    srv.start()
    yield srv
    # Runs outlive servers by design; the test must not leak them.
    if srv.proc is None or srv.proc.poll() is not None:
        srv.start()
    pids = [r.get("pid") for r in all_runs(srv) if r["status"] not in ("succeeded", "failed", "stopped")]
    srv.stop()
    for pid in pids:
        if pid:
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def test_sigkill_loop_loses_and_doubles_nothing(server: ServerProcess, tmp_path: Path) -> None:
    rng = random.Random(SEED)
    marks = Marks(tmp_path / "marks.txt")  # outside the artifacts root
    submitted: dict[str, Submitted] = {}
    kills: list[str] = []
    killed_at: list[float] = []  # epoch seconds, to compare with the marks and the timelines
    t0 = time.monotonic()

    def crash(moment: str) -> None:
        killed_at.append(time.time())
        server.kill()
        kills.append(moment)
        server.start()

    def submit(force_long: bool = False) -> str:
        user, project, fields = rng.choice(WORK)
        long = rng.random() < 0.35 or force_long
        lines = rng.randint(20, 30) if long else rng.randint(3, 8)
        seconds = rng.uniform(1.5, 3.0) if long else rng.uniform(0.05, 0.3)
        code = 3 if rng.random() < 0.2 else 0
        body = {
            "project": project,
            **fields,
            "name": f"crash-{len(submitted)}",
            "command": [sys.executable, "-c", RUN, str(lines), f"{seconds:.3f}", str(code), str(marks.path)],
        }
        status, run = server.call("POST", "runs", user, body)
        assert status == 201, (status, run)
        submitted[run["id"]] = Submitted(run["id"], user, lines, code, long)
        return str(run["id"])

    def stop_one(only_running: bool) -> bool:
        """Stop one unfinished long run; True when a stop was accepted."""
        candidates = [s for s in submitted.values() if s.long and not s.stop_accepted]
        rng.shuffle(candidates)
        for s in candidates:
            run = server.ok("GET", f"runs/{s.id}", s.user)
            if run["status"] in ("succeeded", "failed", "stopped", "stopping"):
                continue
            if only_running and run["status"] != "running":
                continue
            status, body = server.call("POST", f"runs/{s.id}/stop", s.user)
            assert status in (200, 202, 409), (status, body)  # 409: it ended in between
            if status < 300:
                s.stop_accepted = True
                return True
        return False

    # Every kind of moment comes up as often as the others, in a random order.
    moments: list[str | None] = [MOMENTS[k % len(MOMENTS)] for k in range(KILLS)]
    rng.shuffle(moments)
    for moment in [*moments, None]:
        kill_after = rng.randrange(PER_ROUND)
        starts, ends = marks.count("start"), marks.count("end")
        for j in range(PER_ROUND):
            submit(force_long=moment == "after-stop" and j == PER_ROUND - 1)  # something to stop
            if rng.random() < 0.25:
                stop_one(only_running=False)
            if moment == "after-submit" and j == kill_after:
                for _ in range(rng.randrange(4)):  # shift the kill by a few requests into the dispatch
                    server.call("GET", "whoami")
                crash(moment)
        if moment == "after-start":
            until(lambda n=starts: marks.count("start") > n, "a run to start", 60)
            crash(moment)
        elif moment == "after-end":
            until(lambda n=ends: marks.count("end") > n, "a run to end", 60)
            crash(moment)
        elif moment == "after-stop":
            until(lambda: stop_one(only_running=True), "a running long run to stop", 60)
            crash(moment)

    final = ("succeeded", "failed", "stopped")

    def settled() -> list[dict[str, Any]] | None:
        runs = all_runs(server)
        return runs if all(r["status"] in final for r in runs) else None

    runs = until(settled, "every run to end", 120)
    problems: list[str] = []

    # Every accepted run exists exactly once, and nothing else does.
    listed = collections.Counter(r["id"] for r in runs)
    problems += [f"run {i} is listed {n} times" for i, n in listed.items() if n != 1]
    problems += [f"accepted run {i} is missing" for i in submitted if i not in listed]
    problems += [f"run {i} exists but was never accepted" for i in listed if i not in submitted]

    started, ended = marks.of("start"), marks.of("end")
    details = {i: server.ok("GET", f"runs/{i}", "ops") for i in submitted}
    log_lines = points = 0
    for i, s in submitted.items():
        run = details[i]
        # One start per run (from the runs themselves), one dispatch episode on the timeline;
        # a run stopped early may have neither (stopped before dispatch, or before it got going).
        steps = [(e["status"], e["reason"], round(e["at"] - run["created_at"], 3)) for e in run["timeline"]]
        starts = len(started.get(i, []))
        dispatches = sum(1 for e in run["timeline"] if e["status"] == "dispatched")
        expected = (0, 1) if s.stop_accepted else (1,)
        if starts not in expected or dispatches not in expected or starts > dispatches:
            problems.append(f"run {i} started {starts} times {started.get(i)}, dispatched {dispatches}: {steps}")
        # The final status its script and the stops explain, with a sensible reason.
        if run["reason"] == "Lost":
            problems.append(f"run {i} is Lost although its process outlived the server: {run['message']}")
        if s.stop_accepted:
            ok = run["status"] == "stopped" or (run["status"] in ("succeeded", "failed") and i in ended)
        elif s.exit_code:
            ok = (
                run["status"] == "failed" and run["exit_code"] == s.exit_code and "exited with code 3" in run["message"]
            )
        else:
            ok = run["status"] == "succeeded" and run["exit_code"] == 0
        if not ok:
            problems.append(
                f"run {i} ended {run['status']} ({run['reason']}: {run['message']}), stop={s.stop_accepted}"
            )
        if i in started and not s.stop_accepted and i not in ended:
            problems.append(f"run {i} started but never marked its end: {steps}")
        # Every line it printed and every point it logged, served exactly once.
        done = ended[i][0].done if i in ended else 0
        if not s.stop_accepted and done != s.lines:
            problems.append(f"run {i} printed {done} of {s.lines} lines")
        log = server.ok("GET", f"runs/{i}/logs", "ops", format="text").decode()
        counted = collections.Counter(log.splitlines())
        for n in range(done):
            if counted[f"line {n}"] != 1:
                problems.append(f"run {i}: 'line {n}' is in its served log {counted[f'line {n}']} times")
        log_lines += done
        curves = server.ok("GET", f"runs/{i}/metrics", "ops", max_points="1000000")
        served = curves.get("loss", {}).get("steps", [])
        if served[:done] != list(range(done)) or served != sorted(set(served)):
            problems.append(f"run {i}: metric steps served {served}, printed {done}")
        points += done

    # No device held by two runs at once (lifetimes from the runs' own marks).
    spans = []
    for i in submitted:
        if i in started:
            begin = started[i][0]
            # A stop can land before the run's handler is set: then the platform's end stands in.
            end = ended[i][0].at if i in ended else details[i]["finished_at"]
            spans.append((i, set(begin.devices), begin.at, end))
    for a, (ia, da, sa, ea) in enumerate(spans):
        for ib, db, sb, eb in spans[a + 1 :]:
            if sa < eb and sb < ea and da & db:
                problems.append(f"runs {ia} and {ib} overlapped in time on devices {sorted(da & db)}")

    took = time.monotonic() - t0
    stops = sum(s.stop_accepted for s in submitted.values())
    print(
        f"crash loop (seed {SEED}): {len(kills)} kills {kills}, {len(submitted)} runs ({stops} stopped), "
        f"{log_lines} log lines and {points} metric points checked, {len(spans)} device spans, "
        f"{len(problems)} violations, {took:.1f} s"
    )
    assert len(kills) == KILLS
    assert not problems, "\n".join([*problems, f"kills at {list(zip(kills, killed_at, strict=True))}"])
