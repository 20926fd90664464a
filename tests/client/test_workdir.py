"""Runs from the user's directory, through the real CLI against a real server (the README example)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ..server import ServerProcess

TRAIN = """\
import os
from jupyter_gpuplat import tracking
print("read:", open("data.txt").read().strip(), flush=True)
with open("result.txt", "w") as f:  # relative writes land in the user's directory too
    f.write("done")
tracking.log_metrics(step=0, loss=1.0)
print("artifacts:", os.environ["GPUPLAT_ARTIFACTS_DIR"], flush=True)
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    srv = ServerProcess(tmp_path_factory.mktemp("workdir"))
    srv.start()
    yield srv
    srv.stop()


def gp(server: ServerProcess, cwd: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return server.gpuplat(*args, cwd=cwd, check=check)


def git(cwd: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x", "GIT_COMMITTER_NAME": "t"}
    env["GIT_COMMITTER_EMAIL"] = "t@x"
    done = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=True, timeout=30)
    return done.stdout.strip()


def project(server: ServerProcess, name: str) -> Path:
    d = server.root / "experiments" / name
    d.mkdir(parents=True)
    (d / "train.py").write_text(TRAIN)
    (d / "data.txt").write_text("hello data\n")
    return d


def test_the_readme_example_runs_in_the_users_directory(server: ServerProcess) -> None:
    d = project(server, "readme")
    out = gp(server, d, "--json", "submit", "-p", "team-a", "--preset", "single-gpu", "-n", "first", "--", "python",
             "train.py")  # fmt: skip
    run_id = json.loads(out.stdout)["id"]
    run = server.wait_status(run_id, "succeeded", "failed")
    log = server.ok("GET", f"runs/{run_id}/logs", format="text").decode()
    assert run["status"] == "succeeded", (run["message"], log)
    artifacts = server.root / "artifacts" / run_id
    assert "read: hello data" in log and f"artifacts: {artifacts}" in log
    assert (d / "result.txt").read_text() == "done"
    assert (artifacts / ".gpuplat" / "metrics.bin").exists() and not (d / ".gpuplat").exists()
    assert run["working_dir"] == str(d.resolve())
    assert run["command"] == ["python", "train.py"]
    # what ran is kept: the script's snapshot; no git repository here, so no git block
    assert run["code"] == {"snapshot": "code/train.py", "git": None}
    assert (artifacts / "code" / "train.py").read_text() == TRAIN
    outputs = [o["path"] for o in server.ok("GET", f"runs/{run_id}/outputs")["outputs"]]
    assert "code/train.py" in outputs and not any(p.startswith(".gpuplat") for p in outputs)
    assert sys.executable not in json.dumps(server.ok("GET", f"runs/{run_id}")["resolved"])


def test_a_directory_outside_the_jupyter_root_is_refused(server: ServerProcess, tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "train.py").write_text(TRAIN)
    before = len(server.ok("GET", "runs")["runs"])
    proc = gp(server, outside, "submit", "-p", "team-a", "--", "python", "train.py", check=False)
    assert proc.returncode == 1
    assert f"working_dir '{outside}' is outside the Jupyter root directory ({server.root.resolve()})" in proc.stderr
    code, body = server.call("POST", "runs", body={"project": "team-a", "command": "true", "working_dir": "../.."})
    assert code == 400 and body["error"]["code"] == "InvalidInput" and "working_dir '../..'" in body["error"]["message"]
    code, body = server.call("POST", "runs", body={"project": "team-a", "command": "true", "working_dir": "nope"})
    assert code == 400 and "is not a directory under the Jupyter root" in body["error"]["message"]
    code, body = server.call("POST", "runs", body={"project": "team-a", "command": "true", "working_dir": "a\0b"})
    assert code in (400, 422), body
    assert len(server.ok("GET", "runs")["runs"]) == before


def test_run_detail_shows_the_snapshot_and_git_commit(server: ServerProcess) -> None:
    d = project(server, "repo")
    git(d, "init", "-q")
    git(d, "add", "train.py", "data.txt")
    git(d, "commit", "-q", "-m", "first")
    commit = git(d, "rev-parse", "HEAD")
    (d / "train.py").write_text(TRAIN + "# tuned\n")  # uncommitted: the run is dirty and keeps the diff
    out = gp(server, d, "--json", "submit", "-p", "team-a", "--", "python", "train.py")
    run_id = json.loads(out.stdout)["id"]
    run = server.wait_status(run_id, "succeeded", "failed")
    assert run["status"] == "succeeded", run["message"]
    assert run["code"] == {
        "snapshot": "code/train.py",
        "git": {"commit": commit, "dirty": True, "diff_path": "code/git.diff"},
    }
    diff = server.ok("GET", f"runs/{run_id}/outputs/code/git.diff")
    assert b"+# tuned" in diff
    assert server.ok("GET", f"runs/{run_id}/outputs/code/train.py").endswith(b"# tuned\n")
    show = gp(server, d, "runs", "show", run_id).stdout  # what a user sees in the terminal
    assert f"working_dir: {d.resolve()}" in show and "code: code/train.py" in show
    assert f"git: {commit} + uncommitted changes (code/git.diff)" in show
    compared = server.ok("GET", "compare", runs=run_id)
    assert compared["runs"][0]["code"]["git"]["commit"] == commit
    assert compared["runs"][0]["working_dir"] == str(d.resolve())


def test_a_symlinked_log_or_output_is_refused(server: ServerProcess, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("not yours")
    run = server.ok("POST", "runs", body={"project": "team-a", "command": "true"})
    done = server.wait_status(run["id"], "succeeded", "failed")
    assert done["working_dir"] is None and done["code"] is None  # an API client that sends nothing: as before
    artifacts = server.root / "artifacts" / run["id"]
    (artifacts / "output.log").unlink()
    (artifacts / "output.log").symlink_to(secret)
    (artifacts / "leak.txt").symlink_to(secret)
    (artifacts / "kept.txt").write_text("mine")
    (artifacts / "inside.txt").symlink_to(artifacts / "kept.txt")
    for path, params in (("logs", {"format": "text"}), ("logs", {"follow": "false"}), ("outputs/leak.txt", {})):
        code, body = server.call("GET", f"runs/{run['id']}/{path}", **params)
        assert code == 400 and "leaves the directory of run" in body["error"]["message"], (path, code, body)
    listed = {o["path"]: o["size"] for o in server.ok("GET", f"runs/{run['id']}/outputs")["outputs"]}
    assert "leak.txt" not in listed and listed["kept.txt"] == 4 and listed["inside.txt"] == 4
    assert server.ok("GET", f"runs/{run['id']}/outputs/inside.txt") == b"mine"
    code, body = server.call("GET", f"runs/{run['id']}/outputs/a%00b")
    assert code == 400, body
