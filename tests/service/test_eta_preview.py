"""Issue 26, before the run exists: the submit preview says when it would start, and lists the ways to start
sooner the policy accepts (another allowed queue, fewer GPUs), each with its own estimate."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from ..conftest import EXAMPLE
from ..waiting import wait_for

PY = sys.executable
SLEEP = [PY, "-c", "import time; time.sleep(600)"]
LIMIT = 600


@pytest.fixture
def platform_config_file(tmp_path: Path) -> Path:
    cfg = yaml.safe_load(EXAMPLE.read_text())
    # busy: one run at a time, 2 GPUs; spare: 1 GPU, empty.
    cfg["queues"].append({"name": "busy", "concurrency": 1, "quota": {"gpu": 2}})
    cfg["queues"].append({"name": "spare", "quota": {"gpu": 1}})
    team_a = next(p for p in cfg["projects"] if p["name"] == "team-a")
    team_a["allowed_queues"] = ["busy", "spare"]
    team_a["allowed_presets"] = [p for p in team_a["allowed_presets"] if p in ("single-gpu", "multi-gpu")]
    team_a.pop("default_queue", None)
    team_a.pop("default_presets", None)
    path = tmp_path / "platform.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


async def test_preview_estimates_the_run_and_offers_sooner_ways(api: Any) -> None:
    timed = {"termination": {"timeout_seconds": LIMIT}, "resources": {"gpu": 2}}
    holder = await api.submit(name="holder", queue="busy", command=SLEEP, **timed)
    await api.wait_status(holder["id"], "running")
    body = {"project": "team-a", "queue": "busy", "command": SLEEP, **timed}

    async def estimated() -> dict[str, Any] | None:
        p = await api.ok("POST", "runs/preview", "alice", body)
        return p if p["eta"] and p["eta"]["p50_seconds"] > LIMIT - 60 else None

    p = await wait_for(estimated, 20, "a preview estimate behind the holder")
    assert p["eta"]["text"] == "starts in ~10 min (p90 10 min)", p["eta"]
    assert p["eta_unknown"] is None
    # 2 GPUs in spare never fit (its quota is 1), and 1 GPU in busy still waits for the holder's slot: the one
    # way to start sooner is both.
    (alt,) = p["alternatives"]
    assert alt["hint"] == "use queue spare and ask for 1 GPU instead of 2", alt
    assert alt["changes"] == {"queue": "spare", "resources": {"gpu": 1}}
    assert alt["eta"]["text"] == "starts now", alt
    # Nothing waits on an empty queue: no estimate to beat, no alternatives.
    free = await api.ok("POST", "runs/preview", "alice", {**body, "queue": "spare", "resources": {"gpu": 1}})
    assert free["eta"]["text"] == "starts now" and free["alternatives"] == []
