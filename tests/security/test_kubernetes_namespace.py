"""A runs' namespace that does not keep runs apart is reported: by `gpuplat cluster check` and by capacity.isolation.

Against the emulator laid out as deploy/kubernetes/ (the Role enforced), then broken one way at
a time as an admin could leave it: no Pod Security `enforce` label (fail) or no audit/warn
(warn), no default-deny NetworkPolicy (fail), the control plane's Secret or a PostgreSQL pod in
the runs' namespace (fail). Each failure names the one-line fix. `KubernetesExecutor.isolation()`
reads the same labels and policies (in a thread, refreshed) and says plainly what it cannot
verify (the NVIDIA toolkit's settings on the GPU nodes).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kube_emulator import EmulatedCluster
from kube_emulator.store import POD, RESOURCES

from jupyter_gpuplat.cli.main import main
from jupyter_gpuplat.executors.kubernetes.executor import KubernetesExecutor

from ..k8s import NAMESPACE, deployed_cluster, executor_config
from ..waiting import wait_for

NETWORK_POLICIES = RESOURCES[("networking.k8s.io", "networkpolicies")]


@pytest.fixture
def cluster() -> Iterator[EmulatedCluster]:
    c = deployed_cluster()
    c.add_node("gpu-1", gpus=4)
    yield c
    c.stop()
    assert not c.errors, c.errors


def findings(cluster: EmulatedCluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, list[Any]]:
    kubeconfig = cluster.write_kubeconfig(tmp_path / "kubeconfig", NAMESPACE)
    code = main(["--json", "cluster", "check", "--kubeconfig", str(kubeconfig), "-n", NAMESPACE,
                 "--artifacts-claim", "gpuplat-artifacts"])  # fmt: skip
    report = json.loads(capsys.readouterr().out)
    topics = ("pod security", "network policy", "runs namespace")
    return code, [(f["level"], f["topic"], f["message"]) for f in report["findings"] if f["topic"] in topics]


def test_the_deployed_layout_passes(
    cluster: EmulatedCluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, found = findings(cluster, tmp_path, capsys)
    assert code == 0, found
    assert found == [
        ("ok", "pod security", "namespace gpuplat-runs enforces, audits and warns with Pod Security restricted"),
        ("ok", "network policy", "NetworkPolicy default-deny denies all ingress and egress in namespace gpuplat-runs "
         "by default (it holds only where the cluster's network plugin enforces NetworkPolicies)"),
        ("ok", "runs namespace", "no Secret of the platform and no control-plane or database pod in gpuplat-runs"),
    ]  # fmt: skip


FIX_LABELS = (
    "kubectl label namespace gpuplat-runs pod-security.kubernetes.io/enforce=restricted "
    "pod-security.kubernetes.io/audit=restricted pod-security.kubernetes.io/warn=restricted --overwrite"
)


def test_a_namespace_without_pod_security_labels_fails(
    cluster: EmulatedCluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster.label_namespace(NAMESPACE, {"pod-security.kubernetes.io/audit": None})
    code, found = findings(cluster, tmp_path, capsys)
    assert code == 0
    assert found[0] == ("warn", "pod security", "namespace gpuplat-runs enforces Pod Security restricted but does "
                        f"not audit with it (fix: {FIX_LABELS})")  # fmt: skip
    cluster.label_namespace(NAMESPACE, {"pod-security.kubernetes.io/enforce": None})
    code, found = findings(cluster, tmp_path, capsys)
    assert code == 1
    assert found[0] == ("fail", "pod security", "namespace gpuplat-runs has no pod-security.kubernetes.io/enforce "
                        "label: the cluster would admit a run's pod with hostPath, root or privilege escalation there "
                        f"(fix: {FIX_LABELS})")  # fmt: skip
    cluster.label_namespace(NAMESPACE, {"pod-security.kubernetes.io/enforce": "baseline"})
    assert "enforces only baseline" in findings(cluster, tmp_path, capsys)[1][0][2]


def test_a_namespace_without_a_default_deny_policy_fails(
    cluster: EmulatedCluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster.store.delete(NETWORK_POLICIES, NAMESPACE, "default-deny")
    code, found = findings(cluster, tmp_path, capsys)
    assert code == 1
    assert found[1] == (
        "fail",
        "network policy",
        "no NetworkPolicy in namespace gpuplat-runs denies all ingress and egress by default (2 policies): runs may "
        "reach the control plane, the database, cloud metadata (169.254.169.254) and other tenants' kernels "
        "(fix: kubectl apply -f deploy/kubernetes/network-policies.yaml)",
    )


def test_the_platforms_secret_or_database_beside_the_runs_fails(
    cluster: EmulatedCluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # As the old single-namespace layout had it: the control plane's Secret and PostgreSQL with the runs.
    cluster.add_secret(NAMESPACE, "gpuplat-control-plane", {"db-url": "postgresql+psycopg://gpuplat:pw@db/gpuplat"})
    cluster.store.create(POD, NAMESPACE, {
        "metadata": {"name": "gpuplat-postgres-0", "labels": {"app.kubernetes.io/name": "gpuplat-postgres"}},
        "spec": {
            "securityContext": {"runAsNonRoot": True, "runAsUser": 999, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [{"name": "postgres", "image": "postgres:16", "securityContext": {
                "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}}],
        },
    })  # fmt: skip
    code, found = findings(cluster, tmp_path, capsys)
    assert code == 1
    assert found[2:] == [
        ("fail", "runs namespace", "Secret gpuplat-control-plane of the platform is in namespace gpuplat-runs, where "
         "every run's pod could mount it (fix: keep it in the control plane's namespace, gpuplat-system in "
         "deploy/kubernetes/, and kubectl -n gpuplat-runs delete secret gpuplat-control-plane)"),
        ("fail", "runs namespace", "pod gpuplat-postgres-0 (gpuplat-postgres) runs in namespace gpuplat-runs, beside "
         "the runs: its Secrets are theirs to mount and no namespace boundary stands between them (fix: deploy it to "
         "gpuplat-system: deploy/kubernetes/control-plane.yaml, postgres.yaml)"),
    ]  # fmt: skip


async def test_isolation_reports_what_the_namespace_enforces_and_what_cannot_be_verified(
    cluster: EmulatedCluster, tmp_path: Path
) -> None:
    ex = KubernetesExecutor(**executor_config(cluster, tmp_path, tmp_path / "artifacts"), isolation_refresh_seconds=1.0)
    ex.set_observer(lambda o: None)
    try:

        async def controls(want: dict[str, bool]) -> dict[str, Any] | None:
            await asyncio.sleep(0)
            got = {c["name"]: c for c in ex.isolation()["controls"]}
            return got if all(got[k]["enforced"] is v for k, v in want.items()) else None

        got = await wait_for(lambda: controls({"pod_security": True, "network_policy": True}), 10, "the facts read")
        assert ex.isolation()["mode"] == "pod"
        assert {k: c["enforced"] for k, c in got.items()} == {
            "pod_security": True,
            "network_policy": True,
            "artifacts": True,
            "security_context": True,
            "environment": True,
            "session_kernels": True,
            "gpu_devices": False,
        }
        assert "not verifiable through the Kubernetes API" in got["gpu_devices"]["detail"]
        assert "accept-nvidia-visible-devices-envvar-when-unprivileged = false" in got["gpu_devices"]["detail"]
        assert "which the API does not show" in got["network_policy"]["detail"]
        assert "subPath <run id>" in got["artifacts"]["detail"]

        cluster.label_namespace(NAMESPACE, {"pod-security.kubernetes.io/enforce": None})
        cluster.store.delete(NETWORK_POLICIES, NAMESPACE, "default-deny")
        got = await wait_for(
            lambda: controls({"pod_security": False, "network_policy": False, "session_kernels": False}),
            10,
            "the refreshed facts",
        )
        assert "has no pod-security.kubernetes.io/enforce label" in got["pod_security"]["detail"]
        assert "kubectl apply -f deploy/kubernetes/network-policies.yaml" in got["network_policy"]["detail"]
    finally:
        await ex.close()
    hardened = KubernetesExecutor(**executor_config(cluster, tmp_path, tmp_path / "a2"), nvidia_toolkit_hardened=True)
    gpu = next(c for c in hardened.isolation()["controls"] if c["name"] == "gpu_devices")
    assert gpu["enforced"] is True and "set by the platform admin" in gpu["detail"]
