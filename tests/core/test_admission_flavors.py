"""Admission per flavor: a run goes on the first of its queue's flavors where it fits, or on the one it asked for."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from jupyter_gpuplat.core.admission import (
    FlavorLimit,
    HeldRun,
    PendingRun,
    QueueLimits,
    QueueState,
    decide,
    flavor_waits,
    holding_flavor,
    pick_devices,
    wait_reason,
)
from jupyter_gpuplat.core.resources import Quota, Resources
from jupyter_gpuplat.core.status import Reason

GPU1 = Resources(gpu=1)
GPU2 = Resources(gpu=2)
FLAVORS = (FlavorLimit("h100", Quota(gpu=2)), FlavorLimit("a100", Quota(gpu=4)))


def P(run_id: str, seq: int, flavor: str | None = None, res: Resources = GPU1, user: str = "bob") -> PendingRun:
    return PendingRun(run_id, seq, "q", user, res, None, flavor)


def H(run_id: str, flavor: str | None, res: Resources = GPU1, user: str = "bob") -> HeldRun:
    return HeldRun(run_id, user, res, (), None, flavor)


def state(held: tuple[HeldRun, ...] = (), pending: tuple[PendingRun, ...] = (), **kw: object) -> QueueState:
    q = QueueState(QueueLimits("q", flavors=FLAVORS, **kw))  # type: ignore[arg-type]
    for h in held:
        q.hold(h)
    for p in pending:
        q.add_pending(p)
    return q


@dataclass
class Case:
    held: tuple[HeldRun, ...]
    pending: tuple[PendingRun, ...]
    free: dict[str, int] | None
    pick: str | None
    flavor: str | None = None
    capacity: bool = False


CASES = {
    "the first flavor first": Case((), (P("a", 1),), None, "a", "h100"),
    "the next when the first is full": Case((H("x", "h100"), H("y", "h100")), (P("a", 1),), None, "a", "a100"),
    "a run asking h100 waits while a100 is free": Case((H("x", "h100", GPU2),), (P("a", 1, "h100"),), None, None),
    "and a later run for any goes on a100": Case(
        (H("x", "h100", GPU2),), (P("a", 1, "h100"), P("b", 2)), None, "b", "a100"
    ),
    "asking a100 skips free h100": Case((), (P("a", 1, "a100"),), None, "a", "a100"),
    "every flavor full": Case((H("x", "h100", GPU2), H("y", "a100", Resources(gpu=4))), (P("a", 1),), None, None),
    "local: no free h100 device, a100 has one": Case((), (P("a", 1),), {"h100": 0, "a100": 1}, "a", "a100"),
    "local: no free device of its flavor": Case(
        (), (P("a", 1, "h100"),), {"h100": 0, "a100": 4}, None, None, capacity=True
    ),
    "local: a run of 2 fits only where 2 are free": Case(
        (), (P("a", 1, None, GPU2),), {"h100": 1, "a100": 2}, "a", "a100"
    ),
    "a flavor the queue does not offer": Case((), (P("a", 1, "l4"),), None, None),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_decide_per_flavor(case: Case) -> None:
    q = state(case.held, case.pending)
    free_gpus = sum(case.free.values()) if case.free is not None else None
    d = decide(q, free_gpus, case.free)
    assert (d.run.id if d.run else None, d.flavor, d.capacity_blocked) == (case.pick, case.flavor, case.capacity)


def test_assume_holds_the_decided_flavor_and_release_gives_it_back() -> None:
    q = state((), (P("a", 1), P("b", 2), P("c", 3), P("d", 4)))
    got = []
    while (d := decide(q, None)).run is not None:
        q.assume(d.run, (), d.flavor)
        got.append((d.run.id, d.flavor))
    # h100's quota 2, then a100's; never more than each quota
    assert got == [("a", "h100"), ("b", "h100"), ("c", "a100"), ("d", "a100")]
    assert q.used_by_flavor == {"h100": GPU2, "a100": GPU2}
    assert q.used == Resources(gpu=4)
    q.release("a")
    assert q.used_by_flavor == {"h100": GPU1, "a100": GPU2}
    q.release("b")
    assert "h100" not in q.used_by_flavor


def test_the_queue_s_limits_hold_every_flavor() -> None:
    q = state((H("x", "h100"),), (P("a", 1),), concurrency=1)
    assert decide(q, None).run is None
    waits = flavor_waits(q, q.pending("a"), None)  # type: ignore[arg-type]
    assert [(n, w.reason) for n, w in waits] == [("h100", Reason.QUEUE_CONCURRENCY), ("a100", Reason.QUEUE_CONCURRENCY)]


def test_a_wait_per_flavor_with_its_numbers() -> None:
    q = state((H("x", "h100", GPU2), H("y", "a100", Resources(gpu=4))), (P("a", 1, None, GPU1),))
    p = q.pending("a")
    assert p is not None
    waits = flavor_waits(q, p, None)
    assert [(n, w.reason, w.message, w.blockers, w.numbers) for n, w in waits] == [
        (
            "h100",
            Reason.QUEUE_QUOTA,
            "h100: 2/2 in use (1 more needed) (queue q's h100 quota)",
            ("x",),
            {"used": 2, "requested": 1, "limit": 2},
        ),
        (
            "a100",
            Reason.QUEUE_QUOTA,
            "a100: 4/4 in use (1 more needed) (queue q's a100 quota)",
            ("y",),
            {"used": 4, "requested": 1, "limit": 4},
        ),
    ]
    # The run's own reason and message: its first flavor's
    w = wait_reason(q, p, None)
    assert (w.reason, w.message) == (Reason.QUEUE_QUOTA, waits[0][1].message)


def test_asking_h100_waits_with_h100_s_wait_only_while_a100_is_free() -> None:
    q = state((), (P("a", 1, "h100"),))
    free = {"h100": 0, "a100": 4}
    p = q.pending("a")
    assert p is not None
    waits = flavor_waits(q, p, 4, free)
    assert [(n, w.reason, w.message) for n, w in waits] == [
        ("h100", Reason.NO_CAPACITY, "h100: needs 1 GPU(s); 0 free of flavor h100 on this machine")
    ]
    assert wait_reason(q, p, 4, free).reason == Reason.NO_CAPACITY


def test_a_run_for_a_flavor_not_offered_says_which_are() -> None:
    q = state((), (P("a", 1, "l4"),))
    p = q.pending("a")
    assert p is not None
    assert wait_reason(q, p, None).message == "queue q does not offer flavor l4 (it offers: h100, a100)"


def test_the_flavor_is_part_of_the_group_key() -> None:
    q = state((), (P("a", 1, "h100"), P("b", 2, "h100"), P("c", 3), P("d", 4)))
    assert len(list(q.heads())) == 2


def test_devices_of_the_flavor() -> None:
    typed = {0: "h100", 1: "h100", 2: "a100", 3: "a100"}
    assert pick_devices({0, 1, 2, 3}, 1, "a100", typed) == (2,)
    assert pick_devices({1, 3}, 2, "h100", typed) == (1,)
    assert pick_devices({1, 3}, 2) == (1, 3)


def test_the_flavor_holding_a_run_is_the_first_it_may_use() -> None:
    """What-if counts a wait against this flavor's limit; a limit of the whole queue names none."""
    full = (H("x", "h100", GPU2), H("y", "a100", Resources(gpu=4)))
    assert holding_flavor(state(full), P("a", 1), None) == "h100"  # any: held on both, the first is named
    assert holding_flavor(state(full), P("a", 1, "a100"), None) == "a100"
    assert holding_flavor(state((H("x", "h100", GPU2),)), P("a", 1), None) is None  # it fits on a100
    assert holding_flavor(state(full, concurrency=2), P("a", 1), None) is None  # the queue's concurrency holds it
    # locally, the flavor's free devices: h100 has quota left but no device
    assert holding_flavor(state(), P("a", 1, "h100"), 4, {"h100": 0, "a100": 4}) == "h100"
    assert holding_flavor(QueueState(QueueLimits("plain")), P("a", 1), 0) is None  # no flavors
