"""The async face: what a Jupyter server in remote mode talks to the control plane with.

httpx's `AsyncClient`, public API only (`request`, `stream`, `aiter_bytes`, `httpx.Timeout`),
one connection pool per face, redirects not followed (a redirect is a login page: a token the
Hub did not take, decoded as `NotAuthenticated`). Errors come out as the family of `errors.py`,
worded by the caller's `Wording`; nothing of httpx leaks out.
"""

from __future__ import annotations

import asyncio
import json
import ssl
from collections.abc import AsyncGenerator
from typing import Any

import httpx

from ...core.sse import SSEParser
from .errors import CLIENT, Wording, decode_error, unreachable

__all__ = ["AsyncHTTP", "Silent"]

ERROR_BODY_BYTES = 64 * 1024  # of an error answer on a stream: enough for the error object


class Silent(Exception):
    """A stream sent nothing, not even a keep-alive, for its silence limit."""


class AsyncHTTP:
    """One httpx pool (made on first use, on the running loop) for calls and SSE streams."""

    def __init__(
        self,
        *,
        wording: Wording = CLIENT,
        connect_timeout_seconds: float,
        call_timeout_seconds: float,
        max_connections: int = 64,
    ) -> None:
        self.wording = wording
        self.connect_timeout_seconds = connect_timeout_seconds
        self.call_timeout_seconds = call_timeout_seconds
        self.max_connections = max_connections
        self._client: httpx.AsyncClient | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closing: Any = None

    @property
    def client(self) -> httpx.AsyncClient:
        if self._client is None:
            self._loop = asyncio.get_running_loop()
            self._client = httpx.AsyncClient(
                timeout=httpx.Timeout(self.call_timeout_seconds, connect=self.connect_timeout_seconds),
                # No idle connection kept (a call's is closed after it): only open streams hold
                # one, so a close from sync code leaves nothing open once they end.
                limits=httpx.Limits(max_connections=self.max_connections, max_keepalive_connections=0),
                follow_redirects=False,
                trust_env=False,  # no proxy from the environment: the server is a direct peer
                verify=ssl.create_default_context(),  # the system's CAs (a team's own CA), not certifi's
            )
        return self._client

    async def call(self, method: str, url: str, *, headers: dict[str, str], body: Any = None, where: str) -> Any:
        """One call: its JSON (None for an empty body); an error answer raised as the server raised
        it; no answer within the call's limit (`call_timeout_seconds` in all) is `Unreachable`."""
        content = json.dumps(body).encode() if body is not None else None
        if body is not None:
            headers = {**headers, "Content-Type": "application/json"}
        elif method in ("POST", "PUT", "PATCH"):
            content = b""
        try:
            async with asyncio.timeout(self.call_timeout_seconds):
                resp = await self.client.request(method, url, headers=headers, content=content)
        except (httpx.HTTPError, OSError, TimeoutError) as exc:
            raise unreachable(where, _why(exc), self.wording) from None
        if resp.status_code >= 300:
            raise decode_error(resp.status_code, resp.content, self.wording)
        try:
            return json.loads(resp.content) if resp.content else None
        except ValueError:
            raise unreachable(
                where, ValueError(f"{method} {url} answered {resp.status_code} without JSON"), self.wording
            ) from None

    async def events(
        self, url: str, *, headers: dict[str, str], silence_seconds: float, lifetime_seconds: float, where: str
    ) -> AsyncGenerator[tuple[str, str, str | None], None]:
        """One SSE connection's events (event, data, id), until the server ends it or `lifetime_seconds`
        pass (then it returns: the planned renewal). Raises `Silent` when no byte came for
        `silence_seconds`, the decoded error for an error answer, `Unreachable` for no answer or a drop.
        Leaving the loop early (or cancelling it) closes the connection."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + lifetime_seconds
        # The read limit is the silence limit (a backstop to the wait below).
        timeout = httpx.Timeout(silence_seconds + 1, connect=self.connect_timeout_seconds)
        try:
            async with self.client.stream("GET", url, headers=headers, timeout=timeout) as resp:
                if resp.status_code >= 300:
                    body = bytearray()
                    async for chunk in resp.aiter_bytes():
                        body.extend(chunk[: ERROR_BODY_BYTES - len(body)])
                        if len(body) >= ERROR_BODY_BYTES:
                            break
                    raise decode_error(resp.status_code, bytes(body), self.wording)
                parser = SSEParser()
                chunks = resp.aiter_bytes()
                while True:
                    left = deadline - loop.time()
                    if left <= 0:
                        return
                    try:
                        async with asyncio.timeout(min(silence_seconds, left)):
                            chunk = await anext(chunks)
                    except StopAsyncIteration:
                        return
                    except TimeoutError:
                        if loop.time() >= deadline:
                            return
                        raise Silent(f"silent for {silence_seconds} s") from None
                    for event in parser.feed(chunk):
                        yield event
        except httpx.ReadTimeout:
            raise Silent(f"silent for {silence_seconds} s") from None
        except (httpx.HTTPError, OSError) as exc:
            raise unreachable(where, _why(exc), self.wording) from None

    async def aclose(self) -> None:
        """Close the pool's connections."""
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()

    def close(self) -> None:
        """`aclose` from sync code: run on the pool's loop when it is not running, else as a task on it."""
        loop = self._loop
        if self._client is None or loop is None or loop.is_closed():
            return
        if not loop.is_running():
            loop.run_until_complete(self.aclose())
        elif _running_loop() is loop:
            self._closing = loop.create_task(self.aclose())  # held: a task nobody references may be collected
        else:
            self._closing = asyncio.run_coroutine_threadsafe(self.aclose(), loop)


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _why(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__  # a timeout's own text is empty
