"""The one poll interval tests use while waiting on a condition with a deadline, and the sync wait."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

POLL_SECONDS = 0.02

T = TypeVar("T")


def until(cond: Callable[[], T], what: str, timeout: float = 20) -> T:
    """Poll a condition until it is truthy (returned), or fail at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(POLL_SECONDS)  # polling a condition with a deadline
