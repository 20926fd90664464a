"""Flavors on Kubernetes, through a real Jupyter server against the emulator: two node pools labelled
by GPU product and tainted per pool. A queue with h100 then a100 puts its first runs on h100 nodes,
then on a100 nodes: each Job carries its flavor's node labels and tolerations (admin-controlled
placement), and `gpu_type: <flavor>` names the flavor, never a label value of its own."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kube_emulator import EmulatedCluster

from ...conftest import EXAMPLE
from ...k8s import NAMESPACE, deployed_cluster, on_emulator, run_selector
from ...waiting import wait_for

PRODUCT = "nvidia.com/gpu.product"
POOL = "gpuplat.io/pool"
H100_LABEL = "NVIDIA-H100-80GB-HBM3"
A100_LABEL = "NVIDIA-A100-SXM4-80GB"


def tolerate(pool: str) -> dict[str, Any]:
    return {"key": POOL, "operator": "Equal", "value": pool, "effect": "NoSchedule"}


@pytest.fixture
def cluster() -> Iterator[EmulatedCluster]:
    c = deployed_cluster()
    c.add_node(
        "h100-1", gpus=2, labels={PRODUCT: H100_LABEL}, taints=[{"key": POOL, "value": "h100", "effect": "NoSchedule"}]
    )
    for i in (1, 2):
        c.add_node(
            f"a100-{i}",
            gpus=2,
            labels={PRODUCT: A100_LABEL},
            taints=[{"key": POOL, "value": "a100", "effect": "NoSchedule"}],
        )
    yield c
    c.stop()
    assert not c.errors, c.errors


@pytest.fixture
def platform_config_file(tmp_path: Path) -> Path:
    cfg = yaml.safe_load(EXAMPLE.read_text())
    cfg["flavors"] = [
        {"name": "h100", "node_labels": {PRODUCT: H100_LABEL}, "tolerations": [tolerate("h100")]},
        {"name": "a100", "node_labels": {PRODUCT: A100_LABEL}, "tolerations": [tolerate("a100")]},
    ]
    cfg["queues"].append(
        {"name": "typed", "flavors": [{"name": "h100", "quota": {"gpu": 2}}, {"name": "a100", "quota": {"gpu": 4}}]}
    )
    # a queue whose h100 quota is more than the h100 pool holds: its third h100 run waits for the nodes
    cfg["queues"].append({"name": "over", "flavors": [{"name": "h100", "quota": {"gpu": 3}}]})
    for p in cfg["projects"]:
        p["allowed_queues"] += ["typed", "over"]
    path = tmp_path / "platform.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


@pytest.fixture
def jp_server_config(jp_server_config: dict[str, Any], tmp_path: Path, cluster: EmulatedCluster) -> dict[str, Any]:
    return on_emulator(jp_server_config, cluster, tmp_path)


async def placed(cluster: EmulatedCluster, run_id: str) -> tuple[dict[str, Any], str]:
    """The run's Job's pod template and the node its pod was bound to."""

    def bound() -> tuple[dict[str, Any], str] | None:
        jobs = cluster.jobs_in(NAMESPACE, run_selector(run_id))
        pods = cluster.pods(NAMESPACE, run_selector(run_id))
        node = pods[0]["spec"].get("nodeName") if pods else None
        return (jobs[0]["spec"]["template"]["spec"], node) if jobs and node else None

    return await wait_for(bound, 20, f"the pod of {run_id} bound to a node")


async def test_jobs_carry_their_flavor_s_selector_and_tolerations(api: Any, cluster: EmulatedCluster) -> None:
    runs = [
        (await api.submit(name=f"t{i}", queue="typed", resources={"gpu": 1}, command="gate never"))["id"]
        for i in range(3)
    ]
    asks = await api.submit(
        name="asks", queue="typed", resources={"gpu": 1}, command="gate never", placement={"gpu_type": "a100"}
    )
    runs.append(asks["id"])
    for rid in runs:
        await api.wait_status(rid, "running")
    flavors = [(await api.run(rid))["flavor"] for rid in runs]
    assert flavors == ["h100", "h100", "a100", "a100"]
    for rid, flavor in zip(runs, flavors, strict=True):
        pod, node = await placed(cluster, rid)
        label = H100_LABEL if flavor == "h100" else A100_LABEL
        assert pod["nodeSelector"] == {PRODUCT: label}, pod.get("nodeSelector")  # never {PRODUCT: "a100"}
        assert tolerate(flavor) in pod["tolerations"], pod["tolerations"]
        assert node.startswith(f"{flavor}-"), (rid, node)
        env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
        assert env["GPUPLAT_FLAVOR"] == flavor
        # the running event says where: the node and its values of the labels the pod selects by
        running = next(e for e in (await api.run(rid))["timeline"] if e["status"] == "running")
        assert (running["details"]["node"], running["details"]["node_labels"]) == (node, {PRODUCT: label})
    # h100's quota is used: the next run for h100 waits in our queue, explained per flavor
    more = await api.submit(
        name="more", queue="typed", resources={"gpu": 1}, command="gate never", placement={"gpu_type": "h100"}
    )
    ex = await api.ok("GET", f"runs/{more['id']}/explain")
    assert ex["layer"] == "queue" and ex["reason"] == "QueueQuota"
    assert [(f["name"], f["message"]) for f in ex["flavors"]] == [
        ("h100", "h100: 2/2 in use (1 more needed) (queue typed's h100 quota)")
    ]
    assert ex["queue_usage"]["free_gpus"] is None  # Kubernetes places work: no count of ours
    for rid in [*runs, more["id"]]:
        await api.ok("POST", f"runs/{rid}/stop")


async def test_a_flavor_whose_nodes_are_full_explains_the_flavor_s_placement_wait(
    api: Any, cluster: EmulatedCluster
) -> None:
    runs = [
        (await api.submit(name=f"o{i}", queue="over", resources={"gpu": 1}, command="gate never"))["id"]
        for i in range(2)
    ]
    for rid in runs:
        await api.wait_status(rid, "running")
    third = await api.submit(name="third", queue="over", resources={"gpu": 1}, command="gate never")

    async def waits_for_nodes() -> dict[str, Any] | None:
        ex = await api.ok("GET", f"runs/{third['id']}/explain")
        return ex if ex["layer"] == "executor" and "Flavor" in ex["message"] else None

    ex = await wait_for(waits_for_nodes, 20, "the third h100 run to wait for the h100 nodes")
    assert (await api.run(third["id"]))["flavor"] == "h100"  # admitted by the queue on h100
    assert ex["reason"] == "InsufficientGPU", ex
    assert ex["message"].endswith(" Flavor h100's nodes: h100-1 0/2 free."), ex["message"]
    for rid in [*runs, third["id"]]:
        await api.ok("POST", f"runs/{rid}/stop")
