"""The HTTP face: Kubernetes REST paths, JSON, chunked watch and log streams, Status errors.

Served by the stdlib's threading HTTP server on 127.0.0.1 (HTTP/1.1, keep-alive), so
the official client's urllib3 pool, its watch line splitter and its log streaming
run unchanged. What real apiservers do and kmock did not (notes §4.1): 201 on
create, namespace from the URL, uid/resourceVersion/generateName, label and field
selectors on list and watch, resourceVersion resume with 410 Expired after
compaction, BOOKMARKs, `timeoutSeconds`, text/plain logs, PUT with a resourceVersion
precondition, strategic-merge patches keyed like the real ones (patching.py), deletecollection,
discovery with and without trailing slashes (paths.py).
"""

from __future__ import annotations

import copy
import json
import socket
import sys
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import parse_qs, urlsplit

from .patching import apply_patch
from .paths import discovery, route
from .selectors import SelectorError, parse_field_selector, parse_label_selector
from .store import POD, ApiError, ResourceType, Store, not_found

if TYPE_CHECKING:
    from .faults import Faults
    from .kubelet import Kubelet
    from .rbac import Permissions

DEFAULT_WATCH_SECONDS = 1800


class Backend(Protocol):
    """What the HTTP face serves from (the cluster is one), read at each request: a test may swap
    `permissions` or `faults` on a running cluster. A protocol, not the cluster class, so that
    this module does not import the cluster that imports it."""

    store: Store
    token: str
    permissions: Permissions
    faults: Faults
    requests: Counter[tuple[str, str]]  # (verb, resource) → calls
    bookmark_seconds: float

    @property
    def kubelet(self) -> Kubelet: ...  # pods' logs

    def evict(self, namespace: str, pod: str, message: str = ...) -> None: ...


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    backend: Backend
    api: ApiServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that hangs up (a stopped informer, a closed pool) is normal, not an error.
        if isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            return
        super().handle_error(request, client_address)


class ApiServer:
    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None
        self.stopping = False
        self._conns: set[socket.socket] = set()
        self._lock = threading.Lock()

    def start(self) -> None:
        httpd = _Server(("127.0.0.1", 0), _Handler)
        httpd.backend = self.backend
        httpd.api = self
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="k8s-emulator-http", daemon=True
        )
        self._thread.start()

    @property
    def url(self) -> str:
        assert self._httpd is not None, "start the cluster first"
        host, port = self._httpd.server_address[:2]
        return f"http://{host!r}:{port}".replace("'", "")

    def track(self, conn: socket.socket, on: bool) -> None:
        with self._lock:
            (self._conns.add if on else self._conns.discard)(conn)

    def stop(self) -> None:
        self.stopping = True
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        with self._lock:
            conns = list(self._conns)
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        with self.backend.store.lock:
            self.backend.store.changed.notify_all()


class _Dropped(Exception):
    """The connection is to end without a proper end of stream."""


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server
    _raw = b""

    def log_message(self, format: str, *args: Any) -> None:
        pass

    @property
    def backend(self) -> Backend:
        return self.server.backend

    def setup(self) -> None:
        super().setup()
        self.server.api.track(self.connection, True)

    def finish(self) -> None:
        self.server.api.track(self.connection, False)
        try:
            super().finish()
        except OSError:
            pass

    # -- plumbing ----------------------------------------------------------------------------
    def _body(self) -> Any:
        raw = self._raw
        if not raw:
            return None
        try:
            return json.loads(raw)
        except ValueError as exc:
            raise ApiError(400, "BadRequest", f"the body of the request was in an unknown format: {exc}") from exc

    def _send(self, code: int, body: Any, content_type: str = "application/json") -> None:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _error(self, err: ApiError) -> None:
        self._send(err.code, err.status())

    def _start_chunked(self, content_type: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.wfile.flush()

    def _chunk(self, data: bytes) -> None:
        if data:
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

    def _end_chunked(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _drop(self) -> None:
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    # -- dispatch ----------------------------------------------------------------------------
    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_PUT(self) -> None:
        self._handle("PUT")

    def do_PATCH(self) -> None:
        self._handle("PATCH")

    def do_DELETE(self) -> None:
        self._handle("DELETE")

    def _handle(self, method: str) -> None:
        n = int(self.headers.get("Content-Length") or 0)
        self._raw = self.rfile.read(n) if n else b""  # read first: an early error must not break keep-alive
        url = urlsplit(self.path)
        q = {k: v[-1] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
        try:
            auth = self.headers.get("Authorization", "")
            if auth != f"Bearer {self.backend.token}":
                raise ApiError(401, "Unauthorized", "Unauthorized")
            path = url.path.rstrip("/") or "/"
            document = discovery(path) if method == "GET" else None
            if document is not None:
                self._send(200, document)
                return
            self._resource(method, path, q)
        except _Dropped:
            self._drop()
        except ApiError as err:
            self._error(err)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _verb(self, method: str, name: str | None, q: dict[str, str]) -> str:
        if method == "GET":
            if name is None:
                return "watch" if q.get("watch") in ("true", "1") else "list"
            return "get"
        return {"POST": "create", "PUT": "update", "PATCH": "patch"}.get(method) or (
            "delete" if name is not None else "deletecollection"
        )

    def _resource(self, method: str, path: str, q: dict[str, str]) -> None:
        if path == "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews" and method == "POST":
            self.backend.requests[("create", "selfsubjectaccessreviews")] += 1
            self._access_review(self._body() or {})
            return
        rt, ns, name, sub = route(path)
        verb = self._verb(method, name, q)
        if sub == "eviction" and method == "POST":
            verb = "create"
        label = f"{rt.plural}/{sub}" if sub in ("log", "eviction", "status") else rt.plural
        self.backend.requests[(verb, label)] += 1
        body = self._body() if method in ("POST", "PUT", "PATCH", "DELETE") else None
        perms = self.backend.permissions
        # A Namespace object is authorized in itself (the apiserver's RequestInfo): a Role may grant `get` on it.
        authz_ns = name if rt.plural == "namespaces" and name is not None else ns
        if not perms.allows(verb, rt.group, label, authz_ns, name or ""):
            raise ApiError(
                403,
                "Forbidden",
                perms.forbidden_message(verb, rt.group, label, authz_ns, name or ""),
                {"name": name or "", "group": rt.group, "kind": rt.plural},
            )
        fault = self.backend.faults.take(verb, label)
        if fault is not None:
            raise fault
        store = self.backend.store
        ns_key = ns or ""
        if verb == "watch":
            self._watch(rt, ns, q)
        elif verb == "list":
            self._list(rt, ns, q)
        elif verb == "get" and sub == "log":
            self._log(ns_key, name or "", q)
        elif verb == "get":
            self._send(200, store.get(rt, ns_key, name or ""))
        elif verb == "create" and sub == "eviction":
            store.get(rt, ns_key, name or "")
            self.backend.evict(ns_key, name or "")
            self._send(201, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"})
        elif verb == "create":
            if not isinstance(body, dict):
                raise ApiError(400, "BadRequest", "the body of the request must be an object")
            declared = (body.get("metadata") or {}).get("namespace")
            if rt.namespaced and declared and declared != ns:
                raise ApiError(
                    400,
                    "BadRequest",
                    "the namespace of the provided object does not match the namespace sent on the request",
                )
            self._send(201, store.create(rt, ns_key, body))
        elif verb == "update":
            if not isinstance(body, dict):
                raise ApiError(400, "BadRequest", "the body of the request must be an object")
            with store.lock:
                if sub == "status":
                    old = store.get(rt, ns_key, name or "")
                    new = copy.deepcopy(old)
                    new["status"] = body.get("status", {})
                    new["metadata"]["resourceVersion"] = (body.get("metadata") or {}).get(
                        "resourceVersion", old["metadata"]["resourceVersion"]
                    )
                    body = new
                self._send(200, store.replace(rt, ns_key, name or "", body))
        elif verb == "patch":
            ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip()
            self._send(
                200, store.update(rt, ns_key, name or "", lambda o: apply_patch(o, body, ctype, sub == "status"))
            )
        elif verb == "delete":
            options = body if isinstance(body, dict) else {}
            policy = q.get("propagationPolicy") or options.get("propagationPolicy")
            if q.get("orphanDependents") == "true" or options.get("orphanDependents"):
                policy = "Orphan"
            with store.lock:
                result = store.delete(rt, ns_key, name or "", policy)
                still = store.find(rt, ns_key, name or "")
            if rt is POD or still is not None:
                self._send(200 if still is None or rt is POD else 202, result)
            else:
                self._send(
                    200,
                    {
                        "kind": "Status",
                        "apiVersion": "v1",
                        "metadata": {},
                        "status": "Success",
                        "details": {
                            "name": name,
                            "group": rt.group,
                            "kind": rt.plural,
                            "uid": result["metadata"]["uid"],
                        },
                    },
                )
        elif verb == "deletecollection":
            with store.lock:
                items, _ = store.select(rt, ns, q.get("labelSelector"), q.get("fieldSelector"))
                for item in items:
                    store.delete(rt, ns_key, item["metadata"]["name"], q.get("propagationPolicy"))
            self._send(200, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"})
        else:
            raise ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")

    # -- list and watch ----------------------------------------------------------------------
    def _list(self, rt: ResourceType, ns: str | None, q: dict[str, str]) -> None:
        try:
            items, rv = self.backend.store.select(rt, ns, q.get("labelSelector"), q.get("fieldSelector"))
        except SelectorError as exc:
            raise ApiError(400, "BadRequest", str(exc)) from exc
        meta: dict[str, Any] = {"resourceVersion": str(rv)}
        limit = int(q.get("limit") or 0)
        start = int(q.get("continue") or 0)
        if limit:
            page = items[start : start + limit]
            if start + limit < len(items):
                meta["continue"] = str(start + limit)
                meta["remainingItemCount"] = len(items) - start - limit
            items = page
        self._send(200, {"kind": f"{rt.kind}List", "apiVersion": rt.api_version, "metadata": meta, "items": items})

    def _watch(self, rt: ResourceType, ns: str | None, q: dict[str, str]) -> None:
        store = self.backend.store
        faults = self.backend.faults
        try:
            labels = parse_label_selector(q.get("labelSelector"))
            fields = parse_field_selector(q.get("fieldSelector"), rt.plural)
        except SelectorError as exc:
            raise ApiError(400, "BadRequest", str(exc)) from exc
        timeout = float(q.get("timeoutSeconds") or DEFAULT_WATCH_SECONDS)
        bookmarks = q.get("allowWatchBookmarks") in ("true", "1")
        generation = faults.watch_generation
        start = time.monotonic()
        next_bookmark = start + self.backend.bookmark_seconds

        def matches(obj: dict[str, Any]) -> bool:
            meta = obj["metadata"]
            return (ns is None or meta.get("namespace") == ns) and labels(meta.get("labels") or {}) and fields(obj)

        def line(type_: str, obj: Any) -> bytes:
            return json.dumps({"type": type_, "object": obj}).encode() + b"\n"

        rv_param = q.get("resourceVersion", "")
        with store.lock:
            if rv_param in ("", "0"):
                initial = [o for o in store.iter(rt) if matches(o)]
                pos = store.rv
                first = b"".join(line("ADDED", o) for o in initial)
                error = None
            else:
                pos = int(rv_param)
                first = b""
                try:
                    store.changes_since(pos)
                    error = None
                except ApiError as exc:
                    error = exc
        self._start_chunked("application/json")
        if error is not None:
            self._chunk(line("ERROR", error.status()))
            self._end_chunked()
            return
        self._chunk(first)
        while True:
            out = []
            with store.lock:
                try:
                    changes = store.changes_since(pos)
                except ApiError as exc:
                    self._chunk(line("ERROR", exc.status()))
                    break
                if not changes:
                    now = time.monotonic()
                    wake = min(start + timeout, next_bookmark if bookmarks else start + timeout) - now
                    if wake > 0:
                        store.changed.wait(min(wake, 0.25))
                    changes = store.changes_since(pos)
                for c in changes:
                    pos = c.rv
                    if c.rt is rt and matches(c.obj):
                        out.append(line(c.type, c.obj))
                bookmark_rv = pos
            if faults.watch_generation != generation or self.server.api.stopping:
                raise _Dropped()
            if out:
                self._chunk(b"".join(out))
            now = time.monotonic()
            if bookmarks and now >= next_bookmark:
                self._chunk(
                    line(
                        "BOOKMARK",
                        {
                            "kind": rt.kind,
                            "apiVersion": rt.api_version,
                            "metadata": {"resourceVersion": str(bookmark_rv)},
                        },
                    )
                )
                next_bookmark = now + self.backend.bookmark_seconds
            if now - start >= timeout:
                break
        self._end_chunked()

    # -- logs --------------------------------------------------------------------------------
    def _log(self, ns: str, name: str, q: dict[str, str]) -> None:
        store = self.backend.store
        kubelet = self.backend.kubelet
        with store.lock:
            pod = store.find(POD, ns, name)
            if pod is None:
                raise not_found(POD, name)
            containers = [c["name"] for c in pod["spec"].get("containers") or []]
            container = q.get("container") or (containers[0] if len(containers) == 1 else "")
            if container not in containers:
                raise ApiError(400, "BadRequest", f"container {container} is not valid for pod {name}")
            previous = q.get("previous") == "true"
            runs = kubelet.log_runs(pod, container)
            if previous and len(runs) < 2:
                raise ApiError(
                    400, "BadRequest", f'previous terminated container "{container}" in pod "{name}" not found'
                )
            if not runs:
                state = ((pod.get("status") or {}).get("containerStatuses") or [{}])[0].get("state") or {}
                why = (state.get("waiting") or {}).get("reason") or "ContainerCreating"
                if why in ("ErrImagePull", "ImagePullBackOff"):
                    why = "trying and failing to pull image"
                raise ApiError(400, "BadRequest", f'container "{container}" in pod "{name}" is waiting to start: {why}')
        follow = q.get("follow") == "true"
        stream = kubelet.read_log(
            pod,
            container,
            follow=follow,
            timestamps=q.get("timestamps") == "true",
            previous=previous,
            since_seconds=int(q["sinceSeconds"]) if q.get("sinceSeconds") else None,
            tail_lines=int(q["tailLines"]) if q.get("tailLines") else None,
            stop=lambda: self.server.api.stopping,
        )
        if not follow:
            self._send(200, b"".join(stream), "text/plain")
            return
        generation = self.backend.faults.watch_generation
        self._start_chunked("text/plain")
        for data in stream:
            if self.backend.faults.watch_generation != generation:
                raise _Dropped()
            self._chunk(data)
        self._end_chunked()

    # -- access reviews ----------------------------------------------------------------------
    def _access_review(self, body: dict[str, Any]) -> None:
        attrs = (body.get("spec") or {}).get("resourceAttributes") or {}
        resource = attrs.get("resource", "")
        if attrs.get("subresource"):
            resource = f"{resource}/{attrs['subresource']}"
        verb, group = attrs.get("verb", ""), attrs.get("group", "")
        where, name = attrs.get("namespace") or None, attrs.get("name", "")
        allowed = self.backend.permissions.allows(verb, group, resource, where, name)
        out = copy.deepcopy(body)
        out.update(kind="SelfSubjectAccessReview", apiVersion="authorization.k8s.io/v1")
        out.setdefault("metadata", {})["creationTimestamp"] = None
        out["status"] = {
            "allowed": allowed,
            **({"reason": "RBAC: allowed by the emulator's role bindings"} if allowed else {}),
        }
        self._send(201, out)
