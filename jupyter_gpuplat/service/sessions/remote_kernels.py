"""GPU session kernels in remote mode: kernelspecs from the control plane, leases through its API.

The kernelspecs are what `session_specs` offers in embedded mode, built from two reads as
the server's owner (GET projects, GET presets), written to a directory first on the kernel
spec manager's `kernel_dirs`. They are re-read on a timer at fixed deadlines
(`refresh_seconds`), not on the events stream: that stream carries run status changes, not
config changes, and JupyterLab itself re-lists kernelspecs only every 61 s, so two cheap
GETs every 30 s show a config change on the next spec poll. A failed read keeps the specs
the server has (a control plane failing over must not empty the launcher).
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from tornado.ioloop import IOLoop
from traitlets import Float
from traitlets.config import LoggingConfigurable

from ...core.errors import GpuPlatError
from ..remote.control_plane import ControlPlaneAPI
from . import client as session_client
from .http_client import HttpSessionClient
from .kernelspecs import KernelSpecDir, SessionSpec, remote_session_specs
from .provisioner import detach_session_kernels


class RemoteSessionKernels(LoggingConfigurable):
    refresh_seconds = Float(
        30.0, config=True, help="Seconds between re-reads of the session kernelspecs from the control plane."
    )

    def __init__(self, url: str, token: str, kernel_spec_manager: Any, *, user: str = "", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.plane = ControlPlaneAPI(url, token)
        self.specs = KernelSpecDir()
        kernel_spec_manager.kernel_dirs = [self.specs.path, *kernel_spec_manager.kernel_dirs]
        self._timer: asyncio.TimerHandle | None = None
        self._ticking: asyncio.Future[None] | None = None
        self._deadline: float | None = None
        self._closed = False
        session_client.register(lambda: HttpSessionClient(self.plane, user))
        IOLoop.current().add_callback(self._tick)  # the first read as soon as the server's loop runs

    async def refresh(self) -> list[SessionSpec] | None:
        """Read the specs now; None (and the old specs kept) when the control plane does not answer."""
        try:
            projects = await self.plane.call("GET", "projects")
            presets = await self.plane.call("GET", "presets")
        except GpuPlatError as exc:
            self.log.warning("gpuplat: session kernelspecs not refreshed from %s: %s", self.plane.url, exc.message)
            return None
        specs = remote_session_specs(projects, presets)
        if not self._closed:
            self.specs.write(specs)
        return specs

    async def _tick(self) -> None:
        try:
            await self.refresh()
        except Exception:  # an answer we could not read: keep the specs, and the timer
            self.log.exception("gpuplat: session kernelspecs not refreshed from %s", self.plane.url)
        if self._closed:
            return
        loop = asyncio.get_running_loop()
        # The next read at a fixed deadline (a slow read shifts nothing); one already past starts over.
        self._deadline = (self._deadline or loop.time()) + self.refresh_seconds
        if self._deadline < loop.time():
            self._deadline = loop.time() + self.refresh_seconds
        self._timer = loop.call_at(self._deadline, self._start_tick)

    def _start_tick(self) -> None:
        self._ticking = asyncio.ensure_future(self._tick())  # held: a task nobody references may be collected

    def detach(self, kernel_manager: Any) -> None:
        """The server stops: session kernels keep their leases (the next server re-adopts them)."""
        detach_session_kernels(kernel_manager)

    def close(self) -> None:
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
        session_client.register(None)
        self.plane.close()
        self.specs.remove()


def offer_remote_session_kernels(app: Any, kernel_spec_manager: Any) -> RemoteSessionKernels:
    """Remote mode's session kernels for `app` (the GpuPlat extension: `control_plane_url`, its config).

    Call once from `initialize_settings`; in `stop_extension`, `handle.detach(kernel_manager)`
    then `handle.close()`. Kernels act as the server's owner: `GpuPlat.control_plane_token`, else
    $JUPYTERHUB_API_TOKEN (the owner's; the Hub's server_token_scopes grant it the service).
    """
    token = getattr(app, "control_plane_token", "") or os.environ.get("JUPYTERHUB_API_TOKEN", "")
    user = str(os.environ.get("JUPYTERHUB_USER") or getattr(app, "default_user", ""))
    return RemoteSessionKernels(app.control_plane_url, token, kernel_spec_manager, user=user, parent=app)
