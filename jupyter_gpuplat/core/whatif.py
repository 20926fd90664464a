"""What-if limits: replay a period's recorded arrivals through the real admission code.

A discrete-event simulation over `QueueState`s: each instant with finishes runs one admission
cycle, then each instant with arrivals runs another (the dispatcher admits on events: a finish
wakes its queue and those that waited on capacity; a submission wakes its queue). Each cycle is
the dispatcher's own loop over `order_queues`, `choose`, `pick_devices` and `assume`, so with
unchanged settings the replay gives the recorded dispatches; with changed ones, the prediction.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from .admission import (
    HeldRun,
    PendingRun,
    QueueLimits,
    QueueState,
    choose,
    order_queues,
    pick_devices,
)
from .admission import _blocked_by as blocked_by  # the cheap reason code `choose` asks (no message built)
from .insights import category
from .resources import Resources

ASSUMPTIONS = (
    "each run holds its slot, quota and GPUs for as long as it did (dispatch to finish, start delay included): "
    "durations do not change with the limits",
    "arrivals (queued_at), owners, queues and requested resources are the recorded ones",
    "capacity is the executor's devices (a cluster executor: GPUs not counted by the platform, only queue limits)",
    "no Kubernetes placement or start delays beyond those recorded; no failures to start unless recorded",
    "the settings hold for the whole period (config changes during it are not replayed)",
    "runs dispatched before the period start hold what they held until their recorded finish",
    "a run still running at the end of the period (or now) is assumed to run past the end",
    "a run that ended while it waited (stopped, failed to start) leaves the queue then; if the replay "
    "dispatches it first, it is assumed to end at once",
    "the replay stops at the end of the period: a run not dispatched by then has no predicted dispatch and "
    "counts as waiting until the end (censored), like a run the record had not dispatched by then",
    "one admission cycle per instant with finishes, then one per instant with arrivals; a run that fits is "
    "dispatched at that instant (the live cycle's milliseconds after a submission or finish are not modelled)",
    "a sweep's own concurrency gate and preemption are not modelled (the platform does not preempt)",
)

_FINISH, _WITHDRAW, _ARRIVE = 0, 1, 2


@dataclass(frozen=True, slots=True)
class RecordedRun:
    """One run as the record has it (times in epoch seconds; None: it did not happen)."""

    id: str
    seq: int
    queue: str
    project: str
    user: str
    request: Resources
    queued_at: float
    dispatched_at: float | None = None
    finished_at: float | None = None
    sweep: str | None = None

    @property
    def hold(self) -> float | None:
        """Seconds it held its slot, or None when unknown (still running, or never dispatched)."""
        if self.dispatched_at is None or self.finished_at is None:
            return None
        return max(0.0, self.finished_at - self.dispatched_at)


@dataclass(slots=True)
class Outcome:
    """A replayed run: when it would be dispatched (None: not by the end) and when it would finish."""

    run: RecordedRun
    dispatched_at: float | None = None
    finished_at: float | None = None


@dataclass
class Replay:
    since: float
    until: float
    outcomes: dict[str, Outcome] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)  # dispatch order of the replayed runs
    carried: list[str] = field(default_factory=list)  # held from before the period: not replayed
    cycles: int = 0
    # Per queue, seconds it had runs waiting in the replay, by the limit that held a head run (core.insights.category).
    held_by: dict[str, dict[str, float]] = field(default_factory=dict)


def replay(
    runs: Iterable[RecordedRun],
    limits: Sequence[QueueLimits],
    *,
    devices: int | None,
    since: float,
    until: float,
) -> Replay:
    """Replay `runs` (arrivals in [since, until), plus those holding at `since`) under `limits`.

    `devices`: the executor's GPU count, or None when it places work itself (free GPUs not counted).
    """
    queues = {lim.name: QueueState(lim) for lim in limits}
    free: set[int] = set(range(devices)) if devices is not None else set()
    assigns = devices is not None
    out = Replay(since, until)
    heap: list[tuple[float, int, int, str]] = []
    by_id: dict[str, RecordedRun] = {}
    devs: dict[str, tuple[int, ...]] = {}
    holds: dict[str, float | None] = {}
    for r in sorted(runs, key=lambda r: r.seq):
        q = queues.get(r.queue)
        if q is None:
            continue
        by_id[r.id] = r
        if r.dispatched_at is not None and r.dispatched_at < since:
            d = pick_devices(free, r.request.gpu) if assigns else ()
            free -= set(d)
            devs[r.id] = d
            q.hold(HeldRun(r.id, r.user, r.request, d, r.sweep))
            out.carried.append(r.id)
            if r.finished_at is not None:
                heapq.heappush(heap, (r.finished_at, _FINISH, r.seq, r.id))
            continue
        out.outcomes[r.id] = Outcome(r)
        # Ended while it waited: if the replay dispatches it, it is assumed to end at once.
        holds[r.id] = 0.0 if r.dispatched_at is None and r.finished_at is not None else r.hold
        heapq.heappush(heap, (r.queued_at, _ARRIVE, r.seq, r.id))
        if r.dispatched_at is None and r.finished_at is not None:
            heapq.heappush(heap, (r.finished_at, _WITHDRAW, r.seq, r.id))

    dirty: set[str] = set()
    capacity_waiters: set[str] = set()
    blocked: dict[str, tuple[str, float]] = {}  # queue -> (what holds its head, since when)

    outcomes, order, push = out.outcomes, out.order, heapq.heappush

    def note_block(q: QueueState, now: float) -> None:
        name = q.limits.name
        was = blocked.pop(name, None)
        if was is not None and now > was[1]:
            held = out.held_by.setdefault(name, {})
            held[was[0]] = held.get(was[0], 0.0) + now - was[1]
        if not q.pending_count:
            return
        lim = q.limits
        if lim.paused:
            blocked[name] = ("paused", now)
        elif lim.concurrency is not None and len(q.held) >= lim.concurrency:
            blocked[name] = ("concurrency", now)  # holds every run alike: no need to find the head
        else:  # every group's head is held (choose found none to start): ask the first group's, O(1)
            head = next(q.heads(), None)
            why = None if head is None else blocked_by(q, head, len(free) if assigns else None)
            blocked[name] = ("other" if why is None else category(why), now)

    def cycle(now: float) -> None:
        """`Dispatcher.run_cycle`'s decide-and-assume loop over the dirty queues."""
        out.cycles += 1
        for q in order_queues([queues[n] for n in dirty]):
            capacity_waiters.discard(q.limits.name)
            while True:
                nxt, capacity_blocked = choose(q, len(free) if assigns else None)
                if nxt is None:
                    if capacity_blocked:
                        capacity_waiters.add(q.limits.name)
                    break
                d = pick_devices(free, nxt.request.gpu) if assigns else ()
                if d:
                    free.difference_update(d)
                    devs[nxt.id] = d
                q.assume(nxt, d)
                o = outcomes[nxt.id]
                o.dispatched_at = now
                order.append(nxt.id)
                hold = holds[nxt.id]
                if hold is not None:
                    o.finished_at = now + hold
                    push(heap, (o.finished_at, _FINISH, nxt.seq, nxt.id))
            note_block(q, now)
        dirty.clear()

    # Nothing after the end is replayed: the record knows nothing after `until` either.
    while heap and heap[0][0] <= until:
        now, kind, _, rid = heap[0]
        finished = False
        while heap and heap[0][0] == now and heap[0][1] <= _WITHDRAW:
            _, kind, _, rid = heapq.heappop(heap)
            r = by_id[rid]
            q = queues[r.queue]
            if kind == _WITHDRAW:
                q.remove_pending(rid)
                continue
            if q.release(rid) is not None:
                dirty.add(r.queue)
                finished = True
            d = devs.pop(rid, ())
            if d:
                free.update(d)
                dirty.update(capacity_waiters)
                finished = True
        if finished:
            cycle(now)
        arrived = False
        while heap and heap[0][0] == now and heap[0][1] == _ARRIVE:
            _, _, _, rid = heapq.heappop(heap)
            r = by_id[rid]
            queues[r.queue].add_pending(PendingRun(r.id, r.seq, r.queue, r.user, r.request, r.sweep))
            dirty.add(r.queue)
            arrived = True
        if arrived:
            cycle(now)
    for name, (what, t) in blocked.items():
        held = out.held_by.setdefault(name, {})
        held[what] = held.get(what, 0.0) + max(0.0, until - t)
    return out


# ---- the figures ---------------------------------------------------------------------


def percentile(values: Sequence[float], p: float) -> float | None:
    """Nearest-rank percentile (the smallest value with at least p% of values at or below it)."""
    if not values:
        return None
    s = sorted(values)
    k = max(1, math.ceil(p / 100 * len(s)))
    return s[k - 1]


def _overlap_hours(start: float | None, end: float | None, since: float, until: float) -> float:
    if start is None:
        return 0.0
    stop = until if end is None else min(end, until)
    return max(0.0, stop - max(start, since)) / 3600


def summarize(
    rp: Replay,
    runs_by_queue: dict[str, list[RecordedRun]],
    allowance_gpus: dict[str, int | None],
    observed_allowance_gpus: dict[str, int | None] | None = None,
) -> dict[str, dict[str, object]]:
    """Per queue: observed and predicted waits (p50/p90/p99, censored at the end) and GPU-hours.

    The observed utilisation is over the allowance of the settings in force (`observed_allowance_gpus`,
    default the same), the predicted one over the replayed settings' (`allowance_gpus`).
    """
    out: dict[str, dict[str, object]] = {}
    hours = (rp.until - rp.since) / 3600
    in_force = allowance_gpus if observed_allowance_gpus is None else observed_allowance_gpus
    for name, gpus in allowance_gpus.items():
        obs_w: list[float] = []
        pred_w: list[float] = []
        obs_gh = pred_gh = 0.0
        waiting = {"observed": 0, "predicted": 0}
        for r in runs_by_queue.get(name, []):
            o = rp.outcomes.get(r.id)
            if o is None:  # carried in from before the period: the same in both
                gh = r.request.gpu * _overlap_hours(r.dispatched_at, r.finished_at, rp.since, rp.until)
                obs_gh += gh
                pred_gh += gh
                continue
            ow, pw = censored_wait(r, r.dispatched_at, rp.until), censored_wait(r, o.dispatched_at, rp.until)
            waiting["observed"] += ow[1]
            waiting["predicted"] += pw[1]
            obs_w.append(ow[0])
            pred_w.append(pw[0])
            obs_gh += r.request.gpu * _overlap_hours(r.dispatched_at, r.finished_at, rp.since, rp.until)
            pred_gh += r.request.gpu * _overlap_hours(o.dispatched_at, o.finished_at, rp.since, rp.until)
        allowance = gpus * hours if gpus else None
        observed_gpus = in_force.get(name)
        observed_allowance = observed_gpus * hours if observed_gpus else None
        out[name] = {
            "runs": len(obs_w),
            "observed": _side(obs_w, obs_gh, observed_allowance, waiting["observed"]),
            "predicted": _side(pred_w, pred_gh, allowance, waiting["predicted"]),
            "allowance_gpu_hours": allowance,
            "observed_allowance_gpu_hours": observed_allowance,
        }
    return out


def censored_wait(r: RecordedRun, dispatched: float | None, until: float) -> tuple[float, int]:
    """(wait in seconds, 1 if not dispatched by `until`): a wait past the end counts up to the end."""
    if dispatched is None or dispatched > until:
        return max(0.0, until - r.queued_at), 1
    return dispatched - r.queued_at, 0


def _side(waits: list[float], gpu_hours: float, allowance: float | None, waiting: int) -> dict[str, object]:
    return {
        "wait_p50_seconds": percentile(waits, 50),
        "wait_p90_seconds": percentile(waits, 90),
        "wait_p99_seconds": percentile(waits, 99),
        "wait_mean_seconds": sum(waits) / len(waits) if waits else None,
        "gpu_hours": gpu_hours,
        "utilisation": gpu_hours / allowance if allowance else None,
        "waiting_at_end": waiting,
    }


# A changed setting and the limit (core.insights.category) it is.
LIMIT_OF = {"concurrency": "concurrency", "max_per_user": "max_per_user", "quota": "quota"}
_LIMIT_TEXT = {
    "quota": "the queue's quota",
    "concurrency": "its concurrency",
    "max_per_user": "max_per_user",
    "capacity": "the machine's free GPUs",
    "paused": "the queue being paused",
    "other": "ordering or sweeps (not a queue limit)",
}


def binding(held_by: dict[str, float]) -> str | None:
    """The limit that held the queue's waiting runs longest in the replay (None: nothing waited)."""
    held = {k: v for k, v in held_by.items() if v > 0}
    return max(held, key=lambda k: (held[k], k)) if held else None


def binding_notes(changed: Iterable[str], held_by: dict[str, float]) -> list[str]:
    """A note for each changed limit that did not hold anything back in the replay, naming what did."""
    notes: list[str] = []
    binds = binding(held_by)
    for key in changed:
        limit = LIMIT_OF.get(key)
        if limit is None or held_by.get(limit, 0) > 0:
            continue
        if binds is None:
            notes.append(f"{key} does not bind: no run waited in the replay, so changing it changes nothing")
        else:
            notes.append(
                f"{key} does not bind: in the replay the queue's runs were held {held_by[binds]:.0f} s by "
                f"{_LIMIT_TEXT.get(binds, binds)} ({binds}), not on {key}; change that limit instead"
            )
    return notes
