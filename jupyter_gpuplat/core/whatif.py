"""What-if limits: replay a period's recorded arrivals through the real admission code.

A discrete-event simulation over `QueueState`s (core.forward, shared with core.eta): each instant
with finishes runs one admission cycle, then each instant with arrivals runs another (the
dispatcher admits on events: a finish wakes its queue and those that waited on capacity; a
submission wakes its queue). Each cycle is the dispatcher's own loop over `order_queues`,
`decide`, `pick_devices` and `assume`, so with unchanged settings the replay gives the recorded
dispatches; with changed ones, the prediction.
Flavors are the dispatcher's too: a run asking for one waits for it, the others take the first
of their queue's flavors where they fit, each flavor's quota and (locally) its typed devices.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from .admission import HeldRun, PendingRun, QueueLimits, QueueState, holding_flavor
from .admission import _blocked_by as blocked_by  # the cheap reason code `choose` asks (no message built)
from .forward import Cycles, DevicePool
from .insights import category
from .resources import Resources

ASSUMPTIONS = (
    "each run holds its slot, quota and GPUs for as long as it did (dispatch to finish, start delay included): "
    "durations do not change with the limits",
    "arrivals (queued_at), owners, queues and requested resources are the recorded ones",
    "capacity is the executor's devices (a cluster executor: GPUs not counted by the platform, only queue limits)",
    "flavors: a run asks for the flavor it asked for (or any) and holds each flavor's quota and, locally, devices of "
    "that flavor; the platform's flavors and which device is of which are today's; a run held from before the period "
    "keeps its recorded flavor",
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
    flavor: str | None = None  # the flavor it was admitted on (None: not dispatched, or no flavors)
    asked: str | None = None  # the flavor it asked for (placement.gpu_type); None: any, or no flavors

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
    flavor: str | None = None  # the flavor the replay admitted it on


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
    # Per queue, the part of those seconds a flavor's limit held a head run: flavor -> limit -> seconds.
    held_by_flavor: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict)


def replay(
    runs: Iterable[RecordedRun],
    limits: Sequence[QueueLimits],
    *,
    devices: int | None,
    since: float,
    until: float,
    typed: Mapping[int, str] | None = None,
) -> Replay:
    """Replay `runs` (arrivals in [since, until), plus those holding at `since`) under `limits`.

    `devices`: the executor's GPU count, or None when it places work itself (free GPUs not counted).
    `typed`: device index -> flavor where the platform has flavors and devices are ours (the
    dispatcher's `device_flavor`); then free devices are counted per flavor as the dispatcher does.
    """
    queues = {lim.name: QueueState(lim) for lim in limits}
    pool = DevicePool(range(devices) if devices is not None else None, typed)
    cyc = Cycles(queues, pool)

    out = Replay(since, until)
    heap: list[tuple[float, int, int, str]] = []
    by_id: dict[str, RecordedRun] = {}
    holds: dict[str, float | None] = {}
    for r in sorted(runs, key=lambda r: r.seq):
        q = queues.get(r.queue)
        if q is None:
            continue
        by_id[r.id] = r
        if r.dispatched_at is not None and r.dispatched_at < since:
            cyc.hold(r.queue, HeldRun(r.id, r.user, r.request, pool.pick(r.request.gpu, r.flavor), r.sweep, r.flavor))
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

    blocked: dict[str, tuple[str, float, str | None]] = {}  # queue -> (what holds its head, since when, flavor)

    outcomes, order, push = out.outcomes, out.order, heapq.heappush

    def note_block(q: QueueState, now: float) -> None:
        name = q.limits.name
        was = blocked.pop(name, None)
        if was is not None and now > was[1]:
            _add_held(out, name, was[0], was[2], now - was[1])
        if not q.pending_count:
            return
        lim = q.limits
        if lim.paused:
            blocked[name] = ("paused", now, None)
        elif lim.concurrency is not None and len(q.held) >= lim.concurrency:
            blocked[name] = ("concurrency", now, None)  # holds every run alike: no need to find the head
        else:  # every group's head is held (decide found none to start): ask the first group's, O(1)
            head = next(q.heads(), None)
            n, by_flavor = pool.gpus, pool.by_flavor
            why = None if head is None else blocked_by(q, head, n, by_flavor)
            flavor = holding_flavor(q, head, n, by_flavor) if why is not None and head is not None else None
            blocked[name] = ("other" if why is None else category(why), now, flavor)

    def cycle(now: float) -> None:
        """`Dispatcher.run_cycle`'s decide-and-assume loop over the woken queues (core.forward)."""
        out.cycles += 1

        def admitted(q: QueueState, nxt: PendingRun, flavor: str | None, d: tuple[int, ...]) -> None:
            o = outcomes[nxt.id]
            o.dispatched_at, o.flavor = now, flavor
            order.append(nxt.id)
            hold = holds[nxt.id]
            if hold is not None:
                o.finished_at = now + hold
                push(heap, (o.finished_at, _FINISH, nxt.seq, nxt.id))

        cyc.cycle(admitted, lambda q: note_block(q, now))

    # Nothing after the end is replayed: the record knows nothing after `until` either.
    while heap and heap[0][0] <= until:
        now, kind, _, rid = heap[0]
        finished = False
        while heap and heap[0][0] == now and heap[0][1] <= _WITHDRAW:
            _, kind, _, rid = heapq.heappop(heap)
            r = by_id[rid]
            if kind == _WITHDRAW:
                queues[r.queue].remove_pending(rid)
                continue
            finished = cyc.release(r.queue, rid) or finished
        if finished:
            cycle(now)
        arrived = False
        while heap and heap[0][0] == now and heap[0][1] == _ARRIVE:
            _, _, _, rid = heapq.heappop(heap)
            r = by_id[rid]
            cyc.arrive(PendingRun(r.id, r.seq, r.queue, r.user, r.request, r.sweep, r.asked))
            arrived = True
        if arrived:
            cycle(now)
    for name, (what, t, flavor) in blocked.items():
        _add_held(out, name, what, flavor, max(0.0, until - t))
    return out


def _add_held(out: Replay, queue: str, what: str, flavor: str | None, seconds: float) -> None:
    held = out.held_by.setdefault(queue, {})
    held[what] = held.get(what, 0.0) + seconds
    if flavor is not None:
        per = out.held_by_flavor.setdefault(queue, {}).setdefault(flavor, {})
        per[what] = per.get(what, 0.0) + seconds


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


_EPSILON = 1e-6  # seconds: a difference of sums of the same spans, not a wait


def binding_flavor(held_by: dict[str, float], held_by_flavor: dict[str, dict[str, float]]) -> str | None:
    """The flavor whose limit is the binding one: it held the head longer than the rest of that limit did."""
    b = binding(held_by)
    if b is None:
        return None
    per = {f: v[b] for f, v in held_by_flavor.items() if v.get(b, 0.0) > _EPSILON}
    if not per:
        return None
    top = max(per, key=lambda k: (per[k], k))
    return top if per[top] > held_by[b] - sum(per.values()) + _EPSILON else None


def binding_text(held_by: dict[str, float], held_by_flavor: dict[str, dict[str, float]]) -> str | None:
    """The binding limit in words, naming the flavor's quota where that is what binds."""
    b = binding(held_by)
    return None if b is None else _limit_text(b, binding_flavor(held_by, held_by_flavor) or "")


def _split(held_by: dict[str, float], held_by_flavor: dict[str, dict[str, float]]) -> dict[tuple[str, str], float]:
    """Seconds per (limit, flavor): a flavor's own limit apart from the queue-wide one (flavor "")."""
    out: dict[tuple[str, str], float] = {}
    for f, per in held_by_flavor.items():
        for limit, v in per.items():
            out[(limit, f)] = v
    for limit, v in held_by.items():
        out[(limit, "")] = v - sum(per.get(limit, 0.0) for per in held_by_flavor.values())
    return {k: v for k, v in out.items() if v > _EPSILON}


def _limit_text(limit: str, flavor: str) -> str:
    if not flavor:
        return f"{_LIMIT_TEXT.get(limit, limit)} ({limit})"
    if limit == "quota":
        return f"the queue's {flavor} quota (flavors.{flavor})"
    if limit == "capacity":
        return f"the machine's free {flavor} GPUs (capacity)"
    return f"{_LIMIT_TEXT.get(limit, limit)} on {flavor} ({limit})"


def binding_notes(
    changed: Iterable[str],
    held_by: dict[str, float],
    held_by_flavor: dict[str, dict[str, float]] | None = None,
    changed_flavors: Iterable[str] = (),
) -> list[str]:
    """A note for each changed limit that did not hold anything back in the replay, naming what did.

    A flavor's quota (`changed_flavors`, the key `flavors`) is a limit of its own: the queue's plain
    quota does not bind where only a flavor's held runs back, and the note names that flavor's.
    """
    held = _split(held_by, held_by_flavor or {})
    top = max(held, key=lambda k: (held[k], k)) if held else None
    labels: list[tuple[str, tuple[str, str]]] = []
    for key in changed:
        if key == "flavors":
            labels.extend((f"flavors.{f}", ("quota", f)) for f in changed_flavors)
        elif (limit := LIMIT_OF.get(key)) is not None:
            labels.append((key, (limit, "")))
    notes: list[str] = []
    for label, limit_key in labels:
        if limit_key in held:
            continue
        if top is None:
            notes.append(f"{label} does not bind: no run waited in the replay, so changing it changes nothing")
        else:
            notes.append(
                f"{label} does not bind: in the replay the queue's runs were held {held[top]:.0f} s by "
                f"{_limit_text(*top)}, not on {label}; change that limit instead"
            )
    return notes


def flavor_figures(
    rp: Replay,
    runs: Iterable[RecordedRun],
    quotas: Sequence[tuple[str, int]],
    observed_quotas: Mapping[str, int],
    held_by_flavor: Mapping[str, dict[str, float]],
) -> list[dict[str, object]]:
    """Per flavor of one queue (the replayed settings' order): its runs, GPU-hours and the utilisation of
    its GPU quota, observed (the flavor each run was admitted on) beside predicted (the replay's)."""
    hours = (rp.until - rp.since) / 3600
    sides: dict[str, dict[str, list[float]]] = {n: {"observed": [0, 0.0], "predicted": [0, 0.0]} for n, _ in quotas}
    for r in runs:
        obs_gh = r.request.gpu * _overlap_hours(r.dispatched_at, r.finished_at, rp.since, rp.until)
        o = rp.outcomes.get(r.id)
        if o is None:  # carried in from before the period: the same in both
            if r.flavor in sides:
                for side in sides[r.flavor].values():
                    side[1] += obs_gh
            continue
        if r.flavor in sides and r.dispatched_at is not None:
            sides[r.flavor]["observed"][0] += 1
            sides[r.flavor]["observed"][1] += obs_gh
        if o.flavor in sides and o.dispatched_at is not None:
            sides[o.flavor]["predicted"][0] += 1
            sides[o.flavor]["predicted"][1] += r.request.gpu * _overlap_hours(
                o.dispatched_at, o.finished_at, rp.since, rp.until
            )
    out: list[dict[str, object]] = []
    for name, gpu in quotas:
        allowance = gpu * hours if gpu else None
        before = observed_quotas.get(name)
        observed_allowance = before * hours if before else None
        figures = sides[name]
        out.append({
            "name": name,
            "quota_gpu": gpu,
            "observed_quota_gpu": before,
            "observed": _flavor_side(figures["observed"], observed_allowance),
            "predicted": _flavor_side(figures["predicted"], allowance),
            "allowance_gpu_hours": allowance,
            "observed_allowance_gpu_hours": observed_allowance,
            "predicted_held_seconds": dict(held_by_flavor.get(name, {})),
        })  # fmt: skip
    return out


def _flavor_side(figures: list[float], allowance: float | None) -> dict[str, object]:
    runs, gpu_hours = figures
    return {"runs": int(runs), "gpu_hours": gpu_hours, "utilisation": gpu_hours / allowance if allowance else None}
