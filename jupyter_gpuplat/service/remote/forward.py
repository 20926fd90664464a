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

import json
import os
import re
import socket
import time
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

from jupyter_server.base.handlers import APIHandler, JupyterHandler
from jupyter_server.utils import url_path_join
from tornado import web
from tornado.httpclient import HTTPClientError, HTTPRequest
from tornado.iostream import StreamClosedError
from tornado.netutil import DefaultLoopResolver, Resolver
from tornado.simple_httpclient import SimpleAsyncHTTPClient, _HTTPConnection

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
MAX_CODE_CHARS = next(m.max_length for m in RunRequest.model_fields["code"].metadata if hasattr(m, "max_length"))


class BadGateway(GpuPlatError):
    status = 502
    code = "ControlPlaneUnreachable"


class PayloadTooLarge(GpuPlatError):
    status = 413
    code = "FileTooLarge"


class _Request(HTTPRequest):
    """An upstream request that knows its connection, so a client's disconnect can close it."""

    connection: _HTTPConnection | None = None
    cancelled = False

    def cancel(self) -> None:
        self.cancelled = True
        if self.connection is not None:
            # tornado has no public cancel: this fails the fetch and closes (or never opens) its stream.
            self.connection._on_timeout("cancelled: the client went away")


class _Connection(_HTTPConnection):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        original = getattr(self.request, "request", self.request)  # the client wraps it in a defaults proxy
        if isinstance(original, _Request):
            original.connection = self
            if original.cancelled:
                original.cancel()


class _Client(SimpleAsyncHTTPClient):
    def _connection_class(self) -> type:
        return _Connection


class _CachingResolver(Resolver):
    """getaddrinfo runs in a thread: once a minute per host, not once per forwarded request."""

    def initialize(self, ttl_seconds: float = 60.0) -> None:
        self.inner = DefaultLoopResolver()
        self.ttl_seconds = ttl_seconds
        self.cache: dict[tuple[str, int, int], tuple[float, list[tuple[int, Any]]]] = {}

    async def resolve(
        self, host: str, port: int, family: socket.AddressFamily = socket.AF_UNSPEC
    ) -> list[tuple[int, Any]]:
        key, now = (host, port, int(family)), time.monotonic()
        hit = self.cache.get(key)
        if hit is not None and hit[0] > now:
            return hit[1]
        found = await self.inner.resolve(host, port, family)
        self.cache[key] = (now + self.ttl_seconds, found)
        return found


class ControlPlane:
    """Where this server forwards to, and the one HTTP client it forwards with."""

    def __init__(self, url: str, token: str, request_timeout_seconds: float) -> None:
        self.url = url.rstrip("/") + "/"
        self.token = token
        self.request_timeout_seconds = request_timeout_seconds
        self.base_path = urlsplit(self.url).path
        # Streams stay open for hours: many at once, and no cap on a stream's length.
        self.client = _Client(force_instance=True, max_clients=1000, max_body_size=1 << 50, resolver=_CachingResolver())

    def close(self) -> None:
        self.client.close()


class ForwardHandler(APIHandler):
    """Every method of every path under the API, relayed to the control plane as the visitor."""

    _upstream: _Request | None = None
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
        if self._upstream is not None:
            self._upstream.cancel()

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
        self._upstream = req = _Request(
            f"{cp.url}{API}{rest}" + (f"?{urlencode(query)}" if query else ""),
            method=self.request.method,
            headers=headers,
            body=body,
            allow_nonstandard_methods=True,
            follow_redirects=False,
            connect_timeout=10.0,
            request_timeout=0 if stream else cp.request_timeout_seconds,  # 0: none (tornado's default is 20 s)
            header_callback=self._upstream_header,
            streaming_callback=self._upstream_chunk,
            decompress_response=False,
        )
        self._status: tuple[int, str] | None = None
        self._copied: list[tuple[str, str]] = []
        try:
            await cp.client.fetch(req, raise_error=False)
        except (OSError, HTTPClientError) as exc:
            if req.cancelled:
                return
            if not self._headers_done:
                raise BadGateway(
                    f"the control plane at {cp.url} did not answer: {exc}",
                    "try again shortly; if it persists, tell your platform administrators",
                ) from None
            # The stream broke after it started: end ours, the client resumes with Last-Event-ID.
        if req.cancelled:
            return
        if not self._headers_done:
            self._apply_headers()
        try:
            self.finish()
        except StreamClosedError:
            pass

    def _upstream_header(self, line: str) -> None:
        line = line.rstrip("\r\n")
        if line.startswith("HTTP/"):
            _, code, *reason = line.split(" ", 2)
            self._status, self._copied = (int(code), reason[0] if reason else ""), []
        elif line and ":" in line:
            name, _, value = line.partition(":")
            self._copied.append((name.strip(), value.strip()))
        elif not line and self._status is not None and self._status[0] != 100:
            self._apply_headers()
            if self.request.method == "GET" and (self.get_status() == 200):
                self.flush()  # headers now: a stream's client sees it open before the first event

    def _apply_headers(self) -> None:
        self._headers_done = True
        code, reason = self._status or (502, "Bad Gateway")
        self.set_status(code, reason or None)
        self.clear_header("Content-Type")
        for name, value in self._copied:
            if name.lower() in HOP_BY_HOP:
                continue
            if name.lower() == "location":
                value = self._local_location(value)
            self.add_header(name, value)

    def _upstream_chunk(self, chunk: bytes) -> Any:
        if self._finished or self.request.connection is None:
            return None
        self.write(chunk)
        return self.flush()  # awaited by the upstream reader: a slow client slows the relay

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
