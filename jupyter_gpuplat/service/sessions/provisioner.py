"""The kernel provisioner of GPU sessions (entry point `gpuplat-session`).

A session kernelspec names this provisioner with its project and preset. Starting the
kernel submits the lease (or attaches to this notebook's lease: after a server restart the
kernel that kept running is re-adopted, its state intact) and waits for admission; the
executor's kernel agent starts the kernel inside the lease with the lease's GPUs. This
provisioner launches no process itself:

- restart and interrupt stay inside the lease: a restart is the kernel exiting and the agent
  starting it again (a new generation), never a new lease;
- the lease's end (stopped in the sidebar or CLI, idle, timeout) shuts the kernel down through
  the kernel manager, so its restarter does not try to bring it back;
- shutting the kernel down ends the lease (final reason KernelShutdown);
- kernel activity (IOPub status of requests a user makes) feeds the session's idle clock,
  followed from before the kernel is handed out (service/sessions/kernel_activity.py), so a cell sent
  at once is never missed.

The wait for admission is bounded (`launch_wait_seconds`, under common 60 s proxy timeouts);
a lease still queued then fails the start with its position and why, and stays queued: the
notebook (the labextension) starts the kernel again when the lease is admitted.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from typing import Any, cast

import psutil
from jupyter_client.connect import KernelConnectionInfo
from jupyter_client.provisioning.provisioner_base import KernelProvisionerBase
from traitlets import Float, Unicode

from ...core.errors import Conflict, GpuPlatError, Unavailable
from ...core.reasons import Reason
from ...core.status import FINAL, Status
from .client import WAITING, SessionClient, session_client
from .kernel_activity import Activity, KernelReport, follow, subscribe

# How long a busy/idle turn is tried again while the platform cannot be reached (7.5 s in all).
TURN_RETRY_SECONDS = (0.5, 1.0, 2.0, 4.0)
ENDING = frozenset({Status.STOPPING.value, *(s.value for s in FINAL)})


class SessionLaunchError(RuntimeError):
    """The kernel cannot start now; the message is what the notebook shows."""


class GpuSessionProvisioner(KernelProvisionerBase):
    project = Unicode(config=True, help="The project the session's lease is submitted to.")
    preset = Unicode(config=True, help="The session preset of the lease.")
    launch_wait_seconds = Float(
        45.0, config=True, help="Seconds a kernel start waits for the lease to be admitted (under proxy timeouts)."
    )

    run_id: str | None = None
    _client: SessionClient | None = None
    _pid: int | None = None
    _generation: int | None = None
    _connected = False
    _ending = False  # the lease is ending: nothing may start the kernel again
    _restarting = False
    _closing_from_lease = False
    _ready = False  # the kernel answered and was reported ready
    _busy = False  # a user's request is running in it

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._lease_task: asyncio.Task[None] | None = None
        self._follower: asyncio.Task[None] | None = None

    # ---- what the kernel manager asks ----------------------------------------
    @property
    def has_process(self) -> bool:
        return self._connected

    @property
    def client(self) -> SessionClient:
        if self._client is None:
            self._client = session_client()
        return self._client

    async def pre_launch(self, **kwargs: Any) -> dict[str, Any]:
        kwargs = await super().pre_launch(**kwargs)
        if self._ending:
            raise SessionLaunchError(f"GPU session {self.run_id} has ended; start a new kernel for a new session")
        if self.run_id is None:
            notebook = self._notebook((kwargs.get("env") or {}).get("JPY_SESSION_NAME"))
            try:
                run = await self.client.start(self.project, self.preset, notebook, kwargs.get("cwd"))
            except GpuPlatError as exc:  # a policy refusal: its message and the allowed values
                hint = f" ({exc.hint})" if exc.hint else ""
                raise SessionLaunchError(f"GPU session refused: {exc.message}{hint}") from None
            self.run_id = run["id"]
        kwargs["cmd"] = list(self.kernel_spec.argv)
        return kwargs

    async def launch_kernel(self, cmd: list[str], **kwargs: Any) -> KernelConnectionInfo:
        assert self.run_id is not None
        run_id = self.run_id
        row = await self.client.wait_running(run_id, self.launch_wait_seconds)
        if row["status"] in ENDING:
            self.run_id = None
            raise SessionLaunchError(f"GPU session {run_id} ended before its kernel started: {row['message']}")
        if row["status"] in WAITING:
            raise SessionLaunchError(await self._waiting_text(run_id))
        restart = self._generation is not None
        # A kernel being started for a notebook is not idle: the lease counts as busy until the kernel's
        # `ready` starts its idle clock afresh. Seen in CI: a loaded machine took over 3 s from the
        # lease's start to the kernel's first answer, and a 3 s idle limit ended the lease first.
        with contextlib.suppress(GpuPlatError):
            await self.client.report(run_id, "busy")
        info = await self.client.connection(run_id, newer_than=self._generation if self._restarting else None)
        if info is None:
            with contextlib.suppress(GpuPlatError):  # no kernel to wait for: idle from now
                await self.client.report(run_id, "idle")
            raise SessionLaunchError(f"GPU session {run_id} runs but its kernel did not come up; see its log")
        self._pid = info.pop("gpuplat_pid", None)
        self._generation = info.pop("gpuplat_generation", None)
        if isinstance(info.get("key"), str):
            info["key"] = info["key"].encode()
        self.connection_info = cast(KernelConnectionInfo, info)
        self._connected = True
        if self._follower is not None:
            self._follower.cancel()
        # Subscribed before this returns: the kernel manager hands the kernel out only after.
        kc = subscribe(dict(info))
        self._follower = asyncio.ensure_future(self._follow_kernel(kc, restarted=restart and self._restarting))
        if self._lease_task is None:
            self._lease_task = asyncio.ensure_future(self._watch_lease(run_id))
        self._restarting = False
        return self.connection_info

    async def poll(self) -> int | None:
        if self._ending:
            return 0
        if self._pid is not None:
            return None if _alive(self._pid) else 0
        if self._restarting and self.run_id is not None and self._generation is not None:
            # No pid of ours (a remote control plane's kernel): the restart is done when the agent
            # has started the next kernel, which it does once the old one exited.
            with contextlib.suppress(GpuPlatError):
                generation = await self.client.kernel_generation(self.run_id)
                if generation is not None and generation > self._generation:
                    return 0
        return None

    async def wait(self) -> int | None:
        while (code := await self.poll()) is None:
            await asyncio.sleep(0.05)
        return code

    async def send_signal(self, signum: int) -> None:
        if self._pid is not None and _alive(self._pid):
            with contextlib.suppress(ProcessLookupError):
                psutil.Process(self._pid).send_signal(signum)

    async def kill(self, restart: bool = False) -> None:
        await self._end_kernel(signal.SIGKILL, restart)

    async def terminate(self, restart: bool = False) -> None:
        await self._end_kernel(signal.SIGTERM, restart)

    async def shutdown_requested(self, restart: bool = False) -> None:
        if restart:
            self._restarting = True
        else:
            await self._end_lease()

    async def cleanup(self, restart: bool = False) -> None:
        self._connected = False
        if restart:
            self._restarting = True
            return
        await self._end_lease()
        if self._follower is not None:
            self._follower.cancel()
        # The lease watcher ends by itself; it may be what is shutting this kernel down right now.
        if self._lease_task is not None and not self._closing_from_lease:
            self._lease_task.cancel()

    async def get_provisioner_info(self) -> dict[str, Any]:
        info = await super().get_provisioner_info()
        info.update(run_id=self.run_id, pid=self._pid, generation=self._generation)
        return info

    async def load_provisioner_info(self, provisioner_info: dict[str, Any]) -> None:
        await super().load_provisioner_info(provisioner_info)
        self.run_id = provisioner_info.get("run_id")
        self._pid, self._generation = provisioner_info.get("pid"), provisioner_info.get("generation")

    def detach(self) -> None:
        """The server stops and its sessions outlive it: leave the kernel running in its lease.

        The server forgets the kernel (it is removed from the kernel table, so the server's
        shutdown does not stop it); the next server re-adopts it when the notebook starts its
        kernel again.
        """
        self._ending = True
        for task in (self._follower, self._lease_task):
            if task is not None:
                task.cancel()

    # ---- the lease -------------------------------------------------------------
    def _notebook(self, session_name: str | None) -> str | None:
        """The notebook's path relative to the server's root (jupyter_server gives it absolute)."""
        if not session_name:
            return None
        root = getattr(getattr(self.parent, "parent", None), "root_dir", None)
        if root and os.path.isabs(session_name):
            rel = os.path.relpath(session_name, root)
            return None if rel.startswith("..") else rel.replace(os.sep, "/")
        return session_name

    async def _waiting_text(self, run_id: str) -> str:
        ex = await self.client.explain(run_id)
        return f"Waiting for a GPU: {ex['wait_line']}; this notebook connects when admitted"

    async def _end_kernel(self, signum: int, restart: bool) -> None:
        if restart:  # the kernel process only: the agent starts the next one inside the lease
            await self.send_signal(signum)
        else:
            await self._end_lease()

    async def _end_lease(self) -> None:
        if self._ending or self.run_id is None:
            return
        self._ending = True
        with contextlib.suppress(GpuPlatError):  # already ending (stopped, idle): nothing to add
            await self.client.report(self.run_id, "shutdown", self.kernel_id)

    async def _watch_lease(self, run_id: str) -> None:
        """An end from outside (sidebar, CLI, idle, timeout): shut the kernel down through its manager."""
        async for ev in self.client.events(run_id):
            if ev["status"] in ENDING:
                break
            if ev.get("reason") == Reason.REATTACHED and self._ready:
                await self._tell_kernel_state(run_id)
        if self._ending:
            return  # the kernel manager ended it: it is shutting the kernel down already
        self._ending = self._closing_from_lease = True
        self.log.info("gpuplat: session %s ended (%s); shutting its kernel down", run_id, ev.get("reason"))
        manager = getattr(self.parent, "parent", None)  # the server's MultiKernelManager
        if manager is not None and self.kernel_id in getattr(manager, "_kernels", {}):
            with contextlib.suppress(Exception):
                await manager.shutdown_kernel(self.kernel_id, now=True)

    async def _follow_kernel(self, kc: Any, *, restarted: bool) -> None:
        """Report the kernel ready once it shows it is up, then each busy/idle turn of a user's request.

        A report the platform did not take is logged and following goes on: a follower that ended on
        one failed report would leave a long cell counted as idle for its whole run.
        """
        assert self.run_id is not None
        run_id = self.run_id
        activity = Activity("restarted" if restarted else "ready")
        self._ready = self._busy = False

        async def report(event: KernelReport) -> None:
            if event in ("ready", "restarted"):
                self._ready = await self._report_turn(run_id, event, self.kernel_id)
            else:
                self._busy = event == "busy"
                await self._report_turn(run_id, event)

        try:
            await follow(kc, activity, report)
        except Exception:  # the kernel's channels failed: said in the server's log, never lost in a task
            self.log.exception("gpuplat: session %s: stopped following its kernel", run_id)
        finally:
            self._ready = False
            kc.stop_channels()

    async def _report_turn(self, run_id: str, event: str, kernel_id: str | None = None) -> bool:
        """One fact about the kernel, tried again while the platform is briefly unavailable (or, for
        `ready`, has not yet seen the lease running): a `busy` lost to one failed call would let the
        idle clock end a long cell. Given up after TURN_RETRY_SECONDS (the next turn reports afresh;
        a control plane that failed over is told again on re-attach). True: the platform took it."""
        for delay in (*TURN_RETRY_SECONDS, None):
            try:
                await self.client.report(run_id, event, kernel_id)
                return True
            except (Unavailable, Conflict) as exc:
                if delay is None or (isinstance(exc, Conflict) and self._ending):
                    self.log.warning("gpuplat: session %s: %s not reported: %s", run_id, event, exc.message)
                    return False
                why = exc.message
                self.log.info("gpuplat: session %s: %s not reported (%s); again in %ss", run_id, event, why, delay)
                await asyncio.sleep(delay)
            except GpuPlatError as exc:  # refused for good (the lease is not this kernel's any more)
                self.log.warning("gpuplat: session %s: %s not reported: %s", run_id, event, exc.message)
                return False
        return False

    async def _tell_kernel_state(self, run_id: str) -> None:
        """A platform that restarted (or a new leader) watches the lease again from "starting": say it is up."""
        with contextlib.suppress(GpuPlatError):
            await self.client.report(run_id, "ready", self.kernel_id)
            if self._busy:
                await self.client.report(run_id, "busy")


def detach_session_kernels(kernel_manager: Any) -> None:
    """The server stops: its session kernels keep running in their leases (re-adopted by the next server).

    Also forgets the kernel starts that failed (a session still waiting for its GPU, a refused
    one): jupyter_client keeps a failed start in `_pending_kernels` (`_add_kernel_when_ready`
    pops it only on success), and the server's `shutdown_all` then answers 404 for it, which
    aborts the server's cleanup: the process stopped serving but never exited.
    """
    for kernel_id in list(kernel_manager.list_kernel_ids()):
        provisioner = getattr(kernel_manager.get_kernel(kernel_id), "provisioner", None)
        if isinstance(provisioner, GpuSessionProvisioner):
            provisioner.detach()
            kernel_manager.remove_kernel(kernel_id)
    pending = getattr(kernel_manager, "_pending_kernels", {})
    for kernel_id, start in list(pending.items()):
        if start.done() and kernel_id not in kernel_manager:
            del pending[kernel_id]


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False
