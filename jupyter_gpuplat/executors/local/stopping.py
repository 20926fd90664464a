"""Stopping a local run: the request kept in stop.json, SIGTERM, then SIGKILL of its group after the grace."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import time
from collections.abc import Callable
from typing import Any

from ...core import artifacts as layout
from .. import safefs
from .runs import LocalRun

# after SIGKILL, how long stop() waits for the watcher to report the end
KILL_WAIT_SECONDS = 5.0


def write_stop(run: LocalRun, log: logging.Logger | logging.LoggerAdapter[Any]) -> None:
    """Record the stop request in stop.json, so that a restarted server still knows it was asked."""
    try:
        dirfd = safefs.open_dir(os.path.dirname(run.stop_file))
        try:
            safefs.write_atomic(dirfd, layout.STOP_FILE, json.dumps(run.stop).encode(), durable=False)
        finally:
            os.close(dirfd)
    except OSError as exc:  # the stop still happens; only a restart in the middle would miss it
        log.warning("gpuplat: cannot record the stop request of run %s: %s", run.run_id, exc)


def signal_run(run: LocalRun, signum: int, *, group: bool, log: logging.Logger | logging.LoggerAdapter[Any]) -> None:
    """Signal the launcher (or its whole group), never a process that took a reused pid."""
    if run.done.is_set():
        return
    # Our own launcher's pid cannot be reused before we reap it; a re-attached one is checked first.
    if not run.own and not run.warm and (run.process is None or not run.process.is_running()):
        return
    try:
        if run.warm and run.pidfd is not None:
            # The pidfd is this very process: until its parent reaps it (after killing its
            # group), its pid and group id cannot be another's.
            signal.pidfd_send_signal(run.pidfd, 0 if group else signum)
        if group:
            os.killpg(run.pid, signum)
        elif not run.warm or run.pidfd is None:
            os.kill(run.pid, signum)
    except ProcessLookupError:
        pass
    except PermissionError as exc:
        log.warning("gpuplat: cannot signal run %s (pid %d): %s", run.run_id, run.pid, exc)


async def wait_done(run: LocalRun, seconds: float) -> bool:
    """Whether the run ended (its final Observation sent) within `seconds`."""
    try:
        await asyncio.wait_for(run.done.wait(), seconds)
    except TimeoutError:
        return False
    return True


async def terminate(
    run: LocalRun,
    reason: str,
    grace: float,
    kill_strays: Callable[[str], None],
    log: logging.Logger | logging.LoggerAdapter[Any],
) -> None:
    """SIGTERM the launcher (it passes it on to its group), SIGKILL the group and the strays after `grace`."""
    if run.stop is None:
        run.stop = {
            "reason": reason,
            "requested_at": time.time(),
            "grace_seconds": grace,
            "timeout_seconds": run.timeout_seconds,
            "killed": False,
        }
        write_stop(run, log)
    signal_run(run, signal.SIGTERM, group=False, log=log)
    if await wait_done(run, grace):
        return
    run.stop.update(killed=True, grace_seconds=grace)
    write_stop(run, log)
    signal_run(run, signal.SIGKILL, group=True, log=log)
    kill_strays(run.run_id)  # what left its process group (setsid) is still in its cgroup
    if not await wait_done(run, KILL_WAIT_SECONDS):
        log.warning(
            "gpuplat: run %s (pid %d) still not gone %.0f s after SIGKILL", run.run_id, run.pid, KILL_WAIT_SECONDS
        )
