"""Flavors on the local executor through a real Jupyter server, with real processes: declared typed
devices (h100: 0-1, a100: 2-5), a queue with h100: 2 then a100: 4. The first runs go on h100, then
a100, never more than each quota, on disjoint devices of their flavor, each told its flavor in
GPUPLAT_FLAVOR; a run asking for h100 waits for h100, explained per flavor, while a100 is free.
What-if over the typed queue takes a flavor's quota and answers per flavor (POST whatif, gpuplat whatif)."""

from __future__ import annotations

import asyncio
import contextlib
import io
import sys
from pathlib import Path
from typing import Any

import pytest

from jupyter_gpuplat.cli import whatif as whatif_cli

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


async def test_whatif_takes_a_flavor_quota_and_answers_per_flavor(api: Any, jp_serverapp: Any) -> None:
    done = []
    for i in range(3):
        r = await api.submit(name=f"w{i}", queue="typed", command=[PY, "-c", "pass"], resources={"gpu": 1})
        done.append(r["id"])
    for rid in done:
        await api.wait_status(rid, "succeeded")
    recorded = [(await api.run(rid))["flavor"] for rid in done]
    body = {"since": "1h", "changes": {"typed": {"flavors": {"h100": {"gpu": 1}}}}}
    out = await api.ok("POST", "whatif", "ops", body)
    (typed,) = out["queues"]
    assert typed["settings"]["flavors"] == [
        {"name": "h100", "quota": {"gpu": 1}},
        {"name": "a100", "quota": {"gpu": 4}},
    ]
    assert [(f["name"], f["quota_gpu"], f["observed_quota_gpu"]) for f in typed["flavors"]] == [
        ("h100", 1, 2),
        ("a100", 4, 4),
    ]
    observed = {f["name"]: f["observed"]["runs"] for f in typed["flavors"]}
    assert observed == {n: recorded.count(n) for n in ("h100", "a100")}
    assert sum(f["predicted"]["runs"] for f in typed["flavors"]) == 3
    # a flavor the queue does not offer, or more than the flavor's devices: 400, naming what is allowed
    code, err = await api(
        "POST", "whatif", "ops", {"since": "1h", "changes": {"typed": {"flavors": {"l4": {"gpu": 1}}}}}
    )
    assert code == 400, err
    assert err["error"]["message"] == "queue typed does not offer flavor 'l4' (it offers: h100, a100)"
    code, err = await api(
        "POST", "whatif", "ops", {"since": "1h", "changes": {"typed": {"flavors": {"h100": {"gpu": 3}}}}}
    )
    assert code == 400 and "(at most 2)" in err["error"]["message"], err
    code, err = await api(
        "POST", "whatif", "ops", {"since": "1h", "changes": {"team-a-train": {"flavors": {"h100": {"gpu": 1}}}}}
    )
    assert (
        code == 400
        and "queue team-a-train does not offer flavor 'h100' (it offers no flavors)" in err["error"]["message"]
    )
    # the CLI sets it as QUEUE:flavors.NAME.gpu and prints a block per flavor
    argv = [
        "--url",
        jp_serverapp.connection_url,
        "--token",
        "tok-ops",
        "--set",
        "typed:flavors.h100.gpu=1",
        "--since",
        "1h",
    ]
    code, text = await asyncio.to_thread(_whatif_cli, argv)
    assert code == 0, text
    assert "queue typed: 3 runs" in text and "h100: quota 2 -> 1" in text
    assert "flavor h100 (quota 2 -> 1 GPUs)" in text and "flavor a100 (quota 4 -> 4 GPUs)" in text
    code, text = await asyncio.to_thread(_whatif_cli, [*argv[:4], "--set", "typed:flavors.l4.gpu=1", "--since", "1h"])
    assert code == 1 and "it offers: h100, a100" in text


def _whatif_cli(argv: list[str]) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        code = whatif_cli.main(argv)
    return code, out.getvalue()
