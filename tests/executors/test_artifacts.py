"""The artifact layout, the local artifact reader (paths and links kept inside a run), code capture, entrypoints."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from jupyter_gpuplat.core import artifacts as layout
from jupyter_gpuplat.core.request import Entrypoint, RunRequest
from jupyter_gpuplat.executors.artifacts import LocalArtifactReader, capture_code
from jupyter_gpuplat.executors.base import ArtifactError


@pytest.fixture
def reader(tmp_path: Path) -> LocalArtifactReader:
    run = tmp_path / "art" / "r-1"
    (run / ".gpuplat").mkdir(parents=True)
    (run / "output.log").write_bytes(b"line 1\nline 2\n")
    (run / ".gpuplat" / "exit.json").write_text("{}")
    (run / "outputs").mkdir()
    (run / "outputs" / "model.pt").write_bytes(b"w" * 10)
    return LocalArtifactReader(str(tmp_path / "art"))


def test_layout_paths_are_relative_and_state_is_internal() -> None:
    assert layout.METRICS == ".gpuplat/metrics.csv" and layout.EXIT == ".gpuplat/exit.json"
    assert layout.CELL == "code/cell.py" and layout.snapshot_path("/a/b/train.py") == "code/train.py"
    assert layout.run_dir("/srv/art", "r-1") == "/srv/art/r-1"
    assert layout.is_internal(".gpuplat/metrics.csv") and not layout.is_internal("outputs/.gpuplat")


def test_reads_the_log_from_an_offset_and_lists_outputs(reader: LocalArtifactReader) -> None:
    assert reader.log_size("r-1") == 14
    assert reader.read_log("r-1", 7) == b"line 2\n" and reader.read_log("r-1", 0, 4) == b"line"
    assert reader.read_log("r-none") == b"" and reader.log_size("r-none") == -1
    assert [(f.path, f.size) for f in reader.list_outputs("r-1")] == [("output.log", 14), ("outputs/model.pt", 10)]
    assert [f.path for f in reader.list_outputs("r-1", "outputs")] == ["outputs/model.pt"]
    with reader.open_output("r-1", "outputs/model.pt") as f:
        assert f.read() == b"w" * 10
    with pytest.raises(FileNotFoundError):
        reader.open_output("r-1", "outputs/missing")


def test_nothing_outside_the_run_is_read(reader: LocalArtifactReader, tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("s3cret")
    (tmp_path / "art" / "r-2").mkdir()
    (tmp_path / "art" / "r-2" / "x").write_text("other run")
    run = tmp_path / "art" / "r-1"
    (run / "output.log").unlink()
    (run / "output.log").symlink_to(secret)
    (run / "outputs" / "link").symlink_to(secret)
    (run / "outputs" / "dirlink").symlink_to(tmp_path, target_is_directory=True)
    for rel in ("output.log", "outputs/link", "../r-2/x", "/etc/passwd", "outputs/dirlink/secret", "a\0b"):
        with pytest.raises(ArtifactError):
            reader.read("r-1", rel)
    with pytest.raises(ArtifactError):
        reader.log_size("r-1")
    with pytest.raises(ArtifactError):
        reader.open_output("r-1", "outputs/link")
    with pytest.raises(ArtifactError):
        reader.read("..", "art/r-1/output.log")
    assert [f.path for f in reader.list_outputs("r-1")] == ["outputs/model.pt"]  # links out: not listed nor sized


def test_entrypoints_build_argv_for_an_interpreter_and_keep_a_display_command() -> None:
    script = RunRequest(project="p", script="/root/exp/train.py", args=["--lr", "1"]).entrypoint()
    assert script.argv_with("/venv/bin/python") == ["/venv/bin/python", "/root/exp/train.py", "--lr", "1"]
    assert script.display() == ["python", "/root/exp/train.py", "--lr", "1"]
    nb = RunRequest(project="p", script="nb.ipynb", params={"lr": 1}).entrypoint()
    assert nb.argv_with("py") == ["py", "-m", "jupyter_gpuplat.nbrun", "nb.ipynb"] and nb.params == {"lr": 1}
    cell = RunRequest(project="p", code="print(1)", args=["a"]).entrypoint()
    assert cell.argv_with("py", "/art/r/code/cell.py") == ["py", "/art/r/code/cell.py", "a"]
    assert RunRequest(project="p", command="echo hi").entrypoint().argv_with("py") == ["/bin/sh", "-c", "echo hi"]
    for e in (script, nb, cell, Entrypoint("command", argv=("python", "train.py"))):
        assert Entrypoint.from_json(e.to_json()) == e
    assert Entrypoint.from_spec({"command": ["true"]}) == Entrypoint("command", argv=("true",))  # stored before v5
    assert RunRequest(project="p", command="python train.py --x y.py").entrypoint().files() == ["train.py", "y.py"]
    assert RunRequest(project="p", command=[sys.executable, "-c", "x"]).argv() == [sys.executable, "-c", "x"]


def test_capture_code_snapshots_and_reads_git(tmp_path: Path) -> None:
    work, run = tmp_path / "work", tmp_path / "run"
    work.mkdir()
    (work / "train.py").write_text("print(1)\n")
    plain = capture_code(Entrypoint("command", argv=("python", "train.py")), str(work), str(run))
    assert plain == {"snapshot": "code/train.py", "git": None}
    assert (run / "code" / "train.py").read_text() == "print(1)\n"
    assert capture_code(Entrypoint("command", argv=("true",)), None, str(tmp_path / "r2")) is None
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x", "GIT_COMMITTER_NAME": "t"}
    env["GIT_COMMITTER_EMAIL"] = "t@x"
    for args in (["init", "-q"], ["add", "train.py"], ["commit", "-q", "-m", "c"]):
        subprocess.run(["git", *args], cwd=work, env=env, check=True, timeout=30)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=work, capture_output=True, text=True, check=True).stdout
    clean = capture_code(Entrypoint("script", path=str(work / "train.py")), None, str(tmp_path / "r3"))
    assert clean == {"snapshot": "code/train.py", "git": {"commit": head.strip(), "dirty": False, "diff_path": None}}
    (work / "train.py").write_text("print(2)\n")
    dirty = capture_code(Entrypoint("cell", code="x"), str(work), str(tmp_path / "r4"))
    assert dirty is not None and dirty["snapshot"] == "code/cell.py" and dirty["git"]["dirty"] is True
    assert "+print(2)" in (tmp_path / "r4" / "code" / "git.diff").read_text()
