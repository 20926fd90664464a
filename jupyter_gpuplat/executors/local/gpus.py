"""Find this machine's GPUs with nvidia-smi, and each one's device node (/dev/nvidiaN)."""

from __future__ import annotations

import dataclasses
import glob
import logging
import os
import subprocess
from collections.abc import Mapping
from typing import Any

from ...core.gpu_usage import NotMeasured
from ..base import Device, GpuReading
from .nvml import GpuSampler

log = logging.getLogger(__name__)

QUERY = ["--query-gpu=index,name,memory.total,uuid", "--format=csv,noheader,nounits"]
BUS_QUERY = ["--query-gpu=index,pci.bus_id", "--format=csv,noheader"]
DRIVER_INFO = "/proc/driver/nvidia/gpus/*/information"  # "Device Minor: N" and "Bus Location: ..."


def _optional(value: str) -> str | None:
    value = value.strip()
    # nvidia-smi writes "[N/A]" or "[Not Supported]" for fields it cannot read
    return None if not value or value.startswith("[") else value


def parse_nvidia_smi(text: str) -> list[Device]:
    """Parse `nvidia-smi --query-gpu=index,name,memory.total,uuid --format=csv,noheader,nounits`.

    Lines that do not start with a GPU index are skipped (nvidia-smi prints its
    errors on stdout too). A name may contain commas, so fields are taken from the ends.
    """
    devices = []
    for line in text.splitlines():
        fields = line.split(",")
        if len(fields) < 4:
            continue
        index, *name_parts, memory, uuid = fields
        try:
            number = int(index.strip())
        except ValueError:
            continue
        memory_value = _optional(memory)
        try:
            memory_mb = int(float(memory_value)) if memory_value is not None else None
        except ValueError:
            memory_mb = None
        name = ",".join(name_parts).strip() or f"GPU {number}"
        devices.append(Device(index=number, name=name, memory_mb=memory_mb, uuid=_optional(uuid), declared=False))
    return devices


def _bus(text: str) -> str:
    # nvidia-smi says 00000000:17:00.0, the driver 0000:17:00.0: compare the last 12 characters, lower case
    return text.strip().lower()[-12:]


def driver_minors(info_glob: str = DRIVER_INFO) -> dict[str, int]:
    """PCI bus → minor number of its /dev/nvidiaN, from the driver's own files."""
    found: dict[str, int] = {}
    for path in glob.glob(info_glob):
        fields: dict[str, str] = {}
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                for line in f:
                    key, _, value = line.partition(":")
                    fields[key.strip()] = value.strip()
            found[_bus(fields.get("Bus Location") or os.path.basename(os.path.dirname(path)))] = int(
                fields["Device Minor"]
            )
        except (OSError, KeyError, ValueError):
            continue
    return found


def with_minors(devices: list[Device], nvidia_smi: str, timeout_seconds: float = 10.0) -> list[Device]:
    """The devices with the minor of their /dev/nvidiaN where the driver says it; else the index (usual)."""
    minors = driver_minors()
    buses: dict[int, str] = {}
    if minors:
        out = _run(nvidia_smi, BUS_QUERY, timeout_seconds)
        for line in (out or "").splitlines():
            index, _, bus = line.partition(",")
            if index.strip().isdigit():
                buses[int(index)] = _bus(bus)
    return [dataclasses.replace(d, minor=minors.get(buses.get(d.index, ""), d.index)) for d in devices]


def _run(nvidia_smi: str, query: list[str], timeout_seconds: float) -> str | None:
    try:
        done = subprocess.run(
            [nvidia_smi, *query],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout_seconds,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        log.info("gpuplat: no GPUs from %s: %s", nvidia_smi, exc)
        return None
    if done.returncode != 0:
        log.info("gpuplat: %s exited with code %d: %s", nvidia_smi, done.returncode, done.stdout.strip()[:200])
        return None
    return done.stdout


def detect_gpus(nvidia_smi: str = "nvidia-smi", timeout_seconds: float = 10.0) -> list[Device]:
    """The GPUs nvidia-smi reports, or [] when it is missing, fails or hangs."""
    out = _run(nvidia_smi, QUERY, timeout_seconds)
    return with_minors(parse_nvidia_smi(out), nvidia_smi, timeout_seconds) if out else []


class MachineGpus:
    """This machine's GPUs for the local executor: declared (`gpus`) or found by nvidia-smi once, and read
    through NVML (opened on the first reading). Declared GPUs are not real ones to read.
    `nvml`: the NVML module (None: `pynvml`; tests pass a scripted fake, the hardware boundary)."""

    def __init__(self, declared: int | None, nvidia_smi: str, nvml: Any = None) -> None:
        self.declared = declared
        self.nvidia_smi = nvidia_smi
        self._nvml = nvml
        self._found: list[Device] | None = None
        self._sampler: GpuSampler | None = None

    def devices(self) -> list[Device]:
        if self.declared is not None:
            return [Device(i, f"declared GPU {i}", None, None, declared=True, minor=i) for i in range(self.declared)]
        if self._found is None:
            self._found = detect_gpus(self.nvidia_smi)
        return list(self._found)

    def samples(self, held: Mapping[str, tuple[int, ...]]) -> GpuReading:
        """Each run's samples of the devices it holds (indices of this machine), or why that run has none: a
        device NVML cannot read (MIG) leaves only its own run unmeasured."""
        if self.declared is not None:
            return NotMeasured("the GPUs are declared (LocalExecutor.gpus), not found: none is sampled")
        self._sampler = self._sampler or GpuSampler(self.devices(), nvml=self._nvml)
        if self._sampler.not_measured is not None:  # no NVML: one reason for every run
            return self._sampler.not_measured
        return {rid: self._sampler.sample(devices) for rid, devices in held.items()}

    def close(self) -> None:
        if self._sampler is not None:
            self._sampler.close()
