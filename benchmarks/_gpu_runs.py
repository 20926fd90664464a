"""The two workloads of gpu_check.py (what a run sees; a real matmul) and its harness over the real LocalExecutor.

Not part of the product: gpu_check.py imports this as `_gpu_runs` (its folder is on sys.path).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

from jupyter_gpuplat.core.request import Entrypoint
from jupyter_gpuplat.executors.base import LaunchRequest, Observation
from jupyter_gpuplat.executors.local.executor import LocalExecutor

# A run's view: its CUDA_VISIBLE_DEVICES, which /dev/nvidiaN it may open, what CUDA shows it, when it was alive.
PROBE = r"""
import errno, glob, json, os, time
out = {"pid": os.getpid(), "cvd": os.environ.get("CUDA_VISIBLE_DEVICES"), "nodes": {}, "cuda": None}
start = time.time()
for path in sorted(glob.glob("/dev/nvidia[0-9]*")):
    try:
        os.close(os.open(path, os.O_RDWR)); out["nodes"][path] = "ok"
    except OSError as e:
        out["nodes"][path] = errno.errorcode.get(e.errno, str(e.errno))
try:
    import torch
    n = torch.cuda.device_count()
    out["cuda"] = {"lib": "torch", "count": n,
                   "uuids": [str(getattr(torch.cuda.get_device_properties(i), "uuid", "?")) for i in range(n)]}
except ImportError:
    try:
        import cupy
        out["cuda"] = {"lib": "cupy", "count": cupy.cuda.runtime.getDeviceCount(), "uuids": []}
    except ImportError:
        pass
    except Exception as e:
        out["cuda"] = {"lib": "cupy", "count": 0, "error": repr(e), "uuids": []}
except Exception as e:
    out["cuda"] = {"lib": "torch", "count": 0, "error": repr(e), "uuids": []}
out["alive"] = [start, time.time() + 2]
print("PROBE " + json.dumps(out), flush=True)
time.sleep(2)  # both runs are up at once
"""
# A real matmul on the run's GPU for argv[1] seconds; "ready <pid>" once its memory is in use.
LOAD = r"""
import os, sys, time
seconds = float(sys.argv[1])
try:
    import torch
    a = torch.randn(8192, 8192, device="cuda"); b = torch.randn_like(a); sync = torch.cuda.synchronize
except ImportError:
    import cupy
    a = cupy.random.rand(8192, 8192, dtype=cupy.float32); b = cupy.random.rand(8192, 8192, dtype=cupy.float32)
    sync = cupy.cuda.Device().synchronize
c = a @ b; sync()
print("ready", os.getpid(), flush=True)
end = time.time() + seconds
while time.time() < end:
    for _ in range(10):
        c = a @ b
    sync()
print("done", flush=True)
"""


class Runs:
    """The real LocalExecutor; each run's final observation and output log."""

    def __init__(self, executor: LocalExecutor, root: str) -> None:
        self.executor, self.root = executor, root
        self.done: dict[str, asyncio.Event] = {}
        self.final: dict[str, Observation] = {}
        self.handles: dict[str, dict[str, Any]] = {}
        executor.set_observer(self._observe)

    def _observe(self, o: Observation) -> None:
        if o.final:
            self.final[o.run_id] = o
            self.done.setdefault(o.run_id, asyncio.Event()).set()

    async def submit(self, run_id: str, devices: tuple[int, ...], code: str, *args: str) -> None:
        argv = (sys.executable, "-c", code, *args)
        req = LaunchRequest(run_id, Entrypoint("command", argv=argv), {}, devices, os.path.join(self.root, run_id))
        self.done.setdefault(run_id, asyncio.Event())
        self.handles[run_id] = await self.executor.submit(req)

    async def wait(self, run_id: str, timeout: float = 300) -> Observation:
        await asyncio.wait_for(self.done[run_id].wait(), timeout)
        return self.final[run_id]

    def log(self, run_id: str) -> str:
        try:
            with open(self.executor.log_path(self.handles[run_id]), encoding="utf-8", errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def probe(self, run_id: str) -> dict[str, Any] | None:
        lines = [ln for ln in self.log(run_id).splitlines() if ln.startswith("PROBE ")]
        return json.loads(lines[-1][6:]) if lines else None


def ready_pid(log: str) -> int | None:
    lines = [ln.split() for ln in log.splitlines() if ln.startswith("ready ")]
    return int(lines[0][1]) if lines else None
