"""What-if on a flavored platform: a history made by the engine (FakeExecutor's declared typed devices,
FakeClock) replayed through core.admission with flavors: each flavor's quota, the flavor a run asks
for and the free devices of each flavor, exactly as the dispatcher honoured them.

A flavor's quota is a settable limit (`changes: {q: {flavors: {h100: {gpu: 4}}}}`); the answer has
figures per flavor, and the binding limit names the flavor's quota.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from jupyter_gpuplat.cli import whatif as whatif_cli
from jupyter_gpuplat.core.errors import InvalidInput
from jupyter_gpuplat.engine.whatif import what_if
from jupyter_gpuplat.executors.fake import FakeClusterExecutor, FakeExecutor, Script
from jupyter_gpuplat.service.whatif_handler import WhatIfRequest, WhatIfResponse

from ..fake_engine import Harness, config

Make = Callable[..., Any]
FLAVORS = [{"name": "h100", "devices": [0, 1, 2, 3]}, {"name": "a100", "devices": [4, 5]}]
Q = "q"
H100 = {"placement": {"gpu_type": "h100"}}


def _queues(h100: int = 2, a100: int = 2) -> list[dict[str, Any]]:
    flavors = [{"name": "h100", "quota": {"gpu": h100}}, {"name": "a100", "quota": {"gpu": a100}}]
    return [{"name": Q, "flavors": flavors}, {"name": "plain", "quota": {"gpu": 2}}]


@pytest.fixture
def make(tmp_path: Path, jp_asyncio_loop: asyncio.AbstractEventLoop) -> Iterator[Make]:
    made: list[Harness] = []

    async def _make(queues: list[dict[str, Any]], ex: FakeExecutor) -> Harness:
        (tmp_path / f"h{len(made)}").mkdir()
        h = Harness(tmp_path / f"h{len(made)}", ex)
        made.append(h)
        return await h.start(config(queues, flavors=FLAVORS))

    yield _make
    for h in made:
        jp_asyncio_loop.run_until_complete(h.close())


async def _h100_wait(make: Make) -> tuple[Harness, float, dict[str, str]]:
    """h100: 2, a100: 2. A, B ask h100 (100 s), D any (30 s) at 0: D goes on a100, h100 being full.
    C asks h100 at 10 (50 s): it waits for A's h100 until 100."""
    durations = {"A": 100, "B": 100, "C": 50, "D": 30}
    h = await make(_queues(), FakeExecutor(gpus=6, scripts={n: Script.succeeds(after=d) for n, d in durations.items()}))
    t0 = h.clock()
    ids = {n: h.submit(name=n, **H100) for n in "AB"}
    ids["D"] = h.submit(name="D")
    await h.settle()
    await h.advance(10)
    ids["C"] = h.submit(name="C", **H100)
    await h.settle()
    for step in (20, 70, 50, 50):
        await h.advance(step)
    assert h.statuses(*ids.values()) == ["succeeded"] * 4
    assert [h.store.get_run(ids[n])["flavor"] for n in "ABCD"] == ["h100", "h100", "h100", "a100"]  # type: ignore[index]
    return h, t0, ids


def _by_name(out: dict[str, Any], ids: dict[str, str], key: str) -> dict[str, Any]:
    name = {v: k for k, v in ids.items()}
    return {name[r["id"]]: r[key] for r in out["runs"]}


async def test_raising_the_h100_quota_starts_the_h100_run_at_the_hand_computed_time(make: Make) -> None:
    h, t0, ids = await _h100_wait(make)
    since, until = t0 - 1, t0 + 200
    same = what_if(h.engine, "ops", {}, since, until, [Q])
    WhatIfResponse.model_validate(same)
    # The replay is the record: C waited 90 s for h100 while a100 had a free GPU.
    assert _by_name(same, ids, "observed_wait_seconds") == {"A": 0, "B": 0, "D": 0, "C": 90}
    assert _by_name(same, ids, "predicted_dispatched_at") == _by_name(same, ids, "observed_dispatched_at")
    q = same["queues"][0]
    assert (q["predicted_binding"], q["predicted_binding_flavor"]) == ("quota", "h100")
    assert [f["predicted_held_seconds"] for f in q["flavors"]] == [{"quota": 90}, {}]

    # h100: 3. D (any) now takes the third h100 (the first flavor where it fits) at 0; C, asking h100 at 10,
    # finds it 3/3 and starts when D ends, at 30.
    three = what_if(h.engine, "ops", {Q: {"flavors": {"h100": {"gpu": 3}}}}, since, until)
    assert _by_name(three, ids, "predicted_dispatched_at") == {"A": t0, "B": t0, "D": t0, "C": t0 + 30}
    assert _by_name(three, ids, "predicted_wait_seconds")["C"] == 20
    hours = 201 / 3600
    h100, a100 = three["queues"][0]["flavors"]
    assert (h100["name"], h100["quota_gpu"], h100["observed_quota_gpu"]) == ("h100", 3, 2)
    assert h100["observed"] == {
        "runs": 3, "gpu_hours": pytest.approx(250 / 3600), "utilisation": pytest.approx(250 / 3600 / (2 * hours))
    }  # fmt: skip
    assert h100["predicted"] == {
        "runs": 4, "gpu_hours": pytest.approx(280 / 3600), "utilisation": pytest.approx(280 / 3600 / (3 * hours))
    }  # fmt: skip
    assert a100["observed"]["runs"] == 1 and a100["observed"]["gpu_hours"] == pytest.approx(30 / 3600)
    assert a100["predicted"] == {"runs": 0, "gpu_hours": 0, "utilisation": 0}
    settings = three["queues"][0]["settings"]
    assert settings["flavors"] == [{"name": "h100", "quota": {"gpu": 3}}, {"name": "a100", "quota": {"gpu": 2}}]
    assert three["queues"][0]["observed_settings"]["flavors"][0] == {"name": "h100", "quota": {"gpu": 2}}

    # h100: 4: C starts on arrival; nothing waits, so nothing binds.
    four = what_if(h.engine, "ops", {Q: {"flavors": {"h100": {"gpu": 4}}}}, since, until)
    assert _by_name(four, ids, "predicted_dispatched_at")["C"] == t0 + 10
    assert four["queues"][0]["predicted_binding"] is None and four["queues"][0]["predicted_binding_text"] is None

    text = whatif_cli.render(three, False)
    assert "h100: quota 2 -> 3" in text
    assert "flavor h100" in text and "flavor a100" in text
    assert "binds: the queue's h100 quota" in text


async def test_a_changed_limit_that_does_not_bind_names_the_flavor_quota_that_does(make: Make) -> None:
    h, t0, _ = await _h100_wait(make)
    since, until = t0 - 1, t0 + 200
    out = what_if(h.engine, "ops", {Q: {"quota": {"gpu": 10}, "flavors": {"a100": {"gpu": 1}}}}, since, until)
    q = out["queues"][0]
    assert (q["predicted_binding"], q["predicted_binding_flavor"]) == ("quota", "h100")
    held = "in the replay the queue's runs were held 90 s by the queue's h100 quota (flavors.h100)"
    assert q["notes"] == [
        f"quota does not bind: {held}, not on quota; change that limit instead",
        f"flavors.a100 does not bind: {held}, not on flavors.a100; change that limit instead",
    ]


async def test_a_flavor_the_queue_does_not_offer_is_refused_naming_those_it_does(make: Make) -> None:
    h, t0, _ = await _h100_wait(make)
    with pytest.raises(InvalidInput, match=r"queue q does not offer flavor 'l4' \(it offers: h100, a100\)") as err:
        what_if(h.engine, "ops", {Q: {"flavors": {"l4": {"gpu": 1}}}}, t0, t0 + 10)
    assert err.value.hint is not None and "h100, a100" in err.value.hint
    with pytest.raises(InvalidInput, match=r"queue plain does not offer flavor 'h100' \(it offers no flavors\)"):
        what_if(h.engine, "ops", {"plain": {"flavors": {"h100": {"gpu": 1}}}}, t0, t0 + 10)
    with pytest.raises(InvalidInput, match="flavors"):  # the queue's own bounds
        what_if(h.engine, "ops", {Q: {"flavors": {"h100": {"gpu": -1}}}}, t0, t0 + 10)
    # As the config is: at most the flavor's devices on this machine.
    with pytest.raises(InvalidInput, match=r"5 is more than the 4 device\(s\) of flavor 'h100' \(at most 4\)"):
        what_if(h.engine, "ops", {Q: {"flavors": {"h100": {"gpu": 5}}}}, t0, t0 + 10)


async def test_a_random_flavored_history_replays_exactly(make: Make) -> None:
    """Runs asking h100, a100 or any, 1 or 2 GPUs; the plain queue takes devices of either flavor, so
    per-flavor quota and per-flavor free devices both hold runs, and the replay is the record, flavor by flavor."""
    rnd = random.Random(5)
    plan: dict[int, list[tuple[str, str, int, str | None]]] = {}
    scripts = {}
    for i in range(50):
        name = f"n{i}"
        scripts[name] = Script.succeeds(after=rnd.randrange(1, 25))
        asked = rnd.choice([None, None, "h100", "a100"])
        queue = rnd.choice([Q, Q, Q, "plain"])
        plan.setdefault(rnd.randrange(0, 100), []).append((name, queue, rnd.choice([1, 1, 2]), asked))
    h = await make(_queues(h100=3, a100=2), FakeExecutor(gpus=6, scripts=scripts))
    t0 = h.clock()
    for t in range(0, 300):
        for name, queue, gpu, asked in plan.get(t, []):
            kw = {"placement": {"gpu_type": asked}} if asked and queue == Q else {}
            h.submit(["bob", "erin"][gpu % 2], queue=queue, name=name, gpu=gpu, **kw)
        await h.settle()
        await h.advance(1)
    out = what_if(h.engine, "ops", {}, t0 - 1, t0 + 300, [Q, "plain"], 10_000)
    assert len(out["runs"]) == 50
    assert all(r["observed_dispatched_at"] is not None for r in out["runs"])
    assert [r["predicted_dispatched_at"] for r in out["runs"]] == [r["observed_dispatched_at"] for r in out["runs"]]
    assert sum(1 for r in out["runs"] if r["observed_wait_seconds"] > 0) > 10  # it was contended
    for f in out["queues"][0]["flavors"]:
        assert f["predicted"] == f["observed"], f["name"]
    held = {k for f in out["queues"][0]["flavors"] for k in f["predicted_held_seconds"]}
    assert held == {"quota", "capacity"}  # both a flavor's quota and its devices held runs


async def test_a_cluster_history_with_flavors_replays_exactly(make: Make) -> None:
    """Kubernetes (GPUs not counted): only the flavors' quotas hold runs, and the replay agrees."""
    rnd = random.Random(3)
    scripts = {f"n{i}": Script.succeeds(after=rnd.randrange(1, 20)) for i in range(30)}
    h = await make(_queues(h100=1, a100=2), FakeClusterExecutor(gpus=0, scripts=scripts))
    t0 = h.clock()
    for i in range(30):
        h.submit(name=f"n{i}", **(H100 if i % 3 == 0 else {}))
        await h.settle()
        await h.advance(rnd.choice([0, 1, 3]))
    await h.advance(400)
    out = what_if(h.engine, "ops", {}, t0 - 1, t0 + 500, [Q])
    assert out["devices"] is None
    assert [r["predicted_dispatched_at"] for r in out["runs"]] == [r["observed_dispatched_at"] for r in out["runs"]]
    assert sum(1 for r in out["runs"] if r["observed_wait_seconds"] > 0) > 5
    more = what_if(h.engine, "ops", {Q: {"flavors": {"h100": {"gpu": 4}}}}, t0 - 1, t0 + 500)
    waits = [(r["observed_wait_seconds"], r["predicted_wait_seconds"]) for r in more["runs"]]
    assert all(p <= o for o, p in waits) and sum(p for _, p in waits) < sum(o for o, _ in waits)


def test_the_request_takes_a_flavor_quota() -> None:
    req = WhatIfRequest.model_validate({"since": "7d", "changes": {Q: {"flavors": {"h100": {"gpu": 4}}}}})
    assert req.changes[Q].change() == {"flavors": {"h100": {"gpu": 4}}}
    with pytest.raises(ValueError, match="not null"):
        WhatIfRequest.model_validate({"since": "7d", "changes": {Q: {"flavors": {"h100": {"gpu": None}}}}})
    with pytest.raises(ValueError, match="gpus"):
        WhatIfRequest.model_validate({"since": "7d", "changes": {Q: {"flavors": {"h100": {"gpus": 4}}}}})
    assert whatif_cli.changes([], ["q:flavors.h100.gpu=4", "q:flavors.a100.memory=64Gi", "q:concurrency=2"]) == {
        Q: {"flavors": {"h100": {"gpu": 4}, "a100": {"memory": "64Gi"}}, "concurrency": 2}
    }
    for bad, why in (("q:flavors.h100=4", "flavors.NAME.gpu"), ("q:flavors.h100.gpu=x", "whole")):
        with pytest.raises(whatif_cli.UsageError, match=why):
            whatif_cli.changes([], [bad])
