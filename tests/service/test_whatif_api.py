"""POST whatif in a real Jupyter server (the example platform, the local executor) and `gpuplat whatif`.

The route is put first here so the handler is tested whether or not routes.py lists it yet.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest
from tornado.routing import HostMatches, Rule
from tornado.web import _ApplicationRouter

from jupyter_gpuplat.cli import whatif as whatif_cli
from jupyter_gpuplat.service.whatif_handler import WhatIfHandler


@pytest.fixture
def routed(jp_serverapp: Any, api: Any) -> Any:
    app = jp_serverapp.web_app
    url = app.settings["base_url"] + "gpuplat/api/whatif"
    app.default_router.rules.insert(0, Rule(HostMatches(".*$"), _ApplicationRouter(app, [(url, WhatIfHandler)])))
    return api


async def test_bad_bodies_are_refused_by_name(routed: Any) -> None:
    code, err = await routed("POST", "whatif", "ops", {"since": "7d", "changes": {"team-a-train": {"concurency": 4}}})
    assert code == 400 and "concurency" in json.dumps(err), err
    code, err = await routed("POST", "whatif", "ops", {"since": "7d", "changes": {"nope": {"concurrency": 4}}})
    assert code == 404 and "queue 'nope' not found" in err["error"]["message"]
    assert "team-a-train" in err["error"]["hint"]
    code, err = await routed("POST", "whatif", "alice", {"since": "7d", "changes": {"nope": {"concurrency": 4}}})
    assert code == 404 and "team-a-train" in err["error"]["hint"] and "team-b-train" not in err["error"]["hint"]
    code, err = await routed("POST", "whatif", "ops", {"since": "7d", "bogus": 1})
    assert code == 400 and "bogus" in json.dumps(err)
    code, err = await routed("POST", "whatif", "ops", {"since": 10.0, "until": 5.0})
    assert code == 400 and "must be after" in err["error"]["message"]
    code, err = await routed("POST", "whatif", "ops", {"since": "7d", "changes": {"team-a-train": {"priority": 10**6}}})
    assert code == 400 and "priority" in json.dumps(err)
    # alice's project team-a may not use team-b-train
    code, err = await routed(
        "POST", "whatif", "alice", {"since": "7d", "changes": {"team-b-train": {"concurrency": 4}}}
    )
    # like GET insights: a queue that is not the caller's is answered as an unknown one
    assert code == 404 and err["error"]["message"] == "queue 'team-b-train' not found"


async def test_members_see_their_runs_and_the_cli_prints_both_sides(routed: Any, jp_serverapp: Any) -> None:
    mine = await routed.submit("alice", queue="team-a-train", command=["true"], resources={"gpu": 1})
    theirs = await routed.submit("dave", project="team-b", queue="interactive", command=["true"], resources={"gpu": 1})
    for rid, user in ((mine["id"], "alice"), (theirs["id"], "dave")):
        await routed.wait_status(rid, "succeeded", user=user)
    body = {"since": "1h", "changes": {"interactive": {"concurrency": 1}}, "queues": ["team-a-train"]}
    out = await routed.ok("POST", "whatif", "alice", body)
    assert [q["name"] for q in out["queues"]] == ["team-a-train", "interactive"]
    assert [r["id"] for r in out["runs"]] == [mine["id"]]
    assert out["hidden_runs"] == 1 and theirs["id"] not in json.dumps(out) and "dave" not in json.dumps(out)
    # On a wall clock the cycle runs a loop turn after the submission: milliseconds the replay does not model.
    assert out["runs"][0]["predicted_wait_seconds"] == 0
    assert out["runs"][0]["observed_wait_seconds"] == pytest.approx(0, abs=1)
    url = jp_serverapp.connection_url
    argv = ["--url", url, "--token", "tok-ops", "--queue", "team-a-train", "--set", "concurrency=4", "--since", "1h"]
    lines: list[str] = []
    code = await asyncio.to_thread(_cli, [*argv, "--runs"], lines)
    text = "\n".join(lines)
    assert code == 0, text
    assert "queue team-a-train: 1 runs" in text and "concurrency: 2 -> 4" in text
    assert "observed   predicted" in text and "assumptions:" in text and mine["id"] in text
    code = await asyncio.to_thread(_cli, ["--json", *argv, "--until", str(time.time() + 60)], lines)
    assert code == 0
    assert json.loads(lines[-1])["queues"][0]["settings"]["concurrency"] == 4
    code = await asyncio.to_thread(_cli, [*argv, "--set", "colour=red"], lines)
    assert code == 2


def _cli(argv: list[str], lines: list[str]) -> int:
    import contextlib
    import io

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = whatif_cli.main(argv)
    lines.append(out.getvalue() + err.getvalue())
    return code


def test_set_parsing() -> None:
    assert whatif_cli.changes(
        ["a"], ["concurrency=4", "quota.gpu=none", "b:max_per_user=2", "ordering=strict_fifo"]
    ) == {
        "a": {"concurrency": 4, "quota": {"gpu": None}, "ordering": "strict_fifo"},
        "b": {"max_per_user": 2},
    }
    for bad, why in (("concurrency", "KEY=VALUE"), ("colour=red", "unknown setting"), ("concurrency=x", "whole")):
        with pytest.raises(whatif_cli.UsageError, match=why):
            whatif_cli.changes(["a"], [bad])
    assert whatif_cli.instant("7d") == "7d"
    assert whatif_cli.instant("2026-11-25T00:00:00+00:00") == 1795564800.0
