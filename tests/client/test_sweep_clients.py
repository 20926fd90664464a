"""Every Python entry point of a sweep: the options' parsing, the client, `gpuplat submit --grid/--random`
and `gpuplat sweeps`, `%%gpu_sweep` in a real kernel, and the Launcher's sweep mode, against a real server.

The sweep's children in the server tests wait on a file the test writes (`release`), so the test
decides when they end: what is seen dispatched, held or stopped does not depend on the machine's speed.
"""

from __future__ import annotations

import json
import re
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jupyter_gpuplat.client import Client, GpuPlatAPIError
from jupyter_gpuplat.client.sweeping import (
    best_text,
    by_status,
    children_text,
    concurrency_text,
    done_count,
    make_matrix,
)
from jupyter_gpuplat.core.errors import InvalidInput
from jupyter_gpuplat.core.matrix import Matrix, expand
from jupyter_gpuplat.notebook.widgets.launcher import Launcher
from jupyter_gpuplat.notebook.widgets.sweep import SweepView
from jupyter_gpuplat.notebook.widgets.sweepform import SweepForm

from ..server import ServerProcess
from ..waiting import until
from ..widget_env import run_cells, served, texts

# A child that prints its params, then waits until the test writes `release` beside the Jupyter root.
CHILD = (
    "import json, os, pathlib, threading\n"
    "print('params', json.dumps(json.loads(os.environ['GPUPLAT_PARAMS']), sort_keys=True), flush=True)\n"
    "gate = pathlib.Path({gate!r})\n"
    "while not gate.exists():\n"
    "    threading.Event().wait(0.05)  # the workload's own wait, not a test's\n"
)


# ---- the options (pure) --------------------------------------------------------------------------
def test_grid_random_and_mapping_options_make_the_matrix(tmp_path: Path) -> None:
    grid = make_matrix(grid=["lr=1e-3,3e-4", "batch=32,64"], concurrency=2, max_failures=1)
    assert grid == {
        "kind": "grid",
        "params": {"lr": {"values": [0.001, 0.0003]}, "batch": {"values": [32, 64]}},
        "concurrency": 2,
        "max_failures": 1,
    }
    assert expand(Matrix.model_validate(grid))[:2] == [{"lr": 0.001, "batch": 32}, {"lr": 0.001, "batch": 64}]
    rand = make_matrix(random=["lr=loguniform:1e-5:1e-2", "opt=choice:adam,sgd"], num_runs=20, seed=1)
    assert rand == {
        "kind": "random",
        "params": {"lr": {"loguniform": [1e-05, 0.01]}, "opt": {"choice": ["adam", "sgd"]}},
        "num_runs": 20,
        "seed": 1,
    }
    values = tmp_path / "values.json"
    values.write_text(json.dumps([{"lr": 0.1}, {"lr": 0.01, "batch": 8}]))
    assert make_matrix(mapping=values) == {"kind": "mapping", "values": [{"lr": 0.1}, {"lr": 0.01, "batch": 8}]}


@pytest.mark.parametrize(
    ("options", "message", "hint"),
    [
        (
            {"grid": ["lr=1e-3"], "random": ["x=uniform:0:1"]},
            "a sweep takes one of --grid, --random or --mapping, got --grid, --random",
            "repeat --grid or --random once per param",
        ),
        ({"num_runs": 3}, "a sweep takes one of --grid, --random or --mapping, got none", "e.g. --grid lr=1e-3,3e-4"),
        ({"random": ["x=uniform:0:1"]}, "--random needs --num-runs", "e.g. --num-runs 20"),
        ({"grid": ["lr=1,2", "lr=3"]}, "param lr is given twice (--grid lr=3)", "give each param once"),
        ({"grid": ["lr"]}, "param 'lr' is not name=domain", "name=loguniform:lo:hi"),
        ({"grid": ["lr=loguniform:0:1"]}, "loguniform needs 0 < lo", "name=v1,v2"),
    ],
)
def test_malformed_options_say_what_is_allowed(options: dict[str, Any], message: str, hint: str) -> None:
    with pytest.raises(InvalidInput) as err:
        make_matrix(**options)
    assert message in err.value.message and hint in err.value.hint


def test_mapping_file_that_is_not_a_list_of_params(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    for text, why in (("{", "not JSON"), ('{"lr": 1}', "not a list of param objects"), ("[1, 2]", "not a list")):
        bad.write_text(text)
        with pytest.raises(InvalidInput) as err:
            make_matrix(mapping=bad)
        assert err.value.message.startswith(f"--mapping {bad}: {why}") and '[{"lr": 0.1}' in err.value.hint
    with pytest.raises(InvalidInput, match="cannot read it"):
        make_matrix(mapping=tmp_path / "missing.json")


def test_sweep_texts() -> None:
    run = {
        "children": {"total": 12, "by_status": {"succeeded": 3, "queued": 6, "running": 2, "failed": 1, "stopped": 0}},
        "matrix": {"kind": "grid", "objective": {"metric": "val_loss", "optimization": "minimize"}},
        "concurrency": 2,
        "paused": True,
        "best": {"id": "r-1", "params": {"lr": 0.001, "batch": 32}, "value": 0.12},
    }
    assert by_status(run) == [("queued", 6), ("running", 2), ("succeeded", 3), ("failed", 1)]
    assert children_text(run) == "12 children: 6 queued, 2 running, 3 succeeded, 1 failed"
    assert done_count(run) == 4
    assert best_text(run) == "best r-1 val_loss=0.12 (lr=0.001, batch=32)"
    assert concurrency_text(run) == "concurrency 2, paused"
    assert children_text({"children": {"total": 1, "by_status": {}}}) == "1 child"
    assert best_text({"best": None}) == ""


def test_cli_refuses_bad_sweep_options_before_any_request(tmp_path: Path) -> None:
    import subprocess

    # A URL nothing listens on: the refusal must come before any request.
    base = [sys.executable, "-m", "jupyter_gpuplat.cli", "--url", "http://127.0.0.1:9/", "submit", "-p", "team-a"]
    both = subprocess.run(
        [*base, "--grid", "lr=1,2", "--random", "x=uniform:0:1", "--", "true"], capture_output=True, text=True
    )
    assert both.returncode == 1
    assert "gpuplat: a sweep takes one of --grid, --random or --mapping, got --grid, --random" in both.stderr
    assert "hint: repeat --grid or --random once per param" in both.stderr
    seed_only = subprocess.run([*base, "--seed", "1", "--", "true"], capture_output=True, text=True)
    assert seed_only.returncode == 1 and "got none" in seed_only.stderr  # a sweep option alone is no sweep
    follow = subprocess.run([*base, "--grid", "lr=1,2", "-f", "--", "true"], capture_output=True, text=True)
    assert follow.returncode == 1 and "--follow follows one run" in follow.stderr
    update = subprocess.run(
        [sys.executable, "-m", "jupyter_gpuplat.cli", "--url", "http://127.0.0.1:9/", "sweeps", "update", "r-1"],
        capture_output=True,
        text=True,
    )
    assert update.returncode == 1
    assert "gpuplat sweeps update takes one of --concurrency N, --pause or --resume" in update.stderr


# ---- the Launcher's sweep form (pure: its preview is computed here) -----------------------------------
def test_sweep_form_previews_the_children_it_will_submit() -> None:
    form = SweepForm()
    try:
        assert form.children == (form.enabled,)  # hidden until "sweep" is checked
        form.enabled.value = True
        assert form.children == (form.enabled, form.options_box)
        assert form.count is None and "lr" not in form.preview_text
        row = form.rows[0]
        row.name_field.value, row.domain_field.value = "lr", "1e-3,3e-4"
        form.add_row("batch", "range:16:80:16")
        form.concurrency.value = 3
        assert form.count == 8
        assert form.first_params == [
            {"lr": 0.001, "batch": 16},
            {"lr": 0.001, "batch": 32},
            {"lr": 0.001, "batch": 48},
            {"lr": 0.001, "batch": 64},
            {"lr": 0.0003, "batch": 16},
        ]
        assert form.preview_text.startswith("8 children, 3 at once: lr=0.001, batch=16; lr=0.001, batch=32;")
        assert form.preview_text.endswith("; …")
        assert "<b>8 children</b>, at most 3 at once" in form.preview_box.value
        assert form.num_runs.disabled and form.seed.disabled

        form.kind_picker.value = "random"
        form.rows[0].domain_field.value = "loguniform:1e-5:1e-2"
        form.num_runs.value, form.seed.value = 4, 7
        matrix = form.matrix()
        assert matrix["seed"] == 7 and matrix["num_runs"] == 4 and not form.num_runs.disabled
        assert form.count == 4 and form.first_params == expand(Matrix.model_validate(matrix))

        form.kind_picker.value = "grid"  # a grid cannot list a continuous domain: said, no count
        assert form.count is None and "params.lr is loguniform, which a grid cannot list" in form.preview_text
        assert 'class="gpuplat-error"' in form.preview_box.value and "gpuplat-sweep-child" not in form.preview_box.value
        form.rows[0].domain_field.value = "loguniform:0:1"
        assert "loguniform needs 0 < lo" in form.preview_text
        form._remove(form.rows[0])
        form._remove(form.rows[0])
        assert form.preview_text == "a sweep needs a param: a name and its values or domain"
    finally:
        form.close()


# ---- against a real server ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    yield from served(tmp_path_factory, "sweeps")


@pytest.fixture
def gate(server: ServerProcess, request: pytest.FixtureRequest) -> Iterator[Path]:
    """The file that lets this test's children end; written at the end whatever happened."""
    path = server.root / f"release-{request.node.name}"
    yield path
    path.write_text("")
    for t in threading.enumerate():
        if t.name.startswith("gpuplat-sweep"):
            t.join(10)
            assert not t.is_alive(), f"thread {t.name} still running after the test"


def child_code(gate: Path) -> str:
    return CHILD.format(gate=str(gate))


def counts(client: Client, sweep_id: str) -> dict[str, int]:
    return dict((client.get(sweep_id).get("children") or {}).get("by_status") or {})


def dispatched(client: Client, sweep_id: str) -> int:
    return sum(n for s, n in counts(client, sweep_id).items() if s in ("dispatched", "starting", "running"))


def test_client_submits_a_sweep_lists_its_children_and_changes_it(
    server: ServerProcess, client: Client, gate: Path
) -> None:
    matrix = {"kind": "grid", "params": {"lr": {"values": [0.1, 0.01]}, "batch": {"values": [8, 16]}}}
    sweep = client.submit("team-a", code=child_code(gate), name="grid", matrix={**matrix, "concurrency": 1})
    assert sweep["kind"] == "sweep" and sweep["children"]["total"] == 4 and sweep["concurrency"] == 1
    children = client.sweep_children(sweep["id"])
    assert sorted(c["params"]["lr"] * 1000 + c["params"]["batch"] for c in children) == [18, 26, 108, 116]
    assert {c["parent"] for c in children} == {sweep["id"]} and {c["kind"] for c in children} == {"job"}
    assert len(client.sweep_children(sweep["id"], limit=3)) == 3
    until(lambda: dispatched(client, sweep["id"]) == 1, "one child dispatched")
    held = client.sweep_children(sweep["id"], status="queued")
    assert len(held) == 3
    why = client.explain(held[0]["id"])
    assert why["reason"] == "SweepConcurrency" and "1/1 children dispatched" in why["message"]

    raised = client.update_sweep(sweep["id"], concurrency=2)
    assert raised["concurrency"] == 2
    until(lambda: dispatched(client, sweep["id"]) == 2, "a second child dispatched (the queue allows 2)")
    paused = client.update_sweep(sweep["id"], paused=True)
    assert paused["paused"] is True
    with pytest.raises(GpuPlatAPIError) as nothing:
        client.update_sweep(sweep["id"])
    assert nothing.value.message == "nothing to change"
    with pytest.raises(GpuPlatAPIError) as bad:
        client.update_sweep(sweep["id"], concurrency=0)
    assert bad.value.status == 400 and "concurrency" in bad.value.message
    timeline = client.get(sweep["id"])["timeline"]
    changed = [e for e in timeline if e["reason"] == "ConcurrencyChanged"]
    assert changed and changed[-1]["details"]["from"] == 1 and changed[-1]["details"]["to"] == 2
    assert any(e["reason"] == "SweepPaused" for e in timeline)

    stopped = client.stop(sweep["id"])
    assert stopped["status"] in ("stopping", "stopped")
    server.wait_status(sweep["id"], "stopped")
    until(lambda: counts(client, sweep["id"]).get("stopped") == 4, "every child stopped")


def test_client_checks_the_matrix_before_sending(client: Client) -> None:
    with pytest.raises(ValueError, match="grid cannot list"):
        client.submit("team-a", "true", matrix={"kind": "grid", "params": {"lr": {"uniform": [0, 1]}}})


def test_cli_sweeps_list(server: ServerProcess) -> None:
    body = {"project": "team-a", "name": "listed", "command": ["true"]}
    matrix = {"kind": "mapping", "values": [{"x": 1}, {"x": 2}], "concurrency": 2}
    sweep = server.ok("POST", "runs", body={**body, "matrix": matrix})
    server.wait_status(sweep["id"], "succeeded", timeout=60)
    listed = server.gpuplat("sweeps", "list").stdout.splitlines()
    headers = ["ID", "NAME", "PROJECT", "STATUS", "DONE", "CONCURRENCY", "PAUSED", "CHILDREN", "AGE"]
    assert listed[0].split() == headers
    row = next(line.split() for line in listed[1:] if line.startswith(sweep["id"]))
    assert row[:8] == [sweep["id"], "listed", "team-a", "succeeded", "2/2", "2", "2", "succeeded"]
    as_json = json.loads(server.gpuplat("--json", "sweeps", "list").stdout)["runs"]
    assert sweep["id"] in [r["id"] for r in as_json] and {r["kind"] for r in as_json} == {"sweep"}


def test_cli_submit_grid_then_sweeps_update_show_stop(server: ServerProcess, gate: Path) -> None:
    script = server.root / "child.py"
    script.write_text(child_code(gate))
    out = server.gpuplat(
        "submit", "-p", "team-a", "-n", "cli-grid", "--grid", "lr=1e-3,3e-4", "--grid", "batch=32,64",
        "--concurrency", "1", "--max-failures", "2", "--", sys.executable, "child.py",
    ).stdout  # fmt: skip
    m = re.fullmatch(r"(r-[0-9a-f]+)  (queued|running)  sweep of 4 children: .*  concurrency 1\n", out)
    assert m is not None, out
    sweep_id = m.group(1)
    client = Client(url=server.url, token="tok-alice")
    try:
        until(lambda: dispatched(client, sweep_id) == 1, "one child dispatched")
        updated = server.gpuplat("sweeps", "update", sweep_id, "--concurrency", "2").stdout.split()
        assert updated[:4] == [sweep_id, "running", "concurrency", "2"]
        until(lambda: dispatched(client, sweep_id) == 2, "a second child dispatched")
        assert "concurrency 2, paused" in server.gpuplat("sweeps", "update", sweep_id, "--pause").stdout
        resumed = server.gpuplat("sweeps", "update", sweep_id, "--resume").stdout
        assert "paused" not in resumed and "concurrency 2" in resumed

        show = server.gpuplat("sweeps", "show", sweep_id).stdout
        assert f"id: {sweep_id}" in show and "matrix: grid over lr, batch" in show
        assert re.search(r"\n4 children: 2 queued, .*2 (dispatched|starting|running)", show), show
        assert "concurrency 2, max_failures 2" in show and "best: none yet" in show
        assert "ConcurrencyChanged" in show and "SweepPaused" in show and "SweepResumed" in show

        job = server.ok("POST", "runs", body={"project": "team-a", "command": ["true"]})["id"]
        wrong = server.gpuplat("sweeps", "show", job, check=False)
        assert wrong.returncode == 1 and f"gpuplat: {job} is a job, not a sweep; use gpuplat runs show" in wrong.stderr

        stopped = server.gpuplat("sweeps", "stop", sweep_id).stdout.split()
        assert stopped[:2] in ([sweep_id, "stopping"], [sweep_id, "stopped"])
        server.wait_status(sweep_id, "stopped")
        until(lambda: counts(client, sweep_id).get("stopped") == 4, "every child stopped")
    finally:
        client.session.close()


def test_cli_random_sweep_refused_by_the_service_says_why(server: ServerProcess) -> None:
    out = server.gpuplat(
        "submit", "-p", "team-a", "--grid", "lr=uniform:0:1", "--", "true", check=False
    )  # fmt: skip
    assert out.returncode == 1 and "lr" in out.stderr and "grid cannot list" in out.stderr
    ok = server.gpuplat(
        "--json", "submit", "-p", "team-a", "--random", "lr=loguniform:1e-5:1e-2", "--num-runs", "3",
        "--seed", "1", "--", "true",
    ).stdout  # fmt: skip
    sweep = json.loads(ok)
    assert sweep["kind"] == "sweep" and sweep["children"]["total"] == 3
    assert sweep["matrix"]["seed"] == 1 and sweep["matrix"]["params"] == {"lr": {"loguniform": [1e-05, 0.01]}}
    children = server.ok("GET", "runs", parent=sweep["id"])["runs"]
    want = expand(Matrix.model_validate(sweep["matrix"]))
    assert sorted(c["params"]["lr"] for c in children) == sorted(p["lr"] for p in want)
    assert server.wait_status(sweep["id"], "succeeded", timeout=60)["status"] == "succeeded"


def test_cli_mapping_sweep_with_an_objective_shows_its_best_child(server: ServerProcess) -> None:
    (server.root / "values.json").write_text(json.dumps([{"lr": 0.3}, {"lr": 0.01}, {"lr": 0.1}]))
    (server.root / "scored.py").write_text(
        "from jupyter_gpuplat import tracking\ntracking.log_metrics(step=0, loss=tracking.params()['lr'] * 10)\n"
    )
    out = server.gpuplat(
        "--json", "submit", "-p", "team-a", "--mapping", "values.json", "--objective", "loss", "--concurrency", "3",
        "--", sys.executable, "scored.py",
    ).stdout  # fmt: skip
    sweep = json.loads(out)
    assert sweep["matrix"]["kind"] == "mapping" and sweep["children"]["total"] == 3
    assert sweep["matrix"]["objective"] == {"metric": "loss", "optimization": "minimize"}
    assert server.wait_status(sweep["id"], "succeeded", timeout=60)["status"] == "succeeded"
    best = until(lambda: server.ok("GET", f"runs/{sweep['id']}")["best"], "the best child")
    assert best["params"] == {"lr": 0.01} and best["value"] == pytest.approx(0.1)
    show = server.gpuplat("sweeps", "show", sweep["id"]).stdout
    assert f"best {best['id']} loss={best['value']} (lr=0.01)" in show
    assert "\n3 children: 3 succeeded" in show and "matrix: mapping over 3 given param sets" in show
    table = show[show.index("\nchildren:\n") :].splitlines()[2:]
    assert table[0].split() == ["ID", "STATUS", "PARAMS", "MESSAGE"]
    assert sorted(line.split()[1:3] for line in table[1:]) == [["succeeded", f"lr={v}"] for v in (0.01, 0.1, 0.3)]
    first = server.gpuplat("sweeps", "show", sweep["id"], "--limit", "2").stdout
    assert "children (the first 2: --limit N for more):" in first
    listed = json.loads(server.gpuplat("--json", "runs", "list", "--parent", sweep["id"]).stdout)["runs"]
    assert len(listed) == 3 and {r["parent"] for r in listed} == {sweep["id"]}
    bad = server.gpuplat("submit", "-p", "team-a", "--grid", "x=1", "--objective", "loss:up", "--", "true", check=False)
    assert bad.returncode == 1 and "--objective 'loss:up' is not metric[:minimize|maximize]" in bad.stderr


def test_magic_gpu_sweep_in_a_real_kernel(server: ServerProcess) -> None:
    work = server.root / "magic"
    work.mkdir()
    outs = run_cells(
        server,
        [
            "%load_ext jupyter_gpuplat",
            "%%gpu_sweep --grid x=1,2,3 --concurrency 2 --name magic-grid\n"
            "from jupyter_gpuplat import tracking\n"
            "print('x is', tracking.params()['x'])",
            "sweep = gpu_last_sweep['id']\n"
            "from jupyter_gpuplat.client import Client\n"
            "print(Client().wait(sweep, timeout=60)['status'])",
            "%%gpu_sweep --grid a=1 --random b=uniform:0:1\npass",
            "%%gpu_sweep --grid lr=uniform:0:1\npass",
            "%%gpu_sweep --frobnicate\npass",
        ],
        cwd=work,
    )
    started = texts(outs[1])
    # The status line follows the sweep (update_display_data): nbclient keeps its latest state.
    m = re.search(r"(r-[0-9a-f]+) (queued|running|succeeded) — sweep of 3 children: [^·]* · concurrency 2", started)
    assert m is not None, started
    assert any("application/vnd.jupyter.widget-view+json" in o.get("data", {}) for o in outs[1])
    assert texts(outs[2]).strip() == "succeeded"
    children = server.ok("GET", "runs", parent=m.group(1))["runs"]
    assert sorted(c["params"]["x"] for c in children) == [1, 2, 3]
    for c in children:
        log = server.ok("GET", f"runs/{c['id']}/logs", follow="false").decode()  # the log as events
        assert f"x is {c['params']['x']}" in log
    both = texts(outs[3])
    assert "gpu_sweep refused</b> (InvalidInput)" in both and "got --grid, --random" in both
    assert "Traceback" not in both
    grid = texts(outs[4])
    assert "gpu_sweep refused" in grid and "grid cannot list" in grid and "Traceback" not in grid
    assert "usage: %%gpu_sweep" in texts(outs[5]) and "ERROR" not in texts(outs[5])


def test_launcher_sweep_mode_submits_and_follows_the_sweep_live(
    server: ServerProcess, client: Client, gate: Path
) -> None:
    launcher = Launcher(client, project="team-a")
    try:
        launcher.mode_picker.value = "code"
        launcher.command_field.value = child_code(gate)
        form = launcher.sweep_form
        assert form in launcher.run_form.children
        form.enabled.value = True
        form.rows[0].name_field.value = "lr"
        form.rows[0].domain_field.value = "0.1,0.01"
        form.concurrency.value = 1
        assert form.preview_text == "2 children, 1 at once: lr=0.1; lr=0.01"
        preview = launcher.refresh_preview()  # the policy's verdict on a child: the first one's params
        assert launcher.preview_request is not None and launcher.preview_request["params"] == {"lr": 0.1}
        assert preview is not None and preview["verdict"]["allowed"] and "✓ allowed" in launcher.preview_html
        run = launcher.submit()
        assert run is not None and run["kind"] == "sweep" and launcher.error_html == ""
        view = launcher.monitor
        assert isinstance(view, SweepView) and launcher.monitor_box.children == (view,)
        assert sorted(c["params"]["lr"] for c in client.sweep_children(run["id"])) == [0.01, 0.1]
        until(lambda: "1 running" in view.counts_text, "one child running, seen live")
        assert view.counts_text == "2 children: 1 queued, 1 running" and view.progress.value == 0
        assert view.concurrency_field.value == 1 and view.pause_button.description == "Pause"
        view.pause_button.click()
        assert view.run["paused"] is True and view.pause_button.description == "Resume"
        view.pause_button.click()
        view.concurrency_field.value = 2
        view.set_button.click()
        assert view.run["concurrency"] == 2 and view.message.value == ""
        until(lambda: view.counts_text == "2 children: 2 running", "both children running, seen live")
        gate.write_text("")  # the children end
        until(lambda: view.status == "succeeded", "the sweep to succeed, seen live")
        until(lambda: view.counts_text == "2 children: 2 succeeded", "both children counted")
        assert view.progress.value == 2 and view.progress.max == 2 and view.stop_button.disabled
        view.thread.join(10)
        assert not view.thread.is_alive()

        form.rows[0].domain_field.value = "uniform:0:1"  # a grid cannot list it: refused before a request
        assert launcher.submit() is None and "grid cannot list" in launcher.error_html
    finally:
        launcher.close()


def test_sweep_view_stop_button_stops_every_child_and_an_ended_sweep_is_read_once(
    server: ServerProcess, client: Client, gate: Path
) -> None:
    matrix = {"kind": "grid", "params": {"x": {"range": [0, 3, 1]}}, "concurrency": 1}
    sweep = client.submit("team-a", code=child_code(gate), matrix=matrix)
    view = SweepView(sweep["id"], client)  # by id: the view reads the record
    try:
        until(lambda: view.counts_text == "3 children: 2 queued, 1 running", "one child running, seen live")
        assert not view.stop_button.disabled
        view.stop_button.click()
        assert view.message.value == "" and view.run["status"] in ("stopping", "stopped")
        until(lambda: view.counts_text == "3 children: 3 stopped", "every child stopped, seen live")
        assert view.status == "stopped" and view.stop_button.disabled and view.set_button.disabled
        view.thread.join(10)
        assert not view.thread.is_alive()
    finally:
        view.close()
    ended = SweepView(client.get(sweep["id"]), client)
    try:
        ended.thread.join(10)
        assert not ended.thread.is_alive() and ended._sub is None  # nothing left to follow
        assert ended.counts_text == "3 children: 3 stopped" and ended.progress.value == 3
    finally:
        ended.close()
