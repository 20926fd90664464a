"""What-if limits: a history made by the engine (FakeExecutor, FakeClock) replayed through core.admission.

Unchanged settings reproduce the recorded dispatch order and waits exactly; raised concurrency
predicts the hand-computed waits; the answer names only the caller's projects' runs.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from jupyter_gpuplat.core.errors import InvalidInput, NotFound
from jupyter_gpuplat.core.whatif import percentile
from jupyter_gpuplat.engine.whatif import what_if
from jupyter_gpuplat.executors.fake import FakeClusterExecutor, FakeExecutor, Script
from jupyter_gpuplat.service.whatif_handler import WhatIfRequest, WhatIfResponse

from ..fake_engine import Harness, config

Make = Callable[..., Any]
BUSY = "team-a-train"


@pytest.fixture
def make(tmp_path: Path, jp_asyncio_loop: asyncio.AbstractEventLoop) -> Iterator[Make]:
    made: list[Harness] = []

    async def _make(queues: list[dict[str, Any]], ex: FakeExecutor) -> Harness:
        (tmp_path / f"h{len(made)}").mkdir()
        h = Harness(tmp_path / f"h{len(made)}", ex)
        made.append(h)
        return await h.start(config(queues))

    yield _make
    for h in made:
        jp_asyncio_loop.run_until_complete(h.close())


async def _busy_week(make: Make) -> tuple[Harness, float, dict[str, str]]:
    """A (0) B (0) C (0) D (0) E (30) in the busy queue; F elsewhere; D is another project's."""
    durations = {"A": 100, "B": 100, "C": 50, "D": 50, "E": 20, "F": 10}
    ex = FakeExecutor(gpus=8, scripts={n: Script.succeeds(after=d) for n, d in durations.items()})
    h = await make([{"name": BUSY, "concurrency": 2}, {"name": "interactive"}], ex)
    t0 = h.clock()
    ids = {n: h.submit(queue=BUSY, name=n) for n in "ABC"}
    ids["D"] = h.submit("dave", queue=BUSY, name="D", project="other")
    ids["F"] = h.submit(queue="interactive", name="F")
    await h.settle()
    await h.advance(30)
    ids["E"] = h.submit(queue=BUSY, name="E")
    await h.settle()
    for step in (70, 50, 20, 30):
        await h.advance(step)
    assert h.statuses(*ids.values()) == ["succeeded"] * 6
    return h, t0, ids


def _waits(out: dict[str, Any], side: str) -> dict[str, float]:
    return {r["id"]: r[f"{side}_wait_seconds"] for r in out["runs"]}


async def test_unchanged_settings_reproduce_the_record(make: Make) -> None:
    h, t0, ids = await _busy_week(make)
    out = what_if(h.engine, "ops", {}, t0 - 1, t0 + 200, [BUSY, "interactive"])
    WhatIfResponse.model_validate(out)
    name = {v: k for k, v in ids.items()}
    observed = {name[r["id"]]: r["observed_wait_seconds"] for r in out["runs"]}
    assert observed == {"A": 0, "B": 0, "C": 100, "D": 100, "E": 120, "F": 0}
    assert _waits(out, "predicted") == _waits(out, "observed")
    for r in out["runs"]:
        assert r["predicted_dispatched_at"] == r["observed_dispatched_at"]
    # The recorded dispatch order (event ids of the `dispatched` events) is the replay's.
    events = sorted(
        (e["id"], rid) for rid in ids.values() for e in h.store.get_run(rid)["timeline"] if e["status"] == "dispatched"
    )
    assert out["predicted_order"] == [rid for _, rid in events]
    busy = out["queues"][0]
    assert busy["observed"] == busy["predicted"]
    # No flavors on this platform: nothing per flavor, and the binding limit is named as before.
    assert busy["flavors"] == [] and busy["settings"]["flavors"] == [] and busy["predicted_binding_flavor"] is None
    assert busy["predicted_binding_text"] == "its concurrency (concurrency)"
    assert busy["observed"]["wait_p50_seconds"] == 100  # nearest rank over 0, 0, 100, 100, 120
    assert busy["observed"]["wait_p90_seconds"] == 120
    assert busy["observed"]["gpu_hours"] == pytest.approx(320 / 3600)
    assert busy["allowance_gpu_hours"] == pytest.approx(8 * 201 / 3600)  # no GPU quota: the 8 devices
    assert any("durations" in a for a in out["assumptions"])
    assert not out["runs_truncated"]
    two = what_if(h.engine, "ops", {}, t0 - 1, t0 + 200, [BUSY], max_run_rows=2)
    assert [r["id"] for r in two["runs"]] == [ids["A"], ids["B"]] and two["runs_truncated"]


async def test_raising_concurrency_to_4_predicts_hand_computed_waits(make: Make) -> None:
    h, t0, ids = await _busy_week(make)
    out = what_if(h.engine, "ops", {BUSY: {"concurrency": 4}}, t0 - 1, t0 + 200)
    assert [q["name"] for q in out["queues"]] == [BUSY]
    assert out["queues"][0]["settings"]["concurrency"] == 4
    assert out["queues"][0]["observed_settings"]["concurrency"] == 2
    name = {v: k for k, v in ids.items()}
    predicted = {name[r["id"]]: r["predicted_wait_seconds"] for r in out["runs"]}
    # A B C D start at 0; E arrives at 30 with four running, starts when C and D end at 50.
    assert predicted == {"A": 0, "B": 0, "C": 0, "D": 0, "E": 20}
    pred = out["queues"][0]["predicted"]
    assert (pred["wait_p50_seconds"], pred["wait_p99_seconds"], pred["wait_mean_seconds"]) == (0, 20, 4)
    assert pred["gpu_hours"] == pytest.approx(320 / 3600)  # durations unchanged
    # concurrency 1: A 0-100, B 100-200, C 200-250, D 250-300, E 300-320 (censored at 200)
    one = what_if(h.engine, "ops", {BUSY: {"concurrency": 1}}, t0 - 1, t0 + 200)
    predicted = {name[r["id"]]: r["predicted_wait_seconds"] for r in one["runs"]}
    assert predicted == {"A": 0, "B": 100, "C": 200, "D": 200, "E": 170}
    assert one["queues"][0]["predicted"]["waiting_at_end"] == 2  # D and E
    # Waiting at the end: no predicted dispatch after `until` (the replay stops there), wait counted to the end
    late = {name[r["id"]]: r["predicted_dispatched_at"] for r in one["runs"] if name[r["id"]] in "DE"}
    assert late == {"D": None, "E": None}
    assert {name[i] for i in one["predicted_order"]} == {"A", "B", "C"}
    assert all(r["predicted_dispatched_at"] is None or r["predicted_dispatched_at"] <= t0 + 200 for r in one["runs"])
    # max_per_user 1 with concurrency 4: bob's A first, dave's D; bob's B waits for A, C for B
    per_user = what_if(h.engine, "ops", {BUSY: {"concurrency": 4, "max_per_user": 1}}, t0 - 1, t0 + 400)
    predicted = {name[r["id"]]: r["predicted_wait_seconds"] for r in per_user["runs"]}
    assert predicted == {"A": 0, "B": 100, "C": 200, "D": 0, "E": 220}


async def test_members_see_only_their_projects_runs(make: Make) -> None:
    h, t0, ids = await _busy_week(make)
    out = what_if(h.engine, "dave", {BUSY: {"concurrency": 4}}, t0 - 1, t0 + 200)
    assert [r["id"] for r in out["runs"]] == [ids["D"]]
    assert {r["user"] for r in out["runs"]} == {"dave"}
    assert out["hidden_runs"] == 4
    assert out["predicted_order"] == [ids["D"]]
    # GET insights' rule: the figures count the caller's projects' runs (the others still compete in the replay)
    dave = out["queues"][0]
    assert dave["runs"] == 1 and dave["observed"]["gpu_hours"] == pytest.approx(50 / 3600)
    assert dave["observed"]["wait_p50_seconds"] == 100 and dave["predicted"]["wait_p50_seconds"] == 0
    with pytest.raises(NotFound, match="queue 'nope' not found"):
        what_if(h.engine, "dave", {"nope": {"concurrency": 1}}, t0 - 1, t0 + 200)
    with pytest.raises(InvalidInput, match="concurrency"):
        what_if(h.engine, "ops", {BUSY: {"concurrency": -1}}, t0 - 1, t0 + 200)
    with pytest.raises(InvalidInput, match="must be after"):
        what_if(h.engine, "ops", {}, t0, t0)


async def test_outsiders_may_not_replay_a_queue(make: Make) -> None:
    ex = FakeExecutor(gpus=2)
    h = await make([{"name": BUSY}], ex)
    h.engine.apply_config(
        config([{"name": BUSY}, {"name": "private"}], projects=[
            {"name": "p", "members": {"bob": "member"}, "allowed_queues": [BUSY]},
            {"name": "q", "members": {"zed": "member"}, "allowed_queues": ["private"]},
        ]),
        source="test", by="test",
    )  # fmt: skip
    # A queue that exists but is not the caller's is answered like an unknown one, as GET insights does.
    for name in ("private", "nope"):
        with pytest.raises(NotFound, match=f"queue '{name}' not found") as err:
            what_if(h.engine, "bob", {name: {"concurrency": 1}}, 0, 10)
        assert err.value.hint is not None and "private" not in err.value.hint
    with pytest.raises(NotFound):
        h.engine.insights("bob", queue="private")
    assert [q["name"] for q in what_if(h.engine, "bob", {}, 0, 10)["queues"]] == [BUSY]


async def test_random_history_replays_exactly(make: Make) -> None:
    """Two queues contending for 4 GPUs (priority, concurrency, quota, per-user): the replay is the record."""
    rnd = random.Random(13)
    plan: dict[int, list[tuple[str, str, int, int]]] = {}
    scripts = {}
    for i in range(60):
        t = rnd.randrange(0, 120)
        queue = rnd.choice([BUSY, "low", "strict"])
        name = f"n{i}"
        dur = rnd.randrange(1, 25)
        scripts[name] = Script.succeeds(after=dur)
        plan.setdefault(t, []).append((name, queue, rnd.choice([1, 1, 2]), rnd.choice([0, 1])))
    queues = [
        {"name": BUSY, "priority": 10, "concurrency": 2, "max_per_user": 1},
        {"name": "low", "quota": {"gpu": 3}},
        {"name": "strict", "priority": 5, "ordering": "strict_fifo", "quota": {"gpu": 2}},
    ]
    h = await make(queues, FakeExecutor(gpus=4, scripts=scripts))
    t0 = h.clock()
    for t in range(0, 400):
        for name, queue, gpu, who in plan.get(t, []):
            h.submit(["bob", "erin"][who], queue=queue, name=name, gpu=gpu)
        await h.settle()
        await h.advance(1)
    out = what_if(h.engine, "ops", {}, t0 - 1, t0 + 400, [BUSY, "low", "strict"], 10_000)
    assert len(out["runs"]) == 60
    assert all(r["observed_dispatched_at"] is not None for r in out["runs"])
    assert _waits(out, "predicted") == _waits(out, "observed")
    assert sum(1 for r in out["runs"] if r["observed_wait_seconds"] > 0) > 20  # it was contended
    ids = [r["id"] for r in out["runs"]]
    events = sorted(
        (e["id"], rid) for rid in ids for e in h.store.get_run(rid)["timeline"] if e["status"] == "dispatched"
    )
    assert out["predicted_order"] == [rid for _, rid in events]


async def test_a_cluster_executor_history_replays_exactly(make: Make) -> None:
    """Free GPUs not counted (Kubernetes): only the queue limits hold runs back, and the replay agrees."""
    rnd = random.Random(7)
    scripts = {f"n{i}": Script.succeeds(after=rnd.randrange(1, 20)) for i in range(30)}
    queues = [{"name": BUSY, "concurrency": 2}, {"name": "low", "quota": {"gpu": 2}, "max_per_user": 1}]
    h = await make(queues, FakeClusterExecutor(gpus=0, scripts=scripts))
    t0 = h.clock()
    for i in range(30):
        h.submit(["bob", "erin"][i % 2], queue=rnd.choice([BUSY, "low"]), name=f"n{i}")
        await h.settle()
        await h.advance(rnd.choice([0, 1, 3]))
    await h.advance(400)
    out = what_if(h.engine, "ops", {}, t0 - 1, t0 + 500, [BUSY, "low"])
    assert out["devices"] is None
    assert _waits(out, "predicted") == _waits(out, "observed")
    assert sum(1 for r in out["runs"] if r["observed_wait_seconds"] > 0) > 5


def test_percentile_is_nearest_rank() -> None:
    assert percentile([], 50) is None
    assert percentile([5], 99) == 5
    assert [percentile(list(range(1, 11)), p) for p in (50, 90, 99)] == [5, 9, 10]


def test_request_is_strict() -> None:
    with pytest.raises(ValidationError, match="concurency"):
        WhatIfRequest.model_validate({"since": "7d", "changes": {BUSY: {"concurency": 4}}})
    with pytest.raises(ValidationError, match="duration"):
        WhatIfRequest.model_validate({"since": "7 days"})
    with pytest.raises(ValidationError, match="less than or equal to 100000"):
        WhatIfRequest.model_validate({"since": 0, "changes": {BUSY: {"concurrency": 10**9}}})
    with pytest.raises(ValidationError, match="epoch seconds"):
        WhatIfRequest.model_validate({"since": 1e300})
    with pytest.raises(ValidationError, match="not a queue name"):
        WhatIfRequest.model_validate({"since": 0, "changes": {"Bad Name!": {}}})
    req = WhatIfRequest.model_validate({"since": "2d", "changes": {BUSY: {"concurrency": None, "priority": None}}})
    assert req.instant(req.since, 1_000_000) == 1_000_000 - 2 * 86400
    assert req.changes[BUSY].change() == {"concurrency": None}  # null: no limit; priority null: unchanged


async def test_observed_utilisation_is_over_the_settings_in_force(make: Make) -> None:
    h, t0, _ = await _busy_week(make)
    out = what_if(h.engine, "ops", {BUSY: {"quota": {"gpu": 4}}}, t0 - 1, t0 + 200)
    busy = out["queues"][0]
    hours = 201 / 3600
    # In force: no GPU quota, so the 8 devices; replayed: the proposed 4 GPUs.
    assert busy["observed_allowance_gpu_hours"] == pytest.approx(8 * hours)
    assert busy["allowance_gpu_hours"] == pytest.approx(4 * hours)
    assert busy["observed"]["utilisation"] == pytest.approx((320 / 3600) / (8 * hours))
    assert busy["predicted"]["utilisation"] == pytest.approx((320 / 3600) / (4 * hours))


async def test_a_changed_limit_that_does_not_bind_is_named(make: Make) -> None:
    h, t0, _ = await _busy_week(make)
    # Concurrency 4 under a 2-GPU quota: the quota holds the runs back, not concurrency.
    out = what_if(h.engine, "ops", {BUSY: {"concurrency": 4, "quota": {"gpu": 2}}}, t0 - 1, t0 + 400)
    busy = out["queues"][0]
    assert busy["predicted_binding"] == "quota"
    assert len(busy["notes"]) == 1 and busy["notes"][0].startswith("concurrency does not bind")
    assert "quota" in busy["notes"][0]
    WhatIfResponse.model_validate(out)
    # The binding limit changed: no note; the concurrency the record ran under binds.
    raised = what_if(h.engine, "ops", {BUSY: {"concurrency": 3}}, t0 - 1, t0 + 400)["queues"][0]
    assert raised["notes"] == [] and raised["predicted_binding"] == "concurrency"
    loose = what_if(h.engine, "ops", {BUSY: {"max_per_user": 5}}, t0 - 1, t0 + 400)["queues"][0]
    assert loose["notes"] and "concurrency" in loose["notes"][0]
    from jupyter_gpuplat.cli import whatif as whatif_cli

    text = whatif_cli.render(out, False)
    assert "note: concurrency does not bind" in text
