"""The gpuplat CLI against a real server, found through Jupyter's runtime files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from ..conftest import EXAMPLE
from ..server import ServerProcess


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    srv = ServerProcess(tmp_path_factory.mktemp("cli"))
    srv.start()
    yield srv
    srv.stop()


def gp(server: ServerProcess, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return server.gpuplat(*args, check=check)


def test_submit_follow_list_show_explain(server: ServerProcess) -> None:
    out = gp(
        server,
        "submit",
        "-p",
        "team-a",
        "--preset",
        "single-gpu",
        "-n",
        "hello",
        "-f",
        "--",
        sys.executable,
        "-c",
        "print('hi from the gpu', flush=True)",
    )
    first, *rest = out.stdout.splitlines()
    run_id = first.split()[0]
    assert "queue team-a-train" in first and rest == ["hi from the gpu"]
    runs = json.loads(gp(server, "--json", "runs", "list").stdout)["runs"]
    assert runs[0]["id"] == run_id and runs[0]["status"] == "succeeded"
    table = gp(server, "runs", "list").stdout
    assert table.splitlines()[0].split()[:3] == ["ID", "NAME", "PROJECT"] and run_id in table
    show = gp(server, "runs", "show", run_id).stdout
    assert "status: succeeded" in show and "Admitted" in show
    assert f"working_dir: {server.root.resolve()}" in show
    explain = gp(server, "runs", "explain", run_id).stdout
    assert "layer: done" in explain and "where: finished" in explain and "Completed" in explain
    logs = gp(server, "runs", "logs", run_id).stdout
    assert logs.strip() == "hi from the gpu"


def test_waiting_run_explained_and_stopped(server: ServerProcess) -> None:
    server.ok("POST", "queues/team-b-train/pause", "ops")
    try:
        out = gp(server, "--url", server.url, "--token", "tok-erin", "--json", "submit", "-p", "team-b", "--", "true")
        run_id = json.loads(out.stdout)["id"]
        ex = gp(server, "--url", server.url, "--token", "tok-erin", "runs", "explain", run_id).stdout
        assert "layer: queue" in ex and "QueuePaused" in ex and "position: 1" in ex
        q = gp(server, "--url", server.url, "--token", "tok-erin", "queues").stdout
        row = next(line for line in q.splitlines() if line.startswith("team-b-train"))
        assert "yes" in row and "paused" in row
        stopped = gp(server, "--url", server.url, "--token", "tok-erin", "runs", "stop", run_id).stdout
        assert stopped.split() == [run_id, "stopped"]
    finally:
        server.ok("POST", "queues/team-b-train/resume", "ops")


def test_refusal_prints_message_and_hint(server: ServerProcess) -> None:
    out = gp(server, "submit", "-p", "team-a", "-q", "team-b-train", "--", "true", check=False)
    assert out.returncode == 1
    assert "queue 'team-b-train' is not allowed in project team-a" in out.stderr
    assert "hint: allowed queues: team-a-train, interactive" in out.stderr


def test_preview_presets_and_config(server: ServerProcess, tmp_path: Path) -> None:
    pv = gp(server, "submit", "-p", "team-a", "--preset", "multi-gpu", "--preview", "--", "python", "t.py").stdout
    rows = [line.split() for line in pv.splitlines()]
    assert rows[0] == ["FIELD", "VALUE", "SET", "BY"] and ["resources.gpu", "2", "preset:multi-gpu"] in rows
    assert "verdict: allowed" in pv and not pv.lstrip().startswith("{")  # a table, not JSON (that is --json)
    assert "  runs in: /" in pv, pv  # the folder it was submitted from, as the dialog says under its verdict
    cpu = gp(server, "submit", "-p", "team-a", "--gpus", "0", "--preview", "--", "python", "t.py").stdout
    assert "  note: This run gets no GPU (0 GPUs)" in cpu, cpu
    # `--gpu` is `--gpus` (an abbreviation argparse found ambiguous once --gpu-type came)
    one = json.loads(gp(server, "--json", "submit", "-p", "team-a", "--gpu", "1", "--preview", "--", "t").stdout)
    assert one["resolved"]["resources"]["gpu"] == 1
    as_json = json.loads(
        gp(server, "--json", "submit", "-p", "team-a", "--preset", "multi-gpu", "--preview", "--", "t").stdout
    )
    assert as_json["provenance"]["resources.gpu"] == "preset:multi-gpu"
    # --gpu-type asks for a kind of GPU (a flavor where the queue offers them): placement.gpu_type, set by the run
    typed = json.loads(
        gp(server, "--json", "submit", "-p", "team-a", "--gpu-type", "any", "--preview", "--", "t").stdout
    )
    assert (typed["resolved"]["placement"]["gpu_type"], typed["provenance"]["placement.gpu_type"]) == ("any", "run")
    presets = gp(server, "--url", server.url, "--token", "tok-erin", "presets", "--project", "team-b").stdout
    assert [line.split()[0] for line in presets.splitlines()[1:]] == ["single-gpu", "notebook"]
    ok = gp(server, "config", "validate", str(EXAMPLE)).stdout
    assert "valid (3 queues, 3 presets, 2 projects)" in ok
    bad = yaml.safe_load(EXAMPLE.read_text())
    bad["queues"][1]["quota"]["gpu"] = -1
    bad["queues"][0]["ordering"] = "random"
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(bad))
    out = gp(server, "config", "validate", str(path), check=False)
    assert out.returncode == 2
    assert "queues[1] (team-b-train).quota.gpu: must be >= 0" in out.stderr
    assert "queues[0] (team-a-train).ordering: must be one of" in out.stderr
    missing = gp(server, "config", "validate", str(tmp_path / "nope.yaml"), check=False)
    assert missing.returncode == 2 and "Traceback" not in missing.stderr
    assert missing.stderr.strip().splitlines() == [
        f"gpuplat config: {tmp_path / 'nope.yaml'}: cannot read it (No such file or directory)"
    ]
    out = gp(server, "--url", server.url, "--token", "tok-ops", "config", "apply", "-f", str(path), check=False)
    assert out.returncode == 2  # refused before it reaches the server
    good = yaml.safe_load(EXAMPLE.read_text())
    good["queues"][2]["concurrency"] = 6
    path.write_text(yaml.safe_dump(good))
    denied = gp(server, "config", "apply", "-f", str(path), check=False)  # alice is not a platform admin
    assert denied.returncode == 1 and "not a platform admin" in denied.stderr
    version = server.ok("GET", "config", "ops")["version"]
    ops = ("--url", server.url, "--token", "tok-ops")
    plan = gp(server, *ops, "config", "plan", "-f", str(path)).stdout
    assert plan.splitlines() == [
        f"{path}: plan against config version {version} (nothing applied)",
        "  ~ queue interactive: changed",
        "      concurrency: 4 -> 6",
    ]
    assert gp(server, *ops, "config", "apply", "--dry-run", "-f", str(path)).stdout == plan
    assert server.ok("GET", "config", "ops")["version"] == version  # a plan applies nothing
    applied = gp(server, *ops, "config", "apply", "-f", str(path)).stdout
    assert "applied as config version" in applied and "      concurrency: 4 -> 6" in applied
    assert server.ok("GET", "config", "ops")["config"]["queues"][2]["concurrency"] == 6


def test_a_closed_pipe_ends_quietly_as_unix_tools_do(server: ServerProcess) -> None:
    gp(server, "submit", "-p", "team-a", "--", "true")  # a row to print
    read_end, write_end = os.pipe()
    os.close(read_end)  # `gpuplat runs list | head -0`: the reader is gone before the first line
    try:
        out = subprocess.run(
            [sys.executable, "-m", "jupyter_gpuplat.cli", "runs", "list"],
            env=server.env,
            cwd=server.root,
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
        )
    finally:
        os.close(write_end)
    assert (out.returncode, out.stderr) == (141, "")  # 128 + SIGPIPE, no traceback


def test_hints_name_the_cli_command_not_the_api(server: ServerProcess) -> None:
    out = gp(server, "runs", "show", "r-0000000000", check=False)
    assert out.returncode == 1 and "hint: list your runs with gpuplat runs list" in out.stderr
    assert "/gpuplat/api" not in out.stderr


@pytest.mark.parametrize(
    ("option", "near"),
    [
        (["--preset", "singel-gpu"], "unknown preset 'singel-gpu'; did you mean single-gpu?"),
        (["-q", "team-a-trian"], "unknown queue 'team-a-trian'; did you mean team-a-train?"),
        (["-p", "team-aa"], "project 'team-aa' not found; did you mean team-a?"),
    ],
)
def test_did_you_mean_for_the_names_the_server_offers(server: ServerProcess, option: list[str], near: str) -> None:
    args = option if option[0] == "-p" else ["-p", "team-a", *option]
    out = gp(server, "submit", *args, "--", "true", check=False)
    assert out.returncode == 1 and f"gpuplat: {near}\n" in out.stderr


def test_a_value_out_of_range_is_told_its_limit_not_every_field(server: ServerProcess) -> None:
    out = gp(server, "submit", "-p", "team-a", "--gpus", "1000000", "--", "true", check=False)
    assert out.returncode == 1 and "resources.gpu: must be <= 1024" in out.stderr
    assert "hint: resources.gpu: at most 1024 (asked 1000000)" in out.stderr and "fields allowed" not in out.stderr


def test_submit_says_what_a_new_run_waits_for(server: ServerProcess) -> None:
    server.ok("POST", "queues/team-b-train/pause", "ops")
    try:
        out = gp(server, "--url", server.url, "--token", "tok-erin", "submit", "-p", "team-b", "--", "true").stdout
        run_id, status, *_ = out.split()
        assert status == "queued" and "  waits: " in out and "[QueuePaused], position 1" in out, out
    finally:
        server.ok("POST", f"runs/{run_id}/stop", "erin")
        server.ok("POST", "queues/team-b-train/resume", "ops")


def test_runs_without_a_name_are_named_after_what_they_run(server: ServerProcess) -> None:
    run = json.loads(gp(server, "--json", "submit", "-p", "team-a", "--", "python", "-m", "pkg.train").stdout)
    assert run["name"] == "pkg.train"  # the server names it: every client shows the same
    sweep = json.loads(
        gp(
            server,
            "--json",
            "submit",
            "-p",
            "team-a",
            "--param",
            "tag=v1",
            "--grid",
            "lr=0.1,0.2",
            "--",
            "python",
            "crash.py",
        ).stdout
    )
    assert sweep["name"] == "crash.py"
    children = json.loads(gp(server, "--json", "runs", "list", "--parent", sweep["id"]).stdout)["runs"]
    assert sorted(c["name"] for c in children) == ["crash.py · lr=0.1", "crash.py · lr=0.2"]
    assert all(list(c["params"]) == ["lr", "tag"] for c in children)  # what differs first
    listed = gp(server, "runs", "list").stdout
    assert any(line.split()[:2] == [run["id"], "pkg.train"] for line in listed.splitlines())
