"""The controllers' clock: timers run on the controller thread, and the time they read.

Controllers take a `Clock` instead of the cluster (as Kueue's scheduler takes `WithClock`),
so a test can drive one with a clock of its own. `ControllerClock` is the real one: a timer
heap that the cluster's controller loop drains under the store's lock.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections.abc import Callable
from typing import Protocol


class Clock(Protocol):
    def after(self, seconds: float, action: Callable[[], None]) -> None:
        """Run `action` on the controller thread after `seconds` (under the store lock)."""

    def time_ns(self) -> int:
        """Wall-clock time in nanoseconds since the epoch."""


class ControllerClock:
    """Timers kept in a heap by due time (monotonic); `changed` wakes the loop to re-read them."""

    def __init__(self, changed: threading.Condition) -> None:
        self._changed = changed
        self._timers: list[tuple[float, int, Callable[[], None]]] = []
        self._seq = itertools.count()  # ties in due time keep the order they were set in

    def after(self, seconds: float, action: Callable[[], None]) -> None:
        with self._changed:
            heapq.heappush(self._timers, (time.monotonic() + max(0.0, seconds), next(self._seq), action))
            self._changed.notify_all()

    def time_ns(self) -> int:
        return time.time_ns()

    def run_due(self) -> bool:
        """Run every timer due now, in due order; whether any ran. Call with the lock held."""
        ran = False
        now = time.monotonic()
        while self._timers and self._timers[0][0] <= now:
            _, _, action = heapq.heappop(self._timers)
            action()
            ran = True
        return ran

    def wait_seconds(self, most: float) -> float:
        """How long the loop may sleep: until the next timer, at most `most`."""
        if not self._timers:
            return most
        return max(0.0, min(most, self._timers[0][0] - time.monotonic()))
