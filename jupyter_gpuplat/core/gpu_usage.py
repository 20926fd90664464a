"""What a run did with its GPUs, from samples of each assigned device (issue 27's core; pure).

A source (NVML on the local executor, the DCGM exporter on Kubernetes) gives samples: when,
which device, its utilisation (percent of time a kernel ran) and the memory used. The summary
is computed here once and every client renders it: mean and median utilisation, the memory
peak, and the busy fraction — the share of sampled time a device's utilisation was at or over
the busy threshold. Each sample stands for the time until that device's next sample, at most
`max_gap` (a sampler that stalled says nothing about the time it missed).

Where nothing can be seen (no NVML, no exporter, a MIG or time-sliced device without figures)
the summary says "not measured" and why; nothing is estimated.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# The platform's own series of a run (GPU samples); a run's own metrics under it are not taken (it could spoof them).
SYSTEM_PREFIX = "system/"


def util_name(device: int) -> str:
    return f"system/gpu{device}/util"


def memory_name(device: int) -> str:
    return f"system/gpu{device}/memory_bytes"


def from_series(series: dict[str, tuple[Sequence[float], Sequence[float]]]) -> list[Sample]:
    """Samples back from a run's stored `system/gpu<N>/…` series (steps: the sample times, whole seconds)."""
    out = []
    for name, (steps, values) in series.items():
        parts = name.split("/")
        if len(parts) != 3 or parts[0] != "system" or not parts[1].startswith("gpu") or parts[2] != "util":
            continue
        try:
            device = int(parts[1][3:])
        except ValueError:
            continue
        memory = dict(zip(*series.get(memory_name(device), ((), ())), strict=True))
        out += [Sample(float(t), device, float(v), int(memory.get(t, 0))) for t, v in zip(steps, values, strict=True)]
    return out


# Utilisation at or over this many percent counts as busy (a device idling between a loader's batches reads a few %).
BUSY_PERCENT = 5.0


@dataclass(frozen=True, slots=True)
class Sample:
    """One reading of one device."""

    at: float
    device: int
    util_percent: float
    memory_bytes: int


@dataclass(frozen=True, slots=True)
class NotMeasured:
    """No samples, and why ("no NVML on this machine", "MIG device: no per-device utilisation")."""

    reason: str


def summary(
    samples: Iterable[Sample],
    *,
    interval_seconds: float,
    busy_percent: float = BUSY_PERCENT,
    not_measured: NotMeasured | None = None,
) -> dict[str, object]:
    """The run record's `gpu_usage`: {measured, reason, devices, samples, mean_util, p50_util,
    memory_peak_bytes, busy_fraction, seconds_sampled, seconds_busy, busy_percent, interval_seconds}, worded
    by `with_text` (text, busy_text, memory_peak_text) for every client to show as it is.

    `interval_seconds`: the sampling interval (a gap over twice it counts as twice it).
    """
    by_device: dict[int, list[Sample]] = {}
    for s in samples:
        by_device.setdefault(s.device, []).append(s)
    if not by_device:
        reason = not_measured.reason if not_measured is not None else "no GPU samples were taken"
        return with_text({"measured": False, "reason": reason, "busy_percent": busy_percent})
    weighted = sampled = busy = 0.0
    utils: list[float] = []
    peak = 0
    for s, span in _spans(by_device, interval_seconds):
        sampled += span
        weighted += s.util_percent * span
        busy += span if s.util_percent >= busy_percent else 0.0
        utils.append(s.util_percent)
        peak = max(peak, s.memory_bytes)
    return with_text(
        {
            "measured": True,
            "reason": None,
            "devices": sorted(by_device),
            "samples": len(utils),
            "mean_util": round(weighted / sampled, 3) if sampled else None,
            "p50_util": _median(utils),
            "memory_peak_bytes": peak,
            "busy_fraction": round(busy / sampled, 6) if sampled else None,
            "seconds_sampled": round(sampled, 3),
            "seconds_busy": round(busy, 3),
            "busy_percent": busy_percent,
            "interval_seconds": interval_seconds,
        }
    )


def with_text(usage: dict[str, object]) -> dict[str, object]:
    """`usage` with its words: `text` (one line: "GPU busy 73% of 2.1 h · mean util 64% · memory peak
    31.2 GiB", or "GPU use not measured: <reason>"), `busy_text` ("73%") and `memory_peak_text`
    ("31.2 GiB"), both None where not measured. Clients show these; none recomputes them."""
    if not usage.get("measured"):
        return {
            **usage,
            "text": f"GPU use not measured: {usage.get('reason')}",
            "busy_text": None,
            "memory_peak_text": None,
        }
    devices, fraction, sampled = usage["devices"], usage["busy_fraction"], usage["seconds_sampled"]
    assert isinstance(devices, list) and isinstance(sampled, float | int)
    busy = percent_text(fraction) if isinstance(fraction, float | int) else "—"
    peak = bytes_text(usage["memory_peak_bytes"])  # type: ignore[arg-type]
    who = "GPU" if len(devices) == 1 else f"{len(devices)} GPUs"
    of = duration_text(sampled) + ("" if len(devices) == 1 else " GPU time")  # device-time, summed
    parts = [f"{who} busy {busy} of {of}"]
    mean = usage.get("mean_util")
    if isinstance(mean, float | int):
        parts.append(f"mean util {mean:.0f}%")
    parts.append(f"memory peak {peak}")
    return {**usage, "text": " · ".join(parts), "busy_text": busy, "memory_peak_text": peak}


def compare_rows(usages: Mapping[str, Mapping[str, object] | None], run_ids: Sequence[str]) -> list[dict[str, object]]:
    """Compare's GPU rows, worded here for every client: {label, values: run id → text}; none where no
    run held a GPU. A run that held none says "no GPU"; one not measured says so (its reason is in its
    `gpu_usage`)."""
    if not any(usages.get(rid) for rid in run_ids):
        return []

    def cell(rid: str, key: str) -> str:
        u = usages.get(rid)
        return "no GPU" if not u else str(u.get(key)) if u.get("measured") else "not measured"

    return [
        {"key": key, "label": label, "values": {rid: cell(rid, key) for rid in run_ids}}
        for key, label in (("busy_text", "GPU busy"), ("memory_peak_text", "GPU memory peak"))
    ]


def percent_text(fraction: float) -> str:
    """0.734 → "73%"; never rounded to 0% or 100% when it is neither ("<1%", ">99%")."""
    p = fraction * 100
    if 0 < p < 1:
        return "<1%"
    if 99 < p < 100:
        return ">99%"
    return f"{p:.0f}%"


def bytes_text(n: int) -> str:
    """Memory as people read it: "31.2 GiB", "512 MiB", "0 B"."""
    if n >= 1 << 30:
        return f"{n / (1 << 30):.1f} GiB"
    if n >= 1 << 20:
        return f"{n / (1 << 20):.0f} MiB"
    return f"{n} B" if n < 1024 else f"{n / 1024:.0f} KiB"


def duration_text(seconds: float) -> str:
    """Sampled time: "40 s", "12 min", "2.1 h"."""
    if seconds < 60:
        return f"{seconds:.0f} s"
    if seconds < 3600:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _spans(by_device: dict[int, list[Sample]], interval_seconds: float) -> Iterator[tuple[Sample, float]]:
    """Each sample with the time it stands for: until the device's next sample, at most twice the interval."""
    max_gap = 2 * interval_seconds
    for found in by_device.values():
        found.sort(key=lambda s: s.at)
        for i, s in enumerate(found):
            yield s, (min(found[i + 1].at - s.at, max_gap) if i + 1 < len(found) else interval_seconds)


def seconds_in(
    samples: Iterable[Sample],
    *,
    interval_seconds: float,
    since: float,
    until: float,
    busy_percent: float = BUSY_PERCENT,
) -> tuple[float, float]:
    """(device-seconds sampled, device-seconds busy) of the samples taken in [since, until), each with its whole
    span as `summary` gives it: over a window holding all of a run's samples, its summary's two figures."""
    by_device: dict[int, list[Sample]] = {}
    for s in samples:
        by_device.setdefault(s.device, []).append(s)
    sampled = busy = 0.0
    for s, span in _spans(by_device, interval_seconds):
        if since <= s.at < until:
            sampled += span
            busy += span if s.util_percent >= busy_percent else 0.0
    return sampled, busy


# A run or session that held GPUs is named to its owner when it ended busy less than this share of its
# sampled GPU time, over at least this much of it (a few idle minutes at start-up are no news).
IDLE_NOTICE_BUSY_FRACTION = 0.5
IDLE_NOTICE_MIN_SECONDS = 600.0


def idle_notice(run_id: str, usage: dict[str, Any]) -> str | None:
    """ "r-… held GPU 0 for 2.1 h; busy 12% of it (util ≥ 5%)" where the run ended mostly idle; None otherwise."""
    if not usage.get("measured"):
        return None
    sampled, fraction, devices = usage["seconds_sampled"], usage["busy_fraction"], usage["devices"]
    if fraction is None or sampled < IDLE_NOTICE_MIN_SECONDS or fraction >= IDLE_NOTICE_BUSY_FRACTION:
        return None
    held = sampled / max(1, len(devices))  # device-seconds over the devices: how long it held them
    which = f"GPU {devices[0]}" if len(devices) == 1 else "GPUs " + ", ".join(str(d) for d in devices)
    total = "" if len(devices) == 1 else f" ({sampled / 3600:.1f} GPU-hours)"
    return (
        f"{run_id} held {which} for {duration_text(held)}{total}; busy {round(100 * fraction)}% of it "
        f"(util ≥ {usage['busy_percent']:g}%)"
    )


def gpu_hours(usage: dict[str, object]) -> tuple[float, float] | None:
    """(GPU-hours sampled, GPU-hours busy) of a summary; None where not measured (never guessed)."""
    if not usage.get("measured"):
        return None
    sampled, busy = usage["seconds_sampled"], usage["seconds_busy"]
    assert isinstance(sampled, float | int) and isinstance(busy, float | int)
    return sampled / 3600, busy / 3600


def _median(values: Sequence[float]) -> float:
    s = sorted(values)
    mid = len(s) // 2
    return s[mid] if len(s) % 2 else (s[mid - 1] + s[mid]) / 2
