"""An Engine over a real SQLite store with the scripted FakeExecutor and a FakeClock.

The engine runs on asyncio; tests drive it with `settle()` (every merged cycle and launch
task to the end) and `advance()` (move the clock, deliver due observations, settle).
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from pathlib import Path
from typing import Any

from jupyter_gpuplat.core.config import PlatformConfig, parse_config
from jupyter_gpuplat.core.reasons import Reason
from jupyter_gpuplat.core.request import RunRequest
from jupyter_gpuplat.core.status import Status, can_transition
from jupyter_gpuplat.engine.engine import Engine
from jupyter_gpuplat.executors.fake import FakeClock, FakeExecutor
from jupyter_gpuplat.store import Store


def config(queues: list[dict[str, Any]], **extra: Any) -> PlatformConfig:
    """Admins [ops]; project `p` (alice admin, bob and erin members, carol viewer) using every queue."""
    body: dict[str, Any] = {
        "admins": ["ops"],
        "queues": queues,
        "projects": [
            {"name": "p", "members": {"alice": "admin", "bob": "member", "erin": "member", "carol": "viewer"}},
            {"name": "other", "members": {"dave": "admin"}},
        ],
        **extra,
    }
    return parse_config(body)


class Harness:
    def __init__(
        self, tmp: Path, ex: FakeExecutor, *, db_url: str | None = None, busy_timeout_seconds: float = 5.0
    ) -> None:
        self.tmp = tmp
        self.ex = ex
        self.clock: FakeClock = ex.clock
        self.store = Store(db_url or f"sqlite:///{tmp / 'gpuplat.db'}", busy_timeout_seconds=busy_timeout_seconds)
        self._n = 0
        self.engine = Engine(
            self.store,
            ex,
            artifacts_root=str(tmp / "artifacts"),
            clock=self.clock,
            new_id=self._new_id,
            safety_tick_seconds=3600,
            metrics_interval_seconds=3600,
            timers=self.clock,  # a session's idle deadlines fire as the fake clock moves
        )

    def _new_id(self) -> str:
        self._n += 1
        return f"r-{self._n:03d}"

    async def start(self, cfg: PlatformConfig | None = None) -> Harness:
        await self.engine.start(cfg, source="test", by="test")
        await self.settle()
        return self

    async def settle(self) -> None:
        await self.engine.settle()

    async def advance(self, seconds: float = 0.0) -> None:
        """Move the clock, deliver what is due, and settle until nothing more is due."""
        self.ex.advance(seconds)
        await self.settle()
        while self.ex.deliver():
            await self.settle()

    def submit(self, user: str = "bob", *, queue: str = "q", gpu: int = 1, name: str | None = None, **kw: Any) -> str:
        body: dict[str, Any] = {"project": "p", "queue": queue, "command": ["true"], "resources": {"gpu": gpu}, **kw}
        if name:
            body["name"] = name
        return str(self.engine.submit(user, RunRequest.model_validate(body))["id"])

    def status(self, run_id: str) -> str:
        row = self.store.get_run(run_id)
        assert row is not None
        return str(row["status"])

    def statuses(self, *ids: str) -> list[str]:
        return [self.status(i) for i in ids]

    def timeline(self, run_id: str) -> list[dict[str, Any]]:
        row = self.store.get_run(run_id)
        assert row is not None
        return list(row["timeline"])

    def assert_timeline_valid(self, run_id: str) -> list[tuple[str, str]]:
        """Every step of the run's timeline is an allowed transition; returns (status, reason) pairs."""
        # A remark (EngineState.remark: a GPU idle notice after the end) repeats the status and changes nothing.
        tl = [e for e in self.timeline(run_id) if e["reason"] != Reason.GPU_MOSTLY_IDLE]
        for a, b in itertools.pairwise(tl):
            assert can_transition(Status(a["status"]), Status(b["status"])), (run_id, a, b)
        return [(e["status"], e["reason"]) for e in tl]

    async def close(self) -> None:
        await self.engine.close()
        self.store.close()


async def turns_until(cond: Callable[[], bool], what: str, turns: int = 100) -> None:
    """Let the loop turn until `cond` holds (no clock involved: the fake needs only turns)."""
    for _ in range(turns):
        if cond():
            return
        await asyncio.sleep(0)
    raise AssertionError(f"{what} did not happen within {turns} loop turns")
