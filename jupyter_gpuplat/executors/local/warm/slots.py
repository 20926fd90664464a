"""The local executor's warm launchers: one for commands, one for notebooks.

Each is started when a run first needs it and reports the end of the runs it forked. One that
dies is not started again for WARM_RESTART_SECONDS (runs start directly meanwhile: no restart
loop); its runs keep running and are handed back to the executor to watch through their pidfds.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Generic, TypeVar

from .client import WarmLauncherClient

WARM_LAUNCHER = str(Path(__file__).with_name("launcher.py"))
# after a warm launcher dies, how long runs start directly before it is started again
WARM_RESTART_SECONDS = 5.0

R = TypeVar("R")


@dataclass(eq=False)
class WarmSlot(Generic[R]):
    """One warm launcher of the executor and the runs it reports on."""

    argv: list[str]
    client: WarmLauncherClient | None = None
    runs: dict[int, R] = field(default_factory=dict)  # pid → run
    exits: dict[int, int] = field(default_factory=dict)  # ends reported before submit took the run
    gone_at: float | None = None  # monotonic time it last ended on its own


class WarmLaunchers(Generic[R]):
    def __init__(
        self,
        env: Callable[[], dict[str, str]],
        on_exit: Callable[[R, int], None],
        on_orphan: Callable[[R], None],
        log: logging.Logger | logging.LoggerAdapter[logging.Logger],
    ) -> None:
        self._env = env  # the launcher's own environment (each run gets its own)
        self._on_exit = on_exit  # a run ended with this Popen-style code
        self._on_orphan = on_orphan  # its warm launcher died: watch the run yourself
        self._log = log
        # -I -S: the command launcher needs only the stdlib; the notebook one imports nbclient, ipykernel
        self.command: WarmSlot[R] = WarmSlot([sys.executable, "-I", "-S", WARM_LAUNCHER])
        self.notebook: WarmSlot[R] = WarmSlot([sys.executable, "-m", "jupyter_gpuplat.executors.local.warm.notebooks"])

    def client(self, slot: WarmSlot[R]) -> WarmLauncherClient | None:
        """The slot's live warm launcher, started if needed; None: start the run's launcher directly."""
        if slot.client is not None and slot.client.alive:
            return slot.client
        if slot.gone_at is not None and time.monotonic() - slot.gone_at < WARM_RESTART_SECONDS:
            return None  # it just died: launchers start directly for a while, no restart loop
        try:
            slot.client = WarmLauncherClient(
                slot.argv,
                self._env(),
                lambda pid, code: self._exited(slot, pid, code),
                lambda: self._gone(slot),
            )
        except OSError as exc:
            self._log.warning("gpuplat: cannot start the warm launcher (%s); starting launchers directly", exc)
            slot.client = None
        return slot.client

    def track(self, slot: WarmSlot[R], pid: int, run: R) -> tuple[bool, int | None]:
        """Have `slot` report the end of `run` (its child `pid`).

        Returns (False, None) when that warm launcher is gone (the caller watches the run), else
        (True, the code if the run already ended before it was taken, else None).
        """
        if slot.client is None or not slot.client.alive:
            return False, None
        slot.runs[pid] = run
        return True, slot.exits.pop(pid, None)

    def _exited(self, slot: WarmSlot[R], pid: int, code: int) -> None:
        run = slot.runs.pop(pid, None)
        if run is None:
            slot.exits[pid] = code  # its submit has not taken it yet
            return
        self._on_exit(run, code)

    def _gone(self, slot: WarmSlot[R]) -> None:
        """Its runs keep running, now children of init: the executor watches them (the end, not the code)."""
        self._log.warning("gpuplat: a warm launcher ended; %d of its runs are watched directly", len(slot.runs))
        runs, slot.runs = list(slot.runs.values()), {}
        slot.exits.clear()
        slot.gone_at = time.monotonic()
        for run in runs:
            self._on_orphan(run)

    def forget(self) -> None:
        """Stop reporting to the executor (it is closing); the runs go on."""
        for slot in (self.command, self.notebook):
            slot.runs.clear()
            slot.exits.clear()

    async def close(self) -> None:
        for slot in (self.command, self.notebook):
            if slot.client is not None:
                await slot.client.close()  # it ends at once; the runs it started keep running
                slot.client = None
