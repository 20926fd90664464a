"""What a local run's processes are started as: the launcher's argv, a session's kernel agent and kernel."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from ...core import artifacts as layout
from .process import LAUNCHER_LOCK_FD
from .users import Account

LAUNCHER = str(Path(__file__).with_name("launcher.py"))
KERNEL_AGENT = str(Path(__file__).parent.parent / "kernel_agent.py")  # shared with the Kubernetes executor


# Longest Unix socket path (sun_path holds 108 bytes with its NUL): ipc sockets are <dir>/kernel-N
MAX_IPC_PATH = 100


def kernel_command(python: str, workdir: str, private: bool = False) -> list[str]:
    """A session: the kernel agent (stdlib only) keeping ipykernel alive, ports picked now (after admission).

    `private` (runs as their users): the kernel listens on Unix sockets in the run's 0700 directory,
    where no other account reaches it, rather than on TCP ports any local process may connect to.
    """
    connection_file = layout.in_run(workdir, layout.KERNEL)
    kernel = [python, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    agent = [python, "-I", "-S", KERNEL_AGENT, "--connection-file", connection_file]
    if private and len(os.path.join(os.path.dirname(connection_file), "kernel-5")) <= MAX_IPC_PATH:
        agent += ["--transport", "ipc"]
    return [*agent, "--", *kernel]


def python_env(env: Mapping[str, str]) -> dict[str, str]:
    """What a fresh interpreter reads at start-up (PYTHONPATH, PYTHONHASHSEED, ...)."""
    return {k: v for k, v in env.items() if k.startswith("PYTHON") and k != "PYTHONUNBUFFERED"}


def launcher_argv(
    exit_file: str, cwd: str, account: Account | None, cgroups: Sequence[str], command: Sequence[str]
) -> list[str]:
    """launcher.py started directly (not forked by a warm launcher), its lock at LAUNCHER_LOCK_FD."""
    # -I -S: the launcher needs only the stdlib and must not see the run's PYTHON* settings
    argv = [sys.executable, "-I", "-S", LAUNCHER, "--exit-file", exit_file, "--cwd", cwd]
    argv += ["--lock-fd", str(LAUNCHER_LOCK_FD)]
    if account is not None:
        argv += ["--as", f"{account.uid}:{account.gid}:{','.join(map(str, account.groups))}"]
    for procs in cgroups:
        argv += ["--cgroup", procs]
    return [*argv, "--", *command]
