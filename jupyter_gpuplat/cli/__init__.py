"""The `gpuplat` command: every subcommand, in one room.

`main.py` parses the global flags and dispatches; `runs.py`, `sweeps.py` and `admin.py` hold the
commands that talk to a server through `client/`; `report.py`, `whatif.py`, `rollout.py` and
`polyaxon.py` have parsers of their own; `gpuplat server` and `gpuplat db` are handed to
`service/team/server.py` and `cli/db.py` (see `main.HANDED_OVER`). The console script is
`jupyter_gpuplat.cli:main`, as before the room existed.
"""

from .main import main

__all__ = ["main"]
