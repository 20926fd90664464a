"""`gpuplat rollout-check` against a Jupyter server whose executor is Kubernetes, on the emulator.

The cluster (tests/k8s.py deployed_cluster, real HTTP, the official client, the project's Role)
has two 4-GPU nodes tainted nvidia.com/gpu=present:NoSchedule, as GPU node pools usually are,
and one CPU node; pods run as real local processes, so runs write real outputs and metrics.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kube_emulator import EmulatedCluster

from jupyter_gpuplat.cli import rollout

from ...conftest import EXAMPLE
from ...k8s import GPU_TAINT, NAMESPACE, TOLERATE_GPU, deployed_cluster, executor_config
from ...server import ServerProcess


@pytest.fixture
def cluster() -> Iterator[EmulatedCluster]:
    c = deployed_cluster(local_processes=True)
    for i in (1, 2):
        c.add_node(f"gpu-{i}", gpus=4, taints=[GPU_TAINT], labels={"nvidia.com/gpu.product": "NVIDIA-A100"})
    c.add_node("cpu-1", gpus=0)
    yield c
    c.stop()
    assert not c.errors, c.errors


def serve(
    tmp_path: Path,
    cluster: EmulatedCluster,
    *,
    tolerate: bool,
    mount: Path | None = None,
    connections: list[dict[str, Any]] | None = None,
    change: Callable[[dict[str, Any]], None] | None = None,
) -> ServerProcess:
    """The example platform on the cluster; `tolerate`: its presets tolerate the GPU taint (a fit platform)."""
    doc = yaml.safe_load(EXAMPLE.read_text())
    if connections:
        doc["connections"] = connections
    if change is not None:
        change(doc)
    if tolerate:
        for preset in doc["presets"]:
            preset.setdefault("placement", {})["tolerations"] = [TOLERATE_GPU]
    config = tmp_path / "platform.yaml"
    config.write_text(yaml.safe_dump(doc))
    settings = executor_config(cluster, tmp_path, tmp_path / "artifacts")
    if mount is not None:
        settings["artifacts_mount_path"] = str(mount)
    srv = ServerProcess(
        tmp_path,
        config_file=config,
        extra_config={
            "GpuPlat": {"executor_class": "jupyter_gpuplat.executors.kubernetes.KubernetesExecutor"},
            "KubernetesExecutor": settings,
        },
    )
    srv.start()
    return srv


def check(srv: ServerProcess, capsys: pytest.CaptureFixture[str], timeout: str = "15") -> tuple[int, dict[str, Any]]:
    capsys.readouterr()
    rc = rollout.main(
        ["--url", srv.url, "--token", "tok-ops", "--json", "--project", "team-a", "--as-outsider-token", "tok-mallory",
         "--timeout", timeout]
    )  # fmt: skip
    report = json.loads(capsys.readouterr().out)
    return rc, {r["check"]: r for r in report["results"]}


def nothing_left(cluster: EmulatedCluster, srv: ServerProcess) -> None:
    runs = srv.ok("GET", "runs", "ops")["runs"]
    assert all(r["status"] in ("succeeded", "failed", "stopped") for r in runs), [(r["id"], r["status"]) for r in runs]
    assert cluster.pods("gpuplat", "app.kubernetes.io/managed-by=jupyter-gpuplat") == []


def test_a_fit_cluster_passes(tmp_path: Path, cluster: EmulatedCluster, capsys: pytest.CaptureFixture[str]) -> None:
    srv = serve(tmp_path, cluster, tolerate=True)
    try:
        rc, got = check(srv, capsys)
        assert rc == 0, got
        assert {c for c, r in got.items() if r["result"] == "pass"} >= {
            "queue-limit", "waiting", "placement", "training", "outputs", "multi-gpu", "batch", "notebook",
            "access-queue", "outsider",
        }  # fmt: skip
        # Placement on Kubernetes: the node each run landed on, from the run's own record.
        assert got["placement"]["detail"].startswith("on node(s) ")
        assert {"gpu-1", "gpu-2"} & set(got["placement"]["detail"].replace(",", " ").split())
        nothing_left(cluster, srv)
    finally:
        srv.stop()


def test_presets_without_the_gpu_toleration_fail_with_the_schedulers_message(
    tmp_path: Path, cluster: EmulatedCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    """The example presets, which set no toleration, on the tainted GPU nodes: no GPU pod can be placed."""
    srv = serve(tmp_path, cluster, tolerate=False)
    try:
        rc, got = check(srv, capsys, timeout="4")
        assert rc == 1
        for name, preset in (("training", "single-gpu"), ("multi-gpu", "multi-gpu"), ("notebook", "notebook")):
            detail = got[name]["detail"]
            assert got[name]["result"] == "fail" and " is starting: starting, UntoleratedTaint: " in detail, detail
            assert f"Its placement comes from preset {preset}, which sets no toleration for them." in detail
            assert "(scheduler: 0/3 nodes are available: " in detail and "untolerated taint" in detail, detail
        assert got["placement"]["detail"].startswith("no run on preset single-gpu started: starting, UntoleratedTaint")
        assert got["queue-limit"]["detail"].startswith(
            "queue team-a-train: only 0 of 2 run(s) started, "
            "so its limit (concurrency 2 (configured)) could not be checked"
        )
        assert got["batch"]["result"] == "pass"  # a CPU-only run lands on the untainted node
        nothing_left(cluster, srv)
    finally:
        srv.stop()


def test_outputs_that_do_not_come_back_fail(
    tmp_path: Path, cluster: EmulatedCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    """Injected misconfiguration: pods mount the artifacts claim at another path than the control plane
    reads (artifacts_mount_path is not the server's artifacts_root), so runs succeed but their outputs
    and metrics land where the server never looks."""
    srv = serve(tmp_path, cluster, tolerate=True, mount=tmp_path / "elsewhere")
    try:
        rc, got = check(srv, capsys, timeout="4")
        assert rc == 1
        assert got["training"]["result"] == "pass"
        assert got["outputs"]["result"] == "fail"
        assert (
            "output cannot be retrieved: the output outputs/rollout-check/out.txt is not listed"
            in got["outputs"]["detail"]
        )
        nothing_left(cluster, srv)
    finally:
        srv.stop()


def test_connections_whose_backing_objects_are_missing_fail(
    tmp_path: Path, cluster: EmulatedCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    """A volume claim and a Secret that exist pass; a claim nobody made and a Secret without its key fail
    with what the cluster says. (Pods run as local processes: the mount path is a real directory here.)"""
    (tmp_path / "data").mkdir()
    cluster.add_pvc(NAMESPACE, "datasets")
    cluster.add_secret(NAMESPACE, "hf-token", {"token": "hf-secret-value"})
    cluster.add_secret(NAMESPACE, "s3-creds", {"AWS_ACCESS_KEY_ID": "AKIA"})  # no AWS_SECRET_ACCESS_KEY
    data = str(tmp_path / "data")
    srv = serve(tmp_path, cluster, tolerate=True, connections=[
        {"name": "datasets", "kind": "volume", "claim": "datasets", "mount_path": data},
        {"name": "hf-token", "kind": "secret", "secret": "hf-token", "env": {"HF_TOKEN": "token"}},
        {"name": "scratch", "kind": "volume", "claim": "scratch", "mount_path": data},
        {"name": "s3", "kind": "bucket", "endpoint": "http://minio:9000", "secret": "s3-creds"},
    ])  # fmt: skip
    try:
        rc, got = check(srv, capsys, timeout="6")
        assert rc == 1
        assert got["connection:datasets"]["result"] == "pass", got["connection:datasets"]
        assert got["connection:hf-token"]["result"] == "pass", got["connection:hf-token"]
        scratch, s3 = got["connection:scratch"], got["connection:s3"]
        assert scratch["result"] == "fail" and "VolumeNotBound" in scratch["detail"]
        assert '(scheduler: 0/3 nodes are available: persistentvolumeclaim "scratch" not found.' in scratch["detail"]
        assert s3["result"] == "fail" and "ConfigError" in s3["detail"] and "AWS_SECRET_ACCESS_KEY" in s3["detail"]
        assert "hf-secret-value" not in json.dumps(got)
        nothing_left(cluster, srv)
    finally:
        srv.stop()


PRODUCT = "nvidia.com/gpu.product"
POOL = "gpuplat.io/pool"
LABEL = {"h100": "NVIDIA-H100-80GB-HBM3", "a100": "NVIDIA-A100-SXM4-80GB", "l4": "NVIDIA-L4"}


@pytest.fixture
def pools() -> Iterator[EmulatedCluster]:
    """Two node pools labelled by GPU product and tainted per pool, beside the plain GPU and CPU nodes."""
    c = deployed_cluster(local_processes=True)
    for flavor in ("h100", "a100"):
        c.add_node(
            f"{flavor}-1",
            gpus=2,
            labels={PRODUCT: LABEL[flavor]},
            taints=[{"key": POOL, "value": flavor, "effect": "NoSchedule"}],
        )
    c.add_node("gpu-1", gpus=4, taints=[GPU_TAINT])
    c.add_node("cpu-1", gpus=0)
    yield c
    c.stop()
    assert not c.errors, c.errors


def typed(doc: dict[str, Any]) -> None:
    """Flavors placed by their pool's label and toleration; team-a's queue `typed` offers h100, a100, then
    l4, whose label no node carries."""
    doc["flavors"] = [
        {"name": f, "node_labels": {PRODUCT: label},
         "tolerations": [{"key": POOL, "operator": "Equal", "value": f, "effect": "NoSchedule"}]}
        for f, label in LABEL.items()
    ]  # fmt: skip
    doc["queues"].append({"name": "typed", "flavors": [{"name": f, "quota": {"gpu": 1}} for f in LABEL]})
    doc["projects"][0]["allowed_queues"].append("typed")


def test_each_flavor_s_probe_lands_on_its_pool(
    tmp_path: Path, pools: EmulatedCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    srv = serve(tmp_path, pools, tolerate=True, change=typed)
    try:
        rc, got = check(srv, capsys, timeout="6")
        assert rc == 1
        for flavor in ("h100", "a100"):
            r = got[f"flavor:{flavor}"]
            assert r["result"] == "pass", r
            assert r["detail"].endswith(f"ran on {flavor} (node {flavor}-1 ({PRODUCT}={LABEL[flavor]}))"), r
        l4 = got["flavor:l4"]
        assert l4["result"] == "fail" and l4["detail"].startswith("flavor l4 on queue typed: probe "), l4
        assert "Flavor l4 has no node here: none matches its node labels." in l4["detail"], l4  # explain's words
        runs = {r["name"]: r for r in srv.ok("GET", "runs", "ops")["runs"]}
        assert runs["rollout-flavor-h100"]["flavor"] == "h100" and runs["rollout-flavor-a100"]["flavor"] == "a100"
        # the rest of the check is as without flavors: the plain presets land on the plain GPU node
        assert got["training"]["result"] == got["queue-limit"]["result"] == "pass", got
        nothing_left(pools, srv)
    finally:
        srv.stop()
