"""The control plane's REST API and its events stream, from a Jupyter server in remote mode.

`ControlPlaneAPI` calls it with tornado's AsyncHTTPClient and the server owner's token; an
error answer is raised as the `GpuPlatError` the control plane raised (its status, code,
message and hint verbatim). `EventFeed` is one SSE connection per Jupyter server, shared by
every session kernel's waits and lease watchers, open while someone listens: it resumes with
Last-Event-ID after an error (capped backoff, no loss), and a stream silent past its
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

from tornado.httpclient import AsyncHTTPClient, HTTPClientError, HTTPRequest, HTTPResponse

from ...core.errors import (
    Conflict,
    FieldNotAllowed,
    Forbidden,
    GpuPlatError,
    InvalidInput,
    NotFound,
    NotLeader,
    Unavailable,
    Unprocessable,
)
from ...core.sse import SSEParser

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
    if 300 <= status < 400:
        exc: GpuPlatError = Forbidden(
            f"the control plane answered {status}, a redirect (a login page): it did not take this server's token",
            "the Hub must grant the server's token the control plane's scope (server_token_scopes)",
            code="NotAuthenticated",
        )
        exc.status = status
        return exc
    message = err.get("message") or f"the control plane answered {status}"
    if code == "FieldNotAllowed" and isinstance(err.get("field"), str):  # keep what the member rule named
        allowed = [str(a) for a in err.get("allowed") or [] if isinstance(a, str)]
        exc = FieldNotAllowed(
            message, err.get("hint") or "", field=err["field"], rule=str(err.get("rule")), allowed=allowed
        )
    else:
        cls = NotLeader if code == "NotLeader" else _BY_STATUS.get(status, GpuPlatError)
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
            follow_redirects=False,  # a redirect is a login page (a token the Hub did not take), not an answer
        )
        try:
            resp: HTTPResponse = await self.http.fetch(req, raise_error=False)
        except (HTTPClientError, OSError) as exc:
            raise self.unreachable(exc) from None
        if resp.code == 599:  # tornado's own: no HTTP answer (refused, reset, timed out)
            raise self.unreachable(resp.error)
        if resp.code >= 300:
            raise remote_error(resp.code, resp.body)
        try:
            return json.loads(resp.body) if resp.body else None
        except ValueError:
            raise self.unreachable(ValueError(f"{method} {path} answered {resp.code} without JSON")) from None

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
            except (GpuPlatError, HTTPClientError, OSError, ValueError, _Abandoned) as exc:  # ValueError: a bad event
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
            follow_redirects=False,
        )
        started = loop.time()
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
        except HTTPClientError as exc:
            # tornado's request timeout (599, public API: no HTTPTimeoutError) at STREAM_SECONDS
            renewal = exc.code == 599 and loop.time() - started >= STREAM_SECONDS - 1
            if renewal and conn.opened:
                return True  # the planned renewal (STREAM_SECONDS): resume
            raise
        if resp.code >= 300:
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
