"""Admin writes: queues, presets, projects and the whole config, with their access rules."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from ..conftest import EXAMPLE


async def queue_actions(api: Any, user: str) -> list[str]:
    return next(q["actions"] for q in (await api.ok("GET", "queues", user))["queues"] if q["name"] == "team-a-train")


async def test_pause_holds_runs_and_resume_dispatches(api: Any) -> None:
    # The queue view says who may pause it (clients offer the button from `actions`, not a role check).
    assert await queue_actions(api, "alice") == [] and await queue_actions(api, "ops") == ["pause"]
    code, body = await api("POST", "queues/team-a-train/pause", "alice")
    assert code == 403 and "not a platform admin" in body["error"]["message"]
    paused = await api.ok("POST", "queues/team-a-train/pause", "ops")
    assert paused["queue"]["actions"] == ["resume"] and await queue_actions(api, "alice") == []
    run = await api.submit(command="true")
    ex = await api.ok("GET", f"runs/{run['id']}/explain")
    assert ex["reason"] == "QueuePaused" and ex["layer"] == "queue"
    assert ex["who_can_act"][0] == {"who": "ops", "can": "resume queue team-a-train"}
    q = await api.ok("POST", "queues/team-a-train/resume", "ops")
    assert q["queue"]["paused"] is False
    await api.wait_status(run["id"], "succeeded")


async def test_queue_put_changes_limits_live_and_bad_queue_is_refused(api: Any, tmp_path: Path) -> None:
    gate = tmp_path / "g"
    cmd = ["sh", "-c", f"while [ ! -e {gate} ]; do sleep 0.02; done"]
    runs = [await api.submit(command=cmd, presets=["single-gpu"]) for _ in range(3)]
    await api.wait_status(runs[1]["id"], "running")
    assert (await api.run(runs[2]["id"]))["status"] == "queued"
    body = {"name": "team-a-train", "priority": 10, "concurrency": 3, "quota": {"gpu": 3}}
    await api.ok("PUT", "queues/team-a-train", "ops", body)
    await api.wait_status(runs[2]["id"], "running")  # raising the limit dispatched the waiting run
    code, err = await api("PUT", "queues/team-a-train", "ops", {**body, "quota": {"gpu": -2}})
    assert code == 400 and "quota.gpu: must be >= 0" in err["error"]["message"]
    code, err = await api("PUT", "queues/other", "ops", body)
    assert code == 400 and "does not match" in err["error"]["message"]
    code, err = await api("DELETE", "queues/team-a-train", "ops")
    assert code == 400 and "unknown queue 'team-a-train'" in err["error"]["message"]  # projects still use it
    gate.touch()
    for r in runs:
        await api.wait_status(r["id"], "succeeded")


async def test_presets_and_projects_writes(api: Any) -> None:
    preset = {"name": "big-mem", "resources": {"gpu": 1, "memory": "200Gi"}, "merge": "post_merge"}
    code, _ = await api("PUT", "presets/big-mem", "alice", preset)
    assert code == 403
    await api.ok("PUT", "presets/big-mem", "ops", preset)
    # team-a has an allow-list without it: a restriction is access control.
    code, err = await api("POST", "runs", body={"project": "team-a", "command": "true", "presets": ["big-mem"]})
    assert code == 403 and err["error"]["code"] == "PresetNotAllowed"
    # A project admin may change members and defaults, not restrictions.
    projects = {p["name"]: p for p in (await api.ok("GET", "projects", "alice"))["projects"]}
    mine = {k: v for k, v in projects["team-a"].items() if k not in ("role", "usable_queues", "usable_presets")}
    code, err = await api("PUT", "projects/team-a", "alice", {**mine, "allowed_presets": ["big-mem"]})
    assert code == 403 and "set by platform admins" in err["error"]["message"]
    added = {**mine, "members": {**mine["members"], "mallory": "member"}}
    await api.ok("PUT", "projects/team-a", "alice", added)
    mallory = await api.ok("GET", "whoami", "mallory")
    assert mallory["projects"] == [{"name": "team-a", "role": "member", "may_submit": True}]
    code, err = await api("PUT", "projects/team-a", "bob", added)
    assert code == 403
    # Creating a project as a project admin: refused as if it were another team's (it tells nothing).
    code, err = await api("PUT", "projects/team-z", "alice", {**added, "name": "team-z"})
    assert code == 404 and "platform admins create projects" in err["error"]["hint"]


async def test_config_get_and_declarative_apply(api: Any, tmp_path: Path) -> None:
    code, _ = await api("GET", "config", "alice")
    assert code == 403
    doc = yaml.safe_load(EXAMPLE.read_text())
    doc["queues"][0]["concurrency"] = 5
    doc["queues"][1]["quota"]["gpu"] = -1
    doc["projects"][0]["default_queue"] = "nope"
    code, err = await api("PUT", "config", "ops", {"config": doc})
    assert code == 400
    msg = err["error"]["message"]
    assert "queues[1].quota.gpu: must be >= 0" in msg  # every error by path, nothing applied
    assert (await api.ok("GET", "config", "ops"))["config"]["queues"][0]["concurrency"] == 2
    doc["queues"][1]["quota"]["gpu"] = 2
    doc["projects"][0]["default_queue"] = "team-a-train"
    r = await api.ok("PUT", "config", "ops", {"config": doc})
    assert r["applied"] is True
    assert (await api.ok("GET", "config", "ops"))["config"]["queues"][0]["concurrency"] == 5
    # Removing a queue that still holds runs is refused and changes nothing.
    gate = tmp_path / "g"
    run = await api.submit(
        "erin", project="team-b", command=["sh", "-c", f"while [ ! -e {gate} ]; do sleep 0.02; done"]
    )
    await api.wait_status(run["id"], "running", user="erin")
    smaller = {**doc, "queues": [q for q in doc["queues"] if q["name"] != "team-b-train"]}
    smaller["projects"] = [p for p in doc["projects"] if p["name"] != "team-b"]
    code, err = await api("PUT", "config", "ops", {"config": smaller})
    assert code == 409 and "team-b-train" in err["error"]["message"]
    # The dry run says so beforehand, with the run it affects, and what else would change.
    before = await api.ok("GET", "config", "ops")
    dry = await api.ok("PUT", "config", "ops", {"config": smaller}, dry_run="true")
    assert dry["applied"] is False and dry["version"] == before["version"]
    plan = dry["plan"]
    assert plan["affects"] == [
        {
            "queue": "team-b-train",
            "runs": [run["id"]],
            "message": "queue team-b-train is removed but holds 1 running and 0 queued run(s): "
            "the apply is refused (409) until they end",
            "refused": True,
        }
    ]
    assert [(c["section"], c["name"], c["change"]) for c in plan["changes"]] == [
        ("queues", "team-b-train", "removed"),
        ("projects", "team-b", "removed"),
    ]
    assert {m["user"] for m in plan["members"]} == {"dave", "erin", "frank"}
    assert await api.ok("GET", "config", "ops") == before  # nothing applied
    gate.touch()
    await api.wait_status(run["id"], "succeeded", user="erin")
