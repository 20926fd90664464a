"""GPU-hours held against GPU-hours busy, for insights (issue 27; pure).

Held GPU-hours (`gpu_hours`) count a run's GPUs x its running time; busy and measured GPU-hours
come from the samples of the devices it held (core.gpu_usage): `gpu_hours_measured` is the
device time sampled, `gpu_hours_busy` the part of it at or over the busy threshold, and
`busy_fraction` their ratio. A run nothing measured counts in neither (never as busy, never as
idle): where no run of a view was measured, its busy figures are null, "not measured".
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

# Runs named under each idle holder: the worst few by idle GPU-hours.
WORST_RUNS = 3


def busy_view(measured_seconds: float, busy_seconds: float) -> dict[str, float | None]:
    """The three figures of a view from its sampled and busy device-seconds."""
    if measured_seconds <= 0:
        return {"gpu_hours_measured": 0.0, "gpu_hours_busy": None, "busy_fraction": None}
    return {
        "gpu_hours_measured": round(measured_seconds / 3600, 6),
        "gpu_hours_busy": round(busy_seconds / 3600, 6),
        "busy_fraction": round(busy_seconds / measured_seconds, 6),
    }


@dataclass(frozen=True, slots=True)
class MeasuredRun:
    """One measured run's figures inside the range: GPU-seconds held, device-seconds sampled and busy."""

    id: str
    project: str
    user: str
    queue: str
    held_seconds: float
    measured_seconds: float
    busy_seconds: float

    @property
    def idle_seconds(self) -> float:
        return max(0.0, self.measured_seconds - self.busy_seconds)

    def view(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "user": self.user,
            "project": self.project,
            "queue": self.queue,
            "gpu_hours": round(self.held_seconds / 3600, 6),
            "gpu_hours_idle": round(self.idle_seconds / 3600, 6),
            **busy_view(self.measured_seconds, self.busy_seconds),
        }


def idle_holders(runs: Iterable[MeasuredRun], top: int) -> list[dict[str, Any]]:
    """The (project, user) pairs holding the most idle GPU time (measured, not busy), most first, each with
    its worst runs (those with idle time); pairs with none are left out."""
    by_holder: dict[tuple[str, str], list[MeasuredRun]] = defaultdict(list)
    for r in runs:
        by_holder[(r.project, r.user)].append(r)
    out: list[dict[str, Any]] = []
    for (project, user), mine in by_holder.items():
        idle = sum(r.idle_seconds for r in mine)
        if idle <= 0:
            continue
        worst = sorted((r for r in mine if r.idle_seconds > 0), key=lambda r: (-r.idle_seconds, r.id))[:WORST_RUNS]
        out.append(
            {
                "project": project,
                "user": user,
                "gpu_hours": round(sum(r.held_seconds for r in mine) / 3600, 6),
                "gpu_hours_idle": round(idle / 3600, 6),
                **busy_view(sum(r.measured_seconds for r in mine), sum(r.busy_seconds for r in mine)),
                "measured_runs": len(mine),
                "worst_runs": [r.view() for r in worst],
            }
        )
    out.sort(key=lambda h: (-h["gpu_hours_idle"], h["project"], h["user"]))
    return out[:top]
