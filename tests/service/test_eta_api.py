"""Issue 26 through a real server: a waiting run's start estimate in runs, a run's record, explain and its
one-line wait, the events stream; it updates when a blocker ends early, and a run with no basis says why."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from ..conftest import EXAMPLE
from ..waiting import wait_for
from .test_streams import Stream, url

PY = sys.executable
SLEEP = [PY, "-c", "import time; time.sleep(600)"]
LIMIT = 600  # every run's time limit: with no history, each is predicted to take all of it


@pytest.fixture
def platform_config_file(tmp_path: Path) -> Path:
    cfg = yaml.safe_load(EXAMPLE.read_text())
    cfg["queues"].append({"name": "one", "concurrency": 1, "ordering": "strict_fifo"})
    del cfg["defaults"]["termination"]  # no org time limit: a run without its own has no bound
    for p in cfg["projects"]:
        p["allowed_queues"] += ["one"]
    path = tmp_path / "platform.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


async def _eta(api: Any, rid: str, want: float, slack: float = 30.0) -> dict[str, Any]:
    """The run's record once its estimate is about `want` seconds from now (the estimator runs after a change)."""

    async def near() -> dict[str, Any] | None:
        run = await api.run(rid)
        eta = run.get("eta")
        return run if eta and abs(eta["p50_seconds"] - want) <= slack else None

    return await wait_for(near, timeout=20, what=f"{rid}'s estimate near {want} s")


async def test_estimates_in_runs_explain_and_they_follow_a_blocker_that_ends_early(
    api: Any, jp_http_port: int, jp_base_url: str
) -> None:
    mine = Stream(url(jp_http_port, jp_base_url, "events"), {"Authorization": "token tok-alice"})
    other = Stream(url(jp_http_port, jp_base_url, "events"), {"Authorization": "token tok-dave"})  # team-b
    try:
        await wait_for(lambda: all(any(e.get("event") == "ready" for e in s.events()) for s in (mine, other)), 10)
        timed = {"termination": {"timeout_seconds": LIMIT}}
        holder = await api.submit(name="holder", queue="one", command=SLEEP, **timed)
        await api.wait_status(holder["id"], "running")
        second = await api.submit(name="second", queue="one", command=SLEEP, **timed)
        third = await api.submit(name="third", queue="one", command=SLEEP, **timed)
        # Every time is fixed (a limit, no history): the estimate is the hand-computed start, one scenario.
        run = await _eta(api, third["id"], 2 * LIMIT)
        eta = run["eta"]
        assert eta["p90_seconds"] == pytest.approx(eta["p50_seconds"], abs=1), eta
        assert eta["p50_at"] == pytest.approx(eta["computed_at"] + 2 * LIMIT, abs=30), eta
        assert "once (every time fixed)" in eta["basis"] and "from the time limit alone for 3" in eta["basis"], eta
        assert eta["text"] == "starts in ~20 min (p90 20 min)", eta
        assert run["eta_unknown"] is None
        second_eta = (await _eta(api, second["id"], LIMIT))["eta"]
        assert second_eta["text"] == "starts in ~10 min (p90 10 min)"
        rows = {r["id"]: r for r in (await api.ok("GET", "runs", limit="10"))["runs"]}
        assert rows[third["id"]]["eta"]["p50_at"] == eta["p50_at"]
        assert rows[holder["id"]]["eta"] is None and rows[holder["id"]]["eta_unknown"] is None  # running
        ex = await api.ok("GET", f"runs/{third['id']}/explain")
        assert ex["eta"]["p50_at"] == eta["p50_at"]
        assert ex["wait_line"].endswith(" · starts in ~20 min (p90 20 min)"), ex["wait_line"]
        # The holder ends 9 minutes early: the second starts, the third's start comes 10 minutes closer.
        await api.ok("POST", f"runs/{holder['id']}/stop")
        await api.wait_status(second["id"], "running")
        run = await _eta(api, third["id"], LIMIT)
        assert run["eta"]["p50_at"] < eta["p50_at"] - LIMIT / 2, (run["eta"], eta)
        # The events stream said so too (an `eta` event per recompute, with the runs whose start moved) ...

        def said(p50_at: float) -> bool:
            runs = [r for e in mine.events() if e.get("event") == "eta" for r in json.loads(e["data"])["runs"]]
            return any(r["run_id"] == third["id"] and r["eta"]["p50_at"] == p50_at for r in runs)

        await wait_for(lambda: said(eta["p50_at"]) and said(run["eta"]["p50_at"]), 10, "both estimates on the stream")
        # ... to those who may see the run only.
        assert not [e for e in other.events() if e.get("event") == "eta"]
    finally:  # an open stream would hold the server's shutdown
        mine.future.cancel()
        other.future.cancel()


async def test_a_blocker_with_no_limit_and_no_history_gives_unknown_naming_it(api: Any) -> None:
    holder = await api.submit(name="unbounded", queue="one", command=SLEEP)
    await api.wait_status(holder["id"], "running")
    behind = await api.submit(name="behind", queue="one", command=SLEEP, termination={"timeout_seconds": LIMIT})

    async def unknown() -> dict[str, Any] | None:
        run = await api.run(behind["id"])
        return run if run.get("eta_unknown") else None

    run = await wait_for(unknown, timeout=20, what="an unknown estimate")
    assert run["eta"] is None
    assert run["eta_unknown"] == f"{holder['id']} has no time limit and no history", run["eta_unknown"]
    ex = await api.ok("GET", f"runs/{behind['id']}/explain")
    assert ex["eta"] is None and ex["eta_unknown"] == run["eta_unknown"]
    assert ex["wait_line"].endswith(f" · start unknown: {holder['id']} has no time limit and no history")


async def test_a_queues_pending_runs_carry_their_estimates(api: Any) -> None:
    timed = {"termination": {"timeout_seconds": LIMIT}}
    holder = await api.submit(name="holder", queue="one", command=SLEEP, **timed)
    await api.wait_status(holder["id"], "running")
    behind = await api.submit(name="behind", queue="one", command=SLEEP, **timed)
    unbounded = await api.submit(name="unbounded", queue="one", command=SLEEP)  # no limit: predicted never to end
    behind_eta = (await _eta(api, behind["id"], LIMIT))["eta"]

    async def one() -> dict[str, Any]:
        (q,) = [x for x in (await api.ok("GET", "queues"))["queues"] if x["name"] == "one"]
        return dict(q)

    async def listed() -> dict[str, Any] | None:
        entries = {p["id"]: p for p in (await one())["pending_runs"]}
        return entries if entries[behind["id"]]["eta"] and entries[unbounded["id"]]["eta"] else None

    # The same estimate as the run's own record: one answer, computed once on the server.
    entries = await wait_for(listed, 20, "both pending entries estimated")
    assert entries[behind["id"]]["eta"]["p50_at"] == behind_eta["p50_at"]
    assert entries[behind["id"]]["eta"]["text"] == "starts in ~10 min (p90 10 min)"
    assert entries[behind["id"]]["eta_unknown"] is None
    assert (
        entries[unbounded["id"]]["eta"]["text"] == "starts in ~20 min (p90 20 min)"
    )  # it starts; it is what never ends
    # Paused, no time frees the queue: an unknown estimate, with why, on each entry (and on every client's list).
    await api.ok("POST", "queues/one/pause", "ops")

    async def unknown() -> dict[str, Any] | None:
        q = await one()
        return q if all(p["eta_unknown"] for p in q["pending_runs"]) else None

    paused = await wait_for(unknown, 20, "unknown estimates in a paused queue")
    assert all(p["eta"] is None for p in paused["pending_runs"])
    run = await api.run(behind["id"])
    assert paused["pending_runs"][0]["eta_unknown"] == run["eta_unknown"] and "paused" in run["eta_unknown"]
