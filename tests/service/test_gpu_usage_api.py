"""A run's GPU use through a real Jupyter server (issue 27): GET runs/{id} and compare carry the server's text;
`gpu_usage` is kept on the record and listed; insights' busy figures.

NVML is hardware: the samples it would give are written as the sampler writes them
(tests/gpu_samples.py) — the only part faked. The server's declared GPUs have no NVML to read,
so a run with no samples ends "not measured" and says why: its record keeps that, GET runs lists it,
and insights count it held but never measured (busy null). (Measured figures: tests/engine/test_gpu_record.py
and test_insights_gpu.py, NVML scripted at its boundary.)
"""

from __future__ import annotations

import sys
import time
from typing import Any

from jupyter_gpuplat.service.schemas.insights import Insights

from ..gpu_samples import GiB, write_samples
from ..waiting import wait_for

SLEEP = [sys.executable, "-c", "import time; time.sleep(60)"]


async def test_run_and_compare_carry_the_servers_words(api: Any, platform: Any) -> None:
    sampled = await api.submit(name="sampled", command=SLEEP, resources={"gpu": 1})
    blind = await api.submit(name="blind", command=SLEEP, resources={"gpu": 1})
    cpu = await api.submit(name="cpu", command=SLEEP, resources={"gpu": 0})
    for r in (sampled, blind):  # the queue runs two at once: the CPU run may wait (it holds no GPU either way)
        await api.wait_status(r["id"], "running")
    device = (await api.run(sampled["id"]))["devices"][0]
    write_samples(platform.store, sampled["id"], device, [90.0, 90.0, 90.0, 2.0], [GiB, 3 * GiB, 2 * GiB, GiB])

    usage = (await api.run(sampled["id"]))["gpu_usage"]
    # 4 samples of 10 s, 3 at or over 5%: busy 30 of 40 s; mean (3·90 + 2) / 4 = 68%.
    assert usage["text"] == "GPU busy 75% of 40 s · mean util 68% · memory peak 3.0 GiB"
    assert (usage["busy_text"], usage["memory_peak_text"]) == ("75%", "3.0 GiB")
    assert (usage["busy_fraction"], usage["memory_peak_bytes"]) == (0.75, 3 * GiB)
    unseen = (await api.run(blind["id"]))["gpu_usage"]
    assert unseen["measured"] is False and unseen["text"] == f"GPU use not measured: {unseen['reason']}"
    assert unseen["busy_text"] is None and unseen["memory_peak_text"] is None
    assert (await api.run(cpu["id"]))["gpu_usage"] is None

    ids = [sampled["id"], blind["id"], cpu["id"]]
    c = await api.ok("GET", "compare", runs=",".join(ids))
    assert [r["gpu_usage"] for r in c["runs"]] == [usage, unseen, None]
    assert c["gpu"] == [
        {
            "key": "busy_text",
            "label": "GPU busy",
            "values": dict(zip(ids, ["75%", "not measured", "no GPU"], strict=True)),
        },
        {
            "key": "memory_peak_text",
            "label": "GPU memory peak",
            "values": dict(zip(ids, ["3.0 GiB", "not measured", "no GPU"], strict=True)),
        },
    ]
    # runs that held no GPU: no GPU rows at all
    assert (await api.ok("GET", "compare", runs=cpu["id"]))["gpu"] == []


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
    # Ended before any sampling tick: the reason is still the server's own (declared GPUs are never sampled).
    assert kept["measured"] is False, kept
    assert kept["reason"] == "the GPUs are declared (LocalExecutor.gpus), not found: none is sampled", kept
    assert (await api.run(rid))["gpu_usage"] == kept  # GET runs/{id} reads the same record
    out = await api.ok("GET", "insights", "ops", since=since)
    Insights.model_validate(out)
    total = out["total"]
    assert total["gpu_hours"] > 0 and out["busy_percent"] == 5.0
    assert (total["gpu_hours_measured"], total["gpu_hours_busy"], total["busy_fraction"]) == (0.0, None, None)
    assert out["idle_holders"] == []
