"""Samples of this machine's GPUs from NVML: each device's utilisation and memory in use (issue 27).

Why NVML and not nvidia-smi: a figure is one library call (microseconds), not a process per
sample (tens of milliseconds of CPU), so sampling 8 devices every 10 s stays far under 1% of a
core (benchmarks/bench_gpu_sampler.py, benchmarks/gpu_check.py). `nvidia-ml-py` (module
`pynvml`) is NVIDIA's own ctypes binding; it loads libnvidia-ml.so.1, which only a machine with
the NVIDIA driver has.

Honest when it cannot see (core/gpu_usage.py's contract): no library or driver, a device in MIG
mode (NVML then gives no utilisation for the whole GPU), a device whose utilisation NVML does not
support, any other NVML error: the call returns `NotMeasured` naming the device and why, and
nothing is estimated. A call covers every device asked for or none: a run's mean over part of its
GPUs would misstate the run. A device shared by several runs (time-sliced) gives the device's
figures, not one run's: the caller, who assigned the devices, knows that; `processes` gives the
memory each process holds, which can be put on a run by its PIDs.

Devices are found by UUID (nvidia-smi's, `Device.uuid`), so NVML numbering them in another order
cannot put one GPU's figures on another; a device without a UUID (declared by hand) is taken by
index (NVML and nvidia-smi both number by PCI bus). NVML calls block for a moment in the driver:
a caller on the event loop runs `sample` in a thread. The NVML module is a parameter: tests pass
a scripted fake that answers the same calls (tests/fake_nvml.py).
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ...core.gpu_usage import NotMeasured, Sample
from ..base import Device

__all__ = ["GpuSampler", "ProcessMemory"]

NO_NVML = "no NVML on this machine"


@dataclass(frozen=True, slots=True)
class ProcessMemory:
    """GPU memory one process holds on one device, as the driver reports it (host PIDs)."""

    device: int
    pid: int
    memory_bytes: int | None  # None where the driver does not say (NVML's "not available")


class GpuSampler:
    """NVML opened once; `sample` and `processes` per call; `close` shuts NVML down.

    `devices`: this machine's devices (`LocalExecutor.devices()`), for their UUIDs.
    `nvml`: the NVML module (default: `pynvml`, imported here). `clock`: the samples' time.
    `not_measured` is set when NVML could not be opened; every call then returns it.
    """

    def __init__(
        self,
        devices: Sequence[Device] = (),
        *,
        nvml: Any = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._uuids = {d.index: d.uuid for d in devices}
        self._clock = clock
        self._handles: dict[int, Any] = {}
        self._no_mig: set[int] = set()  # devices whose NVML has no MIG mode at all: never asked again
        self._open = False
        self._errors: tuple[type[BaseException], ...] = ()
        self.not_measured: NotMeasured | None = None
        try:
            self._nvml = nvml if nvml is not None else importlib.import_module("pynvml")
        except ImportError as exc:
            self._nvml = None
            self.not_measured = NotMeasured(f"{NO_NVML}: the nvidia-ml-py package is not installed ({exc})")
            return
        self._errors = (
            self._nvml.NVMLError,
            getattr(self._nvml, "NVMLLibraryMismatchError", self._nvml.NVMLError),
        )
        try:
            self._nvml.nvmlInit()
        except (*self._errors, OSError) as exc:
            self.not_measured = NotMeasured(f"{NO_NVML}: {exc}")
            return
        self._open = True

    # -- samples ---------------------------------------------------------------------------

    def sample(self, devices: Iterable[int]) -> list[Sample] | NotMeasured:
        """One sample of each device (same `at`), or why none: every device's reason, joined."""
        if (closed := self._closed()) is not None:
            return closed
        at = self._clock()
        samples: list[Sample] = []
        reasons: list[str] = []
        for index in devices:
            handle = self._handle(index, reasons)
            if handle is None:
                continue
            try:
                if self._mig_enabled(index, handle):
                    reasons.append(f"{self._name(index)} is in MIG mode: NVML gives no utilisation for the whole GPU")
                    continue
                util = self._nvml.nvmlDeviceGetUtilizationRates(handle).gpu
                used = self._nvml.nvmlDeviceGetMemoryInfo(handle).used
            except self._errors as exc:
                reasons.append(self._why(index, "utilisation", exc))
                continue
            samples.append(Sample(at=at, device=index, util_percent=float(util), memory_bytes=int(used)))
        return NotMeasured("; ".join(reasons)) if reasons else samples

    def processes(self, devices: Iterable[int]) -> list[ProcessMemory] | NotMeasured:
        """The compute processes on each device and the memory each holds, or why not.

        PIDs are as the driver reports them, in the host's PID namespace: inside a container without
        it they may match none of its processes.
        """
        if (closed := self._closed()) is not None:
            return closed
        found: list[ProcessMemory] = []
        reasons: list[str] = []
        for index in devices:
            handle = self._handle(index, reasons)
            if handle is None:
                continue
            try:
                procs = self._nvml.nvmlDeviceGetComputeRunningProcesses(handle)
            except self._errors as exc:
                reasons.append(self._why(index, "per-process memory", exc))
                continue
            for p in procs:
                used = p.usedGpuMemory
                found.append(ProcessMemory(index, int(p.pid), int(used) if used is not None else None))
        return NotMeasured("; ".join(reasons)) if reasons else found

    # -- lifecycle -------------------------------------------------------------------------

    def close(self) -> None:
        """Shut NVML down (once; pynvml counts its opens, so other users in this process keep theirs)."""
        if not self._open:
            return
        self._open = False
        self._handles.clear()
        try:
            self._nvml.nvmlShutdown()
        except self._errors:
            pass  # nothing is left to release that a failed shutdown would keep

    def __enter__(self) -> GpuSampler:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- inside ----------------------------------------------------------------------------

    def _closed(self) -> NotMeasured | None:
        if self._open:
            return None
        return self.not_measured or NotMeasured("the GPU sampler is closed")

    def _handle(self, index: int, reasons: list[str]) -> Any:
        """The device's NVML handle (looked up once), or None with the reason added to `reasons`."""
        handle = self._handles.get(index)
        if handle is not None:
            return handle
        uuid = self._uuids.get(index)
        try:
            # a UUID that NVML does not know is an error, never another GPU's figures
            if uuid:
                handle = self._nvml.nvmlDeviceGetHandleByUUID(uuid)
            else:
                handle = self._nvml.nvmlDeviceGetHandleByIndex(index)
        except self._errors as exc:
            by = f"UUID {uuid}" if uuid else f"index {index}"
            reasons.append(f"GPU {index}: NVML finds no device by {by}: {exc}")
            return None
        self._handles[index] = handle
        return handle

    def _mig_enabled(self, index: int, handle: Any) -> bool:
        if index in self._no_mig:
            return False
        nvml = self._nvml
        try:
            current, _pending = nvml.nvmlDeviceGetMigMode(handle)
        except nvml.NVMLError_NotSupported:  # a GPU without MIG (not an A100/H100-class part)
            self._no_mig.add(index)
            return False
        return bool(current == nvml.NVML_DEVICE_MIG_ENABLE)

    def _name(self, index: int) -> str:
        uuid = self._uuids.get(index)
        return f"GPU {index} ({uuid})" if uuid else f"GPU {index}"

    def _why(self, index: int, what: str, exc: BaseException) -> str:
        if isinstance(exc, self._nvml.NVMLError_NotSupported):
            return f"{self._name(index)}: NVML does not support {what} on this device"
        return f"{self._name(index)}: NVML error reading {what}: {exc}"
