"""Remote mode: this Jupyter server forwards `/gpuplat/api/*` to the team's control plane.

The server holds no store, engine, executor, database URL or cluster credentials; the URL
space is the same as embedded mode, so the sidebar, magics, widgets, CLI and client work
unchanged against it.

Whose token goes upstream (the visitor's identity, never the owner's for a guest):
1. The request's own token (`Authorization: token|Bearer`, `?token=`, or in a JupyterHub
   server the browser's OAuth cookie, `hub_auth.get_token`), unless it is this server's own
   token, which is a local credential only.
2. Otherwise (the server's own token: kernels and the CLI; a password/cookie login) the
   visitor is the server's owner: `GpuPlat.control_plane_token` when set, else
   `$JUPYTERHUB_API_TOKEN` when the visitor is `$JUPYTERHUB_USER`; anyone else gets a 403.

Forwarding is faithful: status, body (errors included) and Content-Type verbatim, `Location`
rewritten to this server, `Last-Event-ID` and the resume query params passed on, streams
(logs, events, downloads) relayed chunk by chunk without the 20 s request timeout, and the
upstream request closed when the client goes away. An unreachable control plane is a 502 in
our error shape.

The upstream side is httpx (public API only): one `AsyncClient` per server, a pool of up to
1000 connections, kept alive between requests, so names are resolved per new connection, not
per request (the former per-host DNS cache is gone). Each forwarded request's exchange runs in
its own task; `on_connection_close` cancels it, which closes the upstream response (and its
connection: a response not read to its end is never reused). Ordinary requests have an overall
limit of `request_timeout_seconds`; streams have none (connecting, or waiting for a pooled
connection, still gives up after 10 s). Bodies are relayed raw (`aiter_raw`: never decoded, no
size cap), and nothing of our own is asked for upstream (no Accept or Accept-Encoding added).
The pool is closed (awaited) where the extension stops, `ControlPlane.aclose`.

Submissions (`POST runs`, `runs/preview`) never send a path the control plane would resolve
on its own disk (it runs elsewhere and must not read anyone's files):
- `script` is resolved here, inside this server's root (links resolved, the same 400s as
  embedded mode) and sent as `code`: a `.py` file's text as is (so `__file__` is the run's
  `code/cell.py`, and sibling modules are not importable); an `.ipynb` as a small bootstrap
  that writes the notebook (outputs stripped) into the run's `code/` and runs it with nbrun, so
  its executed copy is still the output `outputs/<name>.ipynb`. A run without a name is named
  after the file. Above the control plane's `code` limit the submission is a 413.
- `working_dir` is checked as in embedded mode (a directory inside the root, else 400), then
  dropped: the run starts in its own artifact directory on the control plane's machines, as a
  command without working_dir does (`gpuplat runs show` says so). Data belongs on storage the
  runs mount, not in the notebook server's home.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import ssl
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

import httpx
from jupyter_server.base.handlers import APIHandler, JupyterHandler
from jupyter_server.utils import url_path_join
from tornado import web
from tornado.iostream import StreamClosedError

from ...core.errors import Forbidden, GpuPlatError, InvalidInput
from ...core.request import RunRequest
from ..errors import error_body
from ..handlers import _under_root
from ..openapi import API

# Streams run as long as the client listens: no overall request timeout for them.
STREAMS = re.compile(r"/(events|runs/[^/]+/logs|runs/[^/]+/outputs/.+)")
SUBMISSIONS = ("/runs", "/runs/preview")
# Request headers that mean something upstream; cookies and the local Authorization do not.
FORWARDED = ("Content-Type", "Accept", "Last-Event-ID", "Range", "If-None-Match", "If-Modified-Since")
# Response headers tornado sets itself for the client's connection.
HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "server", "date", "set-cookie"}
CONNECT_TIMEOUT_SECONDS = 10.0
MAX_CODE_CHARS = next(m.max_length for m in RunRequest.model_fields["code"].metadata if hasattr(m, "max_length"))


class BadGateway(GpuPlatError):
    status = 502
    code = "ControlPlaneUnreachable"


class PayloadTooLarge(GpuPlatError):
    status = 413
    code = "FileTooLarge"


class ControlPlane:
    """Where this server forwards to, and the one HTTP client (httpx, a connection pool) it forwards with."""

    def __init__(self, url: str, token: str, request_timeout_seconds: float) -> None:
        self.url = url.rstrip("/") + "/"
        self.token = token
        self.request_timeout_seconds = request_timeout_seconds
        self.base_path = urlsplit(self.url).path
        # Streams stay open for hours: many at once, no read timeout, and no cap on a body's length.
        # Connect (and a wait for a free connection) keep 10 s; ordinary requests' overall limit is in _exchange.
        self.client = httpx.AsyncClient(
            timeout=httpx.Timeout(None, connect=CONNECT_TIMEOUT_SECONDS, pool=CONNECT_TIMEOUT_SECONDS),
            limits=httpx.Limits(max_connections=1000, max_keepalive_connections=100),
            follow_redirects=False,
            trust_env=False,  # no proxy from the environment, as before: the control plane is a direct peer
            verify=ssl.create_default_context(),  # the system's CAs (a team's own CA), not certifi's
        )
        # Only what the visitor sent goes upstream: no Accept of our own, and bodies come back as they are.
        for name in ("Accept", "Accept-Encoding"):
            del self.client.headers[name]

    async def aclose(self) -> None:
        """Close the pool's connections (awaited where the server stops)."""
        await self.client.aclose()


class ForwardHandler(APIHandler):
    """Every method of every path under the API, relayed to the control plane as the visitor."""

    _relay: asyncio.Task[None] | None = None  # the upstream exchange: cancelled when the client goes away
    _gone = False
    _headers_done = False

    @property
    def control_plane(self) -> ControlPlane:
        cp: ControlPlane = self.settings["gpuplat_remote"]
        return cp

    def finish(self, *args: Any, **kwargs: Any) -> Any:
        # APIHandler forces application/json; the upstream's Content-Type is kept as it came.
        self.update_api_activity()
        return JupyterHandler.finish(self, *args, **kwargs)

    def _handle_request_exception(self, e: BaseException) -> None:
        if isinstance(e, GpuPlatError) and not self._finished and not self._headers_done:
            self.clear()
            self.set_status(e.status)
            self.set_header("Content-Type", "application/json")
            self.finish(json.dumps(error_body(e)))
            return
        super()._handle_request_exception(e)

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        self.set_header("Content-Type", "application/json")
        reason = self._reason or "error"
        exc = kwargs.get("exc_info", (None, None, None))[1]
        message = getattr(exc, "log_message", None) or reason
        self.finish(json.dumps({"error": {"code": reason.replace(" ", ""), "message": message, "hint": ""}}))

    def on_connection_close(self) -> None:
        self._gone = True
        if self._relay is not None and not self._relay.done():
            # Connecting, waiting for the answer or between chunks: the task's cancellation closes
            # the upstream response (and its connection, a response not read to its end).
            self._relay.cancel()

    @web.authenticated
    async def get(self, rest: str) -> None:
        # The raw path, not tornado's unquoted argument: an output named `a%2Fb` stays one name.
        await self._forward(self.request.path[len(url_path_join(self.base_url, API)) :])

    post = put = patch = delete = get

    async def _forward(self, rest: str) -> None:
        cp = self.control_plane
        headers = {k: v for k in FORWARDED if (v := self.request.headers.get(k)) is not None}
        headers["Authorization"] = f"token {self.visitor_token()}"
        body: bytes | None = self.request.body
        if self.request.method == "POST" and rest in SUBMISSIONS:
            body = self.localized_submission(body or b"")
        if self.request.method in ("GET", "DELETE") and not body:
            body = None
        query = [(k, v) for k, v in parse_qsl(self.request.query, keep_blank_values=True) if k != "token"]
        stream = self.request.method == "GET" and STREAMS.fullmatch(rest) is not None
        upstream = cp.client.build_request(
            self.request.method or "GET",
            f"{cp.url}{API}{rest}" + (f"?{urlencode(query)}" if query else ""),
            headers=headers,
            content=body,
        )
        if self._gone:
            return
        # Its own task, so that on_connection_close can cancel it (a handler's coroutine is tornado's).
        self._relay = asyncio.ensure_future(self._exchange(upstream, stream))
        try:
            await self._relay
        except asyncio.CancelledError:
            if not self._gone:
                raise
            return  # the client went away: the upstream request was closed with the task
        try:
            self.finish()
        except StreamClosedError:
            pass

    async def _exchange(self, upstream: httpx.Request, stream: bool) -> None:
        """Send upstream and relay the answer as it comes; a stream has no overall time limit."""
        cp = self.control_plane
        limit = cp.request_timeout_seconds if not stream and cp.request_timeout_seconds > 0 else None
        try:
            async with asyncio.timeout(limit):
                response = await cp.client.send(upstream, stream=True)
                try:
                    self._apply_headers(response)
                    if self.request.method == "GET" and response.status_code == 200:
                        await self.flush()  # headers now: a stream's client sees it open before the first event
                    async for chunk in response.aiter_raw():  # as it arrives, never decoded
                        if chunk:
                            self.write(chunk)
                            await self.flush()  # a slow client slows the relay
                finally:
                    await response.aclose()
        except StreamClosedError:
            return  # the client went away while we wrote
        except (httpx.HTTPError, OSError) as exc:  # OSError: TimeoutError, our overall limit
            if not self._headers_done:
                timed_out = isinstance(exc, TimeoutError) and limit is not None
                problem = f"no answer within {limit:g} s" if timed_out else (str(exc) or type(exc).__name__)
                raise BadGateway(
                    f"the control plane at {cp.url} did not answer: {problem}",
                    "try again shortly; if it persists, tell your platform administrators",
                ) from None
            # The stream broke after it started: end ours, the client resumes with Last-Event-ID.

    def _apply_headers(self, response: httpx.Response) -> None:
        self._headers_done = True
        self.set_status(response.status_code, response.reason_phrase or None)
        self.clear_header("Content-Type")
        for raw_name, raw_value in response.headers.raw:
            name, value = raw_name.decode("latin-1"), raw_value.decode("latin-1")
            if name.lower() in HOP_BY_HOP:
                continue
            if name.lower() == "location":
                value = self._local_location(value)
            self.add_header(name, value)

    def _local_location(self, value: str) -> str:
        path = urlsplit(value).path
        prefix = self.control_plane.base_path + API
        if path.startswith(prefix):
            return self.base_url + API + path[len(prefix) :]
        return value

    # -- identity ---------------------------------------------------------------

    def visitor_token(self) -> str:
        """The visitor's Hub token, or the owner's configured one; never the owner's for a guest."""
        ip = self.identity_provider
        hub_auth = getattr(ip, "hub_auth", None)
        token = hub_auth.get_token(self) if hub_auth is not None else ip.get_token(self)
        if token and token != ip.token:
            return str(token)
        hub_user = os.environ.get("JUPYTERHUB_USER")
        owner = hub_user is None or self.current_user.username == hub_user
        if owner and self.control_plane.token:
            return self.control_plane.token
        if owner and hub_user and os.environ.get("JUPYTERHUB_API_TOKEN"):
            return os.environ["JUPYTERHUB_API_TOKEN"]
        raise Forbidden(
            "no token of yours to send to the control plane",
            "sign in through JupyterHub (or send your Hub token); the server's owner may set "
            "GpuPlat.control_plane_token outside JupyterHub",
        )

    # -- submissions --------------------------------------------------------------

    def localized_submission(self, raw: bytes) -> bytes:
        """The body with `script` sent as content and `working_dir` checked then dropped (module docstring)."""
        try:
            body = json.loads(raw)
        except ValueError:
            return raw  # malformed: the control plane answers it, in its words
        if not isinstance(body, dict):
            return raw
        root = Path(self.settings["server_root_dir"]).expanduser().resolve()
        return json.dumps(localize(body, root)).encode()


def localize(body: dict[str, Any], root: Path) -> dict[str, Any]:
    out = dict(body)
    wd = out.pop("working_dir", None)
    if isinstance(wd, str):
        where = _under_root(root, wd)
        if where is None or not where.is_dir():
            problem = "is outside" if where is None else "is not a directory under"
            raise InvalidInput(
                f"working_dir {wd!r} {problem} the Jupyter root directory ({root})",
                "give a directory relative to the file browser's root (e.g. experiments) or absolute inside it",
            )
    elif wd is not None:
        out["working_dir"] = wd  # not a string: the control plane refuses it in its words
    script = out.get("script")
    if not isinstance(script, str) or not script.endswith((".py", ".ipynb")) or out.get("code") is not None:
        return out  # nothing to read here; what is malformed is refused upstream
    target = _under_root(root, script)
    if target is None or not target.is_file():
        raise InvalidInput(
            f"script {script!r} is not a file under the Jupyter root directory",
            "give a path relative to the file browser's root, e.g. experiments/train.py",
        )
    try:
        text = target.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise InvalidInput(f"script {script!r} is not UTF-8 text", "save it as UTF-8") from None
    code = notebook_bootstrap(target.name, text) if target.suffix == ".ipynb" else text
    if len(code) > MAX_CODE_CHARS:
        raise PayloadTooLarge(
            f"script {script!r} is {len(code)} characters to send; the control plane takes at most {MAX_CODE_CHARS}",
            "move data out of the file (notebooks are sent without their outputs), or run it from shared storage "
            "with a command",
        )
    del out["script"]
    out["code"] = code
    if out.get("name") is None:
        out["name"] = target.name
    return out


def notebook_bootstrap(name: str, text: str) -> str:
    """Python source that writes the notebook next to itself (the run's code/) and executes it headless."""
    try:
        nb = json.loads(text)
    except ValueError:
        raise InvalidInput(f"notebook {name!r} is not JSON", "save it from Jupyter as .ipynb") from None
    for cell in nb.get("cells", []) if isinstance(nb, dict) else []:
        if isinstance(cell, dict) and cell.get("cell_type") == "code":
            cell["outputs"], cell["execution_count"] = [], None  # re-made by the run; only bulk here
    return (
        f"# {name}, sent by a Jupyter server in remote mode: written next to this file, run by nbrun.\n"
        "import os, sys\n"
        "from jupyter_gpuplat import nbrun\n\n"
        f"NOTEBOOK = {json.dumps(nb)!r}\n"
        f"path = os.path.join(os.path.dirname(os.path.abspath(__file__)), {name!r})\n"
        "with open(path, 'w', encoding='utf-8') as f:\n"
        "    f.write(NOTEBOOK)\n"
        "sys.exit(nbrun.main([path, *sys.argv[1:]]))\n"
    )


def make_handlers() -> list[tuple[str, type[ForwardHandler]]]:
    """One route for the whole API: the path after it is forwarded as is."""
    return [(f"{API}(?P<rest>(?:/.*)?)", ForwardHandler)]
