"""The sync face: what `Client` (kernels, scripts, the CLI, the magics and widgets) talks HTTP with.

It stays on `requests` (httpx is the async face's): a widget's `Streams.cut()` must end a read
another thread is blocked in *at once*, which takes `socket.shutdown()` on the connection's
socket. requests (urllib3) lets us reach it through public classes (an `HTTPAdapter` whose pools
make `HTTPConnection`s, whose `sock` is public); httpx has no public way to the socket under a
response, and closing the response from another thread does not wake a blocked `recv()`.

Every failure comes out as the error family of `errors.py`: an error answer decoded once, no
answer (or a stream cut mid-way) as `Unreachable`; nothing of requests leaks out.
"""

from __future__ import annotations

import json
import socket
import threading
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import requests
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

from ...core.sse import SSEParser
from .errors import CLIENT, Wording, decode_error, unreachable

__all__ = ["Answer", "CuttableHTTP", "SyncHTTP"]


@dataclass(frozen=True)
class Answer:
    """One HTTP answer, read whole."""

    status: int
    reason: str
    content_type: str
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)

    def value(self, where: str, wording: Wording = CLIENT) -> Any:
        """Its JSON, or its bytes when it is not JSON (a download)."""
        if "json" not in self.content_type:
            return self.body
        try:
            return self.json()
        except ValueError:
            raise unreachable(where, f"an answer {self.status} that is not JSON", wording) from None


class SyncHTTP:
    """One requests session: headers (the token), connection reuse; calls and SSE streams."""

    def __init__(self, *, wording: Wording = CLIENT, session: requests.Session | None = None) -> None:
        self.wording = wording
        self.session = session or requests.Session()

    def authorize(self, token: str) -> None:
        """Send `Authorization: token <token>` from now on (none for "")."""
        self.session.headers.pop("Authorization", None)
        if token:
            self.session.headers["Authorization"] = f"token {token}"

    def send(
        self,
        method: str,
        url: str,
        *,
        body: Any = None,
        params: dict[str, Any] | None = None,
        timeout: float,
        where: str,
    ) -> Answer:
        """One call, any status; no answer is `Unreachable` ("cannot reach <where>")."""
        try:
            r = self.session.request(method, url, json=body, params=params, timeout=timeout)
            return Answer(r.status_code, r.reason or "", r.headers.get("Content-Type", ""), r.content)
        except requests.RequestException as exc:
            raise unreachable(where, exc, self.wording) from None

    def request(
        self,
        method: str,
        url: str,
        *,
        body: Any = None,
        params: dict[str, Any] | None = None,
        timeout: float,
        where: str,
    ) -> Any:
        """One call of the API: its JSON (or bytes); an error answer raised as the service raised it."""
        answer = self.send(method, url, body=body, params=params, timeout=timeout, where=where)
        if answer.status >= 400:
            raise decode_error(answer.status, answer.body, self.wording)
        return answer.value(where, self.wording)

    def stream(
        self, url: str, *, params: dict[str, Any] | None = None, timeout: float, where: str
    ) -> Iterator[tuple[str, str, str | None]]:
        """Server-Sent Events as (event, data, id), keep-alives reported (`core.sse.KEEP_ALIVE`) so
        a caller waiting on the stream can check its deadline; `timeout` bounds the connect and the
        headers, not the stream."""
        try:
            r = self.session.get(url, params=params, stream=True, timeout=(timeout, None))
        except requests.RequestException as exc:
            raise unreachable(where, exc, self.wording) from None
        with r:
            if r.status_code >= 400:
                raise decode_error(r.status_code, self._body(r, where), self.wording)
            parser = SSEParser(keepalives=True)
            try:
                for chunk in r.iter_content(chunk_size=None):  # as the chunks arrive
                    yield from parser.feed(chunk)
            except requests.RequestException as exc:  # dropped, or cut (`CuttableHTTP.cut`)
                raise unreachable(where, exc, self.wording) from None

    def _body(self, r: requests.Response, where: str) -> bytes:
        try:
            return r.content
        except requests.RequestException as exc:
            raise unreachable(where, exc, self.wording) from None

    def cuttable(self, on_open: Callable[[], None] | None = None) -> CuttableHTTP:
        """A copy on its own session (headers, auth, TLS, proxies and cookies as this one's) whose
        connections another thread can cut; `on_open()` runs when an answer (not an error) arrives."""
        return CuttableHTTP(self, on_open)

    def close(self) -> None:
        self.session.close()


class CuttableHTTP(SyncHTTP):
    """`cut()` shuts down every socket this face opened, so a thread blocked in a call (waiting for
    the headers, or reading a stream) returns at once; later calls through it fail fast."""

    def __init__(self, src: SyncHTTP, on_open: Callable[[], None] | None = None) -> None:
        old = src.session
        session = requests.Session()
        session.headers.clear()
        session.headers.update(old.headers)
        session.auth, session.verify, session.cert = old.auth, old.verify, old.cert
        session.proxies, session.trust_env = dict(old.proxies), old.trust_env
        session.cookies.update(old.cookies)
        adapter = _TrackingAdapter(self._track)
        session.mount("http://", adapter)
        session.mount("https://", adapter)
        session.hooks["response"].append(self._opened)
        super().__init__(wording=src.wording, session=session)
        self.on_open = on_open
        self._lock = threading.Lock()
        self._conns: weakref.WeakSet[Any] = weakref.WeakSet()
        self._cut = False

    def _track(self, conn: Any) -> None:
        with self._lock:
            cut = self._cut
            if not cut:
                self._conns.add(conn)
        if cut:
            _shutdown(conn)

    def _opened(self, r: requests.Response, *args: Any, **kwargs: Any) -> None:
        if r.status_code < 400 and self.on_open is not None and not self._cut:
            self.on_open()

    @property
    def is_cut(self) -> bool:
        return self._cut

    def cut(self) -> None:
        """End every open call and stream now, and make later ones fail fast."""
        with self._lock:
            self._cut = True
            conns = list(self._conns)
        for conn in conns:
            _shutdown(conn)


def _shutdown(conn: Any) -> None:
    # shutdown(), unlike close(), wakes a thread blocked on the socket.
    sock = getattr(conn, "sock", None)
    if sock is None:
        return
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


class _TrackingAdapter(HTTPAdapter):
    """Hands every connection it opens to `track` (urllib3's public pool and connection classes)."""

    def __init__(self, track: Callable[[Any], None]) -> None:
        self._track = track
        super().__init__()

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        track = self._track

        class Conn(HTTPConnection):
            def connect(self) -> None:
                super().connect()
                track(self)

        class TLSConn(HTTPSConnection):
            def connect(self) -> None:
                super().connect()
                track(self)

        class Pool(HTTPConnectionPool):
            ConnectionCls = Conn

        class TLSPool(HTTPSConnectionPool):
            ConnectionCls = TLSConn

        self.poolmanager.pool_classes_by_scheme = {"http": Pool, "https": TLSPool}
