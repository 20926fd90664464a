"""Remote mode's shared events feed (`service/remote/control_plane.py`, `EventFeed`) against a
scripted control plane: a stream gone silent is dropped and the next one resumes after the last
event seen (Last-Event-ID), with the server owner's token."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from jupyter_gpuplat.service.remote import control_plane
from jupyter_gpuplat.service.remote.control_plane import ControlPlaneAPI


def _event(name: str, data: dict[str, Any], event_id: int | None = None) -> bytes:
    head = f"id: {event_id}\n" if event_id is not None else ""
    return f"{head}event: {name}\ndata: {json.dumps(data)}\n\n".encode()


class _Plane(BaseHTTPRequestHandler):
    """GET events: the first connection sends one status event and falls silent; later ones send
    the next event and keep-alives. Each request's headers are recorded."""

    protocol_version = "HTTP/1.1"
    seen: list[dict[str, str]]
    release: threading.Event

    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self.seen.append(dict(self.headers))
        first = len(self.seen) == 1
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        self.wfile.write(_event("ready", {"last_event_id": 4}))
        n = 5 if first else 6
        self.wfile.write(_event("status", {"id": n, "run_id": "r-1", "status": "queued"}, n))
        self.wfile.flush()
        if first:
            self.release.wait()  # silent: not even a keep-alive
            return
        while not self.release.wait(0.05):
            self.wfile.write(b": keep-alive\n\n")
            self.wfile.flush()


@pytest.fixture
def plane_url() -> Iterator[tuple[str, list[dict[str, str]]]]:
    seen: list[dict[str, str]] = []
    release = threading.Event()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), type("Plane", (_Plane,), {"seen": seen, "release": release}))
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_port}/", seen
    finally:
        release.set()
        httpd.shutdown()
        httpd.server_close()


async def test_a_silent_stream_is_dropped_and_the_next_resumes_after_the_last_event(
    plane_url: tuple[str, list[dict[str, str]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, seen = plane_url
    monkeypatch.setattr(control_plane, "SILENCE_SECONDS", 0.3)
    plane = ControlPlaneAPI(url, "tok-owner")
    try:
        async with plane.feed.watch("r-1") as events:
            first = await asyncio.wait_for(events.get(), 10)
            second = await asyncio.wait_for(events.get(), 10)  # on a new connection, after the silence
        assert [first["id"], second["id"]] == [5, 6]
        assert [h.get("Last-Event-ID") for h in seen] == [None, "5"]
        assert {h["Authorization"] for h in seen} == {"token tok-owner"}
        assert {h["Accept"] for h in seen} == {"text/event-stream"}
    finally:
        await plane.aclose()
