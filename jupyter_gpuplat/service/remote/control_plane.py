"""The control plane's REST API and its events stream, from a Jupyter server in remote mode.

`ControlPlaneAPI` calls it through the client room's async face (`client/http/aio.py`: httpx,
redirects not followed) with the server owner's token; an error answer is raised as the
`GpuPlatError` the control plane raised (its status, code, message and hint verbatim), decoded
by the one decoder every client shares (`client/http/errors.py`), in this module's words where
the control plane said nothing (`WORDING`). `EventFeed` is one SSE connection per Jupyter server,
shared by every session kernel's waits and lease watchers, open while someone listens: it resumes
with Last-Event-ID after an error (capped backoff, no loss), and a stream silent past its
keep-alives (a frozen control plane) is dropped and reopened.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import urllib.parse
from collections.abc import AsyncIterator
from typing import Any

from ...client.http.aio import AsyncHTTP, Silent
from ...client.http.errors import GpuPlatAPIError, Unreachable, Wording, decode_error, unreachable
from ...core.errors import GpuPlatError

log = logging.getLogger(__name__)

API = "gpuplat/api/"
CALL_TIMEOUT_SECONDS = 30.0
CONNECT_TIMEOUT_SECONDS = 10.0
# The events stream: keep-alives every HEARTBEAT s; silent for SILENCE s, it is dropped; a
# connection is renewed (resuming) every STREAM s, so one left silent is closed by then.
HEARTBEAT_SECONDS = 5
SILENCE_SECONDS = 4 * HEARTBEAT_SECONDS
STREAM_SECONDS = 600.0
LIVE_WAIT_SECONDS = 15.0
RECONNECT_DELAYS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.0)

# What this server says where the control plane said nothing itself.
WORDING = Wording(
    unreachable="cannot reach the GPU platform's control plane at {where}: {exc}",
    unreachable_hint="retry shortly; if it persists, ask the platform team (GpuPlat.control_plane_url)",
    unreachable_status=503,
    unworded="the control plane answered {status}",
    unworded_code=None,
    redirect="the control plane answered {status}, a redirect (a login page): it did not take this server's token",
    redirect_hint="the Hub must grant the server's token the control plane's scope (server_token_scopes)",
)


def remote_error(status: int, body: bytes) -> GpuPlatAPIError:
    """The control plane's `{"error": {code, message, hint}}` as the error it raised there."""
    return decode_error(status, body, WORDING)


class ControlPlaneAPI:
    """Where the platform is: base URL, token, one HTTP client and one events feed for this server."""

    def __init__(self, url: str, token: str) -> None:
        self.url = url.rstrip("/") + "/"
        self.base = self.url + API
        self.token = token
        # Its own pool, so our streams don't queue behind others'; made on the server's loop, on first use.
        self.http = AsyncHTTP(
            wording=WORDING,
            connect_timeout_seconds=CONNECT_TIMEOUT_SECONDS,
            call_timeout_seconds=CALL_TIMEOUT_SECONDS,
            max_connections=64,
        )
        self.feed = EventFeed(self)

    def headers(self, **extra: str) -> dict[str, str]:
        return {"Authorization": f"token {self.token}", **extra} if self.token else dict(extra)

    def endpoint(self, path: str, params: dict[str, Any] | None = None) -> str:
        query = {k: v for k, v in (params or {}).items() if v is not None}
        return self.base + path + ("?" + urllib.parse.urlencode(query) if query else "")

    async def call(self, method: str, path: str, body: Any = None, **params: Any) -> Any:
        return await self.http.call(
            method, self.endpoint(path, params), headers=self.headers(), body=body, where=self.url
        )

    def unreachable(self, exc: BaseException | None) -> Unreachable:
        return unreachable(self.url, exc, WORDING)

    def close(self) -> None:
        """Stop the feed and close the pool (from sync code; `aclose` where one can await)."""
        self.feed.close()
        self.http.close()

    async def aclose(self) -> None:
        await self.feed.aclose()
        await self.http.aclose()


class EventFeed:
    """The control plane's events stream, shared: status events handed out by run id."""

    def __init__(self, plane: ControlPlaneAPI) -> None:
        self.plane = plane
        self.last_id: str | None = None
        self._subs: dict[str, set[asyncio.Queue[dict[str, Any]]]] = {}
        self._live = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._closed = False

    @contextlib.asynccontextmanager
    async def watch(self, run_id: str, *, live: bool = True) -> AsyncIterator[asyncio.Queue[dict[str, Any]]]:
        """A queue of `run_id`'s status events from now on; `live`: once the stream is known open.

        Open means the control plane has subscribed us: a read made after that misses nothing.
        """
        q: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._subs.setdefault(run_id, set()).add(q)
        if not self._closed and (self._task is None or self._task.done()):
            self._task = asyncio.ensure_future(self._run())
        try:
            if live:
                try:
                    await asyncio.wait_for(self._live.wait(), LIVE_WAIT_SECONDS)
                except TimeoutError:
                    raise self.plane.unreachable(TimeoutError("the events stream did not open")) from None
            yield q
        finally:
            subs = self._subs.get(run_id, set())
            subs.discard(q)
            if not subs:
                self._subs.pop(run_id, None)

    async def _run(self) -> None:
        failures = 0
        while self._subs and not self._closed:
            try:
                if await self._stream():
                    failures = 0  # it was open: resume at once
                    continue
                problem: BaseException = RuntimeError("the stream ended before it was ready")
            except (GpuPlatError, Silent, ValueError) as exc:  # ValueError: a bad event
                problem = exc
            if not self._subs or self._closed:
                break
            delay = RECONNECT_DELAYS[min(failures, len(RECONNECT_DELAYS) - 1)]
            failures += 1
            log.info("gpuplat: events stream of %s: %s; reconnecting in %.2f s", self.plane.url, problem, delay)
            await asyncio.sleep(delay)

    async def _stream(self) -> bool:
        """One connection, until the control plane ends it, it goes silent, it is renewed (every
        STREAM_SECONDS), or nobody listens; was it open?"""
        headers = self.plane.headers(Accept="text/event-stream")
        if self.last_id is not None:
            headers["Last-Event-ID"] = self.last_id
        opened = False
        events = self.plane.http.events(
            self.plane.endpoint("events", {"heartbeat": HEARTBEAT_SECONDS}),
            headers=headers,
            silence_seconds=SILENCE_SECONDS,
            lifetime_seconds=STREAM_SECONDS,
            where=self.plane.url,
        )
        try:
            async with contextlib.aclosing(events):  # leaving closes the connection at once
                async for event, data, event_id in events:
                    if not self._subs or self._closed:
                        break  # nobody listens
                    opened |= self._dispatch(event, data, event_id)
        finally:
            self._live.clear()
        return opened

    def _dispatch(self, event: str, data: str, event_id: str | None) -> bool:
        """Hand out one event; True when it says the stream is open (`ready`)."""
        if event == "ready":
            if self.last_id is None:
                self.last_id = str(json.loads(data).get("last_event_id"))
            self._live.set()
            return True
        if event == "status":
            ev = json.loads(data)
            self.last_id = event_id or str(ev.get("id"))
            for q in self._subs.get(ev.get("run_id"), ()):
                q.put_nowait(ev)
        return False

    def close(self) -> None:
        self._closed = True
        if self._task is not None:
            self._task.cancel()

    async def aclose(self) -> None:
        """`close`, and wait until its connection is closed."""
        self.close()
        if self._task is not None:
            await asyncio.wait({self._task})  # its end, whatever it was; our own cancellation still raises
