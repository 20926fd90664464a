"""In-process fan-out of status events to live streams (SSE)."""

from __future__ import annotations

import asyncio
from typing import Any


class Subscription:
    def __init__(self, maxsize: int) -> None:
        self.queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue(maxsize)
        # Set when the client fell too far behind; it then replays from the store.
        self.overflowed = False


class EventBus:
    def __init__(self) -> None:
        self._subs: set[Subscription] = set()

    def subscribe(self, maxsize: int = 10_000) -> Subscription:
        sub = Subscription(maxsize)
        self._subs.add(sub)
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        self._subs.discard(sub)

    def publish(self, event: dict[str, Any]) -> None:
        for sub in list(self._subs):
            try:
                sub.queue.put_nowait(event)
            except asyncio.QueueFull:
                # A stalled client must never stall the engine.
                sub.overflowed = True
                self._subs.discard(sub)
