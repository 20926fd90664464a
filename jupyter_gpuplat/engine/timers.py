"""Deadlines on the engine's clock: callbacks at a wall-clock time, not a poll.

The engine's clock is injected (tests move a fake one); `LoopTimers` turns its times into the
loop's, so a timer fires when the clock says so. A fake clock that keeps its own timers (the
tests' FakeClock) is passed as `timers` instead and fires them as it is moved.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol


class Timer(Protocol):
    def cancel(self) -> None: ...


class Timers(Protocol):
    def call_at(self, when: float, callback: Callable[[], None]) -> Timer:
        """Call `callback` at `when` (the engine clock's seconds); at once where it has passed."""
        ...


class LoopTimers:
    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock

    def call_at(self, when: float, callback: Callable[[], None]) -> Timer:
        loop = asyncio.get_running_loop()
        return loop.call_at(when - self.clock() + loop.time(), callback)
