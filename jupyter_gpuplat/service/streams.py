"""The two live streams as Server-Sent Events: a run's log and the status changes of visible runs.

Both resume without loss: a log event's id is the byte offset after its line, a status event's
id the timeline event id; reconnect with Last-Event-ID (or `offset=` / `since=`).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from tornado import web
from tornado.iostream import StreamClosedError

from ..core.status import phase_of
from ..executors.base import ArtifactReader
from .args import choice, int_arg, stream_position
from .errors import RangeNotSatisfiable
from .handlers import BaseHandler


class SSEHandler(BaseHandler):
    def start_stream(self) -> None:
        self.raw_content_type = True
        self.set_header("Content-Type", "text/event-stream")
        self.set_header("Cache-Control", "no-cache")
        self.set_header("X-Accel-Buffering", "no")

    async def emit(self, data: str, *, event: str | None = None, id: str | int | None = None) -> None:
        chunk = ""
        if id is not None:
            chunk += f"id: {id}\n"
        if event:
            chunk += f"event: {event}\n"
        for line in data.split("\n"):
            chunk += f"data: {line}\n"
        self.write(chunk + "\n")
        await self.flush()


class LogsHandler(SSEHandler):
    """The run's log as SSE: one event per line, id = byte offset after it.

    `follow=false` sends what exists and ends; otherwise it follows until the run
    ends. Reconnect with Last-Event-ID (or `offset=`) to resume without loss.
    `format=text` returns the plain log file (from `offset=`) instead. A position past
    the end of the log is refused (416) before anything is sent.
    """

    poll_seconds = 0.05

    @web.authenticated
    async def get(self, run_id: str) -> None:
        row = self.engine.reads.get_visible(self.user_name, run_id)
        reader = self.engine.reads.artifacts
        fmt = choice(self, "format", "sse", ("sse", "text"))
        follow = choice(self, "follow", "true", ("true", "false")) == "true"
        offset = self._resume_offset(reader.log_size(run_id), run_id)  # a log linking out is refused here too
        if fmt == "text":
            self.raw_content_type = True
            self.set_header("Content-Type", "text/plain; charset=utf-8")
            self.finish(reader.read_log(run_id, offset))
            return
        self.start_stream()
        try:
            await self.flush()  # headers now: a client sees the stream open before the first line
            while True:
                final = self.engine.reads.is_final(row["id"])  # read before the file: no line is missed
                offset = await self._send_lines(reader, run_id, offset, final)
                if final or not follow:
                    break
                await asyncio.sleep(self.poll_seconds)
            status = self.engine.reads.status_of(run_id) or row["status"]
            await self.emit(json.dumps({"status": status, "offset": offset}), event="end")
        except StreamClosedError:
            return
        self.finish()

    def _resume_offset(self, size: int, run_id: str) -> int:
        """Where to start: Last-Event-ID, else `offset`, else 0; at most the log's size (the log only grows)."""
        last = self.request.headers.get("Last-Event-ID")
        raw, name = (last, "Last-Event-ID") if last else (self.get_argument("offset", None), "offset")
        offset = 0 if raw is None else stream_position(raw, name)
        size = max(size, 0)
        if offset > size:
            raise RangeNotSatisfiable(
                f"{name} {offset} is past the end of the log of run {run_id} ({size} bytes)",
                "resume from an id this stream sent (a position in the log), or from 0",
            )
        return offset

    async def _send_lines(self, reader: ArtifactReader, run_id: str, offset: int, final: bool) -> int:
        data = reader.read_log(run_id, offset, 4 * 1024 * 1024)
        if not data:
            return offset
        cut = data.rfind(b"\n") + 1
        if cut == 0 and not final:
            return offset  # wait for the line to complete
        chunk = data if final else data[:cut]
        pos = offset
        for raw in chunk.splitlines(keepends=True):
            pos += len(raw)
            await self.emit(raw.rstrip(b"\r\n").decode("utf-8", "replace"), id=pos)
        return pos


def status_event(ev: dict[str, Any]) -> str:
    """An `event: status` payload: the bus's event with its status's phase (clients keep no phase table)."""
    return json.dumps({**ev, "phase": phase_of(ev["status"]).value})


class EventsHandler(SSEHandler):
    """Status changes of every visible run as SSE; resumes from Last-Event-ID or `since`."""

    heartbeat_seconds = 15.0

    @web.authenticated
    async def get(self) -> None:
        user = self.user_name
        projects = set(self.engine.reads.visible_projects(user))
        last_id = self.request.headers.get("Last-Event-ID")
        since, since_name = (last_id, "Last-Event-ID") if last_id else (self.get_argument("since", ""), "since")
        start = stream_position(since, since_name) if since else None
        limit = int_arg(self, "limit", 0, 0, 10**9)
        heartbeat = float(int_arg(self, "heartbeat", int(self.heartbeat_seconds), 1, 300))
        sub = self.engine.reads.subscribe()
        sent = 0
        self.start_stream()
        try:
            last, backlog = self.engine.reads.events_since(user, start, limit or 10_000)
            for ev in backlog:
                await self.emit(status_event(ev), id=ev["id"], event="status")
                last, sent = ev["id"], sent + 1
            await self.emit(json.dumps({"last_event_id": last}), event="ready")
            while not (limit and sent >= limit):
                try:
                    ev = await asyncio.wait_for(sub.queue.get(), heartbeat)
                except TimeoutError:
                    if sub.overflowed:
                        break
                    self.write(": keep-alive\n\n")
                    await self.flush()
                    continue
                if ev.get("type") == "eta":  # new start estimates: not part of any timeline, so no id
                    seen = [{"run_id": rid, **e} for rid, e in ev["runs"].items() if e["project"] in projects]
                    if seen:
                        await self.emit(json.dumps({"runs": seen}), event="eta")
                    continue
                if ev["id"] <= last or ev["project"] not in projects:
                    continue
                await self.emit(status_event(ev), id=ev["id"], event="status")
                last, sent = ev["id"], sent + 1
        except StreamClosedError:
            return
        finally:
            self.engine.reads.unsubscribe(sub)
        self.finish()
