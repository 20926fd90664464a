"""A run's three clocks from its times and timeline: queue wait, start wait, run time.

Pure: the run's recorded times, its timeline events and `now` in, seconds out. A run that
started and then waits again for the executor (its pod preempted or evicted, the replacement
waiting for GPUs) is in a second start-wait episode: that wait counts as start wait, not
as run time. The reason registry says which reasons hold a run before its process runs.
`ticking` says which clock goes on now, so clients tick that one between reads and compute none.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .reasons import Layer, layer_of
from .status import Phase, phase_of

_LIVE = frozenset({"running", "stopping"})
QUEUE_WAIT, START_WAIT, RUN = "queue_wait_seconds", "start_wait_seconds", "run_seconds"
_BY_PHASE = {Phase.DISPATCH: QUEUE_WAIT, Phase.EXECUTION: START_WAIT, Phase.RUN: RUN}


def ticking(status: str, reason: str) -> str | None:
    """The clock that goes on while a run is in `status` for `reason` (None once it is final)."""
    key = _BY_PHASE.get(phase_of(status))
    # Running again waiting for the executor (a preempted pod): the start wait goes on, as rewait_seconds counts it.
    if key == RUN and layer_of(reason) in (Layer.QUEUE, Layer.EXECUTOR):
        return START_WAIT
    return key


def rewait_seconds(timeline: Sequence[Mapping[str, Any]], started: float, end: float) -> float:
    """Seconds after `started` (until `end`) during which the executor held the run again."""
    total = 0.0
    since: float | None = None
    for ev in timeline:
        at = float(ev.get("at") or 0.0)
        if at < started or at > end:
            continue
        status, layer = ev.get("status"), layer_of(str(ev.get("reason") or ""))
        if status not in _LIVE:
            break  # the end (a final event) closes any episode at `end`
        if since is None and layer in (Layer.QUEUE, Layer.EXECUTOR):
            since = at
        elif since is not None and layer == Layer.RUNNING:
            total += at - since
            since = None
    if since is not None:
        total += end - since
    return total


def clocks(
    times: Mapping[str, Any], timeline: Sequence[Mapping[str, Any]] | None, now: float
) -> dict[str, float | None]:
    """`queue_wait_seconds`, `start_wait_seconds` and `run_seconds` (None: that phase has not begun).

    `times` has `queued_at`, `dispatched_at`, `started_at` and `finished_at` (each may be None);
    without a `timeline` (list rows carry none) no second start-wait episode can be seen.
    """
    queued, disp, started, fin = (times.get(k) for k in ("queued_at", "dispatched_at", "started_at", "finished_at"))
    end = fin if fin is not None else now
    again = rewait_seconds(timeline, started, end) if timeline and started is not None else 0.0
    return {
        "queue_wait_seconds": None if queued is None else round((disp if disp is not None else end) - queued, 3),
        "start_wait_seconds": None
        if disp is None
        else round((started if started is not None else end) - disp + again, 3),
        "run_seconds": None if started is None else round(end - started - again, 3),
    }


def run_clocks(row: Mapping[str, Any], now: float) -> dict[str, Any]:
    """A run's `clocks` as run views carry them: the three clocks and the one `ticking` (or None)."""
    out: dict[str, Any] = clocks(row, row.get("timeline"), now)
    out["ticking"] = ticking(str(row.get("status") or ""), str(row.get("reason") or ""))
    return out
