"""The GPU sampler's own overhead (executors/local/nvml.py), over the scripted FAKE NVML.

What this measures: our code's CPU per sample (handle cache, MIG check, the Sample objects, the
not-measured bookkeeping) plus the fake's Python calls, and the fake's calls alone, so the
difference is ours. What it does not: the driver's time inside libnvidia-ml, which only real
GPUs show (benchmarks/gpu_check.py measures the whole on them). Issue 27's target: sampling
8 devices every 10 s costs < 1% of one core on the server.

Run: python benchmarks/bench_gpu_sampler.py [--devices 8] [--samples 20000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _common import machine, table  # noqa: E402

from jupyter_gpuplat.executors.base import Device  # noqa: E402
from jupyter_gpuplat.executors.local.nvml import GpuSampler  # noqa: E402
from tests.fake_nvml import MIB, FakeGpu, FakeNvml  # noqa: E402

INTERVAL_SECONDS = 10.0


def per_call_seconds(fn: object, n: int) -> float:
    """CPU seconds of one call of `fn()`: this process's CPU time over n calls, divided by n."""
    assert callable(fn)
    start = time.process_time()
    for _ in range(n):
        fn()
    return (time.process_time() - start) / n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--devices", type=int, default=8)
    ap.add_argument("--samples", type=int, default=20_000)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    gpus = [
        FakeGpu(f"GPU-{i:08x}-fake", util_percent=50, memory_used_bytes=i * MIB, processes=[(1000 + i, MIB)])
        for i in range(args.devices)
    ]
    nvml = FakeNvml(list(reversed(gpus)))  # NVML's order differs from ours: found by UUID
    devices = [Device(i, g.name, 81_559, g.uuid, declared=False) for i, g in enumerate(gpus)]
    indices = list(range(args.devices))
    sampler = GpuSampler(devices, nvml=nvml)
    handles = [nvml.nvmlDeviceGetHandleByUUID(g.uuid) for g in gpus]

    def fake_only() -> None:  # the calls one sample makes, straight to the fake
        for h in handles:
            nvml.nvmlDeviceGetMigMode(h)
            nvml.nvmlDeviceGetUtilizationRates(h).gpu  # noqa: B018
            nvml.nvmlDeviceGetMemoryInfo(h).used  # noqa: B018

    def fake_procs() -> None:
        for h in handles:
            nvml.nvmlDeviceGetComputeRunningProcesses(h)

    cases = {
        "sample(): ours + fake": lambda: sampler.sample(indices),
        "the fake's calls alone": fake_only,
        "processes(): ours + fake": lambda: sampler.processes(indices),
        "the fake's process calls alone": fake_procs,
    }
    figures = {name: statistics.median(per_call_seconds(fn, args.samples) for _ in range(args.rounds))
               for name, fn in cases.items()}  # fmt: skip
    sampler.close()

    def row(name: str) -> list[str]:
        per = figures[name]
        return [name, f"{per * 1e6:.1f}", f"{per / INTERVAL_SECONDS * 100:.5f}"]

    print(f"# GPU sampler overhead over the FAKE NVML: {args.devices} devices, {machine()}")
    print(table(["per sample of all devices", "µs CPU", f"% of a core every {INTERVAL_SECONDS:.0f} s"],
                [row(n) for n in cases]))  # fmt: skip
    ours = figures["sample(): ours + fake"] - figures["the fake's calls alone"]
    print(f"\nours alone (sample() minus the fake's calls): {ours * 1e6:.1f} µs per {args.devices} devices, "
          f"{ours / INTERVAL_SECONDS * 100:.5f}% of a core every {INTERVAL_SECONDS:.0f} s (target < 1%, driver time "
          "not included: benchmarks/gpu_check.py)")  # fmt: skip


if __name__ == "__main__":
    main()
