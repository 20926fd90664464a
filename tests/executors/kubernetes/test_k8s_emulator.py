"""The Kubernetes API emulator, driven by the official client over HTTP: what real apiservers do."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kube_emulator import EmulatedCluster, Permissions, load_manifests
from kube_emulator.store import NODE
from kubernetes import client, config, watch
from kubernetes.client.exceptions import ApiException

from ...k8s import DEPLOY

NS = "ns"


@pytest.fixture
def cluster() -> Iterator[EmulatedCluster]:
    with EmulatedCluster(bookmark_seconds=0.2) as c:
        c.add_namespace(NS)
        yield c
        assert not c.errors, c.errors


@pytest.fixture
def api(cluster: EmulatedCluster, tmp_path: Path) -> Iterator[Any]:
    a = config.new_client_from_config(str(cluster.write_kubeconfig(tmp_path / "kc", NS)))
    yield a
    a.close()


def job(name: str, script: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": {"app": "t"}},
        "spec": {
            "backoffLimit": 0,
            **spec,
            "template": {
                "metadata": {"labels": {"app": "t"}},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "main", "image": "busybox:1", "command": ["sh", "-c", script]}],
                },
            },
        },
    }


def conditions(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in (obj.get("status") or {}).get("conditions") or ()}


def test_crud_metadata_and_errors(api: Any) -> None:
    core = client.CoreV1Api(api)
    assert client.VersionApi(api).get_code().git_version.startswith("v1.34")
    assert "batch" in [g.name for g in client.ApisApi(api).get_api_versions().groups]  # GET /apis/ (trailing slash)
    body = {"metadata": {"generateName": "cm-", "labels": {"a": "1"}}, "data": {"k": "v"}}
    made, status, _headers = core.create_namespaced_config_map_with_http_info(NS, body)
    assert status == 201
    assert made.metadata.name.startswith("cm-") and len(made.metadata.name) == 8
    assert made.metadata.namespace == NS and made.metadata.uid and int(made.metadata.resource_version) > 0
    with pytest.raises(ApiException) as dup:
        core.create_namespaced_config_map(NS, {"metadata": {"name": made.metadata.name}})
    assert dup.value.status == 409 and '"reason":"AlreadyExists"' in dup.value.body.replace(" ", "")
    with pytest.raises(ApiException) as missing:
        core.read_namespaced_config_map("nope", NS)
    assert missing.value.status == 404 and 'configmaps \\"nope\\" not found' in missing.value.body
    stale = core.read_namespaced_config_map(made.metadata.name, NS)
    core.patch_namespaced_config_map(made.metadata.name, NS, {"data": {"k": "w"}})
    stale_body = api.sanitize_for_serialization(stale)
    stale_body["data"] = {"k": "x"}
    with pytest.raises(ApiException) as conflict:
        core.replace_namespaced_config_map(made.metadata.name, NS, stale_body)
    assert conflict.value.status == 409


def test_selectors_pagination_and_deletecollection(api: Any) -> None:
    core = client.CoreV1Api(api)
    for i, (team, tier) in enumerate([("a", "gpu"), ("a", "cpu"), ("b", "gpu"), ("c", None)]):
        labels = {"team": team, **({"tier": tier} if tier else {})}
        core.create_namespaced_config_map(NS, {"metadata": {"name": f"cm-{i}", "labels": labels}})

    def names(**kw: Any) -> list[str]:
        return [o.metadata.name for o in core.list_namespaced_config_map(NS, **kw).items]

    assert names(label_selector="team=a") == ["cm-0", "cm-1"]
    assert names(label_selector="team!=a,tier") == ["cm-2"]
    assert names(label_selector="team in (b,c)") == ["cm-2", "cm-3"]
    assert names(label_selector="team notin (a),!tier") == ["cm-3"]
    assert names(field_selector="metadata.name=cm-1") == ["cm-1"]
    with pytest.raises(ApiException) as bad:
        core.list_namespaced_config_map(NS, field_selector="data.k=v")
    assert bad.value.status == 400 and "field label not supported" in bad.value.body
    page = core.list_namespaced_config_map(NS, limit=3)
    assert len(page.items) == 3 and page.metadata._continue
    rest = core.list_namespaced_config_map(NS, limit=3, _continue=page.metadata._continue)
    assert [o.metadata.name for o in rest.items] == ["cm-3"] and not rest.metadata._continue
    core.delete_collection_namespaced_config_map(NS, label_selector="team=a")
    assert names() == ["cm-2", "cm-3"]


def test_watch_resume_bookmarks_timeout_and_410(api: Any, cluster: EmulatedCluster) -> None:
    core = client.CoreV1Api(api)
    listed = core.list_namespaced_config_map(NS)
    rv = listed.metadata.resource_version
    core.create_namespaced_config_map(NS, {"metadata": {"name": "one"}})
    core.create_namespaced_config_map(NS, {"metadata": {"name": "two", "labels": {"x": "y"}}})
    w = watch.Watch()
    seen = [
        (e["type"], e["object"].metadata.name)
        for e in w.stream(core.list_namespaced_config_map, NS, resource_version=rv, timeout_seconds=1)
    ]
    assert seen == [("ADDED", "one"), ("ADDED", "two")]  # replayed from the resourceVersion, then timed out
    labelled = [
        e["object"].metadata.name
        for e in watch.Watch().stream(
            core.list_namespaced_config_map, NS, resource_version=rv, label_selector="x=y", timeout_seconds=1
        )
    ]
    assert labelled == ["two"]
    types = [
        e["type"]
        for e in watch.Watch().stream(
            core.list_namespaced_config_map, NS, resource_version=rv, allow_watch_bookmarks=True, timeout_seconds=1
        )
    ]
    assert "BOOKMARK" in types
    cluster.compact()
    with pytest.raises(ApiException) as gone:
        list(watch.Watch().stream(core.list_namespaced_config_map, NS, resource_version=rv, timeout_seconds=1))
    assert gone.value.status == 410 and "too old resource version" in str(gone.value.reason)


def test_patches_merge_like_the_real_ones(api: Any, cluster: EmulatedCluster) -> None:
    cluster.add_node("n1", gpus=1)
    core = client.CoreV1Api(api)
    core.patch_node("n1", {"spec": {"taints": [{"key": "a", "effect": "NoSchedule"}]}})
    core.patch_node_status("n1", {"status": {"conditions": [{"type": "MemoryPressure", "status": "False"}]}})
    node = cluster.store.get(NODE, "", "n1")
    assert set(conditions(node)) == {"Ready", "MemoryPressure"}  # strategic merge keys conditions by type
    assert node["spec"]["taints"] == [{"key": "a", "effect": "NoSchedule"}]


def test_job_controller_scheduler_kubelet_and_cascade(api: Any, cluster: EmulatedCluster) -> None:
    cluster.add_node("gpu-1", gpus=1)
    batch, core = client.BatchV1Api(api), client.CoreV1Api(api)
    batch.create_namespaced_job(NS, job("ok", "echo hi; exit 0"))
    batch.create_namespaced_job(NS, job("flaky", "echo try; exit 2", backoffLimit=1))
    batch.create_namespaced_job(NS, job("slow", "gate never", activeDeadlineSeconds=1))

    def cond(name: str, type_: str) -> dict[str, Any] | None:
        j = cluster.jobs_in(NS, None)
        found = [x for x in j if x["metadata"]["name"] == name]
        return conditions(found[0]).get(type_) if found else None

    cluster.wait_for(lambda: cond("ok", "Complete"), 10, "ok to complete")
    cluster.wait_for(lambda: cond("flaky", "Failed"), 10, "flaky to fail")
    cluster.wait_for(lambda: cond("slow", "Failed"), 10, "slow to time out")
    assert cond("flaky", "Failed")["reason"] == "BackoffLimitExceeded"  # type: ignore[index]
    assert cond("slow", "Failed")["message"] == "Job was active longer than specified deadline"  # type: ignore[index]
    flaky = core.list_namespaced_pod(NS, label_selector="job-name=flaky").items
    assert len(flaky) == 2 and all(p.status.phase == "Failed" for p in flaky)  # one retry, then the limit
    assert batch.read_namespaced_job("flaky", NS).status.failed == 2
    ok_pod = core.list_namespaced_pod(NS, label_selector="job-name=ok").items[0]
    assert ok_pod.metadata.owner_references[0].kind == "Job"
    assert core.read_namespaced_pod_log(ok_pod.metadata.name, NS) == "hi\n"
    # Deleting a Job through the API orphans its pods by default; Background takes them along.
    batch.delete_namespaced_job("ok", NS)
    assert core.read_namespaced_pod(ok_pod.metadata.name, NS).metadata.owner_references is None
    batch.delete_namespaced_job("flaky", NS, propagation_policy="Background")
    cluster.wait_for(lambda: not cluster.pods(NS, "job-name=flaky"), 5, "flaky's pods to go")
    # Every object the controllers wrote deserialises into the client's (strict) models.
    reasons = {e.reason for e in core.list_namespaced_event(NS).items}
    assert {
        "Scheduled",
        "Pulling",
        "Pulled",
        "Created",
        "Started",
        "SuccessfulCreate",
        "BackoffLimitExceeded",
    } <= reasons
    assert [n.metadata.name for n in core.list_node().items] == ["gpu-1"]
    assert batch.list_namespaced_job(NS).items


def test_foreground_deletion_waits_for_running_pods(api: Any, cluster: EmulatedCluster) -> None:
    cluster.add_node("gpu-1", gpus=1)
    cluster.kubelet.termination_seconds = 0.3
    batch = client.BatchV1Api(api)
    batch.create_namespaced_job(NS, job("fg", "echo up; gate never"))
    cluster.wait_for(lambda: [p for p in cluster.pods(NS) if p["status"].get("phase") == "Running"], 5, "running")
    batch.delete_namespaced_job("fg", NS, propagation_policy="Foreground")
    held = cluster.jobs_in(NS)
    assert held and held[0]["metadata"]["finalizers"] == ["foregroundDeletion"]  # waits for its pods
    cluster.wait_for(lambda: not cluster.jobs_in(NS) and not cluster.pods(NS), 5, "job and pod gone")


def test_logs_follow_while_the_container_prints(api: Any, cluster: EmulatedCluster) -> None:
    cluster.add_node("gpu-1", gpus=1)
    core = client.CoreV1Api(api)
    client.BatchV1Api(api).create_namespaced_job(NS, job("talk", "echo first; gate more; echo second"))
    pod = cluster.wait_for(lambda: [p for p in cluster.pods(NS) if p["status"].get("phase") == "Running"], 5, "run")[0]
    name = pod["metadata"]["name"]
    stream = watch.Watch().stream(core.read_namespaced_pod_log, name, NS, timestamps=True, _request_timeout=10)
    first = next(stream)
    assert first.endswith("Z first") and first[:4].isdigit()
    cluster.open_gate("more")
    assert next(stream).endswith(" second")
    assert list(stream) == []  # ends when the container does
    assert core.read_namespaced_pod_log(name, NS, tail_lines=1) == "second\n"


def test_waiting_containers_and_config_errors(api: Any, cluster: EmulatedCluster) -> None:
    cluster.add_node("gpu-1", gpus=2)
    cluster.missing_image("busybox:missing")
    batch, core = client.BatchV1Api(api), client.CoreV1Api(api)
    pull = job("pull", "true")
    pull["spec"]["template"]["spec"]["containers"][0]["image"] = "busybox:missing"
    secret = job("secret", "true")
    secret["spec"]["template"]["spec"]["containers"][0]["env"] = [
        {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf", "key": "token"}}}
    ]
    batch.create_namespaced_job(NS, pull)
    batch.create_namespaced_job(NS, secret)

    def waiting(job_name: str, reason: str) -> Any:
        for p in cluster.pods(NS, f"job-name={job_name}"):
            state = (p["status"].get("containerStatuses") or [{}])[0].get("state", {})
            if state.get("waiting", {}).get("reason") == reason:
                return p
        return None

    pod = cluster.wait_for(lambda: waiting("pull", "ImagePullBackOff"), 5, "image pull back-off")
    with pytest.raises(ApiException) as early:
        core.read_namespaced_pod_log(pod["metadata"]["name"], NS)
    assert early.value.status == 400 and "is waiting to start: trying and failing to pull image" in early.value.body
    assert any(e["reason"] == "Failed" and "not found" in e["message"] for e in cluster.events_for(pod))
    sp = cluster.wait_for(lambda: waiting("secret", "CreateContainerConfigError"), 5, "config error")
    assert sp["status"]["containerStatuses"][0]["state"]["waiting"]["message"] == 'secret "hf" not found'
    cluster.add_secret(NS, "hf", {"token": "x"})  # the kubelet retries and the pod starts
    cluster.wait_for(lambda: any(p["status"].get("phase") == "Succeeded" for p in cluster.pods(NS, "job-name=secret")),
                     5, "the pod to start once the secret exists")  # fmt: skip


def test_crash_loop_under_on_failure(api: Any, cluster: EmulatedCluster) -> None:
    cluster.add_node("gpu-1", gpus=1)
    j = job("crash", "echo boom; exit 1", backoffLimit=3)
    j["spec"]["template"]["spec"]["restartPolicy"] = "OnFailure"
    client.BatchV1Api(api).create_namespaced_job(NS, j)

    def looping() -> Any:
        for p in cluster.pods(NS):
            cs = (p["status"].get("containerStatuses") or [{}])[0]
            if cs.get("state", {}).get("waiting", {}).get("reason") == "CrashLoopBackOff" and cs["restartCount"] >= 1:
                return cs
        return None

    cs = cluster.wait_for(looping, 5, "crash loop")
    assert cs["lastState"]["terminated"]["exitCode"] == 1
    assert cs["state"]["waiting"]["message"].startswith("back-off 10s restarting failed container=main pod=crash-")


def test_scheduler_messages_and_priority_class_admission(api: Any, cluster: EmulatedCluster) -> None:
    cluster.add_node("gpu-1", gpus=1, unschedulable=True)
    cluster.add_node("gpu-2", gpus=1, labels={"pool": "b"})
    j = job("placed", "true")
    j["spec"]["template"]["spec"]["nodeSelector"] = {"pool": "a"}
    client.BatchV1Api(api).create_namespaced_job(NS, j)
    pod = cluster.wait_for(lambda: [p for p in cluster.pods(NS) if "PodScheduled" in conditions(p)], 5, "scheduled")
    c = conditions(pod[0])["PodScheduled"]
    assert (c["status"], c["reason"]) == ("False", "Unschedulable")
    assert c["message"] == (
        "0/2 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, 1 node(s) were "
        "unschedulable. preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling.."
    )
    pc = job("pc", "true")
    pc["spec"]["template"]["spec"]["priorityClassName"] = "gpuplat-batch"
    made = client.BatchV1Api(api).create_namespaced_job(NS, pc)
    ref = {"metadata": {"namespace": NS, "uid": made.metadata.uid}}
    refused = cluster.wait_for(
        lambda: [e for e in cluster.events_for(ref) if e["reason"] == "FailedCreate"], 5, "FailedCreate"
    )
    assert "no PriorityClass with name gpuplat-batch was found" in refused[0]["message"]
    cluster.apply(load_manifests([DEPLOY / "priorityclasses.yaml"]))
    cluster.wait_for(lambda: cluster.pods(NS, "job-name=pc"), 5, "the pod once the PriorityClass exists")
    assert cluster.pods(NS, "job-name=pc")[0]["spec"]["priority"] == 100


def test_rbac_from_the_project_role_and_access_reviews(cluster: EmulatedCluster, tmp_path: Path) -> None:
    """The control plane's account (gpuplat-system) gets the Role's rules in gpuplat-runs, and nothing elsewhere."""
    cluster.apply(load_manifests([DEPLOY / "namespace.yaml"]))
    docs = load_manifests([DEPLOY / "rbac.yaml"])
    cluster.permissions = Permissions.from_manifests(docs, "gpuplat", "gpuplat-system")
    a = config.new_client_from_config(str(cluster.write_kubeconfig(tmp_path / "kc", "gpuplat-runs")))
    try:
        core = client.CoreV1Api(a)
        core.list_namespaced_pod("gpuplat-runs")  # granted
        with pytest.raises(ApiException) as denied:
            core.list_namespaced_secret("gpuplat-runs")
        assert denied.value.status == 403
        assert (
            'secrets is forbidden: User \\"system:serviceaccount:gpuplat-system:gpuplat\\" cannot list resource '
            '\\"secrets\\" in API group \\"\\" in the namespace \\"gpuplat-runs\\"'
        ) in denied.value.body
        with pytest.raises(ApiException):
            client.BatchV1Api(a).list_namespaced_job("gpuplat-system")  # the Role is the runs' namespace's only
        # A Namespace object is authorized in itself: the Role's resourceNames grant this one, no other.
        assert core.read_namespace("gpuplat-runs").metadata.labels["pod-security.kubernetes.io/enforce"] == "restricted"
        with pytest.raises(ApiException) as other:
            core.read_namespace("gpuplat-system")
        assert other.value.status == 403
        review = client.AuthorizationV1Api(a).create_self_subject_access_review(
            {"spec": {"resourceAttributes": {"verb": "delete", "group": "batch", "resource": "jobs",
                                             "namespace": "gpuplat-runs"}}}
        )  # fmt: skip
        assert review.status.allowed is True
        own = client.AuthorizationV1Api(a).create_self_subject_access_review(
            {"spec": {"resourceAttributes": {"verb": "get", "resource": "namespaces", "namespace": "gpuplat-runs",
                                             "name": "gpuplat-runs"}}}
        )  # fmt: skip
        assert own.status.allowed is True
    finally:
        a.close()


def test_fault_injection(api: Any, cluster: EmulatedCluster) -> None:
    core = client.CoreV1Api(api)
    cluster.faults.fail_next("list", "configmaps", code=503)
    with pytest.raises(ApiException) as failed:
        core.list_namespaced_config_map(NS)
    assert failed.value.status == 503
    core.list_namespaced_config_map(NS)  # only the next call
    assert cluster.requests[("list", "configmaps")] == 2
