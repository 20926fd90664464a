"""Start estimates (issue 26) in the Python clients, against a real server: `gpuplat runs list/show/explain`,
`gpuplat queues`, `gpuplat submit --preview`, the Launcher's preview, `Client.events(eta=True)` and the
magics' status line, which follows a waiting run's estimate as it moves.

Every run has a time limit of LIMIT seconds and there is no history, so each blocker is predicted to
take all of it and the estimates are fixed numbers ("starts in ~3.0 h (p90 3.0 h)"). A run with no
limit holds queue `solo`, so the run behind it has no estimate, and says why.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from jupyter_gpuplat.client import Client
from jupyter_gpuplat.notebook.widgets import Launcher
from jupyter_gpuplat.notebook.widgets.statusline import StatusLine

from ..conftest import EXAMPLE
from ..server import ServerProcess, cells_of
from ..waiting import until
from ..widget_env import threads_ended

PY = sys.executable
SLEEP = [PY, "-c", "import time; time.sleep(600)"]
# Three hours, worded to a tenth of an hour: an estimate read up to ~3 min after the blocker started (a slow,
# loaded machine) still says the same ("~10 min" would have turned "~9 min" after 30 s).
LIMIT = 3 * 3600
ONE = "starts in ~3.0 h (p90 3.0 h)"  # behind one run that holds its queue for LIMIT seconds
TWO = "starts in ~6.0 h (p90 6.0 h)"  # behind two


def eta_config(root: Path) -> Path:
    """The example platform without an org time limit, and team-a's queues here: `one`, `solo` and `watch`
    run one at a time; `spare` has room."""
    cfg = yaml.safe_load(EXAMPLE.read_text())
    del cfg["defaults"]["termination"]  # a run without its own limit has no bound
    for name in ("one", "solo", "watch"):
        cfg["queues"].append({"name": name, "concurrency": 1, "ordering": "strict_fifo"})
    cfg["queues"].append({"name": "spare", "quota": {"gpu": 1}})
    team_a = next(p for p in cfg["projects"] if p["name"] == "team-a")
    team_a["allowed_queues"] = ["one", "spare", "solo", "watch"]  # `spare` is the first other queue tried
    team_a["allowed_presets"] = ["single-gpu", "multi-gpu"]
    team_a["default_queue"] = "one"
    team_a.pop("default_presets", None)
    root.mkdir(parents=True, exist_ok=True)
    path = root / "platform.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    root = tmp_path_factory.mktemp("eta-clients")
    srv = ServerProcess(root, config_file=eta_config(root / "config"))
    srv.start()
    yield srv
    srv.stop_all_runs()
    srv.stop()


@pytest.fixture(autouse=True)
def no_thread_left() -> Iterator[None]:
    yield
    threads_ended()


def submit(server: ServerProcess, name: str, queue: str, limit: int | None = LIMIT) -> dict[str, Any]:
    body: dict[str, Any] = {"project": "team-a", "name": name, "queue": queue, "command": SLEEP}
    if limit is not None:
        body["termination"] = {"timeout_seconds": limit}
    return dict(server.ok("POST", "runs", body=body))


def estimated(server: ServerProcess, run_id: str, field: str = "eta") -> dict[str, Any]:
    """The run's record once the server has estimated it (the estimator runs just after a change)."""

    def known() -> dict[str, Any] | None:
        run: dict[str, Any] = server.ok("GET", f"runs/{run_id}")
        return run if run.get(field) else None

    return until(known, f"{run_id}'s {field}")


@pytest.fixture(scope="module")
def waiting(server: ServerProcess) -> dict[str, dict[str, Any]]:
    """`holder` runs in `one` with `behind` after it; `unbounded` (no limit) runs in `solo`, `stuck` after it."""
    runs = {"holder": submit(server, "holder", "one"), "unbounded": submit(server, "unbounded", "solo", None)}
    for r in runs.values():
        server.wait_status(r["id"], "running")
    runs["behind"] = submit(server, "behind", "one")
    runs["stuck"] = submit(server, "stuck", "solo")
    runs["behind"] = estimated(server, runs["behind"]["id"])
    runs["stuck"] = estimated(server, runs["stuck"]["id"], "eta_unknown")
    assert runs["behind"]["eta"]["text"] == ONE, runs["behind"]["eta"]
    return runs


def gp(server: ServerProcess, *args: str) -> str:
    return server.gpuplat(*args).stdout


def test_runs_list_and_show_say_when_a_waiting_run_starts(
    server: ServerProcess, waiting: dict[str, dict[str, Any]]
) -> None:
    behind, stuck, holder = waiting["behind"], waiting["stuck"], waiting["holder"]
    why = f"{waiting['unbounded']['id']} has no time limit and no history"
    assert stuck["eta_unknown"] == why, stuck
    rows = {r[0]: r for r in cells_of(gp(server, "runs", "list"), 10)}
    assert rows["ID"][8] == "START"
    assert rows[behind["id"]][8] == ONE
    assert rows[stuck["id"]][8] == f"unknown: {why}"
    assert rows[holder["id"]][8] == ""  # running: nothing to estimate
    show = gp(server, "runs", "show", behind["id"]).splitlines()
    assert f"start: {ONE}" in show, show


def test_runs_explain_says_when_it_starts_and_on_what_basis(
    server: ServerProcess, waiting: dict[str, dict[str, Any]]
) -> None:
    behind, stuck = waiting["behind"], waiting["stuck"]
    why = f"{waiting['unbounded']['id']} has no time limit and no history"
    # Explain, the detail view: the estimate and what it rests on, as the server words them.
    explain = gp(server, "runs", "explain", behind["id"]).splitlines()
    assert f"start: {ONE}" in explain, explain
    basis = server.ok("GET", f"runs/{behind['id']}/explain")["eta"]["basis"]
    assert f"start basis: {basis}" in explain and "time limit" in basis, explain
    unknown = gp(server, "runs", "explain", stuck["id"]).splitlines()
    assert f"start: unknown: {why}" in unknown and not any(x.startswith("start basis") for x in unknown)


def test_queues_lists_each_pending_runs_estimate(server: ServerProcess, waiting: dict[str, dict[str, Any]]) -> None:
    out = gp(server, "queues")
    one = out[out.index("pending in one") :].split("\n\n")[0].splitlines()
    assert one[1].split() == ["POSITION", "ID", "NAME", "PROJECT", "USER", "START"]
    assert one[2].split()[:5] == ["1", waiting["behind"]["id"], "behind", "team-a", "alice"]
    assert one[2].endswith(f"alice  {ONE}"), one
    solo = out[out.index("pending in solo") :].split("\n\n")[0]
    assert f"unknown: {waiting['unbounded']['id']} has no time limit and no history" in solo, solo


def test_submit_preview_says_when_it_would_start_and_how_to_start_sooner(
    server: ServerProcess, waiting: dict[str, dict[str, Any]]
) -> None:
    pv = gp(server, "submit", "-p", "team-a", "-q", "one", "--preview", "--", "python", "t.py").splitlines()
    # Added after every run waiting in `one`: the holder's slot, then behind's.
    assert f"  start: {TWO}" in pv, pv
    at = pv.index("  to start sooner:")
    assert pv[at + 1] == "    use queue spare: starts now", pv
    now = gp(server, "submit", "-p", "team-a", "-q", "spare", "--preview", "--", "t.py").splitlines()
    assert "  start: starts now" in now and "  to start sooner:" not in now


def test_the_launchers_preview_says_when_it_would_start(client: Client, waiting: dict[str, dict[str, Any]]) -> None:
    launcher = Launcher(client, project="team-a")
    try:
        launcher.queue_picker.value = "one"
        launcher.command_field.value = "python t.py"
        p = until(
            lambda: launcher.preview if (launcher.shown_request or {}).get("command") == "python t.py" else None,
            "the preview of the command",
        )
        assert p["eta"]["text"] == TWO
        html = launcher.preview_html
        assert f"start: {TWO}" in html and "to start sooner:" in html, html
        assert "<li>use queue spare: starts now</li>" in html, html
    finally:
        launcher.close()


def stop(server: ServerProcess, *runs: dict[str, Any]) -> None:
    """Stop the runs a test started (one that has ended already answers 409)."""
    for r in runs:
        server.call("POST", f"runs/{r['id']}/stop")


def test_events_deliver_estimates_to_those_who_ask(server: ServerProcess, client: Client) -> None:
    holder = submit(server, "watched-holder", "watch")
    server.wait_status(holder["id"], "running")
    run = estimated(server, submit(server, "watched", "watch")["id"])
    since = min(e["id"] for e in run["timeline"]) - 1
    deadline = time.monotonic() + 20
    plain, asked = client.events(since=since, stop_after=deadline), client.events(since, deadline, eta=True)
    try:
        # Both streams are open once each has replayed the run's first status event.
        assert next(plain)["run_id"] == run["id"] and next(asked)["run_id"] == run["id"]
        server.ok("POST", "queues/watch/pause", "ops")  # the estimate moves (unknown), the status does not
        ev = next(e for e in asked if e.get("event") == "eta" and e["run_id"] == run["id"])
        assert set(ev) == {"event", "run_id", "project", "eta", "eta_unknown"} and ev["project"] == "team-a"
        assert ev["eta"] is None and "paused" in ev["eta_unknown"], ev
        # Those that did not ask (they index ev["status"]) get status events only: none between the
        # run's first event and its stop, though the estimate was sent between them.
        server.ok("POST", f"runs/{run['id']}/stop")
        seen = []
        for ev in plain:
            seen.append(ev)
            if ev["run_id"] == run["id"] and ev["status"] == "stopped":
                break
        assert seen[-1]["status"] == "stopped" and all("event" not in e and "status" in e for e in seen), seen
    finally:
        server.ok("POST", "queues/watch/resume", "ops")
        plain.close()
        asked.close()
        stop(server, holder, run)


def test_the_status_line_follows_the_estimate_as_it_moves(server: ServerProcess, client: Client) -> None:
    holder = submit(server, "line-holder", "watch")
    server.wait_status(holder["id"], "running")
    run = submit(server, "line", "watch")
    line = StatusLine(run, client, lambda _: None, client.explain(run["id"])).start()
    try:
        until(lambda: line.text.endswith(f" · {ONE}"), "the line to say when it starts")
        assert line.text.startswith(f"{run['id']} queued in queue watch — QueueConcurrency: ")
        # Paused, the queue frees nothing: the estimate moves to unknown, and no status event says so
        # (only the stream's `eta` event), yet the line follows.
        server.ok("POST", "queues/watch/pause", "ops")
        try:
            until(lambda: " · start unknown: queue watch is paused" in line.text, "the line to say unknown")
        finally:
            server.ok("POST", "queues/watch/resume", "ops")
        until(lambda: line.text.endswith(f" · {ONE}"), "the estimate back on the line")
    finally:
        line.close()
        stop(server, holder, run)
