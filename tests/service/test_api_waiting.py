"""The API data the run list and the Queues tab show: why runs wait, pending runs with positions,
and the presets that actually applied (a project's default_presets included)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from jupyter_gpuplat.client.explaining import explanation_lines
from jupyter_gpuplat.core.explain_text import eta_words

from ..conftest import EXAMPLE

PY = sys.executable
SLEEP = [PY, "-c", "import time; time.sleep(600)"]


@pytest.fixture
def platform_config_file(tmp_path: Path) -> Path:
    cfg = yaml.safe_load(EXAMPLE.read_text())
    # parked: paused, both teams may use it; a-only: a strict queue of one run at a time.
    cfg["queues"].append({"name": "parked", "paused": True})
    cfg["queues"].append({"name": "one", "concurrency": 1, "ordering": "strict_fifo"})
    for p in cfg["projects"]:
        p["allowed_queues"] += ["parked", "one"]
    team_a = next(p for p in cfg["projects"] if p["name"] == "team-a")
    team_a["default_presets"] = ["single-gpu"]
    path = tmp_path / "platform.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


async def test_waiting_in_list_and_detail_is_what_explain_says(api: Any) -> None:
    holder = await api.submit(name="holder", queue="one", command=SLEEP)
    await api.wait_status(holder["id"], "running")
    behind = await api.submit(name="behind", queue="one", command=SLEEP)
    parked = await api.submit(name="parked", queue="parked", command=SLEEP)
    rows = {r["id"]: r for r in (await api.ok("GET", "runs", limit="10"))["runs"]}
    for rid, reason in ((behind["id"], "QueueConcurrency"), (parked["id"], "QueuePaused")):
        ex = await api.ok("GET", f"runs/{rid}/explain")
        assert ex["reason"] == reason
        want = {"reason": ex["reason"], "message": ex["message"]}
        assert rows[rid]["waiting"] == want
        assert (await api.run(rid))["waiting"] == want
    assert "1/1 runs dispatched" in rows[behind["id"]]["waiting"]["message"]
    # Issue 24: the answer words its layer and its numbers once, as the CLI and the widgets print them.
    ex = await api.ok("GET", f"runs/{behind['id']}/explain")
    assert ex["layer_text"] == "held by our queue (dispatch)"
    assert {"label": "numbers", "text": "1/1 in use"} in ex["number_lines"], ex["number_lines"]
    assert [line["label"] for line in ex["number_lines"]] == ["numbers", "position", "queue"]
    # ... and where it stands in one line, as a GPU session's waiting message reads it
    # (and, once estimated, when it may start: issue 26)
    line = f"position 1 of 1 in one · QueueConcurrency 1/1 · {ex['message']}"
    assert ex["wait_line"] in (line, f"{line} · {eta_words(ex)}"), ex["wait_line"]
    lines = explanation_lines(ex)
    assert ("where", ex["layer_text"]) in lines
    assert [(x["label"], x["text"]) for x in ex["number_lines"]] == [
        x for x in lines if x[0] in ("numbers", "position", "queue")
    ]
    # running: nothing to wait for
    assert rows[holder["id"]]["waiting"] is None
    assert (await api.run(holder["id"]))["waiting"] is None
    await api.ok("POST", f"runs/{parked['id']}/stop")
    done = await api.wait_status(parked["id"], "stopped")
    assert done["waiting"] is None


async def test_presets_applied_include_the_projects_default_presets(api: Any) -> None:
    plain = await api.submit(name="plain", queue="parked", command=SLEEP)
    assert plain["presets"] == [] and plain["presets_applied"] == ["single-gpu"]
    assert plain["resources"]["gpu"] == 1  # the default preset did apply
    picked = await api.submit(name="picked", queue="parked", presets=["multi-gpu"], command=SLEEP)
    assert picked["presets"] == ["multi-gpu"]
    assert picked["presets_applied"] == ["single-gpu", "multi-gpu"]  # merge order: defaults first
    rows = {r["id"]: r for r in (await api.ok("GET", "runs"))["runs"]}
    assert rows[plain["id"]]["presets_applied"] == ["single-gpu"]
    assert rows[picked["id"]]["presets_applied"] == ["single-gpu", "multi-gpu"]
    detail = await api.run(plain["id"])
    assert detail["presets"] == [] and detail["presets_applied"] == ["single-gpu"]
    # team-b has no default presets: what was picked is what applied
    b = await api.submit("erin", project="team-b", name="b", queue="parked", command=SLEEP)
    assert b["presets_applied"] == []


async def test_queues_list_the_callers_pending_runs_with_positions(api: Any) -> None:
    a1 = await api.submit(name="a1", queue="parked", command=SLEEP)
    b1 = await api.submit("erin", project="team-b", name="b1", queue="parked", command=SLEEP)
    a2 = await api.submit("bob", name="a2", queue="parked", command=SLEEP)

    def parked(page: dict[str, Any]) -> dict[str, Any]:
        q = dict(next(q for q in page["queues"] if q["name"] == "parked"))
        # Each entry's start estimate is test_eta_api's: here only that it is there (maybe not computed yet).
        assert all({"eta", "eta_unknown"} <= set(p) for p in q["pending_runs"]), q["pending_runs"]
        q["pending_runs"] = [{k: v for k, v in p.items() if k not in ("eta", "eta_unknown")} for p in q["pending_runs"]]
        return q

    qa = parked(await api.ok("GET", "queues", "carol"))  # a viewer of team-a
    assert qa["pending"] == 3 and qa["pending_hidden"] == 1
    assert qa["pending_runs"] == [
        {"id": a1["id"], "name": "a1", "project": "team-a", "user": "alice", "position": 1},
        {"id": a2["id"], "name": "a2", "project": "team-a", "user": "bob", "position": 3},
    ]
    assert qa["max_per_user"] is None and qa["ordering"] == "best_effort_fifo"
    qb = parked(await api.ok("GET", "queues", "frank"))
    assert qb["pending_hidden"] == 2
    assert qb["pending_runs"] == [{"id": b1["id"], "name": "b1", "project": "team-b", "user": "erin", "position": 2}]
    qops = parked(await api.ok("GET", "queues", "ops"))  # a platform admin sees every project
    assert [p["position"] for p in qops["pending_runs"]] == [1, 2, 3] and qops["pending_hidden"] == 0
    # after one leaves, the positions move up
    await api.ok("POST", f"runs/{a1['id']}/stop")
    await api.wait_status(a1["id"], "stopped")
    qa = parked(await api.ok("GET", "queues", "carol"))
    assert [(p["id"], p["position"]) for p in qa["pending_runs"]] == [(a2["id"], 2)]


async def test_a_waiting_sweep_its_children_say_why_and_its_parent_explains(api: Any) -> None:
    body = {
        "project": "team-a",
        "name": "sw",
        "queue": "parked",
        "command": SLEEP,
        "matrix": {"kind": "grid", "params": {"lr": {"values": [1, 2]}}},
    }
    code, parent = await api("POST", "runs", body=body)
    assert code == 201, parent
    assert parent["waiting"] is None  # the parent holds no place in the queue: its children do
    kids = (await api.ok("GET", "runs", parent=parent["id"]))["runs"]
    assert [k["waiting"]["reason"] for k in kids] == ["QueuePaused", "QueuePaused"]
    ex = await api.ok("GET", f"runs/{parent['id']}/explain")
    assert ex["run_id"] == parent["id"] and ex["status"] == parent["status"] and ex["layer"] == "queue"
