"""Thin tornado handlers: parse, make one engine call, render.

Every handler is authenticated by jupyter_server and authorised by project role
in the engine/core. Domain errors become `{"error": {code, message, hint}}` in
`_handle_request_exception`, never a 500 for bad input.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast
from urllib.parse import quote

from jupyter_server.base.handlers import APIHandler, JupyterHandler
from tornado import web

from ..core.admission import QueueState
from ..core.artifacts import OUTPUTS_INDEX, is_internal
from ..core.config import PlatformConfig, PresetConfig, ProjectConfig, QueueConfig, parse_config
from ..core.errors import GpuPlatError, InvalidInput, NotFound, Unavailable
from ..core.notes import run_notes
from ..core.outputs import logged_names, one_per_file
from ..core.request import RunRequest
from ..engine.engine import Engine
from ..engine.explain import explain
from .args import choice, int_arg, names_arg
from .auth import platform_username
from .errors import error_body, parse_json_body
from .openapi import API
from .schemas import models as m
from .views import queue_view, run_detail, run_summary, with_sweep

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
            own = ("GET", "POST", "PUT", "PATCH", "DELETE")
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

    def summary(self, row: dict[str, Any]) -> dict[str, Any]:
        waiting = self.engine.reads.waiting(row)
        out = run_summary(row, self.engine.reads.now(), self.engine.reads.session_view(row["id"]), waiting)
        out["eta"], out["eta_unknown"] = self.engine.reads.eta(row)
        out["actions"] = self.engine.reads.actions(self.user_name, row)
        out["gpu_usage"] = self.engine.reads.gpu_usage_listed(row)
        return with_sweep(out, self.engine.reads.sweep_view(row))

    def detail(self, row: dict[str, Any]) -> dict[str, Any]:
        waiting = self.engine.reads.waiting(row)
        out = run_detail(row, self.engine.reads.now(), self.engine.reads.session_view(row["id"]), waiting)
        out["eta"], out["eta_unknown"] = self.engine.reads.eta(row)
        out["gpu_usage"] = self.engine.reads.gpu_usage(row)
        out["actions"] = self.engine.reads.actions(self.user_name, row)
        return with_sweep(out, self.engine.reads.sweep_view(row))

    def queue_view(self, name: str) -> dict[str, Any]:
        q, free = self.engine.reads.queue(name)
        return self.queue_view_of(q, free)

    def queue_view_of(self, q: QueueState, free: int | None) -> dict[str, Any]:
        reads = self.engine.reads
        return {
            **queue_view(q, free, reads.pending_runs(self.user_name, q), reads.free_by_flavor),
            "actions": reads.queue_actions(self.user_name, q),
        }


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
        views = [self.queue_view_of(q, free) for q in states]
        self.send_model(m.QueuesPage, {"queues": views})


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
        pr, version = self.engine.admin.put_project_as(self.user_name, name, self._project_body)
        self.send_model(m.ProjectWritten, {"project": pr.model_dump(mode="json"), "version": version})

    def _project_body(self) -> ProjectConfig:
        data = self.body()
        if isinstance(data, dict):
            # A project read from GET projects, its view fields taken off as before `may_submit` came, is written
            # back unchanged: that newer view-only field is dropped (every other unknown field is still refused).
            data.pop("may_submit", None)
        return cast(ProjectConfig, parse_json_body(json.dumps(data).encode(), ProjectConfig))

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
        dry = choice(self, "dry_run", "false", ("true", "false")) == "true"
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
        if req.notebook is not None:
            parts = req.notebook.split("/")
            if req.notebook.startswith("/") or ".." in parts or "" in parts or _under_root(root, req.notebook) is None:
                raise InvalidInput(
                    f"notebook {req.notebook!r} is not a path relative to the Jupyter root",
                    "give the notebook's path as the file browser shows it, e.g. experiments/explore.ipynb",
                )
        if req.script is not None:
            target = _under_root(root, req.script)
            if target is None or not target.is_file():
                raise InvalidInput(
                    f"script {req.script!r} is not a file under the Jupyter root directory",
                    "give a path relative to the file browser's root, e.g. experiments/train.py",
                )
            update["script"] = str(target)
        return req.model_copy(update=update) if update else req


def _kind_arg(h: BaseHandler) -> str | None:
    kind = h.get_argument("kind", None)
    return None if kind is None else choice(h, "kind", kind, ("job", "session", "sweep"))


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
        out = self.engine.preview(self.user_name, req)
        self.send_model(m.Preview, out)


class RunsHandler(RunRequestMixin):
    @web.authenticated
    async def post(self) -> None:
        req = self.run_request()
        row = self.engine.submit(self.user_name, req)
        self.set_header("Location", f"{self.base_url}{API}/runs/{row['id']}")
        out = self.summary(row)
        out["notes"] = run_notes(int(row.get("gpu") or 0)) if row.get("kind") != "sweep" else []
        self.send_model(m.RunSummary, out, 201)

    @web.authenticated
    async def get(self) -> None:
        before = self.get_argument("before", None)
        rows, nxt = self.engine.reads.list_runs(
            self.user_name,
            project=self.get_argument("project", None),
            statuses=[s for arg in self.get_arguments("status") for s in arg.split(",") if s],
            phases=names_arg(self, "phase"),
            queue=self.get_argument("queue", None),
            owner=self.get_argument("user", None),
            name_contains=self.get_argument("q", None),
            kind=_kind_arg(self),
            parent=self.get_argument("parent", None),
            notebook=self.get_argument("notebook", None),
            before_seq=int_arg(self, "before", 0, 0, 2**62) if before else None,
            limit=int_arg(self, "limit", 100, 1, 1000),
        )
        self.send_model(m.RunsPage, {"runs": [self.summary(r) for r in rows], "next_before": nxt})


class SessionsHandler(BaseHandler):
    @web.authenticated
    async def get(self) -> None:
        rows = self.engine.reads.user_sessions(self.user_name, self.get_argument("notebook", None))
        self.send_model(m.SessionsPage, {"sessions": [self.summary(r) for r in rows]})


class KeepAliveHandler(BaseHandler):
    @web.authenticated
    async def post(self, run_id: str) -> None:
        self.send_model(m.RunSummary, self.summary(self.engine.keepalive(self.user_name, run_id)))


class KernelHandler(BaseHandler):
    """The kernel of a session, for the Jupyter server that runs it (the provisioner's HTTP form)."""

    @web.authenticated
    async def get(self, run_id: str) -> None:
        info = await self.engine.kernel_connection(self.user_name, run_id)
        self.send_model(m.KernelConnection, {"ready": info is not None, "connection": info})

    @web.authenticated
    async def post(self, run_id: str) -> None:
        report = self.body(m.KernelReport)
        self.engine.session_report(self.user_name, run_id, report.event, report.kernel_id)
        self.send_model(m.RunSummary, self.summary(self.engine.reads.get_visible(self.user_name, run_id)))


class RunHandler(BaseHandler):
    @web.authenticated
    async def get(self, run_id: str) -> None:
        row = self.engine.reads.get_visible(self.user_name, run_id)
        self.send_model(m.RunDetail, self.detail(row))

    @web.authenticated
    async def patch(self, run_id: str) -> None:
        change = self.body(m.SweepChange)
        if change.notebook is not None:
            row = self.engine.move_session(self.user_name, run_id, change.notebook)
        if change.concurrency is not None or change.paused is not None:
            row = self.engine.update_sweep(self.user_name, run_id, change.concurrency, change.paused)
        self.send_model(m.RunDetail, self.detail(row))


class ExplainHandler(BaseHandler):
    @web.authenticated
    async def get(self, run_id: str) -> None:
        self.send_model(m.Explain, explain(self.engine, self.user_name, run_id))


class StopHandler(BaseHandler):
    @web.authenticated
    async def post(self, run_id: str) -> None:
        row = await self.engine.stop(self.user_name, run_id)
        self.send_model(m.RunDetail, self.detail(row))


class OutputsHandler(BaseHandler):
    @web.authenticated
    async def get(self, run_id: str, path: str = "") -> None:
        self.engine.reads.get_visible(self.user_name, run_id)
        reader = self.engine.reads.artifacts
        missing = NotFound(f"output {path!r} not found in run {run_id}", "list outputs with GET runs/{id}/outputs")
        if not path or reader.is_dir(run_id, path):
            listed = reader.list_outputs(run_id, path)
            files = [{"path": f.path, "size": f.size, "modified": f.modified} for f in listed]
            # a file kept with log_output from inside the run's directory: listed once, as its copy
            files = one_per_file(files, logged_names(reader.read_bookkeeping(run_id, OUTPUTS_INDEX)))
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


class MetricsHandler(BaseHandler):
    """Metric curves of a run, downsampled on the server keeping extremes."""

    @web.authenticated
    async def get(self, run_id: str) -> None:
        max_points = int_arg(self, "max_points", 2000, 4, 1_000_000)
        curves = await self.engine.run_metrics(self.user_name, run_id, names_arg(self, "names"), max_points)
        self.send_model(m.Metrics, curves)


class CompareHandler(BaseHandler):
    @web.authenticated
    async def get(self) -> None:
        runs = names_arg(self, "runs") or []
        max_points = int_arg(self, "max_points", 500, 4, 100_000)
        result = await self.engine.compare_runs(self.user_name, runs, names_arg(self, "metrics"), max_points)
        self.send_model(m.Compare, result)


class SweepCompareHandler(BaseHandler):
    @web.authenticated
    async def get(self, run_id: str) -> None:
        result = await self.engine.compare_sweep(
            self.user_name,
            run_id,
            self.get_argument("metric", None),
            int_arg(self, "top", 5, 0, 50),
            int_arg(self, "max_points", 500, 4, 100_000),
        )
        self.send_model(m.SweepCompare, result)


def _implements(h: web.RequestHandler, method: str) -> bool:
    name = method.lower()
    return getattr(type(h), name, None) is not getattr(web.RequestHandler, name)
