"""The compare answer's choices made once on the server (issue 23): the metric to show first is the
one most runs logged, and code that differs is said once with a diff, not printed once per run."""

from __future__ import annotations

from jupyter_gpuplat.core.compare import direction
from jupyter_gpuplat.engine.compare import config_difference, default_metric
from jupyter_gpuplat.notebook.widgets.comparetable import table_html

A = "K = 1\nfor s in range(3):\n    log(s)\n"
B = "K = 2\nfor s in range(3):\n    log(s)\n"


def test_the_default_metric_is_the_one_most_runs_logged() -> None:
    summaries = {"r-1": {"a_extra": {}, "loss": {}}, "r-2": {"loss": {}}, "r-3": {"loss": {}, "acc": {}}}
    assert default_metric(summaries, ["r-1", "r-2", "r-3"]) == "loss"
    assert default_metric({"r-1": {"b": {}}, "r-2": {"a": {}}}, ["r-1", "r-2"]) == "a"  # equals: by name
    assert default_metric({}, ["r-1"]) is None


def test_each_metric_has_one_direction_decided_here() -> None:
    # Issue 24: compare answers carry it (`direction`); the widgets and the sidebar keep no name list.
    assert [direction(m) for m in ("val_loss", "top1_err", "step_time", "RMSE")] == ["min"] * 4
    assert [direction(m) for m in ("acc", "f1", "score", "reward")] == ["max"] * 4


def test_the_widget_table_bests_by_the_answer_direction() -> None:
    run = {"name": None, "status": "succeeded", "project": "p", "user": "u", "queue": "q", "params": {}}
    runs = [
        {**run, "id": "r-1", "metrics": {"score": {"min": 3, "max": 7, "last": 7, "last_step": 1}}},
        {**run, "id": "r-2", "metrics": {"score": {"min": 2, "max": 5, "last": 5, "last_step": 1}}},
    ]
    data = {
        "runs": runs,
        "metrics": ["score"],
        "direction": {"score": "min"},  # the service says lower is better: its best is the min
        "params": {"keys": [], "differ": []},
        "config": {"differ": []},
    }
    best = next(row for row in table_html(data, "r-1").split("<tr") if "score (best)" in row)
    # the min of each run, and r-2's lower one is the better (green) delta
    assert ">3</td>" in best and ">2 <span" in best and "success-color" in best and ">7" not in best, best


def test_code_differences_say_which_differ_and_carry_one_diff() -> None:
    d = config_difference("entrypoint.code", {"r-1": A, "r-2": B, "r-3": A}, ["r-1", "r-2", "r-3"])
    assert d["values"] == {"r-1": "first run's code", "r-2": "code differs", "r-3": "same code"}
    assert d["diff"].count("--- entrypoint.code (r-1)") == 1 and "-K = 1\n+K = 2" in d["diff"]
    assert d["diff"].count("log(s)") == 1  # a context line once, not each run's whole text
    plain = config_difference("name", {"r-1": "a", "r-2": "b"}, ["r-1", "r-2"])
    assert plain == {"path": "name", "values": {"r-1": "a", "r-2": "b"}, "diff": None}


def test_the_widget_table_says_code_differs_once_with_the_diff_behind_it() -> None:
    runs = [
        {
            "id": rid,
            "name": rid,
            "project": "p",
            "user": "u",
            "queue": "q",
            "status": "succeeded",
            "params": {},
            "metrics": {},
        }
        for rid in ("r-1", "r-2")
    ]
    diff = config_difference("entrypoint.code", {"r-1": A, "r-2": B}, ["r-1", "r-2"])
    data = {
        "runs": runs,
        "metrics": [],
        "direction": {},
        "params": {"keys": [], "differ": []},
        "config": {"differ": [diff]},
    }
    html = table_html(data, "r-1")
    assert html.count("code differs") == 1 and "<details>" in html
    assert "+K = 2" in html and html.count("range(3)") == 1  # the diff's context once, not each run's code
