"""What the apiserver checks before it stores a pod: validation, then Pod Security admission.

Validation (`validate_pod_spec`) is the part of the real registry's that the platform's
pods touch: every volumeMount names a volume of the pod, `mountPath` is absolute and used
once, `subPath` is a relative path without `..` (kubernetes `ValidateVolumeMounts`). It runs
on pods and on the pod templates of Jobs, so a bad template is refused at `create job` with
422 Invalid, as a real cluster refuses it.

Pod Security admission (`pod_security`) enforces the level a namespace is labelled with
(`pod-security.kubernetes.io/enforce: baseline|restricted`), on pods only: a Job is admitted,
and the Job controller's pod is refused (a `FailedCreate` event on the Job, as in a real
cluster). The checks and their wording follow pod-security-admission's `policy/check_*.go`:
`pods "x" is forbidden: violates PodSecurity "restricted:latest": allowPrivilegeEscalation !=
false (container "main" must set securityContext.allowPrivilegeEscalation=false), ...`.
Not modelled: the `warn` and `audit` modes (no Warning headers), AppArmor, SELinux, procMount,
sysctls, Windows pods, exemptions, and version-pinned levels (every level is `latest`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .store import JOB, POD, RESOURCES, ApiError, ResourceType, Store

NAMESPACE = RESOURCES[("", "namespaces")]

ENFORCE = "pod-security.kubernetes.io/enforce"
ENFORCE_VERSION = "pod-security.kubernetes.io/enforce-version"
LEVELS = ("privileged", "baseline", "restricted")
# Capabilities a baseline pod may add (the container runtimes' defaults); restricted: NET_BIND_SERVICE only.
BASELINE_CAPABILITIES = frozenset(
    {
        "AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD", "NET_BIND_SERVICE",
        "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT",
    }
)  # fmt: skip
RESTRICTED_VOLUMES = frozenset(
    {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim", "projected", "secret"}
)
ADD = "securityContext.capabilities.add"
_VOLUME_SOURCES = (
    "hostPath", "emptyDir", "gcePersistentDisk", "awsElasticBlockStore", "gitRepo", "secret", "nfs", "iscsi",
    "glusterfs", "persistentVolumeClaim", "rbd", "flexVolume", "cinder", "cephfs", "flocker", "downwardAPI", "fc",
    "azureFile", "configMap", "vsphereVolume", "quobyte", "azureDisk", "photonPersistentDisk", "projected",
    "portworxVolume", "scaleIO", "storageos", "csi", "ephemeral", "image",
)  # fmt: skip


def _containers(spec: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [*(spec.get("initContainers") or ()), *(spec.get("containers") or ())]


def validate_pod_spec(spec: Mapping[str, Any], where: str) -> list[str]:
    """The field errors a real apiserver reports for this pod spec's volumes and mounts."""
    errors: list[str] = []
    volumes = {v.get("name") for v in spec.get("volumes") or ()}
    for group in ("initContainers", "containers"):
        for i, c in enumerate(spec.get(group) or ()):
            seen: set[str] = set()
            for j, m in enumerate(c.get("volumeMounts") or ()):
                at = f"{where}.{group}[{i}].volumeMounts[{j}]"
                if m.get("name") not in volumes:
                    errors.append(f'{at}.name: Not found: "{m.get("name")}"')
                path = str(m.get("mountPath") or "")
                if not path:
                    errors.append(f"{at}.mountPath: Required value")
                elif path in seen:
                    errors.append(f'{at}.mountPath: Invalid value: "{path}": must be unique')
                seen.add(path)
                sub = m.get("subPath")
                if sub:
                    if sub.startswith("/"):
                        errors.append(f'{at}.subPath: Invalid value: "{sub}": must be a relative path')
                    if ".." in sub.split("/"):
                        errors.append(f"{at}.subPath: Invalid value: \"{sub}\": must not contain '..'")
    return errors


def _plural(one: str, many: str, items: Sequence[Any]) -> str:
    return one if len(items) == 1 else many


def _quoted(items: Sequence[Any]) -> str:
    return ", ".join(f'"{x}"' for x in items)


def _containers_phrase(names: Sequence[str]) -> str:
    return f"{_plural('container', 'containers', names)} {_quoted(names)}"


def pod_security(spec: Mapping[str, Any], level: str) -> list[tuple[str, str]]:
    """(reason, detail) for each check of `level` this pod spec fails, in the checks' ID order; [] when admitted."""
    if level not in ("baseline", "restricted"):
        return []
    restricted = level == "restricted"
    sc = spec.get("securityContext") or {}
    containers = _containers(spec)
    found: list[tuple[str, str, str]] = []  # (check id, reason, detail)

    def csc(c: Mapping[str, Any]) -> Mapping[str, Any]:
        return c.get("securityContext") or {}

    def caps(c: Mapping[str, Any], key: str) -> list[str]:
        return list((csc(c).get("capabilities") or {}).get(key) or ())

    if restricted:
        bad = [c["name"] for c in containers if csc(c).get("allowPrivilegeEscalation") is not False]
        if bad:
            detail = f"{_containers_phrase(bad)} must set securityContext.allowPrivilegeEscalation=false"
            found.append(("allowPrivilegeEscalation", "allowPrivilegeEscalation != false", detail))
        details = []
        no_drop = [c["name"] for c in containers if "ALL" not in caps(c, "drop")]
        if no_drop:
            details.append(f'{_containers_phrase(no_drop)} must set securityContext.capabilities.drop=["ALL"]')
        adding = [c["name"] for c in containers if any(x != "NET_BIND_SERVICE" for x in caps(c, "add"))]
        extra = sorted({x for c in containers for x in caps(c, "add") if x != "NET_BIND_SERVICE"})
        if adding:
            details.append(f"{_containers_phrase(adding)} must not include {_quoted(extra)} in {ADD}")
        if details:
            found.append(("capabilities_restricted", "unrestricted capabilities", "; ".join(details)))
    else:
        adding = [c["name"] for c in containers if any(x not in BASELINE_CAPABILITIES for x in caps(c, "add"))]
        extra = sorted({x for c in containers for x in caps(c, "add") if x not in BASELINE_CAPABILITIES})
        if adding:
            detail = f"{_containers_phrase(adding)} must not include {_quoted(extra)} in {ADD}"
            found.append(("capabilities_baseline", "non-default capabilities", detail))
    hosts = [f"{k}=true" for k in ("hostNetwork", "hostPID", "hostIPC") if spec.get(k)]
    if hosts:
        found.append(("hostNamespaces", "host namespaces", ", ".join(hosts)))
    host_path = [v.get("name") for v in spec.get("volumes") or () if "hostPath" in v]
    if host_path:
        detail = f"{_plural('volume', 'volumes', host_path)} {_quoted(host_path)}"
        found.append(("hostPathVolumes", "hostPath volumes", detail))
    ports = [(c["name"], int(p["hostPort"])) for c in containers for p in c.get("ports") or () if p.get("hostPort")]
    if ports:
        names = list(dict.fromkeys(n for n, _ in ports))
        numbers = ", ".join(str(p) for _, p in ports)
        uses = f"{_plural('uses', 'use', names)} {_plural('hostPort', 'hostPorts', ports)}"
        detail = f"{_containers_phrase(names)} {uses} {numbers}"
        found.append(("hostPorts", "hostPort", detail))
    privileged = [c["name"] for c in containers if csc(c).get("privileged")]
    if privileged:
        detail = f"{_containers_phrase(privileged)} must not set securityContext.privileged=true"
        found.append(("privileged", "privileged", detail))
    if restricted:
        volumes, kinds = [], []
        for v in spec.get("volumes") or ():
            kind = next((k for k in _VOLUME_SOURCES if k in v), None)
            if kind is not None and kind not in RESTRICTED_VOLUMES:
                volumes.append(v.get("name"))
                kinds.append(kind)
        if volumes:
            kinds = list(dict.fromkeys(kinds))
            detail = (
                f"{_plural('volume', 'volumes', volumes)} {_quoted(volumes)} {_plural('uses', 'use', volumes)} "
                f"restricted volume {_plural('type', 'types', kinds)} {_quoted(kinds)}"
            )
            found.append(("restrictedVolumes", "restricted volume types", detail))
        setters = []
        pod_non_root = sc.get("runAsNonRoot")
        if pod_non_root is False:
            setters.append("pod")
        explicit = [c["name"] for c in containers if csc(c).get("runAsNonRoot") is False]
        implicit = [c["name"] for c in containers if csc(c).get("runAsNonRoot") is None and pod_non_root is not True]
        if explicit:
            setters.append(_containers_phrase(explicit))
        if setters:
            detail = f"{' and '.join(setters)} must not set securityContext.runAsNonRoot=false"
            found.append(("runAsNonRoot", "runAsNonRoot != true", detail))
        elif implicit:
            detail = f"pod or {_containers_phrase(implicit)} must set securityContext.runAsNonRoot=true"
            found.append(("runAsNonRoot", "runAsNonRoot != true", detail))
        setters = ["pod"] if sc.get("runAsUser") == 0 else []
        zero = [c["name"] for c in containers if csc(c).get("runAsUser") == 0]
        if zero:
            setters.append(_containers_phrase(zero))
        if setters:
            found.append(("runAsUser", "runAsUser=0", f"{' and '.join(setters)} must not set runAsUser=0"))
    pod_type = (sc.get("seccompProfile") or {}).get("type")
    allowed = ("RuntimeDefault", "Localhost") if restricted else ("RuntimeDefault", "Localhost", None)
    setters, values = [], []
    if pod_type is not None and pod_type not in allowed:
        setters.append("pod")
        values.append(pod_type)
    bad = [c for c in containers if (csc(c).get("seccompProfile") or {}).get("type") not in (*allowed, None)]
    if bad:
        setters.append(_containers_phrase([c["name"] for c in bad]))
        values += [csc(c)["seccompProfile"]["type"] for c in bad]
    if setters:
        types = _quoted(list(dict.fromkeys(values)))
        detail = f"{' and '.join(setters)} must not set securityContext.seccompProfile.type to {types}"
        found.append(("seccompProfile", "seccompProfile", detail))
    elif restricted and pod_type is None:
        unset = [c["name"] for c in containers if (csc(c).get("seccompProfile") or {}).get("type") is None]
        if unset:
            detail = (
                f"pod or {_containers_phrase(unset)} must set securityContext.seccompProfile.type to "
                '"RuntimeDefault" or "Localhost"'
            )
            found.append(("seccompProfile", "seccompProfile", detail))
    return [(reason, detail) for _, reason, detail in sorted(found, key=lambda f: f[0])]


def enforced_level(namespace: Mapping[str, Any] | None) -> str:
    """The Pod Security level a namespace enforces ("privileged" when unlabelled, as the default config)."""
    labels = ((namespace or {}).get("metadata") or {}).get("labels") or {}
    level = labels.get(ENFORCE, "privileged")
    return level if level in LEVELS else "restricted"  # an unknown level is refused as the strictest


def admit_pod(namespace: Mapping[str, Any] | None, pod: Mapping[str, Any]) -> None:
    """Raise 422 for an invalid pod, 403 for one the namespace's Pod Security level refuses."""
    meta = pod.get("metadata") or {}
    name = meta.get("name") or meta.get("generateName") or ""
    spec = pod.get("spec") or {}
    errors = validate_pod_spec(spec, "spec")
    if errors:
        raise ApiError(422, "Invalid", f'Pod "{name}" is invalid: {", ".join(errors)}', {"name": name, "kind": "Pod"})
    level = enforced_level(namespace)
    failed = pod_security(spec, level)
    if failed:
        labels = ((namespace or {}).get("metadata") or {}).get("labels") or {}
        version = labels.get(ENFORCE_VERSION, "latest")
        why = ", ".join(f"{reason} ({detail})" for reason, detail in failed)
        raise ApiError(
            403,
            "Forbidden",
            f'pods "{name}" is forbidden: violates PodSecurity "{level}:{version}": {why}',
            {"name": name, "kind": "pods"},
        )


def admit_job(job: Mapping[str, Any]) -> None:
    """A Job's pod template is validated as a pod's spec is (Pod Security judges the pods, not the Job)."""
    meta = job.get("metadata") or {}
    name = meta.get("name") or meta.get("generateName") or ""
    spec = ((job.get("spec") or {}).get("template") or {}).get("spec") or {}
    errors = validate_pod_spec(spec, "spec.template.spec")
    if errors:
        raise ApiError(
            422, "Invalid", f'Job.batch "{name}" is invalid: {", ".join(errors)}', {"name": name, "kind": "Job"}
        )


class Admission:
    """The store's admission hook (`Store.admission`): validation and Pod Security of a new pod or Job.

    It reads only the pod's namespace from `store`, for the level its labels enforce.
    """

    def __init__(self, store: Store) -> None:
        self.store = store

    def __call__(self, rt: ResourceType, namespace: str, obj: dict[str, Any]) -> None:
        if rt is POD:
            admit_pod(self.store.find(NAMESPACE, "", namespace), obj)
        elif rt is JOB:
            admit_job(obj)
