"""Notebook widgets: launch runs, follow one live, compare finished ones.

    from jupyter_gpuplat.widgets import Launcher, RunMonitor, Compare
    Launcher(project="team-a")          # pickers limited to what policy allows, live preview, submit
    Launcher(presets=["single-gpu"])    # (default: the last project and presets submitted from one)
    RunMonitor("r-123")                 # status, timeline and ticking clocks, why it waits, logs, outputs
    Compare("r-1,r-2", metrics=["loss"])  # params, config differences, metrics, curves, baseline, live clocks
    SessionLauncher()                   # start a GPU session (also the Launcher's "GPU session" tab)
    SessionView(lease)                  # one session live: its place in line and why, devices, open it
    SweepView(sweep)                    # one sweep live: children by status, concurrency, best child
    Compare("r-sweep")                  # a sweep: params vs objective, parallel coordinates, top curves

Pure helpers without ipywidgets (used by the magics too): `clocks` (live clocks between reads),
`statusline` (the magics' status line), `naming` (run names and labels). See docs/notebook-live.md.

Submodules load on first use: ipywidgets and plotly are not imported by
`import jupyter_gpuplat` nor by `import jupyter_gpuplat.widgets`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .compare import Compare
    from .launcher import Launcher
    from .live import EventFeed
    from .monitor import RunMonitor
    from .session import SessionLauncher, SessionView
    from .sweep import SweepView

__all__ = ["Compare", "EventFeed", "Launcher", "RunMonitor", "SessionLauncher", "SessionView", "SweepView"]

_WHERE = {
    "Compare": ".compare",
    "Launcher": ".launcher",
    "RunMonitor": ".monitor",
    "EventFeed": ".live",
    "SessionLauncher": ".session",
    "SessionView": ".session",
    "SweepView": ".sweep",
}


def __getattr__(name: str) -> Any:
    mod = _WHERE.get(name)
    if mod is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(mod, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
