"""The local executor: runs as processes on this machine.

`executor.py` (`LocalExecutor`, the traitlets class config names as
`jupyter_gpuplat.executors.local.LocalExecutor`) with its parts: `settings.py` (its traits),
`commands.py` (argv), `runs.py` (the watched run), `watch.py` (seeing it end), `stopping.py`,
`reattach.py` (finding a run again, never starting it twice); `process.py` (handles, exit
records, re-attach), `launcher.py` (the stdlib-only script each run starts under, run by path),
`gpus.py` (device discovery), `check.py` (`gpuplat cluster check --local`); tenant isolation:
`users.py`, `env.py`, `cgroups.py`, `confine.py`, `connections.py`; `warm/`: the pre-started
launchers that fork runs instead of exec'ing fresh interpreters.

Names load lazily: the launchers import modules of this package and must not pay for the
executor (traitlets, psutil).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .executor import LocalExecutor, make_final_observation

__all__ = ["LocalExecutor", "make_final_observation"]


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f"{__name__}.executor"), name)
