"""Pure manifest builders against literal dicts; every manifest against the Kubernetes schemas.

Schemas: the `kubernetes-validate` package ships the upstream OpenAPI-derived JSON
schemas per Kubernetes release (strict: unknown fields are errors), so this runs
offline. Checked against the oldest and newest releases the platform targets.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from typing import Any

import kubernetes_validate
import pytest
import yaml

from jupyter_gpuplat.core.request import Entrypoint
from jupyter_gpuplat.executors.base import ExecutorError, LaunchRequest
from jupyter_gpuplat.executors.kubernetes.check import REQUIRED, STORAGE_PERMISSION
from jupyter_gpuplat.executors.kubernetes.manifests import (
    JobSettings,
    job_name,
    make_job,
    make_tolerations,
    working_dir_problem,
)

from ...k8s import DEPLOY

VERSIONS = ("1.27.0", "1.34.0")
SETTINGS = JobSettings(
    namespace="gpuplat",
    priority_classes={"interactive": "gpuplat-interactive", "*": "gpuplat-batch"},
    service_account="gpuplat-run",
    artifacts_claim="gpuplat-artifacts",
    artifacts_mount_path="/srv/gpuplat/artifacts",
)


def request(**spec: Any) -> LaunchRequest:
    return LaunchRequest(
        run_id="r-0a1b2c3d4e",
        entrypoint=Entrypoint("shell", shell="python train.py"),
        env={"HF_HOME": "/tmp/hf-cache", "NVIDIA_VISIBLE_DEVICES": "all", "CUDA_VISIBLE_DEVICES": "0,1"},
        devices=(),
        workdir="/srv/gpuplat/artifacts/r-0a1b2c3d4e",
        timeout_seconds=7200,
        spec={"queue": "team-a-train", **spec},
        project="team-a",
        user="alice",
        provenance={"placement.tolerations": "preset:gpu", "resources.gpu": "preset:gpu", "queue": "project:team-a"},
    )


def validate(doc: dict[str, Any]) -> None:
    for v in VERSIONS:
        kubernetes_validate.validate(doc, v, strict=True)


def test_make_job_literal() -> None:
    job = make_job(
        request(
            resources={"gpu": 2, "cpu": "8", "memory": "64Gi"},
            placement={
                "gpu_type": "NVIDIA-A100-SXM4-80GB",
                "node_selector": {"pool": "train", "gone": None},
                "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            },
            image="ghcr.io/team-a/train:1.4",
            volumes=[{"name": "data", "claim": "datasets", "mount_path": "/data", "read_only": True}],
        ),
        SETTINGS,
    )
    # The member's env set device variables (the policy refuses them): none reaches the pod.
    labels = {
        "app.kubernetes.io/managed-by": "jupyter-gpuplat",
        "gpuplat.io/instance": "default",
        "gpuplat.io/run-id": "r-0a1b2c3d4e",
        "gpuplat.io/project": "team-a",
        "gpuplat.io/queue": "team-a-train",
    }
    annotations = {
        "gpuplat.io/user": "alice",
        "gpuplat.io/presets": "gpu",
        "gpuplat.io/placement-from": '{"placement.tolerations":"preset:gpu"}',
        "gpuplat.io/gpu-type-label": "nvidia.com/gpu.product",
    }
    workdir = "/srv/gpuplat/artifacts/r-0a1b2c3d4e"
    assert job == {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "gpuplat-r-0a1b2c3d4e",
            "namespace": "gpuplat",
            "labels": labels,
            "annotations": annotations,
        },
        "spec": {
            "backoffLimit": 0,
            "podFailurePolicy": {
                "rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}]
            },
            "template": {
                "metadata": {"labels": labels, "annotations": annotations},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "main",
                            "image": "ghcr.io/team-a/train:1.4",
                            "command": ["/bin/sh", "-c", "python train.py"],
                            "workingDir": workdir,
                            "env": [
                                {"name": "HF_HOME", "value": "/tmp/hf-cache"},
                                {"name": "GPUPLAT_RUN_ID", "value": "r-0a1b2c3d4e"},
                                {"name": "GPUPLAT_ARTIFACTS_DIR", "value": workdir},
                                {"name": "PYTHONUNBUFFERED", "value": "1"},
                            ],
                            # The run's own directory of the claim, its code read-only over it; nothing else of it.
                            "volumeMounts": [
                                {"name": "gpuplat-artifacts", "mountPath": workdir, "subPath": "r-0a1b2c3d4e"},
                                {
                                    "name": "gpuplat-artifacts",
                                    "mountPath": f"{workdir}/code",
                                    "subPath": "r-0a1b2c3d4e/code",
                                    "readOnly": True,
                                },
                                {"name": "data", "mountPath": "/data", "readOnly": True},
                            ],
                            "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
                            "resources": {
                                "requests": {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": "2"},
                                "limits": {"memory": "64Gi", "nvidia.com/gpu": "2"},
                            },
                        }
                    ],
                    "volumes": [
                        {"name": "gpuplat-artifacts", "persistentVolumeClaim": {"claimName": "gpuplat-artifacts"}},
                        {"name": "data", "persistentVolumeClaim": {"claimName": "datasets"}},
                    ],
                    "automountServiceAccountToken": False,
                    "enableServiceLinks": False,
                    "securityContext": {
                        "runAsNonRoot": True,
                        "runAsUser": 1000,
                        "runAsGroup": 1000,
                        "seccompProfile": {"type": "RuntimeDefault"},
                    },
                    "nodeSelector": {"pool": "train", "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"},
                    "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                    "priorityClassName": "gpuplat-batch",
                    "serviceAccountName": "gpuplat-run",
                },
            },
            "activeDeadlineSeconds": 7200,
            "ttlSecondsAfterFinished": 86400,
        },
    }
    validate(job)


def test_minimal_job_defaults() -> None:
    script = Entrypoint("script", path="/srv/x.py")
    req = LaunchRequest("r-1", script, {}, (), "/tmp/r-1", spec={"queue": "interactive"})
    job = make_job(req, JobSettings(priority_classes={"interactive": "gpuplat-interactive"}))
    pod = job["spec"]["template"]["spec"]
    assert "activeDeadlineSeconds" not in job["spec"]
    assert pod["containers"][0]["command"] == ["python", "/srv/x.py"]  # the image's interpreter, not ours
    assert pod["containers"][0]["image"] == "python:3.11-slim"
    assert "resources" not in pod["containers"][0] and "nodeSelector" not in pod
    assert pod["volumes"] == [{"name": "gpuplat-artifacts", "emptyDir": {}}]  # no claim: the pod's own emptyDir
    [mount] = pod["containers"][0]["volumeMounts"]
    assert mount == {"name": "gpuplat-artifacts", "mountPath": "/gpuplat/artifacts/r-1"}
    assert {"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"} in pod["containers"][0]["env"]  # 0 GPUs
    assert pod["priorityClassName"] == "gpuplat-interactive"
    validate(job)


def test_spec_volumes_and_toleration_seconds() -> None:
    job = make_job(
        request(
            placement={"gpu_type": "any", "tolerations": [{"key": "spot", "operator": "Equal", "value": "true",
                                                            "effect": "NoExecute", "toleration_seconds": 30}]},
            volumes=[
                {"name": "creds", "secret": "hf-token", "mount_path": "/creds"},
                {"name": "cfg", "config_map": "train-config", "mount_path": "/cfg"},
                {"name": "scratch", "host_path": "/mnt/nvme", "mount_path": "/scratch"},
                {"name": "tmp"},
            ],
        ),
        SETTINGS,
    )  # fmt: skip
    pod = job["spec"]["template"]["spec"]
    assert "nodeSelector" not in pod  # gpu_type "any" selects nothing
    assert pod["tolerations"] == [
        {"key": "spot", "operator": "Equal", "value": "true", "effect": "NoExecute", "tolerationSeconds": 30}
    ]
    assert pod["volumes"][1:] == [
        {"name": "creds", "secret": {"secretName": "hf-token"}},
        {"name": "cfg", "configMap": {"name": "train-config"}},
        {"name": "scratch", "hostPath": {"path": "/mnt/nvme"}},
        {"name": "tmp", "emptyDir": {}},
    ]
    validate(job)


def test_names_and_refusals() -> None:
    assert job_name("r-ABC_def") == "gpuplat-r-abc-def"
    assert make_tolerations(None) == []
    with pytest.raises(ExecutorError, match="cannot be a Kubernetes label value"):
        make_job(request(), JobSettings(instance="no spaces allowed"))
    bad = LaunchRequest("r-1", Entrypoint("command"), {}, (), "/tmp/r-1", spec={"queue": "q"}, project="p")
    with pytest.raises(ExecutorError, match="non-empty list of strings"):
        make_job(bad, SETTINGS)


def deploy_docs() -> list[tuple[str, dict[str, Any]]]:
    out = []
    for path in sorted(DEPLOY.glob("*.yaml")):
        out.extend((path.name, d) for d in yaml.safe_load_all(path.read_text()) if d)
    return out


@pytest.mark.parametrize("name,doc", deploy_docs(), ids=lambda x: x if isinstance(x, str) else x["kind"])
def test_deploy_manifests_match_the_schemas(name: str, doc: dict[str, Any]) -> None:
    validate(doc)


def test_role_is_least_privilege_and_enough() -> None:
    docs = [d for _, d in deploy_docs()]
    role = next(d for d in docs if d["kind"] == "Role")
    cluster_role = next(d for d in docs if d["kind"] == "ClusterRole")
    granted = {
        (v, g, r) for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]
    }
    cluster = {
        (v, g, r)
        for rule in cluster_role["rules"]
        for g in rule["apiGroups"]
        for r in rule["resources"]
        for v in rule["verbs"]
    }
    needed = {
        (p.verb, p.group, f"{p.resource}/{p.subresource}" if p.subresource else p.resource)
        for p in (*REQUIRED, STORAGE_PERMISSION)
    }
    assert granted | cluster == needed, "the Role grants exactly what the executor uses (check.REQUIRED)"
    assert cluster == {("list", "", "nodes"), ("watch", "", "nodes")}, "cluster-wide: nodes, read-only"
    assert not any("*" in x for x in granted | cluster)
    assert not any(r in ("pods/exec", "pods/attach") for _, _, r in granted)
    assert {(v, r) for v, _, r in granted if r == "secrets"} <= {
        ("create", "secrets"),
        ("get", "secrets"),
        ("patch", "secrets"),
        ("delete", "secrets"),
    }


def test_entrypoints_use_the_images_python_and_the_pods_view_of_the_artifact_volume() -> None:
    settings = JobSettings(artifacts_claim="art", artifacts_mount_path="/mnt/art")
    base = {"env": {}, "devices": (), "workdir": "/data/artifacts/r-1", "spec": {"queue": "q"}, "project": "p"}

    def container(entry: Entrypoint, working_dir: str | None = None) -> dict[str, Any]:
        job = make_job(LaunchRequest("r-1", entry, working_dir=working_dir, **base), settings)  # type: ignore[arg-type]
        validate(job)
        return dict(job["spec"]["template"]["spec"]["containers"][0])

    cell = container(Entrypoint("cell", code="print(1)", args=("a",)))
    assert cell["command"] == ["python", "/mnt/art/r-1/code/cell.py", "a"]
    assert cell["workingDir"] == "/mnt/art/r-1"
    # A script or notebook runs from its snapshot in the run's read-only code/: a pod sees no other copy.
    nb = container(Entrypoint("notebook", path="/data/artifacts/shared/alice/nb.ipynb"))
    assert nb["command"] == ["python", "-m", "jupyter_gpuplat.nbrun", "/mnt/art/r-1/code/nb.ipynb"]
    script = container(Entrypoint("script", path="/home/alice/train.py", args=("--lr", "0.1")))
    assert script["command"] == ["python", "/mnt/art/r-1/code/train.py", "--lr", "0.1"]
    own = container(Entrypoint("command", argv=("python", "train.py")))
    assert own["command"] == ["python", "train.py"] and own["workingDir"] == "/mnt/art/r-1"
    assert sys.executable not in json.dumps(own)
    # A pod sees only its own run's directory: no working_dir of anyone's, on the volume or not.
    for elsewhere in ("/home/alice/project", "/data/artifacts/shared/alice", "/data/artifacts/r-other"):
        with pytest.raises(ExecutorError, match="sees only its own run's directory"):
            container(Entrypoint("command", argv=("true",)), working_dir=elsewhere)
        assert "leave working_dir out" in (working_dir_problem(elsewhere, "/data/artifacts", settings) or "")


def test_the_chosen_flavor_places_the_pod_whatever_the_spec_says() -> None:
    """Admin-controlled placement: the flavor's labels win over the spec's, its tolerations are added,
    and `gpu_type` (a flavor's name here) is no label value."""
    req = dataclasses.replace(
        request(
            resources={"gpu": 1},
            placement={
                "gpu_type": "h100",
                "node_selector": {"nvidia.com/gpu.product": "NVIDIA-L4", "pool": "train"},
                "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            },
        ),
        flavor={
            "name": "h100",
            "node_labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
            "tolerations": [{"key": "gpuplat.io/pool", "operator": "Equal", "value": "h100", "effect": "NoSchedule"}],
        },
    )
    job = make_job(req, SETTINGS)
    validate(job)
    pod = job["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "pool": "train"}
    assert pod["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
        {"key": "gpuplat.io/pool", "operator": "Equal", "value": "h100", "effect": "NoSchedule"},
    ]
    env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
    assert env["GPUPLAT_FLAVOR"] == "h100"
    # a run cannot claim another flavor through its own env: the platform's name is the only one
    claimed = make_job(dataclasses.replace(req, env={**req.env, "GPUPLAT_FLAVOR": "a100"}), SETTINGS)
    names = [e["name"] for e in claimed["spec"]["template"]["spec"]["containers"][0]["env"]]
    assert names.count("GPUPLAT_FLAVOR") == 1
    claimed_env = {e["name"]: e.get("value") for e in claimed["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert claimed_env["GPUPLAT_FLAVOR"] == "h100"
