"""The session client over a control plane's REST API (remote mode: no engine in this server).

`HttpSessionClient` makes the same calls as `InProcessSessionClient` with tornado's
AsyncHTTPClient: GET sessions?notebook= then POST runs to attach or lease, GET runs/{id},
GET/POST runs/{id}/kernel, GET runs/{id}/explain. Refusals come back as the `GpuPlatError`
the control plane raised (its status, code, message and hint verbatim), so a kernel's error
text is the same in both modes.

Waiting is on the events stream, not a poll: one SSE connection per Jupyter server
(`EventFeed`), shared by every kernel's waits and lease watchers, opened while someone
listens. It resumes with Last-Event-ID after an error (capped backoff, no loss), and a stream
silent past its keep-alives (a frozen control plane) is dropped and reopened.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
import urllib.parse
from collections.abc import AsyncIterator
from typing import Any

from tornado.httpclient import AsyncHTTPClient, HTTPClientError, HTTPRequest, HTTPResponse
from tornado.simple_httpclient import HTTPTimeoutError

from ..core.errors import (
    Conflict,
    Forbidden,
    GpuPlatError,
    InvalidInput,
    NotFound,
    NotLeader,
    Unavailable,
    Unprocessable,
)
from ..core.status import FINAL, Status
from .session_client import CONNECTION_WAIT_SECONDS

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
CONNECTION_STEP_MAX_SECONDS = 0.1
ENDED = frozenset({Status.STOPPING.value, *(s.value for s in FINAL)})

_BY_STATUS: dict[int, type[GpuPlatError]] = {
    400: InvalidInput,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    422: Unprocessable,
    503: Unavailable,
}


def remote_error(status: int, body: bytes) -> GpuPlatError:
    """The control plane's `{"error": {code, message, hint}}` as the error it raised there."""
    try:
        err = json.loads(body or b"{}").get("error") or {}
    except (ValueError, AttributeError):
        err = {}
    code = err.get("code") or None
    cls = NotLeader if code == "NotLeader" else _BY_STATUS.get(status, GpuPlatError)
    message = err.get("message") or f"the control plane answered {status}"
    exc = cls(message, err.get("hint") or "", code=code)
    exc.status = status
    return exc


class _Abandoned(Exception):
    """Raised in a stream's callback: tornado closes that connection."""


class _Connection:
    """One events connection's state, as its callbacks see it."""

    def __init__(self, now: float) -> None:
        self.heard = now
        self.status = 0
        self.opened = False
        self.abandoned = False
        self.error_body = bytearray()
        self.parser = SSEParser()


class ControlPlaneAPI:
    """Where the platform is: base URL, token, one HTTP client and one events feed for this server."""

    def __init__(self, url: str, token: str) -> None:
        self.url = url.rstrip("/") + "/"
        self.base = self.url + API
        self.token = token
        self._http: AsyncHTTPClient | None = None
        self.feed = EventFeed(self)

    @property
    def http(self) -> AsyncHTTPClient:
        # Made on the server's loop, on first use; its own instance so our streams don't queue behind others.
        if self._http is None:
            self._http = AsyncHTTPClient(force_instance=True, max_clients=64)
        return self._http

    def headers(self, **extra: str) -> dict[str, str]:
        return {"Authorization": f"token {self.token}", **extra} if self.token else dict(extra)

    def endpoint(self, path: str, params: dict[str, Any] | None = None) -> str:
        query = {k: v for k, v in (params or {}).items() if v is not None}
        return self.base + path + ("?" + urllib.parse.urlencode(query) if query else "")

    async def call(self, method: str, path: str, body: Any = None, **params: Any) -> Any:
        req = HTTPRequest(
            self.endpoint(path, params),
            method=method,
            headers=self.headers(**({"Content-Type": "application/json"} if body is not None else {})),
            body=json.dumps(body) if body is not None else (b"" if method in ("POST", "PUT", "PATCH") else None),
            connect_timeout=CONNECT_TIMEOUT_SECONDS,
            request_timeout=CALL_TIMEOUT_SECONDS,
        )
        try:
            resp: HTTPResponse = await self.http.fetch(req, raise_error=False)
        except (HTTPClientError, OSError) as exc:
            raise self.unreachable(exc) from None
        if resp.code == 599:  # tornado's own: no HTTP answer (refused, reset, timed out)
            raise self.unreachable(resp.error)
        if resp.code >= 400:
            raise remote_error(resp.code, resp.body)
        return json.loads(resp.body) if resp.body else None

    def unreachable(self, exc: BaseException | None) -> Unavailable:
        return Unavailable(
            f"cannot reach the GPU platform's control plane at {self.url}: {exc}",
            "retry shortly; if it persists, ask the platform team (GpuPlat.control_plane_url)",
            code="Unreachable",
        )

    def close(self) -> None:
        self.feed.close()
        if self._http is not None:
            self._http.close()
            self._http = None


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
            except (GpuPlatError, HTTPClientError, OSError, _Abandoned) as exc:
                problem = exc
            if not self._subs or self._closed:
                break
            delay = RECONNECT_DELAYS[min(failures, len(RECONNECT_DELAYS) - 1)]
            failures += 1
            log.info("gpuplat: events stream of %s: %s; reconnecting in %.2f s", self.plane.url, problem, delay)
            await asyncio.sleep(delay)

    async def _stream(self) -> bool:
        """One connection, until the control plane ends it, it goes silent, or nobody listens; was it open?"""
        loop = asyncio.get_running_loop()
        conn = _Connection(loop.time())

        def on_header(line: str) -> None:
            if line.startswith("HTTP/"):
                conn.status = int(line.split()[1])

        def on_chunk(chunk: bytes) -> None:
            if conn.abandoned or not self._subs or self._closed:
                raise _Abandoned("nobody listens")
            conn.heard = loop.time()
            if conn.status != 200:
                conn.error_body.extend(chunk[: 64 * 1024])
                return
            for event, data, event_id in conn.parser.feed(chunk):
                conn.opened |= self._dispatch(event, data, event_id)

        headers = self.plane.headers(Accept="text/event-stream")
        if self.last_id is not None:
            headers["Last-Event-ID"] = self.last_id
        req = HTTPRequest(
            self.plane.endpoint("events", {"heartbeat": HEARTBEAT_SECONDS}),
            headers=headers,
            header_callback=on_header,
            streaming_callback=on_chunk,
            connect_timeout=CONNECT_TIMEOUT_SECONDS,
            request_timeout=STREAM_SECONDS,
        )
        fetch = asyncio.ensure_future(self.plane.http.fetch(req, raise_error=False))
        try:
            while not (await asyncio.wait({fetch}, timeout=SILENCE_SECONDS))[0]:
                if loop.time() - conn.heard > SILENCE_SECONDS:
                    raise _Abandoned(f"silent for {SILENCE_SECONDS} s")
        finally:
            self._live.clear()
            if not fetch.done():  # closed by its next chunk (or its request timeout), not awaited here
                conn.abandoned = True
                fetch.add_done_callback(lambda f: f.cancelled() or f.exception())
        try:
            resp = fetch.result()
        except HTTPTimeoutError:
            if conn.opened:
                return True  # the planned renewal (STREAM_SECONDS): resume
            raise
        if resp.code >= 400:
            raise remote_error(resp.code, bytes(conn.error_body))
        return conn.opened

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


class SSEParser:
    """Server-Sent Events from byte chunks: (event, data, id) per complete event."""

    def __init__(self) -> None:
        self._buf = b""
        self._event, self._data, self._id = "message", [], None  # type: tuple[str, list[str], str | None]

    def feed(self, chunk: bytes) -> list[tuple[str, str, str | None]]:
        self._buf += chunk
        out = []
        while (cut := self._buf.find(b"\n")) >= 0:
            line, self._buf = self._buf[:cut].rstrip(b"\r").decode("utf-8", "replace"), self._buf[cut + 1 :]
            if not line:
                if self._data:
                    out.append((self._event, "\n".join(self._data), self._id))
                self._event, self._data, self._id = "message", [], None
            elif not line.startswith(":"):  # a comment is a keep-alive
                key, _, value = line.partition(":")
                value = value[1:] if value.startswith(" ") else value
                if key == "data":
                    self._data.append(value)
                elif key == "event":
                    self._event = value
                elif key == "id":
                    self._id = value
        return out


class HttpSessionClient:
    """The `SessionClient` of a Jupyter server whose platform is a control plane elsewhere."""

    def __init__(self, plane: ControlPlaneAPI, user: str = "") -> None:
        self.plane = plane
        self.user = user

    async def start(self, project: str, preset: str, notebook: str | None, working_dir: str | None) -> dict[str, Any]:
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
