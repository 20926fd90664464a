"""The client room's HTTP core (client/http): one error family decoded once, and its two faces.

The decoder is tested as a table (status and code → class, each also a `GpuPlatAPIError`); the
faces against a small scripted HTTP server in a thread: an error answer and no answer come out
as the same family from the sync face (requests) and the async face (httpx), and the async
face's event stream ends on silence and renews at its lifetime.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from jupyter_gpuplat.client import GpuPlatAPIError
from jupyter_gpuplat.client.http import CLIENT, Unreachable, decode_error, unreachable
from jupyter_gpuplat.client.http.aio import AsyncHTTP, Silent
from jupyter_gpuplat.client.http.sync import SyncHTTP
from jupyter_gpuplat.core.errors import (
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
from jupyter_gpuplat.service.errors import error_body
from jupyter_gpuplat.service.remote.control_plane import WORDING, remote_error


def _body(code: str, message: str = "it was refused", hint: str = "do this", **more: Any) -> bytes:
    return json.dumps({"error": {"code": code, "message": message, "hint": hint, **more}}).encode()


@pytest.mark.parametrize(
    ("status", "code", "cls"),
    [
        (400, "InvalidInput", InvalidInput),
        (403, "Forbidden", Forbidden),
        (404, "NotFound", NotFound),
        (409, "Conflict", Conflict),
        (422, "PolicyViolation", Unprocessable),
        (503, "Unavailable", Unavailable),
        (503, "NotLeader", NotLeader),
    ],
)
def test_an_error_answer_is_the_core_error_of_its_status_and_a_gpuplat_api_error(
    status: int, code: str, cls: type[GpuPlatError]
) -> None:
    err = decode_error(status, _body(code))
    assert isinstance(err, cls) and isinstance(err, GpuPlatAPIError)
    assert (err.status, err.code, err.message, err.hint) == (status, code, "it was refused", "do this")
    assert str(err) == "it was refused (hint: do this)"
    # The service catching the core class and a user catching GpuPlatAPIError both hold.
    for catch in (cls, GpuPlatAPIError):
        with pytest.raises(catch):
            raise decode_error(status, _body(code))


def test_an_unlisted_status_is_a_gpuplat_api_error_of_no_core_subclass() -> None:
    err = decode_error(500, _body("Internal", "boom", ""))
    assert type(err) is GpuPlatAPIError and (err.status, err.code, str(err)) == (500, "Internal", "boom")
    assert not isinstance(err, Unavailable | NotFound | Forbidden | InvalidInput | Conflict | Unprocessable)


def test_a_refused_run_keeps_the_whole_error_object() -> None:
    rules = [{"rule": "max_gpus", "message": "at most 2 GPUs"}]
    alternatives = [{"presets": ["small"], "message": "the small preset fits"}]
    err = decode_error(422, _body("PolicyViolation", rules=rules, alternatives=alternatives))
    assert isinstance(err, Unprocessable)
    assert err.error["rules"] == rules and err.error["alternatives"] == alternatives


def test_field_not_allowed_keeps_its_field_rule_and_allowed_values() -> None:
    refused = FieldNotAllowed(
        "env.NVIDIA_VISIBLE_DEVICES is reserved", "GPUs come from resources.gpu", field="env.NVIDIA_VISIBLE_DEVICES",
        rule="env.reserved", allowed=["preset:gpu"],
    )  # fmt: skip
    err = decode_error(403, json.dumps(error_body(refused)).encode())
    assert isinstance(err, FieldNotAllowed) and isinstance(err, GpuPlatAPIError) and err.status == 403
    assert (err.field, err.rule, err.allowed) == ("env.NVIDIA_VISIBLE_DEVICES", "env.reserved", ["preset:gpu"])
    assert err.to_dict() == refused.to_dict() and err.error == error_body(refused)["error"]


def test_a_redirect_is_a_login_page_not_an_answer() -> None:
    for wording in (CLIENT, WORDING):
        err = decode_error(302, b"", wording)
        assert isinstance(err, Forbidden) and isinstance(err, GpuPlatAPIError)
        assert (err.status, err.code) == (302, "NotAuthenticated")
    assert "server_token_scopes" in remote_error(302, b"").hint  # the control plane's words


def test_an_answer_without_an_error_object_is_worded_by_each_face() -> None:
    client = decode_error(502, b"<html>bad gateway</html>")
    assert (client.message, client.code, client.status) == ("HTTP 502: <html>bad gateway</html>", "Error", 502)
    plane = remote_error(404, b"<html>not here</html>")
    assert isinstance(plane, NotFound) and (plane.message, plane.code) == ("the control plane answered 404", "NotFound")


def test_no_answer_is_unreachable_an_unavailable_in_each_face_s_words() -> None:
    client = unreachable("http://h/gpuplat/api/", "refused")
    assert isinstance(client, Unavailable) and isinstance(client, GpuPlatAPIError)
    assert (str(client), client.code, client.status) == (
        "cannot reach http://h/gpuplat/api/: refused",
        "Unreachable",
        0,
    )
    plane = unreachable("http://cp/", "refused", WORDING)
    assert plane.message == "cannot reach the GPU platform's control plane at http://cp/: refused"
    assert (plane.code, plane.status) == ("Unreachable", 503) and "control_plane_url" in plane.hint


# ---- the two faces against a scripted server ------------------------------------------------------
class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    release: threading.Event

    def log_message(self, *args: Any) -> None:
        pass

    def _send(self, status: int, body: bytes, content_type: str = "application/json", **headers: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        path = self.path.split("?")[0]
        if path == "/ok":
            self._send(200, b'{"fine": true}')
        elif path == "/missing":
            self._send(404, _body("NotFound", "no run r-1", "list your runs"))
        elif path == "/login":
            self._send(302, b"", Location="/hub/login")
        elif path in ("/events", "/silent"):
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            self.wfile.write(b'event: ready\ndata: {"last_event_id": 3}\n\n')
            self.wfile.flush()
            if path == "/events":  # a keep-alive as often as the client's silence limit asks
                while not self.release.wait(0.05):
                    self.wfile.write(b": keep-alive\n\n")
                    self.wfile.flush()
            else:
                self.release.wait()  # nothing more until the test ends
        else:
            self._send(500, b"")


@pytest.fixture
def server() -> Iterator[str]:
    release = threading.Event()
    handler = type("Handler", (_Handler,), {"release": release})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_port}"
    finally:
        release.set()
        httpd.shutdown()
        httpd.server_close()


def test_the_sync_face_raises_the_family(server: str) -> None:
    http = SyncHTTP()
    try:
        assert http.request("GET", server + "/ok", timeout=5, where=server) == {"fine": True}
        with pytest.raises(NotFound) as missing:
            http.request("GET", server + "/missing", timeout=5, where=server)
        assert isinstance(missing.value, GpuPlatAPIError) and str(missing.value) == "no run r-1 (hint: list your runs)"
        with pytest.raises(Unreachable) as gone:
            http.request("GET", "http://127.0.0.1:9/x", timeout=5, where="http://127.0.0.1:9/")
        assert str(gone.value).startswith("cannot reach http://127.0.0.1:9/: ")
    finally:
        http.close()


async def test_the_async_face_raises_the_family(server: str) -> None:
    http = AsyncHTTP(wording=WORDING, connect_timeout_seconds=5, call_timeout_seconds=5)
    try:
        assert await http.call("GET", server + "/ok", headers={}, where=server) == {"fine": True}
        with pytest.raises(NotFound) as missing:
            await http.call("GET", server + "/missing", headers={}, where=server)
        assert isinstance(missing.value, GpuPlatAPIError) and missing.value.status == 404
        with pytest.raises(Forbidden) as login:  # not followed: a login page is no answer
            await http.call("GET", server + "/login", headers={}, where=server)
        assert login.value.code == "NotAuthenticated"
        with pytest.raises(Unreachable) as gone:
            await http.call("GET", "http://127.0.0.1:9/x", headers={}, where="http://127.0.0.1:9/")
        assert gone.value.status == 503 and "control plane at http://127.0.0.1:9/" in gone.value.message
    finally:
        await http.aclose()


async def test_the_async_face_s_stream_is_renewed_at_its_lifetime_and_dropped_when_silent(server: str) -> None:
    http = AsyncHTTP(connect_timeout_seconds=5, call_timeout_seconds=5)
    try:
        # Keep-alives keep it open until its lifetime: then it returns (the planned renewal).
        got = [e async for e in http.events(server + "/events", headers={}, silence_seconds=0.5,
                                            lifetime_seconds=0.6, where=server)]  # fmt: skip
        assert got == [("ready", '{"last_event_id": 3}', None)]
        # Nothing at all past the silence limit: dropped.
        with pytest.raises(Silent):
            async for _ in http.events(server + "/silent", headers={}, silence_seconds=0.3, lifetime_seconds=60,
                                       where=server):  # fmt: skip
                pass
    finally:
        await http.aclose()
