"""`gpuplat server`: the team-mode control plane, one for every user's Jupyter server.

The same routes, engine, store and executor as embedded mode (`service.extension.Platform`,
`service.routes.make_handlers()`), served by a plain tornado application: no kernels, contents or
terminals, which a full Jupyter server would expose to every Hub user. Identity comes from
JupyterHub (`hub_identity.HubIdentityProvider`); the platform applies its own policy, so the
jupyter_server authorizer allows every authenticated request.

Run it as a JupyterHub-managed service (address, prefix, API URL and token come from the Hub's
`JUPYTERHUB_*` variables) or as its own Deployment (set them by flags). PostgreSQL only.

Exactly one control plane dispatches: each campaigns for the leader lock (`store.leader`,
`service.leadership`). A standby answers the API with 503 `NotLeader` and reports not-ready; once
elected it fences the store with its epoch and starts the engine by the restart path (re-attach);
deposed, it stops and exits non-zero so that its supervisor restarts it as a standby.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import signal
import socket
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast
from urllib.parse import urlparse

from jupyter_server.auth.authorizer import AllowAllAuthorizer
from jupyter_server.utils import url_path_join
from tornado import httpserver, web
from traitlets import Float, Int, List, Type, Unicode, default, validate
from traitlets.config import Application, catch_config_error

from ...core.errors import NotLeader, Unavailable
from ...executors.local.executor import LocalExecutor
from ...store.leader import LeaderLock
from ...store.urls import backend_of
from ..auth import TokenMapIdentityProvider
from ..extension import Platform
from ..routes import make_handlers
from ..settings import PlatformSettings
from .health import LiveHandler, ReadyHandler
from .hub_identity import HubIdentityProvider, access_scopes_for
from .leadership import Leadership
from .prom import ControlPlaneMetrics, PrometheusHandler

log = logging.getLogger(__name__)

EXIT_FAILED = 1  # the leader could not start (a bad config file, a database without our tables)
EXIT_DEPOSED = 3  # the supervisor (the Hub, Kubernetes) restarts us as a standby
EXIT_BAD_CONFIG = 2
LEADER_HINT_TTL_SECONDS = 1.0
START_RETRY_SECONDS = 2.0


def check_db_url(url: str) -> str | None:
    """Why `url` cannot be the control plane's store, or None when it can (PostgreSQL only)."""
    allowed = "a PostgreSQL URL, e.g. postgresql+psycopg://gpuplat:PASSWORD@db:5432/gpuplat"
    if not url:
        return f"no db_url: set --GpuPlatServer.db_url (or $GPUPLAT_DB_URL) to {allowed}"
    try:
        backend = backend_of(url)
    except Exception:
        return f"db_url is not a database URL; give {allowed}"
    if backend != "postgresql":
        return (
            f"db_url names a {backend} database; the control plane is shared by every user and needs "
            f"{allowed} (SQLite is for embedded mode only; `gpuplat db copy` moves an embedded store over)"
        )
    return None


class ControlPlane(Platform):
    """The platform behind the control plane: it serves the API only while it leads."""

    def __init__(self, app: GpuPlatServer) -> None:
        super().__init__(cast(Any, app))  # Platform reads the same trait names from either app
        self.is_leader = False
        self.epoch: int | None = None
        self.holder = app.holder
        self._leader_seen: tuple[float, str] = (0.0, "")
        self.leadership: Leadership | None = None

    @property
    def started(self) -> bool:
        f = self._started
        return f is not None and f.done() and not f.cancelled() and f.exception() is None

    async def ensure_started(self) -> None:
        if not self.is_leader:
            raise NotLeader(
                f"this control plane ({self.holder}) is a standby",
                self._leader_hint() + "; retry: the Service sends requests to the leader (health/ready)",
            )
        await super().ensure_started()

    def lead(self, epoch: int) -> asyncio.Task[None]:
        """Elected: fence the store with our epoch, then start by the restart path (re-attach).

        The start runs as a task, so that the campaign's heartbeats go on meanwhile (a long reload
        must not let the lock's session idle out); requests wait for the same start.
        """
        # A refused (fenced) write deposes us at once, not at the next heartbeat.
        self.store.fence(epoch, on_lost=self.leadership.lost if self.leadership is not None else None)
        self.epoch = epoch
        self.is_leader = True
        return asyncio.ensure_future(self._keep_starting())

    async def _keep_starting(self) -> None:
        while self.is_leader:
            try:
                await self.ensure_started()
                return
            except NotLeader:
                return
            except Unavailable as e:  # the database is down for now: try again (requests would too)
                log.warning("the engine could not start yet (%s); retrying in %gs", e.message, START_RETRY_SECONDS)
            await asyncio.sleep(START_RETRY_SECONDS)

    def _leader_hint(self) -> str:
        at, hint = self._leader_seen
        if time.monotonic() - at > LEADER_HINT_TTL_SECONDS:
            hint = self._read_leader()
            self._leader_seen = (time.monotonic(), hint)
        return hint

    def _read_leader(self) -> str:
        try:
            holder, epoch = self.store.leader()
        except Exception as e:  # a hint only: the 503 stands without it
            return f"the leader is unknown (the store did not answer: {type(e).__name__})"
        if not holder:
            return "no leader has been elected yet"
        return f"the leader is {holder} (epoch {epoch})"


class GpuPlatServer(PlatformSettings, Application):
    """The team-mode control plane (a tornado app; traits are the flags, see --help-all)."""

    name = "gpuplat-server"
    description = "The gpuplat control plane: shared queues and policy for every user's Jupyter server (PostgreSQL)."
    examples = (
        "gpuplat server --db-url=postgresql+psycopg://gpuplat@db/gpuplat --config-file=platform.yaml\n"
        "gpuplat server --help-all"
    )
    aliases = {  # noqa: RUF012 (traitlets' own attribute)
        "ip": "GpuPlatServer.ip",
        "port": "GpuPlatServer.port",
        "base-url": "GpuPlatServer.base_url",
        "db-url": "GpuPlatServer.db_url",
        "config-file": "GpuPlatServer.config_file",
        "artifacts-root": "GpuPlatServer.artifacts_root",
        "log-level": "Application.log_level",
        "config": "GpuPlatServer.server_config_file",
    }

    server_config_file = Unicode(
        "",
        config=True,
        help="A traitlets config file (.json or .py) with sections GpuPlatServer, HubIdentityProvider, "
        "KubernetesExecutor, ...: e.g. a ConfigMap's gpuplat_server_config.json. Command-line flags win over it.",
    )

    # ---- where it listens -----------------------------------------------------------
    ip = Unicode(
        config=True, help="Address to listen on (default: the host of $JUPYTERHUB_SERVICE_URL, else 127.0.0.1)."
    )
    port = Int(config=True, help="Port to listen on (default: the port of $JUPYTERHUB_SERVICE_URL, else 8090).")
    base_url = Unicode(
        config=True,
        help="URL prefix of every route (default: $JUPYTERHUB_SERVICE_PREFIX, e.g. /services/gpuplat/, else /). "
        "The API is under <base_url>gpuplat/api/, probes at <base_url>health/live|ready, metrics at <base_url>metrics.",
    )

    # ---- the platform: config_file, db_url, ... are PlatformSettings', shared with GpuPlat ----

    # ---- identity (JupyterHub) --------------------------------------------------------
    hub_api_url = Unicode(config=True, help="JupyterHub API URL (default: $JUPYTERHUB_API_URL).")
    service_name = Unicode(
        config=True, help="This service's name in JupyterHub (default: $JUPYTERHUB_SERVICE_NAME, else gpuplat)."
    )
    access_scopes = List(
        Unicode(),
        config=True,
        help="Scopes of which a caller's token needs one "
        "(default: access:services!service=<service_name> and access:services).",
    )
    identity_provider_class = Type(
        default_value=HubIdentityProvider,
        klass="jupyter_server.auth.identity.IdentityProvider",
        config=True,
        help="Who is calling; the Hub provider in team mode (tests of the platform alone may swap it).",
    )

    # ---- leadership ---------------------------------------------------------------------
    holder = Unicode(config=True, help="This process's name in the leader row (default: <hostname>:<pid>).")
    leader_retry_seconds = Float(2.0, config=True, help="Seconds between a standby's tries for the leader lock.")
    leader_renew_seconds = Float(2.0, config=True, help="Seconds between the leader's heartbeats on its lock session.")
    # 8 s / 12 s, not client-go's 10 s / 15 s: a frozen leader's lock frees after the idle timeout, and
    # the standby's next try (≤ retry) dispatches; 12 + 2 keeps that failover under 15 s.
    leader_renew_deadline_seconds = Float(
        8.0,
        config=True,
        help="Seconds without a successful heartbeat after which the leader steps down (and exits); "
        "shorter than leader_idle_timeout_seconds, so it stops before the database frees the lock.",
    )
    leader_idle_timeout_seconds = Float(
        12.0,
        config=True,
        help="idle_session_timeout of the lock's session: a frozen leader's lock is freed after this long.",
    )

    classes = [HubIdentityProvider, LocalExecutor]  # noqa: RUF012 (traitlets' own attribute)

    @default("ip")
    def _ip_default(self) -> str:
        return urlparse(os.environ.get("JUPYTERHUB_SERVICE_URL", "")).hostname or "127.0.0.1"

    @default("port")
    def _port_default(self) -> int:
        return urlparse(os.environ.get("JUPYTERHUB_SERVICE_URL", "")).port or 8090

    @default("log_level")
    def _log_level_default(self) -> int:
        return logging.INFO

    @default("base_url")
    def _base_url_default(self) -> str:
        return os.environ.get("JUPYTERHUB_SERVICE_PREFIX") or "/"

    @validate("base_url")
    def _slashes(self, proposal: Any) -> str:
        value = "/" + str(proposal["value"]).strip("/") + "/"
        return "/" if value == "//" else value

    @default("db_url")
    def _db_url_default(self) -> str:
        return os.environ.get("GPUPLAT_DB_URL", "")

    @default("default_user")
    def _default_user_default(self) -> str:
        return "gpuplat"  # no request lacks a user with the Hub provider

    @default("artifacts_root")
    def _artifacts_root_default(self) -> str:
        return os.path.join(os.getcwd(), "gpuplat-artifacts")

    @default("hub_api_url")
    def _hub_api_url_default(self) -> str:
        return os.environ.get("JUPYTERHUB_API_URL", "")

    @default("service_name")
    def _service_name_default(self) -> str:
        return os.environ.get("JUPYTERHUB_SERVICE_NAME") or "gpuplat"

    @default("access_scopes")
    def _access_scopes_default(self) -> list[str]:
        return access_scopes_for(self.service_name)

    @default("holder")
    def _holder_default(self) -> str:
        return f"{socket.gethostname()}:{os.getpid()}"

    # ---- life ------------------------------------------------------------------------------
    @catch_config_error
    def initialize(self, argv: Any = None) -> None:
        if argv and any(str(a).startswith("--help") for a in argv):
            # Only for the help: the Kubernetes executor's traits (its import loads the cluster client).
            from ...executors.kubernetes.executor import KubernetesExecutor

            self.classes = [*self.classes, KubernetesExecutor]
        super().initialize(argv)
        if self.server_config_file:
            path = Path(self.server_config_file)
            if path.suffix not in (".json", ".py") or not path.is_file():
                print(f"gpuplat server: config file {path} is not a .json or .py file", file=sys.stderr)
                self.exit(EXIT_BAD_CONFIG)
            self.load_config_file(path.name, path=str(path.parent.resolve()))

    def start(self) -> None:
        problem = check_db_url(self.db_url)
        if problem:
            print(f"gpuplat server: {problem}", file=sys.stderr)
            self.exit(EXIT_BAD_CONFIG)
        code = asyncio.run(self.serve())
        self.exit(code)

    def make_app(self, platform: ControlPlane, metrics: ControlPlaneMetrics, user_root: str) -> web.Application:
        provider = cast(Any, self.identity_provider_class)(parent=self)
        if isinstance(provider, HubIdentityProvider):
            provider.hub_api_url = self.hub_api_url
            provider.service_name = self.service_name
            provider.access_scopes = list(self.access_scopes)
        if isinstance(provider, TokenMapIdentityProvider):
            provider.login_cookies = False  # no cookie secret here, and no XSRF check: the token alone
        base = self.base_url
        handlers: list[Any] = [(url_path_join(base, pattern), h) for pattern, h in make_handlers()]
        handlers += [
            (url_path_join(base, "health/live"), LiveHandler),
            (url_path_join(base, "health/ready"), ReadyHandler, {"platform": platform}),
            (url_path_join(base, "metrics"), PrometheusHandler, {"metrics": metrics}),
        ]
        settings = {
            "gpuplat": platform,
            "base_url": base,
            "identity_provider": provider,
            "authorizer": AllowAllAuthorizer(parent=self),  # the platform's policy decides, per project
            "allow_remote_access": True,  # behind the Hub's proxy or a Service: Host is not localhost
            "disable_check_xsrf": True,  # tokens in a header only, never cookies: nothing to forge
            "server_root_dir": user_root,  # the control plane resolves no user paths: an empty directory
            "serverapp": None,
            "config": self.config,
            "log_function": metrics.observe_request,
        }
        return web.Application(handlers, **settings)

    async def serve(self) -> int:
        Path(self.artifacts_root).mkdir(parents=True, exist_ok=True)
        user_root = tempfile.mkdtemp(prefix="gpuplat-no-user-files-")
        platform = ControlPlane(self)
        metrics = ControlPlaneMetrics(platform)
        server = httpserver.HTTPServer(self.make_app(platform, metrics, user_root), xheaders=True)
        server.listen(self.port, self.ip)
        self.log.info("gpuplat control plane on http://%s:%d%s as %s", self.ip, self.port, self.base_url, self.holder)
        done: asyncio.Future[int] = asyncio.get_running_loop().create_future()

        def finish(code: int) -> None:
            if not done.done():
                done.set_result(code)

        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            # Our own handlers: the Hub stops services with SIGINT, which a service may inherit as ignored.
            loop.add_signal_handler(sig, finish, 0)

        starting: list[asyncio.Task[None]] = []

        async def on_elected(epoch: int) -> None:
            self.log.info("elected leader (epoch %s): starting the engine", epoch)
            metrics.follow(platform.engine.reads)
            starting.append(platform.lead(epoch))
            starting[-1].add_done_callback(engine_started)

        def engine_started(t: asyncio.Task[None]) -> None:
            if not t.cancelled() and t.exception() is not None:  # a bad config file, a broken executor
                self.log.error("the engine failed to start", exc_info=t.exception())
                finish(EXIT_FAILED)

        async def on_deposed(reason: str) -> None:
            self.log.error("deposed: %s; stopping dispatch and exiting", reason)
            platform.is_leader = False
            finish(EXIT_DEPOSED)

        campaign = asyncio.ensure_future(self.campaign(platform, on_elected, on_deposed))

        def campaign_ended(t: asyncio.Future[None]) -> None:
            if not t.cancelled() and t.exception() is not None:
                self.log.error("the leader campaign failed", exc_info=t.exception())
                finish(EXIT_FAILED)

        campaign.add_done_callback(campaign_ended)
        try:
            code = await done
        finally:
            server.stop()
            for t in (*starting, campaign):
                t.cancel()
            try:
                await campaign
            except (asyncio.CancelledError, Exception):
                pass
            await metrics.close()
            await platform.close()
            shutil.rmtree(user_root, ignore_errors=True)
        self.log.info("gpuplat control plane stopped (exit %d)", code)
        return code

    async def campaign(self, platform: ControlPlane, on_elected: Any, on_deposed: Any) -> None:
        lock = LeaderLock(self.db_url, holder=self.holder, idle_timeout_seconds=self.leader_idle_timeout_seconds)
        leadership = Leadership(
            lock,
            retry_seconds=self.leader_retry_seconds,
            renew_seconds=self.leader_renew_seconds,
            renew_deadline_seconds=self.leader_renew_deadline_seconds,
            on_elected=on_elected,
            on_deposed=on_deposed,
        )
        platform.leadership = leadership
        try:
            await leadership.run()
        finally:
            await asyncio.to_thread(lock.release)


def main(argv: Sequence[str] | None = None) -> int:
    GpuPlatServer.launch_instance(list(sys.argv[1:] if argv is None else argv))
    return 0


if __name__ == "__main__":
    main()
