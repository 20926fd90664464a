"""Architecture checks: the layers and no import circles (import-linter), ruff, and mypy.

They run in the test suite so that the README's one test command (and so CI) keeps them.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _run(*argv: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=timeout, check=False)


def _tool(name: str) -> str:
    path = shutil.which(name, path=str(Path(sys.executable).parent))
    assert path, f"{name} is not installed next to {sys.executable}: pip install -e '.[test]'"
    return path


def test_import_contracts_hold() -> None:
    """The rooms' layers, client/ speaking HTTP only, run/ importing only core, and no import circles."""
    out = _run(_tool("lint-imports"), "--no-cache")
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    assert "0 broken" in out.stdout, out.stdout[-2000:]


def test_layers_name_rooms_not_files() -> None:
    """The layers contract names the package's rooms (at most 8), each a folder: a new module joins a room."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    layers = next(c for c in config["tool"]["importlinter"]["contracts"] if c["type"] == "layers")["layers"]
    names = [n.strip(" ()") for layer in layers for n in layer.split("|")]
    assert len(names) <= 8, names
    for name in names:
        assert (ROOT / name.replace(".", "/") / "__init__.py").is_file(), f"{name} is not a room (a package)"


@pytest.mark.parametrize("what", [["check"], ["format", "--check"]], ids=["lint", "format"])
def test_ruff_is_clean(what: list[str]) -> None:
    out = _run(_tool("ruff"), *what, "jupyter_gpuplat", "tests", "benchmarks", "emulator")
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]


def test_mypy_is_clean() -> None:
    out = _run(_tool("mypy"), "--cache-dir=/tmp/gpuplat-mypy-cache")
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
