"""A run's GPU use as the API words it (issue 27): GET runs/{id} and compare carry the server's text.

NVML is hardware: the samples it would give are written as the sampler writes them
(tests/gpu_samples.py) — the only part faked. The server's declared GPUs have no NVML to read,
so a run with no samples is "not measured".
"""

from __future__ import annotations

import sys
from typing import Any

from ..gpu_samples import GiB, write_samples

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
