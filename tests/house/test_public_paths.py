"""The public paths from before the rooms keep working: the same module objects, runnable as before.

Notebooks import `jupyter_gpuplat.tracking` and `jupyter_gpuplat.widgets.*`, config files name
`jupyter_gpuplat.auth.TokenMapIdentityProvider` and `...executors.local.LocalExecutor`, and stored
runs carry `python -m jupyter_gpuplat.nbrun` and `python -m jupyter_gpuplat.polyaxon fill`.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from traitlets.utils.importstring import import_item

PACKAGE = Path(__file__).resolve().parents[2] / "jupyter_gpuplat"

# old path -> its home now; each old path is the same module object as its home
MOVED = {
    "jupyter_gpuplat.tracking": "jupyter_gpuplat.run.tracking",
    "jupyter_gpuplat.nbrun": "jupyter_gpuplat.run.nbrun",
    "jupyter_gpuplat.polyaxon": "jupyter_gpuplat.cli.polyaxon",
    "jupyter_gpuplat.auth": "jupyter_gpuplat.service.auth",
    "jupyter_gpuplat.sweeping": "jupyter_gpuplat.client.sweeping",
    "jupyter_gpuplat.widgets": "jupyter_gpuplat.notebook.widgets",
    "jupyter_gpuplat.widgets.clocks": "jupyter_gpuplat.notebook.widgets.clocks",
    "jupyter_gpuplat.widgets.compare": "jupyter_gpuplat.notebook.widgets.compare",
}
# What the package root may hold: the package's public modules and the shims above.
ROOT_MODULES = {"__init__", "tracking", "nbrun", "polyaxon", "auth", "sweeping"}
ROOT_PACKAGES = {"cli", "client", "core", "engine", "executors", "notebook", "run", "service", "store", "widgets"}


@pytest.mark.parametrize("old", sorted(MOVED))
def test_old_path_is_the_module_itself(old: str) -> None:
    assert importlib.import_module(old) is importlib.import_module(MOVED[old])


def test_public_names() -> None:
    from jupyter_gpuplat import tracking
    from jupyter_gpuplat.client import Client
    from jupyter_gpuplat.client.rest import Client as RestClient
    from jupyter_gpuplat.notebook.widgets.compare import Compare
    from jupyter_gpuplat.widgets import Compare as OldCompare

    assert Client is RestClient and OldCompare is Compare and callable(tracking.log_metrics)
    for name in (
        "jupyter_gpuplat.auth.TokenMapIdentityProvider",
        "jupyter_gpuplat.executors.local.LocalExecutor",
        "jupyter_gpuplat.sweeping.make_matrix",
        "jupyter_gpuplat.service.sessions.provisioner.GpuSessionProvisioner",
    ):
        assert import_item(name) is not None


def test_the_root_holds_only_public_modules_and_shims() -> None:
    modules = {p.stem for p in PACKAGE.glob("*.py")}
    packages = {p.parent.name for p in PACKAGE.glob("*/__init__.py")}
    assert modules == ROOT_MODULES and packages == ROOT_PACKAGES


def _python(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *argv],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, **(env or {})},
    )


def test_stored_commands_still_run() -> None:
    params = json.dumps({"lr": 0.5})
    fill = _python(
        "-m", "jupyter_gpuplat.polyaxon", "fill", "--", "echo", "lr={{ lr }}", env={"GPUPLAT_PARAMS": params}
    )
    assert fill.returncode == 0 and fill.stdout == "lr=0.5\n", fill.stderr
    nbrun = _python("-m", "jupyter_gpuplat.nbrun")
    assert nbrun.returncode == 2 and "usage: python -m jupyter_gpuplat.nbrun" in nbrun.stderr
    cli = _python("-m", "jupyter_gpuplat.cli", "import", "--help")
    assert cli.returncode == 0 and "gpuplat import polyaxon" in cli.stdout
