"""A run the local executor watches: its record, how its end is seen, how it is signalled and its stop recorded."""

from __future__ import annotations

import asyncio
import contextlib
import enum
import os
import signal
from dataclasses import dataclass, field
from typing import Any, Final, Literal

import psutil

from ...core import artifacts as layout
from .warm.slots import WarmSlot


class _State(enum.Enum):
    ALIVE = "alive"


ALIVE: Final = _State.ALIVE


@dataclass(eq=False)
class LocalRun:
    """One run's launcher as watched here: its identity, how it is watched, its stop and time limit."""

    run_id: str
    pid: int
    create_time: float
    exit_file: str
    own: bool  # our child: watched through a pidfd and reaped here
    timeout_seconds: float | None
    # When the run's command was launched: a spare warm launcher is forked ahead of its run, so
    # its create_time (the process's identity) is not the run's start.
    started_at: float | None = None
    warm: WarmSlot[LocalRun] | None = None  # the warm launcher whose child it is: it reports the end; pidfd for signals
    process: psutil.Process | None = None  # for re-attached runs: identity-checked
    stop: dict[str, Any] | None = None  # the stop request, as written to stop.json
    done: asyncio.Event = field(default_factory=asyncio.Event)
    pidfd: int | None = None
    loop: asyncio.AbstractEventLoop | None = None
    timer: asyncio.TimerHandle | None = None
    stopping: asyncio.Future[None] | None = None

    @property
    def stop_file(self) -> str:
        return os.path.join(os.path.dirname(self.exit_file), layout.STOP_FILE)


def check_exit(run: LocalRun) -> int | Literal[_State.ALIVE] | None:
    """ALIVE, or the launcher's Popen-style code, or None when it ended where we cannot see how."""
    if not run.own:
        try:
            if run.process is None or not run.process.is_running():
                return None
            if run.process.status() != psutil.STATUS_ZOMBIE:
                return ALIVE
        except psutil.NoSuchProcess:
            return None
        except psutil.Error:
            return ALIVE
    try:  # WNOWAIT: look without reaping, so the pid stays reserved until its group is cleaned
        info = os.waitid(os.P_PID, run.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return None  # not our child, or reaped elsewhere
    if info is None:
        return ALIVE
    # The run is over: whatever it left running in its group would hold GPUs nobody accounts for.
    with contextlib.suppress(OSError):
        os.killpg(run.pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(run.pid, 0)
    return info.si_status if info.si_code == os.CLD_EXITED else -info.si_status
