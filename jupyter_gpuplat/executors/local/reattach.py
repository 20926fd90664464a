"""Finding a run again rather than starting it twice: from its saved handle after a restart, or from
the launch record a launcher left when the server that started it crashed before saving its handle."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Mapping
from typing import Any

import psutil

from ...core import artifacts as layout
from ...core.reasons import Reason
from .. import safefs
from ..base import FAILED, ExecutorError, Observation
from .process import (
    LAUNCH_FILE,
    create_time_from_ticks,
    current_boot_id,
    identify,
    launcher_in_record,
    make_final_observation,
    open_launch_lock,
    read_json,
)
from .runs import ALIVE, LocalRun, check_exit

# how long submit waits for a live launcher (its lock held) to write its launch record
ADOPT_WAIT_SECONDS = 10.0
ADOPT_POLL_SECONDS = 0.01


def record_exists(state_dir: str, name: str) -> bool:
    """Whether the record is there (a link or a FIFO the run put in its place counts as there: never started twice)."""
    try:
        dirfd = safefs.open_dir(state_dir)
    except OSError:
        return False
    try:
        os.stat(name, dir_fd=dirfd, follow_symlinks=False)
        return True
    except FileNotFoundError:
        return False
    finally:
        os.close(dirfd)


def run_from_handle(run_id: str, handle: Mapping[str, Any]) -> LocalRun | Observation:
    """The live run a saved handle names (its process identity-checked), or how it ended while no server watched."""
    try:
        pid = int(handle["pid"])
        create_time = float(handle["create_time"])
        started_at = float(handle.get("started_at") or create_time)  # handles of earlier versions: the process's
        exit_file = str(handle["exit_file"])
        timeout = handle.get("timeout_seconds")
        timeout_seconds = float(timeout) if timeout else None
        boot = handle.get("boot_time")
        boot_time = float(boot) if boot is not None else None
    except (KeyError, TypeError, ValueError) as exc:
        return Observation(
            run_id, FAILED, Reason.LOST, f"the run's handle is unusable ({exc!r}); nothing to re-attach to"
        )
    gone = f"process {pid} is gone and left no exit record (the machine may have restarted)"
    run = LocalRun(
        run_id, pid, create_time, exit_file, own=False, timeout_seconds=timeout_seconds, started_at=started_at
    )
    run.stop = read_json(run.stop_file)
    record = read_json(exit_file)
    if record is not None:
        return make_final_observation(run_id, pid, record, None, run.stop, gone)
    boot_id = handle.get("boot_id")
    if boot_id and boot_id != current_boot_id():
        gone = f"process {pid} is gone and left no exit record (the machine has restarted since)"
        return make_final_observation(run_id, pid, None, None, run.stop, gone)
    run.process = identify(pid, create_time, boot_time)
    if run.process is None:
        return make_final_observation(run_id, pid, None, None, run.stop, gone)
    code = check_exit(run)
    if code is not ALIVE:
        return make_final_observation(run_id, pid, read_json(exit_file), code, run.stop, gone)
    return run


async def find_launcher(run_id: str, state_dir: str, closed: Callable[[], bool]) -> tuple[int, int] | None:
    """A live launcher holds the run's lock: its (pid, start ticks) once its launch record is there. None: it ended."""
    deadline = time.monotonic() + ADOPT_WAIT_SECONDS
    while True:
        found = launcher_in_record(state_dir)
        if found is not None:
            return found
        lock_fd, locked = open_launch_lock(state_dir)
        os.close(lock_fd)  # closing our descriptor drops the lock we may just have taken
        if locked:
            return None
        if time.monotonic() > deadline:
            raise ExecutorError(
                f"run {run_id}: a launcher holds its launch lock but left no usable launch record "
                f"in {ADOPT_WAIT_SECONDS:g} s; not starting it a second time"
            )
        await asyncio.sleep(ADOPT_POLL_SECONDS)  # it has just started: its record follows in milliseconds
        if closed():
            raise ExecutorError(f"run {run_id}: the local executor is closed")


def adopt(run_id: str, found: tuple[int, int], exit_file: str, timeout_seconds: float | None) -> LocalRun | None:
    """The run of the launcher found, identity-checked, with any stop asked of it; None when it is gone."""
    pid, ticks = found
    create_time = create_time_from_ticks(ticks)
    run = LocalRun(run_id, pid, create_time, exit_file, own=False, timeout_seconds=timeout_seconds)
    run.process = identify(pid, create_time, psutil.boot_time())
    if run.process is None:
        return None
    run.stop = read_json(run.stop_file)
    return run


def earlier_end(run_id: str, state_dir: str, exit_file: str) -> tuple[Observation, int, int | None]:
    """Started before and its launcher ended: how it ended, its pid and its start ticks (None: unknown)."""
    launched = read_json(os.path.join(state_dir, LAUNCH_FILE)) or {}
    pid = launched.get("pid") if isinstance(launched.get("pid"), int) else 0
    ticks = launched.get("start_ticks") if isinstance(launched.get("start_ticks"), int) else None
    assert isinstance(pid, int)
    stop = read_json(os.path.join(state_dir, layout.STOP_FILE))
    lost = f"process {pid} was started before and is gone without leaving an exit record"
    observation = make_final_observation(run_id, pid, read_json(exit_file), None, stop, lost)
    return observation, pid, ticks if isinstance(ticks, int) else None
