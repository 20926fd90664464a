"""What keeps runs apart on a cluster, judged from API objects: pure, shared by `isolation()` and the check.

The runs' namespace should enforce Pod Security `restricted` (its labels) and deny all
traffic by default (a NetworkPolicy selecting every pod with both policy types and no rule).
`KubernetesExecutor.isolation()` reads the namespace and its NetworkPolicies once at start
and again at most every few minutes, in a thread; `gpuplat cluster check` asks at once.
What the API cannot show is said so: whether the CNI enforces NetworkPolicies at all, and
whether the GPU nodes' NVIDIA toolkit ignores `NVIDIA_VISIBLE_DEVICES` in unprivileged
containers (then only the device plugin's grant counts).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

PSA = "pod-security.kubernetes.io/"
ENFORCE = PSA + "enforce"
MODES = ("enforce", "audit", "warn")
DEVICE_VARIABLES = (
    "NVIDIA_*, CUDA_VISIBLE_DEVICES, CUDA_DEVICE_ORDER, CUDA_MPS_*, HIP/ROCR_VISIBLE_DEVICES, GPU_DEVICE_ORDINAL"
)
TOOLKIT_SETTINGS = (
    "accept-nvidia-visible-devices-envvar-when-unprivileged = false and "
    "accept-nvidia-visible-devices-as-volume-mounts = true in the NVIDIA container toolkit's config.toml, "
    "with the device plugin's DEVICE_LIST_STRATEGY=volume-mounts"
)


@dataclass(frozen=True)
class NamespaceFacts:
    """The runs' namespace as last read: its labels and NetworkPolicies; None where they could not be read."""

    namespace: str
    labels: Mapping[str, str] | None = None
    policies: Sequence[Mapping[str, Any]] | None = None
    errors: tuple[str, ...] = field(default_factory=tuple)


def pod_security_levels(labels: Mapping[str, str]) -> dict[str, str]:
    """{"enforce": level, "audit": ..., "warn": ...} for the modes the namespace sets."""
    return {m: labels[PSA + m] for m in MODES if labels.get(PSA + m)}


def label_command(namespace: str) -> str:
    return (
        f"kubectl label namespace {namespace} pod-security.kubernetes.io/enforce=restricted "
        "pod-security.kubernetes.io/audit=restricted pod-security.kubernetes.io/warn=restricted --overwrite"
    )


def _selects_all(policy: Mapping[str, Any]) -> bool:
    selector = (policy.get("spec") or {}).get("podSelector") or {}
    return not selector.get("matchLabels") and not selector.get("matchExpressions")


def default_deny(policies: Sequence[Mapping[str, Any]]) -> tuple[str | None, str | None]:
    """The names of a policy denying all ingress and of one denying all egress to every pod, or None each.

    A policy that selects every pod with a policy type and no rule of that type admits nothing
    of that direction; other policies can then only open paths, never close them.
    """
    ingress = egress = None
    for p in policies:
        if not _selects_all(p):
            continue
        spec = p.get("spec") or {}
        types = spec.get("policyTypes") or (["Ingress", "Egress"] if spec.get("egress") else ["Ingress"])
        name = str((p.get("metadata") or {}).get("name"))
        if "Ingress" in types and not spec.get("ingress") and ingress is None:
            ingress = name
        if "Egress" in types and not spec.get("egress") and egress is None:
            egress = name
    return ingress, egress


def control(name: str, enforced: bool, detail: str) -> dict[str, Any]:
    return {"name": name, "enforced": enforced, "detail": detail}


def pod_security_control(facts: NamespaceFacts | None) -> dict[str, Any]:
    if facts is None or facts.labels is None:
        why = "; ".join(facts.errors) if facts and facts.errors else "not read yet"
        where = facts.namespace if facts else "the runs' namespace"
        return control("pod_security", False, f"the labels of namespace {where} could not be read ({why})")
    levels = pod_security_levels(facts.labels)
    enforce = levels.get("enforce")
    if enforce == "restricted":
        return control(
            "pod_security",
            True,
            f"namespace {facts.namespace} enforces Pod Security restricted: the cluster refuses a pod with hostPath, "
            "root, privilege escalation, added capabilities or without seccomp, whoever writes it",
        )
    have = f"enforces {enforce}" if enforce else "has no pod-security.kubernetes.io/enforce label"
    return control(
        "pod_security",
        False,
        f"namespace {facts.namespace} {have}: only the platform's own pod spec keeps runs restricted "
        f"(fix: {label_command(facts.namespace)})",
    )


def network_control(facts: NamespaceFacts | None) -> dict[str, Any]:
    if facts is None or facts.policies is None:
        why = "; ".join(facts.errors) if facts and facts.errors else "not read yet"
        return control("network_policy", False, f"the NetworkPolicies could not be read ({why})")
    ingress, egress = default_deny(facts.policies)
    if ingress and egress:
        return control(
            "network_policy",
            True,
            f"NetworkPolicy {ingress}{'' if ingress == egress else ' and ' + egress} deny all traffic of namespace "
            f"{facts.namespace} by default ({len(facts.policies)} policies in all); this holds only where the "
            "cluster's network plugin enforces NetworkPolicies, which the API does not show",
        )
    missing = " and ".join(d for d, found in (("ingress", ingress), ("egress", egress)) if not found)
    return control(
        "network_policy",
        False,
        f"no NetworkPolicy denies all {missing} of namespace {facts.namespace} by default: runs may reach "
        "(or be reached from) anything the network allows (fix: kubectl apply -f "
        "deploy/kubernetes/network-policies.yaml)",
    )


def isolation_controls(
    facts: NamespaceFacts | None,
    *,
    artifacts_claim: str,
    run_as_user: int,
    kernel_policies: bool,
    hub_namespace: str,
    toolkit_hardened: bool,
) -> list[dict[str, Any]]:
    """The controls `capacity.isolation` shows for the Kubernetes executor."""
    artifacts = (
        f"each run's pod mounts only its own directory of claim {artifacts_claim} (subPath <run id>), its code/ "
        "read-only; the control plane opens files there without following links"
        if artifacts_claim
        else "each run's pod has an emptyDir of its own (no artifact claim: nothing is shared)"
    )
    denies_ingress = facts is not None and facts.policies is not None and default_deny(facts.policies)[0] is not None
    per_kernel = bool(kernel_policies and hub_namespace)
    if per_kernel and denies_ingress:
        kernels = (
            f"each session's kernel ports admit only its owner's Jupyter server (namespace {hub_namespace}, "
            "KubeSpawner's labels) through a NetworkPolicy made with its Job, over a default deny"
        )
    elif per_kernel:
        kernels = (
            "each session gets a NetworkPolicy admitting its owner's Jupyter server, but without a default-deny "
            "ingress policy in the namespace it restricts nothing; the kernel's key still goes only to its owner"
        )
    else:
        kernels = (
            "no per-kernel NetworkPolicy (KubernetesExecutor.kernel_network_policy is off): a kernel's ports are "
            "reachable as the namespace's policies allow; its key still goes only to its owner"
        )
    gpu = (
        "the GPU nodes' NVIDIA toolkit is configured to ignore NVIDIA_VISIBLE_DEVICES in unprivileged containers "
        "(KubernetesExecutor.nvidia_toolkit_hardened, set by the platform admin): a pod gets the GPUs the device "
        "plugin grants it, nothing more"
        if toolkit_hardened
        else "not verifiable through the Kubernetes API: a pod sees only the GPUs the device plugin grants it once "
        f"every GPU node sets {TOOLKIT_SETTINGS} (docs/kubernetes.md); until the platform admin confirms it "
        "(KubernetesExecutor.nvidia_toolkit_hardened), an image's own NVIDIA_VISIBLE_DEVICES=all may expose every "
        "GPU of the node to a pod that asked for one"
    )
    return [
        pod_security_control(facts),
        network_control(facts),
        control("artifacts", True, artifacts),
        control(
            "security_context",
            True,
            f"restricted by default: non-root (uid {run_as_user}), no privilege escalation, every capability "
            "dropped, seccomp RuntimeDefault; only platform presets' `security` relax it",
        ),
        control(
            "environment",
            True,
            f"device variables ({DEVICE_VARIABLES}) are removed from every run's env, NVIDIA_VISIBLE_DEVICES=void "
            "at 0 GPUs; no service account token, no service links",
        ),
        control("session_kernels", per_kernel and denies_ingress, kernels),
        control("gpu_devices", toolkit_hardened, gpu),
    ]
