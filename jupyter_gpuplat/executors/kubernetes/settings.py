"""The Kubernetes executor's settings (`c.KubernetesExecutor.*`) and the JobSettings its manifests are made from.

A plain `HasTraits`, as `service/settings.py`'s: the executor keeps its one config section and adds none.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from traitlets import Bool, Dict, Float, HasTraits, Integer, List, TraitError, TraitType, Unicode, validate

from .manifests import KERNEL_PORTS, JobSettings


class KubernetesSettings(HasTraits):
    """Where and how runs' Jobs are made, watched and ended: the Kubernetes executor's traits."""

    @classmethod
    def class_own_traits(cls, **metadata: Any) -> dict[str, TraitType[Any, Any]]:
        """The executor's own: traitlets lists a class in `--help-all` and generated config files
        only for the settings it owns, and these are its config section (`c.<Executor>.*`)."""
        own = super().class_own_traits(**metadata)
        return {**KubernetesSettings.class_traits(**metadata), **own} if KubernetesSettings in cls.__bases__ else own

    namespace = Unicode(
        "gpuplat-runs",
        help="Namespace of the runs' Jobs: one the platform owns, holding nothing but runs (no control plane, no "
        "Secret of the platform, no database: whoever may create a pod there may mount its Secrets), with Pod "
        "Security restricted enforced and a default-deny NetworkPolicy (deploy/kubernetes/).",
    ).tag(config=True)
    kubeconfig = Unicode(
        "", help="Kubeconfig file; empty: in-cluster config when running in a pod, else the default kubeconfig."
    ).tag(config=True)
    context = Unicode("", help="Kubeconfig context; empty: the current context.").tag(config=True)
    instance = Unicode(
        "default", help="Label value telling this platform's Jobs apart when several share a namespace."
    ).tag(config=True)
    image = Unicode("python:3.11-slim", help="Image of runs whose spec names none.").tag(config=True)
    python = Unicode(
        "python", help="Interpreter in the image, used where the server built a command for a script."
    ).tag(config=True)
    service_account = Unicode("", help="Service account of the runs' pods; empty: the namespace's default.").tag(
        config=True
    )
    artifacts_claim = Unicode(
        "",
        help="PersistentVolumeClaim mounted into every run at artifacts_mount_path (the artifact volume, shared with "
        "the control plane at its artifacts_root). Empty: an emptyDir, so outputs end with the pod (logs are kept).",
    ).tag(config=True)
    artifacts_mount_path = Unicode("/gpuplat/artifacts", help="Where runs see the artifact volume.").tag(config=True)
    priority_classes = Dict(
        {"interactive": "gpuplat-interactive", "*": "gpuplat-batch"},
        help="Queue name → PriorityClass of its pods ('*': every other queue). They must exist in the cluster "
        "(deploy/kubernetes/priorityclasses.yaml); an empty dict sets none.",
    ).tag(config=True)
    gpu_resource = Unicode("nvidia.com/gpu", help="The extended resource GPUs are requested as.").tag(config=True)
    gpu_type_label = Unicode(
        "nvidia.com/gpu.product", help="Node label that placement.gpu_type selects on (GPU feature discovery's)."
    ).tag(config=True)
    backoff_limit = Integer(0, min=0, help="Failed pods Kubernetes retries per run before the Job fails.").tag(
        config=True
    )
    ttl_seconds_after_finished = Integer(
        86400,
        allow_none=True,
        min=0,
        help="Kubernetes deletes a finished Job after this many seconds (a backstop; the executor deletes it once its "
        "logs are archived when delete_finished_jobs is on). None: never.",
    ).tag(config=True)
    image_pull_secrets = List(Unicode(), help="Secrets the runs' pods pull images with.").tag(config=True)
    delete_finished_jobs = Bool(True, help="Delete a run's Job once it ended and its logs are archived.").tag(
        config=True
    )
    watch_nodes = Bool(
        True, help="Watch nodes (read-only) to name taints and tell fragmented GPUs from missing ones."
    ).tag(config=True)
    connect_timeout_seconds = Float(5.0, min=0.1, help="Seconds to connect to the API server, every call.").tag(
        config=True
    )
    request_timeout_seconds = Float(30.0, min=0.1, help="Seconds an API call (not a stream) may take.").tag(config=True)
    watch_timeout_seconds = Integer(
        300, min=1, help="Server-side timeout of each watch; the watch then resumes from its resourceVersion."
    ).tag(config=True)
    log_idle_timeout_seconds = Float(
        300.0, min=0.1, help="A log stream silent this long is reconnected (it resumes after the last line)."
    ).tag(config=True)
    log_drain_seconds = Float(
        10.0, min=0.0, help="After a run ends, how long to wait for the rest of its log before recording the end."
    ).tag(config=True)
    stop_wait_seconds = Float(
        60.0, min=0.0, help="After deleting a stopped run's Job, how long to wait for it to go."
    ).tag(config=True)
    pod_settle_seconds = Float(
        2.0, min=0.0, help="When a Job fails before its pod's final state arrives, how long to wait for it."
    ).tag(config=True)
    max_log_streams = Integer(256, min=1, help="Log streams followed at once; more runs wait for a free one.").tag(
        config=True
    )
    kernel_ports = List(
        Integer(min=1, max=65535),
        list(KERNEL_PORTS),
        minlen=5,
        maxlen=5,
        help="A GPU session's kernel ports in its pod (shell, iopub, stdin, control, hb): fixed, as each pod has "
        "its own IP. The control plane must reach them (NetworkPolicy).",
    ).tag(config=True)

    run_as_user = Integer(
        1000,
        min=1,
        help="The uid every run's pod runs as (runAsNonRoot; only a platform preset's security.run_as_user or "
        "run_as_root changes it). The control plane writes the runs' directories as this uid too (deploy/ runs both "
        "as 1000); a control plane running as root gives them to it.",
    ).tag(config=True)
    run_as_group = Integer(1000, min=0, help="The gid of every run's pod (runAsGroup).").tag(config=True)
    kernel_network_policy = Bool(
        True,
        help="Create a NetworkPolicy with each GPU session admitting only its owner's Jupyter server (KubeSpawner's "
        "pods in hub_namespace) to the kernel's ports. Needs networkpolicies create/delete (deploy/kubernetes/"
        "rbac.yaml) and a default-deny ingress policy in the namespace to mean anything.",
    ).tag(config=True)
    hub_namespace = Unicode(
        "jhub", help="Namespace of JupyterHub's user servers (Zero to JupyterHub's release namespace)."
    ).tag(config=True)
    nvidia_toolkit_hardened = Bool(
        False,
        help="Set True once every GPU node's NVIDIA container toolkit ignores NVIDIA_VISIBLE_DEVICES in unprivileged "
        "containers (accept-nvidia-visible-devices-envvar-when-unprivileged = false, "
        "accept-nvidia-visible-devices-as-volume-mounts = true, device plugin DEVICE_LIST_STRATEGY=volume-mounts). "
        "The API cannot tell; capacity.isolation reports gpu_devices enforced only when this says so.",
    ).tag(config=True)
    isolation_refresh_seconds = Float(
        300.0, min=1.0, help="How old the namespace's labels and NetworkPolicies may be before they are read again."
    ).tag(config=True)

    # -- GPU samples (issue 27): the DCGM exporter --------------------------------------------
    gpu_sample_seconds = Float(
        10.0,
        allow_none=True,
        min=0.1,
        help="Seconds between samples (from the DCGM exporter) of the GPUs runs and sessions hold, kept as their "
        "system metrics system/gpu<N>/util and memory_bytes (N: the run's own GPU 0..n-1, as CUDA numbers them in "
        "its pod) and summarised as gpu_usage. None: not sampled.",
    ).tag(config=True)
    dcgm_exporter_urls = List(
        Unicode(),
        help="The NVIDIA DCGM exporter's metrics to read GPU samples from: http(s) URLs, one per GPU node "
        "(http://<node or pod IP>:9400/metrics) or a Prometheus federation endpoint "
        '(.../federate?match[]={__name__=~"DCGM_FI_DEV_GPU_UTIL|DCGM_FI_DEV_FB_USED"}). The exporter must map '
        "GPUs to pods (DCGM_EXPORTER_KUBERNETES=true, the GPU operator's default). Or set dcgm_exporter_selector.",
    ).tag(config=True)
    dcgm_exporter_selector = Unicode(
        "",
        help="Find the DCGM exporter pods through the Kubernetes API instead of listing URLs: their label selector "
        "(the GPU operator's: app=nvidia-dcgm-exporter), in dcgm_exporter_namespace, read at "
        "http://<pod IP>:<dcgm_exporter_port>/metrics. Needs pods list there "
        "(deploy/kubernetes/optional/rbac-dcgm.yaml).",
    ).tag(config=True)
    dcgm_exporter_namespace = Unicode(
        "gpu-operator", help="Namespace of the DCGM exporter pods that dcgm_exporter_selector finds."
    ).tag(config=True)
    dcgm_exporter_port = Integer(9400, min=1, max=65535, help="Port of the found exporter pods' /metrics.").tag(
        config=True
    )
    dcgm_timeout_seconds = Float(
        3.0, min=0.1, help="Seconds one read of an exporter (or the listing of its pods) may take."
    ).tag(config=True)

    @validate("dcgm_exporter_urls")
    def _valid_urls(self, proposal: Any) -> list[str]:
        for url in proposal["value"]:
            parts = urlsplit(url)
            if parts.scheme not in ("http", "https") or not parts.netloc:
                raise TraitError(
                    f"KubernetesExecutor.dcgm_exporter_urls: {url!r} is not an http(s) URL with a host; "
                    "allowed: URLs such as http://10.0.3.7:9400/metrics"
                )
        return list(proposal["value"])

    def settings(self) -> JobSettings:
        """What the manifests are made from: these traits as one frozen value."""
        return JobSettings(
            namespace=self.namespace,
            instance=self.instance,
            default_image=self.image,
            python=self.python,
            service_account=self.service_account,
            artifacts_claim=self.artifacts_claim,
            artifacts_mount_path=self.artifacts_mount_path,
            priority_classes=dict(self.priority_classes),
            gpu_resource=self.gpu_resource,
            gpu_type_label=self.gpu_type_label,
            backoff_limit=self.backoff_limit,
            ttl_seconds_after_finished=self.ttl_seconds_after_finished,
            image_pull_secrets=tuple(self.image_pull_secrets),
            kernel_ports=tuple(self.kernel_ports),
            run_as_user=self.run_as_user,
            run_as_group=self.run_as_group,
            hub_namespace=self.hub_namespace,
        )
