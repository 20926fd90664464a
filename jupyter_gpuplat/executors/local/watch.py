"""Seeing the local executor's runs end: its children through a pidfd in the event loop, the rest polled."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable
from typing import Any

from .runs import ALIVE, LocalRun, check_exit


class RunWatcher:
    """Hands each run's launcher code to `finish` when it ends; runs not ours to wait on share one poll loop."""

    def __init__(
        self,
        finish: Callable[[LocalRun, int | None], None],
        interval_seconds: Callable[[], float],
        log: logging.Logger | logging.LoggerAdapter[Any],
    ) -> None:
        self._finish = finish
        self._interval_seconds = interval_seconds
        self.log = log
        self.polled: dict[str, LocalRun] = {}
        self.poll_task: asyncio.Task[None] | None = None

    def watch_pidfd(self, run: LocalRun) -> None:
        """A warm launcher's child: its pidfd says when it ends (the warm launcher reaps it)."""
        loop = asyncio.get_running_loop()
        if run.pidfd is None:
            self.poll(run)
            return
        run.loop = loop
        loop.add_reader(run.pidfd, self._finish, run, None)

    def watch_child(self, run: LocalRun, loop: asyncio.AbstractEventLoop) -> None:
        """Our own child: watched through a pidfd, or polled where there is none."""
        try:
            run.pidfd = os.pidfd_open(run.pid)
            loop.add_reader(run.pidfd, self._on_child_exit, run)
            run.loop = loop
        except (OSError, NotImplementedError, AttributeError):
            if run.pidfd is not None:
                os.close(run.pidfd)
                run.pidfd = None
            self.poll(run)  # no pidfd here: the shared poll loop reaps it instead

    def _on_child_exit(self, run: LocalRun) -> None:
        code = check_exit(run)
        if code is not ALIVE:
            self._finish(run, code)

    def poll(self, run: LocalRun) -> None:
        """Check the run every poll interval (re-attached and adopted runs are not our children)."""
        self.polled[run.run_id] = run
        if self.poll_task is None or self.poll_task.done():
            self.poll_task = asyncio.get_running_loop().create_task(self._poll_loop(), name="gpuplat-local-poll")

    async def _poll_loop(self) -> None:
        while self.polled:
            await asyncio.sleep(self._interval_seconds())
            for run in list(self.polled.values()):
                try:
                    code = check_exit(run)
                    if code is not ALIVE:
                        self._finish(run, code)
                except Exception:
                    self.log.exception("gpuplat: checking run %s (pid %d) failed", run.run_id, run.pid)

    def unwatch(self, run: LocalRun) -> None:
        """Stop watching the run and cancel its time limit."""
        if run.pidfd is not None:
            if run.loop is not None and not run.loop.is_closed():
                run.loop.remove_reader(run.pidfd)
            os.close(run.pidfd)
            run.pidfd = None
        if run.timer is not None:
            run.timer.cancel()
            run.timer = None
        self.polled.pop(run.run_id, None)
