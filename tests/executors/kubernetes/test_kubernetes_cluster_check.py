"""`gpuplat cluster check` against emulated clusters, fit and unfit."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from kube_emulator import EmulatedCluster

from jupyter_gpuplat.cli.main import main

from ...k8s import GPU_TAINT, NAMESPACE, deployed_cluster


def check(cluster: EmulatedCluster, tmp_path: Path, capsys: pytest.CaptureFixture[str], *first: str) -> tuple[int, str]:
    kubeconfig = cluster.write_kubeconfig(tmp_path / "kubeconfig", NAMESPACE)
    code = main([*first, "cluster", "check", "--kubeconfig", str(kubeconfig), "--artifacts-claim", "gpuplat-artifacts"])
    return code, capsys.readouterr().out


def test_fit_cluster(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with deployed_cluster() as cluster:
        for i in (1, 2):
            cluster.add_node(f"gpu-{i}", gpus=8, labels={"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
                             taints=[GPU_TAINT])  # fmt: skip
        cluster.add_node("gpu-3", gpus=4, labels={"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB"})
        cluster.add_node("cpu-1")
        code, out = check(cluster, tmp_path, capsys)
    assert code == 0, out
    lines = out.splitlines()
    assert lines[0] == f"Kubernetes cluster check: {cluster.url}, namespace gpuplat-runs"
    assert lines[1:] == [
        f"  OK    api             Kubernetes v1.34.1-gpuplat-emulator answers at {cluster.url}",
        "  OK    permissions     the service account may do all 20 things the executor needs",
        "  OK    gpus            3 of 4 node(s) expose 20 allocatable nvidia.com/gpu",
        "  OK    gpu types       from node labels: NVIDIA-A100-SXM4-40GB (4 GPUs), NVIDIA-H100-80GB-HBM3 (16 GPUs)",
        "  WARN  taints          2 GPU node(s) carry nvidia.com/gpu=present:NoSchedule: GPU presets need a matching "
        "toleration",
        '  OK    storage         PersistentVolumeClaim "gpuplat-artifacts" is Bound (500Gi, ReadWriteMany)',
        "  OK    pod security    namespace gpuplat-runs enforces, audits and warns with Pod Security restricted",
        "  OK    network policy  NetworkPolicy default-deny denies all ingress and egress in namespace gpuplat-runs by "
        "default (it holds only where the cluster's network plugin enforces NetworkPolicies)",
        "  OK    runs namespace  no Secret of the platform and no control-plane or database pod in gpuplat-runs",
        "fit, 1 warning(s)",
    ]


def test_unfit_cluster_names_every_problem(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with deployed_cluster(bound=False) as cluster:
        cluster.add_node("cpu-1")
        cluster.add_node("gpu-1", gpus=0, gpu_capacity=8)  # the device plugin registered, then went unhealthy
        cluster.permissions.deny("delete", "batch", "jobs")
        cluster.permissions.deny("get", "", "pods/log")
        code, out = check(cluster, tmp_path, capsys, "--json")
    assert code == 1
    report = json.loads(out)
    assert report["fit"] is False
    findings = [(f["level"], f["topic"], f["message"]) for f in report["findings"]]
    assert ("fail", "permissions", "may not delete jobs.batch in namespace gpuplat-runs (needed to stop a run, clean "
            "up a finished one): apply deploy/kubernetes/rbac.yaml") in findings  # fmt: skip
    assert ("fail", "permissions", "may not get pods/log in namespace gpuplat-runs (needed to follow and archive "
            "logs): apply deploy/kubernetes/rbac.yaml") in findings  # fmt: skip
    assert ("warn", "gpus", "1 node(s) have nvidia.com/gpu capacity but none allocatable (device plugin unhealthy?): "
            "gpu-1") in findings  # fmt: skip
    assert ("fail", "gpus", "no node exposes allocatable nvidia.com/gpu (2 node(s)): is the GPU device plugin (e.g. "
            "the NVIDIA device plugin or GPU operator) running?") in findings  # fmt: skip
    assert ("fail", "storage", 'PersistentVolumeClaim "gpuplat-artifacts" is Pending: runs that mount it cannot be '
            "scheduled (check its storage class and provisioner)") in findings  # fmt: skip


def test_no_permission_to_see_nodes_or_an_unreachable_api(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with deployed_cluster() as cluster:
        cluster.permissions.deny("list", "", "nodes")
        code, out = check(cluster, tmp_path, capsys)
        assert code == 1
        assert "FAIL  gpus            cannot see nodes (no list permission), so GPUs cannot be checked" in out
        assert "may not list nodes cluster-wide" in out
    # The cluster is gone now: the check says so and fails, without a traceback.
    code, out = check(cluster, tmp_path, capsys)
    assert code == 1 and "FAIL  api" in out and "cannot reach the Kubernetes API" in out


def test_the_command_line_entry_point(tmp_path: Path) -> None:
    with deployed_cluster() as cluster:
        cluster.add_node("gpu-1", gpus=1)
        kubeconfig = cluster.write_kubeconfig(tmp_path / "kubeconfig", NAMESPACE)
        proc = subprocess.run(
            [sys.executable, "-m", "jupyter_gpuplat.cli", "cluster", "check", "--kubeconfig", str(kubeconfig)],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert proc.returncode == 0, proc.stderr
    assert "WARN  storage" in proc.stdout and "WARN  gpu types" in proc.stdout
    assert proc.stdout.rstrip().endswith("fit, 2 warning(s)")
    missing = subprocess.run(
        [sys.executable, "-m", "jupyter_gpuplat.cli", "cluster", "check", "--kubeconfig", str(tmp_path / "nope")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert missing.returncode == 1 and "cannot load the Kubernetes configuration" in missing.stderr


def test_the_config_flag_checks_its_connections(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`cluster check --config FILE`: each connection's claim and Secret (and the keys it names) must exist."""
    config = tmp_path / "platform.yaml"
    config.write_text(
        "connections:\n"
        "  - {name: datasets, kind: volume, claim: datasets, mount_path: /data}\n"
        "  - {name: hf-token, kind: secret, secret: hf-token, env: {HF_TOKEN: token}}\n"
        "  - {name: s3, kind: bucket, endpoint: 'http://minio:9000', secret: s3-creds}\n"
    )
    with deployed_cluster() as cluster:
        cluster.add_node("gpu-1", gpus=4)
        cluster.add_pvc(NAMESPACE, "datasets")
        cluster.add_secret(NAMESPACE, "s3-creds", {"AWS_ACCESS_KEY_ID": "AKIA"})  # no AWS_SECRET_ACCESS_KEY
        kubeconfig = cluster.write_kubeconfig(tmp_path / "kubeconfig", NAMESPACE)
        code = main(["--json", "cluster", "check", "--kubeconfig", str(kubeconfig), "--config", str(config)])
        out = capsys.readouterr().out
        assert main(["--json", "cluster", "check", "--kubeconfig", str(kubeconfig)]) == 0  # fit, connections aside
        without = json.loads(capsys.readouterr().out)
    assert code == 1
    found = [(f["level"], f["message"]) for f in json.loads(out)["findings"] if f["topic"] == "connections"]
    assert [level for level, _ in found].count("fail") == 2, found
    text = " | ".join(m for _, m in found)
    assert "hf-token" in text and "s3-creds" in text and "AWS_SECRET_ACCESS_KEY" in text, text
    assert not any("datasets" in m for level, m in found if level == "fail"), found
    assert not [f for f in without["findings"] if f["topic"] == "connections"]  # no --config: not looked at
