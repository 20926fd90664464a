"""Admission: which pending run a queue dispatches next, and why the others wait."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

import pytest

from jupyter_gpuplat.core.admission import (
    HeldRun,
    PendingRun,
    QueueLimits,
    QueueState,
    choose,
    order_queues,
    pick_devices,
    wait_reason,
)
from jupyter_gpuplat.core.resources import Quota, Resources
from jupyter_gpuplat.core.status import DISPATCH_REASONS, Reason

GI = 2**30
GPU1 = Resources(gpu=1)
GPU2 = Resources(gpu=2)
CPU1 = Resources(cpu_milli=1000)


def P(run_id: str, seq: int, user: str = "bob", res: Resources = GPU1, queue: str = "q") -> PendingRun:
    return PendingRun(run_id, seq, queue, user, res)


def H(run_id: str, user: str = "bob", res: Resources = GPU1) -> HeldRun:
    return HeldRun(run_id, user, res)


def state(
    limits: QueueLimits | None = None, held: tuple[HeldRun, ...] = (), pending: tuple[PendingRun, ...] = ()
) -> QueueState:
    q = QueueState(limits or QueueLimits("q"))
    for h in held:
        q.hold(h)
    for p in pending:
        q.add_pending(p)
    return q


def L(**kw: Any) -> QueueLimits:
    return QueueLimits("q", **kw)


# ---- choose: table of scenarios -------------------------------------------------
@dataclass
class Case:
    limits: QueueLimits
    held: tuple[HeldRun, ...] = ()
    pending: tuple[PendingRun, ...] = ()
    free: int = 8
    pick: str | None = None
    capacity_blocked: bool = False


CHOOSE_CASES = [
    pytest.param(Case(L()), id="empty-queue"),
    pytest.param(Case(L(), pending=(P("r1", 1), P("r2", 2)), pick="r1"), id="fifo-earliest-first"),
    pytest.param(
        Case(L(), pending=(P("r3", 3, "carol"), P("r2", 2, "alice", CPU1), P("r1", 1, "bob", GPU2)), pick="r1"),
        id="earliest-across-groups-regardless-of-insertion",
    ),
    # concurrency
    pytest.param(
        Case(L(concurrency=2), held=(H("h1"), H("h2")), pending=(P("r1", 1),), pick=None), id="concurrency-full"
    ),
    pytest.param(Case(L(concurrency=2), held=(H("h1"),), pending=(P("r1", 1),), pick="r1"), id="concurrency-one-left"),
    pytest.param(Case(L(concurrency=0), pending=(P("r1", 1, res=CPU1),), pick=None), id="concurrency-zero"),
    pytest.param(
        Case(L(concurrency=1), held=(H("h1"),), pending=(P("r1", 1, res=Resources()),), free=0, pick=None),
        id="concurrency-full-is-not-capacity",
    ),
    # per-resource quota
    pytest.param(
        Case(L(quota=Quota(gpu=2)), held=(H("h1", res=GPU2),), pending=(P("r1", 1),), pick=None), id="gpu-quota-full"
    ),
    pytest.param(
        Case(L(quota=Quota(gpu=2)), held=(H("h1"),), pending=(P("r1", 1, res=GPU2), P("r2", 2)), pick="r2"),
        id="gpu-quota-smaller-passes",
    ),
    pytest.param(
        Case(L(quota=Quota(gpu=2)), held=(H("h1", res=GPU2),), pending=(P("r1", 1), P("r2", 2, res=CPU1)), pick="r2"),
        id="gpu-quota-cpu-only-run-passes",
    ),
    pytest.param(
        Case(
            L(quota=Quota(cpu_milli=16000)),
            held=(H("h1", res=Resources(cpu_milli=14000)),),
            pending=(P("r1", 1, res=Resources(cpu_milli=4000)), P("r2", 2, res=Resources(cpu_milli=2000))),
            pick="r2",
        ),
        id="cpu-quota",
    ),
    pytest.param(
        Case(
            L(quota=Quota(memory_bytes=128 * GI)),
            held=(H("h1", res=Resources(memory_bytes=120 * GI)),),
            pending=(
                P("r1", 1, res=Resources(memory_bytes=16 * GI)),
                P("r2", 2, res=Resources(memory_bytes=9 * GI)),
                P("r3", 3, "alice", Resources(memory_bytes=8 * GI)),
            ),
            pick="r3",
        ),
        id="memory-quota-exact-fit",
    ),
    # max_per_user
    pytest.param(
        Case(
            L(max_per_user=1),
            held=(H("h1", "bob"),),
            pending=(P("r1", 1, "bob"), P("r2", 2, "bob", CPU1), P("r3", 3, "alice")),
            pick="r3",
        ),
        id="max-per-user-other-user-passes",
    ),
    pytest.param(
        Case(L(max_per_user=2), held=(H("h1", "bob"),), pending=(P("r1", 1, "bob"),), pick="r1"),
        id="max-per-user-under-limit",
    ),
    # strict vs best effort
    pytest.param(
        Case(
            L(quota=Quota(gpu=2), ordering="strict_fifo"),
            held=(H("h1"),),
            pending=(P("r1", 1, res=GPU2), P("r2", 2, "alice"), P("r3", 3, "carol", CPU1)),
            pick=None,
        ),
        id="strict-fifo-blocked-head-blocks-all",
    ),
    pytest.param(
        Case(
            L(quota=Quota(gpu=2), ordering="best_effort_fifo"),
            held=(H("h1"),),
            pending=(P("r1", 1, res=GPU2), P("r2", 2, "alice"), P("r3", 3, "carol", CPU1)),
            pick="r2",
        ),
        id="best-effort-smaller-passes-blocked-head",
    ),
    pytest.param(
        Case(
            L(ordering="strict_fifo", max_per_user=1),
            held=(H("h1", "bob"),),
            pending=(P("r1", 1, "bob"), P("r2", 2, "alice")),
            pick=None,
        ),
        id="strict-fifo-user-limited-head-blocks-others",
    ),
    pytest.param(
        Case(L(ordering="strict_fifo"), pending=(P("r2", 2, "alice"), P("r1", 1, "bob", GPU2)), pick="r1"),
        id="strict-fifo-head-fits",
    ),
    # paused
    pytest.param(Case(L(paused=True), pending=(P("r1", 1),), pick=None), id="paused"),
    pytest.param(Case(L(paused=True), pending=(P("r1", 1),), free=0, pick=None), id="paused-is-not-capacity"),
    # local capacity
    pytest.param(Case(L(), pending=(P("r1", 1),), free=0, pick=None, capacity_blocked=True), id="no-capacity"),
    pytest.param(
        Case(L(), pending=(P("r1", 1, res=GPU2), P("r2", 2)), free=1, pick="r2", capacity_blocked=True),
        id="capacity-smaller-passes",
    ),
    pytest.param(
        Case(L(), pending=(P("r1", 1, res=GPU2), P("r2", 2, "alice", CPU1)), free=0, pick="r2", capacity_blocked=True),
        id="capacity-cpu-only-passes",
    ),
    pytest.param(
        Case(L(ordering="strict_fifo"), pending=(P("r1", 1, res=GPU2), P("r2", 2)), free=1, capacity_blocked=True),
        id="strict-fifo-capacity",
    ),
    pytest.param(
        Case(L(quota=Quota(gpu=2)), held=(H("h1", res=GPU2),), pending=(P("r1", 1),), free=0, pick=None),
        id="quota-reported-before-capacity",
    ),
    pytest.param(Case(L(), pending=(P("r1", 1, res=GPU2),), free=2, pick="r1"), id="capacity-exact-fit"),
]


@pytest.mark.parametrize("case", CHOOSE_CASES)
def test_choose(case: Case) -> None:
    q = state(case.limits, case.held, case.pending)
    before = (q.used, dict(q.per_user), list(q.held), q.ordered_pending())
    run, capacity_blocked = choose(q, case.free)
    assert (run.id if run else None) == case.pick
    assert capacity_blocked is case.capacity_blocked
    # deciding never mutates
    assert (q.used, dict(q.per_user), list(q.held), q.ordered_pending()) == before
    # a picked run is exactly the one wait_reason calls admissible
    if run is not None:
        assert wait_reason(q, run, case.free).reason == "Admissible"


# ---- wait_reason: exact reasons, messages, blockers, numbers ----------------------------
WAIT_CASES = [
    pytest.param(
        L(paused=True, concurrency=1),
        (H("h1"),),
        (P("r1", 1),),
        "r1",
        8,
        (Reason.QUEUE_PAUSED, "queue q is paused", (), {}),
        id="paused-first",
    ),
    pytest.param(
        L(concurrency=2, max_per_user=1),
        (H("h1", "bob"), H("h2", "alice")),
        (P("r1", 1, "bob"),),
        "r1",
        8,
        (
            Reason.QUEUE_CONCURRENCY,
            "queue q is at its concurrency limit: 2/2 runs dispatched",
            ("h1", "h2"),
            {"used": 2, "limit": 2},
        ),
        id="concurrency",
    ),
    pytest.param(
        L(max_per_user=2, quota=Quota(gpu=2)),
        (H("h1", "bob"), H("h2", "alice"), H("h3", "bob", CPU1)),
        (P("r1", 1, "bob"),),
        "r1",
        8,
        (
            Reason.USER_LIMIT,
            "bob has 2/2 runs dispatched in queue q (max_per_user)",
            ("h1", "h3"),
            {"used": 2, "limit": 2},
        ),
        id="user-limit-before-quota",
    ),
    pytest.param(
        L(quota=Quota(gpu=2)),
        (H("h1"), H("h2", "alice"), H("h3", "carol", CPU1)),
        (P("r1", 1),),
        "r1",
        8,
        (
            Reason.QUEUE_QUOTA,
            "queue q quota is exhausted: 1 gpu requested, 2/2 in use (1 more needed)",
            ("h1", "h2"),
            {"used": 2, "requested": 1, "limit": 2},
        ),
        id="gpu-quota",
    ),
    pytest.param(
        L(quota=Quota(gpu=4)),
        (H("h1", res=GPU2),),
        (P("r1", 1, res=Resources(gpu=3)),),
        "r1",
        8,
        (
            Reason.QUEUE_QUOTA,
            "queue q quota is exhausted: 3 gpu requested, 2/4 in use (1 more needed)",
            ("h1",),
            {"used": 2, "requested": 3, "limit": 4},
        ),
        id="gpu-quota-partial",
    ),
    pytest.param(
        L(quota=Quota(cpu_milli=16000)),
        (H("h1", res=Resources(cpu_milli=15800)), H("h2", res=GPU1)),
        (P("r1", 1, res=Resources(cpu_milli=500)),),
        "r1",
        8,
        (
            Reason.QUEUE_QUOTA,
            "queue q quota is exhausted: 500m cpu requested, 15800m/16 in use (300m more needed)",
            ("h1",),
            {"used": 15800, "requested": 500, "limit": 16000},
        ),
        id="cpu-quota-millicores",
    ),
    pytest.param(
        L(quota=Quota(memory_bytes=128 * GI)),
        (H("h1", res=Resources(memory_bytes=120 * GI)),),
        (P("r1", 1, res=Resources(memory_bytes=16 * GI)),),
        "r1",
        8,
        (
            Reason.QUEUE_QUOTA,
            "queue q quota is exhausted: 16Gi memory requested, 120Gi/128Gi in use (8Gi more needed)",
            ("h1",),
            {"used": 120 * GI, "requested": 16 * GI, "limit": 128 * GI},
        ),
        id="memory-quota",
    ),
    pytest.param(
        L(quota=Quota(2, 16000, 128 * GI)),
        (H("h1", res=Resources(2, 14000, 64 * GI)),),
        (P("r1", 1, res=Resources(1, 4000, 8 * GI)),),
        "r1",
        8,
        (
            Reason.QUEUE_QUOTA,
            (
                "queue q quota is exhausted: 1 gpu requested, 2/2 in use (1 more needed); "
                "4 cpu requested, 14/16 in use (2 more needed)"
            ),
            ("h1",),
            {"used": 2, "requested": 1, "limit": 2},
        ),
        id="every-short-resource-named",
    ),
    pytest.param(
        L(quota=Quota(cpu_milli=4000)),
        (H("h1", res=Resources(gpu=1)), H("h2", res=Resources(cpu_milli=4000))),
        (P("r1", 1, res=CPU1),),
        "r1",
        8,
        (
            Reason.QUEUE_QUOTA,
            "queue q quota is exhausted: 1 cpu requested, 4/4 in use (1 more needed)",
            ("h2",),  # only runs holding the short resource block
            {"used": 4000, "requested": 1000, "limit": 4000},
        ),
        id="cpu-blockers-are-cpu-holders",
    ),
    pytest.param(
        L(),
        (),
        (P("r1", 1, res=GPU2),),
        "r1",
        1,
        (Reason.NO_CAPACITY, "needs 2 GPU(s); 1 free on this machine", (), {"requested": 2, "free": 1}),
        id="no-capacity",
    ),
    pytest.param(
        L(quota=Quota(gpu=2), ordering="strict_fifo"),
        (H("h1"),),
        (P("r1", 1, res=GPU2), P("r2", 2, "alice")),
        "r2",
        8,
        (
            Reason.BEHIND_HEAD,
            (
                "queue q is strict FIFO: waiting behind the run at its head "
                "(queue q quota is exhausted: 2 gpu requested, 1/2 in use (1 more needed))"
            ),
            ("r1",),
            {},
        ),
        id="behind-head-says-what-holds-the-head",
    ),
    pytest.param(
        L(ordering="strict_fifo"),
        (),
        (P("r1", 1, res=GPU2), P("r2", 2, "alice", CPU1)),
        "r2",
        1,
        (
            Reason.BEHIND_HEAD,
            "queue q is strict FIFO: waiting behind the run at its head (needs 2 GPU(s); 1 free on this machine)",
            ("r1",),
            {},
        ),
        id="behind-head-capacity",
    ),
    pytest.param(
        L(ordering="strict_fifo", quota=Quota(gpu=2)),
        (H("h1"),),
        (P("r1", 1, res=GPU2), P("r2", 2, "alice", GPU2)),
        "r2",
        8,
        (
            Reason.QUEUE_QUOTA,
            "queue q quota is exhausted: 2 gpu requested, 1/2 in use (1 more needed)",
            ("h1",),
            {"used": 1, "requested": 2, "limit": 2},
        ),
        id="own-reason-before-behind-head",
    ),
    pytest.param(
        L(quota=Quota(gpu=2), ordering="best_effort_fifo"),
        (H("h1"),),
        (P("r1", 1, res=GPU2), P("r2", 2, "alice")),
        "r2",
        8,
        (
            "Admissible",
            "fits every limit; the dispatcher will start it on its next cycle",
            (),
            {},
        ),
        id="best-effort-not-behind-head",
    ),
]


@pytest.mark.parametrize(("limits", "held", "pending", "run_id", "free", "expected"), WAIT_CASES)
def test_wait_reason(
    limits: QueueLimits,
    held: tuple[HeldRun, ...],
    pending: tuple[PendingRun, ...],
    run_id: str,
    free: int,
    expected: tuple[str, str, tuple[str, ...], dict[str, int]],
) -> None:
    q = state(limits, held, pending)
    run = q.pending(run_id)
    assert run is not None
    w = wait_reason(q, run, free)
    assert (w.reason, w.message, w.blockers, w.numbers) == expected
    if w.reason != "Admissible":
        assert w.reason in DISPATCH_REASONS


def test_admissible_head_in_strict_fifo() -> None:
    q = state(L(ordering="strict_fifo"), pending=(P("r1", 1), P("r2", 2)))
    r1 = q.pending("r1")
    assert r1 is not None
    assert wait_reason(q, r1, 8).reason == "Admissible"
    assert choose(q, 8) == (r1, False)


# ---- pending bookkeeping: position, remove, groups ----------------------------------
def test_position_is_by_submission_order_across_groups() -> None:
    runs = (
        P("a", 10, "bob", GPU1),
        P("b", 20, "alice", CPU1),
        P("c", 30, "bob", GPU1),
        P("d", 35, "bob", GPU2),
        P("e", 40, "alice", CPU1),
    )
    q = state(pending=runs)
    assert q.pending_count == 5
    assert len(list(q.heads())) == 3
    assert [q.position(r) for r in runs] == [1, 2, 3, 4, 5]
    assert [r.id for r in q.ordered_pending()] == ["a", "b", "c", "d", "e"]
    q.remove_pending("b")
    assert [q.position(r) for r in (runs[0], runs[2], runs[3], runs[4])] == [1, 2, 3, 4]


def test_remove_pending_from_the_middle_of_a_group() -> None:
    q = state(pending=(P("r1", 1), P("r2", 2), P("r3", 3), P("x", 4, "alice")))
    removed = q.remove_pending("r2")
    assert removed == P("r2", 2)
    assert q.pending("r2") is None
    assert q.pending_count == 3
    assert [r.id for r in q.ordered_pending()] == ["r1", "r3", "x"]
    assert sorted(h.id for h in q.heads()) == ["r1", "x"]
    r3 = q.pending("r3")
    assert r3 is not None and q.position(r3) == 2
    # the head of the group is still r1; removing it exposes r3
    assert q.remove_pending("r1") is not None
    assert sorted(h.id for h in q.heads()) == ["r3", "x"]
    assert q.head() == r3
    # removing the last of a group drops the group
    assert q.remove_pending("r3") is not None
    assert [h.id for h in q.heads()] == ["x"]
    # removing something absent is a no-op
    assert q.remove_pending("r2") is None
    assert q.remove_pending("nope") is None
    assert q.pending_count == 1


def test_head_of_empty_queue() -> None:
    q = state()
    assert q.head() is None
    assert list(q.heads()) == []
    assert q.ordered_pending() == []
    assert choose(q, 8) == (None, False)


# ---- held bookkeeping: assume / hold / release -----------------------------------------
def test_assume_and_release_keep_used_and_per_user_exact() -> None:
    a = P("a", 1, "bob", Resources(2, 4000, 16 * GI))
    b = P("b", 2, "bob", Resources(1, 500, GI))
    c = P("c", 3, "alice", Resources(0, 1500, 512 * 2**20))
    q = state(pending=(a, b, c))

    held = q.assume(a, (0, 1))
    assert held == HeldRun("a", "bob", a.request, (0, 1))
    assert q.pending("a") is None and q.pending_count == 2
    q.assume(b, (2,))
    q.assume(c)
    assert q.pending_count == 0
    assert q.used == Resources(3, 6000, 17 * GI + 512 * 2**20)
    assert q.per_user == {"bob": 2, "alice": 1}
    assert list(q.held) == ["a", "b", "c"]
    assert q.held["b"].devices == (2,)

    assert q.release("b") == HeldRun("b", "bob", b.request, (2,))
    assert q.used == Resources(2, 5500, 16 * GI + 512 * 2**20)
    assert q.per_user == {"bob": 1, "alice": 1}
    assert q.release("b") is None  # twice is a no-op
    assert q.release("nope") is None
    assert q.used == Resources(2, 5500, 16 * GI + 512 * 2**20)

    q.release("c")
    assert q.per_user == {"bob": 1}  # a user at zero is dropped, not kept as 0
    q.release("a")
    assert q.used == Resources()
    assert q.per_user == {}
    assert q.held == {}


def test_hold_reattaches_a_running_run() -> None:
    q = state(L(quota=Quota(gpu=2), max_per_user=1))
    q.hold(HeldRun("old", "bob", GPU2, (0, 1)))
    q.add_pending(P("r1", 5, "alice"))
    q.add_pending(P("r2", 6, "bob", CPU1))
    assert q.used == GPU2 and q.per_user == {"bob": 1}
    assert choose(q, 6) == (None, False)
    r1 = q.pending("r1")
    assert r1 is not None
    assert wait_reason(q, r1, 6).blockers == ("old",)


def test_dispatch_loop_until_blocked() -> None:
    """Dispatch as the engine does (choose → assume, repeat) and check every step."""
    q = state(
        L(concurrency=3, quota=Quota(gpu=4), max_per_user=2),
        pending=(
            P("b1", 1, "bob", GPU2),
            P("b2", 2, "bob", GPU1),
            P("b3", 3, "bob", GPU1),
            P("a1", 4, "alice", GPU2),
            P("c1", 5, "carol", GPU1),
            P("c2", 6, "carol", CPU1),
        ),
    )
    free = {0, 1, 2, 3, 4, 5, 6, 7}
    picks = []
    while True:
        run, _ = choose(q, len(free))
        if run is None:
            break
        devices = pick_devices(free, run.request.gpu)
        free -= set(devices)
        q.assume(run, devices)
        picks.append((run.id, devices))
    # b1 (2 gpu), b2 (1 gpu): bob at max_per_user; a1 needs 2 gpu with 1 left; c1 fits → concurrency 3/3
    assert picks == [("b1", (0, 1)), ("b2", (2,)), ("c1", (3,))]
    assert q.used.gpu == 4
    reasons = {r.id: wait_reason(q, r, len(free)).reason for r in q.ordered_pending()}
    assert reasons == {"b3": Reason.QUEUE_CONCURRENCY, "a1": Reason.QUEUE_CONCURRENCY, "c2": Reason.QUEUE_CONCURRENCY}
    # b1 ends: its slot, quota and devices come back
    q.release("b1")
    free |= {0, 1}
    reasons = {r.id: wait_reason(q, r, len(free)).reason for r in q.ordered_pending()}
    assert reasons == {"b3": "Admissible", "a1": "Admissible", "c2": "Admissible"}
    run, _ = choose(q, len(free))
    assert run is not None and run.id == "b3"


# ---- across queues and devices -------------------------------------------------------
def test_order_queues_priority_then_name() -> None:
    qs = [
        QueueState(QueueLimits("team-b", priority=10)),
        QueueState(QueueLimits("interactive", priority=100)),
        QueueState(QueueLimits("team-a", priority=10)),
        QueueState(QueueLimits("scavenger", priority=-5)),
        QueueState(QueueLimits("default")),
    ]
    assert [q.limits.name for q in order_queues(qs)] == ["interactive", "team-a", "team-b", "default", "scavenger"]
    assert order_queues([]) == []


@pytest.mark.parametrize(
    ("free", "n", "expected"),
    [
        ({3, 1, 2, 0}, 2, (0, 1)),
        ([5, 7, 6], 1, (5,)),
        ({0, 1}, 0, ()),
        ({4, 2}, 2, (2, 4)),
        (set(), 0, ()),
    ],
)
def test_pick_devices(free: Any, n: int, expected: tuple[int, ...]) -> None:
    assert pick_devices(free, n) == expected


# ---- scale: 10,000 pending runs in 6 groups ---------------------------------------------
def _reference_pick(q: QueueState, free: int) -> PendingRun | None:
    """The earliest pending run that fits every limit: a plain scan, independent of choose."""
    lim = q.limits
    if lim.paused or (lim.concurrency is not None and len(q.held) >= lim.concurrency):
        return None
    for r in q.ordered_pending():
        ok = (
            (lim.max_per_user is None or q.per_user.get(r.user, 0) < lim.max_per_user)
            and not lim.quota.shortfalls(q.used, r.request)
            and r.request.gpu <= free
        )
        if ok:
            return r
        if lim.ordering == "strict_fifo":
            return None
    return None


SMALL = Resources(0, 1000, 4 * GI)
BIG = Resources(2, 8000, 64 * GI)


@pytest.mark.parametrize("ordering", ["best_effort_fifo", "strict_fifo"])
def test_choose_scales_to_ten_thousand_pending(ordering: str) -> None:
    rng = random.Random(20240611)
    users = ("alice", "bob", "carol")
    shapes = (SMALL, BIG)
    q = QueueState(
        QueueLimits("big", concurrency=50, quota=Quota(8, 64000, 512 * GI), max_per_user=4, ordering=ordering)
    )
    seqs = list(range(1, 30_001))
    rng.shuffle(seqs)
    runs = sorted(
        (P(f"r{s}", s, rng.choice(users), rng.choice(shapes), "big") for s in seqs[:10_000]), key=lambda r: r.seq
    )
    for r in runs:
        q.add_pending(r)
    assert q.pending_count == 10_000
    assert len(list(q.heads())) == 6
    assert q.head() == runs[0]
    assert q.position(runs[0]) == 1 and q.position(runs[-1]) == 10_000
    assert q.position(runs[4321]) == 4322

    # alice already holds her max: none of her runs may be picked
    for i in range(4):
        q.hold(HeldRun(f"held-alice-{i}", "alice", SMALL))
    # drop 1,000 random pending runs, some from the middle of groups
    for r in rng.sample(runs, 1000):
        assert q.remove_pending(r.id) == r
    assert q.pending_count == 9_000

    free = 8
    steps = 0
    while True:
        expected = _reference_pick(q, free)
        run, _ = choose(q, free)
        assert run == expected
        if run is None:
            break
        if ordering == "best_effort_fifo":
            assert run.user != "alice"
        q.assume(run, pick_devices(range(8 - free, 8), run.request.gpu))
        free -= run.request.gpu
        steps += 1
    if ordering == "best_effort_fifo":
        assert steps >= 2  # bob and carol both get runs in while alice is at her limit
    assert q.pending_count == 9_000 - steps
    # every remaining run has a reason, and it agrees with choose having stopped
    for r in q.ordered_pending()[:50]:
        assert wait_reason(q, r, free).reason != "Admissible"


# ---- GPUs not counted by us (a cluster executor places work): free_gpus is None -------------
def test_uncounted_gpus_never_block_and_quota_still_does() -> None:
    q = state(L(quota=Quota(gpu=4)), held=(H("h", res=GPU2),), pending=(P("big", 1, res=Resources(gpu=3)), P("b", 2)))
    run, capacity_blocked = choose(q, None)
    assert (run.id if run else None, capacity_blocked) == ("b", False)  # big exceeds the quota, not capacity
    assert wait_reason(q, P("big", 1, res=Resources(gpu=3)), None).reason == Reason.QUEUE_QUOTA
    assert wait_reason(q, P("b", 2), None).reason == "Admissible"
    assert choose(q, 0) == (None, True)  # with a count of 0, the same queue is held by capacity
