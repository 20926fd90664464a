"""Sweeps in the engine (scripted FakeExecutor, FakeClock, real SQLite): workflow concurrency
at dispatch, changed while the sweep runs, pause, stop, max_failures, parent status rules,
restart; and over the REST API of a real Jupyter server.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from jupyter_gpuplat.core.matrix import Matrix, expand
from jupyter_gpuplat.core.request import RunRequest
from jupyter_gpuplat.engine.explain import explain
from jupyter_gpuplat.executors.fake import FakeExecutor, Script

from ..fake_engine import Harness, config

Make = Callable[..., Any]
GRID_3x4 = {"kind": "grid", "params": {"lr": {"values": [0.1, 0.01, 0.001]}, "bs": {"values": [8, 16, 32, 64]}}}


@pytest.fixture
def make(tmp_path: Path, jp_asyncio_loop: asyncio.AbstractEventLoop) -> Iterator[Make]:
    made: list[Harness] = []

    async def _make(queues: list[dict[str, Any]], ex: FakeExecutor | None = None, **extra: Any) -> Harness:
        (tmp_path / f"h{len(made)}").mkdir()
        h = Harness(tmp_path / f"h{len(made)}", ex or FakeExecutor(gpus=16))
        made.append(h)
        return await h.start(config(queues, **extra))

    yield _make
    for h in made:
        jp_asyncio_loop.run_until_complete(h.close())


def sweep(h: Harness, matrix: dict[str, Any], user: str = "bob", queue: str = "q", **kw: Any) -> dict[str, Any]:
    body = {"project": "p", "queue": queue, "command": ["train"], "resources": {"gpu": 1}, "matrix": matrix, **kw}
    return h.engine.submit(user, RunRequest.model_validate(body))


def children(h: Harness, sweep_id: str) -> list[dict[str, Any]]:
    return sorted(h.store.list_runs(["p"], parent=sweep_id, limit=10_000), key=lambda r: r["seq"])


def dispatched(h: Harness, sweep_id: str) -> list[str]:
    return [c["id"] for c in children(h, sweep_id) if c["status"] not in ("queued", "created")]


def max_concurrent(h: Harness, sweep_id: str) -> int:
    """The most children holding a slot at once, from their timelines (dispatch → final)."""
    spans = []
    for c in children(h, sweep_id):
        tl = h.timeline(c["id"])
        start = next((e["at"] for e in tl if e["status"] == "dispatched"), None)
        end = next((e["at"] for e in tl if e["status"] in ("succeeded", "failed", "stopped")), float("inf"))
        if start is not None:
            spans.append((start, end))
    points = sorted({p for s in spans for p in s if p != float("inf")})
    return max((sum(1 for s, e in spans if s <= t < e) for t in points), default=0)


async def test_a_grid_runs_with_its_concurrency_changed_while_it_runs(make: Make) -> None:
    h = await make([{"name": "q", "concurrency": 10}])
    parent = sweep(h, {**GRID_3x4, "concurrency": 2})
    assert parent["kind"] == "sweep"
    await h.settle()
    kids = children(h, parent["id"])
    assert len(kids) == 12 and {c["parent"] for c in kids} == {parent["id"]}
    assert [c["resolved"]["params"] for c in kids[:2]] == [{"lr": 0.1, "bs": 8}, {"lr": 0.1, "bs": 16}]
    assert len(dispatched(h, parent["id"])) == 2
    assert h.status(parent["id"]) == "running"
    # A held child explains the sweep's limit, with the running children as blockers.
    held = next(c for c in kids if c["status"] == "queued")
    ex = explain(h.engine, "bob", held["id"])
    assert ex["reason"] == "SweepConcurrency" and "2/2 children dispatched" in ex["message"]
    assert {b["id"] for b in ex["blockers"]} == set(dispatched(h, parent["id"]))
    # Up to 5: three more at once.
    h.engine.update_sweep("bob", parent["id"], 5, None)
    await h.settle()
    assert len(dispatched(h, parent["id"])) == 5
    # Down to 1: nothing stops; new starts wait until only one runs.
    h.engine.update_sweep("bob", parent["id"], 1, None)
    await h.settle()
    running = dispatched(h, parent["id"])
    assert len(running) == 5 and all(h.status(r) == "running" for r in running)
    for r in running[:4]:
        h.ex.finish(r)
    await h.advance()
    assert len([c for c in children(h, parent["id"]) if c["status"] == "running"]) == 1
    assert "ConcurrencyChanged" in [e["reason"] for e in h.timeline(parent["id"])]
    # Finish everything, one at a time: the sweep succeeds; never more than 5 at once.
    while h.status(parent["id"]) != "succeeded":
        for c in children(h, parent["id"]):
            if c["status"] == "running":
                h.ex.finish(c["id"])
        await h.advance()
    assert max_concurrent(h, parent["id"]) <= 5
    assert h.store.get_run(parent["id"])["message"] == "all 12 children succeeded"


async def test_queue_and_sweep_limits_together_each_held_child_names_what_holds_it(make: Make) -> None:
    h = await make([{"name": "q", "concurrency": 3}])
    a = sweep(h, {**GRID_3x4, "concurrency": 2})
    await h.settle()
    b = sweep(h, {**GRID_3x4, "concurrency": 2}, user="erin")
    await h.settle()
    assert len(dispatched(h, a["id"])) == 2 and len(dispatched(h, b["id"])) == 1
    held_a = next(c for c in children(h, a["id"]) if c["status"] == "queued")
    held_b = next(c for c in children(h, b["id"]) if c["status"] == "queued")
    assert (
        explain(h.engine, "bob", held_a["id"])["reason"] == "SweepConcurrency"
    )  # a freed queue slot would not start it
    assert explain(h.engine, "erin", held_b["id"])["reason"] == "QueueConcurrency"


async def test_pause_holds_new_starts_and_resume_lets_them_go(make: Make) -> None:
    h = await make([{"name": "q"}])
    p = sweep(h, {**GRID_3x4, "concurrency": 2})
    await h.settle()
    h.engine.update_sweep("bob", p["id"], None, True)
    first = dispatched(h, p["id"])
    for r in first:
        h.ex.finish(r)
    await h.advance()
    assert len([c for c in children(h, p["id"]) if c["status"] in ("dispatched", "running")]) == 0
    h.engine.update_sweep("bob", p["id"], None, False)
    await h.settle()
    assert len([c for c in children(h, p["id"]) if c["status"] in ("dispatched", "running")]) == 2
    reasons = [e["reason"] for e in h.timeline(p["id"])]
    assert "SweepPaused" in reasons and "SweepResumed" in reasons


async def test_stopping_the_parent_stops_every_child(make: Make) -> None:
    h = await make([{"name": "q"}], FakeExecutor(gpus=16, default=Script.never_ends()))
    p = sweep(h, {**GRID_3x4, "concurrency": 3})
    await h.settle()
    await h.engine.stop("bob", p["id"])
    await h.advance(30)
    assert {c["status"] for c in children(h, p["id"])} == {"stopped"}
    parent = h.store.get_run(p["id"])
    assert (parent["status"], parent["reason"]) == ("stopped", "Stopped")


async def test_max_failures_fails_the_sweep_and_stops_the_rest(make: Make) -> None:
    h = await make([{"name": "q"}], FakeExecutor(gpus=16, default=Script.fails(3)))
    p = sweep(h, {**GRID_3x4, "concurrency": 2, "max_failures": 1})
    await h.advance()
    await h.advance()
    parent = h.store.get_run(p["id"])
    assert (parent["status"], parent["reason"]) == ("failed", "MaxFailures")
    statuses = [c["status"] for c in children(h, p["id"])]
    assert statuses.count("failed") == 2 and statuses.count("stopped") == 10


@pytest.mark.parametrize(
    ("outcomes", "expect"),
    [
        (["succeeded"] * 4, ("succeeded", "Completed")),
        (["succeeded", "failed", "succeeded", "succeeded"], ("failed", "Error")),
        (["failed"] * 4, ("failed", "Error")),
    ],
)
async def test_parent_status_rules(make: Make, outcomes: list[str], expect: tuple[str, str]) -> None:
    # children are named after their sweep and what differs (core/naming.child_name)
    scripts = {f"s · i={i}": Script.succeeds() if o == "succeeded" else Script.fails(1) for i, o in enumerate(outcomes)}
    h = await make([{"name": "q"}], FakeExecutor(gpus=16, scripts=scripts))
    p = sweep(h, {"kind": "mapping", "values": [{"i": i} for i in range(4)], "concurrency": 4}, name="s")
    for _ in range(3):
        await h.advance()
    parent = h.store.get_run(p["id"])
    assert (parent["status"], parent["reason"]) == expect
    assert [e["status"] for e in h.timeline(p["id"])][:2] == ["created", "queued"]


async def test_a_restart_loses_no_child_and_keeps_the_concurrency(make: Make, tmp_path: Path) -> None:
    ex = FakeExecutor(gpus=16, default=Script.never_ends())
    h = await make([{"name": "q"}], ex)
    p = sweep(h, {**GRID_3x4, "concurrency": 2})
    await h.settle()
    h.engine.update_sweep("bob", p["id"], 3, None)
    await h.settle()
    before = {c["id"]: c["status"] for c in children(h, p["id"])}
    await h.engine.close()
    h2 = await Harness(h.tmp, ex).start()  # a new engine over the same database and executor
    after = {c["id"]: c["status"] for c in children(h2, p["id"])}
    assert after == before and sum(s == "running" for s in after.values()) == 3
    sw = h2.engine.sweeps.of(p["id"])
    assert sw is not None and sw.gate.concurrency == 3 and len(sw.children) == 12
    # Still held at 3: finishing one dispatches exactly one more.
    first = next(i for i, s in after.items() if s == "running")
    h2.ex.finish(first)
    await h2.advance()
    assert sum(c["status"] == "running" for c in children(h2, p["id"])) == 3
    await h2.close()


def test_grid_order_is_the_product() -> None:
    got = expand(Matrix.model_validate(GRID_3x4))
    assert got == [{"lr": lr, "bs": bs} for lr, bs in itertools.product([0.1, 0.01, 0.001], [8, 16, 32, 64])]


async def test_sweeps_over_the_api(api: Any) -> None:
    """POST runs with a matrix, its children by `parent`, PATCH its concurrency, the parent's counts."""
    body = {
        "project": "team-a",
        "presets": ["single-gpu"],
        "command": ["python", "-c", "import os; print(os.environ['GPUPLAT_PARAMS'])"],
        "matrix": {
            "kind": "grid",
            "params": {"lr": {"values": [0.1, 0.2]}, "bs": {"range": [1, 4, 1]}},
            "concurrency": 1,
        },
    }
    code, parent = await api("POST", "runs", body=body)
    assert code == 201, parent
    assert parent["kind"] == "sweep" and parent["children"]["total"] == 6 and parent["concurrency"] == 1
    page = await api.ok("GET", "runs", parent=parent["id"], limit="100")
    kids = page["runs"]
    assert len(kids) == 6 and {k["parent"] for k in kids} == {parent["id"]}
    assert sorted((k["params"]["lr"], k["params"]["bs"]) for k in kids) == [
        (lr, bs) for lr in (0.1, 0.2) for bs in (1, 2, 3)
    ]
    listed = [r["id"] for r in (await api.ok("GET", "runs"))["runs"]]
    assert parent["id"] in listed and not set(listed) & {k["id"] for k in kids}  # one row per sweep
    assert [r["id"] for r in (await api.ok("GET", "runs", kind="sweep"))["runs"]] == [parent["id"]]
    changed = await api.ok("PATCH", f"runs/{parent['id']}", body={"concurrency": 3})
    assert changed["concurrency"] == 3
    assert any(e["reason"] == "ConcurrencyChanged" for e in changed["timeline"])
    done = await api.wait_status(parent["id"], "succeeded", timeout=60)
    assert done["reason"] == "Completed"
    final = await api.ok("GET", f"runs/{parent['id']}")
    assert final["children"]["by_status"] == {"succeeded": 6}
    cmp = await api.ok("GET", f"runs/{parent['id']}/compare", top="2")
    assert cmp["sweep"] == parent["id"] and len(cmp["children"]) == 6
    code, err = await api("PATCH", f"runs/{parent['id']}", body={"paused": True})
    assert code == 409 and "has ended" in err["error"]["message"]


async def test_a_bayes_sweep_makes_children_as_its_search_asks(api: Any) -> None:
    """8 trials of a 1-D quadratic, 2 at a time: children are made as trials end, each told its loss."""
    code = (
        "from jupyter_gpuplat import tracking\n"
        "x = float(tracking.params()['x'])\n"
        "tracking.log_metrics(step=0, loss=(x - 0.3) ** 2)\n"
    )
    body = {
        "project": "team-a",
        "presets": ["single-gpu"],
        "code": code,
        "matrix": {
            "kind": "bayes",
            "params": {"x": {"uniform": [0, 1]}},
            "num_runs": 8,
            "seed": 3,
            "concurrency": 2,
            "objective": {"metric": "loss", "optimization": "minimize"},
        },
    }
    code_, parent = await api("POST", "runs", body=body)
    assert code_ == 201, parent
    assert parent["children"]["total"] == 8
    first = (await api.ok("GET", "runs", parent=parent["id"]))["runs"]
    assert len(first) == 2  # the rest are asked of the search as these end
    done = await api.wait_status(parent["id"], "succeeded", timeout=120)
    kids = (await api.ok("GET", "runs", parent=parent["id"]))["runs"]
    assert len(kids) == 8 and {k["status"] for k in kids} == {"succeeded"}
    losses = {k["id"]: (k["params"]["x"] - 0.3) ** 2 for k in kids}
    best = (await api.ok("GET", f"runs/{done['id']}"))["best"]
    assert best is not None and best["id"] == min(losses, key=losses.__getitem__)
    assert abs(best["value"] - min(losses.values())) < 1e-9
    cmp = await api.ok("GET", f"runs/{done['id']}/compare", top="3")
    assert cmp["best"] == best["id"] and cmp["objective"] == {"metric": "loss", "optimization": "minimize"}
    assert [c["value"] for c in cmp["children"]] == sorted(losses.values()) and len(cmp["top"]) == 3
    assert set(cmp["curves"]) == set(cmp["top"])


async def test_a_metric_target_stops_the_rest_of_the_sweep(api: Any) -> None:
    code = "from jupyter_gpuplat import tracking\ntracking.log_metrics(step=0, acc=tracking.params()['acc'])\n"
    body = {
        "project": "team-a",
        "presets": ["single-gpu"],
        "code": code,
        "matrix": {
            "kind": "mapping",
            "values": [{"acc": a} for a in (0.5, 0.95, 0.2, 0.3, 0.1)],
            "concurrency": 1,
            "early_stopping": [{"metric": "acc", "value": 0.9, "optimization": "maximize"}],
        },
    }
    parent = await api.ok("POST", "runs", body=body)
    done = await api.wait_status(parent["id"], "succeeded", "failed", "stopped", timeout=60)
    assert (done["status"], done["reason"]) == ("succeeded", "EarlyStopped"), done["message"]
    assert "reached acc = 0.95 (target 0.9)" in done["message"]
    kids = {k["params"]["acc"]: k["status"] for k in (await api.ok("GET", "runs", parent=parent["id"]))["runs"]}
    assert kids[0.5] == "succeeded" and kids[0.95] == "succeeded"
    assert [kids[a] for a in (0.2, 0.3, 0.1)] == ["stopped"] * 3


async def test_the_median_rule_stops_a_child_worse_than_the_ended_ones(api: Any) -> None:
    # Children log a loss per step; the fourth is far worse and would run on: the rule stops it.
    code = (
        "import time\n"
        "from jupyter_gpuplat import tracking\n"
        "loss = tracking.params()['loss']\n"
        "for step in range(3):\n"
        "    tracking.log_metrics(step=step, loss=loss)\n"
        "deadline = time.monotonic() + (60 if loss > 5 else 0)\n"
        "while time.monotonic() < deadline:\n"
        "    time.sleep(0.05)\n"
    )
    body = {
        "project": "team-a",
        "presets": ["single-gpu"],
        "code": code,
        "matrix": {
            "kind": "mapping",
            "values": [{"loss": v} for v in (1.0, 2.0, 1.5, 9.0)],
            "concurrency": 1,
            "early_stopping": [{"policy": "median", "metric": "loss", "optimization": "minimize", "min_steps": 2}],
        },
    }
    parent = await api.ok("POST", "runs", body=body)
    done = await api.wait_status(parent["id"], "succeeded", "failed", "stopped", timeout=60)
    kids = {k["params"]["loss"]: k for k in (await api.ok("GET", "runs", parent=parent["id"]))["runs"]}
    assert [kids[v]["status"] for v in (1.0, 2.0, 1.5)] == ["succeeded"] * 3
    worst = kids[9.0]
    assert worst["status"] == "stopped" and "the median rule (loss 9" in worst["message"], worst["message"]
    assert done["status"] == "succeeded"


async def test_a_bad_matrix_is_refused_with_the_matrix_vocabulary(api: Any) -> None:
    before = (await api.ok("GET", "runs"))["runs"]
    body = {"project": "team-a", "command": ["true"], "matrix": {"kind": "grid", "params": {"lr": {"uniform": [0, 1]}}}}
    code, err = await api("POST", "runs", body=body)
    assert code == 400, err
    assert "params.lr is uniform, which a grid cannot list" in err["error"]["message"]
    assert err["error"]["hint"].startswith("matrix: kind grid|random|mapping|bayes")
    assert (await api.ok("GET", "runs"))["runs"] == before
