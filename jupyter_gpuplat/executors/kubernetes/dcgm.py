"""A run's GPU samples from the NVIDIA DCGM exporter's metrics, matched to its pods (pure; issue 27).

The exporter (a DaemonSet, one per GPU node, `:9400/metrics`) writes Prometheus text: one
series per GPU and metric, labelled `gpu` (the node's index), `UUID`, `Hostname`, `modelName`
and, with its Kubernetes pod mapping on (the GPU operator's default), the `pod`, `namespace`
and `container` the device is allocated to. Two metrics are taken: DCGM_FI_DEV_GPU_UTIL
(percent of time a kernel ran) and DCGM_FI_DEV_FB_USED (framebuffer memory used, MiB).
Through a Prometheus federation endpoint the exporter's `pod`/`namespace` may arrive renamed
`exported_pod`/`exported_namespace` (Prometheus keeps its own target labels under the plain
names): those win where present. Exporters before 2.x wrote `pod_name`/`pod_namespace`.

A run's devices are numbered by its own ordinals 0..n-1, in the order of the node's GPU index:
the order nvidia-smi shows inside the pod (and CUDA with CUDA_DEVICE_ORDER=PCI_BUS_ID), the
numbering CUDA_VISIBLE_DEVICES uses there.

Honest where it cannot see (core/gpu_usage.py's contract): a run whose pod the exporter does not
name, a MIG instance (DCGM gives no utilisation per instance), a GPU mapped to several pods
(time-slicing: the figures are the device's, not the run's), fewer GPUs than the run holds:
that run gets `NotMeasured` with the reason, and nothing is estimated.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

from ...core.gpu_usage import NotMeasured, Sample

__all__ = ["FB_USED", "GPU_UTIL", "GpuSeries", "PodRef", "parse", "run_samples"]

GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"
FB_USED = "DCGM_FI_DEV_FB_USED"
MIB = 1 << 20
# Where each label may be found, first wins (federation's renamed labels, today's, before 2.x).
POD_LABELS = ("exported_pod", "pod", "pod_name")
NAMESPACE_LABELS = ("exported_namespace", "namespace", "pod_namespace")


@dataclass(frozen=True, slots=True)
class PodRef:
    """One pod of a run, as the cluster cache has it (the series are matched on namespace and name)."""

    namespace: str
    name: str
    created: str = ""  # creationTimestamp (RFC 3339 sorts as text): the newest pod with GPUs is the run's


@dataclass(frozen=True, slots=True)
class GpuSeries:
    """One device (or MIG instance) as one exporter reports it: its labels and the two figures."""

    hostname: str
    uuid: str
    gpu: str  # the node's index of the device
    mig_instance: str  # GPU_I_ID: a MIG instance ("" for a whole GPU)
    namespace: str
    pod: str
    util_percent: float | None
    fb_used_mib: float | None

    def order(self) -> tuple[int, str]:
        return (int(self.gpu) if self.gpu.isdigit() else 1 << 30, self.uuid)

    def name(self) -> str:
        where = f" on {self.hostname}" if self.hostname else ""
        return f"GPU {self.gpu} ({self.uuid}){where}"


def _first(labels: Mapping[str, str], names: Sequence[str]) -> str:
    return next((labels[n] for n in names if labels.get(n)), "")


def parse(text: str) -> list[GpuSeries]:
    """The GPU series of one scrape (other metrics passed over); ValueError on text that is not Prometheus'."""
    found: dict[tuple[str, str, str, str, str, str], dict[str, float]] = {}
    for family in text_string_to_metric_families(text):
        if family.name not in (GPU_UTIL, FB_USED):
            continue
        for s in family.samples:
            if s.name != family.name:
                continue
            lab = s.labels
            key = (
                lab.get("Hostname", ""),
                lab.get("UUID", ""),
                lab.get("gpu", ""),
                lab.get("GPU_I_ID", ""),
                _first(lab, NAMESPACE_LABELS),
                _first(lab, POD_LABELS),
            )
            found.setdefault(key, {})[family.name] = float(s.value)
    return [
        GpuSeries(host, uuid, gpu, mig, ns, pod, util_percent=values.get(GPU_UTIL), fb_used_mib=values.get(FB_USED))
        for (host, uuid, gpu, mig, ns, pod), values in found.items()
    ]


def run_samples(
    series: Sequence[GpuSeries],
    pods: Mapping[str, Sequence[PodRef]],
    held: Mapping[str, tuple[int, ...]],
    at: float,
    unread: Iterable[str] = (),
) -> dict[str, list[Sample] | NotMeasured]:
    """Each run's samples (device: its ordinal), or why it has none.

    `series`: every exporter's scrape together; `pods`: run id → its pods; `held`: run id → its
    ordinals (0..n-1, n its GPUs); `unread`: "URL: error" of the exporters that could not be read
    (a run not found may be on one of their nodes: said so).
    """
    by_pod: dict[tuple[str, str], list[GpuSeries]] = {}
    pods_of_device: dict[tuple[str, str], set[tuple[str, str]]] = {}
    for s in series:
        if s.pod:
            by_pod.setdefault((s.namespace, s.pod), []).append(s)
            pods_of_device.setdefault((s.hostname, s.uuid), set()).add((s.namespace, s.pod))
    mapped = bool(by_pod) or not series
    missing = "; ".join(unread)
    out: dict[str, list[Sample] | NotMeasured] = {}
    for run_id, ordinals in held.items():
        refs = sorted(pods.get(run_id, ()), key=lambda p: p.created, reverse=True)
        if not refs:
            out[run_id] = NotMeasured("no pod of the run is seen yet")
            continue
        pod = next((p for p in refs if (p.namespace, p.name) in by_pod), None)
        if pod is None:
            out[run_id] = NotMeasured(_unseen(refs[0], mapped, missing))
            continue
        devices = sorted(by_pod[(pod.namespace, pod.name)], key=GpuSeries.order)
        out[run_id] = _samples(pod, devices, pods_of_device, ordinals, at)
    return out


def _unseen(pod: PodRef, mapped: bool, missing: str) -> str:
    if not mapped:
        return (
            "the DCGM exporter's series name no pods: turn on its Kubernetes pod mapping "
            "(DCGM_EXPORTER_KUBERNETES=true, the GPU operator's default)"
        )
    why = (
        f"the DCGM exporter reports no GPU of pod {pod.name} in namespace {pod.namespace} (a MIG or time-sliced "
        "device the exporter does not map to pods, or a node without an exporter)"
    )
    return f"{why}; not read: {missing}" if missing else why


def _samples(
    pod: PodRef,
    devices: list[GpuSeries],
    pods_of_device: Mapping[tuple[str, str], set[tuple[str, str]]],
    ordinals: tuple[int, ...],
    at: float,
) -> list[Sample] | NotMeasured:
    reasons = []
    for d in devices:
        if d.mig_instance:
            reasons.append(f"{d.name()} is a MIG instance ({d.mig_instance}): DCGM gives no utilisation per instance")
            continue
        sharing = len(pods_of_device.get((d.hostname, d.uuid), ())) - 1
        if sharing > 0:
            reasons.append(
                f"{d.name()} is shared with {sharing} other pod{'s' if sharing > 1 else ''} (time-slicing): "
                "DCGM's figures are the device's, not this run's"
            )
        elif d.util_percent is None or d.fb_used_mib is None:
            absent = GPU_UTIL if d.util_percent is None else FB_USED
            reasons.append(f"{d.name()}: the DCGM exporter does not export {absent}")
    if reasons:
        return NotMeasured("; ".join(reasons))
    if len(devices) != len(ordinals):
        return NotMeasured(
            f"the DCGM exporter reports {len(devices)} GPUs of pod {pod.name}, the run holds {len(ordinals)}"
        )
    return [
        Sample(at, ordinal, float(d.util_percent or 0.0), int((d.fb_used_mib or 0.0) * MIB))
        for ordinal, d in zip(ordinals, devices, strict=True)
    ]
