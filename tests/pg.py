"""A real, throw-away PostgreSQL server for the test session.

`pg_url` (session) is a SQLAlchemy URL of an admin database on a server that
either the environment names (GPUPLAT_TEST_PG_URL, e.g.
``postgresql+psycopg://postgres@127.0.0.1:5432/postgres``) or this module
starts: initdb into a temp dir, pg_ctl on a free 127.0.0.1 port with trust
auth, torn down (stop -m immediate, rm -rf) when the session ends.

`pg_db_url` (function) creates a fresh database on that server for one test
and drops it afterwards, so tests never see each other's rows.

PostgreSQL that cannot be found or started FAILS the tests that need it, with
the reason: these tests are never skipped.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import psycopg
import pytest
from sqlalchemy.engine import make_url

from .waiting import until

if TYPE_CHECKING:
    from jupyter_gpuplat.store.store import Store

ENV_URL = "GPUPLAT_TEST_PG_URL"
SERVER_USER = "postgres"  # the OS user that owns the cluster when we run as root; also the DB superuser


def _fail(msg: str) -> None:
    pytest.fail(f"PostgreSQL for the tests: {msg}", pytrace=False)


def find_bindir() -> Path:
    """The bin dir holding initdb/pg_ctl: pg_config --bindir, else the highest /usr/lib/postgresql/*/bin."""
    candidates: list[Path] = []
    pg_config = shutil.which("pg_config")
    if pg_config:
        try:
            out = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True, timeout=10, check=True)
            candidates.append(Path(out.stdout.strip()))
        except (subprocess.SubprocessError, OSError):
            pass

    def version(p: str) -> tuple[int, ...]:
        m = re.search(r"/postgresql/([0-9.]+)/bin$", p)
        return tuple(int(x) for x in m.group(1).split(".") if x) if m else ()

    candidates += [Path(p) for p in sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=version, reverse=True)]
    initdb = shutil.which("initdb")
    if initdb:
        candidates.append(Path(initdb).parent)
    for c in candidates:
        if (c / "initdb").is_file() and (c / "pg_ctl").is_file():
            return c
    _fail(
        "no PostgreSQL server binaries (initdb, pg_ctl) found via pg_config --bindir or /usr/lib/postgresql/*/bin; "
        f"install them (apt-get install -y postgresql) or point {ENV_URL} at a running server"
    )
    raise AssertionError("unreachable")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def psycopg_conninfo(url: str) -> str:
    """A SQLAlchemy URL (postgresql+psycopg://...) as a libpq URI for psycopg.connect."""
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


class LocalCluster:
    """initdb + pg_ctl in a temp dir, as the postgres OS user when running as root."""

    def __init__(self) -> None:
        self.bindir = find_bindir()
        self.as_root = os.geteuid() == 0
        self.root = Path(tempfile.mkdtemp(prefix="gpuplat-pg-"))
        self.data = self.root / "data"
        self.sock = self.root / "sock"
        self.log = self.root / "server.log"
        self.port = 0
        self.started = False

    def _cmd(self, *argv: str) -> list[str]:
        return ["runuser", "-u", SERVER_USER, "--", *argv] if self.as_root else list(argv)

    def _run(self, *argv: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        cmd = self._cmd(*argv)
        return subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=timeout, cwd=self.root)

    def _log_tail(self) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-30:])
        except OSError:
            return "(no server log)"

    def start(self) -> str:
        if self.as_root:
            try:
                shutil.chown(self.root, SERVER_USER, SERVER_USER)
            except (LookupError, OSError) as e:
                _fail(
                    f"running as root but cannot hand {self.root} to OS user {SERVER_USER!r} ({e}); initdb refuses root"
                )
        self.sock.mkdir()
        if self.as_root:
            shutil.chown(self.sock, SERVER_USER, SERVER_USER)
        init = self._run(
            str(self.bindir / "initdb"),
            "-D", str(self.data),
            "-U", SERVER_USER,
            "-A", "trust",
            "-E", "UTF8",
            "--locale=C",
            "--no-sync",
            "--no-instructions",
        )  # fmt: skip
        if init.returncode != 0:
            _fail(f"initdb ({self.bindir}) failed with {init.returncode}:\n{init.stdout}\n{init.stderr}")
        last = ""
        for _ in range(5):  # the free port may be taken between probing and binding: retry on a new one
            self.port = _free_port()
            opts = (
                f"-h 127.0.0.1 -p {self.port} -k {self.sock} "
                "-c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200"
            )
            res = self._run(
                str(self.bindir / "pg_ctl"), "start", "-D", str(self.data), "-l", str(self.log), "-w", "-t", "60",
                "-o", opts,
            )  # fmt: skip
            if res.returncode == 0:
                self.started = True
                return f"postgresql+psycopg://{SERVER_USER}@127.0.0.1:{self.port}/postgres"
            last = f"pg_ctl start failed with {res.returncode}:\n{res.stdout}\n{res.stderr}\n{self._log_tail()}"
            if "already in use" not in last:
                break
        _fail(last)
        raise AssertionError("unreachable")

    def stop(self) -> None:
        try:
            if self.started:
                self._run(str(self.bindir / "pg_ctl"), "stop", "-D", str(self.data), "-m", "immediate", "-w")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)


def _wait_ready(url: str, timeout: float = 30) -> None:
    error: list[psycopg.Error] = []

    def connects() -> bool:
        try:
            with psycopg.connect(psycopg_conninfo(url), connect_timeout=5) as conn:
                conn.execute("SELECT 1")
            return True
        except psycopg.Error as e:
            error[:] = [e]
            return False

    try:
        until(connects, f"PostgreSQL at {make_url(url)!r}", timeout)
    except AssertionError:
        _fail(f"cannot connect to {make_url(url)!r}: {error[-1] if error else 'timed out'}")


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    """SQLAlchemy URL of an admin database on a live PostgreSQL server, for the whole session."""
    external = os.environ.get(ENV_URL)
    if external:
        _wait_ready(external)
        yield external
        return
    cluster = LocalCluster()
    try:
        url = cluster.start()
        _wait_ready(url)
        yield url
    finally:
        cluster.stop()


@pytest.fixture
def pg_db_url(pg_url: str) -> Iterator[str]:
    """A fresh, empty database for one test; dropped (even with connections left open) afterwards."""
    name = f"gpuplat_test_{uuid.uuid4().hex[:16]}"
    admin = psycopg_conninfo(pg_url)
    with psycopg.connect(admin, autocommit=True) as conn:
        # FILE_COPY (PostgreSQL 15+) clones the small template faster than the default WAL_LOG.
        strategy = " STRATEGY = FILE_COPY" if conn.info.server_version >= 150000 else ""
        conn.execute(f'CREATE DATABASE "{name}"{strategy}')
    try:
        yield make_url(pg_url).set(drivername="postgresql+psycopg", database=name).render_as_string(hide_password=False)
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def open_store(url: str) -> Store:
    """A migrated store: revision 0008 made the leader row (id 1, epoch 0)."""
    from sqlalchemy import select

    from jupyter_gpuplat.store import schema
    from jupyter_gpuplat.store.store import Store

    store = Store(url)
    with store.engine.connect() as conn:
        assert conn.execute(select(schema.leader.c.epoch)).all() == [(0,)]
    return store
