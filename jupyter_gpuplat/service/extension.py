"""The Jupyter server extension: configuration, wiring and lifecycle.

Embedded mode: the store, the engine and the local executor live in the Jupyter
server process. The engine starts when the server's loop runs (or on the first
request, whichever comes first) and stops without killing runs, so a restarted
server re-attaches to them.

One server owns an embedded SQLite store (service/store_owner.py): a second server started on
it (another folder, the same default store) runs no engine and applies no config_file; it
forwards `/gpuplat/api/*` to the owner as remote mode does, or answers 409 `StoreInUse`.

Remote mode (`GpuPlat.mode = "remote"`, team mode): the server builds no store, engine or
executor and holds no database URL or cluster credentials; `/gpuplat/api/*` is forwarded to
`GpuPlat.control_plane_url` as the visiting user (service/remote/forward.py).
"""

from __future__ import annotations

import asyncio
import getpass
import os
from pathlib import Path
from typing import Any

from jupyter_core.paths import jupyter_data_dir
from jupyter_server.extension.application import ExtensionApp
from traitlets import Enum, Float, Unicode, default

from ..core.config import PlatformConfig, load_config_text
from ..core.errors import Unavailable
from ..engine.engine import Engine
from ..executors.base import Executor, ExecutorError
from ..executors.local.users import unreachable_by_others
from ..store import Store
from .private_files import exposed, make_store_private
from .remote.forward import ControlPlane
from .remote.forward import make_handlers as make_forwarding_handlers
from .routes import make_handlers
from .sessions import client as session_client
from .sessions.client import InProcessSessionClient
from .sessions.kernelspecs import KernelSpecDir, session_specs
from .sessions.provisioner import detach_session_kernels
from .sessions.remote_kernels import RemoteSessionKernels, offer_remote_session_kernels
from .settings import PlatformSettings
from .store_owner import Client, Owner, Refused, claim, forwarding_handlers, me_of, refusing_handlers


class Platform:
    """The running platform: store, executor, engine; shared by every handler."""

    def __init__(self, app: GpuPlat, owner: Owner | None = None) -> None:
        self.app = app
        # The store's owner lock, taken before anything below opens the store; None: the caller
        # answers for one engine per store (team mode's control plane: the leader lock).
        self.owner = owner
        self.store = Store(app.db_url, busy_timeout_seconds=app.db_busy_timeout_seconds)
        self.executor: Executor = app.executor_class(parent=app, config=app.config)  # type: ignore[abstract]
        self.engine = Engine(
            self.store,
            self.executor,
            artifacts_root=app.artifacts_root,
            safety_tick_seconds=app.safety_tick_seconds,
            min_free_artifacts_bytes=app.min_free_artifacts_bytes,
        )
        self._started: asyncio.Future[None] | None = None
        self.kernelspecs: KernelSpecDir | None = None

    @property
    def session_user(self) -> str:
        """Whose kernels this server starts: JupyterHub's user, else the server's owner."""
        return os.environ.get("JUPYTERHUB_USER") or self.app.default_user

    def offer_session_kernels(self, kernel_spec_manager: Any) -> None:
        """Session kernelspecs first on the server's kernel dirs, rewritten on each config change."""
        self.kernelspecs = KernelSpecDir()
        kernel_spec_manager.kernel_dirs = [self.kernelspecs.path, *kernel_spec_manager.kernel_dirs]
        specs = self.kernelspecs

        def refresh(cfg: PlatformConfig) -> None:
            specs.write(session_specs(cfg, self.session_user))

        self.engine.on_config(refresh)
        session_client.register(lambda: InProcessSessionClient(self.engine, self.session_user))

    async def ensure_started(self) -> None:
        if self._started is None:
            self._started = asyncio.ensure_future(self._start())
        try:
            await asyncio.shield(self._started)
        except Unavailable:
            # The database was down at start-up: the next request tries again.
            self._started = None
            raise

    @property
    def runs_as_users(self) -> bool:
        return getattr(self.executor, "run_as", None) == "user"

    async def _start(self) -> None:
        if self.owner is not None:
            self.owner.require()  # no engine and no config_file without the store's owner lock
        cfg: PlatformConfig | None = None
        if self.app.config_file:
            cfg = load_config_text(Path(self.app.config_file).read_text())
        await self.engine.start(cfg, source=self.app.config_file, by="config_file")
        if self.runs_as_users:
            make_store_private(self.app.db_url)  # made by the migrations just now, if it is new

    async def close(self) -> None:
        if self._started is not None and self._started.done():
            await self.engine.close()
        self.store.close()
        if self.kernelspecs is not None:
            self.kernelspecs.remove()
            session_client.register(None)
        if self.owner is not None:
            self.owner.release()  # last: the engine is closed, another server may own the store now


class GpuPlat(PlatformSettings, ExtensionApp):
    """The Jupyter server extension: the platform in this server (embedded) or a forwarder to it (remote).

    The platform's own settings (db_url, artifacts_root, executor_class, ...) are `PlatformSettings`,
    shared with `gpuplat server`; the ones here are the extension's alone.
    """

    name = "jupyter_gpuplat"
    description = "Shared, enforced GPU queues for JupyterLab"

    mode = Enum(
        ["embedded", "remote"],
        "embedded",
        config=True,
        help="embedded: the platform (store, engine, executor) runs in this server. remote: this server holds none "
        "of it and forwards /gpuplat/api/* to GpuPlat.control_plane_url as the visiting user (team mode).",
    )
    control_plane_url = Unicode(
        "",
        config=True,
        help="Remote mode: the control plane's base URL (its API is <url>gpuplat/api/), e.g. "
        "http://hub:8081/services/gpuplat/ or the `gpuplat server` Deployment's URL.",
    )
    control_plane_token = Unicode(
        "",
        config=True,
        help="Remote mode, outside JupyterHub: the token sent for the server's owner (kernels, the CLI, a password "
        "login). Under JupyterHub leave it empty: the visitor's Hub token is sent, and $JUPYTERHUB_API_TOKEN for "
        "the owner.",
    )
    control_plane_timeout_seconds = Float(
        60.0,
        config=True,
        help="Remote mode: seconds a forwarded request may take (streams and downloads have no limit).",
    )
    store_owner_wait_seconds = Float(
        30.0,
        config=True,
        help="Seconds a server whose SQLite store another server owns waits at start-up for that server to listen "
        "(two started at once), to become its client; past it, /gpuplat/api answers 409 StoreInUse.",
    )

    @default("db_url")
    def _db_url_default(self) -> str:
        return "sqlite:///" + os.path.join(jupyter_data_dir(), "gpuplat", "gpuplat.db")

    @default("artifacts_root")
    def _artifacts_root_default(self) -> str:
        return os.path.join(jupyter_data_dir(), "gpuplat", "artifacts")

    @default("default_user")
    def _default_user_default(self) -> str:
        try:
            return getpass.getuser()
        except Exception:  # no passwd entry in some containers
            return "owner"

    platform: Platform | None = None
    control_plane: ControlPlane | None = None
    remote_sessions: RemoteSessionKernels | None = None
    store_claim: Owner | Client | Refused | None = None

    def initialize_settings(self) -> None:
        if self.mode == "remote":
            # Nothing of the platform here: no Store, Engine, executor; db_url is never even read.
            if not self.control_plane_url:
                raise ValueError("GpuPlat.mode is remote but GpuPlat.control_plane_url is empty")
            self.control_plane = ControlPlane(
                self.control_plane_url, self.control_plane_token, self.control_plane_timeout_seconds
            )
            self.settings["gpuplat_remote"] = self.control_plane
            # Session kernels through the control plane's API (embedded mode's offer_session_kernels is not called).
            if self.serverapp is not None:
                self.remote_sessions = offer_remote_session_kernels(self, self.serverapp.kernel_spec_manager)
            return
        # Before any Store, executor or engine: a second server on this store must own none of it.
        claimed = self.store_claim = claim(self.db_url, me_of(self), wait_seconds=self.store_owner_wait_seconds)
        if isinstance(claimed, Client):
            self.log.warning("gpuplat: %s", claimed.describe())
            self.control_plane = ControlPlane(claimed.url, claimed.token, self.control_plane_timeout_seconds)
            self.settings.update(gpuplat_remote=self.control_plane, gpuplat_store_client=claimed)
            if self.serverapp is not None:
                self.remote_sessions = RemoteSessionKernels(
                    claimed.url, claimed.token, self.serverapp.kernel_spec_manager, user=self.default_user, parent=self
                )
            return
        if isinstance(claimed, Refused):
            self.log.error("gpuplat: %s. %s", claimed.error.message, claimed.error.hint)
            self.settings["gpuplat_store_in_use"] = claimed.error
            return
        Path(self.artifacts_root).mkdir(parents=True, exist_ok=True)
        try:
            self.platform = Platform(self, claimed)
        except ExecutorError as exc:  # e.g. run_as = user on a server that cannot switch users
            self.log.critical("gpuplat: %s. %s", exc.message, exc.hint)
            raise SystemExit(f"gpuplat: {exc.message}. {exc.hint}") from None
        if self.platform.runs_as_users and self.serverapp is not None:
            problems = exposed(self.serverapp.loaded_config_files, [self.serverapp.runtime_dir])
            unreachable = unreachable_by_others(self.artifacts_root, execute=True)
            if unreachable:  # every run would fail to enter its own directory
                problems.append(f"runs' accounts cannot reach GpuPlat.artifacts_root ({unreachable})")
            if problems:
                message = "LocalExecutor.run_as = 'user' cannot hold here: " + "; ".join(problems)
                self.log.critical("gpuplat: %s", message)
                raise SystemExit(f"gpuplat: {message}")
        self.settings["gpuplat"] = self.platform
        if self.serverapp is not None:
            self.platform.offer_session_kernels(self.serverapp.kernel_spec_manager)

    def initialize_handlers(self) -> None:
        if self.mode == "remote":
            self.handlers.extend(make_forwarding_handlers())
        elif isinstance(self.store_claim, Client):
            self.handlers.extend(forwarding_handlers())
        elif isinstance(self.store_claim, Refused):
            self.handlers.extend(refusing_handlers())
        else:
            self.handlers.extend(make_handlers())

    async def _start_jupyter_server_extension(self, serverapp: Any) -> None:
        if self.platform is not None:
            if self.platform.owner is not None:  # its URL is known now: a second server becomes its client
                self.platform.owner.listening(serverapp)
            await self.platform.ensure_started()

    async def stop_extension(self) -> None:
        if self.remote_sessions is not None:
            if self.serverapp is not None:  # session kernels keep their leases, as in embedded mode
                self.remote_sessions.detach(self.serverapp.kernel_manager)
            self.remote_sessions.close()
        if self.control_plane is not None:
            await self.control_plane.aclose()
        if self.platform is None:
            return
        # Before the server shuts its kernels down (extensions stop first): sessions keep running.
        if self.serverapp is not None:
            detach_session_kernels(self.serverapp.kernel_manager)
        await self.platform.close()
