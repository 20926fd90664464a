"""Architecture checks: the layers and no import circles (import-linter), ruff, and mypy.

They run in the test suite so that the README's one test command (and so CI) keeps them.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
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
    """core -> store -> engine -> executors -> service -> clients, and no import circles."""
    out = _run(_tool("lint-imports"), "--no-cache")
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    assert "0 broken" in out.stdout, out.stdout[-2000:]


def test_emulator_imports_run_one_way() -> None:
    """The Kubernetes emulator: no import circles; its controllers are given a store, a recorder, a clock.

    Run inside emulator/ so that its source, not the copy the test extra installed, is checked.
    """
    out = subprocess.run(
        [_tool("lint-imports"), "--no-cache"], cwd=ROOT / "emulator", capture_output=True, text=True, timeout=600
    )
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    assert "0 broken" in out.stdout, out.stdout[-2000:]


@pytest.mark.parametrize("what", [["check"], ["format", "--check"]], ids=["lint", "format"])
def test_ruff_is_clean(what: list[str]) -> None:
    out = _run(_tool("ruff"), *what, "jupyter_gpuplat", "tests", "benchmarks", "emulator")
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]


def test_mypy_is_clean() -> None:
    out = _run(_tool("mypy"), "--cache-dir=/tmp/gpuplat-mypy-cache")
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
