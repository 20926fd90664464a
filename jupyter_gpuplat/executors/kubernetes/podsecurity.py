"""What a run's pod may do on its node: its security context and the device variables of its env.

Pure builders, like manifests.py. Every run's pod gets Pod Security `restricted` by default:
the pod `runAsNonRoot: true`, `runAsUser`/`runAsGroup` from the executor's settings,
`seccompProfile: RuntimeDefault`; its container `allowPrivilegeEscalation: false` and
`capabilities: {drop: [ALL]}`. Only the spec's `security` field relaxes it, and only when a
platform admin's layer set it (the org defaults or a platform preset: `org`, `preset:<name>`
in the provenance). The policy already refuses `security` anywhere else; this is the second
lock, at the last moment the platform sees the pod.

A member's env never selects devices: NVIDIA_*, CUDA_VISIBLE_DEVICES, CUDA_DEVICE_ORDER,
CUDA_MPS_*, HIP_/ROCR_VISIBLE_DEVICES and GPU_DEVICE_ORDINAL are dropped from the container's
env whoever set them (the policy refuses them too), and a pod asking no GPU gets
`NVIDIA_VISIBLE_DEVICES=void`, so an image's own `NVIDIA_VISIBLE_DEVICES=all` exposes nothing
where the NVIDIA toolkit still honours the variable. Which GPUs a pod gets is the device
plugin's answer to its `nvidia.com/gpu` request, nothing else (docs/kubernetes.md, "GPU nodes").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..base import ExecutorError

DEVICE_ENV_PREFIXES = ("NVIDIA_", "CUDA_MPS_")
DEVICE_ENV_NAMES = frozenset(
    {"CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL"}
)
NO_GPU = {"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"}
RELAXATIONS = ("run_as_root", "run_as_user", "allow_privilege_escalation", "add_capabilities", "seccomp_profile")


def is_device_variable(name: str) -> bool:
    return name in DEVICE_ENV_NAMES or name.startswith(DEVICE_ENV_PREFIXES)


def scrub_device_env(env: Sequence[Mapping[str, Any]], gpus: int) -> list[dict[str, Any]]:
    """The container env without device-selection variables; `NVIDIA_VISIBLE_DEVICES=void` at 0 GPUs."""
    out = [dict(e) for e in env if not is_device_variable(str(e.get("name", "")))]
    if gpus == 0:
        out.append(dict(NO_GPU))
    return out


def is_admin_layer(label: str) -> bool:
    """A layer only platform admins write: the org defaults or a platform preset (not a project's, not the run)."""
    return label == "org" or label.startswith("preset:")


def admin_relaxations(security: Mapping[str, Any] | None, provenance: Mapping[str, str], run_id: str) -> dict[str, Any]:
    """The spec's `security` fields, each checked to come from a platform admin's layer."""
    out: dict[str, Any] = {}
    for key, value in (security or {}).items():
        if value is None:
            continue
        if key not in RELAXATIONS:
            raise ExecutorError(f"run {run_id}: security.{key} is not a relaxation this executor knows")
        layer = provenance.get(f"security.{key}", "")
        if not is_admin_layer(layer):
            who = f"layer {layer!r}" if layer else "a layer the platform cannot name"
            raise ExecutorError(
                f"run {run_id}: security.{key} was set by {who}; only the org defaults and platform presets may "
                "relax a run's security context (rule security.admin)"
            )
        out[key] = value
    return out


def make_security_context(
    relaxations: Mapping[str, Any], run_as_user: int, run_as_group: int
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(pod securityContext, container securityContext): restricted, less what `relaxations` allow."""
    uid = run_as_user
    gid = run_as_group
    if relaxations.get("run_as_user") is not None:
        uid = int(relaxations["run_as_user"])
    root = bool(relaxations.get("run_as_root")) or uid == 0
    if relaxations.get("run_as_root"):
        uid = gid = 0
    pod: dict[str, Any] = {
        "runAsNonRoot": not root,
        "runAsUser": uid,
        "runAsGroup": gid,
        "seccompProfile": {"type": relaxations.get("seccomp_profile") or "RuntimeDefault"},
    }
    capabilities: dict[str, Any] = {"drop": ["ALL"]}
    if relaxations.get("add_capabilities"):
        capabilities["add"] = list(relaxations["add_capabilities"])
    container = {
        "allowPrivilegeEscalation": bool(relaxations.get("allow_privilege_escalation")),
        "capabilities": capabilities,
    }
    return pod, container
