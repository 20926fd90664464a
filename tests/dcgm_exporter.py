"""A stand-in for the NVIDIA DCGM exporter: its Prometheus text served over real local HTTP.

The exporter is an outside service (a DaemonSet on every GPU node): tests serve its text format
from the scrapes in tests/fixtures/dcgm/ (one file per node) on a real `http.server`, and nothing
else about the platform is faked. `renames` puts a fixture pod's series on a real pod of the
emulator (its name is only known once the Job made it); `status` makes a path answer an error.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

FIXTURES = Path(__file__).parent / "fixtures" / "dcgm"
RUN_POD = "gpuplat-r-7f3c9a2b-x5k2p"  # the pod holding gpu-node-a's GPUs 1 and 3 in the fixture
MIB = 1 << 20


class Exporter:
    """Serves /<node>/metrics from FIXTURES/<node>.prom; counts the scrapes."""

    def __init__(self) -> None:
        self.renames: dict[str, str] = {}
        self.status: dict[str, int] = {}  # path → an HTTP error to answer instead
        self.scrapes = 0
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.thread = threading.Thread(target=self.server.serve_forever, name="dcgm-exporter", daemon=True)

    def url(self, node: str) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}/{node}/metrics"

    def text(self, node: str) -> str:
        text = (FIXTURES / f"{node}.prom").read_text()
        for old, new in self.renames.items():
            text = text.replace(f'pod="{old}"', f'pod="{new}"')
        return text

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        exporter = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                exporter.scrapes += 1
                node = self.path.strip("/").removesuffix("/metrics")
                code = exporter.status.get(self.path)
                if code is not None or not (FIXTURES / f"{node}.prom").is_file():
                    self.send_error(code or 404)
                    return
                body = exporter.text(node).encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                pass

        return Handler


@contextmanager
def serving() -> Iterator[Exporter]:
    exporter = Exporter()
    exporter.thread.start()
    try:
        yield exporter
    finally:
        exporter.server.shutdown()
        exporter.server.server_close()
        exporter.thread.join(5)
