"""Admission: which pending run may be dispatched next, and why others wait.

The engine keeps one `QueueState` per queue in memory (the snapshot). Deciding
(`choose`, `wait_reason`) reads it and never mutates; the engine then applies the
decision with `assume` (Kueue's decide → assume → persist). Pending runs are kept
in groups of identical (user, request, asked flavor), each in submission order, so picking
the next run costs O(groups), never O(pending runs).

Flavors: a queue may split its GPU quota by flavor (a kind of GPU), in an order. A run is
admitted on the first of its queue's flavors where it fits (the flavor's quota, and on the local
executor the free devices of that flavor), or only on the one it asked for; the flavor is part
of the decision (`Decision`) and `assume` holds it. A queue without flavors has one implicit
flavor (None), exactly as before.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from .resources import Quota, Resources, fmt_amount
from .status import Reason


@dataclass(frozen=True, slots=True)
class PendingRun:
    id: str
    seq: int  # global submission order; lower goes first
    queue: str
    user: str
    request: Resources
    sweep: str | None = None  # the parent sweep's id, for a sweep's child
    flavor: str | None = None  # the flavor it asked for; None: any of its queue's (or no flavors)


@dataclass(frozen=True, slots=True)
class HeldRun:
    id: str
    user: str
    request: Resources
    devices: tuple[int, ...] = ()
    sweep: str | None = None
    flavor: str | None = None  # the flavor it was admitted on; None: its queue has no flavors


@dataclass(frozen=True, slots=True)
class FlavorLimit:
    """One flavor a queue offers and its quota there."""

    name: str
    quota: Quota


@dataclass(slots=True)
class SweepGate:
    """A sweep's workflow concurrency: at most `concurrency` of its children dispatched at once.

    Changed in place while the sweep runs; a sweep's children all wait in one queue (its own).
    """

    concurrency: int
    paused: bool = False


@dataclass(frozen=True, slots=True)
class QueueLimits:
    name: str
    priority: int = 0
    concurrency: int | None = None
    quota: Quota = field(default_factory=Quota)
    max_per_user: int | None = None
    ordering: str = "best_effort_fifo"
    paused: bool = False
    flavors: tuple[FlavorLimit, ...] = ()  # tried in this order; empty: one implicit flavor

    def flavor(self, name: str) -> FlavorLimit | None:
        return next((f for f in self.flavors if f.name == name), None)


@dataclass(frozen=True, slots=True)
class Wait:
    """Why a pending run is not dispatched now: a typed reason and the numbers."""

    reason: str
    message: str
    blockers: tuple[str, ...] = ()  # ids of runs holding what this one waits for
    numbers: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Decision:
    """What `decide` chose: the run, the flavor it is admitted on, whether local capacity blocked one."""

    run: PendingRun | None
    flavor: str | None = None
    capacity_blocked: bool = False


# Free GPUs per flavor on this machine; None where the executor places work itself.
FreeByFlavor = Mapping[str, int] | None


class QueueState:
    """One queue's limits, held runs and pending runs."""

    __slots__ = ("_groups", "_index", "gates", "held", "limits", "per_sweep", "per_user", "used", "used_by_flavor")

    def __init__(self, limits: QueueLimits) -> None:
        self.limits = limits
        self.used = Resources()
        self.used_by_flavor: dict[str, Resources] = {}
        self.held: dict[str, HeldRun] = {}
        self.per_user: dict[str, int] = {}
        self.per_sweep: dict[str, int] = {}
        self.gates: dict[str, SweepGate] = {}
        # A sweep's children are one group (same user, request, sweep and asked flavor): 10,000 of them cost one head.
        self._groups: dict[tuple[str, Resources, str | None, str | None], dict[str, PendingRun]] = {}
        self._index: dict[str, PendingRun] = {}

    def copy(self) -> QueueState:
        """A private copy to run forward (core.forward) without touching this one; limits are shared (frozen)."""
        c = QueueState(self.limits)
        c.used = self.used
        c.used_by_flavor = dict(self.used_by_flavor)
        c.held = dict(self.held)
        c.per_user = dict(self.per_user)
        c.per_sweep = dict(self.per_sweep)
        c.gates = {k: SweepGate(g.concurrency, g.paused) for k, g in self.gates.items()}
        c._groups = {k: dict(g) for k, g in self._groups.items()}
        c._index = dict(self._index)
        return c

    # ---- pending side -------------------------------------------------
    def add_pending(self, run: PendingRun) -> None:
        self._groups.setdefault((run.user, run.request, run.sweep, run.flavor), {})[run.id] = run
        self._index[run.id] = run

    def remove_pending(self, run_id: str) -> PendingRun | None:
        run = self._index.pop(run_id, None)
        if run is not None:
            key = (run.user, run.request, run.sweep, run.flavor)
            group = self._groups[key]
            del group[run_id]
            if not group:
                del self._groups[key]
        return run

    def pending(self, run_id: str) -> PendingRun | None:
        return self._index.get(run_id)

    @property
    def pending_count(self) -> int:
        return len(self._index)

    def heads(self) -> Iterator[PendingRun]:
        for group in self._groups.values():
            yield next(iter(group.values()))

    def groups(self) -> list[list[PendingRun]]:
        """The pending runs by request group, each in the order `heads` walks it."""
        return [list(g.values()) for g in self._groups.values()]

    def group_sizes(self) -> list[tuple[Resources, int]]:
        """Each request group's request and how many runs wait in it."""
        return [(next(iter(g.values())).request, len(g)) for g in self._groups.values()]

    def head(self) -> PendingRun | None:
        return min(self.heads(), key=lambda r: r.seq, default=None)

    def position(self, run: PendingRun) -> int:
        """1-based place among this queue's pending runs, by submission order."""
        return 1 + sum(1 for r in self._index.values() if r.seq < run.seq)

    def ordered_pending(self) -> list[PendingRun]:
        return sorted(self._index.values(), key=lambda r: r.seq)

    # ---- held side ------------------------------------------------------
    def assume(self, run: PendingRun, devices: tuple[int, ...] = (), flavor: str | None = None) -> HeldRun:
        """Move a run from pending to held: it now holds a slot and quota (of `flavor`, the decision's)."""
        self.remove_pending(run.id)
        return self.hold(HeldRun(run.id, run.user, run.request, devices, run.sweep, flavor))

    def hold(self, held: HeldRun) -> HeldRun:
        self.held[held.id] = held
        self.used = self.used + held.request
        if held.flavor is not None:
            self.used_by_flavor[held.flavor] = self.used_by_flavor.get(held.flavor, _ZERO) + held.request
        self.per_user[held.user] = self.per_user.get(held.user, 0) + 1
        if held.sweep is not None:
            self.per_sweep[held.sweep] = self.per_sweep.get(held.sweep, 0) + 1
        return held

    def release(self, run_id: str) -> HeldRun | None:
        held = self.held.pop(run_id, None)
        if held is not None:
            self.used = self.used - held.request
            if held.flavor is not None:
                left = self.used_by_flavor.get(held.flavor, _ZERO) - held.request
                if left == _ZERO:
                    self.used_by_flavor.pop(held.flavor, None)
                else:
                    self.used_by_flavor[held.flavor] = left
            n = self.per_user.get(held.user, 0) - 1
            if n > 0:
                self.per_user[held.user] = n
            else:
                self.per_user.pop(held.user, None)
            if held.sweep is not None:
                k = self.per_sweep.get(held.sweep, 0) - 1
                if k > 0:
                    self.per_sweep[held.sweep] = k
                else:
                    self.per_sweep.pop(held.sweep, None)
        return held

    def sweep_full(self, sweep: str | None) -> bool:
        """The sweep holds its child back: paused, or as many children dispatched as it allows."""
        gate = self.gates.get(sweep) if sweep is not None else None
        return gate is not None and (gate.paused or self.per_sweep.get(sweep or "", 0) >= gate.concurrency)


_ZERO = Resources()


def over_quota(quota: Quota, used: Resources, req: Resources) -> bool:
    """`quota.shortfalls(...)` is non-empty, without building the list."""
    return (
        (quota.gpu is not None and used.gpu + req.gpu > quota.gpu)
        or (quota.cpu_milli is not None and used.cpu_milli + req.cpu_milli > quota.cpu_milli)
        or (quota.memory_bytes is not None and used.memory_bytes + req.memory_bytes > quota.memory_bytes)
    )


def _blocked_by(
    q: QueueState, run: PendingRun, free_gpus: int | None, free_by_flavor: FreeByFlavor = None
) -> str | None:
    """The first limit that holds `run` (its reason code), checked in the order users care about."""
    return _fit(q, run, free_gpus, free_by_flavor)[0]


def _fit(
    q: QueueState, run: PendingRun, free_gpus: int | None, free_by_flavor: FreeByFlavor
) -> tuple[str | None, str | None, bool]:
    """(the reason that holds `run` or None, the flavor it fits on, whether local capacity held it somewhere).

    Cheap (no blockers, no message): `decide` asks it once per group head per admitted run,
    so a drain of N runs must not pay O(held runs) here (that made draining quadratic). With
    flavors, O(the queue's flavors) more; the reason of a run that fits none is its first flavor's.
    """
    lim = q.limits
    if lim.paused:
        return Reason.QUEUE_PAUSED, None, False
    # The sweep's own limit first: with it at its limit, a freed queue slot would not start this child.
    if run.sweep is not None and q.sweep_full(run.sweep):
        return (Reason.SWEEP_PAUSED if q.gates[run.sweep].paused else Reason.SWEEP_CONCURRENCY), None, False
    if lim.concurrency is not None and len(q.held) >= lim.concurrency:
        return Reason.QUEUE_CONCURRENCY, None, False
    if lim.max_per_user is not None and q.per_user.get(run.user, 0) >= lim.max_per_user:
        return Reason.USER_LIMIT, None, False
    if over_quota(lim.quota, q.used, run.request):
        return Reason.QUEUE_QUOTA, None, False
    if not lim.flavors:
        if free_gpus is not None and run.request.gpu > free_gpus:
            return Reason.NO_CAPACITY, None, True
        return None, None, False
    first: str | None = None
    capacity = False
    for f in lim.flavors:
        if run.flavor is not None and f.name != run.flavor:
            continue
        reason = _flavor_blocked(q, f, run, free_gpus, free_by_flavor)
        if reason is None:
            return None, f.name, False
        capacity = capacity or reason == Reason.NO_CAPACITY
        first = first or reason
    # Asked for a flavor the queue no longer offers (refused at submit; the config changed since).
    return first or Reason.QUEUE_QUOTA, None, capacity


def _flavor_blocked(
    q: QueueState, f: FlavorLimit, run: PendingRun, free_gpus: int | None, free_by_flavor: FreeByFlavor
) -> str | None:
    if over_quota(f.quota, q.used_by_flavor.get(f.name, _ZERO), run.request):
        return Reason.QUEUE_QUOTA
    free = free_by_flavor.get(f.name, 0) if free_by_flavor is not None else free_gpus
    if free is not None and run.request.gpu > free:
        return Reason.NO_CAPACITY
    return None


def _queue_wait(
    q: QueueState, run: PendingRun, free_gpus: int | None, free_by_flavor: FreeByFlavor = None
) -> Wait | None:
    """`_blocked_by`'s answer explained: the message, the numbers and the runs holding what it waits for."""
    reason = _blocked_by(q, run, free_gpus, free_by_flavor)
    if reason is None:
        return None
    lim = q.limits
    if (
        lim.flavors
        and reason in (Reason.QUEUE_QUOTA, Reason.NO_CAPACITY)
        and not over_quota(lim.quota, q.used, run.request)
    ):
        # Held by its flavors: the first one's wait (explain lists each).
        waits = flavor_waits(q, run, free_gpus, free_by_flavor)
        if waits:
            return waits[0][1]
        offered = ", ".join(f.name for f in lim.flavors)
        return Wait(reason, f"queue {lim.name} does not offer flavor {run.flavor} (it offers: {offered})")
    if reason == Reason.QUEUE_PAUSED:
        return Wait(reason, f"queue {lim.name} is paused")
    if reason in (Reason.SWEEP_CONCURRENCY, Reason.SWEEP_PAUSED):
        assert run.sweep is not None
        gate = q.gates[run.sweep]
        n = q.per_sweep.get(run.sweep, 0)
        mine = tuple(h.id for h in q.held.values() if h.sweep == run.sweep)
        numbers = {"dispatched": n, "concurrency": gate.concurrency}
        if reason == Reason.SWEEP_PAUSED:
            return Wait(reason, f"sweep {run.sweep} is paused: it dispatches no more children", mine, numbers)
        return Wait(
            reason,
            f"sweep {run.sweep} has {n}/{gate.concurrency} children dispatched (concurrency {gate.concurrency})",
            mine,
            numbers,
        )
    if reason == Reason.QUEUE_CONCURRENCY:
        assert lim.concurrency is not None
        return Wait(
            reason,
            f"queue {lim.name} is at its concurrency limit: {len(q.held)}/{lim.concurrency} runs dispatched",
            tuple(q.held),
            {"used": len(q.held), "limit": lim.concurrency},
        )
    if reason == Reason.USER_LIMIT:
        assert lim.max_per_user is not None
        mine = tuple(h.id for h in q.held.values() if h.user == run.user)
        n = q.per_user.get(run.user, 0)
        return Wait(
            reason,
            f"{run.user} has {n}/{lim.max_per_user} runs dispatched in queue {lim.name} (max_per_user)",
            mine,
            {"used": n, "limit": lim.max_per_user},
        )
    if reason == Reason.QUEUE_QUOTA:
        short = lim.quota.shortfalls(q.used, run.request)
        name, used, req, limit = short[0]
        parts = [
            f"{fmt_amount(n, r)} {n} requested, {fmt_amount(n, u)}/{fmt_amount(n, lm)} in use"
            f" ({fmt_amount(n, u + r - lm)} more needed)"
            for n, u, r, lm in short
        ]
        holders = tuple(h.id for h in q.held.values() if getattr(h.request, _FIELD[name]) > 0)
        return Wait(
            reason,
            f"queue {lim.name} quota is exhausted: " + "; ".join(parts),
            holders,
            {"used": used, "requested": req, "limit": limit},
        )
    assert free_gpus is not None
    return Wait(
        reason,
        f"needs {run.request.gpu} GPU(s); {free_gpus} free on this machine",
        (),
        {"requested": run.request.gpu, "free": free_gpus},
    )


_FIELD = {"gpu": "gpu", "cpu": "cpu_milli", "memory": "memory_bytes"}


def flavor_waits(
    q: QueueState, run: PendingRun, free_gpus: int | None, free_by_flavor: FreeByFlavor = None
) -> list[tuple[str, Wait]]:
    """For each flavor `run` may use (in its queue's order), why it does not start there now.

    A limit of the whole queue (paused, concurrency, max_per_user, its plain quota) holds it on
    every flavor; else each flavor's quota and, locally, its free devices. Admissible where it fits.
    """
    lim = q.limits
    out: list[tuple[str, Wait]] = []
    reason, _, _ = _fit(q, run, free_gpus, free_by_flavor)
    common = None
    if reason is not None and (
        reason not in (Reason.QUEUE_QUOTA, Reason.NO_CAPACITY) or over_quota(lim.quota, q.used, run.request)
    ):
        common = _queue_wait(q, run, free_gpus, free_by_flavor)
    for f in lim.flavors:
        if run.flavor is not None and f.name != run.flavor:
            continue
        if common is not None:
            out.append((f.name, common))
            continue
        out.append((f.name, _flavor_wait(q, f, run, free_gpus, free_by_flavor)))
    return out


def _flavor_wait(
    q: QueueState, f: FlavorLimit, run: PendingRun, free_gpus: int | None, free_by_flavor: FreeByFlavor
) -> Wait:
    lim = q.limits
    reason = _flavor_blocked(q, f, run, free_gpus, free_by_flavor)
    if reason is None:
        return Wait(Reason.ADMISSIBLE, f"{f.name}: fits every limit")
    if reason == Reason.QUEUE_QUOTA:
        used_f = q.used_by_flavor.get(f.name, _ZERO)
        short = f.quota.shortfalls(used_f, run.request)
        name, used, req, limit = short[0]
        parts = [
            f"{fmt_amount(n, u)}/{fmt_amount(n, lm)}{'' if n == 'gpu' else ' ' + n} in use"
            f" ({fmt_amount(n, u + r - lm)} more needed)"
            for n, u, r, lm in short
        ]
        holders = tuple(h.id for h in q.held.values() if h.flavor == f.name and getattr(h.request, _FIELD[name]) > 0)
        return Wait(
            reason,
            f"{f.name}: " + "; ".join(parts) + f" (queue {lim.name}'s {f.name} quota)",
            holders,
            {"used": used, "requested": req, "limit": limit},
        )
    free = free_by_flavor.get(f.name, 0) if free_by_flavor is not None else free_gpus
    assert free is not None
    return Wait(
        reason,
        f"{f.name}: needs {run.request.gpu} GPU(s); {free} free of flavor {f.name} on this machine",
        (),
        {"requested": run.request.gpu, "free": free},
    )


def decide(q: QueueState, free_gpus: int | None, free_by_flavor: FreeByFlavor = None) -> Decision:
    """The next run this queue may dispatch, the flavor it goes on, and whether local capacity blocked one.

    `free_gpus` is None when GPUs are not counted by us (the executor places work itself);
    `free_by_flavor` the free devices of each flavor where this machine's devices are typed.

    best_effort_fifo: the earliest run that fits (a blocked head does not block
    smaller or other users' runs). strict_fifo: the head or nothing.
    """
    lim = q.limits
    if lim.paused or not q.pending_count:
        return _NOTHING
    if lim.concurrency is not None and len(q.held) >= lim.concurrency:
        return _NOTHING
    if lim.ordering == "strict_fifo":
        head = q.head()
        assert head is not None
        blocked, flavor, capacity = _fit(q, head, free_gpus, free_by_flavor)
        return Decision(head, flavor) if blocked is None else Decision(None, None, capacity)
    best: PendingRun | None = None
    best_flavor: str | None = None
    capacity_blocked = False
    for head in q.heads():
        if best is not None and head.seq > best.seq:
            continue
        blocked, flavor, capacity = _fit(q, head, free_gpus, free_by_flavor)
        if blocked is None:
            best, best_flavor = head, flavor
        elif capacity:
            capacity_blocked = True
    return Decision(best, best_flavor, capacity_blocked)


_NOTHING = Decision(None)


def choose(q: QueueState, free_gpus: int | None) -> tuple[PendingRun | None, bool]:
    """`decide` without the flavor: the next run and whether local capacity blocked one."""
    d = decide(q, free_gpus)
    return d.run, d.capacity_blocked


def wait_reason(q: QueueState, run: PendingRun, free_gpus: int | None, free_by_flavor: FreeByFlavor = None) -> Wait:
    """Why this pending run is waiting, for explain and the timeline."""
    wait = _queue_wait(q, run, free_gpus, free_by_flavor)
    if wait is not None:
        return wait
    head = q.head()
    if q.limits.ordering == "strict_fifo" and head is not None and head.id != run.id:
        hw = _queue_wait(q, head, free_gpus, free_by_flavor)
        # The head may be another team's run: the message (kept on the timeline, shown to this
        # run's readers) says what holds it, never whose it is; explain names it to those who may see it.
        why = f" ({shared_message(hw, q.limits.name)})" if hw else ""
        return Wait(
            Reason.BEHIND_HEAD,
            f"queue {q.limits.name} is strict FIFO: waiting behind the run at its head{why}",
            (head.id,),
        )
    return Wait("Admissible", "fits every limit; the dispatcher will start it on its next cycle")


def probe_flavor(
    q: QueueState, run: PendingRun, free_gpus: int | None, free_by_flavor: FreeByFlavor = None
) -> str | None:
    """The flavor a run not yet submitted would be admitted on now, if it fits now (None: it waits, or no flavors)."""
    return _fit(q, run, free_gpus, free_by_flavor)[1]


def probe_wait(
    q: QueueState, run: PendingRun, free_gpus: int | None, free_by_flavor: FreeByFlavor = None
) -> tuple[Wait, int]:
    """What a run not yet submitted would wait for in `q`, and its place: the preview's "will wait".

    The run is pending only for the length of this call (no await in between), so no cycle sees it.
    """
    q.add_pending(run)
    try:
        return wait_reason(q, run, free_gpus, free_by_flavor), q.position(run)
    finally:
        q.remove_pending(run.id)


def holding_flavor(
    q: QueueState, run: PendingRun, free_gpus: int | None, free_by_flavor: FreeByFlavor = None
) -> str | None:
    """The flavor whose limit (its quota; locally, its free devices) holds `run`: the first it may use,
    whose reason `_fit` reports. None where it fits, a limit of the whole queue holds it, or no flavors."""
    lim = q.limits
    if not lim.flavors:
        return None
    reason, _, _ = _fit(q, run, free_gpus, free_by_flavor)
    if reason not in (Reason.QUEUE_QUOTA, Reason.NO_CAPACITY) or over_quota(lim.quota, q.used, run.request):
        return None
    return next((f.name for f in lim.flavors if run.flavor is None or f.name == run.flavor), None)


def shared_message(wait: Wait, queue: str) -> str:
    """A run's wait as anyone using the queue may read it: every team's, so it names no user.

    Only the per-user limit's message names one (the run's owner, fine on the owner's own run).
    """
    if wait.reason == Reason.USER_LIMIT:
        used, limit = wait.numbers.get("used"), wait.numbers.get("limit")
        return f"the head run's user has {used}/{limit} runs dispatched in queue {queue} (max_per_user)"
    return wait.message


def order_queues(queues: Iterable[QueueState]) -> list[QueueState]:
    """Dispatch order across queues: higher priority first, then name."""
    return sorted(queues, key=lambda q: (-q.limits.priority, q.limits.name))


def pick_devices(
    free: Iterable[int], n: int, flavor: str | None = None, typed: Mapping[int, str] | None = None
) -> tuple[int, ...]:
    """The `n` lowest free devices; with a flavor, only devices of that flavor (`typed`: device → flavor)."""
    if flavor is not None and typed is not None:
        free = (d for d in free if typed.get(d) == flavor)
    return tuple(sorted(free)[:n])
