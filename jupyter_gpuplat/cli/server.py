"""`gpuplat server`: the team-mode control plane, in the foreground.

The control plane is a traitlets application (service/team/server.py) whose flags are its
settings (`gpuplat server --help-all`); like every command with a parser of its own, it is
reached through this room's `main(argv)` (`cli.main.HANDED_OVER`).
"""

from __future__ import annotations

from collections.abc import Sequence

from ..service.team.server import GpuPlatServer


def main(argv: Sequence[str] | None = None) -> int:
    GpuPlatServer.launch_instance(list(argv or []))
    return 0
