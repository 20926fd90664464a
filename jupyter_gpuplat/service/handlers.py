"""Thin tornado handlers: parse, make one engine call, render.

Every handler is authenticated by jupyter_server and authorised by project role
in the engine/core. Domain errors become `{"error": {code, message, hint}}` in
`_handle_request_exception`, never a 500 for bad input.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import quote

from jupyter_server.base.handlers import APIHandler, JupyterHandler
from tornado import web
from tornado.iostream import StreamClosedError

from ..auth import platform_username
from ..core.artifacts import is_internal
from ..core.config import PlatformConfig, PresetConfig, ProjectConfig, QueueConfig, parse_config
from ..core.errors import GpuPlatError, InvalidInput, NotFound, Unavailable
from ..core.request import RunRequest
from ..engine.engine import Engine
from ..engine.explain import explain
from ..executors.base import ArtifactReader
from . import models as m
from .errors import RangeNotSatisfiable, error_body, parse_json_body
from .openapi import API
from .views import queue_view, run_detail, run_summary

ID = r"(?P<run_id>[A-Za-z0-9_-]{1,64})"
NAME = r"(?P<name>[^/]{1,200})"


class BaseHandler(APIHandler):
    @property
    def platform(self) -> Any:
        return self.settings["gpuplat"]

    @property
    def engine(self) -> Engine:
        return self.platform.engine

    @property
    def user_name(self) -> str:
        return platform_username(self.identity_provider, self.current_user, self.platform.app.default_user)

    # Set by handlers that answer with text, files or event streams.
    raw_content_type = False

    async def prepare(self) -> None:  # type: ignore[override]
        await super().prepare()
        await self.platform.ensure_started()

    def finish(self, *args: Any, **kwargs: Any) -> Any:
        # APIHandler forces application/json on every response; streams and files keep theirs.
        if self.raw_content_type:
            self.update_api_activity()
            return JupyterHandler.finish(self, *args, **kwargs)
        return super().finish(*args, **kwargs)

    def _handle_request_exception(self, e: BaseException) -> None:
        if isinstance(e, GpuPlatError):
            if self._finished:
                return
            self.clear()
            self.raw_content_type = False
            self.set_status(e.status)
            self.set_header("Content-Type", "application/json")
            if isinstance(e, Unavailable):
                self.set_header("Retry-After", str(e.retry_after_seconds))
            self.finish(json.dumps(error_body(e)))
            return
        super()._handle_request_exception(e)

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        # tornado's own errors (403 unauthenticated, 404, 405) in our error shape too.
        self.set_header("Content-Type", "application/json")
        if status_code == 405:  # RFC 9110: say which methods the resource has
            own = ("GET", "POST", "PUT", "DELETE")
            self.set_header("Allow", ", ".join(m for m in own if _implements(self, m)))
        reason = self._reason or "error"
        exc = kwargs.get("exc_info", (None, None, None))[1]
        message = getattr(exc, "log_message", None) or reason
        self.finish(json.dumps({"error": {"code": reason.replace(" ", ""), "message": message, "hint": ""}}))

    def body(self, model: Any | None = None) -> Any:
        return parse_json_body(self.request.body, model)

    def send(self, data: Any, status: int = 200) -> None:
        self.set_status(status)
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps(data, default=str))

    def send_model(self, model: type[m.BaseModel], data: Any, status: int = 200) -> None:
        """Render through the response model the OpenAPI document declares for this answer."""
        self.set_status(status)
        self.set_header("Content-Type", "application/json")
        self.finish(m.render_json(model, data))

    def queue_view(self, name: str) -> dict[str, Any]:
        return queue_view(*self.engine.reads.queue(name))


class WhoAmIHandler(BaseHandler):
    @web.authenticated
    async def get(self) -> None:
        self.send_model(m.WhoAmI, self.engine.reads.whoami(self.user_name))


class CapacityHandler(BaseHandler):
    @web.authenticated
    async def get(self) -> None:
        self.send_model(m.Capacity, self.engine.reads.capacity(self.user_name))


class QueuesHandler(BaseHandler):
    @web.authenticated
    async def get(self) -> None:
        states, free = self.engine.reads.queues(self.user_name)  # dispatch order
        self.send_model(m.QueuesPage, {"queues": [queue_view(q, free) for q in states]})


class QueueHandler(BaseHandler):
    @web.authenticated
    async def put(self, name: str) -> None:
        version = self.engine.admin.put_queue_as(self.user_name, name, lambda: self.body(QueueConfig))
        self.send_model(m.QueueWritten, {"queue": self.queue_view(name), "version": version})

    @web.authenticated
    async def delete(self, name: str) -> None:
        version = self.engine.admin.delete_as(self.user_name, "queues", name)
        self.send_model(m.Deleted, {"deleted": name, "version": version})


class QueuePauseHandler(BaseHandler):
    @web.authenticated
    async def post(self, name: str, action: str) -> None:
        version = self.engine.admin.set_paused_as(self.user_name, name, action == "pause")
        self.send_model(m.QueueWritten, {"queue": self.queue_view(name), "version": version})


class ProjectsHandler(BaseHandler):
    @web.authenticated
    async def get(self) -> None:
        self.send_model(m.ProjectsPage, self.engine.reads.projects(self.user_name))


class ProjectHandler(BaseHandler):
    @web.authenticated
    async def put(self, name: str) -> None:
        pr, version = self.engine.admin.put_project_as(self.user_name, name, lambda: self.body(ProjectConfig))
        self.send_model(m.ProjectWritten, {"project": pr.model_dump(mode="json"), "version": version})

    @web.authenticated
    async def delete(self, name: str) -> None:
        version = self.engine.admin.delete_as(self.user_name, "projects", name)
        self.send_model(m.Deleted, {"deleted": name, "version": version})


class PresetsHandler(BaseHandler):
    @web.authenticated
    async def get(self) -> None:
        self.send_model(m.PresetsPage, self.engine.reads.presets(self.user_name, self.get_argument("project", None)))


class PresetHandler(BaseHandler):
    @web.authenticated
    async def put(self, name: str) -> None:
        p, version = self.engine.admin.put_preset_as(self.user_name, name, lambda: self.body(PresetConfig))
        self.send_model(m.PresetWritten, {"preset": p.model_dump(mode="json"), "version": version})

    @web.authenticated
    async def delete(self, name: str) -> None:
        version = self.engine.admin.delete_as(self.user_name, "presets", name)
        self.send_model(m.Deleted, {"deleted": name, "version": version})


class ConfigHandler(BaseHandler):
    @web.authenticated
    async def get(self) -> None:
        self.send_model(m.ConfigView, self.engine.reads.config(self.user_name))

    @web.authenticated
    async def put(self) -> None:
        dry = _choice(self, "dry_run", "false", ("true", "false")) == "true"
        self.send_model(m.ConfigView, self.engine.admin.put_config_as(self.user_name, self._config_body, dry_run=dry))

    def _config_body(self) -> PlatformConfig:
        data = self.body()
        return parse_config(data.get("config", data) if isinstance(data, dict) else data)


class RunRequestMixin(BaseHandler):
    def run_request(self) -> RunRequest:
        """The request body, with `working_dir` and `script` resolved inside the Jupyter root directory."""
        req: RunRequest = self.body(RunRequest)
        root = Path(self.settings["server_root_dir"]).expanduser().resolve()
        update: dict[str, str] = {}
        if req.working_dir is not None:
            where = _under_root(root, req.working_dir)
            if where is None or not where.is_dir():
                problem = "is outside" if where is None else "is not a directory under"
                raise InvalidInput(
                    f"working_dir {req.working_dir!r} {problem} the Jupyter root directory ({root})",
                    "give a directory relative to the file browser's root (e.g. experiments) or absolute inside it",
                )
            update["working_dir"] = str(where)
        if req.script is not None:
            target = _under_root(root, req.script)
            if target is None or not target.is_file():
                raise InvalidInput(
                    f"script {req.script!r} is not a file under the Jupyter root directory",
                    "give a path relative to the file browser's root, e.g. experiments/train.py",
                )
            update["script"] = str(target)
        return req.model_copy(update=update) if update else req


def _under_root(root: Path, given: str) -> Path | None:
    """`given` (relative to the root, or absolute) resolved, links included; None when it is outside the root."""
    if "\0" in given:
        raise InvalidInput(f"path {given!r} contains a NUL byte", "give a path without NUL bytes")
    path = Path(given).expanduser()
    target = (path if path.is_absolute() else root / path).resolve()
    return target if target == root or root in target.parents else None


class PreviewHandler(RunRequestMixin):
    @web.authenticated
    async def post(self) -> None:
        req = self.run_request()
        self.send_model(m.Preview, self.engine.preview(self.user_name, req))


class RunsHandler(RunRequestMixin):
    @web.authenticated
    async def post(self) -> None:
        req = self.run_request()
        row = self.engine.submit(self.user_name, req)
        self.set_header("Location", f"{self.base_url}{API}/runs/{row['id']}")
        self.send_model(m.RunSummary, run_summary(row, self.engine.clock()), 201)

    @web.authenticated
    async def get(self) -> None:
        before = self.get_argument("before", None)
        rows, nxt = self.engine.reads.list_runs(
            self.user_name,
            project=self.get_argument("project", None),
            statuses=[s for arg in self.get_arguments("status") for s in arg.split(",") if s],
            queue=self.get_argument("queue", None),
            owner=self.get_argument("user", None),
            name_contains=self.get_argument("q", None),
            before_seq=_int_arg(self, "before", 0, 0, 2**62) if before else None,
            limit=_int_arg(self, "limit", 100, 1, 1000),
        )
        now = self.engine.reads.now()
        self.send_model(m.RunsPage, {"runs": [run_summary(r, now) for r in rows], "next_before": nxt})


class RunHandler(BaseHandler):
    @web.authenticated
    async def get(self, run_id: str) -> None:
        row = self.engine.get_visible(self.user_name, run_id)
        self.send_model(m.RunDetail, run_detail(row, self.engine.clock()))


class ExplainHandler(BaseHandler):
    @web.authenticated
    async def get(self, run_id: str) -> None:
        self.send_model(m.Explain, explain(self.engine, self.user_name, run_id))


class StopHandler(BaseHandler):
    @web.authenticated
    async def post(self, run_id: str) -> None:
        row = await self.engine.stop(self.user_name, run_id)
        self.send_model(m.RunDetail, run_detail(row, self.engine.clock()))


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
        row = self.engine.get_visible(self.user_name, run_id)
        reader = self.engine.artifacts
        fmt = _choice(self, "format", "sse", ("sse", "text"))
        follow = _choice(self, "follow", "true", ("true", "false")) == "true"
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
                final = self.engine.is_final(row["id"])  # read before the file: no line is missed
                offset = await self._send_lines(reader, run_id, offset, final)
                if final or not follow:
                    break
                await asyncio.sleep(self.poll_seconds)
            status = (self.engine.store.get_run(run_id) or row)["status"]
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


class EventsHandler(SSEHandler):
    """Status changes of every visible run as SSE; resumes from Last-Event-ID or `since`."""

    heartbeat_seconds = 15.0

    @web.authenticated
    async def get(self) -> None:
        user = self.user_name
        projects = set(self.engine.visible_projects(user))
        last_id = self.request.headers.get("Last-Event-ID")
        since, since_name = (last_id, "Last-Event-ID") if last_id else (self.get_argument("since", ""), "since")
        start = stream_position(since, since_name) if since else None
        limit = _int_arg(self, "limit", 0, 0, 10**9)
        heartbeat = float(_int_arg(self, "heartbeat", int(self.heartbeat_seconds), 1, 300))
        sub = self.engine.bus.subscribe()
        sent = 0
        self.start_stream()
        try:
            last, backlog = self.engine.reads.events_since(user, start, limit or 10_000)
            for ev in backlog:
                await self.emit(json.dumps(ev), id=ev["id"], event="status")
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
                if ev["id"] <= last or ev["project"] not in projects:
                    continue
                await self.emit(json.dumps(ev), id=ev["id"], event="status")
                last, sent = ev["id"], sent + 1
        except StreamClosedError:
            return
        finally:
            self.engine.bus.unsubscribe(sub)
        self.finish()


class OutputsHandler(BaseHandler):
    @web.authenticated
    async def get(self, run_id: str, path: str = "") -> None:
        self.engine.get_visible(self.user_name, run_id)
        reader = self.engine.artifacts
        missing = NotFound(f"output {path!r} not found in run {run_id}", "list outputs with GET runs/{id}/outputs")
        if not path or reader.is_dir(run_id, path):
            listed = reader.list_outputs(run_id, path)
            files = [{"path": f.path, "size": f.size, "modified": f.modified} for f in listed]
            self.send_model(m.Outputs, {"run_id": run_id, "outputs": files})
            return
        if is_internal(path):
            raise missing  # the platform's bookkeeping is not an output
        try:
            fh = reader.open_output(run_id, path)
        except FileNotFoundError:
            raise missing from None
        name = path.rstrip("/").rsplit("/", 1)[-1]
        self.raw_content_type = True
        # Always bytes to download: a run's .html or .svg served as such would run its script
        # in the Jupyter origin (with the user's session). The name is percent-encoded (RFC 6266).
        self.set_header("Content-Type", "application/octet-stream")
        self.set_header("X-Content-Type-Options", "nosniff")
        self.set_header("Content-Disposition", f"attachment; filename*=UTF-8''{quote(name, safe='')}")
        with fh:
            while chunk := fh.read(1 << 20):
                self.write(chunk)
                await self.flush()
        self.finish()


def _names_arg(h: BaseHandler, name: str) -> list[str] | None:
    names = [n for arg in h.get_arguments(name) for n in arg.split(",") if n]
    return names or None


class MetricsHandler(BaseHandler):
    """Metric curves of a run, downsampled on the server keeping extremes."""

    @web.authenticated
    async def get(self, run_id: str) -> None:
        max_points = _int_arg(self, "max_points", 2000, 4, 1_000_000)
        curves = await self.engine.run_metrics(self.user_name, run_id, _names_arg(self, "names"), max_points)
        self.send_model(m.Metrics, curves)


class CompareHandler(BaseHandler):
    @web.authenticated
    async def get(self) -> None:
        runs = _names_arg(self, "runs") or []
        max_points = _int_arg(self, "max_points", 500, 4, 100_000)
        result = await self.engine.compare_runs(self.user_name, runs, _names_arg(self, "metrics"), max_points)
        self.send_model(m.Compare, result)


MAX_STREAM_POSITION = 2**63 - 1
_DECIMAL = re.compile(r"[0-9]{1,19}")  # ASCII only: str.isdigit and int() also take '²' and '٣'


def stream_position(raw: str, name: str) -> int:
    """A resume position (log offset, event id): an ASCII decimal in 0..2**63-1, else InvalidInput naming `name`."""
    value = int(raw) if _DECIMAL.fullmatch(raw) else -1
    if not 0 <= value <= MAX_STREAM_POSITION:
        raise InvalidInput(
            f"{name} must be a decimal integer between 0 and {MAX_STREAM_POSITION}, got {raw[:40]!r}",
            "resume from an id the stream sent",
        )
    return value


def _choice(h: web.RequestHandler, name: str, default: str, allowed: tuple[str, ...]) -> str:
    value = h.get_argument(name, default)
    if value not in allowed:
        raise InvalidInput(f"{name} must be one of {', '.join(allowed)}, got {value[:40]!r}")
    return value


def _int_arg(h: web.RequestHandler, name: str, default: int, lo: int, hi: int) -> int:
    raw = h.get_argument(name, None)
    if raw is None:
        return default
    if not _DECIMAL.fullmatch(raw) or len(raw) > 19:  # int() would take "1_0" and other scripts' digits
        raise InvalidInput(f"{name} must be an integer between {lo} and {hi}, got {raw[:40]!r}")
    v = int(raw)
    if not lo <= v <= hi:
        raise InvalidInput(f"{name} must be between {lo} and {hi}, got {v}")
    return v


def _implements(h: web.RequestHandler, method: str) -> bool:
    name = method.lower()
    return getattr(type(h), name, None) is not getattr(web.RequestHandler, name)
