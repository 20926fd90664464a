"""Resource quantities and vectors.

Quantities follow Kubernetes notation: cpu `500m` or `2`, memory `16Gi`, `512M`.
Internally cpu is millicores and memory bytes, both ints, so sums are exact.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

_BIN = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50}
_DEC = {"k": 10**3, "K": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15}
_QTY = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]{0,2})\s*$")

# Upper bounds that catch typos ("gpu: 8000") without limiting real clusters.
MAX_GPU = 1024
MAX_CPU_MILLI = 100_000 * 1000
MAX_MEMORY_BYTES = 2**60
# "100000", "2500m", "1.5Gi" are short; a longer quantity is a mistake, and parsing it exactly costs more.
MAX_QUANTITY_CHARS = 32
CPU_RANGE = f"must be between 0 and {MAX_CPU_MILLI // 1000} cores"
MEMORY_RANGE = "must be between 0 and 1Ei"


def _number(value: str, what: str, hint: str) -> tuple[Fraction, str] | None:
    """(exact number, unit) of a quantity string; None when it is not one."""
    if len(value) > MAX_QUANTITY_CHARS:
        raise ValueError(f"invalid {what} quantity: {len(value)} characters, at most {MAX_QUANTITY_CHARS}; {hint}")
    m = _QTY.match(value)
    return (Fraction(m.group(1)), m.group(2)) if m else None


def _bounded(amount: float | Fraction, scale: int, top: int, what: str, in_range: str) -> int:
    """`amount * scale` as an int in 0..top; the range is checked before the product, so nothing overflows."""
    if isinstance(amount, float) and not math.isfinite(amount):
        of = "cores" if what == "cpu" else "bytes"
        raise ValueError(f"invalid {what} quantity {amount!r}: must be a finite number of {of}")
    if amount < 0:
        raise ValueError("must be >= 0")
    if amount > Fraction(top, scale):
        raise ValueError(in_range)
    exact = Fraction(amount) * scale
    # millicores round to the nearest, bytes truncate (as Kubernetes does)
    return round(exact) if what == "cpu" else int(exact)


def parse_cpu(value: Any) -> int:
    """cpu -> millicores: 2 -> 2000, "500m" -> 500, "1.5" -> 1500; at most MAX_CPU_MILLI."""
    hint = "use cores (2, 0.5) or millicores ('500m')"
    if isinstance(value, bool):
        raise ValueError("must be a number of cores or a quantity like '500m'")
    if isinstance(value, (int, float)):
        return _bounded(value, 1000, MAX_CPU_MILLI, "cpu", CPU_RANGE)
    if isinstance(value, str):
        parsed = _number(value, "cpu", hint)
        if parsed is not None and parsed[1] in ("m", ""):
            num, unit = parsed
            return _bounded(num, 1 if unit == "m" else 1000, MAX_CPU_MILLI, "cpu", CPU_RANGE)
    raise ValueError(f"invalid cpu quantity {value!r}: {hint}")


def parse_memory(value: Any) -> int:
    """memory -> bytes: "16Gi", "512Mi", "1G", or a plain number of bytes; at most MAX_MEMORY_BYTES."""
    hint = "use bytes or a suffix Ki, Mi, Gi, Ti (binary) or k, M, G, T"
    if isinstance(value, bool):
        raise ValueError("must be a quantity like '16Gi'")
    if isinstance(value, (int, float)):
        return _bounded(value, 1, MAX_MEMORY_BYTES, "memory", MEMORY_RANGE)
    if isinstance(value, str):
        parsed = _number(value, "memory", hint)
        if parsed is not None:
            num, unit = parsed
            scale = 1 if unit == "" else _BIN.get(unit) or _DEC.get(unit)
            if scale:
                return _bounded(num, scale, MAX_MEMORY_BYTES, "memory", MEMORY_RANGE)
    raise ValueError(f"invalid memory quantity {value!r}: {hint}")


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
