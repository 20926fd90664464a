"""`gpu_usage` kept on the record and listed, and insights' busy figures, through a real Jupyter server (issue 27).

This machine's local executor has declared GPUs and no NVML to read them, so a GPU run ends "not measured" and
says why: its record keeps that, GET runs lists it, and insights count it held but never measured (busy null).
(Measured figures: tests/engine/test_gpu_record.py and test_insights_gpu.py, NVML scripted at its boundary.)"""

from __future__ import annotations

import sys
import time
from typing import Any

from jupyter_gpuplat.service.schemas.insights import Insights

from ..waiting import wait_for


async def test_a_listed_run_carries_its_kept_gpu_usage_and_insights_say_not_measured(api: Any) -> None:
    since = f"{time.time() - 1:.6f}"
    rid = (
        await api.submit(name="g", queue="team-a-train", command=[sys.executable, "-c", "pass"], resources={"gpu": 1})
    )["id"]
    await api.wait_status(rid, "succeeded")

    async def listed() -> dict[str, Any] | None:
        page = await api.ok("GET", "runs")
        row = next(r for r in page["runs"] if r["id"] == rid)
        return row["gpu_usage"]

    kept = await wait_for(listed, 20, f"the gpu_usage of {rid} kept and listed")
    assert kept["measured"] is False and kept["reason"], kept
    assert (await api.run(rid))["gpu_usage"] == kept  # GET runs/{id} reads the same record
    out = await api.ok("GET", "insights", "ops", since=since)
    Insights.model_validate(out)
    total = out["total"]
    assert total["gpu_hours"] > 0 and out["busy_percent"] == 5.0
    assert (total["gpu_hours_measured"], total["gpu_hours_busy"], total["busy_fraction"]) == (0.0, None, None)
    assert out["idle_holders"] == []
