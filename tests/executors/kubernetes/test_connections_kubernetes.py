"""Named connections on Kubernetes: the Job takes them by reference, its pod reads them, the check finds them.

The real KubernetesExecutor against the emulator with pods as local processes: the
pod's env comes from the Secrets the emulator holds (secretKeyRef), so the run proves it
got the values by printing their hashes. `check_cluster` reports each connection's
missing PVC or Secret (or key) by name.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kube_emulator import EmulatedCluster

from jupyter_gpuplat.core.config import parse_config
from jupyter_gpuplat.core.policy import resolve
from jupyter_gpuplat.core.request import RunRequest
from jupyter_gpuplat.executors.base import LaunchRequest, Observation
from jupyter_gpuplat.executors.kubernetes.check import check_cluster
from jupyter_gpuplat.executors.kubernetes.connections import volume_name
from jupyter_gpuplat.executors.kubernetes.executor import KubernetesExecutor, api_client

from ...k8s import NAMESPACE, deployed_cluster, executor_config, run_selector
from ...waiting import wait_for

HF = "hf-k8s-s3cr3t-41af"
AWS = "aws-k8s-s3cr3t-93be"
PROBE = (
    "import hashlib, os; h = lambda s: hashlib.sha256(s.encode()).hexdigest()[:16]; "
    "print('hf:', h(os.environ['HF_TOKEN']), 'aws:', h(os.environ['AWS_SECRET_ACCESS_KEY']), "
    "os.environ['AWS_ACCESS_KEY_ID'], 'data:', os.environ['GPUPLAT_CONNECTION_DATASETS'])"
)
CONFIG = {
    "admins": ["ops"],
    "queues": [{"name": "q"}],
    "presets": [{"name": "data", "connections": ["datasets", "hf-token", "s3"]}],
    "projects": [{"name": "team-a", "members": {"alice": "member"}, "default_queue": "q"}],
    "connections": [
        {"name": "datasets", "kind": "volume", "claim": "datasets", "mount_path": "/data", "read_only": True},
        {"name": "hf-token", "kind": "secret", "secret": "hf-token", "env": {"HF_TOKEN": "token"}},
        {"name": "s3", "kind": "bucket", "endpoint": "http://minio:9000", "secret": "s3-creds"},
    ],
}


def h(s: str) -> str:
    return hashlib.sha256(s.encode()).hexdigest()[:16]


@pytest.fixture
def cluster() -> Iterator[EmulatedCluster]:
    c = deployed_cluster(local_processes=True)
    yield c
    c.stop()
    assert not c.errors, c.errors


async def test_a_job_gets_its_connections_from_the_cluster(cluster: EmulatedCluster, tmp_path: Path) -> None:
    cluster.add_node("cpu-1")
    cluster.add_pvc(NAMESPACE, "datasets")
    cluster.add_secret(NAMESPACE, "hf-token", {"token": HF})
    cluster.add_secret(NAMESPACE, "s3-creds", {"AWS_ACCESS_KEY_ID": "AKIAK8S", "AWS_SECRET_ACCESS_KEY": AWS})
    cfg = parse_config(CONFIG)
    res = resolve(cfg, "alice", RunRequest(project="team-a", presets=["data"], command=["python", "-c", PROBE]))
    assert res.violations == ()
    artifacts = tmp_path / "artifacts"
    req = LaunchRequest(
        run_id="r-conn-k8s", entrypoint=res.request.entrypoint(), env={}, devices=(),
        workdir=str(artifacts / "r-conn-k8s"), spec=res.resolved, project="team-a", user="alice",
        provenance=res.provenance,
    )  # fmt: skip
    seen: list[Observation] = []
    ex = KubernetesExecutor(**{**executor_config(cluster, tmp_path, artifacts), "pod_settle_seconds": 0.3})
    ex.set_observer(seen.append)
    try:
        await ex.submit(req)
        [job] = cluster.jobs_in(NAMESPACE, run_selector(req.run_id))
        pod = job["spec"]["template"]["spec"]
        assert {"name": volume_name("datasets"), "persistentVolumeClaim": {"claimName": "datasets"}} in pod["volumes"]
        env = {e["name"]: e for e in pod["containers"][0]["env"]}
        assert env["HF_TOKEN"]["valueFrom"] == {"secretKeyRef": {"name": "hf-token", "key": "token"}}
        assert env["AWS_ENDPOINT_URL"]["value"] == "http://minio:9000"
        assert HF not in json.dumps(job) and AWS not in json.dumps(job)
        await wait_for(lambda: any(o.status in ("succeeded", "failed") for o in seen), 30, "the run to end")
        assert seen[-1].status == "succeeded", seen[-1]
        log = (artifacts / req.run_id / "output.log").read_text()
        assert f"hf: {h(HF)} aws: {h(AWS)} AKIAK8S data: /data" in log
        assert HF not in log and AWS not in log
    finally:
        await ex.close()


def test_cluster_check_names_each_missing_backing_object(cluster: EmulatedCluster, tmp_path: Path) -> None:
    conns: list[dict[str, Any]] = [c.reference() for c in parse_config(CONFIG).connections]
    kubeconfig = cluster.write_kubeconfig(tmp_path / "kubeconfig", NAMESPACE)

    def connection_findings() -> list[tuple[str, str]]:
        api = api_client(str(kubeconfig), "", pool_size=2)
        try:
            report = check_cluster(api, NAMESPACE, connections=conns)
        finally:
            api.close()
        return [(f.level, f.message) for f in report.findings if f.topic == "connections"]

    assert connection_findings() == [
        ("fail", f'connection datasets: PersistentVolumeClaim "datasets" does not exist in namespace {NAMESPACE}'),
        ("fail", f'connection hf-token: Secret "hf-token" does not exist in namespace {NAMESPACE}'),
        ("fail", f'connection s3: Secret "s3-creds" does not exist in namespace {NAMESPACE}'),
    ]
    cluster.add_pvc(NAMESPACE, "datasets", phase="Pending")
    cluster.add_secret(NAMESPACE, "hf-token", {"token": HF})
    cluster.add_secret(NAMESPACE, "s3-creds", {"AWS_ACCESS_KEY_ID": "AKIAK8S"})
    findings = connection_findings()
    assert findings == [
        ("fail", 'connection datasets: PersistentVolumeClaim "datasets" is Pending: runs that mount it cannot be '
         "scheduled"),
        ("ok", 'connection hf-token: Secret "hf-token" exists'),
        ("fail", 'connection s3: Secret "s3-creds" has no key(s) AWS_SECRET_ACCESS_KEY'),
    ]  # fmt: skip
    assert HF not in json.dumps(findings)
