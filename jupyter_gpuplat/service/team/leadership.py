"""The leader campaign of a team-mode control plane: elected once, then heartbeats until deposed.

`run()` tries the lock every `retry_seconds` until it gets it, awaits `on_elected(epoch)` (the
server fences its store and starts its engine), then renews every `renew_seconds`. It awaits
`on_deposed(reason)` and returns when the lock's session is gone (terminated, connection lost)
or when no heartbeat has succeeded for `renew_deadline_seconds`: shorter than the session's
idle timeout, so this leader stops before the database frees the lock for another one
(client-go's leaderelection: lease 15 s, renew deadline 10 s, retry 2 s). A deposed control
plane is never re-elected in the same process: the server exits, its supervisor restarts it as
a standby. The lock's calls block, so they run in threads.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from ...core.errors import LostLeadership
from ...store.leader import LeaderLock

log = logging.getLogger("jupyter_gpuplat.leadership")


class Leadership:
    def __init__(
        self,
        lock: LeaderLock,
        *,
        retry_seconds: float = 2.0,
        renew_seconds: float = 2.0,
        renew_deadline_seconds: float = 8.0,
        on_elected: Callable[[int], Awaitable[None]],
        on_deposed: Callable[[str], Awaitable[None]],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not renew_seconds < renew_deadline_seconds < lock.idle_timeout_seconds:
            raise ValueError(
                f"need renew_seconds ({renew_seconds}) < renew_deadline_seconds ({renew_deadline_seconds}) "
                f"< the lock's idle timeout ({lock.idle_timeout_seconds}): a leader must stop before "
                "the database frees its lock for another"
            )
        self.lock = lock
        self.retry_seconds = retry_seconds
        self.renew_seconds = renew_seconds
        self.renew_deadline_seconds = renew_deadline_seconds
        self.on_elected = on_elected
        self.on_deposed = on_deposed
        self.clock = clock
        self.is_leader = False
        self.epoch: int | None = None
        self.last_renewed = 0.0  # clock() of the last heartbeat that succeeded (or of the election)
        self.deposed: str | None = None  # why, once deposed
        self.campaign_errors = 0
        self._wake = asyncio.Event()
        self._lost: str | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def lost(self, exc: LostLeadership | str) -> None:
        """A fenced write was refused: depose now, without waiting for the next heartbeat.

        Safe to call from any thread (the store's writes may run in one); pass it as `Store.fence`'s
        `on_lost`.
        """
        self._lost = exc if isinstance(exc, str) else exc.message
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._wake.set)

    async def run(self) -> None:
        self._loop = asyncio.get_running_loop()
        epoch = await self._campaign()
        self.epoch, self.is_leader, self.last_renewed = epoch, True, self.clock()
        log.info("elected leader (epoch %d); renewing every %.1f s", epoch, self.renew_seconds)
        try:
            await self.on_elected(epoch)
            reason = await self._renew()
        except BaseException:
            self.is_leader = False
            await asyncio.to_thread(self.lock.release)
            raise
        self.is_leader, self.deposed = False, reason
        log.error("deposed: %s", reason)
        try:
            await self.on_deposed(reason)
        finally:
            await asyncio.to_thread(self.lock.release)

    async def _campaign(self) -> int:
        while True:
            try:
                epoch = await asyncio.to_thread(self.lock.try_acquire)
            except Exception as exc:  # the database down or starting: keep campaigning, say why
                self.campaign_errors += 1
                log.warning("leader campaign: cannot reach the lock (%s); retrying in %.1f s", exc, self.retry_seconds)
                epoch = None
            if epoch is not None:
                return epoch
            await asyncio.sleep(self.retry_seconds)

    async def _renew(self) -> str:
        """Heartbeat until deposed; returns why."""
        while True:
            try:
                await asyncio.wait_for(self._wake.wait(), self.renew_seconds)
            except TimeoutError:
                pass
            if self._lost is not None:
                return f"a write was refused: {self._lost}"
            left = self.renew_deadline_seconds - (self.clock() - self.last_renewed)
            # Never wait on one beat past the deadline.
            timeout = max(0.05, min(self.renew_seconds, left))
            ok = await asyncio.to_thread(self.lock.heartbeat, timeout)
            now = self.clock()
            if ok:
                self.last_renewed = now
                continue
            if self.lock.lost:
                return "the leader lock's database session ended; another control plane may hold it now"
            if self.lock.superseded is not None:
                return f"another control plane took over (epoch {self.lock.superseded}, ours {self.epoch})"
            if now - self.last_renewed >= self.renew_deadline_seconds:
                return (
                    f"no heartbeat succeeded for {now - self.last_renewed:.1f} s "
                    f"(renew deadline {self.renew_deadline_seconds:.1f} s); stepping down before the database "
                    f"frees the lock ({self.lock.idle_timeout_seconds:.1f} s idle)"
                )
