"""GPU samples of runs on Kubernetes from the DCGM exporter, through a real Jupyter server on the emulator.

The DCGM exporter is an outside service: its scrapes (tests/fixtures/dcgm/) are served over real local
HTTP (tests/dcgm_exporter.py), with the fixture's pod renamed to the run's real pod once the Job made
it. Everything else is the platform: the Kubernetes executor on the emulated cluster through the
official client, the engine's sampling loop, the store, GET runs/{id} and its metrics.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kube_emulator import EmulatedCluster, Permissions, load_manifests

from jupyter_gpuplat.core.gpu_usage import NotMeasured

from ...dcgm_exporter import MIB, RUN_POD, Exporter, serving
from ...k8s import CONTROL_PLANE_SA, DEPLOY, NAMESPACE, SYSTEM, deployed_cluster, on_emulator, run_selector
from ...waiting import wait_for
from .conftest import Executors


@pytest.fixture
def cluster() -> Iterator[EmulatedCluster]:
    c = deployed_cluster()
    yield c
    c.stop()
    assert not c.errors, c.errors


@pytest.fixture
def exporter() -> Iterator[Exporter]:
    with serving() as e:
        yield e


@pytest.fixture
def exporter_configured(request: pytest.FixtureRequest) -> bool:
    return bool(getattr(request, "param", True))


@pytest.fixture
def jp_server_config(
    jp_server_config: dict[str, Any],
    tmp_path: Path,
    cluster: EmulatedCluster,
    exporter: Exporter,
    exporter_configured: bool,
) -> dict[str, Any]:
    """The Kubernetes executor on the emulator, reading both nodes' exporters every second (or none)."""
    cfg = on_emulator(jp_server_config, cluster, tmp_path)
    urls = [exporter.url("gpu-node-a"), exporter.url("gpu-node-b")] if exporter_configured else []
    cfg["KubernetesExecutor"].update(dcgm_exporter_urls=urls, gpu_sample_seconds=1.0)
    return cfg


async def _pod_of(cluster: EmulatedCluster, run_id: str) -> str:
    async def named() -> str | None:
        pods = cluster.pods(NAMESPACE, run_selector(run_id))
        return str(pods[0]["metadata"]["name"]) if pods else None

    return await wait_for(named, 20, f"the pod of run {run_id}")


async def test_a_runs_pod_gets_its_gpus_samples_and_gpu_usage_equals_a_recount(
    api: Any, cluster: EmulatedCluster, exporter: Exporter
) -> None:
    cluster.add_node("gpu-node-a", gpus=4)
    two = await api.submit(presets=["multi-gpu"], command="gate never")
    unseen = await api.submit("dave", project="team-b", presets=["single-gpu"], command="gate never")
    await api.wait_status(two["id"], "running")
    await api.wait_status(unseen["id"], "running", user="dave")
    exporter.renames[RUN_POD] = await _pod_of(cluster, two["id"])
    unseen_pod = await _pod_of(cluster, unseen["id"])
    names = "system/gpu0/util,system/gpu0/memory_bytes,system/gpu1/util,system/gpu1/memory_bytes"

    async def sampled() -> dict[str, Any] | None:
        curves: dict[str, Any] = await api.ok("GET", f"runs/{two['id']}/metrics", names=names)
        return curves if len(curves) == 4 and all(c["count"] >= 3 for c in curves.values()) else None

    curves = await wait_for(sampled, 30, "three samples of each of the run's GPUs")
    # The fixture's figures: the run's GPU 0 is node GPU 1 (97 %, 61440 MiB), its GPU 1 node GPU 3 (3 %, 1024 MiB).
    assert set(curves["system/gpu0/util"]["values"]) == {97.0}
    assert set(curves["system/gpu1/util"]["values"]) == {3.0}
    assert set(curves["system/gpu0/memory_bytes"]["values"]) == {61440.0 * MIB}
    assert set(curves["system/gpu1/memory_bytes"]["values"]) == {1024.0 * MIB}

    usage = (await api.run(two["id"]))["gpu_usage"]
    n = usage["samples"]
    assert n >= 6 and n % 2 == 0  # both GPUs in every reading
    # A recount: each reading spans the same time on both GPUs, one at 97 % (busy), one at 3 % (idle).
    assert usage["measured"] is True and usage["reason"] is None
    assert usage["devices"] == [0, 1]
    assert (usage["mean_util"], usage["p50_util"], usage["busy_fraction"]) == (50.0, 50.0, 0.5)
    assert usage["memory_peak_bytes"] == 61440 * MIB
    assert usage["seconds_busy"] * 2 == usage["seconds_sampled"]

    # The other run's pod is in no scrape: not measured, and why.
    other = (await api.run(unseen["id"], "dave"))["gpu_usage"]
    why = (
        f"the DCGM exporter reports no GPU of pod {unseen_pod} in namespace {NAMESPACE} (a MIG or "
        "time-sliced device the exporter does not map to pods, or a node without an exporter)"
    )
    assert other == {
        "measured": False,
        "reason": why,
        "busy_percent": 5.0,
        "text": f"GPU use not measured: {why}",
        "busy_text": None,
        "memory_peak_text": None,
    }
    await api.ok("POST", f"runs/{two['id']}/stop")
    await api.ok("POST", f"runs/{unseen['id']}/stop", "dave")


async def test_exporters_that_cannot_be_read_make_every_run_not_measured_with_the_reason(
    api: Any, cluster: EmulatedCluster, exporter: Exporter
) -> None:
    exporter.status["/gpu-node-a/metrics"] = 503
    exporter.status["/gpu-node-b/metrics"] = 503
    cluster.add_node("gpu-node-a", gpus=4)
    run = await api.submit(presets=["single-gpu"], command="gate never")
    await api.wait_status(run["id"], "running")
    before = exporter.scrapes

    async def told() -> dict[str, Any] | None:
        usage = (await api.run(run["id"]))["gpu_usage"]
        return usage if exporter.scrapes > before and "could not be read" in str(usage.get("reason")) else None

    usage = await wait_for(told, 20, "gpu_usage to say the exporters could not be read")
    assert usage["measured"] is False
    assert usage["reason"] == (
        f"the DCGM exporter could not be read: {exporter.url('gpu-node-a')}: Service Unavailable; "
        f"{exporter.url('gpu-node-b')}: Service Unavailable"
    )
    await api.ok("POST", f"runs/{run['id']}/stop")


@pytest.mark.parametrize("exporter_configured", [False], indirect=True)
async def test_no_exporter_configured_is_not_measured_and_says_which_setting(
    api: Any, cluster: EmulatedCluster, exporter: Exporter
) -> None:
    cluster.add_node("gpu-node-a", gpus=4)
    run = await api.submit(presets=["single-gpu"], command="gate never")
    cpu = await api.submit(resources={"gpu": 0, "cpu": "1", "memory": "1Gi"}, command="gate never")
    await api.wait_status(run["id"], "running")
    await api.wait_status(cpu["id"], "running")

    async def told() -> dict[str, Any] | None:
        usage = (await api.run(run["id"]))["gpu_usage"]
        return usage if "configured" in str(usage.get("reason")) else None

    usage = await wait_for(told, 20, "gpu_usage to say no exporter is configured")
    why = "no DCGM exporter is configured (KubernetesExecutor.dcgm_exporter_urls)"
    assert usage == {
        "measured": False,
        "reason": why,
        "busy_percent": 5.0,
        "text": f"GPU use not measured: {why}",
        "busy_text": None,
        "memory_peak_text": None,
    }
    assert (await api.run(cpu["id"]))["gpu_usage"] is None  # it holds no GPU
    assert exporter.scrapes == 0
    for r in (run, cpu):
        await api.ok("POST", f"runs/{r['id']}/stop")


async def test_exporter_pods_are_found_through_the_api_with_the_optional_role(
    cluster: EmulatedCluster, tmp_path: Path
) -> None:
    """dcgm_exporter_selector: the exporter pods listed in their namespace (RBAC enforced: the project's
    Role, then deploy/kubernetes/optional/rbac-dcgm.yaml), each running one read at <pod IP>:9400."""
    made = Executors(cluster, tmp_path, dcgm_exporter_selector="app=nvidia-dcgm-exporter", dcgm_timeout_seconds=0.5)
    try:
        ex, _ = made.new()
        where = "the DCGM exporter pods 'app=nvidia-dcgm-exporter' in namespace gpu-operator"
        got = await asyncio.to_thread(ex.gpu_samples, {"r1": (0,)}, 0.0)
        assert isinstance(got, NotMeasured) and got.reason.startswith(f"{where} could not be listed: "), got
        assert "forbidden" in got.reason
        docs = load_manifests([DEPLOY / "rbac.yaml", DEPLOY / "optional" / "rbac-dcgm.yaml"])
        cluster.permissions = Permissions.from_manifests(docs, CONTROL_PLANE_SA, SYSTEM)
        got = await asyncio.to_thread(ex.gpu_samples, {"r1": (0,)}, 0.0)
        assert got == NotMeasured(
            "no DCGM exporter is running: no running pods 'app=nvidia-dcgm-exporter' in namespace gpu-operator"
        )
        cluster.add_node("gpu-node-a", gpus=4)
        cluster.add_pod("gpu-operator", "nvidia-dcgm-exporter")  # labelled app=nvidia-dcgm-exporter
        ip = await wait_for(lambda: _running_ip(cluster), 20, "the exporter pod to run")
        got = await asyncio.to_thread(ex.gpu_samples, {"r1": (0,)}, 0.0)
        assert isinstance(got, NotMeasured)
        # The emulator's pod IPs lead nowhere: the read fails, naming the URL found.
        assert got.reason.startswith(f"the DCGM exporter could not be read: http://{ip}:9400/metrics: "), got
    finally:
        await made.close()


async def _running_ip(cluster: EmulatedCluster) -> str | None:
    pods = cluster.pods("gpu-operator")
    status = pods[0].get("status") or {} if pods else {}
    return str(status["podIP"]) if status.get("phase") == "Running" and status.get("podIP") else None
