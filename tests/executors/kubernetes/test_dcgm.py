"""GPU samples from the DCGM exporter's text, matched to a run's pods (executors/kubernetes/dcgm.py, gpusource.py).

The exporter is an outside service: its scrapes are fixtures (tests/fixtures/dcgm/, as dcgm-exporter
3.3 writes them with pod mapping on), parsed with prometheus_client's parser and, for the source,
served over real local HTTP (tests/dcgm_exporter.py). Each expected figure is read off the fixture.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from traitlets import TraitError

from jupyter_gpuplat.core.gpu_usage import NotMeasured, Sample
from jupyter_gpuplat.executors.base import ExecutorError
from jupyter_gpuplat.executors.kubernetes.dcgm import PodRef, parse, run_samples
from jupyter_gpuplat.executors.kubernetes.executor import KubernetesExecutor
from jupyter_gpuplat.executors.kubernetes.gpusource import NOT_CONFIGURED, DcgmSource

from ...dcgm_exporter import FIXTURES, MIB, RUN_POD, Exporter, serving

NS = "gpuplat-runs"
AT = 1_700_000_000.0


def _series() -> list[Any]:
    return parse((FIXTURES / "gpu-node-a.prom").read_text()) + parse((FIXTURES / "gpu-node-b.prom").read_text())


def test_only_utilisation_and_memory_are_taken_per_device_and_pod() -> None:
    got = {(s.hostname, s.gpu, s.pod): (s.util_percent, s.fb_used_mib) for s in _series()}
    # Read off the fixture: node a's four GPUs, node b's time-sliced GPU under two pods and its MIG instance
    # (framebuffer only); clocks, power, energy, temperature and profiling ratios are passed over.
    assert got == {
        ("gpu-node-a", "0", "jupyter-bob"): (41.0, 20345.0),
        ("gpu-node-a", "1", RUN_POD): (97.0, 61440.0),
        ("gpu-node-a", "2", ""): (0.0, 0.0),
        ("gpu-node-a", "3", RUN_POD): (3.0, 1024.0),
        ("gpu-node-b", "0", "gpuplat-r-shared1-aaaaa"): (55.0, 8000.0),
        ("gpu-node-b", "0", "gpuplat-r-shared2-bbbbb"): (55.0, 8000.0),
        ("gpu-node-b", "1", "gpuplat-r-mig-ccccc"): (None, 4213.0),
    }


def test_a_runs_gpus_are_its_ordinals_in_the_nodes_order_and_other_pods_are_not_its() -> None:
    pods = {"r1": [PodRef(NS, RUN_POD)], "bob": [PodRef(NS, "jupyter-bob")]}  # jupyter-bob's series are in jhub
    got = run_samples(_series(), pods, {"r1": (0, 1), "bob": (0,)}, AT)
    assert got["r1"] == [Sample(AT, 0, 97.0, 61440 * MIB), Sample(AT, 1, 3.0, 1024 * MIB)]
    assert got["bob"] == NotMeasured(
        "the DCGM exporter reports no GPU of pod jupyter-bob in namespace gpuplat-runs (a MIG or time-sliced device "
        "the exporter does not map to pods, or a node without an exporter)"
    )


def test_mig_shared_and_partial_devices_are_not_measured_with_the_reason() -> None:
    pods = {
        "mig": [PodRef(NS, "gpuplat-r-mig-ccccc")],
        "shared": [PodRef(NS, "gpuplat-r-shared1-aaaaa")],
        "more": [PodRef(NS, RUN_POD)],
        "unborn": [],
    }
    got = run_samples(_series(), pods, {"mig": (0,), "shared": (0,), "more": (0, 1, 2), "unborn": (0,)}, AT)
    assert got == {
        "mig": NotMeasured(
            "GPU 1 (GPU-9a8b7c6d-5e4f-4a3b-9c2d-1e0f9a8b7c6d) on gpu-node-b is a MIG instance (9): "
            "DCGM gives no utilisation per instance"
        ),
        "shared": NotMeasured(
            "GPU 0 (GPU-5d6e7f80-91a2-4b3c-8d4e-5f60718293a4) on gpu-node-b is shared with 1 other pod "
            "(time-slicing): DCGM's figures are the device's, not this run's"
        ),
        "more": NotMeasured(f"the DCGM exporter reports 2 GPUs of pod {RUN_POD}, the run holds 3"),
        "unborn": NotMeasured("no pod of the run is seen yet"),
    }


def test_an_exporter_without_pod_mapping_says_so_and_federations_renamed_labels_are_read() -> None:
    text = (FIXTURES / "gpu-node-a.prom").read_text()
    unmapped = text.replace(f',container="main",namespace="{NS}",pod="{RUN_POD}"', "").replace(
        ',container="main",namespace="jhub",pod="jupyter-bob"', ""
    )
    got = run_samples(parse(unmapped), {"r1": [PodRef(NS, RUN_POD)]}, {"r1": (0, 1)}, AT)
    assert got["r1"] == NotMeasured(
        "the DCGM exporter's series name no pods: turn on its Kubernetes pod mapping "
        "(DCGM_EXPORTER_KUBERNETES=true, the GPU operator's default)"
    )
    # Through Prometheus federation the exporter's pod labels arrive renamed; the plain ones are the exporter's own.
    federated = text.replace(',namespace="', ',exported_namespace="').replace(',pod="', ',exported_pod="')
    federated = federated.replace("} ", ',namespace="gpu-operator",pod="nvidia-dcgm-exporter-7xk2p"} ')
    got = run_samples(parse(federated), {"r1": [PodRef(NS, RUN_POD)]}, {"r1": (0, 1)}, AT)
    assert got["r1"] == [Sample(AT, 0, 97.0, 61440 * MIB), Sample(AT, 1, 3.0, 1024 * MIB)]


def _source(exporter: Exporter | None, *urls: str, pods: dict[str, list[PodRef]] | None = None) -> DcgmSource:
    def no_api(*_: Any) -> list[Any]:
        raise AssertionError("no listing without discovery")

    return DcgmSource(list(urls), None, 2.0, no_api, lambda rid: (pods or {}).get(rid, []))


@pytest.fixture
def exporter() -> Iterator[Exporter]:
    with serving() as e:
        yield e


def test_the_source_reads_every_exporter_and_names_the_ones_it_could_not(exporter: Exporter) -> None:
    pods = {"r1": [PodRef(NS, RUN_POD)], "lost": [PodRef(NS, "gpuplat-r-elsewhere-zzzzz")]}
    broken = exporter.url("gpu-node-c")  # answers 404
    src = _source(exporter, exporter.url("gpu-node-a"), exporter.url("gpu-node-b"), broken, pods=pods)
    got = src.read({"r1": (0, 1), "lost": (0,)}, AT)
    assert not isinstance(got, NotMeasured)
    assert got["r1"] == [Sample(AT, 0, 97.0, 61440 * MIB), Sample(AT, 1, 3.0, 1024 * MIB)]
    lost = got["lost"]
    assert isinstance(lost, NotMeasured) and lost.reason.endswith(f"; not read: {broken}: Not Found"), lost


def test_nothing_readable_or_nothing_configured_is_not_measured_with_the_reason(exporter: Exporter) -> None:
    assert _source(None).read({"r1": (0,)}, AT) == NotMeasured(NOT_CONFIGURED)
    exporter.status["/gpu-node-a/metrics"] = 500
    down = "http://127.0.0.1:9/metrics"  # the discard port: nothing listens there
    got = _source(exporter, exporter.url("gpu-node-a"), down).read({"r1": (0,)}, AT)
    assert isinstance(got, NotMeasured)
    assert got.reason.startswith("the DCGM exporter could not be read: ")
    assert f"{exporter.url('gpu-node-a')}: Internal Server Error" in got.reason
    assert f"{down}: [Errno 111] Connection refused" in got.reason


def test_bad_settings_are_refused_naming_the_setting_and_what_is_allowed() -> None:
    with pytest.raises(TraitError, match=r"dcgm_exporter_urls: 'node-a:9400/metrics' is not an http\(s\) URL"):
        KubernetesExecutor(dcgm_exporter_urls=["node-a:9400/metrics"])
    with pytest.raises(ExecutorError, match="set dcgm_exporter_urls or dcgm_exporter_selector, not both"):
        KubernetesExecutor(dcgm_exporter_urls=["http://a:9400/metrics"], dcgm_exporter_selector="app=dcgm")
    ex = KubernetesExecutor(dcgm_exporter_selector="app=nvidia-dcgm-exporter")
    assert ex.gpu_interval() == 10.0
    assert ex.gpu_samples({"r1": (0,)}, AT) == NotMeasured(
        "the DCGM exporter pods 'app=nvidia-dcgm-exporter' in namespace gpu-operator could not be listed: "
        "the Kubernetes executor has not started"
    )
