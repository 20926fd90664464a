"""Thin tornado handlers: parse, make one engine call, render.

Every handler is authenticated by jupyter_server and authorised by project role
in the engine/core. Domain errors become `{"error": {code, message, hint}}` in
`_handle_request_exception`, never a 500 for bad input.
"""

from __future__ import annotations

import asyncio
import json
import mimetypes
from pathlib import Path
from typing import Any

from jupyter_server.base.handlers import APIHandler, JupyterHandler
from tornado import web
from tornado.iostream import StreamClosedError

from ..auth import platform_username
from ..core.admission import order_queues
from ..core.artifacts import is_internal
from ..core.config import PresetConfig, ProjectConfig, QueueConfig, dump_config, parse_config
from ..core.errors import Forbidden, GpuPlatError, InvalidInput, NotFound
from ..core.policy import allowed_presets, allowed_queues, require_project, role_in
from ..core.request import RunRequest
from ..core.status import Status
from ..engine.compare import MAX_RUNS as MAX_COMPARE
from ..engine.compare import compare, metrics_of
from ..engine.engine import Engine
from ..engine.explain import explain
from ..executors.base import ArtifactReader
from . import models as m
from .errors import error_body, parse_json_body
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
            self.finish(json.dumps(error_body(e)))
            return
        super()._handle_request_exception(e)

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        # tornado's own errors (403 unauthenticated, 404, 405) in our error shape too.
        self.set_header("Content-Type", "application/json")
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
        self.send(m.render(model, data), status)

    def queue_view(self, name: str) -> dict[str, Any]:
        return queue_view(self.engine.queues[name], self.engine.free_gpus)

    def require_admin(self) -> str:
        user = self.user_name
        if not self.engine.is_admin(user):
            raise Forbidden(
                f"{user} is not a platform admin",
                f"platform admins: {', '.join(self.engine.cfg.admins) or 'none'}",
            )
        return user


class WhoAmIHandler(BaseHandler):
    @web.authenticated
    async def get(self) -> None:
        user, cfg = self.user_name, self.engine.cfg
        projects = [{"name": p, "role": role_in(cfg, user, p)} for p in self.engine.visible_projects(user)]
        self.send_model(m.WhoAmI, {"user": user, "platform_admin": self.engine.is_admin(user), "projects": projects})


class CapacityHandler(BaseHandler):
    @web.authenticated
    async def get(self) -> None:
        holders = {d: a.id for a in self.engine.active.values() for d in a.devices}
        visible = set(self.engine.visible_projects(self.user_name))
        devices = []
        for d in self.engine.devices:
            rid = holders.get(d.index)
            a = self.engine.active.get(rid) if rid else None
            devices.append(
                {
                    "index": d.index,
                    "name": d.name,
                    "memory_mb": d.memory_mb,
                    "uuid": d.uuid,
                    "declared": d.declared,
                    "in_use": rid is not None,
                    "run_id": rid if a is not None and a.project in visible else None,
                }
            )
        self.send_model(
            m.Capacity,
            {
                "executor": getattr(self.engine.executor, "name", type(self.engine.executor).__name__),
                "gpus": len(devices),
                "free_gpus": self.engine.free_gpus,
                "devices": devices,
            },
        )


class QueuesHandler(BaseHandler):
    @web.authenticated
    async def get(self) -> None:
        user, cfg = self.user_name, self.engine.cfg
        if self.engine.is_admin(user):
            names = [q.name for q in cfg.queues]
        else:
            usable: set[str] = set()
            for p in self.engine.visible_projects(user):
                pr = cfg.project(p)
                if pr is not None:
                    usable.update(allowed_queues(cfg, pr))
            names = [q.name for q in cfg.queues if q.name in usable]
        free = self.engine.free_gpus
        states = order_queues(self.engine.queues[n] for n in names if n in self.engine.queues)  # dispatch order
        self.send_model(m.QueuesPage, {"queues": [queue_view(q, free) for q in states]})


class QueueHandler(BaseHandler):
    @web.authenticated
    async def put(self, name: str) -> None:
        user = self.require_admin()
        q = self.body(QueueConfig)
        if q.name != name:
            raise InvalidInput(f"body name {q.name!r} does not match the URL's {name!r}")

        version = self.engine.put_config_item(user, "queues", q.model_dump(mode="json", exclude_defaults=True))
        self.send_model(m.QueueWritten, {"queue": self.queue_view(name), "version": version})

    @web.authenticated
    async def delete(self, name: str) -> None:
        version = self.engine.delete_config_item(self.require_admin(), "queues", name)
        self.send_model(m.Deleted, {"deleted": name, "version": version})


class QueuePauseHandler(BaseHandler):
    @web.authenticated
    async def post(self, name: str, action: str) -> None:
        user = self.require_admin()
        _require_named(self.engine.cfg.queue(name), "queue", name, [q.name for q in self.engine.cfg.queues])

        def change(body: dict[str, Any]) -> None:
            for x in body["queues"]:
                if x["name"] == name:
                    x["paused"] = action == "pause"

        version = self.engine.update_config(user, change, source=f"api:{action} {name}")
        self.send_model(m.QueueWritten, {"queue": self.queue_view(name), "version": version})


class ProjectsHandler(BaseHandler):
    @web.authenticated
    async def get(self) -> None:
        user, cfg = self.user_name, self.engine.cfg
        out = []
        for name in self.engine.visible_projects(user):
            pr = cfg.project(name)
            assert pr is not None
            d = pr.model_dump(mode="json")
            d["role"] = role_in(cfg, user, name)
            d["usable_queues"] = allowed_queues(cfg, pr)
            d["usable_presets"] = allowed_presets(cfg, pr)
            out.append(d)
        self.send_model(m.ProjectsPage, {"projects": out, "restrict_by_default": cfg.restrict_by_default})


# Restrictions stay with platform admins; project admins manage members and defaults.
_PLATFORM_ONLY = ("allowed_queues", "allowed_presets", "max_run_resources")


class ProjectHandler(BaseHandler):
    @web.authenticated
    async def put(self, name: str) -> None:
        user, cfg = self.user_name, self.engine.cfg
        pr = self.body(ProjectConfig)
        if pr.name != name:
            raise InvalidInput(f"body name {pr.name!r} does not match the URL's {name!r}")
        old = cfg.project(name)
        if not self.engine.is_admin(user):
            if old is None:
                raise Forbidden(f"{user} may not create projects", "platform admins create projects")
            require_project(cfg, user, name, "admin")
            for f in _PLATFORM_ONLY:
                if getattr(pr, f) != getattr(old, f):
                    raise Forbidden(
                        f"{f} of project {name} is set by platform admins",
                        "project admins may change members, description, default_queue and default_presets",
                    )
            outside = [q for q in [pr.default_queue] if q and q not in allowed_queues(cfg, old)]
            outside += [p for p in pr.default_presets if p not in allowed_presets(cfg, old)]
            if outside:
                raise Forbidden(
                    f"{', '.join(outside)} not allowed in project {name}",
                    f"queues: {', '.join(allowed_queues(cfg, old))}; presets: {', '.join(allowed_presets(cfg, old))}",
                )

        version = self.engine.put_config_item(user, "projects", pr.model_dump(mode="json", exclude_defaults=True))
        self.send_model(m.ProjectWritten, {"project": pr.model_dump(mode="json"), "version": version})

    @web.authenticated
    async def delete(self, name: str) -> None:
        version = self.engine.delete_config_item(self.require_admin(), "projects", name)
        self.send_model(m.Deleted, {"deleted": name, "version": version})


class PresetsHandler(BaseHandler):
    @web.authenticated
    async def get(self) -> None:
        user, cfg = self.user_name, self.engine.cfg
        project = self.get_argument("project", None)
        if project:
            pr = require_project(cfg, user, project, "viewer")
            names = set(allowed_presets(cfg, pr)) | set(pr.default_presets)
        elif self.engine.is_admin(user):
            names = {p.name for p in cfg.presets}
        else:
            names = set()
            for p in self.engine.visible_projects(user):
                pr2 = cfg.project(p)
                if pr2 is not None:
                    names |= set(allowed_presets(cfg, pr2))
        self.send_model(m.PresetsPage, {"presets": [p.model_dump(mode="json") for p in cfg.presets if p.name in names]})


class PresetHandler(BaseHandler):
    @web.authenticated
    async def put(self, name: str) -> None:
        user = self.require_admin()
        p = self.body(PresetConfig)
        if p.name != name:
            raise InvalidInput(f"body name {p.name!r} does not match the URL's {name!r}")

        version = self.engine.put_config_item(user, "presets", p.model_dump(mode="json", exclude_unset=True))
        self.send_model(m.PresetWritten, {"preset": p.model_dump(mode="json"), "version": version})

    @web.authenticated
    async def delete(self, name: str) -> None:
        version = self.engine.delete_config_item(self.require_admin(), "presets", name)
        self.send_model(m.Deleted, {"deleted": name, "version": version})


class ConfigHandler(BaseHandler):
    @web.authenticated
    async def get(self) -> None:
        self.require_admin()
        self.send_model(m.ConfigView, {"config": dump_config(self.engine.cfg), "version": self.engine.config_version})

    @web.authenticated
    async def put(self) -> None:
        user = self.require_admin()
        data = self.body()
        cfg = parse_config(data.get("config", data) if isinstance(data, dict) else data)
        dry = self.get_argument("dry_run", "false") == "true"
        version = self.engine.config_version if dry else self.engine.apply_config(cfg, source="api", by=user)
        self.send_model(m.ConfigView, {"config": dump_config(cfg), "version": version, "applied": not dry})


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
        user = self.user_name
        projects = self.engine.visible_projects(user)
        project = self.get_argument("project", None)
        if project:
            if project not in projects:
                raise NotFound(f"project {project!r} not found", f"your projects: {', '.join(projects) or 'none'}")
            projects = [project]
        statuses = [s for arg in self.get_arguments("status") for s in arg.split(",") if s]
        bad = [s for s in statuses if s not in Status.__members__.values()]
        if bad:
            raise InvalidInput(f"unknown status {bad[0]!r}", f"statuses: {', '.join(s.value for s in Status)}")
        limit = _int_arg(self, "limit", 100, 1, 1000)
        before = self.get_argument("before", None)
        rows = self.engine.store.list_runs(
            projects,
            status=statuses,
            queue=self.get_argument("queue", None),
            user=self.get_argument("user", None),
            name_contains=self.get_argument("q", None),
            before_seq=_int_arg(self, "before", 0, 0, 2**62) if before else None,
            limit=limit,
        )
        now = self.engine.clock()
        nxt = rows[-1]["seq"] if len(rows) == limit else None
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
    `format=text` returns the plain log file instead.
    """

    poll_seconds = 0.05

    @web.authenticated
    async def get(self, run_id: str) -> None:
        row = self.engine.get_visible(self.user_name, run_id)
        reader = self.engine.artifacts
        reader.log_size(run_id)  # a log that links out of the run is refused here, before the stream starts
        if self.get_argument("format", "sse") == "text":
            self.raw_content_type = True
            self.set_header("Content-Type", "text/plain; charset=utf-8")
            self.finish(reader.read_log(run_id))
            return
        follow = self.get_argument("follow", "true") != "false"
        offset = _int_arg(self, "offset", 0, 0, 2**62)
        last = self.request.headers.get("Last-Event-ID")
        if last and last.isdigit():
            offset = int(last)
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
        since = self.request.headers.get("Last-Event-ID") or self.get_argument("since", "")
        limit = _int_arg(self, "limit", 0, 0, 10**9)
        heartbeat = float(_int_arg(self, "heartbeat", int(self.heartbeat_seconds), 1, 300))
        sub = self.engine.bus.subscribe()
        sent = 0
        self.start_stream()
        try:
            last = int(since) if since.isdigit() else self.engine.store.last_event_id()
            for ev in self.engine.store.events_since(last, sorted(projects), limit=limit or 10_000):
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
        ctype = mimetypes.guess_type(name)[0] or "application/octet-stream"
        self.raw_content_type = True
        self.set_header("Content-Type", ctype)
        self.set_header("Content-Disposition", f'attachment; filename="{name}"')
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
        self.engine.get_visible(self.user_name, run_id)
        # Answer with all the run has written: a stat when nothing is new, and it also covers
        # a run that just ended whose final indexing has not finished yet.
        await self.engine.index_metrics(run_id)
        max_points = _int_arg(self, "max_points", 2000, 4, 1_000_000)
        curves = metrics_of(self.engine, self.user_name, run_id, _names_arg(self, "names"), max_points)
        self.send_model(m.Metrics, curves)


class CompareHandler(BaseHandler):
    @web.authenticated
    async def get(self) -> None:
        runs = _names_arg(self, "runs") or []
        for rid in runs[:MAX_COMPARE]:
            await self.engine.index_metrics(rid)
        max_points = _int_arg(self, "max_points", 500, 4, 100_000)
        self.send_model(m.Compare, compare(self.engine, self.user_name, runs, _names_arg(self, "metrics"), max_points))


def _require_named(obj: object, kind: str, name: str, known: list[str]) -> None:
    if obj is None:
        raise NotFound(f"{kind} {name!r} not found", f"{kind}s: {', '.join(known) or 'none'}")


def _int_arg(h: web.RequestHandler, name: str, default: int, lo: int, hi: int) -> int:
    raw = h.get_argument(name, None)
    if raw is None:
        return default
    try:
        v = int(raw)
    except ValueError:
        raise InvalidInput(f"{name} must be an integer, got {raw!r}") from None
    if not lo <= v <= hi:
        raise InvalidInput(f"{name} must be between {lo} and {hi}, got {v}")
    return v
