"""Issue 27's real-GPU check: what the GPU sampler and the local executor do on real NVIDIA GPUs.

    python benchmarks/gpu_check.py [--load-seconds 12] [--nvidia-smi PATH]

Runs in a minute or two and needs only this package installed (nvidia-ml-py comes with it) and
the NVIDIA driver; torch or cupy, if this Python has one, for the load rows (skipped and said so
without). No network. Rows (check, expected, got, ok), in order:

1. discovery: nvidia-smi (executors/local/gpus.py) and NVML agree on count, names, UUIDs; NVML
   finds each nvidia-smi UUID; each device's flavor by name (core/flavors.py) against stock types;
2. two concurrent runs through the real LocalExecutor, on disjoint devices: their
   CUDA_VISIBLE_DEVICES, what CUDA shows each (torch/cupy), and the device restriction (a run
   opens its own /dev/nvidiaN and gets EPERM on another's, where capacity.isolation says the
   devices cgroup holds; skipped with its reason where it does not);
3. samples from GpuSampler (executors/local/nvml.py) while a real matmul runs as a run, its
   memory per process, the run's gpu_usage summary, and after it ends (utilisation drops);
4. the sampler's cost: CPU seconds per sample of every device, as % of one core for 8 GPUs every 10 s;
5. GPU sessions judged idle by GPU use (`termination.idle_by: gpu`, _gpu_session.py): the product's engine
   over the real executor, sampling every second; a session whose GPU idles is warned and ended
   (IdleTimeout naming the GPU), one whose GPU a real matmul keeps busy outlives the idle limit with
   its kernel idle, and ends once the matmul is done.

Exit: 0 every check held (skipped and not-built rows say why), 1 a check missed, 2 no GPU on
this machine (what could be checked without one is printed: the sampler says "not measured" and
why, and the executor's two runs get disjoint CUDA_VISIBLE_DEVICES on two declared GPUs).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import importlib.util
import os
import signal
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _gpu_runs import LOAD, PROBE, Runs, ready_pid
from _gpu_session import sessions_judged_by_gpu

from jupyter_gpuplat.core.config import FlavorConfig, PlatformConfig
from jupyter_gpuplat.core.flavors import device_flavors
from jupyter_gpuplat.core.gpu_usage import NotMeasured, Sample, summary
from jupyter_gpuplat.executors.base import Device
from jupyter_gpuplat.executors.local.executor import LocalExecutor
from jupyter_gpuplat.executors.local.gpus import detect_gpus
from jupyter_gpuplat.executors.local.nvml import GpuSampler

MIB = 1 << 20
# Stock GPU types, more specific first ("GH200" holds "H200", "L40S" holds "L4", "A100" holds "A10").
STOCK_TYPES = ["GH200", "GB200", "B200", "H200", "H100", "H800", "A100", "A800", "A10G", "A10", "L40S", "L40", "L4"]
STOCK_TYPES += ["V100", "T4", "RTX"]


@dataclass
class Rows:
    rows: list[tuple[str, str, str, str]] = field(default_factory=list)

    def add(self, check: str, expected: str, got: str, ok: bool | str) -> None:
        """`ok`: True/False, or a word for a row that is neither (skip, not built, no GPU)."""
        self.rows.append((check, expected, got, ("ok" if ok else "MISS") if isinstance(ok, bool) else ok))

    @property
    def misses(self) -> int:
        return sum(r[3] == "MISS" for r in self.rows)

    def print(self) -> None:
        head = ("check", "expected", "got", "ok")
        widths = [min(60, max(len(h), *(len(r[i]) for r in self.rows))) for i, h in enumerate(head)]
        for r in [head, tuple("-" * w for w in widths), *self.rows]:
            print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())


def norm(uuid: str | None) -> str:
    return (uuid or "").lower().removeprefix("gpu-")


def discovery(rows: Rows, devices: list[Device], nvml: Any) -> None:
    rows.add("nvidia-smi finds GPUs", ">= 1", f"{len(devices)}: " + ", ".join(sorted({d.name for d in devices})), True)
    n = nvml.nvmlDeviceGetCount()
    rows.add("NVML count = nvidia-smi's", str(len(devices)), str(n), n == len(devices))
    names, uuids, by_uuid = [], [], []
    for d in devices:
        h = nvml.nvmlDeviceGetHandleByIndex(d.index)
        names.append((d.index, d.name, nvml.nvmlDeviceGetName(h)))
        uuids.append((d.index, d.uuid, nvml.nvmlDeviceGetUUID(h)))
        try:
            by_uuid.append((d.index, nvml.nvmlDeviceGetUUID(nvml.nvmlDeviceGetHandleByUUID(d.uuid or ""))))
        except nvml.NVMLError as exc:
            by_uuid.append((d.index, f"error: {exc}"))
    bad = [f"GPU{i}: {a!r} vs {b!r}" for i, a, b in names if a != b]
    rows.add("names agree by index", "same", "; ".join(bad) or f"same ({len(names)})", not bad)
    bad = [f"GPU{i}: {a} vs {b}" for i, a, b in uuids if a != b]
    rows.add("UUIDs agree by index", "same", "; ".join(bad) or f"same ({len(uuids)})", not bad)
    bad = [f"GPU{i}: {u}" for (i, u), d in zip(by_uuid, devices, strict=True) if u != d.uuid]
    rows.add("NVML finds nvidia-smi's UUIDs", "each", "; ".join(bad) or "each", not bad)
    cfg = PlatformConfig(flavors=[FlavorConfig(name=t.lower(), gpu_type=t) for t in STOCK_TYPES])
    typed = device_flavors(cfg, ((d.index, d.name) for d in devices))
    got = ", ".join(f"GPU{d.index}→{typed.get(d.index, 'none')}" for d in devices)
    rows.add("flavor by name (stock types)", "every GPU typed", got, len(typed) == len(devices))
    mig = []
    for d in devices:
        try:
            mig.append(f"GPU{d.index}:{nvml.nvmlDeviceGetMigMode(nvml.nvmlDeviceGetHandleByIndex(d.index))[0]}")
        except nvml.NVMLError_NotSupported:
            mig.append(f"GPU{d.index}:n/a")
    rows.add("MIG mode (info)", "-", " ".join(mig), "info")


async def two_runs(rows: Rows, runs: Runs, ours: list[Device], gpu_here: bool) -> None:
    a_dev = (ours[0].index,)
    b_dev = (ours[1].index,) if len(ours) > 1 else ()
    await runs.submit("probe-a", a_dev, PROBE)
    await runs.submit("probe-b", b_dev, PROBE)
    await asyncio.gather(runs.wait("probe-a"), runs.wait("probe-b"))
    a, b = runs.probe("probe-a"), runs.probe("probe-b")
    if a is None or b is None:
        tail = (runs.log("probe-a") + runs.log("probe-b"))[-300:]
        rows.add("two concurrent runs", "both print their view", f"no probe output: {tail!r}", False)
        return
    want = (",".join(map(str, a_dev)), ",".join(map(str, b_dev)))
    got = (a["cvd"], b["cvd"])
    disjoint = not set(filter(None, got[0].split(","))) & set(filter(None, got[1].split(",")))
    together = a["alive"][0] < b["alive"][1] and b["alive"][0] < a["alive"][1]
    rows.add("CUDA_VISIBLE_DEVICES, 2 runs", f"a={want[0]!r} b={want[1]!r}, at once",
             f"a={got[0]!r} b={got[1]!r}, {'at once' if together else 'one after the other'}",
             got == want and disjoint and together)  # fmt: skip
    if not gpu_here:
        return
    cuda = a["cuda"]
    if cuda is None:
        rows.add("CUDA sees only its GPU", "a: 1 device", "not available: neither torch nor cupy importable", "skip")
    else:
        uuid_ok = not cuda.get("uuids") or norm(cuda["uuids"][0]) == norm(ours[0].uuid)
        got_s = f"a: {cuda['count']} {cuda['lib']} device(s) {cuda.get('uuids')} {cuda.get('error', '')}".strip()
        rows.add("CUDA sees only its GPU", f"a: 1 device, {ours[0].uuid}", got_s, cuda["count"] == 1 and uuid_ok)
        bc = b["cuda"] or {}
        rows.add("run b's CUDA count", str(len(b_dev)), str(bc.get("count")), bc.get("count") == len(b_dev))
    nodes_check(rows, runs, ours, {"a": (a, a_dev), "b": (b, b_dev)})


def nodes_check(rows: Rows, runs: Runs, ours: list[Device], seen: dict[str, Any]) -> None:
    control = next(c for c in runs.executor.isolation()["controls"] if c["name"] == "gpu_devices")
    minor = {d.index: d.minor if d.minor is not None else d.index for d in ours}
    wrong, got = [], []
    for name, (probe, devs) in seen.items():
        own = {f"/dev/nvidia{minor[i]}" for i in devs}
        for path, result in probe["nodes"].items():
            got.append(f"{name}:{path.removeprefix('/dev/')}={result}")
            if (result == "ok") != (path in own):
                wrong.append(path)
    if not got:
        rows.add("device restriction", "own node opens, others EPERM", "no /dev/nvidiaN here", "skip")
    elif not control["enforced"]:
        rows.add("device restriction", f"not enforced here: {control['detail'][:80]}", " ".join(got), "skip")
    else:
        rows.add("device restriction", "own node opens, others EPERM", " ".join(got), not wrong)


async def load(rows: Rows, runs: Runs, ours: list[Device], seconds: float) -> None:
    dev = ours[0].index
    sampler = GpuSampler(ours)
    before = sampler.sample([dev])
    lib = next((m for m in ("torch", "cupy") if importlib.util.find_spec(m)), None)
    if lib is None or isinstance(before, NotMeasured):
        why = "not available: neither torch nor cupy importable" if lib is None else f"not measured: {before}"
        for check in ("utilisation under matmul", "memory under matmul", "per-process memory", "gpu_usage under load"):
            rows.add(check, "-", why, "skip" if lib is None else False)
    else:
        await runs.submit("gpu-load", (dev,), LOAD, str(seconds))
        deadline = time.monotonic() + 180
        while (pid := ready_pid(runs.log("gpu-load"))) is None and time.monotonic() < deadline:
            if "gpu-load" in runs.final:
                break
            await asyncio.sleep(0.2)
        if pid is None:
            final = await runs.wait("gpu-load")
            tail = runs.log("gpu-load").strip()[-200:]
            rows.add("matmul run", "starts its matmul", f"{final.status}: {tail!r}", False)
            pid = -1
        await asyncio.sleep(1.0)  # NVML's utilisation is a mean over its last sample period
        samples: list[Sample] = []
        procs: Any = None
        while "gpu-load" not in runs.final:
            got = sampler.sample([dev])
            samples += got if isinstance(got, list) else []
            procs = sampler.processes([dev]) if procs is None else procs
            await asyncio.sleep(0.5)
        final = await runs.wait("gpu-load")
        busy = samples[:-2]  # the last ones may fall after the loop ended
        mean = sum(s.util_percent for s in busy) / len(busy) if busy else 0.0
        rows.add("utilisation under matmul", ">= 50%", f"mean {mean:.0f}% of {len(busy)} ({lib}; {final.status})",
                 mean >= 50)  # fmt: skip
        assert isinstance(before, list)
        rise = max((s.memory_bytes for s in busy), default=0) - before[0].memory_bytes
        rows.add("memory under matmul", ">= +256 MiB", f"{rise / MIB:+.0f} MiB", rise >= 256 * MIB)
        mine = [p for p in procs if p.pid == pid] if isinstance(procs, list) else []
        seen = procs.reason if isinstance(procs, NotMeasured) else [(p.pid, p.memory_bytes) for p in procs or []]
        rows.add("per-process memory", f"pid {pid} listed, > 0 B", str(mine or seen)[:60],
                 bool(mine) and (mine[0].memory_bytes or 0) > 0)  # fmt: skip
        usage = summary(busy, interval_seconds=0.5)
        rows.add("gpu_usage under load", "busy_fraction >= 0.8", f"{usage.get('busy_fraction')} "
                 f"(mean {usage.get('mean_util')}%)", float(usage.get("busy_fraction") or 0) >= 0.8)  # type: ignore[arg-type]  # fmt: skip
    await asyncio.sleep(2.0)
    idle: list[Sample] = []
    for _ in range(6):
        got = sampler.sample([dev])
        idle += got if isinstance(got, list) else []
        await asyncio.sleep(0.5)
    mean = sum(s.util_percent for s in idle) / len(idle) if idle else -1
    rows.add("utilisation idle (after)", "<= 10%", f"mean {mean:.0f}% of {len(idle)}", 0 <= mean <= 10)
    sampler.close()


def cost(rows: Rows, ours: list[Device], rounds: int = 200) -> None:
    indices = [d.index for d in ours]
    with GpuSampler(ours) as sampler:
        for fn, what in ((sampler.sample, "sample"), (lambda i: (sampler.sample(i), sampler.processes(i)), "+procs")):
            fn(indices)
            cpu, wall = time.process_time(), time.perf_counter()
            for _ in range(rounds):
                fn(indices)
            per = (time.process_time() - cpu) / rounds
            wall = (time.perf_counter() - wall) / rounds
            pct = per / len(indices) * 8 / 10 * 100
            got = f"{per * 1e6:.0f} µs CPU ({wall * 1e6:.0f} µs wall) per {len(indices)} GPUs → {pct:.4f}%"
            rows.add(f"sampler cost ({what})", "< 1% of a core, 8 GPUs/10 s", got, pct < 1.0)


async def through_executor(rows: Rows, root: str, args: argparse.Namespace, gpu_here: bool) -> None:
    executor = LocalExecutor(gpus=None if gpu_here else 2, nvidia_smi_path=args.nvidia_smi)
    runs = Runs(executor, root)
    try:
        ours = executor.devices()
        await two_runs(rows, runs, ours, gpu_here)
        if gpu_here:
            await load(rows, runs, ours, args.load_seconds)
    except Exception as exc:  # the rows so far still print; this one says where it broke
        rows.add("runs through LocalExecutor", "no error", f"{type(exc).__name__}: {exc}"[:200], False)
    finally:
        await executor.close()
        for run_id, handle in runs.handles.items():  # nothing of ours outlives the check
            if run_id not in runs.final:
                with contextlib.suppress(OSError):
                    os.killpg(int(handle["pid"]), signal.SIGKILL)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--load-seconds", type=float, default=12.0, help="how long the matmul run works")
    ap.add_argument("--nvidia-smi", default="nvidia-smi", help="the nvidia-smi to ask (as LocalExecutor's)")
    args = ap.parse_args(argv)
    rows = Rows()
    devices = detect_gpus(args.nvidia_smi)
    probe = GpuSampler(devices)
    gpu_here = bool(devices) and probe.not_measured is None
    if not devices:
        rows.add("nvidia-smi finds GPUs", ">= 1", "none (missing, failed or no GPU)", "no GPU")
    if probe.not_measured is not None:
        ok: bool | str = "no GPU" if not devices else False
        rows.add("NVML opens", "nvmlInit succeeds", probe.not_measured.reason, ok)
        got = probe.sample([0])
        rows.add("sampler without NVML", "not measured, says why", str(getattr(got, "reason", got)),
                 isinstance(got, NotMeasured))  # fmt: skip
    elif devices:
        nvml = importlib.import_module("pynvml")
        rows.add("NVML opens", "nvmlInit succeeds", f"driver {nvml.nvmlSystemGetDriverVersion()}", True)
        discovery(rows, devices, nvml)
    probe.close()
    with tempfile.TemporaryDirectory(prefix="gpu-check-") as root:
        asyncio.run(through_executor(rows, root, args, gpu_here))
    if gpu_here:
        cost(rows, devices)
        lib = next((m for m in ("torch", "cupy") if importlib.util.find_spec(m)), None)
        with tempfile.TemporaryDirectory(prefix="gpu-check-sessions-") as root:
            asyncio.run(sessions_judged_by_gpu(rows.add, root, args.nvidia_smi, LOAD if lib else None))
    else:
        rows.add("GPU sessions judged by GPU use", "-", "no GPU: not checked", "no GPU")
    rows.print()
    if not gpu_here:
        print("\nno GPU on this machine: only the rows above could be checked (exit 2)")
        return 2
    print(f"\n{rows.misses} miss(es)" if rows.misses else "\nevery check held")
    return 1 if rows.misses else 0


if __name__ == "__main__":
    sys.exit(main())
