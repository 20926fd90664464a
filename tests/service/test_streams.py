"""Live streams: logs follow a running process; status events arrive and resume."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from tornado.httpclient import AsyncHTTPClient, HTTPRequest

from ..server import parse_sse
from ..waiting import wait_for


class Stream:
    """An SSE request whose chunks are read as they arrive."""

    def __init__(self, url: str, headers: dict[str, str]) -> None:
        self.text = ""
        self.request = HTTPRequest(url, headers=headers, streaming_callback=self._chunk, request_timeout=60)
        self.future = asyncio.ensure_future(AsyncHTTPClient().fetch(self.request, raise_error=False))

    def _chunk(self, data: bytes) -> None:
        self.text += data.decode()

    def events(self) -> list[dict[str, str]]:
        return parse_sse(self.text)


def url(port: int, base: str, path: str) -> str:
    return f"http://localhost:{port}{base}gpuplat/api/{path}"


async def test_log_stream_delivers_lines_while_the_process_prints(
    api: Any, tmp_path: Path, jp_http_port: int, jp_base_url: str
) -> None:
    gate = tmp_path / "go"
    code = (
        "import pathlib, time\n"
        "for i in range(3): print(f'step {i}', flush=True)\n"
        f"while not pathlib.Path({str(gate)!r}).exists(): time.sleep(0.02)\n"
        "print('finished', flush=True)\n"
    )
    run = await api.submit(command=[sys.executable, "-c", code])
    s = Stream(url(jp_http_port, jp_base_url, f"runs/{run['id']}/logs"), {"Authorization": "token tok-bob"})

    async def three_lines() -> bool:
        return len([e for e in s.events() if e.get("data", "").startswith("step")]) == 3

    await wait_for(three_lines, 20, "three log lines over SSE")
    # The process is still running: the lines arrived while it was printing.
    assert (await api.run(run["id"]))["status"] == "running"
    assert not s.future.done()
    gate.touch()
    resp = await asyncio.wait_for(s.future, 30)
    assert resp.code == 200
    evs = s.events()
    assert [e["data"] for e in evs if "event" not in e] == ["step 0", "step 1", "step 2", "finished"]
    end = evs[-1]
    assert end["event"] == "end" and json.loads(end["data"])["status"] == "succeeded"
    # Offsets let a client resume: from the id of 'step 1' only the rest comes back.
    resume_from = next(e["id"] for e in evs if e.get("data") == "step 1")
    _, body = await api("GET", f"runs/{run['id']}/logs", offset=resume_from)
    assert [e["data"] for e in parse_sse(body.decode()) if "event" not in e] == ["step 2", "finished"]
    # The full log remains after the run ended.
    assert (await api.ok("GET", f"runs/{run['id']}/logs", format="text")).decode().splitlines() == [
        "step 0",
        "step 1",
        "step 2",
        "finished",
    ]


async def test_events_stream_status_changes_and_resume(api: Any, jp_http_port: int, jp_base_url: str) -> None:
    s = Stream(url(jp_http_port, jp_base_url, "events"), {"Authorization": "token tok-carol"})
    other = Stream(url(jp_http_port, jp_base_url, "events"), {"Authorization": "token tok-dave"})

    async def ready() -> bool:
        return any(e.get("event") == "ready" for e in s.events()) and any(
            e.get("event") == "ready" for e in other.events()
        )

    await wait_for(ready, 20, "both event streams to be ready")
    run = await api.submit(command="true")

    async def succeeded() -> list[dict[str, Any]] | None:
        mine = [json.loads(e["data"]) for e in s.events() if e.get("event") == "status"]
        mine = [m for m in mine if m["run_id"] == run["id"]]
        return mine if mine and mine[-1]["status"] == "succeeded" else None

    seen = await wait_for(succeeded, 20, "the run's succeeded event")
    assert [m["status"] for m in seen] == ["created", "queued", "dispatched", "running", "succeeded"]
    # Each carries its status's phase (core/status.py): clients keep no status table (issue 24).
    assert [m["phase"] for m in seen] == ["dispatch", "dispatch", "execution", "run", "end"]
    assert all(m["project"] == "team-a" for m in seen)
    # dave (team-b) saw none of it.
    assert not [e for e in other.events() if e.get("event") == "status"]
    # Resume: from the id of the 'dispatched' event, the later ones are replayed.
    since = [e["id"] for e in s.events() if e.get("event") == "status"][2]
    _, body = await api("GET", "events", "carol", since=since, limit="2")
    replay = [json.loads(e["data"])["status"] for e in parse_sse(body.decode()) if e.get("event") == "status"]
    assert replay == ["running", "succeeded"]
    s.future.cancel()
    other.future.cancel()


async def test_events_resumed_from_past_the_newest_id_still_deliver_what_comes_next(
    api: Any, jp_http_port: int, jp_base_url: str
) -> None:
    # A client holding an id from a database that was reset since must not be starved.
    s = Stream(url(jp_http_port, jp_base_url, "events") + f"?since={10**12}", {"Authorization": "token tok-alice"})
    await wait_for(lambda: _ready(s), 10, "the events stream to open")
    run = await api.submit(command=["true"])

    async def created() -> bool:
        return any(json.loads(e["data"])["run_id"] == run["id"] for e in s.events() if e.get("event") == "status")

    await wait_for(created, 20, "the new run's events after a resume past the newest id")
    s.future.cancel()


async def _ready(s: Stream) -> bool:
    return any(e.get("event") == "ready" for e in s.events())
