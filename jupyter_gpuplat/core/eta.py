"""When will each waiting run start: the platform's own admission run forward (issue 26's core).

From the engine's snapshot (one `QueueState` per queue, the free devices) and a predicted time
for every run (core.durations: each holding run's remaining time, each waiting run's duration),
each scenario runs the dispatcher's cycle (core.forward: `order_queues`, `decide`,
`pick_devices`, `assume`) at time 0 (now) and again at every instant a run ends, until nothing
more ends. Its times are drawn from each run's distribution with one seeded RNG, so the same
inputs give the same answer; p50 and p90 are nearest-rank quantiles of a run's start over the
scenarios. Where every time is fixed, one scenario is the answer (exactly the hand-computed one).

A run that some scenario never starts waits on something with no basis: a run with no time limit
and no history holding what it needs (it never ends in the simulation), a paused queue or sweep.
Its estimate is unknown with that reason, naming the run; no number is invented.

Incremental: queues are coupled only through the devices they may take (where the platform hands
out devices; on a cluster, never), so `components` splits them into groups simulated apart, each
with its own seeded RNG, and `estimate(only=...)` recomputes only the groups of changed queues —
the rest of a previous answer stays valid.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from .admission import PendingRun, QueueState, Wait, over_quota, wait_reason
from .durations import Empirical, NoBasis, Prediction
from .forward import Cycles, DevicePool
from .resources import Resources
from .status import Reason
from .whatif import percentile

ASSUMPTIONS = (
    "each running run holds its slot, quota and GPUs for its predicted remaining time, each waiting run for its "
    "predicted duration once dispatched (core.durations: similar finished runs, bounded by its time limit)",
    "no run arrives after now: a later submission to a higher-priority queue, or one that fits sooner in a "
    "best-effort queue, can start first (the estimate is recomputed when it arrives)",
    "the queue settings, sweep gates and devices stay as they are now (a config change recomputes)",
    "dispatch is start: on Kubernetes the estimate covers our queue only, not the wait for nodes",
    "a run that fits is dispatched at the instant a run ends (the live cycle's milliseconds are not modelled)",
)


@dataclass(frozen=True, slots=True)
class Eta:
    """A waiting run's start: seconds from now at the median and at the 90th percentile, and what it rests on."""

    p50_seconds: float
    p90_seconds: float
    basis: str


@dataclass(frozen=True, slots=True)
class EtaUnknown:
    """No estimate, and why: the reason names what holds it with no basis."""

    reason: str

    @property
    def text(self) -> str:
        return f"unknown: {self.reason}"


Estimate = Eta | EtaUnknown


def estimate(
    queues: Mapping[str, QueueState],
    *,
    free_devices: Iterable[int] | None,
    typed: Mapping[int, str] | None = None,
    remaining: Mapping[str, Prediction],
    durations: Mapping[str, Prediction],
    scenarios: int = 100,
    seed: int = 0,
    only: Iterable[str] | None = None,
) -> dict[str, Estimate]:
    """The start estimate of every waiting run in `queues` (or in the groups of the queues named in `only`).

    `free_devices`: the devices free now (None: the executor places work itself); `typed`: device →
    flavor where devices are typed (the engine's `device_flavor`). `remaining`: each holding run's
    remaining time; `durations`: each waiting run's duration. The queue states are not changed.
    """
    pool = DevicePool(free_devices, typed)
    if pool.counted and pool.typed is None and _never_short(queues, pool):
        pool = DevicePool(None)  # devices never hold a run back: simulated as uncounted (no picking, no coupling)
    groups = components(queues, pool)
    if only is not None:
        wanted = set(only)
        groups = [g for g in groups if wanted.intersection(g)]
    out: dict[str, Estimate] = {}
    for names in groups:
        out.update(_estimate_group(queues, names, pool, remaining, durations, scenarios, seed, free_devices is None))
    return out


def components(queues: Mapping[str, QueueState], pool: DevicePool) -> list[tuple[str, ...]]:
    """Queues in groups whose estimates depend on one another: those that may take the same devices.

    Where no devices are counted (a cluster) each queue is its own group. Else a queue that uses GPUs
    reaches its flavors' devices (where devices are typed and it has flavors) or every device.
    """
    names = sorted(queues)
    if not pool.counted or (pool.typed is None and _never_short(queues, pool)):
        return [(n,) for n in names]
    parent = {n: n for n in names}

    def root(n: str) -> str:
        while parent[n] != n:
            parent[n] = parent[parent[n]]
            n = parent[n]
        return n

    owner: dict[str, str] = {}  # flavor (or "*": any device) -> a queue that reaches it
    for n in names:
        for token in _reach(queues[n], pool):
            if token in owner:
                parent[root(n)] = root(owner[token])
            else:
                owner[token] = n
    if "*" in owner:  # a queue that may take any device meets every queue that takes one
        for n in owner.values():
            parent[root(n)] = root(owner["*"])
    groups: dict[str, list[str]] = {}
    for n in names:
        groups.setdefault(root(n), []).append(n)
    return [tuple(g) for g in groups.values()]


def _never_short(queues: Mapping[str, QueueState], pool: DevicePool) -> bool:
    """The queues can never hold more GPUs than the machine has: devices never hold a run back, so they
    couple no queue (each queue's quota, or concurrency times its largest request, summed)."""
    assert pool.free is not None
    machine = len(pool.free) + sum(len(h.devices) for q in queues.values() for h in q.held.values())
    most = 0
    for q in queues.values():
        # Asked per snapshot over every queue: a queue with a GPU quota costs its first GPU request, not all heads.
        if not (any(h.request.gpu for h in q.held.values()) or any(p.request.gpu for p in q.heads())):
            continue
        cap = q.limits.quota.gpu
        if cap is None and q.limits.concurrency is not None:
            asks = [h.request.gpu for h in q.held.values()] + [p.request.gpu for p in q.heads()]
            cap = q.limits.concurrency * max(asks)  # every pending request is some group's head's
        if cap is None:
            return False
        most += cap
        if most > machine:
            return False
    return True


def _reach(q: QueueState, pool: DevicePool) -> set[str]:
    uses = any(h.request.gpu for h in q.held.values()) or any(p.request.gpu for p in q.heads())
    if not uses:
        return set()
    typed = pool.typed or {}
    reach = {typed.get(d, "*") for h in q.held.values() for d in h.devices}
    if q.limits.flavors and pool.by_flavor is not None:
        return reach | {f.name for f in q.limits.flavors}
    return reach | {"*"}


def _estimate_group(
    queues: Mapping[str, QueueState],
    names: tuple[str, ...],
    pool: DevicePool,
    remaining: Mapping[str, Prediction],
    durations: Mapping[str, Prediction],
    scenarios: int,
    seed: int,
    cluster: bool,
) -> dict[str, Estimate]:
    held = [h for n in names for h in queues[n].held]
    waiting = [p.id for n in names for p in queues[n].ordered_pending()]
    if not waiting:
        return {}
    times: dict[str, Prediction] = {}
    for rid in held:
        times[rid] = remaining.get(rid) or NoBasis(f"{rid} has no predicted remaining time")
    for rid in waiting:
        times[rid] = durations.get(rid) or NoBasis(f"{rid} has no predicted duration")
    fixed = all(isinstance(p, NoBasis) or p.fixed for p in times.values())
    n = 1 if fixed else max(1, scenarios)
    # Seeded by the group's queues, so an answer does not depend on which other groups were recomputed.
    rng = random.Random(f"{seed}:{','.join(names)}")
    starts: dict[str, list[float]] = {rid: [] for rid in waiting}
    unknown: dict[str, str] = {}
    alone = queues[names[0]] if len(names) == 1 and not pool.counted else None
    if alone is None or not _fixed_order_scenarios(alone, times, rng, n, starts):
        rng = random.Random(f"{seed}:{','.join(names)}")
        starts = {rid: [] for rid in waiting}
        for _ in range(n):
            _scenario(queues, names, pool, times, rng, starts, unknown)
    from_history = sum(1 for p in times.values() if isinstance(p, Empirical) and p.from_history)
    from_limits = sum(1 for p in times.values() if isinstance(p, Empirical) and not p.from_history)
    basis = (
        f"this platform's admission run forward {'once (every time fixed)' if n == 1 else f'over {n} scenarios'}"
        f" with {len(held)} running and {len(waiting)} waiting runs; times from similar finished runs for"
        f" {from_history}, from the time limit alone for {from_limits}"
    )
    if cluster:  # a cluster places work itself: the wait for nodes after dispatch is not ours to see
        basis += "; it covers our queue only (Kubernetes may hold a dispatched run until a node has room)"
    out: dict[str, Estimate] = {}
    for rid in waiting:
        if rid in unknown:
            out[rid] = EtaUnknown(unknown[rid])
            continue
        s = starts[rid]
        out[rid] = Eta(percentile(s, 50) or 0.0, percentile(s, 90) or 0.0, basis)
    return out


def _scenario(
    queues: Mapping[str, QueueState],
    names: tuple[str, ...],
    pool: DevicePool,
    times: Mapping[str, Prediction],
    rng: random.Random,
    starts: dict[str, list[float]],
    unknown: dict[str, str],
) -> None:
    """One draw of every time, the admission run forward; each waiting run's start added to `starts`."""
    qs = {n: queues[n].copy() for n in names}
    cyc = Cycles(qs, pool.copy())
    heap: list[tuple[float, int, str, str]] = []
    k = 0
    for n, q in qs.items():
        for rid in q.held:
            p = times[rid]
            if isinstance(p, Empirical):  # no basis: it never ends here
                k += 1
                heap.append((p.sample(rng), k, n, rid))
    heapq.heapify(heap)
    now = 0.0
    left = sum(q.pending_count for q in qs.values())

    def admitted(q: QueueState, run: PendingRun, flavor: str | None, devices: tuple[int, ...]) -> None:
        nonlocal k, left
        left -= 1
        starts[run.id].append(now)
        p = times[run.id]
        if isinstance(p, Empirical):
            k += 1
            heapq.heappush(heap, (now + p.sample(rng), k, q.limits.name, run.id))

    cyc.dirty.update(names)
    cyc.cycle(admitted)
    while heap and left:  # once every waiting run has started, later ends change no estimate
        now = heap[0][0]
        while heap and heap[0][0] == now:
            _, _, n, rid = heapq.heappop(heap)
            cyc.release(n, rid)
        cyc.cycle(admitted)
    for q in qs.values():
        for stuck in q.ordered_pending():
            if stuck.id not in unknown:
                unknown[stuck.id] = _why_stuck(qs, q, stuck, cyc.pool, times)


def _slots_only(q: QueueState) -> int | None:
    """The queue's concurrency where it is the only limit that can hold a run back, else None.

    Then `decide` always takes the earliest head once a slot is free, so the admission order is fixed
    (a merge of the request groups by submission) and only the instants change between scenarios.
    That holds with no pause, sweep gate, per-user limit or flavors, and a quota that the `concurrency`
    largest requests together never exceed (devices uncounted: the caller's condition).
    """
    lim = q.limits
    c = lim.concurrency
    if c is None or lim.paused or lim.max_per_user is not None or lim.flavors or q.gates:
        return None
    # Any `c` runs at once: the `c` largest requests, each group's counted as often as it has runs (up to c).
    asks = [h.request for h in q.held.values()] + [r for r, n in q.group_sizes() for _ in range(min(n, c))]
    for cap, part in (
        (lim.quota.gpu, lambda r: r.gpu),
        (lim.quota.cpu_milli, lambda r: r.cpu_milli),
        (lim.quota.memory_bytes, lambda r: r.memory_bytes),
    ):
        if cap is not None and sum(sorted(map(part, asks), reverse=True)[:c]) > cap:
            return None
    return c


def _slot_scenarios(
    q: QueueState,
    slots: int,
    times: Mapping[str, Prediction],
    rng: random.Random,
    n: int,
    starts: dict[str, list[float]],
) -> bool:
    """`_scenario` for a queue held back by its concurrency alone (`_slots_only`): each run starts when a slot
    frees, in the fixed admission order, with the same draws in the same order (so the same answer), at a
    fraction of the cost. False where a run would never start: the caller then runs the general simulation,
    which names what holds it.
    """
    order = list(heapq.merge(*q.groups(), key=lambda r: r.seq))
    held = [times[rid] for rid in q.held]
    for _ in range(n):
        ends = [p.sample(rng) for p in held if isinstance(p, Empirical)]
        heapq.heapify(ends)
        running = len(held)
        now = 0.0
        for run in order:
            while running >= slots:
                if not ends:
                    return False
                now = heapq.heappop(ends)
                running -= 1
            starts[run.id].append(now)
            running += 1
            p = times[run.id]
            if isinstance(p, Empirical):
                heapq.heappush(ends, now + p.sample(rng))
    return True


def _fixed_order_scenarios(
    q: QueueState, times: Mapping[str, Prediction], rng: random.Random, n: int, starts: dict[str, list[float]]
) -> bool:
    """The scenarios by the quickest simulation that answers as the general one does, where the queue's
    admission order is fixed; False where it is not (or a run would never start): the caller simulates."""
    slots = _slots_only(q)
    if slots is not None:
        return _slot_scenarios(q, slots, times, rng, n, starts)
    if _fixed_order(q):
        return _quota_scenarios(q, times, rng, n, starts)
    return False


def _fixed_order(q: QueueState) -> bool:
    """A queue whose admission order no timing can change, though its quota binds: strict FIFO (the head or
    nothing), or every waiting run asking the same (a head its quota holds back holds back every other) —
    with no pause, sweep gate, per-user limit or flavors."""
    lim = q.limits
    if lim.paused or lim.max_per_user is not None or lim.flavors or q.gates:
        return False
    return lim.ordering == "strict_fifo" or len({p.request for p in q.heads()}) <= 1


def _quota_scenarios(
    q: QueueState, times: Mapping[str, Prediction], rng: random.Random, n: int, starts: dict[str, list[float]]
) -> bool:
    """`_slot_scenarios` with the quota counted (`_fixed_order`): each run starts once a slot is free and what
    the runs ending by then freed lets it fit, in the fixed order, with the same draws in the same order."""
    lim = q.limits
    order = list(heapq.merge(*q.groups(), key=lambda r: r.seq))
    held = [(times[h.id], h.request) for h in q.held.values()]
    for _ in range(n):
        k = 0
        ends: list[tuple[float, int, Resources]] = []
        for p, req in held:
            if isinstance(p, Empirical):  # no basis: it never ends here
                k += 1
                ends.append((p.sample(rng), k, req))
        heapq.heapify(ends)
        running, used, now = len(held), q.used, 0.0
        for run in order:
            while (lim.concurrency is not None and running >= lim.concurrency) or over_quota(
                lim.quota, used, run.request
            ):
                if not ends:
                    return False
                now, _, freed = heapq.heappop(ends)
                running, used = running - 1, used - freed
            starts[run.id].append(now)
            running, used = running + 1, used + run.request
            p = times[run.id]
            if isinstance(p, Empirical):
                k += 1
                heapq.heappush(ends, (now + p.sample(rng), k, run.request))
    return True


def _why_stuck(
    qs: Mapping[str, QueueState], q: QueueState, run: PendingRun, pool: DevicePool, times: Mapping[str, Prediction]
) -> str:
    """What holds a run the simulation never started: the runs with no basis holding what it waits for, by name."""
    w: Wait = wait_reason(q, run, pool.gpus, pool.by_flavor)
    if w.reason == Reason.BEHIND_HEAD and (head := q.pending(w.blockers[0])) is not None:
        w = wait_reason(q, head, pool.gpus, pool.by_flavor)
    blockers = [b for b in w.blockers if isinstance(times.get(b), NoBasis)]
    if not blockers and w.reason == Reason.NO_CAPACITY:
        blockers = sorted(
            h.id for s in qs.values() for h in s.held.values() if h.devices and isinstance(times.get(h.id), NoBasis)
        )
    if not blockers:
        return w.message  # a paused queue or sweep: no time will free it
    first = times[blockers[0]]
    assert isinstance(first, NoBasis)
    more = len(blockers) - 1
    return first.reason + (f" (and {more} more runs with no basis hold what it waits for)" if more else "")


def about(seconds: float) -> str:
    """A wait as people say it: "now", "~40 s", "~6 min", "~2.5 h"."""
    s = max(0.0, seconds)
    if s < 1:
        return "now"
    if s < 90:
        return f"~{s:.0f} s"
    if s < 5400:
        return f"~{s / 60:.0f} min"
    return f"~{s / 3600:.1f} h"


def eta_text(p50_seconds: float, p90_seconds: float) -> str:
    """ "starts in ~6 min (p90 25 min)"; "starts now" where both are now."""
    if p90_seconds < 1:
        return "starts now"
    p50 = "now" if p50_seconds < 1 else f"in {about(p50_seconds)}"
    return f"starts {p50} (p90 {about(p90_seconds).lstrip('~')})"


def view(e: Estimate | None, computed_at: float, now: float) -> tuple[dict[str, object] | None, str | None]:
    """The API's `eta` and `eta_unknown` of a waiting run (None, None: not estimated yet, never a guess).

    `*_at` are fixed when computed; `*_seconds` count from `now` (a read later says less).
    """
    if e is None:
        return None, None
    if isinstance(e, EtaUnknown):
        return None, e.reason
    p50_at, p90_at = computed_at + e.p50_seconds, computed_at + e.p90_seconds
    p50, p90 = max(0.0, p50_at - now), max(0.0, p90_at - now)
    return {
        "p50_at": p50_at,
        "p90_at": p90_at,
        "p50_seconds": p50,
        "p90_seconds": p90,
        "basis": e.basis,
        "computed_at": computed_at,
        "text": eta_text(p50, p90),
    }, None
