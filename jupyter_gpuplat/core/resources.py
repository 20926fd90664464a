"""Resource quantities and vectors.

Quantities follow Kubernetes notation: cpu `500m` or `2`, memory `16Gi`, `512M`.
Internally cpu is millicores and memory bytes, both ints, so sums are exact.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

_BIN = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50}
_DEC = {"k": 10**3, "K": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15}
_QTY = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]{0,2})\s*$")

# Upper bounds that catch typos ("gpu: 8000") without limiting real clusters.
MAX_GPU = 1024
MAX_CPU_MILLI = 100_000 * 1000
MAX_MEMORY_BYTES = 2**60


def parse_cpu(value: Any) -> int:
    """cpu -> millicores: 2 -> 2000, "500m" -> 500, "1.5" -> 1500."""
    if isinstance(value, bool):
        raise ValueError("must be a number of cores or a quantity like '500m'")
    if isinstance(value, (int, float)):
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"invalid cpu quantity {value!r}: must be a finite number of cores")
        if value < 0:
            raise ValueError("must be >= 0")
        return round(value * 1000)
    if isinstance(value, str):
        m = _QTY.match(value)
        if m:
            num, unit = float(m.group(1)), m.group(2)
            if unit == "m":
                return round(num)
            if unit == "":
                return round(num * 1000)
    raise ValueError(f"invalid cpu quantity {value!r}: use cores (2, 0.5) or millicores ('500m')")


def parse_memory(value: Any) -> int:
    """memory -> bytes: "16Gi", "512Mi", "1G", or a plain number of bytes."""
    if isinstance(value, bool):
        raise ValueError("must be a quantity like '16Gi'")
    if isinstance(value, (int, float)):
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"invalid memory quantity {value!r}: must be a finite number of bytes")
        if value < 0:
            raise ValueError("must be >= 0")
        return int(value)
    if isinstance(value, str):
        m = _QTY.match(value)
        if m:
            num, unit = float(m.group(1)), m.group(2)
            if unit == "":
                return int(num)
            if unit in _BIN:
                return int(num * _BIN[unit])
            if unit in _DEC:
                return int(num * _DEC[unit])
    raise ValueError(f"invalid memory quantity {value!r}: use bytes or a suffix Ki, Mi, Gi, Ti (binary) or k, M, G, T")


def format_memory(n: int) -> str:
    for unit in ("Ti", "Gi", "Mi", "Ki"):
        if n >= _BIN[unit] and n % _BIN[unit] == 0:
            return f"{n // _BIN[unit]}{unit}"
    return str(n)


def format_cpu(milli: int) -> str:
    return str(milli // 1000) if milli % 1000 == 0 else f"{milli}m"


@dataclass(frozen=True, slots=True)
class Resources:
    """A resource vector: whole GPUs, cpu millicores, memory bytes."""

    gpu: int = 0
    cpu_milli: int = 0
    memory_bytes: int = 0

    @classmethod
    def parse(cls, raw: dict[str, Any] | None) -> Resources:
        raw = raw or {}
        gpu = raw.get("gpu", 0) or 0
        if isinstance(gpu, bool) or not isinstance(gpu, int):
            raise ValueError("gpu must be a whole number")
        return cls(
            gpu=gpu, cpu_milli=parse_cpu(raw.get("cpu", 0) or 0), memory_bytes=parse_memory(raw.get("memory", 0) or 0)
        )

    def __add__(self, o: Resources) -> Resources:
        return Resources(self.gpu + o.gpu, self.cpu_milli + o.cpu_milli, self.memory_bytes + o.memory_bytes)

    def __sub__(self, o: Resources) -> Resources:
        return Resources(self.gpu - o.gpu, self.cpu_milli - o.cpu_milli, self.memory_bytes - o.memory_bytes)

    def to_dict(self) -> dict[str, Any]:
        return {"gpu": self.gpu, "cpu": format_cpu(self.cpu_milli), "memory": format_memory(self.memory_bytes)}


@dataclass(frozen=True, slots=True)
class Quota:
    """A limit per resource; None means unlimited for that resource."""

    gpu: int | None = None
    cpu_milli: int | None = None
    memory_bytes: int | None = None

    @classmethod
    def parse(cls, raw: dict[str, Any] | None) -> Quota:
        raw = raw or {}
        return cls(
            gpu=raw.get("gpu"),
            cpu_milli=parse_cpu(raw["cpu"]) if raw.get("cpu") is not None else None,
            memory_bytes=parse_memory(raw["memory"]) if raw.get("memory") is not None else None,
        )

    def shortfalls(self, used: Resources, req: Resources) -> list[tuple[str, int, int, int]]:
        """Every resource where used+req exceeds the limit: (name, used, req, limit)."""
        out = []
        for name, lim, u, r in (
            ("gpu", self.gpu, used.gpu, req.gpu),
            ("cpu", self.cpu_milli, used.cpu_milli, req.cpu_milli),
            ("memory", self.memory_bytes, used.memory_bytes, req.memory_bytes),
        ):
            if lim is not None and u + r > lim:
                out.append((name, u, r, lim))
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "gpu": self.gpu,
            "cpu": None if self.cpu_milli is None else format_cpu(self.cpu_milli),
            "memory": None if self.memory_bytes is None else format_memory(self.memory_bytes),
        }


def fmt_amount(name: str, value: int) -> str:
    if name == "cpu":
        return format_cpu(value)
    if name == "memory":
        return format_memory(value)
    return str(value)
