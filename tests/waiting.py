"""The one home of waiting in the tests: poll a condition until it holds, or fail at a deadline.

- `until(cond, what, timeout)`: sync; `cond()` is polled every `POLL_SECONDS`.
- `await wait_for(cond, timeout, what)`: async, on the running loop (what the test drives keeps
  running between polls); `cond()` may return a value or an awaitable of one.

Both return the first truthy value `cond` gives and raise AssertionError naming `what` at the
deadline. Helpers that wait on one particular thing (a log line, a path, a leader) are built on
these; nothing waits by sleeping a fixed time.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

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


async def wait_for(cond: Callable[[], Awaitable[Any] | Any], timeout: float = 20, what: str = "condition") -> Any:
    """Poll a condition (async or plain) on the running loop until it is truthy (returned), or fail at the deadline."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        value = cond()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value
        if loop.time() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(POLL_SECONDS)  # polling a condition with a deadline
