"""What the engine could not write while its database was unavailable, retried in order.

An executor's observation (a run started, ended) is a fact: it must reach the record even
when the database is locked or down for a while. `Deferred.apply` runs a write now, or, if
the store is unavailable (or earlier writes still wait), keeps it behind them and retries the
queue with a growing delay until the store answers again. Writes keep their order, so a run's
"running" is never recorded after its "succeeded". In-memory state changes only after a
write succeeds, so nothing the engine believes is ahead of the record.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable

from ..store import StoreUnavailable

log = logging.getLogger("jupyter_gpuplat.engine")

FIRST_RETRY_SECONDS = 0.25
MAX_RETRY_SECONDS = 10.0


class Deferred:
    def __init__(self) -> None:
        self._waiting: deque[tuple[str, Callable[[], object]]] = deque()
        self._hooks: list[Callable[[], None]] = []
        self._handle: asyncio.TimerHandle | None = None
        self._delay = FIRST_RETRY_SECONDS
        self.fault: str | None = None  # the store's last error while something waits
        self.fault_since: float | None = None  # wall clock, for logs
        self.retries = 0

    def __len__(self) -> int:
        return len(self._waiting)

    def apply(self, what: str, write: Callable[[], object]) -> bool:
        """Run `write` now if nothing waits before it; keep it for later if the store is unavailable.

        Returns True when it ran now.
        """
        if self._waiting:
            self._waiting.append((what, write))
            return False
        try:
            write()
        except StoreUnavailable as exc:
            self._waiting.append((what, write))
            self.failed(exc)
            return False
        return True

    def on_retry(self, hook: Callable[[], None]) -> None:
        """Also call `hook` on each retry (the dispatcher re-runs a cycle it could not save)."""
        self._hooks.append(hook)

    def failed(self, exc: StoreUnavailable) -> None:
        """Note a store fault and make sure a retry is due (callers that redo their own work use it too)."""
        if self.fault is None:
            self.fault_since = time.time()
            log.warning("store unavailable; the engine keeps its writes and retries: %s", exc.message)
        self.fault = exc.message
        self._schedule()

    def ok(self) -> None:
        """A write went through: the fault is over once nothing waits."""
        if self.fault is not None and not self._waiting:
            log.warning("store available again after %.1f s", time.time() - (self.fault_since or time.time()))
            self.fault = self.fault_since = None
            self._delay = FIRST_RETRY_SECONDS

    def retry(self) -> None:
        """Write what waits, in order, until the queue is empty or the store fails again."""
        self._handle = None
        self.retries += 1
        wrote = False
        while self._waiting:
            what, write = self._waiting[0]
            try:
                write()
            except StoreUnavailable as exc:
                self.failed(exc)
                return
            except Exception:  # one write that can never succeed must not hold back every later one
                log.exception("deferred write (%s) failed; dropping it", what)
            self._waiting.popleft()
            wrote = True
        if wrote:
            self.ok()
        for hook in self._hooks:
            hook()

    def _schedule(self) -> None:
        if self._handle is not None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        # Each try may block the loop for the store's busy timeout: back off, never spin.
        self._handle = loop.call_later(self._delay, self.retry)
        self._delay = min(self._delay * 2, MAX_RETRY_SECONDS)

    def cancel(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
