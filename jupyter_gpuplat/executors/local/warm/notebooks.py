"""The warm notebook launcher: `python -m jupyter_gpuplat.executors.local.warm.notebooks FD [SPARES]`.

A notebook run spends seconds before its first cell: a fresh interpreter, importing nbclient,
jupyter_client and nbformat, then a second fresh interpreter for the kernel importing ipykernel
and IPython. This process imports all of that once (nothing that touches a GPU) and then serves
runs exactly like warm/launcher.py (same protocol, same spares, same launcher code), except
that a `python -m jupyter_gpuplat.nbrun NOTEBOOK` command is not exec'd: the run's launcher
forks it, and nbrun's kernel is forked too (`ForkingKernelManager`) instead of started as
`python -m ipykernel_launcher`.

Isolation stays exact because every fork happens after the run's own state is in place: the
run's launcher has already replaced `os.environ` with the run's env (CUDA_VISIBLE_DEVICES,
GPUPLAT_PARAMS, ...) and is in its session; the kernel child takes the env jupyter_client built
for it, its cwd, its own session, and `sys.path[0]` = its cwd as `python -m` would give it. The
executor sends a notebook here only when the run's PYTHON* variables equal this process's (a
PYTHONPATH of the run's own is only honoured by a fresh interpreter).
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import traceback
import uuid
from collections.abc import Callable
from typing import Any

# Imported here, before any fork, so that no run pays for them (ipykernel for the kernel).
import ipykernel.kernelapp
import jupyter_client
import nbclient
import nbformat  # noqa: F401
from jupyter_client.provisioning import LocalProvisioner

from ....core.request import NBRUN
from ....run import nbrun
from . import launcher as warm_launcher

KERNEL_MODULE = "ipykernel_launcher"


class _ForkedKernel:
    """What LocalProvisioner needs of a Popen, for a kernel we forked."""

    stdout = stderr = None

    def __init__(self, pid: int, stdin_fd: int) -> None:
        self.pid = pid
        self.returncode: int | None = None
        self.stdin = open(stdin_fd, "wb")

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:
                self.returncode = 0
                return self.returncode
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            try:
                self.returncode = os.waitstatus_to_exitcode(os.waitpid(self.pid, 0)[1])
            except ChildProcessError:
                self.returncode = 0
        return self.returncode

    def send_signal(self, signum: int) -> None:
        if self.returncode is None:
            os.kill(self.pid, signum)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)


def _is_this_ipykernel(cmd: list[str]) -> bool:
    return (
        len(cmd) >= 3
        and cmd[1:3] == ["-m", KERNEL_MODULE]
        and os.path.realpath(cmd[0]) == os.path.realpath(sys.executable)
    )


class ForkingProvisioner(LocalProvisioner):
    """Starts this interpreter's ipykernel by forking the pre-imported one; anything else as usual."""

    async def launch_kernel(self, cmd: list[str], **kwargs: Any) -> Any:
        if not _is_this_ipykernel(cmd):
            return await super().launch_kernel(cmd, **kwargs)
        env = dict(kwargs.get("env") or os.environ)
        env["JPY_PARENT_PID"] = str(os.getpid())  # as launch_kernel sets it: the kernel ends with us
        cwd = kwargs.get("cwd")
        stdin_r, stdin_w = os.pipe()  # launch_kernel gives the kernel a pipe nobody writes to

        def kernel() -> int:
            # The parent's running loop is not the kernel's (its state survives fork in this thread).
            asyncio.events._set_running_loop(None)
            asyncio.set_event_loop(None)
            os.setsid()  # as jupyter_client's launch_kernel: interrupts go to the kernel's own group
            os.dup2(stdin_r, 0)
            os.close(stdin_r)
            os.close(stdin_w)
            os.environ.clear()
            os.environ.update(env)
            if cwd:
                os.chdir(cwd)
            del sys.path[0]  # ipykernel_launcher drops the cwd `python -m` put first (IPython adds it back)
            sys.argv = [cmd[0], *cmd[3:]]
            app = ipykernel.kernelapp.IPKernelApp.instance()
            # its default was read from the env when ipykernel was imported, before this kernel's env
            app.parent_handle = int(env["JPY_PARENT_PID"])
            app.initialize(cmd[3:])
            app.start()
            return 0

        pid = _fork(kernel, exit_code_of_none=0)
        os.close(stdin_r)
        self.process = _ForkedKernel(pid, stdin_w)  # type: ignore[assignment]  # what it uses of a Popen
        self.pid = pid
        self.pgid = pid
        self.cwd = cwd or os.getcwd()
        return self.connection_info


class ForkingKernelManager(jupyter_client.AsyncKernelManager):
    """An AsyncKernelManager whose local ipykernel is forked (ForkingProvisioner)."""

    async def _async_pre_start_kernel(self, **kw: Any) -> Any:
        self.kernel_id = self.kernel_id or kw.pop("kernel_id", None) or str(uuid.uuid4())
        if self.provisioner is None:
            self.provisioner = ForkingProvisioner(kernel_id=self.kernel_id, kernel_spec=self.kernel_spec, parent=self)
        return await super()._async_pre_start_kernel(**kw)


def _fork_nbrun(command: list[str]) -> int:
    """The run's command, `python -m jupyter_gpuplat.nbrun NOTEBOOK [ARGS]`, forked in our process group."""
    if len(command) < 3 or tuple(command[1:3]) != NBRUN:
        return warm_launcher.launcher.spawn_command(command)  # anything else is exec'd as usual

    def run() -> int:
        # What exec would have closed: the launch lock is the launcher's alone (held = launcher alive).
        os.close(warm_launcher.LOCK_FD)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)  # the launcher's forwarders are not the run's
        signal.signal(signal.SIGINT, signal.default_int_handler)
        sys.path[0] = os.getcwd()  # `python -m` puts its cwd first
        sys.argv = [nbrun.__file__, *command[3:]]
        return nbrun.main(command[3:], kernel_manager_class=ForkingKernelManager)

    return _fork(run, exit_code_of_none=1)


def _fork(child: Callable[[], int], *, exit_code_of_none: int) -> int:
    """Fork; the child runs `child` as a fresh interpreter would run its main, and never returns."""
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid != 0:
        return pid
    code = 1
    try:
        code = child()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else exit_code_of_none
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def main(argv: list[str]) -> int:
    assert nbclient  # imported for the runs
    return warm_launcher.main(argv, spawn=_fork_nbrun)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
