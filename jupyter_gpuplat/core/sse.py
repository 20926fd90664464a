"""Server-Sent Events from byte chunks, cut anywhere: the one parser of every Python client.

The service's events and log streams (`text/event-stream`) are read by the client room's HTTP
core: its sync face (`client/http/sync.py`, for the CLI and the notebook client) and its async
face (`client/http/aio.py`, for a remote-mode server's control-plane feed); both feed their
chunks here. The sidebar has its own, in
TypeScript (`labextension/src/api/sse.ts`).
"""

from __future__ import annotations

KEEP_ALIVE = ("keep-alive", "", None)


class SSEParser:
    """(event, data, id) per complete event; with `keepalives`, a comment line (the server's
    keep-alive) is reported as `KEEP_ALIVE`, so that a caller waiting on the stream can check its deadline."""

    def __init__(self, *, keepalives: bool = False) -> None:
        self.keepalives = keepalives
        self._buf = b""
        self._event, self._data, self._id = "message", [], None  # type: tuple[str, list[str], str | None]

    def feed(self, chunk: bytes) -> list[tuple[str, str, str | None]]:
        self._buf += chunk
        out: list[tuple[str, str, str | None]] = []
        while (cut := self._buf.find(b"\n")) >= 0:
            line, self._buf = self._buf[:cut].rstrip(b"\r").decode("utf-8", "replace"), self._buf[cut + 1 :]
            if not line:
                if self._data:
                    out.append((self._event, "\n".join(self._data), self._id))
                self._event, self._data, self._id = "message", [], None
            elif line.startswith(":"):  # a comment is a keep-alive
                if self.keepalives:
                    out.append(KEEP_ALIVE)
            else:
                key, _, value = line.partition(":")
                value = value[1:] if value.startswith(" ") else value
                if key == "data":
                    self._data.append(value)
                elif key == "event":
                    self._event = value
                elif key == "id":
                    self._id = value
        return out
