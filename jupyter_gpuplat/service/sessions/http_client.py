"""The session client over a control plane's REST API (remote mode: no engine in this server).

`HttpSessionClient` makes the same calls as `InProcessSessionClient` through
`ControlPlaneAPI` (service/remote/control_plane.py): GET sessions?notebook= then POST runs to
attach or lease, GET runs/{id}, GET/POST runs/{id}/kernel, GET runs/{id}/explain. Refusals
come back as the errors the control plane raised, so a kernel's error text is the same in
both modes. Waiting is on the shared events stream (`EventFeed`), not a poll.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any

from ...core.errors import Unavailable
from ...core.status import FINAL, Status
from ..remote.control_plane import ControlPlaneAPI
from .client import CONNECTION_WAIT_SECONDS

CONNECTION_STEP_MAX_SECONDS = 0.1
ENDED = frozenset({Status.STOPPING.value, *(s.value for s in FINAL)})
# One lease start at a time per notebook in this server (see `HttpSessionClient.start`); a lock
# per notebook started, for the server's life.
_STARTS: dict[tuple[int, str, str | None, str, str], asyncio.Lock] = {}


class HttpSessionClient:
    """The `SessionClient` of a Jupyter server whose platform is a control plane elsewhere."""

    def __init__(self, plane: ControlPlaneAPI, user: str = "") -> None:
        self.plane = plane
        self.user = user

    async def start(self, project: str, preset: str, notebook: str | None, working_dir: str | None) -> dict[str, Any]:
        # Two kernel starts of one notebook at once (a reload racing a start, two tabs) would both
        # find no lease between the GET and the POST and lease twice: one at a time per notebook.
        async with _STARTS.setdefault((id(self.plane), self.user, notebook, project, preset), asyncio.Lock()):
            page = await self.plane.call("GET", "sessions", notebook=notebook)
            for row in page["sessions"]:
                same = row["project"] == project and preset in (row.get("presets") or [])
                if same and row["status"] != Status.STOPPING.value:  # an ending lease is not attached to
                    return dict(row)
            fields: dict[str, Any] = {"project": project, "presets": [preset]}
            if notebook:
                fields["notebook"] = notebook
            # No working_dir: it is a path of this server's machine, which the control plane must not resolve.
            return dict(await self.plane.call("POST", "runs", fields))

    async def wait_running(self, run_id: str, timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        try:
            async with self.plane.feed.watch(run_id) as events:
                while True:
                    row = await self._run(run_id)
                    left = deadline - time.monotonic()
                    if _settled(row) or left <= 0:
                        return row
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(events.get(), left)
                    while not events.empty():  # a burst of events: one read
                        events.get_nowait()
        except Unavailable as exc:
            if exc.code != "Unreachable":
                raise
            return await self._run(run_id)  # no stream to wait on: as it is now

    async def connection(self, run_id: str, newer_than: int | None = None) -> dict[str, Any] | None:
        # The agent writes the kernel's connection once its lease runs; no event says when, so ask
        # in short, growing steps, and stop early when the run's events say it ended.
        deadline = time.monotonic() + CONNECTION_WAIT_SECONDS
        step = 0.005
        ended = False
        async with self.plane.feed.watch(run_id, live=False) as events:
            while True:
                got = await self.plane.call("GET", f"runs/{run_id}/kernel")
                info = got.get("connection") if got.get("ready") else None
                generation = (info or {}).get("gpuplat_generation")
                fresh = newer_than is None or generation is None or generation > newer_than
                if info is not None and fresh:
                    # A pid of the control plane's machine means nothing here (and must never be signalled).
                    info.pop("gpuplat_pid", None)
                    return dict(info)
                if ended or time.monotonic() > deadline:
                    return None
                with contextlib.suppress(TimeoutError):
                    ev = await asyncio.wait_for(events.get(), step)
                    ended = ev.get("status") in ENDED
                step = min(2 * step, CONNECTION_STEP_MAX_SECONDS)

    async def kernel_generation(self, run_id: str) -> int | None:
        got = await self.plane.call("GET", f"runs/{run_id}/kernel")
        generation = ((got.get("connection") or {}) if got.get("ready") else {}).get("gpuplat_generation")
        return int(generation) if generation is not None else None

    async def report(self, run_id: str, event: str, kernel_id: str | None = None) -> None:
        body: dict[str, Any] = {"event": event}
        if kernel_id:
            body["kernel_id"] = kernel_id
        await self.plane.call("POST", f"runs/{run_id}/kernel", body)

    async def explain(self, run_id: str) -> dict[str, Any]:
        return dict(await self.plane.call("GET", f"runs/{run_id}/explain"))

    async def events(self, run_id: str) -> AsyncIterator[dict[str, Any]]:
        async with self.plane.feed.watch(run_id, live=False) as events:
            while True:
                yield await events.get()

    async def stop(self, run_id: str) -> dict[str, Any]:
        return dict(await self.plane.call("POST", f"runs/{run_id}/stop"))

    async def _run(self, run_id: str) -> dict[str, Any]:
        return dict(await self.plane.call("GET", f"runs/{run_id}"))


def _settled(row: dict[str, Any]) -> bool:
    """Ended, ending, or running with its lease (its kernel starting or up), as the in-process wait."""
    if row["status"] in ENDED:
        return True
    kernel = (row.get("session") or {}).get("kernel")
    return row["status"] == Status.RUNNING.value and kernel in ("starting", "ready")
