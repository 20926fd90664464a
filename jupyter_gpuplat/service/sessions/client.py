"""What the session kernel provisioner asks of the platform, and its in-process form.

The provisioner (service/sessions/provisioner.py) only talks to a `SessionClient`: submit or attach
to a lease, wait for it, get the kernel's connection, report kernel events, end it. Here the
platform runs in this Jupyter server, so `InProcessSessionClient` calls the engine and waits
on its event bus (no polling). A control plane served elsewhere implements the same calls
over the REST API: `HttpSessionClient` (service/sessions/http_client.py), in remote mode.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from typing import Any, Protocol

from ...core.request import RunRequest
from ...core.status import FINAL, Status
from ...engine.engine import Engine
from ...engine.explain import explain

# How long a kernel's connection file may take to appear once its lease runs (the agent writes
# it first thing); checked in short steps: it is a file of this machine, written once.
CONNECTION_WAIT_SECONDS = 10.0
CONNECTION_STEP_SECONDS = 0.005
WAITING = frozenset({Status.CREATED.value, Status.QUEUED.value, Status.DISPATCHED.value, Status.STARTING.value})


class SessionClient(Protocol):
    user: str

    async def start(self, project: str, preset: str, notebook: str | None, working_dir: str | None) -> dict[str, Any]:
        """The caller's unfinished lease of this notebook and preset, or a new one (policy refusals raise)."""
        ...

    async def wait_running(self, run_id: str, timeout: float) -> dict[str, Any]:
        """The run once it runs or ends, or as it is when `timeout` passes."""
        ...

    async def connection(self, run_id: str, newer_than: int | None = None) -> dict[str, Any] | None: ...

    async def kernel_generation(self, run_id: str) -> int | None:
        """The kernel's start count in the lease, where its pid is not ours to watch (None: unknown)."""
        ...

    async def report(self, run_id: str, event: str, kernel_id: str | None = None) -> None: ...

    async def explain(self, run_id: str) -> dict[str, Any]: ...

    def events(self, run_id: str) -> AsyncIterator[dict[str, Any]]:
        """The run's status events from now on."""
        ...


class InProcessSessionClient:
    def __init__(self, engine: Engine, user: str) -> None:
        self.engine = engine
        self.user = user

    async def start(self, project: str, preset: str, notebook: str | None, working_dir: str | None) -> dict[str, Any]:
        for row in self.engine.reads.user_sessions(self.user, notebook):
            same = row["project"] == project and preset in ((row.get("request") or {}).get("presets") or [])
            if same and row["status"] != Status.STOPPING.value:  # an ending lease is not attached to
                return row
        fields: dict[str, Any] = {"project": project, "presets": [preset]}
        if notebook:
            fields["notebook"] = notebook
        # The notebook's directory, where the executor can start there (not off a cluster's shared volume).
        if working_dir and self.engine.reads.working_dir_problem(working_dir) is None:
            fields["working_dir"] = working_dir
        req = RunRequest.model_validate(fields)
        return self.engine.submit(self.user, req)  # refused in the words `POST runs` answers

    async def wait_running(self, run_id: str, timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        sub = self.engine.reads.subscribe()
        try:
            while True:
                row = self.engine.reads.get_visible(self.user, run_id)
                if row["status"] in FINAL or (
                    row["status"] == Status.RUNNING.value and self.engine.reads.session_leased(run_id)
                ):
                    return row
                if row["status"] == Status.STOPPING.value:
                    return row
                left = deadline - time.monotonic()
                if left <= 0:
                    return row
                with contextlib.suppress(TimeoutError):
                    await _next_of(sub.queue, run_id, left)
        finally:
            self.engine.reads.unsubscribe(sub)

    async def connection(self, run_id: str, newer_than: int | None = None) -> dict[str, Any] | None:
        deadline = time.monotonic() + CONNECTION_WAIT_SECONDS
        while True:
            info = await self.engine.kernel_connection(self.user, run_id)
            generation = (info or {}).get("gpuplat_generation")
            fresh = newer_than is None or generation is None or generation > newer_than
            if (info is not None and fresh) or self.engine.reads.is_final(run_id) or time.monotonic() > deadline:
                return info if info is not None and fresh else None
            await asyncio.sleep(CONNECTION_STEP_SECONDS)

    async def kernel_generation(self, run_id: str) -> int | None:
        return None  # the connection gives the kernel's pid: the provisioner watches it

    async def report(self, run_id: str, event: str, kernel_id: str | None = None) -> None:
        self.engine.session_report(self.user, run_id, event, kernel_id)

    async def explain(self, run_id: str) -> dict[str, Any]:
        return explain(self.engine, self.user, run_id)

    async def events(self, run_id: str) -> AsyncIterator[dict[str, Any]]:
        sub = self.engine.reads.subscribe()
        try:
            while True:
                ev = await _next_of(sub.queue, run_id, None)
                yield ev
        finally:
            self.engine.reads.unsubscribe(sub)


async def _next_of(queue: asyncio.Queue[dict[str, Any]], run_id: str, timeout: float | None) -> dict[str, Any]:
    async def next_event() -> dict[str, Any]:
        while True:
            ev = await queue.get()
            if ev.get("run_id") == run_id:
                return ev

    return await asyncio.wait_for(next_event(), timeout)


# The platform of the Jupyter server this process runs (set by the extension when it loads).
_factory: Callable[[], SessionClient] | None = None


def register(factory: Callable[[], SessionClient] | None) -> None:
    global _factory
    _factory = factory


def session_client() -> SessionClient:
    if _factory is None:
        raise RuntimeError(
            "GPU session kernels start only in a Jupyter server running jupyter-gpuplat "
            "(this one has not loaded the extension)"
        )
    return _factory()
