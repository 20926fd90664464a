"""The Python client of the platform, for kernels, scripts and the CLI.

    from jupyter_gpuplat.client import Client
    gp = Client()                       # finds the server
    run = gp.submit("team-a", script="train.py", presets=["single-gpu"])
    gp.explain(run["id"])["message"]
    for line in gp.logs(run["id"]): print(line)
    gp.resubmit(run["id"], params={"lr": 0.03})  # the same request again, with edits
    lease = gp.start_session("team-a")  # a GPU session: a lease and a notebook whose kernel runs in it

Finding the server: explicit `url`/`token`; else GPUPLAT_URL/GPUPLAT_TOKEN; else
the Jupyter server that started this kernel (its pid is our parent's); else any
running Jupyter server with the extension (Jupyter's runtime files). Every
refusal raises `GpuPlatAPIError` carrying the service's message and hint (and is also the core
error of its status: `NotFound`, `Forbidden`, ...; `client/http/errors.py`). HTTP itself is the
client room's sync face (`client/http/sync.py`).
"""

from __future__ import annotations

import builtins
import json
import os
import posixpath
import time
import urllib.parse
from collections.abc import Iterator, Sequence
from typing import Any

from ..core.request import RunRequest
from ..core.status import FINAL
from .http.errors import GpuPlatAPIError
from .http.sync import SyncHTTP
from .runedits import parse_params, resubmit_body

API = "gpuplat/api/"

__all__ = ["FINAL", "Client", "GpuPlatAPIError", "parse_params"]


def _servers() -> builtins.list[dict[str, Any]]:
    from jupyter_server.serverapp import list_running_servers

    servers = list(list_running_servers())
    parent = os.getppid()
    # The server that started this kernel first: its pid is our parent's.
    return sorted(servers, key=lambda s: s.get("pid") != parent)


class Client:
    def __init__(self, url: str | None = None, token: str | None = None, *, timeout: float = 30.0) -> None:
        self.timeout = timeout
        self.http = SyncHTTP()
        self.root_dir: str | None = None
        url = url or os.environ.get("GPUPLAT_URL")
        token = token if token is not None else os.environ.get("GPUPLAT_TOKEN")
        if url:
            self._use(url, token or "")
            return
        for info in _servers():
            self._use(info["url"], token or info.get("token", ""))
            try:
                if self.http.send("GET", self.base + "whoami", timeout=3, where=self.base).status == 200:
                    self.root_dir = info.get("root_dir")
                    return
            except GpuPlatAPIError:
                continue
        raise GpuPlatAPIError(
            "no running Jupyter server with jupyter-gpuplat found",
            "start one with `gpuplat lab`, or pass url and token (or set GPUPLAT_URL and GPUPLAT_TOKEN)",
            code="NoServer",
        )

    def _use(self, url: str, token: str) -> None:
        self.url = url.rstrip("/") + "/"
        self.base = self.url + API
        self.http.authorize(token)

    @property
    def session(self) -> Any:
        """The sync face's requests session (`client.session.close()` closes its connections)."""
        return self.http.session

    # ---- transport ----------------------------------------------------------
    def request(self, method: str, path: str, body: Any = None, **params: Any) -> Any:
        params = {k: (",".join(v) if isinstance(v, (list, tuple)) else v) for k, v in params.items() if v is not None}
        return self.http.request(
            method, self.base + path, body=body, params=params, timeout=self.timeout, where=self.base
        )

    def stream(self, path: str, **params: Any) -> Iterator[tuple[str, str, str | None]]:
        """Server-Sent Events as (event, data, id); keep-alives too (`core.sse.KEEP_ALIVE`)."""
        params = {k: v for k, v in params.items() if v is not None}
        return self.http.stream(self.base + path, params=params, timeout=self.timeout, where=self.base)

    # ---- runs -----------------------------------------------------------------
    def submit(
        self,
        project: str,
        command: Sequence[str] | str | None = None,
        *,
        script: str | None = None,
        code: str | None = None,
        args: Sequence[str] = (),
        presets: Sequence[str] = (),
        queue: str | None = None,
        gpus: int | None = None,
        resources: dict[str, Any] | None = None,
        env: dict[str, str] | None = None,
        name: str | None = None,
        params: dict[str, Any] | None = None,
        matrix: dict[str, Any] | None = None,
        **fields: Any,
    ) -> dict[str, Any]:
        """Submit a run; returns at once with its record (status `queued`).

        With `matrix` (`{"kind": "grid", "params": {"lr": {"values": [0.1, 0.01]}}, "concurrency": 2}`)
        it is a sweep: the parent's record (`kind: "sweep"`, `children: {total, by_status}`) whose
        children are this run once per params.
        """
        body = dict(locals())
        del body["self"]
        return self.request("POST", "runs", self._body(**body))

    def preview(self, project: str, command: Sequence[str] | str | None = None, **kw: Any) -> dict[str, Any]:
        """The resolved spec, which layer set each field, and the policy verdict; creates nothing."""
        return self.request("POST", "runs/preview", self._body(project=project, command=command, **kw))

    def _body(self, **kw: Any) -> dict[str, Any]:
        extra = kw.pop("fields", None) or {}
        gpus = kw.pop("gpus", None)
        if gpus is not None:
            kw["resources"] = {**(kw.get("resources") or {}), "gpu": gpus}
        if kw.get("script") and self.root_dir and os.path.isabs(kw["script"]):
            kw["script"] = os.path.relpath(kw["script"], self.root_dir)
        body = {k: (list(v) if isinstance(v, tuple) else v) for k, v in {**kw, **extra}.items()}
        body = {k: v for k, v in body.items() if v not in (None, [], (), {})}
        # The service's own schema: a malformed request fails here, before any network call.
        return RunRequest.model_validate(body).model_dump(mode="json", exclude_unset=True)

    def resubmit(self, run_id: str, **edits: Any) -> dict[str, Any]:
        """Submit a run again, as it was requested (presets, project, queue, params, what to run), with
        `edits` (`params={"lr": 0.03}` merges, `name=`, `presets=`, `gpus=`, `queue=None` drops a field):
        the policy and the project's defaults apply anew. Returns the new run's record."""
        return self.request("POST", "runs", self.resubmit_body(run_id, **edits))

    def resubmit_body(self, run_id: str, **edits: Any) -> dict[str, Any]:
        """The request `resubmit` would send (for a preview: `request("POST", "runs/preview", body)`)."""
        return self._body(**resubmit_body(self.get(run_id), edits))

    def get(self, run_id: str) -> dict[str, Any]:
        return self.request("GET", f"runs/{run_id}")

    def list(
        self, project: str | None = None, status: str | Sequence[str] | None = None, **filters: Any
    ) -> builtins.list[dict[str, Any]]:
        return self.request("GET", "runs", project=project, status=status, **filters)["runs"]

    def sweep_children(
        self, sweep_id: str, status: str | Sequence[str] | None = None, limit: int | None = None
    ) -> builtins.list[dict[str, Any]]:
        """A sweep's children (each with its `params`), optionally of some statuses: every page, or `limit`."""
        out: builtins.list[dict[str, Any]] = []
        before = None
        while limit is None or len(out) < limit:
            page_size = 1000 if limit is None else min(1000, limit - len(out))
            page = self.request("GET", "runs", parent=sweep_id, status=status, limit=page_size, before=before)
            out += page["runs"]
            before = page.get("next_before")
            if before is None or not page["runs"]:
                break
        return out

    def update_sweep(self, sweep_id: str, concurrency: int | None = None, paused: bool | None = None) -> dict[str, Any]:
        """Change a running sweep: how many children run at once, or pause/resume dispatching; the parent."""
        body = {k: v for k, v in (("concurrency", concurrency), ("paused", paused)) if v is not None}
        if not body:
            raise GpuPlatAPIError("nothing to change", "give concurrency=N or paused=True/False", code="InvalidInput")
        return self.request("PATCH", f"runs/{sweep_id}", body)

    def explain(self, run_id: str) -> dict[str, Any]:
        return self.request("GET", f"runs/{run_id}/explain")

    def stop(self, run_id: str) -> dict[str, Any]:
        return self.request("POST", f"runs/{run_id}/stop")

    def wait(self, run_id: str, timeout: float | None = None, statuses: Sequence[str] = tuple(FINAL)) -> dict[str, Any]:
        """Block until the run reaches one of `statuses` (default: it ended), following the event stream."""
        import time

        deadline = None if timeout is None else time.monotonic() + timeout
        run = self.get(run_id)
        while run["status"] not in statuses:
            since = max((e["id"] for e in run["timeline"]), default=0)
            for ev in self.events(since=since, stop_after=deadline):
                if ev["run_id"] == run_id and ev["status"] in statuses:
                    break
            run = self.get(run_id)
            if deadline is not None and time.monotonic() > deadline and run["status"] not in statuses:
                raise TimeoutError(f"run {run_id} is still {run['status']} after {timeout}s")
        return run

    def logs(self, run_id: str, follow: bool = True, offset: int = 0) -> Iterator[str]:
        """The run's log lines from byte `offset`; with follow, until the run ends."""
        for event, data, _ in self.stream(
            f"runs/{run_id}/logs", follow="true" if follow else "false", offset=offset or None
        ):
            if event == "keep-alive":
                continue
            if event == "end":
                return
            yield data

    def outputs(self, run_id: str) -> builtins.list[dict[str, Any]]:
        return self.request("GET", f"runs/{run_id}/outputs")["outputs"]

    def download(self, run_id: str, path: str) -> bytes:
        return self.request("GET", f"runs/{run_id}/outputs/{path}")

    def metrics(self, run_id: str, names: Sequence[str] | None = None, max_points: int = 2000) -> dict[str, Any]:
        return self.request("GET", f"runs/{run_id}/metrics", names=names, max_points=max_points)

    def compare(
        self, runs: Sequence[str], metrics: Sequence[str] | None = None, max_points: int = 500
    ) -> dict[str, Any]:
        return self.request("GET", "compare", runs=list(runs), metrics=metrics, max_points=max_points)

    def compare_sweep(
        self, sweep_id: str, *, metric: str | None = None, top: int = 5, max_points: int = 500
    ) -> dict[str, Any]:
        """A sweep's children against its objective (or `metric`), best first, and the curves of the `top` best."""
        return self.request("GET", f"runs/{sweep_id}/compare", metric=metric, top=top, max_points=max_points)

    def events(
        self, since: int | None = None, stop_after: float | None = None, *, eta: bool = False
    ) -> Iterator[dict[str, Any]]:
        """Status changes of the runs you can see, live (replayed from `since`).

        With `eta`, also each start estimate that moved, one per run, marked `"event": "eta"` (status
        changes have no `event` key): `{"event": "eta", "run_id", "project", "eta", "eta_unknown"}`.
        Estimates have no id: a stream reopened `since` an id gets the status changes again, not them.
        """
        import time

        heartbeat = None if stop_after is None else max(1, min(15, int(stop_after - time.monotonic()) + 1))
        for event, data, _ in self.stream("events", since=since, heartbeat=heartbeat):
            if event == "status":
                yield json.loads(data)
            elif event == "eta" and eta:
                for run in json.loads(data)["runs"]:
                    yield {"event": "eta", **run}
            if stop_after is not None and time.monotonic() > stop_after:
                return

    # ---- GPU sessions -------------------------------------------------------------
    def start_session(
        self, project: str | None = None, preset: str | None = None, notebook: str | None = None
    ) -> dict[str, Any]:
        """Lease a GPU session; returns its run record (`kind: "session"`) at once, queued or admitted.

        `preset`: a session preset of the project (default: its first). `notebook`: the notebook,
        relative to the Jupyter root (or an absolute path under it), whose kernel runs in the lease;
        it is created on the preset's kernelspec when missing. None: a new
        `gpu-session-<time>.ipynb` in the current directory (where that lies under the root).
        Opening the notebook in JupyterLab attaches its kernel to the lease.
        """
        project = project or self.default_project()
        preset, offered = self._session_preset(project, preset)
        create = notebook is None
        if notebook is None:
            notebook = self._new_notebook_path()
        else:
            notebook = self.api_path(notebook)
            create = not self._contents_exist(notebook)
        # Looked up before the lease: a notebook nobody can open on the lease's kernel is no use. A preset
        # the project does not offer goes to the service first: its refusal names the allowed values.
        spec = self.session_kernelspec(project, preset) if create and offered else None
        run = self.request("POST", "runs", {"project": project, "presets": [preset], "notebook": notebook})
        if create:
            try:
                self._create_notebook(notebook, spec or self.session_kernelspec(project, preset), run)
            except GpuPlatAPIError:
                self.stop(run["id"])  # no lease without its notebook
                raise
        return run

    def sessions(self, notebook: str | None = None) -> builtins.list[dict[str, Any]]:
        """Your unfinished GPU sessions, newest first (of one notebook, relative to the Jupyter root)."""
        return self.request("GET", "sessions", notebook=notebook)["sessions"]

    def keepalive(self, run_id: str) -> dict[str, Any]:
        """Keep a session: its idle clock starts again."""
        return self.request("POST", f"runs/{run_id}/keepalive")

    def session_kernelspec(self, project: str, preset: str) -> dict[str, Any]:
        """The Jupyter kernelspec whose kernels run in `preset` sessions of `project` (GET /api/kernelspecs)."""
        specs = self.jupyter("GET", "kernelspecs").get("kernelspecs") or {}
        found = []
        for name, entry in specs.items():
            meta = ((entry.get("spec") or {}).get("metadata") or {}).get("gpuplat") or {}
            if meta:
                found.append(name)
                if meta.get("preset") == preset and meta.get("project") == project:
                    return {"name": name, **entry["spec"]}
        raise GpuPlatAPIError(
            f"this Jupyter server offers no kernel for preset {preset!r} in project {project!r}",
            f"GPU session kernels here: {', '.join(sorted(found)) or 'none'} "
            "(they are offered for the session presets the server's owner may use)",
            status=404,
            code="NoSessionKernel",
        )

    def default_project(self) -> str:
        """GPUPLAT_PROJECT, else your first project where you may submit."""
        env = os.environ.get("GPUPLAT_PROJECT")
        if env:
            return env
        me = self.whoami()
        for p in me["projects"]:
            if p["may_submit"]:  # the server's answer (core/policy), not a copy of the role rule
                return str(p["name"])
        raise GpuPlatAPIError(f"{me['user']} may submit to no project", "ask a project admin to add you as a member")

    def api_path(self, path: str) -> str:
        """A path as Jupyter names it: relative to the root, '/'-separated (an absolute one must lie under the root)."""
        root = self.find_root_dir() if os.path.isabs(path) else None
        rel = os.path.relpath(path, root) if root else path
        rel = posixpath.normpath(rel.replace(os.sep, "/"))
        if rel == ".." or rel.startswith("../") or os.path.isabs(rel):
            raise GpuPlatAPIError(
                f"{path} is not under the Jupyter root ({root or 'unknown'})",
                "give a path relative to the Jupyter root",
                code="InvalidInput",
            )
        return rel

    def here(self) -> str:
        """The current directory relative to the Jupyter root; "" (the root) when not under it or not known."""
        try:
            rel = self.api_path(os.getcwd())
        except GpuPlatAPIError:
            return ""
        return "" if rel == "." else rel

    def find_root_dir(self) -> str | None:
        """The Jupyter root of this client's server: known when it was found, else from Jupyter's runtime files."""
        if self.root_dir is None:
            want = urllib.parse.urlsplit(self.url)
            for info in _servers():
                got = urllib.parse.urlsplit(str(info.get("url", "")))
                if (got.port, got.path.rstrip("/")) == (want.port, want.path.rstrip("/")):
                    self.root_dir = info.get("root_dir")
                    break
        return self.root_dir

    def jupyter(self, method: str, path: str, body: Any = None, **params: Any) -> Any:
        """A call to the Jupyter server's own REST API (`/api/<path>`), errors as GpuPlatAPIError."""
        url = self.url + "api/" + urllib.parse.quote(path)
        r = self.http.send(method, url, body=body, params=params or None, timeout=self.timeout, where=self.url)
        if r.status >= 400:  # Jupyter's own error shape, not the platform's
            try:
                message = str(r.json().get("message") or r.reason)
            except (ValueError, AttributeError):
                message = r.body.decode("utf-8", "replace")[:300]
            raise GpuPlatAPIError(f"Jupyter {method} /api/{path}: {message}", status=r.status, code="JupyterAPI")
        return r.value(self.url)

    def _session_preset(self, project: str, preset: str | None) -> tuple[str, bool]:
        """`preset` checked to be a session preset, or the project's first; and whether the project offers it."""
        kinds = {p["name"]: p.get("kind") for p in self.presets(project)}
        sessions = [name for name, kind in kinds.items() if kind == "session"]
        if preset is not None:
            if kinds.get(preset, "session") != "session":
                raise GpuPlatAPIError(
                    f"preset {preset} is a {kinds[preset] or 'job'} preset, not a GPU session",
                    f"session presets in {project}: {', '.join(sessions) or 'none'}",
                    status=422,
                    code="NotASessionPreset",
                )
            return preset, preset in kinds
        if not sessions:
            raise GpuPlatAPIError(
                f"project {project} may use no GPU session preset",
                "ask a platform admin for a preset of kind session in this project",
                code="NoSessionPreset",
            )
        return sessions[0], True

    def _contents_exist(self, path: str) -> bool:
        try:
            self.jupyter("GET", f"contents/{path}", content=0)
        except GpuPlatAPIError as exc:
            if exc.status == 404:
                return False
            raise
        return True

    def _new_notebook_path(self) -> str:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        here = self.here()
        for n in range(100):
            name = f"gpu-session-{stamp}{f'-{n}' if n else ''}.ipynb"
            path = posixpath.join(here, name) if here else name
            if not self._contents_exist(path):
                return path
        raise GpuPlatAPIError(f"too many gpu-session-{stamp}*.ipynb notebooks", "give a notebook path")

    def _create_notebook(self, path: str, spec: dict[str, Any], run: dict[str, Any]) -> None:
        parts = path.split("/")[:-1]
        for i in range(1, len(parts) + 1):  # the directories it names, as a file manager would make them
            folder = "/".join(parts[:i])
            if not self._contents_exist(folder):
                self.jupyter("PUT", f"contents/{folder}", {"type": "directory"})
        self.jupyter(
            "PUT", f"contents/{path}", {"type": "notebook", "format": "json", "content": session_notebook(spec, run)}
        )

    # ---- platform ---------------------------------------------------------------
    def whoami(self) -> dict[str, Any]:
        return self.request("GET", "whoami")

    def queues(self) -> builtins.list[dict[str, Any]]:
        return self.request("GET", "queues")["queues"]

    def presets(self, project: str | None = None) -> builtins.list[dict[str, Any]]:
        return self.request("GET", "presets", project=project)["presets"]

    def projects(self) -> builtins.list[dict[str, Any]]:
        return self.request("GET", "projects")["projects"]


def session_notebook(spec: dict[str, Any], run: dict[str, Any]) -> dict[str, Any]:
    """A new notebook on a session kernelspec: opening it starts its kernel inside the lease."""
    about = (
        f"GPU session `{run['id']}` (preset {', '.join(run.get('presets') or [])}, project {run['project']}): "
        "this notebook's kernel runs inside the lease and sees only its GPUs."
    )
    return {
        "cells": [
            {"cell_type": "markdown", "id": "gpuplat-session", "metadata": {}, "source": about},
            {
                "cell_type": "code",
                "id": "gpuplat-devices",
                "execution_count": None,
                "metadata": {},
                "outputs": [],
                "source": 'import os\nos.environ.get("CUDA_VISIBLE_DEVICES")',
            },
        ],
        "metadata": {
            "kernelspec": {
                "name": spec["name"],
                "display_name": spec.get("display_name", spec["name"]),
                "language": spec.get("language", "python"),
            },
            "language_info": {"name": spec.get("language", "python")},
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    }
