"""A Kubernetes API emulator for tests, served over real HTTP on 127.0.0.1.

The official `kubernetes` client runs against it unchanged. It has an object store
(uid, resourceVersion, generateName, owner references, cascade delete), list and
watch with selectors, bookmarks and 410 after compaction, a Job controller, a
scheduler over declared nodes writing kube-scheduler's messages, a kubelet model
driven by each container's command, RBAC from Role manifests, pod validation and Pod
Security admission, and fault injection.

    with EmulatedCluster() as cluster:
        cluster.add_namespace("gpuplat-runs", labels={"pod-security.kubernetes.io/enforce": "restricted"})
        cluster.add_node("gpu-1", gpus=8)
        cluster.write_kubeconfig(path, namespace="gpuplat-runs")

It is a test double: the product never imports it, and the jupyter-gpuplat wheel does not ship it.
"""

from .cluster import EmulatedCluster, load_manifests
from .faults import Faults
from .rbac import Permissions
from .scheduler import TAINT_WORDINGS
from .store import ApiError

__all__ = ["TAINT_WORDINGS", "ApiError", "EmulatedCluster", "Faults", "Permissions", "load_manifests"]
