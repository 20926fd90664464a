"""The GPU sampler (executors/local/nvml.py) over NVML.

NVML is hardware: these tests replace it at that boundary only, with `FakeNvml`
(tests/fake_nvml.py), a scripted fake that answers pynvml's calls with pynvml's own shapes and
errors. One test runs the real pynvml: on a machine without the NVIDIA driver it must say
"not measured" and why, not raise. benchmarks/gpu_check.py checks the sampler on real GPUs.
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Callable
from pathlib import Path

import pynvml
import pytest

from jupyter_gpuplat.core.gpu_usage import NotMeasured, Sample, summary
from jupyter_gpuplat.executors.base import Device
from jupyter_gpuplat.executors.local.gpus import MachineGpus
from jupyter_gpuplat.executors.local.nvml import GpuSampler, ProcessMemory

from ..fake_nvml import MIB, FakeGpu, FakeNvml

UUID_A = "GPU-aaaaaaaa-0000-0000-0000-000000000000"
UUID_B = "GPU-bbbbbbbb-0000-0000-0000-000000000000"
# Ours as nvidia-smi numbered them: 0 is A, 1 is B.
DEVICES = [
    Device(0, "NVIDIA H100 80GB HBM3", 81_559, UUID_A, declared=False),
    Device(1, "NVIDIA H100 80GB HBM3", 81_559, UUID_B, declared=False),
]


def ticking(step: float) -> tuple[list[float], Callable[[], float]]:
    seen: list[float] = []
    counter = itertools.count()

    def clock() -> float:
        seen.append(next(counter) * step)
        return seen[-1]

    return seen, clock


def test_samples_land_on_the_device_with_that_uuid_whatever_nvmls_order() -> None:
    a, b = FakeGpu(UUID_A, util_percent=97, memory_used_bytes=40_000 * MIB), FakeGpu(UUID_B, util_percent=3)
    nvml = FakeNvml([b, a])  # NVML numbers B first: an index would put B's figures on our GPU 0
    with GpuSampler(DEVICES, nvml=nvml, clock=lambda: 5.0) as sampler:
        assert sampler.not_measured is None
        got = sampler.sample([0, 1])
    assert got == [
        Sample(at=5.0, device=0, util_percent=97.0, memory_bytes=40_000 * MIB),
        Sample(at=5.0, device=1, util_percent=3.0, memory_bytes=0),
    ]
    assert nvml.calls.get("nvmlDeviceGetHandleByIndex", 0) == 0


def test_a_device_without_uuid_is_taken_by_index() -> None:
    nvml = FakeNvml([FakeGpu(UUID_A, util_percent=10), FakeGpu(UUID_B, util_percent=20)])
    declared = [Device(i, f"declared GPU {i}", None, None, declared=True, minor=i) for i in range(2)]
    with GpuSampler(declared, nvml=nvml, clock=lambda: 0.0) as sampler:
        got = sampler.sample([1])
    assert got == [Sample(at=0.0, device=1, util_percent=20.0, memory_bytes=0)]


def test_handles_are_looked_up_once_and_a_gpu_without_mig_is_not_asked_again() -> None:
    nvml = FakeNvml([FakeGpu(UUID_A, mig=None), FakeGpu(UUID_B, mig=False)])
    with GpuSampler(DEVICES, nvml=nvml) as sampler:
        for _ in range(3):
            assert isinstance(sampler.sample([0, 1]), list)
    assert nvml.calls["nvmlDeviceGetHandleByUUID"] == 2
    assert nvml.calls["nvmlDeviceGetMigMode"] == 1 + 3  # A once (no MIG there), B every time
    assert nvml.calls["nvmlDeviceGetUtilizationRates"] == 6


def test_summary_of_the_samples_equals_a_hand_count() -> None:
    a, b = FakeGpu(UUID_A), FakeGpu(UUID_B)
    script = [  # (A util, A used MiB, B util, B used MiB) at t = 0, 10, 20, 30
        (100, 1_000, 50, 500),
        (100, 3_000, 0, 500),
        (0, 2_000, 4, 700),
        (0, 1_000, 80, 600),
    ]
    seen, clock = ticking(10.0)
    samples: list[Sample] = []
    with GpuSampler(DEVICES, nvml=FakeNvml([b, a]), clock=clock) as sampler:
        for ua, ma, ub, mb in script:
            a.util_percent, a.memory_used_bytes, b.util_percent, b.memory_used_bytes = ua, ma * MIB, ub, mb * MIB
            got = sampler.sample([0, 1])
            assert isinstance(got, list)
            samples += got
    assert seen == [0.0, 10.0, 20.0, 30.0]
    usage = summary(samples, interval_seconds=10.0)
    # 8 samples of 10 s each; utilisation·seconds: A 100+100+0+0, B 50+0+4+80 → 3340 / 80 s
    # busy (≥ 5%): A's two 100s, B's 50 and 80 → 40 of 80 s; sorted utils 0 0 0 4 50 80 100 100 → p50 27
    assert usage == {
        "measured": True,
        "reason": None,
        "devices": [0, 1],
        "samples": 8,
        "mean_util": 41.75,
        "p50_util": 27.0,
        "memory_peak_bytes": 3_000 * MIB,
        "busy_fraction": 0.5,
        "seconds_sampled": 80.0,
        "seconds_busy": 40.0,
        "busy_percent": 5.0,
        "interval_seconds": 10.0,
        "text": "2 GPUs busy 50% of 1 min GPU time · mean util 42% · memory peak 2.9 GiB",
        "busy_text": "50%",
        "memory_peak_text": "2.9 GiB",
    }


def test_no_library_is_not_measured_with_the_reason_and_nothing_is_called() -> None:
    nvml = FakeNvml([FakeGpu(UUID_A)], init_error=pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)
    sampler = GpuSampler(DEVICES, nvml=nvml)
    why = NotMeasured("no NVML on this machine: NVML Shared Library Not Found")
    assert sampler.not_measured == why
    assert sampler.sample([0]) == why
    assert sampler.processes([0]) == why
    sampler.close()
    assert nvml.calls == {"nvmlInit": 1}  # no shutdown of what never opened
    assert summary([], interval_seconds=10.0, not_measured=why)["reason"] == why.reason


def test_a_driver_that_is_not_loaded_is_not_measured_with_the_reason() -> None:
    nvml = FakeNvml([], init_error=pynvml.NVML_ERROR_DRIVER_NOT_LOADED)
    sampler = GpuSampler([], nvml=nvml)
    assert sampler.sample([0]) == NotMeasured("no NVML on this machine: Driver Not Loaded")


def test_a_mig_device_is_not_measured_and_named() -> None:
    nvml = FakeNvml([FakeGpu(UUID_A, util_percent=50), FakeGpu(UUID_B, mig=True)])
    with GpuSampler(DEVICES, nvml=nvml) as sampler:
        got = sampler.sample([0, 1])
        assert got == NotMeasured(f"GPU 1 ({UUID_B}) is in MIG mode: NVML gives no utilisation for the whole GPU")
        assert isinstance(sampler.sample([0]), list)  # the other device still samples alone


def test_unsupported_utilisation_is_not_measured_and_named() -> None:
    nvml = FakeNvml([FakeGpu(UUID_A, util_supported=False, mig=None)])
    with GpuSampler(DEVICES, nvml=nvml) as sampler:
        assert sampler.sample([0]) == NotMeasured(f"GPU 0 ({UUID_A}): NVML does not support utilisation on this device")


def test_every_device_that_cannot_be_seen_is_named() -> None:
    nvml = FakeNvml([FakeGpu(UUID_A, mig=True)])  # B is not in NVML at all
    with GpuSampler(DEVICES, nvml=nvml) as sampler:
        got = sampler.sample([0, 1])
    assert isinstance(got, NotMeasured)
    assert got.reason == (
        f"GPU 0 ({UUID_A}) is in MIG mode: NVML gives no utilisation for the whole GPU; "
        f"GPU 1: NVML finds no device by UUID {UUID_B}: Not Found"
    )


def test_a_lost_gpu_is_not_measured_with_nvmls_words() -> None:
    nvml = FakeNvml([FakeGpu(UUID_A)])
    with GpuSampler(DEVICES, nvml=nvml) as sampler:
        assert isinstance(sampler.sample([0]), list)

        def lost(handle: object) -> None:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_GPU_IS_LOST)

        nvml.nvmlDeviceGetUtilizationRates = lost  # type: ignore[method-assign]
        assert sampler.sample([0]) == NotMeasured(f"GPU 0 ({UUID_A}): NVML error reading utilisation: GPU is lost")


def test_per_process_memory_names_each_pid_and_its_device() -> None:
    a = FakeGpu(UUID_A, processes=[(4242, 2_048 * MIB), (4343, None)])
    b = FakeGpu(UUID_B, processes=[(5151, 512 * MIB)])
    with GpuSampler(DEVICES, nvml=FakeNvml([b, a])) as sampler:
        assert sampler.processes([0, 1]) == [
            ProcessMemory(0, 4242, 2_048 * MIB),
            ProcessMemory(0, 4343, None),  # the driver did not say: not a zero
            ProcessMemory(1, 5151, 512 * MIB),
        ]
        b.processes_supported = False
        assert sampler.processes([1]) == NotMeasured(
            f"GPU 1 ({UUID_B}): NVML does not support per-process memory on this device"
        )


def test_close_shuts_nvml_down_once_and_later_calls_are_not_measured() -> None:
    nvml = FakeNvml([FakeGpu(UUID_A)])
    sampler = GpuSampler(DEVICES, nvml=nvml)
    assert nvml.initialised == 1
    sampler.close()
    sampler.close()
    assert nvml.initialised == 0 and nvml.calls["nvmlShutdown"] == 1
    assert sampler.sample([0]) == NotMeasured("the GPU sampler is closed")


def test_no_devices_asked_is_no_samples() -> None:
    with GpuSampler(DEVICES, nvml=FakeNvml([FakeGpu(UUID_A)])) as sampler:
        assert sampler.sample([]) == []


def test_the_real_pynvml_here_answers_without_raising() -> None:
    """The real library: on a machine without the NVIDIA driver (CI), not measured and why."""
    with GpuSampler(DEVICES) as sampler:
        got = sampler.sample([0])
        if sampler.not_measured is None:  # a machine with NVML: real figures or a named reason
            assert isinstance(got, list | NotMeasured)
            return
        assert sampler.not_measured.reason.startswith("no NVML on this machine: ")
        assert got == sampler.not_measured


def test_without_the_package_it_is_not_measured(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # `import pynvml` raises ImportError
    sampler = GpuSampler(DEVICES)
    assert sampler.not_measured is not None
    assert sampler.not_measured.reason.startswith("no NVML on this machine: the nvidia-ml-py package is not installed")


def test_the_local_executors_reading_is_per_run(tmp_path: Path) -> None:
    """MachineGpus (the local executor's GPUs) answers run by run: each run gets its own devices' samples."""
    smi = tmp_path / "nvidia-smi"
    smi.write_text(
        f"#!/bin/sh\ncat <<'EOF'\n0, NVIDIA H100 80GB HBM3, 81559, {UUID_A}\n"
        f"1, NVIDIA H100 80GB HBM3, 81559, {UUID_B}\nEOF\n"
    )
    smi.chmod(0o755)
    a, b = FakeGpu(UUID_A, util_percent=70, memory_used_bytes=3 * MIB), FakeGpu(UUID_B, util_percent=10)
    gpus = MachineGpus(None, str(smi), nvml=FakeNvml([b, a]))
    try:
        got = gpus.samples({"run-a": (0,), "run-b": (1,)})
        assert not isinstance(got, NotMeasured), got
        assert {rid: [(s.device, s.util_percent, s.memory_bytes) for s in ss] for rid, ss in got.items()} == {  # type: ignore[union-attr]
            "run-a": [(0, 70.0, 3 * MIB)],
            "run-b": [(1, 10.0, 0)],
        }
        # A device NVML cannot read (MIG) leaves its run unmeasured, with why; the other run is still measured.
        a.mig = True
        got = gpus.samples({"run-a": (0,), "run-b": (1,)})
        assert not isinstance(got, NotMeasured), got
        assert isinstance(got["run-a"], NotMeasured) and "MIG" in got["run-a"].reason, got
        assert [(s.device, s.util_percent) for s in got["run-b"]] == [(1, 10.0)]  # type: ignore[union-attr]
    finally:
        gpus.close()
