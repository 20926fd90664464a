"""Flavors through the engine (real SQLite store, the scripted FakeExecutor's declared devices):
admitted on the first flavor where a run fits, devices of that flavor, the flavor recorded and
kept across a restart, a flavor the queue does not offer refused at submit and in the preview."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from jupyter_gpuplat.cli.runs import preview_text
from jupyter_gpuplat.core.errors import ConfigErrors, Unprocessable
from jupyter_gpuplat.core.request import RunRequest
from jupyter_gpuplat.engine.compare import compare
from jupyter_gpuplat.engine.explain import explain
from jupyter_gpuplat.executors.fake import FakeExecutor
from jupyter_gpuplat.notebook.widgets.comparetable import table_html
from jupyter_gpuplat.notebook.widgets.launchview import preview_html

from ..fake_engine import Harness, config
from ..flavored import FLAVORS

Make = Callable[..., Any]
QUEUES = [
    {"name": "q", "flavors": [{"name": "h100", "quota": {"gpu": 2}}, {"name": "a100", "quota": {"gpu": 4}}]},
    {"name": "plain", "quota": {"gpu": 6}},
]


@pytest.fixture
def make(tmp_path: Path, jp_asyncio_loop: asyncio.AbstractEventLoop) -> Iterator[Make]:
    made: list[Harness] = []

    async def _make(ex: FakeExecutor | None = None) -> Harness:
        (tmp_path / f"h{len(made)}").mkdir()
        h = Harness(tmp_path / f"h{len(made)}", ex or FakeExecutor(gpus=6))
        made.append(h)
        return await h.start(config(QUEUES, flavors=FLAVORS))

    yield _make
    for h in made:
        jp_asyncio_loop.run_until_complete(h.close())


async def test_first_h100_then_a100_never_over_either_quota(make: Make) -> None:
    h = await make()
    runs = [h.submit(name=f"r{i}") for i in range(7)]
    await h.settle()
    assert h.statuses(*runs) == ["running"] * 6 + ["queued"]
    flavors = [h.store.get_run(r)["flavor"] for r in runs]  # type: ignore[index]
    assert flavors == ["h100", "h100", "a100", "a100", "a100", "a100", None]
    devices = [h.ex.launched[r].devices for r in runs[:6]]
    assert devices == [(0,), (1,), (2,), (3,), (4,), (5,)]
    assert h.engine.state.free_by_flavor == {"h100": 0, "a100": 0}
    assert "admitted by queue q on flavor h100 (1/2 h100 GPUs)" in h.timeline(runs[0])[-2]["message"]
    # the seventh waits for either flavor: its reason is its first flavor's
    assert h.timeline(runs[6])[-1]["reason"] == "QueueQuota"
    assert h.timeline(runs[6])[-1]["message"].startswith("h100: 2/2 in use (1 more needed)")
    h.ex.finish(runs[0])  # an h100 run ends with no one left asking: its device is free again
    await h.advance()
    assert h.engine.state.free_by_flavor == {"h100": 0, "a100": 0}  # the seventh took it (h100 first)
    assert h.store.get_run(runs[6])["flavor"] == "h100"  # type: ignore[index]
    h.ex.finish(runs[6])
    h.ex.finish(runs[3])
    await h.advance()
    assert h.engine.state.free_by_flavor == {"h100": 1, "a100": 1}
    late = h.submit(placement={"gpu_type": "a100"})
    await h.advance()
    assert h.status(late) == "running"
    assert h.store.get_run(late)["flavor"] == "a100"  # type: ignore[index]
    assert h.ex.launched[late].devices == (3,)
    assert h.engine.state.free_by_flavor == {"h100": 1, "a100": 0}
    # compared side by side, each run says its kind of GPU
    compared = compare(h.engine, "bob", [runs[0], late], None, 100)
    assert [r["flavor"] for r in compared["runs"]] == ["h100", "a100"]
    (row,) = [r for r in table_html(compared, runs[0]).split("<tr") if ">flavor<" in r]
    assert "h100" in row and "a100" in row and "gpuplat-differ" in row  # the Compare widget's row
    plain = compare(h.engine, "bob", [runs[0]], None, 100)
    plain["runs"][0]["flavor"] = None
    assert ">flavor<" not in table_html(plain, runs[0])  # no flavors, no row


async def test_a_run_asking_h100_waits_while_a100_is_free(make: Make) -> None:
    h = await make()
    first = [h.submit(), h.submit()]
    await h.settle()
    asks = h.submit(placement={"gpu_type": "h100"})
    anyone = h.submit(placement={"gpu_type": "any"})
    await h.settle()
    assert h.statuses(*first, asks, anyone) == ["running", "running", "queued", "running"]
    assert h.store.get_run(anyone)["flavor"] == "a100"  # type: ignore[index]
    ex = explain(h.engine, "bob", asks)
    assert (ex["reason"], ex["message"]) == ("QueueQuota", "h100: 2/2 in use (1 more needed) (queue q's h100 quota)")
    assert [(f["name"], f["reason"], f["numbers"]) for f in ex["flavors"]] == [
        ("h100", "QueueQuota", {"used": 2, "requested": 1, "limit": 2})
    ]
    assert [b["id"] for b in ex["flavors"][0]["blockers"]] == first
    # a run for any flavor is explained on each, in the queue's order
    for _ in range(3):
        h.submit()
    await h.settle()
    late = h.submit()
    await h.settle()
    ex = explain(h.engine, "bob", late)
    assert [(f["name"], f["message"]) for f in ex["flavors"]] == [
        ("h100", "h100: 2/2 in use (1 more needed) (queue q's h100 quota)"),
        ("a100", "a100: 4/4 in use (1 more needed) (queue q's a100 quota)"),
    ]
    h.ex.finish(first[0])
    await h.advance()
    assert h.status(asks) == "running"
    assert h.store.get_run(asks)["flavor"] == "h100"  # type: ignore[index]
    assert h.ex.launched[asks].devices == (0,)


async def test_the_flavor_survives_a_restart(make: Make) -> None:
    h = await make()
    runs = [h.submit(), h.submit(), h.submit()]
    await h.settle()
    await h.close()
    h2 = Harness(h.tmp, FakeExecutor(gpus=6))
    h2._n = 100  # its ids after the first harness's
    await h2.start(config(QUEUES, flavors=FLAVORS))
    try:
        q = h2.engine.state.queues["q"]
        assert {k: v.gpu for k, v in q.used_by_flavor.items()} == {"h100": 2, "a100": 1}
        extra = h2.submit(placement={"gpu_type": "h100"})
        await h2.settle()
        assert h2.status(extra) == "queued"
        assert h2.timeline(extra)[-1]["message"].startswith("h100: 2/2 in use (1 more needed)")
    finally:
        await h2.close()
    assert runs


async def test_a_flavor_the_queue_does_not_offer_is_refused_naming_those_it_does(make: Make) -> None:
    h = await make()
    with pytest.raises(Unprocessable) as exc:
        h.submit(placement={"gpu_type": "l4"})
    assert exc.value.code == "FlavorNotOffered"
    assert exc.value.message == (
        "placement.gpu_type asks for an unknown flavor its queue does not offer: 'l4' (queue q offers: h100, a100)"
    )
    assert exc.value.hint == "set placement.gpu_type to one of: h100, a100, or any"
    with pytest.raises(Unprocessable) as exc:
        h.submit(queue="plain", placement={"gpu_type": "h100"})
    assert "(queue plain offers no flavors)" in exc.value.message
    body = {"project": "p", "queue": "q", "command": ["true"], "placement": {"gpu_type": "l4"}}
    verdict = h.engine.preview("bob", RunRequest.model_validate(body))["verdict"]
    assert not verdict["allowed"]
    assert [r["rule"] for r in verdict["rules"]] == ["FlavorNotOffered"]
    # the preview says which flavor it would take now
    body = {"project": "p", "queue": "q", "command": ["true"], "resources": {"gpu": 1}}
    assert h.engine.preview("bob", RunRequest.model_validate(body))["flavor"] == "h100"
    body["placement"] = {"gpu_type": "a100"}
    preview = h.engine.preview("bob", RunRequest.model_validate(body))
    assert preview["flavor"] == "a100"
    # rendered as the service said it: gpuplat submit --preview and the Launcher widget
    assert "  starts now on flavor: a100" in preview_text(preview).splitlines()
    assert "starts now on flavor a100" in preview_html(preview, False)
    assert [d["flavor"] for d in h.engine.reads.capacity("bob")["devices"]] == ["h100"] * 2 + ["a100"] * 4
    # a plain queue's runs are as before
    plain = h.submit(queue="plain")
    await h.settle()
    assert h.status(plain) == "running"
    assert h.store.get_run(plain)["flavor"] is None  # type: ignore[index]


async def test_a_flavor_quota_over_this_machine_s_devices_of_it_is_refused(make: Make) -> None:
    h = await make()
    # l4 is matched by name: no device here is one
    flavors = [*FLAVORS, {"name": "l4", "gpu_type": "L4"}]
    assert h.engine.state.machine_flavors(config([], flavors=flavors)) == {"h100": 2, "a100": 4, "l4": 0}
    bad = [{"name": "q", "flavors": [{"name": "h100", "quota": {"gpu": 2}}, {"name": "l4", "quota": {"gpu": 1}}]}]
    with pytest.raises(ConfigErrors) as exc:
        h.engine.apply_config(config(bad, flavors=flavors), source="test", by="ops")
    assert exc.value.errors == [
        "queues[0].flavors[1].quota.gpu: 1 is more than the 0 device(s) of flavor 'l4' (at most 0)"
    ]
    assert h.engine.state.cfg.flavor("l4") is None  # nothing applied


async def test_a_run_no_flavor_could_ever_hold_is_refused_with_an_alternative(make: Make) -> None:
    h = await make()
    with pytest.raises(Unprocessable) as exc:
        h.submit(gpu=5)
    assert exc.value.code == "ExceedsQueueQuota"
    assert exc.value.message == (
        "requests 5 gpu but queue q has at most 4 gpu on a flavor (h100: 2, a100: 4): it could never be dispatched"
    )
    assert exc.value.answers["alternatives"][0]["changes"] == {"resources": {"gpu": 4}}
    with pytest.raises(Unprocessable) as exc:
        h.submit(gpu=3, placement={"gpu_type": "h100"})
    assert "has at most 2 gpu on a flavor (h100: 2)" in exc.value.message
    fits = h.submit(gpu=3)  # a100 holds it
    await h.settle()
    assert h.status(fits) == "running"
    assert h.store.get_run(fits)["flavor"] == "a100"  # type: ignore[index]
