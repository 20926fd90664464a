"""gpu_check.py's session rows: a GPU session judged idle by GPU use (`termination.idle_by: gpu`), for real.

The product's own engine (real SQLite store, the real LocalExecutor with its GPU sampling every
second, the session's real kernel agent and ipykernel) holds two sessions of one GPU each, with a
short idle limit. Their kernels stay idle; what the provisioner would report ("ready", "idle") is
reported as it reports it. One session's GPU stays idle: it must be warned, then ended
(IdleTimeout) with a message that names the GPU signal. The other's GPU is kept busy by a real
matmul on its device (a process beside the kernel, as a background thread left running would):
with its kernel idle it must still be running after the idle limit — then, once the matmul ends,
it must be ended too.

Not part of the product: gpu_check.py imports this as `_gpu_session` (its folder is on sys.path).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

from jupyter_gpuplat.core.config import parse_config
from jupyter_gpuplat.core.request import RunRequest
from jupyter_gpuplat.engine.engine import Engine
from jupyter_gpuplat.executors.local.executor import LocalExecutor
from jupyter_gpuplat.store import Store

IDLE_SECONDS = 20  # warned 2 s before (10%), ended at 20 s of an idle GPU
SAMPLE_SECONDS = 1.0

Row = Callable[[str, str, str, "bool | str"], None]


def _config() -> Any:
    return parse_config(
        {
            "admins": ["ops"],
            "queues": [{"name": "q"}],
            "projects": [{"name": "p", "members": {"bob": "member"}}],
        }
    )


def _lease(engine: Engine) -> str:
    body = {
        "project": "p",
        "queue": "q",
        "kind": "session",
        "resources": {"gpu": 1},
        "termination": {"idle_seconds": IDLE_SECONDS, "idle_by": "gpu"},
    }
    return str(engine.submit("bob", RunRequest.model_validate(body))["id"])


async def _until(cond: Callable[[], Any], seconds: float) -> Any:
    """Poll `cond` each 0.25 s for up to `seconds` (a check against wall-clock GPU behaviour, not a test)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if got := cond():
            return got
        await asyncio.sleep(0.25)
    return cond()


async def sessions_judged_by_gpu(add: Row, root: str, nvidia_smi: str, load: str | None) -> None:
    """The rows; `load`: the matmul workload's code (None: neither torch nor cupy here, that part skipped)."""
    store = Store(f"sqlite:///{root}/sessions.db")
    executor = LocalExecutor(gpus=None, nvidia_smi_path=nvidia_smi, gpu_sample_seconds=SAMPLE_SECONDS)
    engine = Engine(store, executor, artifacts_root=os.path.join(root, "artifacts"))
    matmul: subprocess.Popen[bytes] | None = None
    try:
        await engine.start(_config(), source="gpu-check", by="gpu-check")
        idle, busy = _lease(engine), _lease(engine) if load else None
        ids = [r for r in (idle, busy) if r]
        running = await _until(lambda: all(_row(store, r)["status"] == "running" for r in ids), 120)
        if not running:
            add("GPU session starts", "running", " ".join(_row(store, r)["status"] for r in ids), False)
            return
        for rid in ids:  # as the kernel provisioner reports a kernel that answered and sits idle
            engine.session_report("bob", rid, "ready", f"k-{rid}")
            engine.session_report("bob", rid, "idle", f"k-{rid}")
        if busy is not None and load is not None:
            device = str(_row(store, busy)["devices"][0])
            env = {**os.environ, "CUDA_VISIBLE_DEVICES": device}
            matmul = subprocess.Popen([sys.executable, "-c", load, str(IDLE_SECONDS * 2)], env=env)
        ended = await _until(lambda: _row(store, idle)["status"] != "running", IDLE_SECONDS + 30)
        row = _row(store, idle)
        warned = any(e["reason"] == "IdleWarning" for e in row["timeline"])
        add("idle GPU session warned", "IdleWarning before the end", "yes" if warned else "no", warned)
        said = f"{row['status']} {row['reason']}: {row['message']}"
        ok = bool(ended) and row["reason"] == "IdleTimeout" and "util <" in str(row["message"])
        add("idle GPU session ended by GPU use", "IdleTimeout naming the GPU", said[:90], ok)
        if busy is None:
            add("busy GPU keeps an idle kernel's session", "-", "skipped: neither torch nor cupy importable", "skip")
            return
        kept = _row(store, busy)
        add("busy GPU keeps an idle kernel's session", "running past the idle limit", kept["status"],
            kept["status"] == "running")  # fmt: skip
        assert matmul is not None
        matmul.wait(timeout=IDLE_SECONDS * 3)
        later = await _until(lambda: _row(store, busy)["status"] != "running", IDLE_SECONDS + 30)
        row = _row(store, busy)
        add("…then ended once the GPU idles", "IdleTimeout", f"{row['status']} {row['reason']}",
            bool(later) and row["reason"] == "IdleTimeout")  # fmt: skip
    finally:
        if matmul is not None and matmul.poll() is None:
            matmul.kill()
        for rid in list(engine.active):
            try:
                await engine.stop("ops", rid)
            except Exception:  # ending what is left: the rows already say what happened
                pass
        await engine.close()
        await executor.close()
        store.close()


def _row(store: Store, run_id: str) -> dict[str, Any]:
    row = store.get_run(run_id)
    assert row is not None
    return row
