"""Clocks that tick between reads: a run's waits and run time, live, from its last record.

A record's `clocks` were computed by the service when it answered, with the one `ticking`.
Between two reads that clock goes on: `LiveClocks.at(now)` adds the seconds
since the read (a local monotonic clock, so the service's and the kernel's clocks
need not agree) to that phase's clock only. A final run's clocks never move.

No ipywidgets here: the magics' status line uses it as well as the widgets.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ...core.clocks import QUEUE_WAIT, RUN, START_WAIT

__all__ = ["QUEUE_WAIT", "RUN", "START_WAIT", "LiveClocks", "duration", "ticking_clock"]


def ticking_clock(run: Mapping[str, Any]) -> str | None:
    """The clock that goes on while the run is as this record says: the service's `clocks.ticking`
    (core/clocks.py decides it, a preempted run waiting again ticks start wait); None once final."""
    ticking = (run.get("clocks") or {}).get("ticking")
    return str(ticking) if ticking else None


@dataclass
class LiveClocks:
    """The clocks of one record, read at `read_at` (time.monotonic())."""

    clocks: dict[str, float | None]
    ticking: str | None
    read_at: float = field(default_factory=time.monotonic)

    @classmethod
    def of(cls, run: Mapping[str, Any], read_at: float | None = None) -> LiveClocks:
        clocks = {k: v for k, v in (run.get("clocks") or {}).items() if k != "ticking"}
        key = ticking_clock(run)
        if key is not None and clocks.get(key) is None:
            clocks[key] = 0.0  # the phase has begun by the status: its clock starts now
        return cls(clocks, key, time.monotonic() if read_at is None else read_at)

    @property
    def final(self) -> bool:
        return self.ticking is None

    def at(self, now: float | None = None) -> dict[str, float | None]:
        """The clocks at `now` (time.monotonic()): the ticking one advanced by the time since the read."""
        out = dict(self.clocks)
        if self.ticking is not None:
            elapsed = max(0.0, (time.monotonic() if now is None else now) - self.read_at)
            out[self.ticking] = round(float(out.get(self.ticking) or 0.0) + elapsed, 3)
        return out


def duration(seconds: float | None) -> str:
    """For people, as the sidebar writes it: `0.4s`, `42s`, `4m 05s`, `2h 03m`, `3d 4h`; `—` when unknown."""
    if seconds is None:
        return "—"
    s = max(0.0, float(seconds))
    if s < 1:
        return f"{int(s * 10) / 10:.1f}s"
    if s < 60:
        return f"{int(s)}s"
    if s < 3600:
        return f"{int(s // 60)}m {int(s % 60):02d}s"
    if s < 86400:
        return f"{int(s // 3600)}h {int(s % 3600 // 60):02d}m"
    return f"{int(s // 86400)}d {int(s % 86400 // 3600)}h"
