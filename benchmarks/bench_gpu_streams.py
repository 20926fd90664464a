"""GPU sampling end to end through a real server: its CPU cost, and whether it delays a run's streams.

Issue 27's speed: "Sampling 8 devices every 10 s costs < 1% of one core on the server; a run's
samples add no latency to its log or metric streams."

Everything is real but the GPUs: two Jupyter servers with the extension (tests/server.py
`ServerProcess`), SQLite, the local executor starting real processes, the HTTP API. Both find 8
GPUs: a scripted `nvidia-smi` (LocalExecutor.nvidia_smi_path) lists them, and NVML is replaced at
the hardware boundary by the scripted FAKE of tests/fake_nvml.py (`FakeNvml`), installed inside
each server process by a `sitecustomize.py` first on its PYTHONPATH. (Declared GPUs,
`LocalExecutor.gpus`, are never sampled: the platform knows they are not real ones to read.)
So the driver's own time inside libnvidia-ml is NOT measured here; benchmarks/gpu_check.py
measures the sampler on real GPUs. What is measured: the engine's tick (the thread hop, our
sampler over the fake, the system metrics written to SQLite) and what it does to the rest.

The servers differ in one setting: `LocalExecutor.gpu_sample_seconds` = None (off) or
`--interval` (on; 0.5 s by default, so a window holds enough ticks to measure). Rounds alternate
which server goes first; the other server holds no GPU meanwhile, so it samples nothing.

1. CPU: `--runs` runs (`sleep`) hold all 8 devices on one server; its process's CPU time (user +
   system, psutil: /proc's 10 ms resolution) over a `--seconds` window, sampling off vs on. The
   ticks in the on window are counted from the samples stored (`count` of a run's
   `system/gpu<N>/util`). CPU per tick = (on − off) / ticks, scaled to the 10 s default: % of one
   core for 8 devices every 10 s.
2. Latency: `--runs` runs holding all 8 devices each write a log line and a tracking metric
   (jupyter_gpuplat.tracking) at `--rate` per second (random gaps, so arrivals do not lock to a
   poll's phase), each carrying its write time. A client follows each run's log stream
   (GET runs/{id}/logs, SSE; the server polls the file every 50 ms) and its metric curve
   (GET runs/{id}/metrics, polled every `--poll` s ± 50%: there is no metric push; the lab's
   chart polls every 5 s, a fast poll keeps the client's own period from hiding the server's
   part) and records arrival − write time. Target: sampling on / off p50 ≤ 1.10 for each.
3. Where a tick's CPU goes, in this process: the sampler over the fake, and the store write of
   a tick's points for series of growing length (a run's age: a series' last chunk, up to 16,384
   points, is read and rewritten on every append), and from it an estimate for a 44-hour run.

Run: python benchmarks/bench_gpu_streams.py [--rounds 3] [--seconds 10] [--interval 0.5] [--runs 2]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import textwrap
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import requests

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _common import machine, pct, table  # noqa: E402

from tests.server import ServerProcess  # noqa: E402
from tests.waiting import until  # noqa: E402

DEVICES = 8
DEFAULT_INTERVAL_SECONDS = 10.0  # LocalExecutor.gpu_sample_seconds' default: the figure the issue sets
TARGET_CPU_PERCENT = 1.0
TARGET_LATENCY_RATIO = 1.10
TICK_PARTS_TICKS = 50
LEAD_SECONDS = 2.0  # from submit to the first write: the runs start and the client connects meanwhile

PLATFORM = """
admins: [ops]
queues:
  - {name: bench, concurrency: 16, quota: {gpu: 8}}
projects:
  - name: bench
    members: {alice: admin}
    default_queue: bench
    allowed_queues: [bench]
    max_run_resources: {gpu: 8}
"""

# The scripted nvidia-smi: the 8 GPUs' index, name, memory (MiB), UUID, as the real one prints them.
NVIDIA_SMI = """#!/bin/sh
case "$*" in
  *pci.bus_id*) for i in 0 1 2 3 4 5 6 7; do echo "$i, 00000000:1$i:00.0"; done ;;
  *) for i in 0 1 2 3 4 5 6 7; do echo "$i, NVIDIA H100 80GB HBM3, 81559, GPU-0000000$i-fake"; done ;;
esac
"""

# Installed in the server process only (the variable is taken out of the environment at once, so
# the runs and launchers the server starts get the real, absent, NVML).
SITECUSTOMIZE = """
import os
if os.environ.pop("GPUPLAT_BENCH_FAKE_NVML", None):
    import sys
    from tests.fake_nvml import MIB, FakeGpu, FakeNvml
    gpus = [FakeGpu(f"GPU-0000000{i}-fake", util_percent=40 + 5 * i, memory_used_bytes=(i + 1) * 1024 * MIB)
            for i in range(8)]
    sys.modules["pynvml"] = FakeNvml(gpus)  # what GpuSampler imports: the hardware boundary, scripted
"""
FAKE_MEAN_UTIL = statistics.mean(40 + 5 * i for i in range(DEVICES))

# A measured run: from `start` (epoch seconds) for `seconds`, a log line and a metric point at
# random gaps averaging 1/rate, each carrying its write time (the metric as seconds after `start`).
WRITER = textwrap.dedent(
    """
    import random, sys, time
    from jupyter_gpuplat import tracking
    start, seconds, rate, seed = float(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
    rng = random.Random(seed)
    time.sleep(max(0.0, start - time.time()))
    step = 0
    while time.time() < start + seconds:
        print(f"w {step} {time.time():.6f}", flush=True)
        tracking.log_metrics(step=step, w=time.time() - start)
        step += 1
        time.sleep(rng.uniform(0.5, 1.5) / rate)
    print(f"done {step}", flush=True)
    """
)


# ---- servers ------------------------------------------------------------------------------
def start_server(root: Path, site: Path, interval: float | None) -> ServerProcess:
    settings = {"gpus": None, "nvidia_smi_path": str(site / "nvidia-smi"), "gpu_sample_seconds": interval}
    srv = ServerProcess(root, config_file=site / "platform.yaml", extra_config={"LocalExecutor": settings})
    srv.env["PYTHONPATH"] = os.pathsep.join([str(site), str(ROOT), srv.env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    srv.env["GPUPLAT_BENCH_FAKE_NVML"] = "1"
    srv.start()
    return srv


def submit(srv: ServerProcess, command: list[str], gpus: int, name: str) -> str:
    body = {"project": "bench", "name": name, "command": command, "resources": {"gpu": gpus}}
    return str(srv.ok("POST", "runs", body=body)["id"])


def hold_all(srv: ServerProcess, runs: int, command: list[str], name: str) -> list[str]:
    """`runs` runs that hold the 8 devices between them, running."""
    ids = [submit(srv, command, DEVICES // runs, f"{name}-{i}") for i in range(runs)]
    for rid in ids:
        srv.wait_status(rid, "running", timeout=60)
    held = sorted(d for rid in ids for d in srv.ok("GET", f"runs/{rid}")["devices"])
    assert held == list(range(DEVICES)), held
    return ids


def stop(srv: ServerProcess, ids: list[str]) -> None:
    for rid in ids:
        srv.call("POST", f"runs/{rid}/stop")
    for rid in ids:
        srv.wait_status(rid, "stopped", "succeeded", "failed", timeout=60)


def samples_stored(srv: ServerProcess, rid: str, device: int) -> int:
    curves = srv.ok("GET", f"runs/{rid}/metrics", names=f"system/gpu{device}/util", max_points=4)
    return int(curves[f"system/gpu{device}/util"]["count"]) if curves else 0


# ---- 1. CPU -------------------------------------------------------------------------------
@dataclass
class CpuWindow:
    cpu_seconds: float
    wall_seconds: float
    ticks: int


def cpu_window(srv: ServerProcess, runs: int, seconds: float) -> CpuWindow:
    ids = hold_all(srv, runs, ["sleep", "3600"], "hold")
    first = ids[0]
    device = srv.ok("GET", f"runs/{first}")["devices"][0]
    proc = psutil.Process(srv.proc.pid if srv.proc else 0)
    n0 = samples_stored(srv, first, device)
    c0, t0 = proc.cpu_times(), time.perf_counter()
    time.sleep(seconds)  # the measured window: nothing but the server's own loops runs
    c1, t1 = proc.cpu_times(), time.perf_counter()
    n1 = samples_stored(srv, first, device)
    stop(srv, ids)
    cpu = (c1.user + c1.system) - (c0.user + c0.system)
    return CpuWindow(cpu, t1 - t0, n1 - n0)


# ---- 2. latency ---------------------------------------------------------------------------
@dataclass
class Follow:
    """Arrival − write time of each line of a run's log and each point of its metric."""

    log: list[float] = field(default_factory=list)
    metric: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def follow_log(srv: ServerProcess, rid: str, out: Follow) -> None:
    url = f"{srv.url}gpuplat/api/runs/{rid}/logs"
    try:
        with requests.get(url, headers={"Authorization": "token tok-alice"}, stream=True, timeout=(10, 60)) as r:
            r.raise_for_status()
            buf = b""
            for chunk in r.iter_content(chunk_size=None):
                now = time.time()
                buf += chunk
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    if line.startswith(b"data: w "):
                        out.log.append(now - float(line.split()[3]))
                    elif line.startswith(b"event: end"):
                        return
    except Exception as exc:  # a benchmark reports a broken stream, it does not hang on it
        out.errors.append(f"log of {rid}: {exc!r}")


def follow_metric(srv: ServerProcess, rid: str, start: float, poll: float, seed: int, out: Follow) -> None:
    rng = random.Random(seed)
    session = requests.Session()
    session.headers["Authorization"] = "token tok-alice"
    url = f"{srv.url}gpuplat/api/runs/{rid}/metrics"
    seen, final = 0, False
    try:
        while True:
            r = session.get(url, params={"names": "w", "max_points": "1000000"}, timeout=30)
            now = time.time()
            r.raise_for_status()
            values = r.json().get("w", {}).get("values", [])
            out.metric += [now - (start + v) for v in values[seen:]]
            seen = len(values)
            if final:
                return
            # one more poll after the run ends: its last points are indexed by then
            final = srv.ok("GET", f"runs/{rid}")["status"] in ("succeeded", "failed", "stopped")
            time.sleep(poll * rng.uniform(0.5, 1.5))
    except Exception as exc:
        out.errors.append(f"metrics of {rid}: {exc!r}")
    finally:
        session.close()


def latency_window(srv: ServerProcess, runs: int, seconds: float, rate: float, poll: float, seed: int) -> Follow:
    start = time.time() + LEAD_SECONDS
    cmd = [sys.executable, "-c", WRITER, f"{start:.6f}", str(seconds), str(rate)]
    ids = [submit(srv, [*cmd, str(seed * 100 + i)], DEVICES // runs, f"write-{i}") for i in range(runs)]
    out = Follow()
    for rid in ids:
        srv.wait_status(rid, "running", timeout=60)
    threads = [threading.Thread(target=follow_log, args=(srv, rid, out)) for rid in ids]
    threads += [
        threading.Thread(target=follow_metric, args=(srv, rid, start, poll, seed * 100 + i, out))
        for i, rid in enumerate(ids)
    ]
    if time.time() > start:
        out.errors.append(f"the runs started {time.time() - start:.2f} s after their first write was due")
    for t in threads:
        t.start()
    for t in threads:
        t.join(seconds + 120)
    for rid in ids:
        srv.wait_status(rid, "succeeded", timeout=60)
    return out


# ---- 3. where a tick's CPU goes ------------------------------------------------------------
def tick_parts(root: Path, runs: int, lengths: list[int], ticks: int) -> dict[int, float]:
    """In this process, the same shapes as a tick: the sampler over the fake, and the store write of
    every held device's two points, for series already `length` points long (a run's age)."""
    import numpy as np

    from jupyter_gpuplat.core.gpu_usage import memory_name, util_name
    from jupyter_gpuplat.executors.base import Device
    from jupyter_gpuplat.executors.local.nvml import GpuSampler
    from jupyter_gpuplat.store import Store
    from tests.fake_nvml import MIB, FakeGpu, FakeNvml

    gpus = [FakeGpu(f"GPU-0000000{i}-fake", util_percent=50, memory_used_bytes=MIB) for i in range(DEVICES)]
    devices = [Device(i, g.name, 81_559, g.uuid, declared=False) for i, g in enumerate(gpus)]
    per = DEVICES // runs
    rows, writes = [], {}
    with GpuSampler(devices, nvml=FakeNvml(gpus)) as sampler:
        c = time.process_time()
        for _ in range(ticks):
            sampler.sample(range(DEVICES))
        rows.append(["sampler.sample(8 devices), fake NVML", "", f"{(time.process_time() - c) / ticks * 1e3:.3f}"])
    for length in lengths:
        store = Store(f"sqlite:///{root / f'parts-{length}.db'}")

        def points(n: int, at: int) -> dict[str, dict[str, tuple[Any, Any]]]:
            s, v = np.arange(at, at + n, dtype=np.int64), np.full(n, 50.0)
            return {f"r-{r}": {name(d): (s, v) for d in range(r * per, (r + 1) * per)
                               for name in (util_name, memory_name)} for r in range(runs)}  # fmt: skip

        if length:
            store.metrics.append_system(points(length, 0))
        c = time.process_time()
        for k in range(ticks):
            store.metrics.append_system(points(1, length + k))
        writes[length] = took = (time.process_time() - c) / ticks
        store.close()
        hours = length * DEFAULT_INTERVAL_SECONDS / 3600
        rows.append([f"store.metrics.append_system, {2 * DEVICES} series", f"{length:,} ({hours:.3g} h at 10 s)",
                     f"{took * 1e3:.3f}"])  # fmt: skip
    print(table(["one tick's part (CPU in this process)", "points already in each series", "ms per tick"], rows))
    return writes


# ---- report -------------------------------------------------------------------------------
def cpu_report(off: list[CpuWindow], on: list[CpuWindow], interval: float) -> float | None:
    per_tick = [(b.cpu_seconds - a.cpu_seconds) / b.ticks for a, b in zip(off, on, strict=True) if b.ticks]
    rows = []
    for label, ws in (("sampling off", off), ("sampling on", on)):
        pcts = [w.cpu_seconds / w.wall_seconds * 100 for w in ws]
        ticks = [w.ticks for w in ws]
        rows.append([label, f"{statistics.median(pcts):.2f}", f"{min(pcts):.2f}–{max(pcts):.2f}",
                     f"{statistics.median(ticks):.0f}"])  # fmt: skip
    print(table(["server process, runs holding 8 GPUs", "% of a core (median)", "rounds", "ticks"], rows))
    if not per_tick:
        print("no ticks were stored in the on windows: nothing to divide by")
        return None
    tick = statistics.median(per_tick)
    at_default = tick / DEFAULT_INTERVAL_SECONDS * 100
    verdict = "met" if at_default < TARGET_CPU_PERCENT else "NOT met"
    print(
        f"CPU per tick (on − off, per stored tick; 8 devices, fake NVML, store write included): "
        f"{tick * 1e3:.2f} ms (rounds {min(per_tick) * 1e3:.2f}–{max(per_tick) * 1e3:.2f}), at {interval:g} s"
    )
    print(f"→ every {DEFAULT_INTERVAL_SECONDS:g} s (the default): {at_default:.4f}% of one core "
          f"(target < {TARGET_CPU_PERCENT:g}%: {verdict}; NVML driver time not included)")  # fmt: skip
    return tick


def latency_report(off: list[Follow], on: list[Follow]) -> None:
    rows, verdicts = [], []
    for stream in ("log", "metric"):
        a = [x for f in off for x in getattr(f, stream)]
        b = [x for f in on for x in getattr(f, stream)]
        if not a or not b:
            print(f"{stream}: no arrivals recorded (off {len(a)}, on {len(b)})")
            continue
        ra = [statistics.median(getattr(f, stream)) for f in off if getattr(f, stream)]
        rb = [statistics.median(getattr(f, stream)) for f in on if getattr(f, stream)]
        ratio50, ratio90 = pct(b, 50) / pct(a, 50), pct(b, 90) / pct(a, 90)
        ok = ratio50 <= TARGET_LATENCY_RATIO
        verdicts.append(f"{stream} {'met' if ok else 'NOT met'}")
        for label, xs, rs in (("off", a, ra), ("on", b, rb)):
            rows.append([f"{stream} stream, sampling {label}", len(xs), f"{pct(xs, 50) * 1e3:.1f}",
                         f"{pct(xs, 90) * 1e3:.1f}", f"{min(rs) * 1e3:.1f}–{max(rs) * 1e3:.1f}",
                         f"{ratio50:.2f} / {ratio90:.2f}" if label == "on" else ""])  # fmt: skip
    print(table(["arrival − write", "n", "p50 ms", "p90 ms", "round p50s", "on/off p50 / p90"], rows))
    print(f"target: on/off p50 ≤ {TARGET_LATENCY_RATIO:.2f} for each stream: {', '.join(verdicts)}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3, help="off/on pairs of parts 1 and 2 (order alternates)")
    ap.add_argument("--seconds", type=float, default=10.0, help="length of each measured window")
    ap.add_argument("--interval", type=float, default=0.5, help="gpu_sample_seconds of the sampling server")
    ap.add_argument("--runs", type=int, default=2, choices=(1, 2, 4, 8), help="runs sharing the 8 GPUs")
    ap.add_argument("--rate", type=float, default=20.0, help="log lines and metric points per second per run")
    ap.add_argument("--poll", type=float, default=0.05, help="seconds between the client's metric polls (±50%%)")
    ap.add_argument("--only", choices=("cpu", "latency", "parts"), help="one part only")
    args = ap.parse_args()
    print(machine())
    print(f"NVML is the scripted FAKE (tests/fake_nvml.py) inside each server: driver time not measured "
          f"(benchmarks/gpu_check.py does, on real GPUs). {DEVICES} GPUs, {args.runs} runs of "
          f"{DEVICES // args.runs}, sampling every {args.interval:g} s when on.")  # fmt: skip
    per_tick: float | None = None
    with tempfile.TemporaryDirectory(prefix="bench-gpu-streams-") as tmp:
        if args.only != "parts":
            per_tick = through_servers(Path(tmp), args)
        if args.only in (None, "parts"):
            print(f"\n3. where a tick's CPU goes, by the age of the run's series (in this process, "
                  f"{args.runs} runs of {DEVICES // args.runs} GPUs, {TICK_PARTS_TICKS} ticks each)")  # fmt: skip
            writes = tick_parts(Path(tmp), args.runs, [0, 360, 8_640, 16_000], TICK_PARTS_TICKS)
            if per_tick is not None:
                # the server's runs were young: add what a series near a full chunk costs the write more
                worst = per_tick + writes[16_000] - writes[0]
                verdict = "met" if worst / DEFAULT_INTERVAL_SECONDS * 100 < TARGET_CPU_PERCENT else "NOT met"
                print(f"→ a run ~44 h old (16,000 points a series): ~{worst * 1e3:.1f} ms a tick, "
                      f"{worst / DEFAULT_INTERVAL_SECONDS * 100:.3f}% of one core every "
                      f"{DEFAULT_INTERVAL_SECONDS:g} s (target < {TARGET_CPU_PERCENT:g}%: {verdict})")  # fmt: skip


def through_servers(tmp: Path, args: argparse.Namespace) -> float | None:
    """Parts 1 and 2; the CPU per tick measured in part 1 (None when not run)."""
    site = tmp / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    (site / "nvidia-smi").write_text(NVIDIA_SMI)
    (site / "nvidia-smi").chmod(0o755)
    (site / "platform.yaml").write_text(PLATFORM)
    servers = {"off": start_server(tmp / "off", site, None), "on": start_server(tmp / "on", site, args.interval)}
    per_tick = None
    try:
        check_fake(servers["on"], servers["off"])
        order = [("off", "on") if r % 2 == 0 else ("on", "off") for r in range(args.rounds)]
        if args.only in (None, "cpu"):
            cpu: dict[str, list[CpuWindow]] = {"off": [], "on": []}
            for pair in order:
                for side in pair:
                    cpu[side].append(cpu_window(servers[side], args.runs, args.seconds))
            print(f"\n1. CPU of the server process over {args.seconds:g} s windows, {args.rounds} rounds")
            per_tick = cpu_report(cpu["off"], cpu["on"], args.interval)
        if args.only in (None, "latency"):
            lat: dict[str, list[Follow]] = {"off": [], "on": []}
            for r, pair in enumerate(order):
                for side in pair:
                    f = latency_window(servers[side], args.runs, args.seconds, args.rate, args.poll, r)
                    for e in f.errors:
                        print(f"   ({side}, round {r + 1}) {e}")
                    lat[side].append(f)
            print(f"\n2. stream latency, {args.runs} runs × {args.rate:g} lines and points/s, {args.seconds:g} s "
                  f"windows, {args.rounds} rounds; metric polled every {args.poll:g} s ± 50%")  # fmt: skip
            latency_report(lat["off"], lat["on"])
    finally:
        for srv in servers.values():
            srv.stop_all_runs()
            srv.stop()
    return per_tick


def check_fake(on: ServerProcess, off: ServerProcess) -> None:
    """The samples come from the fake through the whole path, and the off server takes none."""
    ids = hold_all(on, 1, ["sleep", "3600"], "check")
    rid = ids[0]
    until(lambda: samples_stored(on, rid, 0) >= 2, "two ticks stored on the sampling server", 30)
    usage = on.ok("GET", f"runs/{rid}")["gpu_usage"]
    stop(on, ids)
    ids = hold_all(off, 1, ["sleep", "3600"], "check")
    off_usage = off.ok("GET", f"runs/{ids[0]}")["gpu_usage"]
    stop(off, ids)
    print(f"check: on → gpu_usage mean_util {usage['mean_util']} (the fake's 8 devices: {FAKE_MEAN_UTIL:g}), "
          f"{usage['samples']} samples; off → {json.dumps(off_usage['reason'])}")  # fmt: skip


if __name__ == "__main__":
    main()
