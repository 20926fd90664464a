"""One owning server per embedded store: an exclusive lock beside the SQLite file, held for the server's life.

Two Jupyter servers of one user on one store (the default `<jupyter_data_dir>/gpuplat/gpuplat.db`
is the same whatever folder each starts in) must not both dispatch: each would hand out the same
GPUs against the same quota, and each would apply its `GpuPlat.config_file` over the other's.

1. `claim()` opens `<db>.owner` (0600) and takes `flock(LOCK_EX | LOCK_NB)` on it before any
   Store, executor or engine exists. The descriptor stays open (close-on-exec) for the server's
   life, so the kernel frees the lock when the process ends, however it ends: a crashed owner's
   record never blocks anyone. The file is never removed (a removed lock file could be locked
   twice, once per inode).
2. The owner writes its record into that file: pid, uid, host, root dir, platform user, the
   path of its Jupyter runtime file (`jpserver-<pid>.json`, 0600, which holds its token: the
   record never copies it), then, once it listens, its URLs (`Owner.listening`).
3. A server that finds the lock held waits at most `wait_seconds` for the holder's record to
   have its URL (trying the lock again meanwhile: an owner that dies while starting hands the
   store over), then becomes the owner's client: remote mode's forwarding (service/remote/forward.py)
   to the owner's loopback URL with the owner's token, so both Labs show one platform.
4. Where it cannot be a client (`client_of` says why: another account or machine, no URL
   after the wait, a Unix socket or HTTPS, the runtime file unreadable, password-only login,
   another platform user), it serves no platform: every `/gpuplat/api` request answers 409
   `StoreInUse` naming the owner, and the log says so once at start.

A client whose owner has stopped answers 503 `Unavailable` until it is restarted (it then owns
the store); it does not take the store over while it runs. Only SQLite files are locked:
PostgreSQL in embedded mode takes no lock (team mode's leader lock is store/leader.py).
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tornado import web

from ..core.errors import StoreInUse, Unavailable
from ..store.urls import sqlite_path
from .openapi import API
from .remote.forward import BadGateway, ForwardHandler

OWNER_SUFFIX = ".owner"
POLL_SECONDS = 0.05
WILDCARD_IPS = ("", "0.0.0.0", "::", "*")


@dataclass(frozen=True)
class Me:
    """The server asking for the store, as its record would say."""

    pid: int
    uid: int
    host: str
    root_dir: str
    default_user: str
    runtime_file: str

    def record(self) -> dict[str, Any]:
        return {
            "pid": self.pid,
            "uid": self.uid,
            "host": self.host,
            "root_dir": self.root_dir,
            "default_user": self.default_user,
            "runtime_file": self.runtime_file,
            "started_at": time.time(),
            "url": None,
        }


class OwnerFile:
    """`<db>.owner`: the lock (flock on one open descriptor) and the owner's record, in one 0600 file."""

    def __init__(self, path: str) -> None:
        self.path = path
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        self.fd: int | None = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        if os.fstat(self.fd).st_uid == os.geteuid():
            os.fchmod(self.fd, 0o600)  # made by an older version, or by a umask that widened it
        self.locked = False

    def try_lock(self) -> bool:
        assert self.fd is not None
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        self.locked = True
        return True

    def read(self) -> dict[str, Any] | None:
        """The record; None while it is being written (or was never written)."""
        assert self.fd is not None
        raw = os.pread(self.fd, 1 << 16, 0)
        try:
            data = json.loads(raw)
        except ValueError:
            return None
        return data if isinstance(data, dict) else None

    def write(self, record: dict[str, Any]) -> None:
        assert self.fd is not None and self.locked
        data = json.dumps(record).encode()
        os.pwrite(self.fd, data, 0)
        os.ftruncate(self.fd, len(data))

    def close(self) -> None:
        if self.fd is None:
            return
        if self.locked:
            os.ftruncate(self.fd, 0)  # no record of a server that is gone
        os.close(self.fd)  # frees the lock
        self.fd, self.locked = None, False


@dataclass
class Owner:
    """This server owns the store (its lock held), or the store takes no lock (PostgreSQL, in memory)."""

    file: OwnerFile | None
    record: dict[str, Any]

    @property
    def held(self) -> bool:
        return self.file is None or self.file.locked

    def require(self) -> None:
        if not self.held:
            raise RuntimeError("the store's owner lock was released: this server must not start the engine")

    def listening(self, serverapp: Any) -> None:
        """The server listens now: its URLs go into the record, for a second server to be its client."""
        if self.file is None or not self.file.locked:
            return
        self.record.update(served_urls(serverapp))
        self.file.write(self.record)

    def release(self) -> None:
        if self.file is not None:
            self.file.close()


@dataclass
class Client:
    """Another server owns the store; this one forwards the API to it."""

    url: str
    token: str
    owner: dict[str, Any]
    db: str

    def describe(self) -> str:
        return (
            f"the store {self.db} is owned by the Jupyter server pid {self.owner['pid']} at {self.owner['url']} "
            f"(root {self.owner['root_dir']}): this server is its client (/gpuplat/api is forwarded there; "
            "no engine, executor or config_file here)"
        )

    def owner_gone(self) -> bool:
        return not _alive(self.owner["pid"]) or not os.path.exists(str(self.owner.get("runtime_file")))


@dataclass
class Refused:
    error: StoreInUse


Claim = Owner | Client | Refused


def owner_path(db_url: str) -> str | None:
    """`<db>.owner` beside a SQLite file; None for PostgreSQL or an in-memory database."""
    path = sqlite_path(db_url)
    return os.path.abspath(path) + OWNER_SUFFIX if path else None


def served_urls(serverapp: Any) -> dict[str, Any]:
    """How to reach a listening Jupyter server: `url` for people, `local_url` on loopback for a client."""
    ip = str(serverapp.ip or "")
    host = "127.0.0.1" if ip in WILDCARD_IPS or ip == "localhost" else (f"[{ip}]" if ":" in ip else ip)
    scheme = "https" if serverapp.certfile else "http"
    local = "" if serverapp.sock else f"{scheme}://{host}:{serverapp.port}{serverapp.base_url}"
    return {"url": serverapp.connection_url, "local_url": local, "sock": serverapp.sock or None}


def _alive(pid: Any) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another account's process
    return True


def read_runtime(path: str) -> dict[str, Any] | str:
    """The owner's Jupyter runtime file (its token), or why it cannot be read."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError) as exc:
        return f"its runtime file {path} cannot be read ({exc})"
    return data if isinstance(data, dict) else f"its runtime file {path} is not a JSON object"


def client_of(record: dict[str, Any], runtime: dict[str, Any] | str | None, me: Me) -> tuple[str, str] | str:
    """(loopback URL, token) to reach the owner as this server's owner, or why this server cannot."""
    if record.get("uid") != me.uid:
        return f"it runs as another account (uid {record.get('uid')}; this server runs as uid {me.uid})"
    if record.get("host") != me.host:
        return f"it runs on another machine ({record.get('host')})"
    if not record.get("url"):
        return "it is not listening yet"
    if record.get("sock"):
        return f"it listens on a Unix socket ({record['sock']}), which this server does not forward to"
    local = str(record.get("local_url") or "")
    if not local.startswith("http://"):
        return f"it serves HTTPS ({record['url']}), which this server does not forward to"
    if record.get("default_user") != me.default_user:
        return (
            f"its owner is platform user {record.get('default_user')!r} and this server's is {me.default_user!r} "
            "(GpuPlat.default_user): forwarded requests would act as the wrong user"
        )
    if runtime is None or isinstance(runtime, str):
        return runtime or "it wrote no runtime file"
    if runtime.get("pid") != record.get("pid"):
        return f"its runtime file {record.get('runtime_file')} belongs to pid {runtime.get('pid')}"
    token = runtime.get("token")
    if not isinstance(token, str) or not token:
        return "it has no token (a password-only login): this server cannot act for its owner there"
    return local, token


def refusal(db: str, record: dict[str, Any] | None, why: str, me: Me) -> StoreInUse:
    rec = record or {}
    pid, url, root = rec.get("pid", "unknown"), rec.get("url") or "not listening yet", rec.get("root_dir", "unknown")
    mine = os.path.join(me.root_dir, ".gpuplat")
    return StoreInUse(
        f"the store {db} is in use by another Jupyter server (pid {pid}, {url}, root {root}); "
        f"this server serves no platform: it cannot be that server's client because {why}",
        f"open that server's Lab{' at ' + rec['url'] if rec.get('url') else ''}, or start this one on a store of "
        f"its own: --GpuPlat.db_url=sqlite:///{mine}/gpuplat.db --GpuPlat.artifacts_root={mine}/artifacts",
    )


def claim(
    db_url: str,
    me: Me,
    *,
    wait_seconds: float,
    clock: Callable[[], float] = time.monotonic,
    poll_seconds: float = POLL_SECONDS,
) -> Claim:
    """Own the store, or be its owner's client, or be refused (module docstring)."""
    path = owner_path(db_url)
    if path is None:
        return Owner(None, me.record())
    db = path[: -len(OWNER_SUFFIX)]
    try:
        file = OwnerFile(path)
    except PermissionError as exc:
        return Refused(refusal(db, None, f"its owner record {path} is another account's ({exc.strerror})", me))
    deadline = clock() + wait_seconds
    record: dict[str, Any] | None = None
    while True:
        if file.try_lock():
            owner = Owner(file, me.record())
            file.write(owner.record)
            return owner
        record = file.read()
        # A record of a dead pid is the last owner's: the new holder is about to write its own.
        ready = record is not None and bool(record.get("url")) and _alive(record.get("pid"))
        if ready or clock() >= deadline:
            break
        time.sleep(poll_seconds)  # another process's file: there is no event to wait on
    file.close()
    if not ready:
        why = f"it did not start listening within {wait_seconds:g} s (GpuPlat.store_owner_wait_seconds)"
        return Refused(refusal(db, record, why, me))
    assert record is not None
    runtime_file = str(record.get("runtime_file") or "")
    target = client_of(record, read_runtime(runtime_file) if runtime_file else None, me)
    if isinstance(target, str):
        return Refused(refusal(db, record, target, me))
    return Client(target[0], target[1], record, db)


def me_of(app: Any) -> Me:
    """The GpuPlat extension's server as a claimant."""
    serverapp = app.serverapp
    return Me(
        pid=os.getpid(),
        uid=os.geteuid(),
        host=socket.gethostname(),
        root_dir=os.path.abspath(os.path.expanduser(serverapp.root_dir)) if serverapp is not None else os.getcwd(),
        default_user=app.default_user,
        runtime_file=str(serverapp.info_file) if serverapp is not None else "",
    )


class OwnerForwardHandler(ForwardHandler):
    """Remote mode's forwarding to the store's owner; an owner that has stopped is said so."""

    async def _forward(self, rest: str) -> None:
        try:
            await super()._forward(rest)
        except BadGateway:
            client: Client = self.settings["gpuplat_store_client"]
            if not client.owner_gone():
                raise
            raise Unavailable(
                f"the Jupyter server that owns the store {client.db} (pid {client.owner['pid']}, "
                f"{client.owner['url']}, root {client.owner['root_dir']}) has stopped; this server was its client",
                "restart this server: it then owns the store",
            ) from None


class StoreInUseHandler(ForwardHandler):
    """Every path under the API answers the refusal (ForwardHandler's error rendering; nothing is forwarded)."""

    def _refuse(self, *args: str) -> None:
        raise self.settings["gpuplat_store_in_use"]

    get = post = put = patch = delete = web.authenticated(_refuse)


def forwarding_handlers() -> list[tuple[str, type[ForwardHandler]]]:
    return [(f"{API}(?P<rest>(?:/.*)?)", OwnerForwardHandler)]


def refusing_handlers() -> list[tuple[str, type[ForwardHandler]]]:
    return [(f"{API}(?:/.*)?", StoreInUseHandler)]
