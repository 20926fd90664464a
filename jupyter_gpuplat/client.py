"""The Python client of the platform, for kernels, scripts and the CLI.

    from jupyter_gpuplat.client import Client
    gp = Client()                       # finds the server
    run = gp.submit("team-a", script="train.py", presets=["single-gpu"])
    gp.explain(run["id"])["message"]
    for line in gp.logs(run["id"]): print(line)

Finding the server: explicit `url`/`token`; else GPUPLAT_URL/GPUPLAT_TOKEN; else
the Jupyter server that started this kernel (its pid is our parent's); else any
running Jupyter server with the extension (Jupyter's runtime files). Every
refusal raises `GpuPlatAPIError` carrying the service's message and hint.
"""

from __future__ import annotations

import builtins
import json
import os
from collections.abc import Iterator, Sequence
from typing import Any

import requests

from .core.errors import GpuPlatError
from .core.request import RunRequest
from .core.status import FINAL

API = "gpuplat/api/"

__all__ = ["FINAL", "Client", "GpuPlatAPIError"]


class GpuPlatAPIError(GpuPlatError):
    """The service refused a request, or could not be reached; `message` and `hint` say why."""

    def __init__(self, message: str, hint: str = "", *, status: int = 0, code: str = "Error") -> None:
        super().__init__(message, hint, code=code)
        self.status = status

    def __str__(self) -> str:
        return f"{self.message}" + (f" (hint: {self.hint})" if self.hint else "")


def _servers() -> builtins.list[dict[str, Any]]:
    from jupyter_server.serverapp import list_running_servers

    servers = list(list_running_servers())
    parent = os.getppid()
    # The server that started this kernel first: its pid is our parent's.
    return sorted(servers, key=lambda s: s.get("pid") != parent)


class Client:
    def __init__(self, url: str | None = None, token: str | None = None, *, timeout: float = 30.0) -> None:
        self.timeout = timeout
        self.session = requests.Session()
        self.root_dir: str | None = None
        url = url or os.environ.get("GPUPLAT_URL")
        token = token if token is not None else os.environ.get("GPUPLAT_TOKEN")
        if url:
            self._use(url, token or "")
            return
        for info in _servers():
            self._use(info["url"], token or info.get("token", ""))
            try:
                if self.session.get(self.base + "whoami", timeout=3).status_code == 200:
                    self.root_dir = info.get("root_dir")
                    return
            except requests.RequestException:
                continue
        raise GpuPlatAPIError(
            "no running Jupyter server with jupyter-gpuplat found",
            "start one with `gpuplat lab`, or pass url and token (or set GPUPLAT_URL and GPUPLAT_TOKEN)",
            code="NoServer",
        )

    def _use(self, url: str, token: str) -> None:
        self.url = url.rstrip("/") + "/"
        self.base = self.url + API
        self.session.headers.pop("Authorization", None)
        if token:
            self.session.headers["Authorization"] = f"token {token}"

    # ---- transport ----------------------------------------------------------
    def request(self, method: str, path: str, body: Any = None, **params: Any) -> Any:
        params = {k: (",".join(v) if isinstance(v, (list, tuple)) else v) for k, v in params.items() if v is not None}
        try:
            r = self.session.request(method, self.base + path, json=body, params=params, timeout=self.timeout)
        except requests.RequestException as exc:
            raise GpuPlatAPIError(f"cannot reach {self.base}: {exc}", code="Unreachable") from None
        if r.status_code >= 400:
            raise _error(r)
        return r.json() if "json" in r.headers.get("Content-Type", "") else r.content

    def stream(self, path: str, **params: Any) -> Iterator[tuple[str, str, str | None]]:
        """Server-Sent Events as (event, data, id)."""
        params = {k: v for k, v in params.items() if v is not None}
        try:
            r = self.session.get(self.base + path, params=params, stream=True, timeout=(self.timeout, None))
        except requests.RequestException as exc:
            raise GpuPlatAPIError(f"cannot reach {self.base}: {exc}", code="Unreachable") from None
        if r.status_code >= 400:
            raise _error(r)
        event, eid = "message", None
        data: builtins.list[str] = []
        with r:
            for raw in r.iter_lines(decode_unicode=True):
                if raw == "":
                    if data:
                        yield event, "\n".join(data), eid
                    event, data, eid = "message", [], None
                elif raw.startswith(":"):
                    yield "keep-alive", "", None  # lets a waiting caller check its deadline
                else:
                    key, _, value = raw.partition(":")
                    value = value[1:] if value.startswith(" ") else value
                    if key == "data":
                        data.append(value)
                    elif key == "event":
                        event = value
                    elif key == "id":
                        eid = value

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
        **fields: Any,
    ) -> dict[str, Any]:
        """Submit a run; returns at once with its record (status `queued`)."""
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

    def get(self, run_id: str) -> dict[str, Any]:
        return self.request("GET", f"runs/{run_id}")

    def list(
        self, project: str | None = None, status: str | Sequence[str] | None = None, **filters: Any
    ) -> builtins.list[dict[str, Any]]:
        return self.request("GET", "runs", project=project, status=status, **filters)["runs"]

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

    def events(self, since: int | None = None, stop_after: float | None = None) -> Iterator[dict[str, Any]]:
        """Status changes of the runs you can see, live (replayed from `since`)."""
        import time

        heartbeat = None if stop_after is None else max(1, min(15, int(stop_after - time.monotonic()) + 1))
        for event, data, _ in self.stream("events", since=since, heartbeat=heartbeat):
            if event == "status":
                yield json.loads(data)
            if stop_after is not None and time.monotonic() > stop_after:
                return

    # ---- platform ---------------------------------------------------------------
    def whoami(self) -> dict[str, Any]:
        return self.request("GET", "whoami")

    def queues(self) -> builtins.list[dict[str, Any]]:
        return self.request("GET", "queues")["queues"]

    def presets(self, project: str | None = None) -> builtins.list[dict[str, Any]]:
        return self.request("GET", "presets", project=project)["presets"]

    def projects(self) -> builtins.list[dict[str, Any]]:
        return self.request("GET", "projects")["projects"]


def _error(r: requests.Response) -> GpuPlatAPIError:
    try:
        err = r.json()["error"]
        return GpuPlatAPIError(err["message"], err.get("hint", ""), status=r.status_code, code=err.get("code", "Error"))
    except (ValueError, KeyError, TypeError):
        return GpuPlatAPIError(f"HTTP {r.status_code}: {r.text[:300]}", status=r.status_code)
