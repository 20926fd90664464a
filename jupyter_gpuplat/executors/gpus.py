"""Find this machine's GPUs with nvidia-smi."""

from __future__ import annotations

import logging
import subprocess

from .base import Device

log = logging.getLogger(__name__)

QUERY = ["--query-gpu=index,name,memory.total,uuid", "--format=csv,noheader,nounits"]


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


def detect_gpus(nvidia_smi: str = "nvidia-smi", timeout_seconds: float = 10.0) -> list[Device]:
    """The GPUs nvidia-smi reports, or [] when it is missing, fails or hangs."""
    try:
        done = subprocess.run(
            [nvidia_smi, *QUERY],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout_seconds,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        log.info("gpuplat: no GPUs from %s: %s", nvidia_smi, exc)
        return []
    if done.returncode != 0:
        log.info("gpuplat: %s exited with code %d: %s", nvidia_smi, done.returncode, done.stdout.strip()[:200])
        return []
    return parse_nvidia_smi(done.stdout)
