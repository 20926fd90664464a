"""Admission: which pending run may be dispatched next, and why others wait.

The engine keeps one `QueueState` per queue in memory (the snapshot). Deciding
(`choose`, `wait_reason`) reads it and never mutates; the engine then applies the
decision with `assume` (Kueue's decide → assume → persist). Pending runs are kept
in groups of identical (user, request), each in submission order, so picking the
next run costs O(groups), never O(pending runs).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
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


@dataclass(frozen=True, slots=True)
class HeldRun:
    id: str
    user: str
    request: Resources
    devices: tuple[int, ...] = ()
    sweep: str | None = None


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


@dataclass(frozen=True, slots=True)
class Wait:
    """Why a pending run is not dispatched now: a typed reason and the numbers."""

    reason: str
    message: str
    blockers: tuple[str, ...] = ()  # ids of runs holding what this one waits for
    numbers: dict[str, int] = field(default_factory=dict)


class QueueState:
    """One queue's limits, held runs and pending runs."""

    __slots__ = ("_groups", "_index", "gates", "held", "limits", "per_sweep", "per_user", "used")

    def __init__(self, limits: QueueLimits) -> None:
        self.limits = limits
        self.used = Resources()
        self.held: dict[str, HeldRun] = {}
        self.per_user: dict[str, int] = {}
        self.per_sweep: dict[str, int] = {}
        self.gates: dict[str, SweepGate] = {}
        # A sweep's children are one group (same user, request and sweep): 10,000 of them cost one head.
        self._groups: dict[tuple[str, Resources, str | None], dict[str, PendingRun]] = {}
        self._index: dict[str, PendingRun] = {}

    # ---- pending side -------------------------------------------------
    def add_pending(self, run: PendingRun) -> None:
        self._groups.setdefault((run.user, run.request, run.sweep), {})[run.id] = run
        self._index[run.id] = run

    def remove_pending(self, run_id: str) -> PendingRun | None:
        run = self._index.pop(run_id, None)
        if run is not None:
            key = (run.user, run.request, run.sweep)
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

    def head(self) -> PendingRun | None:
        return min(self.heads(), key=lambda r: r.seq, default=None)

    def position(self, run: PendingRun) -> int:
        """1-based place among this queue's pending runs, by submission order."""
        return 1 + sum(1 for r in self._index.values() if r.seq < run.seq)

    def ordered_pending(self) -> list[PendingRun]:
        return sorted(self._index.values(), key=lambda r: r.seq)

    # ---- held side ------------------------------------------------------
    def assume(self, run: PendingRun, devices: tuple[int, ...] = ()) -> HeldRun:
        """Move a run from pending to held: it now holds a slot and quota."""
        self.remove_pending(run.id)
        return self.hold(HeldRun(run.id, run.user, run.request, devices, run.sweep))

    def hold(self, held: HeldRun) -> HeldRun:
        self.held[held.id] = held
        self.used = self.used + held.request
        self.per_user[held.user] = self.per_user.get(held.user, 0) + 1
        if held.sweep is not None:
            self.per_sweep[held.sweep] = self.per_sweep.get(held.sweep, 0) + 1
        return held

    def release(self, run_id: str) -> HeldRun | None:
        held = self.held.pop(run_id, None)
        if held is not None:
            self.used = self.used - held.request
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


def _over_quota(quota: Quota, used: Resources, req: Resources) -> bool:
    """`quota.shortfalls(...)` is non-empty, without building the list."""
    return (
        (quota.gpu is not None and used.gpu + req.gpu > quota.gpu)
        or (quota.cpu_milli is not None and used.cpu_milli + req.cpu_milli > quota.cpu_milli)
        or (quota.memory_bytes is not None and used.memory_bytes + req.memory_bytes > quota.memory_bytes)
    )


def _blocked_by(q: QueueState, run: PendingRun, free_gpus: int | None) -> str | None:
    """The first limit that holds `run` (its reason code), checked in the order users care about.

    Cheap (no blockers, no message): `choose` asks it once per group head per admitted run,
    so a drain of N runs must not pay O(held runs) here (that made draining quadratic).
    """
    lim = q.limits
    if lim.paused:
        return Reason.QUEUE_PAUSED
    # The sweep's own limit first: with it at its limit, a freed queue slot would not start this child.
    if run.sweep is not None and q.sweep_full(run.sweep):
        return Reason.SWEEP_PAUSED if q.gates[run.sweep].paused else Reason.SWEEP_CONCURRENCY
    if lim.concurrency is not None and len(q.held) >= lim.concurrency:
        return Reason.QUEUE_CONCURRENCY
    if lim.max_per_user is not None and q.per_user.get(run.user, 0) >= lim.max_per_user:
        return Reason.USER_LIMIT
    if _over_quota(lim.quota, q.used, run.request):
        return Reason.QUEUE_QUOTA
    if free_gpus is not None and run.request.gpu > free_gpus:
        return Reason.NO_CAPACITY
    return None


def _queue_wait(q: QueueState, run: PendingRun, free_gpus: int | None) -> Wait | None:
    """`_blocked_by`'s answer explained: the message, the numbers and the runs holding what it waits for."""
    reason = _blocked_by(q, run, free_gpus)
    if reason is None:
        return None
    lim = q.limits
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


def choose(q: QueueState, free_gpus: int | None) -> tuple[PendingRun | None, bool]:
    """The next run this queue may dispatch, and whether local capacity blocked one.

    `free_gpus` is None when GPUs are not counted by us (the executor places work itself).

    best_effort_fifo: the earliest run that fits (a blocked head does not block
    smaller or other users' runs). strict_fifo: the head or nothing.
    """
    lim = q.limits
    if lim.paused or not q.pending_count:
        return None, False
    if lim.concurrency is not None and len(q.held) >= lim.concurrency:
        return None, False
    if lim.ordering == "strict_fifo":
        head = q.head()
        assert head is not None
        blocked = _blocked_by(q, head, free_gpus)
        return (head, False) if blocked is None else (None, blocked == Reason.NO_CAPACITY)
    best: PendingRun | None = None
    capacity_blocked = False
    for head in q.heads():
        if best is not None and head.seq > best.seq:
            continue
        blocked = _blocked_by(q, head, free_gpus)
        if blocked is None:
            best = head
        elif blocked == Reason.NO_CAPACITY:
            capacity_blocked = True
    return best, capacity_blocked


def wait_reason(q: QueueState, run: PendingRun, free_gpus: int | None) -> Wait:
    """Why this pending run is waiting, for explain and the timeline."""
    wait = _queue_wait(q, run, free_gpus)
    if wait is not None:
        return wait
    head = q.head()
    if q.limits.ordering == "strict_fifo" and head is not None and head.id != run.id:
        hw = _queue_wait(q, head, free_gpus)
        # The head may be another team's run: the message (kept on the timeline, shown to this
        # run's readers) says what holds it, never whose it is; explain names it to those who may see it.
        why = f" ({shared_message(hw, q.limits.name)})" if hw else ""
        return Wait(
            Reason.BEHIND_HEAD,
            f"queue {q.limits.name} is strict FIFO: waiting behind the run at its head{why}",
            (head.id,),
        )
    return Wait("Admissible", "fits every limit; the dispatcher will start it on its next cycle")


def probe_wait(q: QueueState, run: PendingRun, free_gpus: int | None) -> tuple[Wait, int]:
    """What a run not yet submitted would wait for in `q`, and its place: the preview's "will wait".

    The run is pending only for the length of this call (no await in between), so no cycle sees it.
    """
    q.add_pending(run)
    try:
        return wait_reason(q, run, free_gpus), q.position(run)
    finally:
        q.remove_pending(run.id)


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


def pick_devices(free: Iterable[int], n: int) -> tuple[int, ...]:
    return tuple(sorted(free)[:n])
