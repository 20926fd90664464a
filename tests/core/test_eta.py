"""Start estimates: the platform's admission run forward over predicted durations (core.eta, core.durations).

Hand cases with fixed durations give exactly the hand-computed start; with durations drawn from a
known distribution the p90 covers the starts the same admission gives for the drawn "truth"; a run
with no basis ahead makes an estimate unknown, naming it; the predictor's similarity order and
time-limit bound.
"""

from __future__ import annotations

import random
from collections.abc import Mapping

import pytest

from jupyter_gpuplat.core.admission import FlavorLimit, HeldRun, PendingRun, QueueLimits, QueueState, SweepGate
from jupyter_gpuplat.core.durations import DurationModel, Empirical, FinishedRun, NoBasis, Prediction, RunTraits
from jupyter_gpuplat.core.eta import Eta, EtaUnknown, components, estimate
from jupyter_gpuplat.core.forward import DevicePool
from jupyter_gpuplat.core.resources import Quota, Resources
from jupyter_gpuplat.core.whatif import RecordedRun, replay


def fixed(seconds: float) -> Empirical:
    return Empirical((seconds,), "fixed")


def queue(limits: QueueLimits, held: tuple[HeldRun, ...] = (), pending: tuple[PendingRun, ...] = ()) -> QueueState:
    q = QueueState(limits)
    for h in held:
        q.hold(h)
    for p in pending:
        q.add_pending(p)
    return q


def H(rid: str, gpu: int = 1, devices: tuple[int, ...] = (), flavor: str | None = None, user: str = "ann") -> HeldRun:
    return HeldRun(rid, user, Resources(gpu=gpu), devices, None, flavor)


def P(rid: str, seq: int, q: str = "q", gpu: int = 1, flavor: str | None = None, user: str = "ann") -> PendingRun:
    return PendingRun(rid, seq, q, user, Resources(gpu=gpu), None, flavor)


def starts(result: Mapping[str, Eta | EtaUnknown]) -> dict[str, float]:
    """The p50 of each estimate, after checking that fixed durations give one value (p50 == p90)."""
    out: dict[str, float] = {}
    for rid, e in result.items():
        assert isinstance(e, Eta), (rid, e)
        assert e.p50_seconds == e.p90_seconds, (rid, e)
        out[rid] = e.p50_seconds
    return out


# ---- (a) fixed durations: the hand-computed start -----------------------------------------


def test_concurrency_each_waiting_run_starts_when_a_slot_frees() -> None:
    # Slots free at 100 (a) and 300 (b); w1 takes the first and ends at 150, w2 takes it then.
    q = queue(QueueLimits("q", concurrency=2), (H("a"), H("b")), (P("w1", 1), P("w2", 2), P("w3", 3)))
    got = estimate(
        {"q": q},
        free_devices=None,
        remaining={"a": fixed(100), "b": fixed(300)},
        durations={"w1": fixed(50), "w2": fixed(1000), "w3": fixed(10)},
    )
    assert starts(got) == {"w1": 100, "w2": 150, "w3": 300}
    assert "once (every time fixed)" in got["w1"].basis  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("ordering", "expected"),
    [
        # best effort: the small run fits beside the 2 GPUs left at 100; the big one waits for b at 400
        ("best_effort_fifo", {"big": 400, "small": 100}),
        # strict: nothing passes the big head; the small one starts when the head ends (400 + 50)
        ("strict_fifo", {"big": 400, "small": 450}),
    ],
)
def test_quota_strict_and_best_effort_fifo(ordering: str, expected: dict[str, float]) -> None:
    lim = QueueLimits("q", quota=Quota(gpu=4), ordering=ordering)
    q = queue(lim, (H("a", gpu=2), H("b", gpu=2)), (P("big", 1, gpu=4), P("small", 2, gpu=1)))
    got = estimate(
        {"q": q},
        free_devices=None,
        remaining={"a": fixed(100), "b": fixed(400)},
        durations={"big": fixed(50), "small": fixed(10)},
    )
    assert starts(got) == expected


def test_runs_waiting_now_that_fit_start_at_zero_and_per_user_limit_holds() -> None:
    lim = QueueLimits("q", max_per_user=1)
    q = queue(lim, (H("a", user="ann"),), (P("ann2", 1, user="ann"), P("bob1", 2, user="bob")))
    got = estimate(
        {"q": q}, free_devices=None, remaining={"a": fixed(70)}, durations={"ann2": fixed(5), "bob1": fixed(5)}
    )
    assert starts(got) == {"ann2": 70, "bob1": 0}


def test_local_devices_go_to_the_higher_priority_queue_first() -> None:
    # Four devices, all held. At 100 two free: `hi` takes them though `lo` waited longer; `lo` at 150.
    lo = queue(QueueLimits("lo", priority=0), (H("a", 2, (0, 1)),), (P("l1", 1, "lo", gpu=2),))
    hi = queue(QueueLimits("hi", priority=10), (H("b", 2, (2, 3)),), (P("h1", 2, "hi", gpu=2),))
    got = estimate(
        {"lo": lo, "hi": hi},
        free_devices=(),
        remaining={"a": fixed(100), "b": fixed(200)},
        durations={"l1": fixed(500), "h1": fixed(50)},
    )
    assert starts(got) == {"h1": 100, "l1": 150}


def test_flavors_each_run_waits_for_its_flavor_quota_and_devices() -> None:
    typed = {0: "h100", 1: "h100", 2: "a100", 3: "a100", 4: "a100", 5: "a100"}
    lim = QueueLimits("q", flavors=(FlavorLimit("h100", Quota(gpu=2)), FlavorLimit("a100", Quota(gpu=4))))
    held = (H("x", 2, (0, 1), "h100"), H("y", 4, (2, 3, 4, 5), "a100"))
    # w1 asks for h100, w2 takes either (first where it fits), w3 asks for a100.
    pending = (P("w1", 1, flavor="h100"), P("w2", 2, gpu=2), P("w3", 3, flavor="a100"))
    got = estimate(
        {"q": queue(lim, held, pending)},
        free_devices=(),
        typed=typed,
        remaining={"x": fixed(100), "y": fixed(300)},
        durations={"w1": fixed(60), "w2": fixed(10), "w3": fixed(5)},
    )
    # At 100 h100 frees: w1 takes one (w2 needs 2: h100's quota 1+2 > 2, a100 full);
    # w2 on h100 at 160; w3 on a100 at 300.
    assert starts(got) == {"w1": 100, "w2": 160, "w3": 300}


def test_a_sweep_gate_holds_its_children_to_its_concurrency() -> None:
    q = queue(QueueLimits("q"))
    q.gates["s"] = SweepGate(concurrency=1)
    q.hold(HeldRun("c1", "ann", Resources(gpu=1), (), "s"))
    for i in (2, 3):
        q.add_pending(PendingRun(f"c{i}", i, "q", "ann", Resources(gpu=1), "s"))
    got = estimate(
        {"q": q}, free_devices=None, remaining={"c1": fixed(30)}, durations={"c2": fixed(30), "c3": fixed(1)}
    )
    assert starts(got) == {"c2": 30, "c3": 60}


def test_the_snapshot_is_not_changed_and_the_answer_is_reproducible() -> None:
    q = queue(QueueLimits("q", concurrency=1), (H("a"),), (P("w1", 1), P("w2", 2)))
    spread = Empirical((10.0, 20.0, 40.0, 80.0), "history")
    args = {"free_devices": None, "remaining": {"a": spread}, "durations": {"w1": spread, "w2": spread}}
    first = estimate({"q": q}, **args)  # type: ignore[arg-type]
    assert estimate({"q": q}, **args) == first  # type: ignore[arg-type]
    assert set(q.held) == {"a"} and [p.id for p in q.ordered_pending()] == ["w1", "w2"]
    w1, w2 = first["w1"], first["w2"]
    assert isinstance(w1, Eta) and isinstance(w2, Eta)
    assert 10 <= w1.p50_seconds <= w1.p90_seconds <= 80 and w2.p50_seconds > w1.p50_seconds
    assert "over 100 scenarios" in w1.basis


@pytest.mark.parametrize("seed", range(25))
def test_fixed_durations_give_the_starts_the_what_if_replay_gives(seed: int) -> None:
    """The same admission forward as what-if: a replay whose arrivals all come now dispatches each at its estimate."""
    rng = random.Random(seed)
    devices = rng.choice((None, 6))
    limits = [
        QueueLimits(
            n,
            priority=rng.randint(0, 2),
            concurrency=rng.choice((None, 2, 3)),
            quota=Quota(gpu=rng.choice((None, 4, 6))),
            max_per_user=rng.choice((None, 1, 2)),
            ordering=rng.choice(("best_effort_fifo", "strict_fifo")),
        )
        for n in ("a", "b", "c")
    ]
    qs = {lim.name: QueueState(lim) for lim in limits}
    recorded: list[RecordedRun] = []
    times: dict[str, Prediction] = {}
    free = set(range(devices or 0))
    for seq in range(12):
        lim, user, gpu, t = rng.choice(limits), rng.choice(("ann", "bob")), rng.randint(1, 2), rng.randint(1, 5) * 10
        rid = f"r{seq}"
        q = qs[lim.name]
        # held now (as what-if's runs dispatched before the period), ending at t
        if seq < 4 and (devices is None or len(free) >= gpu):
            d = tuple(sorted(free)[:gpu]) if devices else ()
            free -= set(d)
            q.hold(HeldRun(rid, user, Resources(gpu=gpu), d))
            recorded.append(RecordedRun(rid, seq, lim.name, "p", user, Resources(gpu=gpu), -1.0, -1.0, float(t)))
        else:  # waiting now, holding for t once dispatched
            q.add_pending(PendingRun(rid, seq, lim.name, user, Resources(gpu=gpu)))
            recorded.append(RecordedRun(rid, seq, lim.name, "p", user, Resources(gpu=gpu), 0.0, 0.0, float(t)))
        times[rid] = fixed(t)
    got = estimate(qs, free_devices=free if devices else None, remaining=times, durations=times)
    rp = replay(recorded, limits, devices=devices, since=0.0, until=1e9)
    expected = {rid: o.dispatched_at for rid, o in rp.outcomes.items()}
    assert {rid: e.p50_seconds if isinstance(e, Eta) else None for rid, e in got.items()} == expected


# ---- incremental: groups of queues that share nothing are estimated apart ------------------


def test_components_split_queues_that_share_no_devices() -> None:
    a = queue(QueueLimits("a"), (H("x", 1, (0,)),), (P("p", 1, "a"),))
    b = queue(QueueLimits("b"), (), (P("r", 2, "b"),))
    cpu = queue(QueueLimits("cpu"), (), (P("c", 3, "cpu", gpu=0),))
    qs = {"a": a, "b": b, "cpu": cpu}
    # On a cluster (no devices of ours) every queue stands alone.
    assert components(qs, DevicePool(None)) == [("a",), ("b",), ("cpu",)]
    # Local untyped devices couple the queues that use GPUs; a CPU-only queue stays apart.
    assert components(qs, DevicePool({1})) == [("a", "b"), ("cpu",)]
    # Typed devices: queues offering disjoint flavors are apart.
    typed = {0: "h100", 1: "a100"}
    fa = queue(QueueLimits("fa", flavors=(FlavorLimit("h100", Quota()),)), (), (P("p", 1, "fa"),))
    fb = queue(QueueLimits("fb", flavors=(FlavorLimit("a100", Quota()),)), (), (P("r", 2, "fb"),))
    assert components({"fa": fa, "fb": fb}, DevicePool({0, 1}, typed)) == [("fa",), ("fb",)]


def test_queues_that_can_never_hold_more_gpus_than_the_machine_has_are_apart() -> None:
    """Quotas (or concurrency times the largest request) summing to at most the machine's devices: devices
    never hold a run back, so no queue waits on another's; one GPU more and they are coupled again."""
    a = queue(QueueLimits("a", quota=Quota(gpu=2)), (H("x", 1, (0,)),), (P("p", 1, "a"),))
    b = queue(QueueLimits("b", concurrency=1), (), (P("r", 2, "b", gpu=2),))
    qs = {"a": a, "b": b}
    assert components(qs, DevicePool({1, 2, 3})) == [("a",), ("b",)]  # 2 + 1 x 2 <= 4 devices
    assert components(qs, DevicePool({1, 2})) == [("a", "b")]  # 4 > 3 devices
    unbounded = queue(QueueLimits("u"), (), (P("s", 3, "u"),))
    assert components({**qs, "u": unbounded}, DevicePool(set(range(1, 100)))) == [("a", "b", "u")]


def test_only_recomputes_the_groups_of_the_changed_queues_with_the_same_answer() -> None:
    spread = Empirical((10.0, 30.0, 90.0), "history")
    qs = {
        n: queue(QueueLimits(n, concurrency=1), (H(f"{n}-h"),), (P(f"{n}-1", i), P(f"{n}-2", i + 10)))
        for i, n in enumerate(("a", "b", "c"))
    }
    times = {rid: spread for q in qs.values() for rid in (*q.held, *(p.id for p in q.ordered_pending()))}
    whole = estimate(qs, free_devices=None, remaining=times, durations=times)
    part = estimate(qs, free_devices=None, remaining=times, durations=times, only=["b"])
    assert set(part) == {"b-1", "b-2"}
    assert part == {k: whole[k] for k in part}


# ---- (b) durations from a known distribution: p90 covers the starts ----------------------


def _true_duration(rng: random.Random, limit: float, elapsed: float = 0.0) -> float:
    """The known distribution (log-normal, killed at the limit), conditioned on having run `elapsed`."""
    while True:
        d = min(rng.lognormvariate(5.0, 0.8), limit)
        if d > elapsed:
            return d - elapsed


def test_p90_covers_at_least_85_percent_of_starts_over_many_seeds() -> None:
    limit = 3600.0
    hits90 = hits50 = total = 0
    for seed in range(60):
        rng = random.Random(seed)
        model = DurationModel.from_history(
            FinishedRun(f"old-{i}", _true_duration(rng, limit), "ann", "gpu1", "train.py") for i in range(40)
        )
        traits = {rid: RunTraits(rid, "ann", "gpu1", "train.py", None, limit) for rid in ("h1", "h2", "h3")}
        elapsed = {"h1": 30.0, "h2": 200.0, "h3": 0.0}
        waiting = [P(f"w{i}", i, gpu=1 + i % 2) for i in range(6)]
        lim = QueueLimits(
            "q", concurrency=3, quota=Quota(gpu=5), ordering=("strict_fifo", "best_effort_fifo")[seed % 2]
        )
        q = queue(lim, (H("h1"), H("h2", gpu=2), H("h3")), tuple(waiting))
        for p in waiting:
            traits[p.id] = RunTraits(p.id, "ann", "gpu1", "train.py", None, limit)
        remaining: dict[str, Prediction] = {h: model.remaining(traits[h], e) for h, e in elapsed.items()}
        durations: dict[str, Prediction] = {p.id: model.predict(traits[p.id]) for p in waiting}
        got = estimate({"q": q}, free_devices=None, remaining=remaining, durations=durations, scenarios=100, seed=seed)
        # The truth: actual durations drawn from the known distribution, the same admission run forward.
        truth = starts(
            estimate(
                {"q": q},
                free_devices=None,
                remaining={h: fixed(_true_duration(rng, limit, e)) for h, e in elapsed.items()},
                durations={p.id: fixed(_true_duration(rng, limit)) for p in waiting},
            )
        )
        for rid, actual in truth.items():
            e = got[rid]
            assert isinstance(e, Eta)
            total += 1
            hits90 += actual <= e.p90_seconds
            hits50 += actual <= e.p50_seconds
    assert hits90 / total >= 0.85
    # Not covered by being useless: a p90 far above every start would cover them all, and p50 is a median.
    assert hits90 / total <= 0.97
    assert 0.35 <= hits50 / total <= 0.65


# ---- (c) no basis: unknown, with the reason naming the run ---------------------------------


def test_an_unbounded_run_holding_the_slot_makes_the_waiting_run_unknown() -> None:
    model = DurationModel()
    blocker = model.remaining(RunTraits("r-9f2", "ann"), 600.0)
    assert blocker == NoBasis("r-9f2 has no time limit and no history")
    q = queue(QueueLimits("q", concurrency=1), (H("r-9f2"),), (P("w", 1),))
    got = estimate({"q": q}, free_devices=None, remaining={"r-9f2": blocker}, durations={"w": fixed(10)})
    assert got == {"w": EtaUnknown("r-9f2 has no time limit and no history")}
    assert got["w"].text == "unknown: r-9f2 has no time limit and no history"  # type: ignore[union-attr]


def test_an_unbounded_waiting_run_ahead_gets_an_estimate_and_those_behind_it_are_unknown() -> None:
    q = queue(QueueLimits("q", concurrency=1), (H("a"),), (P("r-u", 1), P("w", 2)))
    none = NoBasis("r-u has no time limit and no history")
    got = estimate({"q": q}, free_devices=None, remaining={"a": fixed(100)}, durations={"r-u": none, "w": fixed(5)})
    assert got["r-u"] == Eta(100, 100, got["r-u"].basis)  # type: ignore[union-attr]
    assert got["w"] == EtaUnknown("r-u has no time limit and no history")


def test_unbounded_holders_of_devices_and_strict_heads_are_named() -> None:
    # Another queue's unbounded run holds the only devices: the wait is capacity, the reason names it.
    other = queue(QueueLimits("other"), (H("r-x", 2, (0, 1)),))
    q = queue(QueueLimits("q", ordering="strict_fifo"), (), (P("head", 1, gpu=2), P("small", 2)))
    got = estimate(
        {"other": other, "q": q},
        free_devices=(),
        remaining={"r-x": NoBasis("r-x has no time limit and no history")},
        durations={"head": fixed(5), "small": fixed(5)},
    )
    # The small run is behind the strict head: the head's blocker is its blocker.
    assert got == {
        "head": EtaUnknown("r-x has no time limit and no history"),
        "small": EtaUnknown("r-x has no time limit and no history"),
    }


def test_a_paused_queue_is_unknown_with_its_own_message() -> None:
    q = queue(QueueLimits("q", paused=True), (), (P("w", 1),))
    got = estimate({"q": q}, free_devices=None, remaining={}, durations={"w": fixed(5)})
    assert got == {"w": EtaUnknown("queue q is paused")}


def test_a_bounded_blocker_is_never_unknown_even_if_some_scenarios_run_long() -> None:
    q = queue(QueueLimits("q", concurrency=1), (H("a"),), (P("w", 1),))
    got = estimate(
        {"q": q}, free_devices=None, remaining={"a": Empirical((1.0, 1e6), "history")}, durations={"w": fixed(1)}
    )
    assert isinstance(got["w"], Eta) and got["w"].p90_seconds == 1e6


# ---- (d) the predictor: similarity order, time limit, elapsed time --------------------------


def _history() -> DurationModel:
    runs = [
        *(FinishedRun(f"s{i}", 10 + i, "ann", "gpu1", "sweep.py", "sweep-1") for i in range(3)),
        *(FinishedRun(f"u{i}", 100 + i, "ann", "gpu1", "train.py") for i in range(3)),
        *(FinishedRun(f"c{i}", 1000 + i, "bob", "gpu1", "train.py") for i in range(3)),
        *(FinishedRun(f"p{i}", 5000 + i, "bob", "gpu1", "eval.py") for i in range(3)),
    ]
    return DurationModel.from_history(runs)


@pytest.mark.parametrize(
    ("traits", "values", "level"),
    [
        (RunTraits("r", "ann", "gpu1", "sweep.py", "sweep-1"), (10, 11, 12), "the same sweep"),
        (RunTraits("r", "ann", "gpu1", "train.py"), (100, 101, 102), "the same preset, command and user"),
        # another user: the same preset and command, everyone's (ann's and bob's)
        (RunTraits("r", "eve", "gpu1", "train.py"), (100, 101, 102, 1000, 1001, 1002), "the same preset and command"),
        (RunTraits("r", "eve", "gpu1", "infer.py"), (10, 11, 12, 100, 101, 102, 1000, 1001, 1002, 5000, 5001, 5002),
         "the same preset"),
    ],
)  # fmt: skip
def test_the_most_similar_runs_win(traits: RunTraits, values: tuple[float, ...], level: str) -> None:
    p = _history().predict(traits)
    assert p == Empirical(tuple(float(v) for v in values), f"{len(values)} finished runs of {level}")


def test_too_few_similar_runs_fall_back_to_a_wider_level_and_only_the_latest_count() -> None:
    sweep = FinishedRun("s", 7, "ann", "gpu1", "a.py", "sw")
    m = DurationModel.from_history([sweep, *(FinishedRun(f"x{i}", i, "ann", "gpu1", "a.py") for i in range(60))])
    # The sweep has one run (< 3): the same preset+command+user level, only its latest 50 (x10..x59).
    p = m.predict(RunTraits("r", "ann", "gpu1", "a.py", "sw"))
    assert p == Empirical(
        tuple(float(i) for i in range(10, 60)), "50 finished runs of the same preset, command and user"
    )
    # With nothing wider, one similar run is still a basis.
    alone = DurationModel.from_history([FinishedRun("s", 7, "ann", None, None, "sw")])
    assert alone.predict(RunTraits("r", "ann", None, None, "sw")) == Empirical(
        (7.0,), "1 finished runs of the same sweep"
    )


def test_the_time_limit_bounds_every_value_and_alone_is_the_basis() -> None:
    m = _history()
    p = m.predict(RunTraits("r", "bob", "gpu1", "eval.py", timeout_seconds=5001))
    assert p == Empirical((5000.0, 5001.0, 5001.0), "3 finished runs of the same preset, command and user")
    assert m.predict(RunTraits("r", "bob", "other", "x.py", timeout_seconds=900)) == Empirical(
        (900.0,), "its time limit (900 s)", from_history=False
    )
    assert m.predict(RunTraits("r-7", "bob", "other", "x.py")) == NoBasis("r-7 has no time limit and no history")


def test_remaining_time_is_conditioned_on_the_elapsed_time() -> None:
    m = _history()
    ann = RunTraits("r-1", "ann", "gpu1", "train.py")
    assert m.remaining(ann, 100.5) == Empirical((0.5, 1.5), "3 finished runs of the same preset, command and user")
    # Ran longer than every similar run: with no limit there is no basis; with one, what is left of it.
    assert m.remaining(ann, 200) == NoBasis("r-1 has no time limit and has run longer than its 3 similar finished runs")
    limited = RunTraits("r-1", "ann", "gpu1", "train.py", timeout_seconds=300)
    assert m.remaining(limited, 200) == Empirical((100.0,), "its time limit (300 s)", from_history=False)


# ---- the fixed-order shortcuts answer as the general simulation does ------------------------


@pytest.mark.parametrize("seed", range(80))
def test_fixed_order_shortcuts_equal_the_general_simulation(seed: int) -> None:
    """A queue whose admission order is fixed is simulated by slots (core.eta._slot_scenarios: only its
    concurrency binds) or with its quota counted (_quota_scenarios: strict FIFO, or every waiting run asking
    the same). The same queue with a per-user limit no run can reach takes the general path (`decide` per
    event): the answers, which rest on the same draws, must be identical — stuck runs, out-of-order groups,
    binding quotas and all."""
    rng = random.Random(seed)
    users = ["ann", "bob", "cy"][: rng.randint(1, 3)]
    uniform = rng.random() < 0.4
    size = rng.randint(1, 2)
    held = tuple(H(f"h{i}", gpu=rng.randint(0, 2), user=rng.choice(users)) for i in range(rng.randint(0, 4)))
    order = rng.sample(range(1, 60), rng.randint(1, 25))  # groups get runs out of submission order
    pending = tuple(P(f"w{s}", s, gpu=size if uniform else rng.randint(1, 2), user=rng.choice(users)) for s in order)
    concurrency = rng.choice([None, 1, 2, 3, 4])
    quota = rng.choice([Quota(), Quota(gpu=rng.randint(2, 6)), Quota(gpu=2 * (concurrency or 2))])
    ordering = rng.choice(["best_effort_fifo", "strict_fifo"])

    def draws() -> Prediction:
        roll = rng.random()
        if roll < 0.08:
            return NoBasis("no basis")
        if roll < 0.3:
            return fixed(rng.choice([30.0, 60.0, 90.0]))
        return Empirical(tuple(sorted(rng.uniform(10, 200) for _ in range(rng.randint(2, 6)))), "history")

    remaining = {h.id: draws() for h in held}
    durations = {p.id: draws() for p in pending}

    def answer(max_per_user: int | None) -> dict[str, Eta | EtaUnknown]:
        limits = QueueLimits("q", concurrency=concurrency, quota=quota, max_per_user=max_per_user, ordering=ordering)
        q = queue(limits, held, pending)
        return estimate({"q": q}, free_devices=None, remaining=remaining, durations=durations, scenarios=20, seed=3)

    assert answer(None) == answer(10_000)
