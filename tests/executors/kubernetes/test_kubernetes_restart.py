"""A crash of the server loses nothing on Kubernetes: Jobs are found again by label."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from kube_emulator import EmulatedCluster
from kube_emulator.store import JOB

from jupyter_gpuplat.executors.kubernetes.manifests import LABEL_INSTANCE, LABEL_RUN, MANAGED_BY, MANAGER

from ...k8s import NAMESPACE, deployed_cluster, executor_config, run_selector
from ...server import ServerProcess


@pytest.fixture
def cluster() -> Iterator[EmulatedCluster]:
    c = deployed_cluster()
    c.add_node("gpu-1", gpus=4)
    yield c
    c.stop()
    assert not c.errors, c.errors


@pytest.fixture
def server(tmp_path: Path, cluster: EmulatedCluster) -> Iterator[ServerProcess]:
    artifacts = tmp_path / "artifacts"
    srv = ServerProcess(
        tmp_path,
        extra_config={
            "GpuPlat": {"executor_class": "jupyter_gpuplat.executors.kubernetes.KubernetesExecutor"},
            "KubernetesExecutor": executor_config(cluster, tmp_path, artifacts),
        },
    )
    srv.start()
    yield srv
    srv.stop()


def orphan_job(cluster: EmulatedCluster, run_id: str) -> None:
    """A platform Job whose run record is gone (e.g. the database was restored from a backup)."""
    labels = {MANAGED_BY: MANAGER, LABEL_INSTANCE: "default", LABEL_RUN: run_id}
    cluster.store.create(
        JOB,
        NAMESPACE,
        {
            "metadata": {"name": f"gpuplat-{run_id}", "labels": labels},
            "spec": {
                "backoffLimit": 0,
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [
                            {"name": "main", "image": "python:3.11-slim", "command": ["sh", "-c", "gate x"]}
                        ],
                    },
                },
            },
        },
    )


def test_restart_reattaches_to_running_jobs_and_finishes_their_records(
    server: ServerProcess, cluster: EmulatedCluster, tmp_path: Path
) -> None:
    body = {"project": "team-a", "presets": ["single-gpu"]}
    a = server.ok("POST", "runs", body={**body, "name": "a", "command": "echo a1; gate ga; echo a2"})["id"]
    b = server.ok("POST", "runs", body={**body, "name": "b", "command": "echo b1; gate gb; echo b2; exit 4"})["id"]
    for rid, line in ((a, b"a1\n"), (b, b"b1\n")):
        server.wait_status(rid, "running")
        _wait_log(server, rid, line)

    server.kill()
    # While the server is down: run a finishes, run b keeps running, and a Job appears that no run owns.
    cluster.open_gate("ga")
    cluster.wait_for(
        lambda: any(
            c["type"] == "Complete"
            for j in cluster.jobs_in(NAMESPACE, run_selector(a))
            for c in (j.get("status") or {}).get("conditions") or ()
        ),
        10,
        "run a's Job to complete",
    )
    orphan_job(cluster, "r-orphan0001")

    server.start()
    done = server.wait_status(a, "succeeded")
    assert done["exit_code"] == 0
    reasons = [e["reason"] for e in done["timeline"]]
    assert reasons.index("Running") < reasons.index("Reattached") < reasons.index("Completed") == len(reasons) - 1
    assert server.ok("GET", f"runs/{a}/logs", format="text") == b"a1\na2\n"  # resumed, nothing doubled

    still = server.ok("GET", f"runs/{b}")
    assert still["status"] == "running" and still["timeline"][-1]["reason"] in ("Reattached", "Running")
    cluster.open_gate("gb")
    failed = server.wait_status(b, "failed")
    assert failed["exit_code"] == 4 and "exited with code 4" in failed["message"]
    assert server.ok("GET", f"runs/{b}/logs", format="text") == b"b1\nb2\n"

    # The Job without a run record is reported, and left alone.
    assert [j["metadata"]["name"] for j in cluster.jobs_in(NAMESPACE, run_selector("r-orphan0001"))] == [
        "gpuplat-r-orphan0001"
    ]
    log = (tmp_path / "server.log").read_text()
    assert (
        "Job gpuplat-r-orphan0001 in namespace gpuplat-runs carries run id r-orphan0001, which has no unfinished "
        "run" in log
    )


def _wait_log(server: ServerProcess, run_id: str, text: bytes) -> None:
    from ...waiting import until

    until(lambda: text in server.ok("GET", f"runs/{run_id}/logs", format="text"), f"{text!r} in the log of {run_id}")
