"""Comparing a sweep: the pure ranking and parallel-coordinates axes (tables), the service's read
model over a real engine and store, and Compare(sweep_id) against a real Jupyter server whose
children log their metric with jupyter_gpuplat.tracking.
"""

from __future__ import annotations

import asyncio
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from jupyter_gpuplat.client import Client
from jupyter_gpuplat.core.errors import InvalidInput
from jupyter_gpuplat.core.request import RunRequest
from jupyter_gpuplat.core.sweep_compare import Objective, best, param_axis, parcoords_axes, ranked, top
from jupyter_gpuplat.engine.compare import compare_sweep
from jupyter_gpuplat.executors.fake import FakeExecutor
from jupyter_gpuplat.notebook.widgets import Compare

from ..fake_engine import Harness, config
from ..server import ServerProcess
from ..widget_env import served, threads_ended

MIN = Objective("loss")
MAX = Objective("acc", maximize=True)


# ---- the pure part ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("objective", "values", "order", "best_id", "top2"),
    [
        (MIN, {"a": 0.3, "b": 0.1, "c": 0.2}, ["b", "c", "a"], "b", ["b", "c"]),
        (MAX, {"a": 0.3, "b": 0.1, "c": 0.2}, ["a", "c", "b"], "a", ["a", "c"]),
        # no value yet: last, in the given order; never among the top
        (MIN, {"a": None, "b": 0.5, "c": None}, ["b", "a", "c"], "b", ["b"]),
        (MIN, {}, ["a", "b", "c"], None, []),
        # equals keep the given order: the first of equals is best
        (MAX, {"a": 1.0, "b": 2.0, "c": 2.0}, ["b", "c", "a"], "b", ["b", "c"]),
        (MIN, {"a": -1.0, "b": 0.0, "c": -5.0}, ["c", "a", "b"], "c", ["c", "a"]),
    ],
)
def test_ranking_best_and_top(
    objective: Objective, values: dict[str, float | None], order: list[str], best_id: str | None, top2: list[str]
) -> None:
    ids = ["a", "b", "c"]
    assert ranked(ids, values, objective) == order
    assert best(ids, values, objective) == best_id
    assert top(ids, values, objective, 2) == top2
    assert top(ids, values, objective, 0) == []


@pytest.mark.parametrize(
    ("summary", "objective", "value"),
    [
        ({"min": 0.1, "max": 0.9, "last": 0.5}, MIN, 0.1),
        ({"min": 0.1, "max": 0.9, "last": 0.5}, MAX, 0.9),
        ({"min": None, "max": None, "count": 3}, MIN, None),  # only NaNs logged
        (None, MAX, None),
    ],
)
def test_a_childs_value_is_its_best_over_steps(
    summary: dict[str, Any] | None, objective: Objective, value: float | None
) -> None:
    assert objective.value(summary) == value


def test_objective_of_a_matrix() -> None:
    assert Objective.of({"metric": "acc", "optimization": "maximize"}) == Objective("acc", True)
    assert Objective.of({"metric": "loss", "optimization": "minimize"}) == Objective("loss", False)
    assert Objective.of(None) is None and Objective.of({}) is None


def test_parcoords_axes_from_mixed_params() -> None:
    params: list[dict[str, Any]] = [
        {"lr": 0.1, "opt": "sgd", "bn": True},
        {"lr": 0.01, "opt": "adam", "bn": False},
        {"lr": 1, "opt": "sgd"},  # no bn: no value on that axis
        {"lr": 0.001, "opt": 3, "bn": True},  # a number among strings: the axis is categorical
    ]
    axes = parcoords_axes(params, [0.5, 0.2, None, 0.9], MIN)
    assert [a.label for a in axes] == ["lr", "opt", "bn", "loss (minimize)"]
    lr, opt, bn, loss = (a.dimension() for a in axes)
    assert lr == {"label": "lr", "values": [0.1, 0.01, 1.0, 0.001], "range": [0.001, 1.0]}
    assert opt == {
        "label": "opt",
        "values": [2.0, 1.0, 2.0, 0.0],
        "tickvals": [0, 1, 2],
        "ticktext": ["3", "adam", "sgd"],
        "range": [0, 2],
    }
    assert bn == {
        "label": "bn",
        "values": [1.0, 0.0, None, 1.0],
        "tickvals": [0, 1],
        "ticktext": ["false", "true"],
        "range": [0, 1],
    }
    assert loss == {"label": "loss (minimize)", "values": [0.5, 0.2, None, 0.9], "range": [0.2, 0.9]}


def test_a_param_of_one_value_and_a_param_nobody_has() -> None:
    assert param_axis("opt", ["adam", "adam"]).dimension()["tickvals"] == [0]
    assert param_axis("x", [None, None]).dimension() == {"label": "x", "values": [None, None]}


# ---- the service's read model (a real engine and SQLite store, the executor scripted) ----------------
@pytest.fixture
def harness(tmp_path: Path, jp_asyncio_loop: asyncio.AbstractEventLoop) -> Iterator[Harness]:
    h = Harness(tmp_path, FakeExecutor(gpus=16))
    jp_asyncio_loop.run_until_complete(h.start(config([{"name": "q"}])))
    yield h
    jp_asyncio_loop.run_until_complete(h.close())


def test_read_model_ranks_every_child_and_reads_curves_of_the_top_only(harness: Harness) -> None:
    values = [{"lr": v, "opt": o} for v, o in ((0.3, "sgd"), (0.01, "adam"), (0.1, "sgd"), (0.03, "adam"))]
    body = {
        "project": "p",
        "queue": "q",
        "command": ["train"],
        "matrix": {"kind": "mapping", "values": values, "objective": {"metric": "loss", "optimization": "minimize"}},
    }
    sweep = harness.engine.submit("bob", RunRequest.model_validate(body))
    children = sorted(harness.store.list_runs(["p"], parent=sweep["id"], limit=100), key=lambda r: r["seq"])
    steps = np.arange(5, dtype=np.int64)
    for c in children:
        lr = c["resolved"]["params"]["lr"]
        harness.store.metrics.append(
            c["id"], {"loss": (steps, lr * 10 + 1 / (steps + 1.0))}, params={}, metrics_offset=0, params_offset=0
        )
    out = compare_sweep(harness.engine, "bob", sweep["id"], None, 2, 100)
    assert out["objective"] == {"metric": "loss", "optimization": "minimize"}
    assert [c["params"]["lr"] for c in out["children"]] == [0.01, 0.03, 0.1, 0.3]
    assert out["children"][0]["value"] == pytest.approx(0.1 + 0.2)
    row = harness.store.get_run(sweep["id"])
    assert row is not None
    view = harness.engine.reads.sweep_view(row)
    assert view is not None and out["best"] == view["best"]["id"] == out["children"][0]["id"]
    assert out["top"] == [c["id"] for c in out["children"][:2]] and set(out["curves"]) == set(out["top"])
    assert out["curves"][out["best"]]["loss"]["count"] == 5
    with pytest.raises(InvalidInput, match="is not a sweep"):
        compare_sweep(harness.engine, "bob", children[0]["id"], None, 2, 100)
    with pytest.raises(InvalidInput, match="at most 50"):
        compare_sweep(harness.engine, "bob", sweep["id"], None, 51, 100)


# ---- Compare(sweep_id) against a real server ----------------------------------------------------------
# Each child logs loss over 3 steps; its best (min) is lr*10 + (1 for sgd) + 1/3.
SCORED = (
    "from jupyter_gpuplat import tracking\n"
    "p = tracking.params()\n"
    "for step in range(3):\n"
    "    tracking.log_metrics(step=step, loss=p['lr'] * 10 + (p['opt'] == 'sgd') + 1 / (step + 1))\n"
)
MAPPING = [
    {"lr": 0.3, "opt": "sgd"},
    {"lr": 0.01, "opt": "adam"},
    {"lr": 0.1, "opt": "sgd"},
    {"lr": 0.03, "opt": "adam"},
    {"lr": 0.25, "opt": "adam"},
    {"lr": 0.05, "opt": "sgd"},
]
BEST_FIRST = [(0.01, "adam"), (0.03, "adam"), (0.05, "sgd"), (0.1, "sgd"), (0.25, "adam"), (0.3, "sgd")]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    yield from served(tmp_path_factory, "sweep-compare")


@pytest.fixture(autouse=True)
def no_thread_left() -> Iterator[None]:
    yield
    threads_ended("gpuplat-compare")


def rows_of(html: str) -> list[list[str]]:
    """The table's body rows as their cells' text."""
    body = re.findall(r"<tr[^>]*>(.*?)</tr>", html, re.S)[1:]
    return [[re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", r, re.S)] for r in body]


@pytest.fixture(scope="module")
def scored_sweep(server: ServerProcess) -> dict[str, Any]:
    (server.root / "scored.py").write_text(SCORED)
    c = Client(url=server.url, token="tok-alice")
    try:
        matrix = {
            "kind": "mapping",
            "values": MAPPING,
            "concurrency": 6,
            "objective": {"metric": "loss", "optimization": "minimize"},
        }
        sweep = c.submit("team-a", [sys.executable, str(server.root / "scored.py")], matrix=matrix)
        assert c.wait(sweep["id"], timeout=90)["status"] == "succeeded"
        return sweep
    finally:
        c.session.close()


def test_compare_of_a_sweep_ranks_its_children_by_the_objective(client: Client, scored_sweep: dict[str, Any]) -> None:
    cmp = Compare(scored_sweep["id"], client, top=3)
    try:
        assert cmp.sweep is not None and cmp.sweep_panel is not None and cmp.thread is None  # it ended
        table = rows_of(cmp.sweep_panel.table_html)
        assert [(float(r[3]), r[4]) for r in table] == BEST_FIRST
        assert [r[0] for r in table] == ["1", "2", "3", "4", "5", "6"] and all(r[2] == "succeeded" for r in table)
        assert float(table[0][5]) == pytest.approx(0.1 + 1 / 3)
        # the best is the server's best, marked in the table and as the baseline of the side-by-side view
        server_best = client.get(scored_sweep["id"])["best"]
        assert cmp.best == server_best["id"] and table[0][1] == f"{server_best['id']} ★ best"
        assert server_best["value"] == pytest.approx(float(table[0][5]))
        assert cmp.sweep_panel.table_html.count('class="gpuplat-best"') == 1
        assert cmp.baseline == cmp.best and cmp.run_ids == [c["id"] for c in cmp.sweep_panel.data["children"][:3]]
        # one parcoords dimension per param, the last the objective, colored by it
        (pc,) = cmp.sweep_panel.parcoords.data
        assert pc.type == "parcoords"
        labels = [d.label for d in pc.dimensions]
        assert labels == ["lr", "opt", "loss (minimize)"]
        opt = pc.dimensions[1]
        assert list(opt.ticktext) == ["adam", "sgd"] and list(opt.tickvals) == [0, 1]
        assert list(opt["values"]) == [0.0 if o == "adam" else 1.0 for _, o in BEST_FIRST]
        assert list(pc.line.color) == pytest.approx(list(pc.dimensions[2]["values"]))
        assert pc.line.reversescale is True  # minimizing: the low end is the bright one
        # a scatter per param against the metric, the best a star
        scatters = cmp.sweep_panel.scatter.data
        assert [s.name for s in scatters] == ["lr", "opt"] and [s.xaxis for s in scatters] == ["x", "x2"]
        assert list(scatters[0].marker.symbol).count("star") == 1
        # the top 3's curves of the objective, overlaid
        assert sorted(t.meta["run_id"] for t in cmp.figure.data) == sorted(cmp.run_ids)
        assert all(t.meta["metric"] == "loss" and len(t.x) == 3 for t in cmp.figure.data)
    finally:
        cmp.close()


def test_the_sweep_table_sorts_by_a_param(client: Client, scored_sweep: dict[str, Any]) -> None:
    cmp = Compare([scored_sweep["id"]], client)
    try:
        assert cmp.sweep_panel is not None and len(cmp.run_ids) == 5  # top 5 by default
        panel = cmp.sweep_panel
        panel.sort_by.value = "lr"
        assert [float(r[3]) for r in rows_of(panel.table_html)] == [0.01, 0.03, 0.05, 0.1, 0.25, 0.3]
        panel.descending.value = True
        assert [float(r[3]) for r in rows_of(panel.table_html)] == [0.3, 0.25, 0.1, 0.05, 0.03, 0.01]
        # the rank column keeps the objective's order whatever the sort
        assert rows_of(panel.table_html)[0][0] == "6"
        panel.sort_by.value = ""
        assert [float(r[3]) for r in rows_of(panel.table_html)] == [lr for lr, _ in reversed(BEST_FIRST)]
    finally:
        cmp.close()


def test_a_metric_asked_for_judges_the_sweep_and_runs_still_compare_as_runs(
    client: Client, scored_sweep: dict[str, Any]
) -> None:
    children = client.sweep_children(scored_sweep["id"])
    plain = Compare([children[0]["id"], children[1]["id"]], client)
    try:
        assert plain.sweep is None and plain.sweep_panel is None and plain.best is None
    finally:
        plain.close()
    # "loss" guessed as lower-is-better, the same order as the objective's
    cmp = Compare(scored_sweep["id"], client, metrics=["loss"], top=1)
    try:
        assert cmp.sweep_panel is not None and cmp.run_ids == [cmp.best]
        assert [(c["params"]["lr"], c["params"]["opt"]) for c in cmp.sweep_panel.data["children"]] == BEST_FIRST
    finally:
        cmp.close()
