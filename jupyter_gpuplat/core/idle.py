"""When a GPU session is idle, and how that is said (issue 27 item 3; pure: time comes in as `now`).

A session's `termination.idle_by` names the signal that judges it:
1. `kernel` (the default): idle since the kernel's last activity; a busy kernel is never idle.
2. `gpu`: idle since any of the session's devices last read at or over `gpu_idle_threshold` %
   (GPU samples, engine/gpu_sampling.py). A cell that runs while its GPUs idle is warned as the
   deadline nears but ended only when the cell ends, unless `cull_busy_kernel`.
3. `both`: idle only while both are: the later of the two clocks; a busy kernel is never idle.
Where GPU use is not seen (sampling off, the executor's NotMeasured, no sample of the session yet)
`gpu` and `both` are judged by kernel activity, and the words say so. Every sentence a client shows
about a session's idleness is made here once.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, cast

from .eta import about
from .gpu_usage import BUSY_PERCENT

IdleBy = Literal["kernel", "gpu", "both"]
IDLE_BY: tuple[IdleBy, ...] = ("kernel", "gpu", "both")


@dataclass(frozen=True, slots=True)
class IdleRule:
    """A session's resolved `termination` as far as idleness goes."""

    idle_seconds: int | None  # None: never ended for idleness
    idle_by: IdleBy = "kernel"
    gpu_threshold: float = BUSY_PERCENT
    cull_busy_kernel: bool = False

    @classmethod
    def of(cls, termination: Mapping[str, Any] | None) -> IdleRule:
        t = termination or {}
        idle = t.get("idle_seconds")
        by = t.get("idle_by") or "kernel"
        return cls(
            int(idle) if idle else None,
            cast(IdleBy, by if by in IDLE_BY else "kernel"),
            float(t.get("gpu_idle_threshold") or BUSY_PERCENT),
            bool(t.get("cull_busy_kernel")),
        )


@dataclass(frozen=True, slots=True)
class Signals:
    """What is known of a session at one moment."""

    kernel_busy: bool
    kernel_since: float  # the kernel's last activity (or the start, or "Keep session")
    gpu_since: float  # the last sample at or over the threshold (or the start, "Keep session", sight regained)
    gpu_in_use: bool  # the latest sample of its devices read at or over the threshold
    gpu_blind: str | None  # why GPU use is not seen; None: it is


@dataclass(frozen=True, slots=True)
class Judgement:
    by: IdleBy  # the signal that judges now (`gpu` and `both` fall back to `kernel` where GPUs are not seen)
    since: float | None  # when the idle clock started; None: not idle
    deadline: float | None  # when the session ends unless something changes; None: never
    waits_for_cell: bool  # judged by GPU while a cell runs: ended only when the cell ends


def judge(rule: IdleRule, sig: Signals) -> Judgement:
    by: IdleBy = rule.idle_by if sig.gpu_blind is None else "kernel"
    if by == "gpu":
        since: float | None = sig.gpu_since
    elif sig.kernel_busy:
        since = None
    elif by == "kernel" and (rule.idle_by == "kernel" or sig.gpu_blind is None):
        since = sig.kernel_since
    else:
        # `both`, or a GPU judge that lost sight: GPU use seen last counts too (a blink never ends a session).
        since = max(sig.kernel_since, sig.gpu_since)
    deadline = since + rule.idle_seconds if since is not None and rule.idle_seconds is not None else None
    waits = by == "gpu" and sig.kernel_busy and not rule.cull_busy_kernel
    return Judgement(by, since, deadline, waits)


def span(seconds: float) -> str:
    """A duration as the project says it: "3 s", "52 min", "2.5 h"."""
    return "0 s" if seconds < 1 else about(seconds).lstrip("~")


def not_measured_text(reason: str) -> str:
    return f"GPU use is not measured here ({reason}); idleness judged by kernel activity"


def facts(rule: IdleRule, sig: Signals, j: Judgement, gpus: str, now: float) -> str:
    """What judged the session idle: "GPU 0 idle for 52 min (util < 5%)", "no kernel activity for 52 min"."""
    gpu = f"{gpus} idle for {span(now - sig.gpu_since)} (util < {rule.gpu_threshold:g}%)"
    kernel = f"no kernel activity for {span(now - sig.kernel_since)}"
    if j.by == "kernel" and j.since is not None and j.since > sig.kernel_since:
        kernel = f"no kernel activity nor GPU use seen for {span(now - j.since)}"
    return {"gpu": gpu, "kernel": kernel, "both": f"{gpu} and {kernel}"}[j.by]


def _with_blind(rule: IdleRule, sig: Signals, text: str) -> str:
    if rule.idle_by != "kernel" and sig.gpu_blind is not None:
        return f"{text} — {not_measured_text(sig.gpu_blind)}"
    return text


def warning_text(rule: IdleRule, sig: Signals, gpus: str, now: float) -> str:
    """The `IdleWarning` message: "GPU 0 idle for 54 min (util < 5%); the session ends in 6 min unless kept"."""
    j = judge(rule, sig)
    left = max(0.0, (j.deadline or now) - now)
    text = f"{facts(rule, sig, j, gpus, now)}; the session ends in {span(left)} unless kept"
    if j.waits_for_cell:
        text += " (a running cell is not interrupted: then when it ends)"
    return _with_blind(rule, sig, text)


def cull_text(rule: IdleRule, sig: Signals, gpus: str, now: float) -> str:
    """The `IdleTimeout` message: "GPU 0 idle for 60 min (util < 5%); GPU 0 returned"."""
    return _with_blind(rule, sig, f"{facts(rule, sig, judge(rule, sig), gpus, now)}; {gpus} returned")


def keep_text(rule: IdleRule, sig: Signals) -> str:
    """What "Keep session" restarted: "ends after 60 min without GPU use (util < 5%)"."""
    j = judge(rule, sig)
    if rule.idle_seconds is None:
        return ""
    without = {
        "kernel": "kernel activity",
        "gpu": f"GPU use (util < {rule.gpu_threshold:g}%)",
        "both": f"kernel activity and GPU use (util < {rule.gpu_threshold:g}%)",
    }[j.by]
    return f"ends after {span(rule.idle_seconds)} without {without}"


def status_text(rule: IdleRule, sig: Signals, gpus: str, now: float) -> str | None:
    """The session's idle clock in words, as every client shows it (None: never ended for idleness)."""
    if rule.idle_seconds is None:
        return None
    j = judge(rule, sig)
    in_use = f"{gpus} in use (util ≥ {rule.gpu_threshold:g}%)"
    if j.by == "kernel":
        text = "the kernel is busy" if sig.kernel_busy else facts(rule, sig, j, gpus, now)
        return not_measured_text(sig.gpu_blind) + ": " + text if rule.idle_by != "kernel" and sig.gpu_blind else text
    if j.by == "both" and sig.kernel_busy:
        return "the kernel is busy"
    if sig.gpu_in_use:
        return in_use
    text = facts(rule, sig, j, gpus, now)
    if j.waits_for_cell and j.deadline is not None and now >= j.deadline:
        text += "; the session ends when the running cell ends"
    return text
