"""Who may reach a GPU session's kernel: a NetworkPolicy per kernel, admitting its owner's server only.

The runs' namespace denies all ingress by default (deploy/kubernetes/network-policies.yaml).
Each session pod then gets its own policy, created with its Job and owned by it (so it goes
with it): ingress to the kernel's ports only from the owner's Jupyter server, which
KubeSpawner labels `component: singleuser-server` and `hub.jupyter.org/username: <slug>` in
the Hub's namespace. The kernel's key is handed only to its owner, and now another user's
server (or another team's run) cannot even open a connection to it.

`kubespawner_username` is the label value KubeSpawner (7.x, `_build_common_labels`) writes:
`safe_slug(name, is_valid=is_valid_label)`, re-implemented here so that the executor needs no
KubeSpawner: a valid label value without `--` is kept as it is; anything else becomes its
lowercase alphanumeric runs joined by `-` (at most 21 characters, starting with a letter) plus
`---` and the first 8 hex digits of its SHA-256.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from typing import Any

SINGLEUSER = {"component": "singleuser-server"}
USERNAME_LABEL = "hub.jupyter.org/username"
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
_LABEL = re.compile(r"^[a-z0-9.\-_]+$", re.IGNORECASE)
_NOT_ALNUM = re.compile(r"[^a-z0-9]+")
_HASH_LENGTH = 8
_SLUG_LENGTH = 32  # KubeSpawner's strip_and_hash default


def _valid_label(s: str) -> bool:
    return not s or (len(s) <= 63 and s[0].isalnum() and s[-1].isalnum() and s.isascii() and bool(_LABEL.match(s)))


def _safe_part(name: str, max_length: int) -> str:
    out = _NOT_ALNUM.sub("-", name.lower()).lstrip("-")[:max_length].rstrip("-")
    if out and not out[0].isalpha():
        out = "x-" + out[: max_length - 2]
    return out or "x"


def kubespawner_username(name: str) -> str:
    """The `hub.jupyter.org/username` label KubeSpawner gives `name`'s server pods."""
    if "--" not in name and _valid_label(name):
        return name
    digest = hashlib.sha256(name.encode("utf8")).hexdigest()[:_HASH_LENGTH]
    return f"{_safe_part(name, _SLUG_LENGTH - (_HASH_LENGTH + 3))}---{digest}"


def make_kernel_network_policy(
    name: str,
    namespace: str,
    labels: Mapping[str, str],
    pod_selector: Mapping[str, str],
    owner: str,
    hub_namespace: str,
    ports: Sequence[int],
    job_owner: Mapping[str, Any],
) -> dict[str, Any]:
    """Ingress to the kernel's `ports` of the pods `pod_selector` picks, from `owner`'s Jupyter servers only."""
    peer = {
        "namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: hub_namespace}},
        "podSelector": {"matchLabels": {**SINGLEUSER, USERNAME_LABEL: kubespawner_username(owner)}},
    }
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": dict(labels),
            "ownerReferences": [dict(job_owner)],
        },
        "spec": {
            "podSelector": {"matchLabels": dict(pod_selector)},
            "policyTypes": ["Ingress"],
            "ingress": [{"from": [peer], "ports": [{"protocol": "TCP", "port": p} for p in ports]}],
        },
    }
