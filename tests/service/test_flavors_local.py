"""Flavors on the local executor through a real Jupyter server, with real processes: declared typed
devices (h100: 0-1, a100: 2-5), a queue with h100: 2 then a100: 4. The first runs go on h100, then
a100, never more than each quota, on disjoint devices of their flavor, each told its flavor in
GPUPLAT_FLAVOR; a run asking for h100 waits for h100, explained per flavor, while a100 is free."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from ..conftest import EXAMPLE
from ..flavored import A100, H100, flavored_config

PY = sys.executable
SHOW = [
    PY,
    "-c",
    "import os, time; print('seen', os.environ['CUDA_VISIBLE_DEVICES'], os.environ['GPUPLAT_FLAVOR'], flush=True);"
    " time.sleep(600)",
]


@pytest.fixture
def platform_config_file(tmp_path: Path) -> Path:
    return flavored_config(EXAMPLE, tmp_path / "platform.yaml")


@pytest.fixture
def jp_server_config(jp_server_config: dict[str, Any]) -> dict[str, Any]:
    jp_server_config["LocalExecutor"]["gpus"] = 6
    return jp_server_config


async def seen(api: Any, run_id: str) -> tuple[set[int], str]:
    log = (await api.wait_log(run_id, "seen ")).decode()
    line = next(x for x in log.splitlines() if x.startswith("seen "))
    _, devices, flavor = line.split()
    return {int(d) for d in devices.split(",")}, flavor


async def test_h100_then_a100_disjoint_devices_of_their_flavor(api: Any) -> None:
    runs = []
    for i in range(7):
        r = await api.submit(name=f"t{i}", queue="typed", command=SHOW, resources={"gpu": 1})
        runs.append(r["id"])
    for rid in runs[:6]:
        await api.wait_status(rid, "running")
    got = [await seen(api, rid) for rid in runs[:6]]
    assert [f for _, f in got] == ["h100", "h100", "a100", "a100", "a100", "a100"]
    assert [(await api.run(rid))["flavor"] for rid in runs[:6]] == [f for _, f in got]
    for devices, flavor in got:
        assert devices <= (H100 if flavor == "h100" else A100), (devices, flavor)
    every = [d for devices, _ in got for d in devices]
    assert sorted(every) == [0, 1, 2, 3, 4, 5]  # disjoint: each device once
    # the Queues tab's figures, per flavor in the order tried
    typed = next(q for q in (await api.ok("GET", "queues"))["queues"] if q["name"] == "typed")
    assert [(f["name"], f["usage"]["gpu"], f["quota"]["gpu"], f["free_gpus"]) for f in typed["flavors"]] == [
        ("h100", 2, 2, 0),
        ("a100", 4, 4, 0),
    ]
    assert typed["head_wait"]["reason"] == "QueueQuota"
    # the seventh: over both quotas, it waits, explained per flavor
    seventh = await api.run(runs[6])
    assert seventh["status"] == "queued" and seventh["flavor"] is None
    ex = await api.ok("GET", f"runs/{runs[6]}/explain")
    assert [(f["name"], f["reason"]) for f in ex["flavors"]] == [("h100", "QueueQuota"), ("a100", "QueueQuota")]
    for rid in runs[:6]:
        await api.ok("POST", f"runs/{rid}/stop")


async def test_a_run_asking_h100_waits_for_h100_while_a100_is_free(api: Any) -> None:
    first = []
    for i in range(2):
        r = await api.submit(name=f"h{i}", queue="typed", command=SHOW, resources={"gpu": 1})
        first.append(r["id"])
    for rid in first:
        await api.wait_status(rid, "running")
    asks = await api.submit(
        name="asks", queue="typed", command=SHOW, resources={"gpu": 1}, placement={"gpu_type": "h100"}
    )
    ex = await api.ok("GET", f"runs/{asks['id']}/explain")
    assert ex["reason"] == "QueueQuota"
    assert ex["message"] == "h100: 2/2 in use (1 more needed) (queue typed's h100 quota)"
    assert [(f["name"], f["numbers"]) for f in ex["flavors"]] == [("h100", {"used": 2, "requested": 1, "limit": 2})]
    assert {b["id"] for b in ex["flavors"][0]["blockers"]} == set(first)
    assert ex["queue_usage"]["free_gpus"] == 4  # a100 is free, and it still waits for h100
    assert (await api.run(asks["id"]))["status"] == "queued"
    # an h100 ends: it starts there
    await api.ok("POST", f"runs/{first[0]}/stop")
    await api.wait_status(asks["id"], "running")
    devices, flavor = await seen(api, asks["id"])
    assert flavor == "h100" and devices <= H100
    # a flavor the queue does not offer is refused, naming those it does
    code, body = await api(
        "POST",
        "runs",
        "alice",
        {"project": "team-a", "queue": "typed", "command": SHOW, "placement": {"gpu_type": "l4"}},
    )
    assert code == 422, body
    assert body["error"]["code"] == "FlavorNotOffered"
    assert "queue typed offers: h100, a100" in body["error"]["message"]
    for rid in (first[1], asks["id"]):
        await api.ok("POST", f"runs/{rid}/stop")
