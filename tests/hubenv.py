"""A real JupyterHub (PyPI) with configurable-http-proxy (npm) and the gpuplat control plane as a
Hub-managed service on a real PostgreSQL database, for the team-mode tests.

    from ..hubenv import hub, hub_platform_config  # noqa: F401  (module-scoped fixtures; tests/service/)

    def test_x(hub: HubEnv) -> None:
        tok = hub.token("alice")                      # a token carrying access:services!service=gpuplat
        code, body = hub.call("GET", "gpuplat/api/whoami", tok)   # to the control plane, through the proxy
        url = hub.spawn("alice")                      # alice's server (remote mode), ready

What it starts, in a temp working directory of its own (the proxy's pid file lives there):
- the Hub: `dummy` authenticator, `simple` spawner (servers as this OS user; `--allow-root` as root),
  users alice (group team-a) and bob (group team-b) plus `extra_users`, every user granted the
  service's access scope (`extra_user_scopes`), servers' tokens too (`server_token_scopes`,
  `oauth_client_allowed_scopes`);
- services: `gpuplat` (`python -m jupyter_gpuplat.service.team.server` on a fresh PostgreSQL database,
  the given platform config, the local executor) and `admin-bot`, whose token (`admin_token`) drives
  the Hub's REST API (users, groups, servers, tokens);
- each user's server is `jupyterhub-singleuser` from this venv, in remote mode
  (`GpuPlat.mode=remote`, `GpuPlat.control_plane_url=control_plane_url`).

configurable-http-proxy: $GPUPLAT_TEST_CHP (set by .ci/run), else
`${XDG_CACHE_HOME:-~/.cache}/gpuplat-test/chp-5.3.0`, installed there with npm when missing.
Readiness is polled (the Hub's API through the proxy, the service's health/ready); nothing sleeps.
Anything missing FAILS the tests with the reason; they are never skipped.

Also here: `gpuplat server` control planes started by a test without the Hub's own service
(`ControlPlaneProcess`, the one harness of a control plane subprocess) and the `standby` fixture (a second control
plane on the Hub's database; a module binds it by name, as `hub`).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NoReturn

import httpx
import psycopg
import pytest
from sqlalchemy.engine import make_url

from .pg import psycopg_conninfo
from .waiting import until

CHP_VERSION = "5.3.0"
SERVICE = "gpuplat"
ACCESS_SCOPE = f"access:services!service={SERVICE}"
DEFAULT_GROUPS: dict[str, list[str]] = {"team-a": ["alice"], "team-b": ["bob"]}
VENV_BIN = Path(sys.executable).parent
HERE = Path(__file__).resolve().parent

# Projects granting roles to the Hub groups: team-a's members use project team-a, team-b's team-b.
TEAM_CONFIG = """\
admins: [service:admin-bot]
queues:
  - {name: shared, concurrency: 2, quota: {gpu: 2}}
projects:
  - {name: team-a, groups: {team-a: member}, default_queue: shared}
  - {name: team-b, groups: {team-b: member}, default_queue: shared}
"""


def _fail(msg: str) -> NoReturn:
    pytest.fail(f"JupyterHub for the tests: {msg}", pytrace=False)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def find_chp() -> str:
    """The configurable-http-proxy binary: $GPUPLAT_TEST_CHP, else the cache dir (npm-installed on first use)."""
    given = os.environ.get("GPUPLAT_TEST_CHP")
    if given:
        if not os.access(given, os.X_OK):
            _fail(f"GPUPLAT_TEST_CHP={given!r} is not an executable")
        return given
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    prefix = cache / "gpuplat-test" / f"chp-{CHP_VERSION}"
    binary = prefix / "node_modules" / ".bin" / "configurable-http-proxy"
    if not binary.exists():
        npm = shutil.which("npm")
        if npm is None:
            _fail("npm is not installed: install Node.js 20+ or point GPUPLAT_TEST_CHP at configurable-http-proxy")
        cmd = [npm, "install", "-s", "--no-fund", "--no-audit", "--prefix", str(prefix)]
        res = subprocess.run([*cmd, f"configurable-http-proxy@{CHP_VERSION}"], capture_output=True, text=True)
        if res.returncode != 0 or not binary.exists():
            _fail(f"npm install configurable-http-proxy@{CHP_VERSION} failed:\n{res.stdout}\n{res.stderr}")
    return str(binary)


@contextmanager
def fresh_database(pg_url: str) -> Iterator[str]:
    """A new empty database on the session's PostgreSQL server (module-scoped, unlike pg_db_url)."""
    name = f"gpuplat_hub_{uuid.uuid4().hex[:16]}"
    admin = psycopg_conninfo(pg_url)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield make_url(pg_url).set(drivername="postgresql+psycopg", database=name).render_as_string(hide_password=False)
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def until_alive(
    cond: Any, what: str, timeout: float, proc: subprocess.Popen[bytes] | None = None, log: Path | None = None
) -> Any:
    """`until`, failing early (with the log's tail) when `proc` exits, and with the tail at the deadline."""

    def check() -> Any:
        value = cond()
        if not value and proc is not None and proc.poll() is not None:
            _fail(f"{what}: the process exited with {proc.returncode}\n{_tail(log)}")
        return value

    try:
        return until(check, what, timeout)
    except AssertionError as e:
        _fail(f"{e}\n{_tail(log)}")


def _tail(log: Path | None, lines: int = 60) -> str:
    if log is None:
        return ""
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


class HubEnv:
    """One running Hub; see the module docstring. `stop()` tears everything down."""

    def __init__(
        self,
        workdir: Path,
        db_url: str,
        platform_config: Path,
        *,
        groups: dict[str, list[str]] | None = None,
        extra_users: Sequence[str] = (),
        server_args: Sequence[str] = (),
        service_args: Sequence[str] = (),
        remote_servers: bool = True,
    ) -> None:
        self.workdir = workdir
        self.db_url = db_url
        self.platform_config = platform_config
        self.groups = groups if groups is not None else DEFAULT_GROUPS
        self.users = sorted({u for us in self.groups.values() for u in us} | set(extra_users))
        self.public_port, self.hub_port, self.proxy_api_port, self.service_port = (free_port() for _ in range(4))
        self.url = f"http://127.0.0.1:{self.public_port}/"  # the proxy: what browsers and users reach
        self.hub_api = f"{self.url}hub/api/"
        self.service_prefix = f"/services/{SERVICE}/"
        self.service_url = f"{self.url}services/{SERVICE}/"  # the control plane, through the proxy
        self.control_plane_url = f"http://127.0.0.1:{self.service_port}{self.service_prefix}"  # direct
        self.artifacts_root = workdir / "artifacts"
        self.admin_token = secrets.token_hex(16)
        self.log = workdir / "jupyterhub.log"
        self.server_args = list(server_args)
        self.service_args = list(service_args)
        self.remote_servers = remote_servers
        self.proc: subprocess.Popen[bytes] | None = None
        self.http = httpx.Client(timeout=30)

    # ---- life --------------------------------------------------------------------------
    def config_text(self) -> str:
        service_cmd = [
            sys.executable, "-m", "jupyter_gpuplat.service.team.server",
            f"--GpuPlatServer.db_url={self.db_url}",
            f"--GpuPlatServer.config_file={self.platform_config}",
            f"--GpuPlatServer.artifacts_root={self.artifacts_root}",
            "--GpuPlatServer.leader_retry_seconds=0.5",
            "--LocalExecutor.gpus=4",
            "--LocalExecutor.stop_grace_seconds=2",
            *self.service_args,
        ]  # fmt: skip
        args = ["--allow-root"] if os.geteuid() == 0 else []
        if self.remote_servers:
            args += ["--GpuPlat.mode=remote", f"--GpuPlat.control_plane_url={self.control_plane_url}"]
        args += self.server_args
        roles = [
            {
                "name": "admin-bot",
                "scopes": ["admin:users", "admin:servers", "admin:groups", "tokens", "access:services"],
                "services": ["admin-bot"],
            }
        ]
        cfg: dict[str, Any] = {
            "JupyterHub.ip": "127.0.0.1",
            "JupyterHub.port": self.public_port,
            "JupyterHub.hub_ip": "127.0.0.1",
            "JupyterHub.hub_port": self.hub_port,
            "JupyterHub.db_url": f"sqlite:///{self.workdir / 'jupyterhub.sqlite'}",
            "JupyterHub.cookie_secret_file": str(self.workdir / "jupyterhub_cookie_secret"),
            "JupyterHub.authenticator_class": "dummy",
            "JupyterHub.spawner_class": "simple",
            "JupyterHub.load_groups": {g: {"users": us} for g, us in self.groups.items()},
            "JupyterHub.load_roles": roles,
            "JupyterHub.extra_user_scopes": [ACCESS_SCOPE],
            "JupyterHub.services": [
                {
                    "name": SERVICE,
                    "url": f"http://127.0.0.1:{self.service_port}",
                    "command": service_cmd,
                    "environment": {"PYTHONUNBUFFERED": "1"},
                },
                {"name": "admin-bot", "api_token": self.admin_token},
            ],
            "Authenticator.allowed_users": self.users,
            "ConfigurableHTTPProxy.command": [find_chp()],
            "ConfigurableHTTPProxy.api_url": f"http://127.0.0.1:{self.proxy_api_port}",
            "ConfigurableHTTPProxy.pid_file": str(self.workdir / "jupyterhub-proxy.pid"),
            "Spawner.cmd": [str(VENV_BIN / "jupyterhub-singleuser")],
            "Spawner.args": args,
            "Spawner.home_dir_template": str(self.workdir / "home" / "{username}"),
            "Spawner.server_token_scopes": ["users:activity!user", "access:servers!server", ACCESS_SCOPE],
            "Spawner.oauth_client_allowed_scopes": [ACCESS_SCOPE],
            "Spawner.start_timeout": 60,
            "Spawner.http_timeout": 60,
            "Spawner.environment": {"PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}"},
        }
        lines = ["c = get_config()  # noqa"]
        for key, value in cfg.items():
            lines.append(f"c.{key} = {value!r}")
        return "\n".join(lines) + "\n"

    def start(self, timeout: float = 90) -> HubEnv:
        self.workdir.mkdir(parents=True, exist_ok=True)
        for u in self.users:
            (self.workdir / "home" / u).mkdir(parents=True, exist_ok=True)
        conf = self.workdir / "jupyterhub_config.py"
        conf.write_text(self.config_text())
        env = {k: v for k, v in os.environ.items() if not k.startswith("JUPYTERHUB_")}
        env["PATH"] = f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}"
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "jupyterhub", "-f", str(conf)],
                cwd=self.workdir,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )
        # CHP answers 404 on /hub/api/ until the Hub's routes exist: wait for 200.
        until_alive(
            lambda: self._get_code(self.hub_api) == 200, "the Hub's API through the proxy", timeout, self.proc, self.log
        )
        until_alive(
            lambda: self._get_code(f"{self.control_plane_url}health/ready") == 200,
            "the gpuplat service to be ready (leader)",
            timeout,
            self.proc,
            self.log,
        )
        return self

    def _get_code(self, url: str) -> int:
        try:
            return self.http.get(url).status_code
        except httpx.HTTPError:
            return 0

    def stop(self) -> None:
        try:
            if self.proc is not None and self.proc.poll() is None:
                for u in self.users:  # the Hub stops servers too; asking first keeps its shutdown short
                    try:
                        self.admin("DELETE", f"users/{u}/server")
                    except httpx.HTTPError:
                        pass
                self.proc.send_signal(signal.SIGTERM)
                try:
                    self.proc.wait(60)
                except subprocess.TimeoutExpired:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                    self.proc.wait(10)
        finally:
            self._kill_leftovers()
            self.http.close()

    def _kill_leftovers(self) -> None:
        """The proxy and the service run in sessions of their own: kill them if the Hub left them behind."""
        pid_file = self.workdir / "jupyterhub-proxy.pid"
        pids: list[int] = []
        if pid_file.exists():
            try:
                pids.append(int(pid_file.read_text().strip()))
            except ValueError:
                pass
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit():
                continue
            try:
                cmdline = (proc / "cmdline").read_bytes()
            except OSError:
                continue
            if str(self.workdir).encode() in cmdline or self.db_url.encode() in cmdline:
                pids.append(int(proc.name))
        for pid in pids:
            if pid != os.getpid():
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass

    # ---- REST -------------------------------------------------------------------------------
    def admin(self, method: str, path: str, body: Any = None) -> Any:
        """The Hub's REST API as admin-bot; raises on an error status."""
        r = self.http.request(
            method,
            f"{self.hub_api}{path}",
            headers={"Authorization": f"token {self.admin_token}"},
            content=None if body is None else json.dumps(body),
        )
        r.raise_for_status()
        return r.json() if r.content else None

    def add_user(self, name: str, groups: Sequence[str] = ()) -> None:
        self.admin("POST", f"users/{name}")
        for g in groups:
            try:
                self.admin("POST", f"groups/{g}")
            except httpx.HTTPStatusError as e:
                if e.response.status_code != 409:  # exists
                    raise
            self.admin("POST", f"groups/{g}/users", {"users": [name]})

    def token(self, user: str, scopes: Sequence[str] | None = None, note: str = "test") -> str:
        """A new token of `user`, with the service's access scope unless `scopes` says otherwise."""
        body = {"scopes": list(scopes) if scopes is not None else [ACCESS_SCOPE], "note": note}
        return str(self.admin("POST", f"users/{user}/tokens", body)["token"])

    def call(
        self, method: str, path: str, token: str | None, body: Any = None, *, direct: bool = False
    ) -> tuple[int, Any]:
        """A request to the control plane (through the proxy unless `direct`); (status, JSON or text)."""
        base = self.control_plane_url if direct else self.service_url
        headers = {"Authorization": f"token {token}"} if token else {}
        r = self.http.request(method, base + path, headers=headers, content=None if body is None else json.dumps(body))
        ctype = r.headers.get("Content-Type", "")
        return r.status_code, (r.json() if "json" in ctype and r.content else r.text)

    def spawn(self, user: str, timeout: float = 60) -> str:
        """Start the user's server and wait until the Hub reports it ready; returns its URL (via the proxy)."""
        try:
            self.admin("POST", f"users/{user}/server")
        except httpx.HTTPStatusError as e:
            if e.response.status_code != 400:  # 400: already running
                raise

        def ready() -> bool:
            model = self.admin("GET", f"users/{user}")
            server = (model.get("servers") or {}).get("", {})
            return bool(server.get("ready"))

        until_alive(ready, f"{user}'s server to be ready", timeout, self.proc, self.log)
        return f"{self.url}user/{user}/"

    def service_pid(self) -> int | None:
        """The control plane's pid (its holder name is host:pid)."""
        _, body = self.call("GET", "health/ready", None, direct=True)
        holder = body.get("holder", "") if isinstance(body, dict) else ""
        return int(holder.rsplit(":", 1)[1]) if ":" in holder else None


@pytest.fixture(scope="module")
def hub_platform_config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The platform config the control plane starts with; override in a test module for another."""
    path = tmp_path_factory.mktemp("hub-platform") / "platform.yaml"
    path.write_text(TEAM_CONFIG)
    return path


@pytest.fixture(scope="module")
def hub(pg_url: str, hub_platform_config: Path) -> Iterator[HubEnv]:
    """A running Hub with the gpuplat service on a fresh PostgreSQL database, for one test module."""
    workdir = Path(tempfile.mkdtemp(prefix="gpuplat-hub-"))
    with fresh_database(pg_url) as db_url:
        env = HubEnv(workdir, db_url, hub_platform_config)
        try:
            yield env.start()
        finally:
            env.stop()
            shutil.rmtree(workdir, ignore_errors=True)


# ---- control planes without the Hub's own service (`gpuplat server` started here) ------------

CONTROL_PLANE = [sys.executable, "-m", "jupyter_gpuplat.cli", "server"]


class ControlPlaneProcess:
    """One `gpuplat server` (team mode's control plane) as a subprocess: the one harness of every
    test that starts a control plane outside the Hub (failover, probes, signals, a standby).

    `url` ends in "/" (under `base_url`); `log` holds its output; `proc` is the process.
    """

    def __init__(
        self,
        tmp_path: Path,
        db_url: str,
        *args: str,
        name: str = "server",
        base_url: str = "/",
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
        **popen: Any,
    ) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/" + base_url.strip("/") + ("/" if base_url.strip("/") else "")
        self.log = tmp_path / f"{name}-{self.port}.log"
        self.argv = [
            *CONTROL_PLANE,
            f"--port={self.port}",
            f"--db-url={db_url}",
            f"--artifacts-root={tmp_path / 'artifacts'}",
            *([f"--base-url={base_url}"] if base_url != "/" else []),
            *args,
        ]
        # Not a Hub-managed service unless a test says so: no JUPYTERHUB_* of the developer's shell.
        self.env = env if env is not None else {k: v for k, v in os.environ.items() if not k.startswith("JUPYTERHUB_")}
        self.cwd, self.popen = cwd, popen
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> ControlPlaneProcess:
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                self.argv, stdout=out, stderr=subprocess.STDOUT, env=self.env, cwd=self.cwd, **self.popen
            )
        return self

    def health(self, probe: str = "ready") -> tuple[int, Any] | None:
        """health/<probe>'s status and body once it answers (ready: 200 leader, 503 standby); None before."""
        assert self.proc is not None and self.proc.poll() is None, self.tail()
        try:
            r = httpx.get(self.url + "health/" + probe, timeout=5)
        except httpx.HTTPError:
            return None
        return r.status_code, r.json()

    def role(self) -> str | None:
        answer = self.health()
        return None if answer is None else str(answer[1]["role"])

    def wait_leader(self, timeout: float = 30) -> Any:
        """health/ready's body once it leads."""

        def leading() -> Any:
            answer = self.health()
            return answer[1] if answer is not None and answer[0] == 200 else None

        return until(leading, "the control plane to lead", timeout=timeout)

    def tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def kill(self) -> None:
        """SIGKILL (after SIGCONT: a frozen one too), and reap it."""
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGCONT)
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def standby(hub: HubEnv, tmp_path: Path) -> Iterator[str]:
    """A second control plane on the Hub's database (standing by); its URL."""
    cp = ControlPlaneProcess(
        tmp_path,
        hub.db_url,
        f"--GpuPlatServer.hub_api_url={hub.hub_api}",
        "--GpuPlatServer.holder=standby-1",
        name="standby",
    ).start()
    try:
        until(lambda: (cp.health("live") or (0,))[0] == 200, "the standby to listen", timeout=30)
        yield cp.url
    finally:
        assert cp.proc is not None
        cp.proc.send_signal(signal.SIGTERM)
        assert cp.proc.wait(20) == 0, cp.tail()
