"""A scripted fake of NVML, at the hardware boundary only: `FakeNvml` answers the calls of `pynvml`.

NVML is hardware (libnvidia-ml.so.1 talks to the driver): tests of the GPU sampler
(jupyter_gpuplat/executors/local/nvml.py) and its benchmark replace the module there and
nowhere else. The fake answers the same functions with the same shapes as pynvml
(nvidia-ml-py 13.x, read in its source): handles are opaque, `nvmlDeviceGetUtilizationRates`
returns pynvml's own `c_nvmlUtilization_t`, `nvmlDeviceGetMemoryInfo` its `c_nvmlMemory_t`,
`nvmlDeviceGetMigMode` a `[current, pending]` list, `nvmlDeviceGetComputeRunningProcesses`
its `nvmlFriendlyObject`s (pid, usedGpuMemory, gpuInstanceId, computeInstanceId). Errors are
pynvml's own classes raised as pynvml raises them (`NVMLError(code)` becomes
`NVMLError_NotSupported` and so on), and its constants are pynvml's: those are pure Python.
A call before `nvmlInit` or after the last `nvmlShutdown` raises Uninitialized, as the
real library does. A test scripts each `FakeGpu`'s figures and changes them between samples.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pynvml

MIB = 1 << 20


@dataclass
class FakeGpu:
    """One scripted device. `mig`: None = NVML has no MIG mode for it (NotSupported)."""

    uuid: str
    name: str = "NVIDIA H100 80GB HBM3"
    memory_total_bytes: int = 81_559 * MIB
    util_percent: int = 0
    memory_used_bytes: int = 0
    mig: bool | None = False
    util_supported: bool = True
    processes_supported: bool = True
    processes: list[tuple[int, int | None]] = field(default_factory=list)  # (pid, usedGpuMemory or None)


@dataclass(frozen=True)
class FakeHandle:
    """Opaque, as pynvml's `c_nvmlDevice_t` is to its callers."""

    position: int


class FakeNvml:
    """Answers pynvml's calls from `gpus`, in NVML's order (which may differ from the platform's)."""

    def __init__(self, gpus: list[FakeGpu], init_error: int | None = None) -> None:
        self.gpus = gpus
        self.init_error = init_error  # e.g. NVML_ERROR_LIBRARY_NOT_FOUND: nvmlInit raises it
        self.initialised = 0
        self.calls: dict[str, int] = {}

    def __getattr__(self, name: str) -> Any:
        # pynvml's constants and error classes, and nothing else: an unscripted call fails loudly
        if name.startswith(("NVML_", "NVMLError", "NVMLLibraryMismatchError")):
            return getattr(pynvml, name)
        raise AttributeError(f"FakeNvml does not script {name}")

    def _call(self, name: str) -> None:
        self.calls[name] = self.calls.get(name, 0) + 1
        if not self.initialised:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_UNINITIALIZED)

    def _gpu(self, handle: FakeHandle) -> FakeGpu:
        return self.gpus[handle.position]

    # -- init and shutdown -----------------------------------------------------------------

    def nvmlInit(self) -> None:
        self.calls["nvmlInit"] = self.calls.get("nvmlInit", 0) + 1
        if self.init_error is not None:
            raise pynvml.NVMLError(self.init_error)
        self.initialised += 1

    def nvmlShutdown(self) -> None:
        self._call("nvmlShutdown")
        self.initialised -= 1

    # -- devices ---------------------------------------------------------------------------

    def nvmlDeviceGetCount(self) -> int:
        self._call("nvmlDeviceGetCount")
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> FakeHandle:
        self._call("nvmlDeviceGetHandleByIndex")
        if not 0 <= index < len(self.gpus):
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return FakeHandle(index)

    def nvmlDeviceGetHandleByUUID(self, uuid: str) -> FakeHandle:
        self._call("nvmlDeviceGetHandleByUUID")
        for position, gpu in enumerate(self.gpus):
            if gpu.uuid == uuid:
                return FakeHandle(position)
        raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_FOUND)

    def nvmlDeviceGetUUID(self, handle: FakeHandle) -> str:
        self._call("nvmlDeviceGetUUID")
        return self._gpu(handle).uuid

    def nvmlDeviceGetName(self, handle: FakeHandle) -> str:
        self._call("nvmlDeviceGetName")
        return self._gpu(handle).name

    # -- figures ---------------------------------------------------------------------------

    def nvmlDeviceGetUtilizationRates(self, handle: FakeHandle) -> Any:
        self._call("nvmlDeviceGetUtilizationRates")
        gpu = self._gpu(handle)
        if gpu.mig or not gpu.util_supported:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return pynvml.c_nvmlUtilization_t(gpu=gpu.util_percent, memory=0)

    def nvmlDeviceGetMemoryInfo(self, handle: FakeHandle, version: int | None = None) -> Any:
        self._call("nvmlDeviceGetMemoryInfo")
        assert version is None, "the fake answers the v1 call only"
        gpu = self._gpu(handle)
        free = gpu.memory_total_bytes - gpu.memory_used_bytes
        return pynvml.c_nvmlMemory_t(total=gpu.memory_total_bytes, free=free, used=gpu.memory_used_bytes)

    def nvmlDeviceGetMigMode(self, handle: FakeHandle) -> list[int]:
        self._call("nvmlDeviceGetMigMode")
        gpu = self._gpu(handle)
        if gpu.mig is None:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        mode = pynvml.NVML_DEVICE_MIG_ENABLE if gpu.mig else pynvml.NVML_DEVICE_MIG_DISABLE
        return [mode, mode]

    def nvmlDeviceGetComputeRunningProcesses(self, handle: FakeHandle) -> list[Any]:
        self._call("nvmlDeviceGetComputeRunningProcesses")
        gpu = self._gpu(handle)
        if not gpu.processes_supported:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return [
            pynvml.nvmlFriendlyObject(
                {"pid": pid, "usedGpuMemory": used, "gpuInstanceId": 0xFFFFFFFF, "computeInstanceId": 0xFFFFFFFF}
            )
            for pid, used in gpu.processes
        ]
