"""Idempotent launch on Kubernetes: a Job created before a crash that lost its handle is adopted.

The real `KubernetesExecutor` (official client, over HTTP) against the project's emulator,
with the project's Role enforced. The crash window: one executor creates the run's Job, its
handle is thrown away (the server died before saving it), a new executor is asked to submit
the same run. It must find the Job (409 on create), check that it is this run's by its label,
and watch it to its end: one Job, one pod, the log once. A Job of the same name that belongs
to another run is refused with an error naming both runs' Job, and left alone.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from kube_emulator import EmulatedCluster
from kube_emulator.store import JOB

from jupyter_gpuplat.executors.base import ExecutorError
from jupyter_gpuplat.executors.kubernetes.manifests import LABEL_INSTANCE, LABEL_RUN, MANAGED_BY, MANAGER

from ...k8s import NAMESPACE, deployed_cluster, run_selector
from ...waiting import wait_for
from .conftest import Executors


@pytest.fixture
def cluster() -> Iterator[EmulatedCluster]:
    c = deployed_cluster()
    c.add_node("gpu-1", gpus=4)
    yield c
    c.stop()
    assert not c.errors, c.errors


async def test_a_job_created_before_the_crash_is_adopted_and_watched_to_its_end(
    cluster: EmulatedCluster, executors: Executors
) -> None:
    req = executors.request("r-adopt0001", "echo one; gate g1; echo two; exit 3")
    first, _ = executors.new()
    lost = await first.submit(req)  # the Job exists; the server dies before saving this handle
    await first.close()
    [job] = cluster.jobs_in(NAMESPACE, run_selector(req.run_id))
    await wait_for(lambda: _running(cluster, req.run_id), 20, "the first pod to run")

    second, seen = executors.new()
    handle = await second.submit(req)  # the restarted engine submits the same run again
    assert handle["job"] == lost["job"] == job["metadata"]["name"]
    assert handle["uid"] == lost["uid"] == job["metadata"]["uid"]  # the same Job, not a new one
    assert [j["metadata"]["uid"] for j in cluster.jobs_in(NAMESPACE, run_selector(req.run_id))] == [handle["uid"]]

    cluster.open_gate("g1")
    final = await wait_for(lambda: next((o for o in seen if o.final), None), 20, "the adopted run's end")
    assert (final.status, final.exit_code) == ("failed", 3), final
    assert "exited with code 3" in final.message
    assert len(cluster.pods(NAMESPACE, run_selector(req.run_id))) <= 1  # never a second pod
    log = Path(executors.artifacts, req.run_id, "output.log").read_bytes()
    assert log == b"one\ntwo\n"  # followed once by the adopting executor, nothing doubled


async def test_a_job_of_the_same_name_for_another_run_is_not_adopted(
    cluster: EmulatedCluster, executors: Executors
) -> None:
    run_id, other = "r-victim001", "r-someone01"
    labels = {MANAGED_BY: MANAGER, LABEL_INSTANCE: "default", LABEL_RUN: other}
    name = f"gpuplat-{run_id}"  # the name the executor gives run_id's Job, labelled as another run's
    cluster.store.create(
        JOB,
        NAMESPACE,
        {
            "metadata": {"name": name, "labels": labels},
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
    ex, seen = executors.new()
    with pytest.raises(ExecutorError) as refused:
        await ex.submit(executors.request(run_id, "echo mine"))
    message = str(refused.value)
    assert run_id in message and name in message, message
    assert "already exists" in message and repr(other) in message and "not adopted" in message, message
    # Left alone: still one Job of that name, still the other run's.
    jobs = [j for j in cluster.jobs_in(NAMESPACE) if j["metadata"]["name"] == name]
    assert [j["metadata"]["labels"][LABEL_RUN] for j in jobs] == [other]
    assert cluster.jobs_in(NAMESPACE, run_selector(run_id)) == []
    assert seen == []  # nothing observed for a run that was never started


def _running(cluster: EmulatedCluster, run_id: str) -> bool:
    return any(
        "running" in (cs.get("state") or {})
        for p in cluster.pods(NAMESPACE, run_selector(run_id))
        for cs in (p.get("status") or {}).get("containerStatuses") or ()
    )
