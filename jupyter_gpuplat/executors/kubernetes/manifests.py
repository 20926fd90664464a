"""Pure builders of the Kubernetes objects a run becomes: `make_*(...) -> dict`.

No client, no I/O: tests compare the output with literal dicts and validate it
against the Kubernetes schemas. A run is one `batch/v1` Job with one pod:
restartPolicy Never, `backoffLimit` from the settings (0: a failed run fails),
`activeDeadlineSeconds` from `termination.timeout_seconds`, and a pod failure
policy that does not count preemption or eviction (`DisruptionTarget`) as a
failure, so Kubernetes starts a replacement pod instead.

A GPU session (`kind: session`) is a Job too, but its one pod is never replaced (a new pod
would silently lose the kernel's state): backoffLimit 0, a disruption fails the Job
(FailJob), and the cluster autoscaler is told not to evict it. Its container runs the kernel agent (its source
inline, so the image needs only Python and ipykernel) on fixed ports of the pod's own IP,
with the connection key from a Secret of its own (`make_kernel_secret`), owned by the Job,
and only its owner's Jupyter server may reach those ports (`make_kernel_policy`).

A run's pod holds its own run and nothing else: the artifact claim is mounted only as the
run's own directory (`subPath: <run id>`, at `<artifacts_mount_path>/<run id>`, where the
run's paths have always been), and that directory's `code/` once more, read-only, over it;
a restricted security context (podsecurity.py); no service account token, no service links;
no device variables in its env.
"""

from __future__ import annotations

import functools
import json
import posixpath
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from importlib import resources
from typing import Any

from ...core import artifacts as layout
from ...core.resources import Resources, format_cpu, format_memory
from ..base import ExecutorError, LaunchRequest
from .connections import connection_parts
from .networkpolicy import make_kernel_network_policy
from .podsecurity import admin_relaxations, make_security_context, scrub_device_env

MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGER = "jupyter-gpuplat"
LABEL_INSTANCE = "gpuplat.io/instance"
LABEL_RUN = "gpuplat.io/run-id"
LABEL_PROJECT = "gpuplat.io/project"
LABEL_QUEUE = "gpuplat.io/queue"
ANN_USER = "gpuplat.io/user"
ANN_PRESETS = "gpuplat.io/presets"
ANN_PLACEMENT_FROM = "gpuplat.io/placement-from"
ANN_GPU_TYPE_LABEL = "gpuplat.io/gpu-type-label"
ANN_FLAVOR = "gpuplat.io/flavor"  # the flavor admission chose: a placement wait names its nodes
CONTAINER = "main"
ANN_SAFE_TO_EVICT = "cluster-autoscaler.kubernetes.io/safe-to-evict"
KERNEL_CONNECTION_FILE = "/tmp/gpuplat-kernel.json"  # in the pod's own /tmp: the key stays off shared volumes
KERNEL_PORTS = (52700, 52701, 52702, 52703, 52704)  # shell, iopub, stdin, control, hb: every pod has its own IP
KERNEL_PORT_NAMES = ("kernel-shell", "kernel-iopub", "kernel-stdin", "kernel-control", "kernel-hb")
KERNEL_SECRET_KEY = "key"
ARTIFACTS_VOLUME = "gpuplat-artifacts"
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


@dataclass(frozen=True)
class JobSettings:
    """What the platform admin configured (the executor's traits), as plain values."""

    namespace: str = "gpuplat-runs"
    instance: str = "default"
    default_image: str = "python:3.11-slim"
    python: str = "python"  # the image's interpreter: runs scripts, notebooks and cells
    service_account: str = ""
    artifacts_claim: str = ""
    artifacts_mount_path: str = "/gpuplat/artifacts"
    priority_classes: Mapping[str, str] = field(default_factory=dict)  # queue (or "*") → PriorityClass
    gpu_resource: str = "nvidia.com/gpu"
    gpu_type_label: str = "nvidia.com/gpu.product"
    backoff_limit: int = 0
    ttl_seconds_after_finished: int | None = 86400
    image_pull_secrets: tuple[str, ...] = ()
    kernel_ports: tuple[int, ...] = KERNEL_PORTS
    run_as_user: int = 1000
    run_as_group: int = 1000
    hub_namespace: str = "jhub"  # where the users' Jupyter servers run (the kernels' only clients)


def job_name(run_id: str) -> str:
    """`gpuplat-<run id>`, lowercased and cut to a valid object name."""
    name = re.sub(r"[^a-z0-9-]", "-", f"gpuplat-{run_id}".lower())[:63].rstrip("-")
    return name


def kernel_secret_name(run_id: str) -> str:
    """The Secret holding a session's kernel key: named after its Job."""
    return f"{job_name(run_id)}-kernel"


def kernel_policy_name(run_id: str) -> str:
    """The NetworkPolicy letting a session's owner reach its kernel: named after its Job."""
    return f"{job_name(run_id)}-kernel"


def is_session(req: LaunchRequest) -> bool:
    return req.spec.get("kind") == "session"


@functools.cache
def agent_source() -> str:
    """The kernel agent's source (stdlib only, self-contained): run in the pod as `python -c`."""
    return resources.files("jupyter_gpuplat.executors").joinpath("kernel_agent.py").read_text(encoding="utf-8")


def selector(instance: str) -> str:
    """The label selector of every object this platform instance owns."""
    return f"{MANAGED_BY}={MANAGER},{LABEL_INSTANCE}={instance}"


def _label_value(what: str, value: str) -> str:
    if len(value) > 63 or not _LABEL_VALUE.match(value):
        raise ExecutorError(f"{what} {value!r} cannot be a Kubernetes label value (63 characters of [A-Za-z0-9._-])")
    return value


def make_labels(run_id: str, project: str, queue: str, instance: str) -> dict[str, str]:
    return {
        MANAGED_BY: MANAGER,
        LABEL_INSTANCE: _label_value("instance", instance),
        LABEL_RUN: _label_value("run id", run_id),
        LABEL_PROJECT: _label_value("project", project),
        LABEL_QUEUE: _label_value("queue", queue),
    }


def presets_of(provenance: Mapping[str, str]) -> list[str]:
    """Names of the presets among the layers that set a field, in first-seen order."""
    out: list[str] = []
    for layer in provenance.values():
        if "preset:" in layer:
            name = layer.rsplit("preset:", 1)[1]
            if name not in out:
                out.append(name)
    return out


def make_annotations(req: LaunchRequest, settings: JobSettings) -> dict[str, str]:
    """Facts the explanation needs later, kept on the Job itself (so they survive a restart)."""
    placement = {k: v for k, v in req.provenance.items() if k.startswith("placement")}
    out = {
        ANN_USER: req.user,
        ANN_PRESETS: ",".join(presets_of(req.provenance)),
        ANN_PLACEMENT_FROM: json.dumps(placement, sort_keys=True, separators=(",", ":")),
        ANN_GPU_TYPE_LABEL: settings.gpu_type_label,
    }
    if req.flavor is not None:
        out[ANN_FLAVOR] = str(req.flavor["name"])
    return out


def make_resources(raw: Mapping[str, Any] | None, gpu_resource: str) -> dict[str, dict[str, str]]:
    """Requests from the spec; memory and GPUs also as limits (extended resources need limits = requests)."""
    r = Resources.parse(dict(raw or {}))
    requests: dict[str, str] = {}
    limits: dict[str, str] = {}
    if r.cpu_milli:
        requests["cpu"] = format_cpu(r.cpu_milli)
    if r.memory_bytes:
        requests["memory"] = limits["memory"] = format_memory(r.memory_bytes)
    if r.gpu:
        requests[gpu_resource] = limits[gpu_resource] = str(r.gpu)
    out: dict[str, dict[str, str]] = {}
    if requests:
        out["requests"] = requests
    if limits:
        out["limits"] = limits
    return out


def make_tolerations(raw: Sequence[Mapping[str, Any]] | None) -> list[dict[str, Any]]:
    keys = {"key": "key", "operator": "operator", "value": "value", "effect": "effect"}
    out = []
    for t in raw or ():
        item = {k8s: t[ours] for ours, k8s in keys.items() if t.get(ours) is not None}
        if t.get("toleration_seconds") is not None:
            item["tolerationSeconds"] = t["toleration_seconds"]
        out.append(item)
    return out


def make_node_selector(
    placement: Mapping[str, Any], gpu_type_label: str, flavor: Mapping[str, Any] | None = None
) -> dict[str, str]:
    """The pod's nodeSelector: the spec's, its gpu_type as a label value, and the chosen flavor's labels.

    With a flavor, `gpu_type` named the flavor (not a label value) and the flavor's node labels win
    over the spec's (admin-controlled placement: a member cannot move a run off its flavor's nodes).
    """
    out = {k: v for k, v in (placement.get("node_selector") or {}).items() if v is not None}
    if flavor is not None:
        out.update(flavor.get("node_labels") or {})
        return out
    gpu_type = placement.get("gpu_type")
    if gpu_type and gpu_type != "any":
        out[gpu_type_label] = gpu_type
    return out


RUN_DIR_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")


def make_artifact_volume(req: LaunchRequest, settings: JobSettings) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(the artifact volume, its mounts): the run's own directory of the claim, its code/ read-only over it.

    The code a run executes (a cell, a script's or notebook's snapshot) is written by the
    control plane into the run's `code/` before the Job exists, and mounted read-only: no
    other pod can reach it (no other pod mounts this run's directory) and the run itself
    cannot change what its record says ran. A read-only subPath, not an immutable ConfigMap
    `run-code-<run>`: snapshots may be up to 16 MiB (and a git diff beside them), a ConfigMap
    at most 1 MiB; and the code dir is a mount point in every pod of the run, so no pod can
    swap it for a link between attempts. Without a claim each pod has an emptyDir of its own.
    """
    where = run_pod_dir(req, settings)
    if not settings.artifacts_claim:
        return {"name": ARTIFACTS_VOLUME, "emptyDir": {}}, [{"name": ARTIFACTS_VOLUME, "mountPath": where}]
    sub = posixpath.basename(posixpath.normpath(req.workdir))
    if sub != req.run_id or not RUN_DIR_NAME.match(sub):
        raise ExecutorError(
            f"run {req.run_id}: its directory {req.workdir!r} is not <artifacts_root>/<run id>: it cannot be mounted "
            "on its own"
        )
    claim = {"claimName": settings.artifacts_claim}
    volume: dict[str, Any] = {"name": ARTIFACTS_VOLUME, "persistentVolumeClaim": claim}
    mounts: list[dict[str, Any]] = [
        {"name": ARTIFACTS_VOLUME, "mountPath": where, "subPath": sub},
        {"name": ARTIFACTS_VOLUME, "mountPath": f"{where}/{layout.CODE_DIR}", "subPath": f"{sub}/{layout.CODE_DIR}",
         "readOnly": True},
    ]  # fmt: skip
    return volume, mounts


def make_volumes(
    raw: Sequence[Mapping[str, Any]] | None, settings: JobSettings
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(pod volumes, container mounts) of the spec's `volumes` (which only admins' presets may give sources)."""
    volumes: list[dict[str, Any]] = []
    mounts: list[dict[str, Any]] = []
    for v in raw or ():
        name = v["name"]
        if name == ARTIFACTS_VOLUME:
            raise ExecutorError(f"volume name {name!r} is the platform's own (the run's artifact directory)")
        if v.get("claim"):
            source: dict[str, Any] = {"persistentVolumeClaim": {"claimName": v["claim"]}}
        elif v.get("secret"):
            source = {"secret": {"secretName": v["secret"]}}
        elif v.get("config_map"):
            source = {"configMap": {"name": v["config_map"]}}
        elif v.get("host_path"):
            source = {"hostPath": {"path": v["host_path"]}}
        else:
            source = {"emptyDir": {}}
        volumes.append({"name": name, **source})
        if v.get("mount_path"):
            mount: dict[str, Any] = {"name": name, "mountPath": v["mount_path"]}
            if v.get("read_only"):
                mount["readOnly"] = True
            mounts.append(mount)
    return volumes, mounts


def _whole_claim(volumes: Sequence[Mapping[str, Any]], claim: str) -> str | None:
    """The name of a volume (the spec's, a connection's) that would mount the whole artifact claim."""
    for v in volumes:
        if claim and (v.get("persistentVolumeClaim") or {}).get("claimName") == claim:
            return str(v["name"])
    return None


def run_pod_dir(req: LaunchRequest, settings: JobSettings) -> str:
    """The run's artifact directory as its pod sees it."""
    return f"{settings.artifacts_mount_path.rstrip('/')}/{req.run_id}"


def artifacts_root_of(req: LaunchRequest) -> str:
    return posixpath.dirname(posixpath.normpath(req.workdir))


def working_dir_problem(working_dir: str, artifacts_root: str, settings: JobSettings) -> str | None:
    """Why a run cannot start in `working_dir` on this cluster: a pod sees only its own run's directory."""
    return (
        f"working_dir {working_dir!r}: a run's pod on Kubernetes sees only its own run's directory of the artifact "
        "volume (nothing of other runs, nothing of the users' files), so it cannot start in a directory of your own; "
        "leave working_dir out: scripts, notebooks and cells are copied into the run's code/ and run from there, "
        "and data comes through connections"
    )


def code_path(req: LaunchRequest) -> str | None:
    """Where the file a script or notebook run executes lies in the run's directory (its snapshot), else None."""
    entry = req.entrypoint
    if entry.kind in ("script", "notebook") and entry.path:
        return layout.snapshot_path(entry.path)
    if entry.kind == "cell":
        return layout.CELL
    return None


def make_command(req: LaunchRequest, settings: JobSettings) -> list[str]:
    """The run's argv from its entrypoint, with the image's `python`; its code as the pod sees it.

    A script or notebook runs from its snapshot in the run's read-only `code/` (the only copy
    its pod can see), a cell from `code/cell.py`.
    """
    entry = req.entrypoint
    rel = code_path(req)
    if entry.kind in ("script", "notebook") and rel and settings.artifacts_claim:
        entry = replace(entry, path=f"{run_pod_dir(req, settings)}/{rel}")
    return entry.argv_with(settings.python, f"{run_pod_dir(req, settings)}/{layout.CELL}")


def make_working_dir(req: LaunchRequest, settings: JobSettings) -> str:
    """The container's workingDir: the run's own directory (a pod sees no other)."""
    if req.working_dir is not None:
        raise ExecutorError(
            f"run {req.run_id}: {working_dir_problem(req.working_dir, artifacts_root_of(req), settings)}"
        )
    return run_pod_dir(req, settings)


def make_env(req: LaunchRequest, workdir: str) -> list[dict[str, Any]]:
    ours = ("GPUPLAT_RUN_ID", "GPUPLAT_ARTIFACTS_DIR", "GPUPLAT_KERNEL_KEY", "GPUPLAT_KERNEL_IP", "GPUPLAT_FLAVOR")
    env: list[dict[str, Any]] = [{"name": k, "value": v} for k, v in req.env.items() if k not in ours]
    env.append({"name": "GPUPLAT_RUN_ID", "value": req.run_id})
    env.append({"name": "GPUPLAT_ARTIFACTS_DIR", "value": workdir})
    if req.flavor is not None:
        env.append({"name": "GPUPLAT_FLAVOR", "value": str(req.flavor["name"])})
    env.append({"name": "PYTHONUNBUFFERED", "value": "1"})
    if is_session(req):
        secret = {"name": kernel_secret_name(req.run_id), "key": KERNEL_SECRET_KEY}
        env.append({"name": "GPUPLAT_KERNEL_KEY", "valueFrom": {"secretKeyRef": secret}})
        env.append({"name": "GPUPLAT_KERNEL_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}})
    return env


def _with_env(env: list[dict[str, Any]], more: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The connections' env after the spec's (a later duplicate name wins in Kubernetes too); ours stay ours."""
    ours = {
        "GPUPLAT_RUN_ID",
        "GPUPLAT_ARTIFACTS_DIR",
        "PYTHONUNBUFFERED",
        "GPUPLAT_KERNEL_KEY",
        "GPUPLAT_KERNEL_IP",
        "GPUPLAT_FLAVOR",
    }
    names = {e["name"] for e in more if e["name"] not in ours}
    return [e for e in env if e["name"] not in names] + [e for e in more if e["name"] in names]


def make_kernel_command(settings: JobSettings) -> list[str]:
    """The session container's argv: the kernel agent keeping ipykernel alive on the fixed ports."""
    if len(settings.kernel_ports) != 5:
        raise ExecutorError(
            f"kernel_ports must be 5 ports (shell, iopub, stdin, control, hb), got {settings.kernel_ports}"
        )
    py = settings.python
    ports = ",".join(str(p) for p in settings.kernel_ports)
    return [
        py, "-c", agent_source(), "--connection-file", KERNEL_CONNECTION_FILE, "--ports", ports,
        "--", py, "-m", "ipykernel_launcher", "-f", "{connection_file}",
    ]  # fmt: skip


def make_kernel_secret(req: LaunchRequest, settings: JobSettings, key: str) -> dict[str, Any]:
    """The Secret with a session's kernel key; it gets its Job as owner once the Job exists."""
    queue = str(req.spec.get("queue") or "")
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": kernel_secret_name(req.run_id),
            "namespace": settings.namespace,
            "labels": make_labels(req.run_id, req.project, queue, settings.instance),
        },
        "type": "Opaque",
        "immutable": True,
        "stringData": {KERNEL_SECRET_KEY: key},
    }


def owner_reference(job: str, uid: str) -> dict[str, Any]:
    """The Job as owner: the Secret goes when the Job is deleted (no blockOwnerDeletion: it needs more RBAC)."""
    return {"apiVersion": "batch/v1", "kind": "Job", "name": job, "uid": uid}


def priority_class(queue: str, classes: Mapping[str, str]) -> str | None:
    return classes.get(queue) or classes.get("*") or None


def make_pod_spec(req: LaunchRequest, settings: JobSettings) -> dict[str, Any]:
    spec = req.spec
    placement = spec.get("placement") or {}
    workdir = run_pod_dir(req, settings)
    artifacts, mounts = make_artifact_volume(req, settings)
    spec_volumes, spec_mounts = make_volumes(spec.get("volumes"), settings)
    conn_volumes, conn_mounts, conn_env = connection_parts(spec.get("connection_refs"))
    whole = _whole_claim(spec_volumes + conn_volumes, settings.artifacts_claim)
    if whole is not None:
        raise ExecutorError(
            f"run {req.run_id}: volume {whole!r} would mount the whole artifact claim {settings.artifacts_claim!r}; "
            "a run sees only its own directory of it"
        )
    volumes = [artifacts, *spec_volumes, *conn_volumes]
    mounts = mounts + spec_mounts + conn_mounts
    session = is_session(req)
    resources = make_resources(spec.get("resources"), settings.gpu_resource)
    gpus = int((resources.get("limits") or {}).get(settings.gpu_resource) or 0)
    relaxed = admin_relaxations(spec.get("security"), req.provenance, req.run_id)
    pod_context, container_context = make_security_context(relaxed, settings.run_as_user, settings.run_as_group)
    container: dict[str, Any] = {
        "name": CONTAINER,
        "image": spec.get("image") or settings.default_image,
        "command": make_kernel_command(settings) if session else make_command(req, settings),
        "workingDir": make_working_dir(req, settings),
        "env": scrub_device_env(_with_env(make_env(req, workdir), conn_env), gpus),
        "volumeMounts": mounts,
        "securityContext": container_context,
    }
    if session:
        container["ports"] = [
            {"name": n, "containerPort": p, "protocol": "TCP"}
            for n, p in zip(KERNEL_PORT_NAMES, settings.kernel_ports, strict=True)
        ]
    if resources:
        container["resources"] = resources
    pod: dict[str, Any] = {
        "restartPolicy": "Never",
        "containers": [container],
        "volumes": volumes,
        # A run needs no API access of its own, nor the namespace's service links.
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "securityContext": pod_context,
    }
    node_selector = make_node_selector(placement, settings.gpu_type_label, req.flavor)
    if node_selector:
        pod["nodeSelector"] = node_selector
    flavor_tolerations = (req.flavor or {}).get("tolerations") or []
    tolerations = make_tolerations([*(placement.get("tolerations") or []), *flavor_tolerations])
    if tolerations:
        pod["tolerations"] = tolerations
    if placement.get("affinity"):
        pod["affinity"] = dict(placement["affinity"])
    pc = priority_class(str(spec.get("queue") or ""), settings.priority_classes)
    if pc:
        pod["priorityClassName"] = pc
    if settings.service_account:
        pod["serviceAccountName"] = settings.service_account
    if settings.image_pull_secrets:
        pod["imagePullSecrets"] = [{"name": s} for s in settings.image_pull_secrets]
    return pod


def make_kernel_policy(req: LaunchRequest, settings: JobSettings, job_uid: str) -> dict[str, Any]:
    """The NetworkPolicy of a session: only its owner's Jupyter servers reach its kernel's ports; owned by its Job."""
    queue = str(req.spec.get("queue") or "")
    labels = make_labels(req.run_id, req.project, queue, settings.instance)
    selector = {MANAGED_BY: MANAGER, LABEL_INSTANCE: settings.instance, LABEL_RUN: req.run_id}
    return make_kernel_network_policy(
        kernel_policy_name(req.run_id),
        settings.namespace,
        labels,
        selector,
        req.user,
        settings.hub_namespace,
        settings.kernel_ports,
        owner_reference(job_name(req.run_id), job_uid),
    )


def make_job(req: LaunchRequest, settings: JobSettings) -> dict[str, Any]:
    """The batch/v1 Job of one run."""
    argv = req.entrypoint.argv_with(settings.python)
    if not argv or not all(isinstance(a, str) and a for a in argv):
        raise ExecutorError(f"run {req.run_id}: the command must be a non-empty list of strings")
    queue = str(req.spec.get("queue") or "")
    labels = make_labels(req.run_id, req.project, queue, settings.instance)
    annotations = make_annotations(req, settings)
    session = is_session(req)
    if session:
        annotations[ANN_SAFE_TO_EVICT] = "false"  # scaling a node down would end the session
    job_spec: dict[str, Any] = {
        "backoffLimit": 0 if session else settings.backoff_limit,
        "template": {
            "metadata": {"labels": dict(labels), "annotations": dict(annotations)},
            "spec": make_pod_spec(req, settings),
        },
    }
    # A disrupted job's pod is replaced; a disrupted session fails (a new pod would have lost the kernel's
    # state). Either way a pod failure policy also means no replacement pod while the old one terminates.
    action = "FailJob" if session else "Ignore"
    job_spec["podFailurePolicy"] = {
        "rules": [{"action": action, "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}]
    }
    if req.timeout_seconds:
        job_spec["activeDeadlineSeconds"] = int(req.timeout_seconds)
    if settings.ttl_seconds_after_finished is not None:
        job_spec["ttlSecondsAfterFinished"] = settings.ttl_seconds_after_finished
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": job_name(req.run_id),
            "namespace": settings.namespace,
            "labels": labels,
            "annotations": annotations,
        },
        "spec": job_spec,
    }
