"""Shared setup for the Kubernetes tests: an emulated cluster laid out like deploy/kubernetes/.

Two namespaces as deployed: the runs' (`gpuplat-runs`: Pod Security `restricted` enforced by its
labels, the default-deny NetworkPolicies, the runs' artifact claim) and the control plane's
(`gpuplat-system`), whose service account `gpuplat` the Role in the runs' namespace binds.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kube_emulator import EmulatedCluster, Permissions, load_manifests

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy" / "kubernetes"
NAMESPACE = "gpuplat-runs"  # the runs' namespace: KubernetesExecutor.namespace
SYSTEM = "gpuplat-system"  # the control plane's
CONTROL_PLANE_SA = "gpuplat"
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
TOLERATE_GPU = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
LAYOUT = ("namespace.yaml", "priorityclasses.yaml", "storage.yaml", "network-policies.yaml")


def deployed_cluster(
    *,
    taint_wording: str = "v1.34",
    bound: bool = True,
    rbac: bool = True,
    local_processes: bool = False,
) -> EmulatedCluster:
    """A started cluster with the project's namespaces, priority classes, claims, policies and (enforced) Role.

    `local_processes`: pods run as real local processes.
    """
    cluster = EmulatedCluster(taint_wording=taint_wording, bookmark_seconds=0.5, local_processes=local_processes)
    cluster.apply(load_manifests([DEPLOY / name for name in LAYOUT]))
    if bound:
        cluster.set_pvc_phase(NAMESPACE, "gpuplat-artifacts", "Bound")
        cluster.set_pvc_phase(SYSTEM, "gpuplat-artifacts", "Bound")
    if rbac:
        docs = load_manifests([DEPLOY / "rbac.yaml"])
        cluster.permissions = Permissions.from_manifests(docs, CONTROL_PLANE_SA, SYSTEM)
    return cluster.start()


def executor_config(cluster: EmulatedCluster, tmp_path: Path, artifacts: Path) -> dict[str, Any]:
    """KubernetesExecutor settings as deploy/kubernetes/control-plane.yaml has them, with short timeouts."""
    kubeconfig = cluster.write_kubeconfig(tmp_path / "kubeconfig", NAMESPACE)
    return {
        "kubeconfig": str(kubeconfig),
        "namespace": NAMESPACE,
        "service_account": "gpuplat-run",
        "artifacts_claim": "gpuplat-artifacts",
        "artifacts_mount_path": str(artifacts),
        "watch_timeout_seconds": 5,
        "connect_timeout_seconds": 2.0,
        "request_timeout_seconds": 5.0,
        "log_idle_timeout_seconds": 10.0,
        "log_drain_seconds": 5.0,
        "stop_wait_seconds": 10.0,
    }


def on_emulator(server_config: dict[str, Any], cluster: EmulatedCluster, tmp_path: Path) -> dict[str, Any]:
    """The suite's in-process server config (tests/conftest.py) with the Kubernetes executor on `cluster`."""
    cfg = dict(server_config)
    cfg["GpuPlat"] = {**cfg["GpuPlat"], "executor_class": "jupyter_gpuplat.executors.kubernetes.KubernetesExecutor"}
    cfg["KubernetesExecutor"] = executor_config(cluster, tmp_path, Path(cfg["GpuPlat"]["artifacts_root"]))
    return cfg


def run_selector(run_id: str) -> str:
    return f"gpuplat.io/run-id={run_id}"
