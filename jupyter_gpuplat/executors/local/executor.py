"""The local executor: each run is a process group on this machine.

A run is `launcher.py` (the group and session leader) and, under it, the user's
command, started in the run's working directory (the user's, or its artifact directory),
with stdout/stderr in `<workdir>/output.log` and its GPUs in `CUDA_VISIBLE_DEVICES`.
Scripts, notebooks and cells run with this machine's interpreter (`sys.executable`).
The launcher leaves `<workdir>/.gpuplat/exit.json` when the command ends, so the outcome
survives a server restart; a stop request leaves `stop.json` next to it, so a stop
survives one too (layout: core.artifacts).

Starting: by default each run's launcher is forked by the executor's warm launcher
(warm/launcher.py, one long-lived stdlib-only process, started on the first run and again
if it dies), which costs the server's machine far less CPU than a fresh interpreter per
run; with `warm_launcher = False`, or when the warm launcher cannot take a run, launcher.py
is spawned directly (for WARM_RESTART_SECONDS after a warm launcher died, too). Either way the
launcher is the leader of its own session, so runs outlive both the warm launcher and the
server, which the warm launcher never outlives (it ends on EOF from the executor). Notebooks
go to a second warm launcher (warm/notebooks.py: nbclient and ipykernel imported), which
forks nbrun and its kernel instead of exec'ing fresh interpreters (`warm_notebooks`).

Idempotent launch: before starting a launcher, submit takes the run's launch lock
(`.gpuplat/launch.lock`) and hands it to the launcher, which keeps it until it exits and
writes its launch record (`launch.json`) before the command can start. A submit for a run
whose lock is held adopts that launcher (after checking pid, start tick and the lock fd it
holds); one whose lock is free but whose launch or exit record exists reports how the
earlier start ended. So a server that crashed between "dispatched" and saving the handle
never starts a run twice.

Watching: children of this server are watched through a pidfd in the event loop (no
polling); children of the warm launcher are reported by it (it reaps them, after killing
what is left of their group); runs re-attached or adopted are not our children and share
one poll loop. Nothing here writes run state: the final Observation goes to the observer.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import json
import os
import signal
import sys
import time
from collections.abc import Coroutine, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal

import psutil
from traitlets import Bool, Dict, Enum, Float, Integer, List, Unicode, default

from ...core import artifacts as layout
from ...core.reasons import Reason
from .. import safefs
from ..artifacts import FilesystemArtifacts, capture_code, write_cell
from ..base import (
    FAILED,
    RUNNING,
    Device,
    Executor,
    ExecutorError,
    LaunchRequest,
    Observation,
)
from .confine import Confinement
from .connections import connection_env, remove_run_secrets, remove_secret_dir
from .env import DEFAULT_ENV_KEEP, kept, make_env
from .gpus import detect_gpus
from .process import (
    LAUNCH_FILE,
    LAUNCHER_LOCK_FD,
    create_time_from_ticks,
    current_boot_id,
    identify,
    launcher_in_record,
    make_final_observation,
    open_launch_lock,
    open_log,
    process_create_time,
    read_json,
    spawn_launcher,
)
from .users import Account, user_mode_problems
from .warm.client import WarmLauncherError, WarmStart
from .warm.slots import WarmLaunchers, WarmSlot

LAUNCHER = str(Path(__file__).with_name("launcher.py"))
KERNEL_AGENT = str(Path(__file__).parent.parent / "kernel_agent.py")  # shared with the Kubernetes executor
# after SIGKILL, how long stop() waits for the watcher to report the end
KILL_WAIT_SECONDS = 5.0
# how long submit waits for a live launcher (its lock held) to write its launch record
ADOPT_WAIT_SECONDS = 10.0
ADOPT_POLL_SECONDS = 0.01


class _State(enum.Enum):
    ALIVE = "alive"


_ALIVE: Final = _State.ALIVE


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


def _python_env(env: Mapping[str, str]) -> dict[str, str]:
    """What a fresh interpreter reads at start-up (PYTHONPATH, PYTHONHASHSEED, ...)."""
    return {k: v for k, v in env.items() if k.startswith("PYTHON") and k != "PYTHONUNBUFFERED"}


@dataclass(eq=False)
class _Run:
    run_id: str
    pid: int
    create_time: float
    exit_file: str
    own: bool  # our child: watched through a pidfd and reaped here
    timeout_seconds: float | None
    # When the run's command was launched: a spare warm launcher is forked ahead of its run, so
    # its create_time (the process's identity) is not the run's start.
    started_at: float | None = None
    warm: WarmSlot[_Run] | None = None  # the warm launcher whose child it is: it reports the end; pidfd for signals
    process: psutil.Process | None = None  # for re-attached runs: identity-checked
    stop: dict[str, Any] | None = None  # the stop request, as written to stop.json
    done: asyncio.Event = field(default_factory=asyncio.Event)
    pidfd: int | None = None
    loop: asyncio.AbstractEventLoop | None = None
    timer: asyncio.TimerHandle | None = None
    stopping: asyncio.Future[None] | None = None

    @property
    def stop_file(self) -> str:
        return os.path.join(os.path.dirname(self.exit_file), layout.STOP_FILE)


def _exists(state_dir: str, name: str) -> bool:
    """Whether the record is there (a link or a FIFO the run put in its place counts as there: never started twice)."""
    try:
        dirfd = safefs.open_dir(state_dir)
    except OSError:
        return False
    try:
        os.stat(name, dir_fd=dirfd, follow_symlinks=False)
        return True
    except FileNotFoundError:
        return False
    finally:
        os.close(dirfd)


def _remove(workdir: str, rel: str) -> None:
    try:
        dirfd = safefs.open_dir(workdir)
    except FileNotFoundError:
        return
    try:
        safefs.unlink(dirfd, rel)
    finally:
        os.close(dirfd)


class LocalExecutor(FilesystemArtifacts, Executor):
    """Runs each submission as a process group on this machine."""

    name = "local"

    gpus = Integer(
        None,
        allow_none=True,
        min=0,
        help="Declare this many GPUs (devices 0..N-1) instead of asking nvidia-smi. None: detect with nvidia-smi.",
    ).tag(config=True)
    stop_grace_seconds = Float(
        10.0,
        min=0.0,
        help="Seconds between SIGTERM and SIGKILL when a run is stopped or times out.",
    ).tag(config=True)
    inherit_env = Bool(
        True,
        help=(
            "Pass the server's values of the names in env_keep to runs. When False a run sees only PATH, "
            "its account's HOME/USER/LOGNAME/SHELL, its spec's env and the platform variables."
        ),
    ).tag(config=True)
    env_keep = List(
        Unicode(),
        list(DEFAULT_ENV_KEEP),
        help=(
            "Names of the server's environment variables a run gets (an allow-list, as JupyterHub's "
            "Spawner.env_keep): nothing else of the server's environment reaches a run, so no token, database "
            "URL or cloud key does unless named here. Reserved names (CUDA_VISIBLE_DEVICES, GPUPLAT_*, ...) "
            "are always the platform's."
        ),
    ).tag(config=True)
    run_as = Enum(
        ["server", "user"],
        "server",
        help=(
            "server: every run runs as the server's own account (one person's machine; the default for "
            "`gpuplat lab`). user: each run, session kernel and sweep child runs as the Unix account of its "
            "platform user (unix_users), with a 0700 directory of its own; the server must run as root, and "
            "refuses to start saying why when it cannot switch users."
        ),
    ).tag(config=True)
    unix_users = Dict(
        value_trait=Unicode(),
        help="run_as = 'user': platform user → Unix account; a user not listed runs as the account of the same name.",
    ).tag(config=True)
    python = Unicode(
        help=(
            "The interpreter of runs' scripts, notebooks, cells and session kernels (default: the server's own). "
            "With run_as = 'user' every run account must be able to execute it."
        ),
    ).tag(config=True)
    cgroups = Enum(
        ["auto", "off"],
        "auto",
        help=(
            "auto: give each run a cgroup limiting its memory and CPU to its resources, its processes to "
            "pids_max and its GPU device nodes to its own, where this machine lets the server (root, or a "
            "delegated cgroup); capacity.isolation says what holds. off: none."
        ),
    ).tag(config=True)
    pids_max = Integer(
        8192, min=0, help="Processes and threads one run may have at once, with a pids cgroup (0: no limit)."
    ).tag(config=True)
    poll_interval_seconds = Float(
        0.5,
        min=0.01,
        help="Seconds between checks of runs re-attached after a restart (they are not children of this server).",
    ).tag(config=True)
    warm_launcher = Bool(
        True,
        help=(
            "Fork each run's launcher from one long-lived warm launcher process (started with the first run, "
            "again if it dies) instead of starting a fresh Python interpreter per run: a start costs the "
            "server's machine well under a millisecond of CPU instead of ~10-20 ms. False: spawn "
            "launcher.py for every run (also the fallback when the warm launcher cannot take one)."
        ),
    ).tag(config=True)
    warm_notebooks = Bool(
        True,
        help=(
            "With warm_launcher: run notebooks from a second warm launcher that has nbclient and ipykernel "
            "imported already, forking nbrun and its kernel per run (each after the run's env is set), "
            "instead of a fresh interpreter for each. Not for a run whose PYTHON* variables differ from "
            "the server's (a fresh interpreter runs it)."
        ),
    ).tag(config=True)
    nvidia_smi_path = Unicode("nvidia-smi", help="The nvidia-smi used to find GPUs when `gpus` is None.").tag(
        config=True
    )

    @default("python")
    def _python_default(self) -> str:
        return sys.executable

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if self.run_as == "user":
            problems = user_mode_problems(self.python, [KERNEL_AGENT])
            if problems:
                raise ExecutorError(
                    "LocalExecutor.run_as = 'user' cannot work on this machine: " + "; ".join(problems),
                    "fix these, or set LocalExecutor.run_as = 'server' (runs then run as the server's account)",
                )
        self._confine = Confinement(
            self.run_as, self.unix_users, self.pids_max or None, self.cgroups == "auto", self._env_keep(), self.log
        )
        self._runs: dict[str, _Run] = {}
        self._polled: dict[str, _Run] = {}
        self._poll_task: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._detected: list[Device] | None = None
        self._closed = False
        self._submitting: set[str] = set()
        self._warm: WarmLaunchers[_Run] = WarmLaunchers(self._launcher_env, self._finish, self._watch_pidfd, self.log)

    # -- devices ---------------------------------------------------------------------------

    def devices(self) -> list[Device]:
        """Declared GPUs, or those nvidia-smi finds (asked once per executor)."""
        if self.gpus is not None:
            return [Device(i, f"declared GPU {i}", None, None, declared=True, minor=i) for i in range(self.gpus)]
        if self._detected is None:
            self._detected = detect_gpus(self.nvidia_smi_path)
        return list(self._detected)

    # -- submit ----------------------------------------------------------------------------

    async def submit(self, req: LaunchRequest) -> dict[str, Any]:
        """Start the run, or adopt its launcher when one already started it (see the module doc)."""
        if self._closed:
            raise ExecutorError(f"run {req.run_id}: the local executor is closed")
        if req.run_id in self._runs:
            raise ExecutorError(f"run {req.run_id} is already running (pid {self._runs[req.run_id].pid})")
        if req.run_id in self._submitting:
            raise ExecutorError(f"run {req.run_id} is already being started")
        if not os.path.isabs(req.workdir):
            raise ExecutorError(f"run {req.run_id}: workdir must be an absolute path, got {req.workdir!r}")
        if req.working_dir is not None and not os.path.isabs(req.working_dir):
            raise ExecutorError(f"run {req.run_id}: working_dir must be an absolute path, got {req.working_dir!r}")
        if not sys.executable or not self.python:
            raise ExecutorError(f"run {req.run_id}: cannot find the Python interpreter to run the launcher")
        if req.entrypoint.kind == "kernel":
            command = kernel_command(self.python, req.workdir, private=self._confine.by_user)
        else:
            command = req.entrypoint.argv_with(self.python, layout.in_run(req.workdir, layout.CELL))
        if not command or not all(isinstance(arg, str) and arg for arg in command):
            raise ExecutorError(f"run {req.run_id}: the command must be a non-empty list of strings, got {command!r}")
        account = self._confine.account(req)
        state_dir = os.path.dirname(layout.in_run(req.workdir, layout.EXIT))
        try:
            self._confine.prepare(req, account, state_dir)
        except OSError as exc:
            raise ExecutorError(f"run {req.run_id}: cannot prepare {req.workdir}: {exc.strerror or exc}") from exc
        extra, secret_dir = connection_env(req, account)
        # connections after the spec's env; the platform's own variables stay the platform's
        env = make_env(
            os.environ if self.inherit_env else {"PATH": os.environ.get("PATH", "")},
            self._env_keep(),
            account,
            req,
            extra,
        )
        self._submitting.add(req.run_id)
        try:
            for _ in range(3):  # a launcher that ends while we look is looked at again
                handle = await self._start_or_adopt(req, command, env, state_dir, account)
                if handle is not None:
                    if req.run_id in self._runs:
                        secret_dir = None  # the run's now: removed when it ends (_finish)
                    return handle
        finally:
            self._submitting.discard(req.run_id)
            remove_secret_dir(secret_dir)
        raise ExecutorError(f"run {req.run_id}: its launcher kept changing while it was being started")

    async def _start_or_adopt(
        self, req: LaunchRequest, command: list[str], env: dict[str, str], state_dir: str, account: Account | None
    ) -> dict[str, Any] | None:
        try:
            lock_fd, locked = open_launch_lock(state_dir)
        except OSError as exc:
            raise ExecutorError(f"run {req.run_id}: cannot take its launch lock: {exc.strerror or exc}") from exc
        if not locked:
            os.close(lock_fd)
            return await self._adopt(req, state_dir)
        try:
            if _exists(state_dir, LAUNCH_FILE) or _exists(state_dir, layout.EXIT_FILE):
                return self._ended_earlier(req, state_dir)
            return await self._start(req, command, env, lock_fd, account)
        finally:
            with contextlib.suppress(OSError):
                os.close(lock_fd)

    @staticmethod
    def _exit_file(req: LaunchRequest) -> str:
        return layout.in_run(req.workdir, layout.EXIT)

    async def _start(
        self, req: LaunchRequest, command: list[str], env: dict[str, str], lock_fd: int, account: Account | None
    ) -> dict[str, Any] | None:
        """Start a first launcher for the run (we hold its lock). None: look again (the warm launcher died)."""
        workdir = req.workdir
        exit_file = self._exit_file(req)
        log_path = layout.in_run(workdir, layout.LOG)
        try:
            _remove(workdir, layout.STOP)  # a stop of a run that never started
            if req.entrypoint.kind == "cell":
                write_cell(req.entrypoint, workdir)
            log_fd = open_log(log_path)
        except OSError as exc:
            raise ExecutorError(f"run {req.run_id}: cannot prepare {workdir}: {exc.strerror or exc}") from exc
        try:
            cgroups = self._confine.cgroup(req, self.devices())
            slot = self._warm_for(req, env) if self.warm_launcher else None
            warm = self._warm.client(slot) if slot is not None else None
            future = None
            if warm is not None and slot is not None:
                spec: dict[str, Any] = {"argv": command, "env": env, "cwd": req.cwd, "exit_file": exit_file}
                if account is not None:
                    spec["account"] = account.credentials()
                if cgroups:
                    spec["cgroups"] = cgroups
                spare = warm.take_spare()
                handed = spare.hand_over(spec, log_fd, lock_fd) if spare is not None else None
                if handed is not None:  # no await: the spare's pid is known already
                    return self._took_warm(req, handed, slot)
                try:
                    future = warm.launch(spec, log_fd, lock_fd)
                except WarmLauncherError as exc:
                    self.log.warning("gpuplat: run %s: %s; starting its launcher directly", req.run_id, exc)
            if future is None:
                # -I -S: the launcher needs only the stdlib and must not see the run's PYTHON* settings
                argv = [sys.executable, "-I", "-S", LAUNCHER, "--exit-file", exit_file, "--cwd", req.cwd]
                argv += ["--lock-fd", str(LAUNCHER_LOCK_FD)]
                if account is not None:
                    argv += ["--as", f"{account.uid}:{account.gid}:{','.join(map(str, account.groups))}"]
                for procs in cgroups:
                    argv += ["--cgroup", procs]
                argv += ["--", *command]
                try:
                    pid = spawn_launcher(argv, env, log_fd, lock_fd)
                except (OSError, ValueError) as exc:
                    raise ExecutorError(
                        f"run {req.run_id}: cannot start the launcher ({sys.executable}): {exc}"
                    ) from exc
                run = _Run(
                    req.run_id, pid, process_create_time(pid), exit_file, own=True, timeout_seconds=req.timeout_seconds
                )
                self._runs[run.run_id] = run
                self._watch_child(run, asyncio.get_running_loop())
                return self._started(run, req)
        finally:
            os.close(log_fd)
        try:  # the lock stays held by us, by the message, then by the run's launcher
            started = await future
        except WarmLauncherError as exc:
            self.log.warning("gpuplat: run %s: %s; looking again", req.run_id, exc)
            return None
        assert slot is not None
        return self._took_warm(req, started, slot)

    def _took_warm(self, req: LaunchRequest, started: WarmStart, slot: WarmSlot[_Run]) -> dict[str, Any]:
        run = _Run(
            req.run_id,
            started.pid,
            create_time_from_ticks(started.start_ticks),
            self._exit_file(req),
            own=False,
            timeout_seconds=req.timeout_seconds,
            warm=slot,
            pidfd=started.pidfd,
        )
        if self._closed:  # closed while the warm launcher answered: a restarted server attaches to it
            os.close(started.pidfd)
            return self._handle(req, run.pid, run.create_time, time.time())
        self._runs[run.run_id] = run
        tracked, code = self._warm.track(slot, run.pid, run)
        if not tracked:
            self._watch_pidfd(run)
        elif code is not None:  # it already ended: report it once the handle is saved
            asyncio.get_running_loop().call_soon(self._finish, run, code)
        return self._started(run, req)

    def _started(self, run: _Run, req: LaunchRequest) -> dict[str, Any]:
        run.started_at = time.time()
        if req.timeout_seconds:
            self._arm_timeout(run, req.timeout_seconds)
        # No await after this point: the final Observation cannot reach the observer before the handle is returned.
        return self._handle(req, run.pid, run.create_time, run.started_at)

    def _handle(
        self, req: LaunchRequest, pid: int, create_time: float, started_at: float | None = None
    ) -> dict[str, Any]:
        return {
            "executor": self.name,
            "pid": pid,
            "create_time": create_time,
            "started_at": started_at or create_time,
            "boot_time": psutil.boot_time(),
            "boot_id": current_boot_id(),
            "workdir": req.workdir,
            "log_path": layout.in_run(req.workdir, layout.LOG),
            "exit_file": self._exit_file(req),
            "devices": list(req.devices),
            "timeout_seconds": req.timeout_seconds,
        }

    async def _adopt(self, req: LaunchRequest, state_dir: str) -> dict[str, Any] | None:
        """A live launcher holds the run's lock: watch it instead of starting another. None: it ended."""
        deadline = time.monotonic() + ADOPT_WAIT_SECONDS
        while True:
            found = launcher_in_record(state_dir)
            if found is not None:
                break
            lock_fd, locked = open_launch_lock(state_dir)
            os.close(lock_fd)  # closing our descriptor drops the lock we may just have taken
            if locked:
                return None
            if time.monotonic() > deadline:
                raise ExecutorError(
                    f"run {req.run_id}: a launcher holds its launch lock but left no usable launch record "
                    f"in {ADOPT_WAIT_SECONDS:g} s; not starting it a second time"
                )
            await asyncio.sleep(ADOPT_POLL_SECONDS)  # it has just started: its record follows in milliseconds
            if self._closed:
                raise ExecutorError(f"run {req.run_id}: the local executor is closed")
        pid, ticks = found
        create_time = create_time_from_ticks(ticks)
        run = _Run(req.run_id, pid, create_time, self._exit_file(req), own=False, timeout_seconds=req.timeout_seconds)
        run.process = identify(pid, create_time, psutil.boot_time())
        if run.process is None:
            return None
        run.stop = read_json(run.stop_file)
        self.log.info("gpuplat: run %s was started before (pid %d): adopting it, not starting again", req.run_id, pid)
        self._runs[run.run_id] = run
        self._poll(run)
        # The launch moment died with the crashed server: the launcher's start (earlier, for a spare) stands for it.
        if req.timeout_seconds and run.stop is None:
            self._arm_timeout(run, create_time + req.timeout_seconds - time.time())
        return self._handle(req, pid, create_time)

    def _ended_earlier(self, req: LaunchRequest, state_dir: str) -> dict[str, Any]:
        """Started before and its launcher has ended (its lock is free): report that end, never restart it."""
        remove_run_secrets(req.run_id)  # its secret files, if it ended while no server watched it
        self._release(req.run_id)
        launched = read_json(os.path.join(state_dir, LAUNCH_FILE)) or {}
        pid = launched.get("pid") if isinstance(launched.get("pid"), int) else 0
        ticks = launched.get("start_ticks") if isinstance(launched.get("start_ticks"), int) else None
        assert isinstance(pid, int)
        stop = read_json(os.path.join(state_dir, layout.STOP_FILE))
        lost = f"process {pid} was started before and is gone without leaving an exit record"
        observation = make_final_observation(req.run_id, pid, read_json(self._exit_file(req)), None, stop, lost)
        self.log.info("gpuplat: run %s was started before and has ended: %s", req.run_id, observation.message)
        asyncio.get_running_loop().call_soon(self._emit, observation)  # after the handle is saved
        return self._handle(req, pid, create_time_from_ticks(ticks if isinstance(ticks, int) else None))

    # -- the warm launcher -----------------------------------------------------------------

    def _warm_for(self, req: LaunchRequest, env: Mapping[str, str]) -> WarmSlot[_Run]:
        """The notebook warm launcher for a notebook it can run exactly as a fresh interpreter would."""
        if (
            req.entrypoint.kind == "notebook"
            and self.warm_notebooks
            and not self._confine.by_user  # it would run the kernel in a fork of a root process: exec'd instead
            and _python_env(env) == _python_env(self._launcher_env())
        ):
            return self._warm.notebook
        return self._warm.command

    def _env_keep(self) -> list[str]:
        return list(self.env_keep) if self.inherit_env else ["PATH"]

    def _launcher_env(self) -> dict[str, str]:
        # The allow-listed part of every run's env (PYTHONUNBUFFERED included: forked runs keep unbuffered stdio)
        return kept(os.environ, self._env_keep())

    def _watch_pidfd(self, run: _Run) -> None:
        loop = asyncio.get_running_loop()
        if run.pidfd is None:
            self._poll(run)
            return
        run.loop = loop
        loop.add_reader(run.pidfd, self._finish, run, None)

    # -- attach ----------------------------------------------------------------------------

    def attach(self, run_id: str, handle: Mapping[str, Any]) -> Observation:
        """Find a run again after a restart; call it on the event-loop thread.

        A final Observation is returned, not sent to the observer. A running process is
        watched from now on and its final Observation goes to the observer.
        """
        observation = self._attach(run_id, handle)
        if observation.final:  # it ended while no server watched it: what it left in its cgroup goes too
            self._release(run_id)
        return observation

    def _release(self, run_id: str) -> None:
        try:
            later: Any = asyncio.get_running_loop().call_later
        except RuntimeError:
            later = None
        self._confine.release(run_id, later)

    def _attach(self, run_id: str, handle: Mapping[str, Any]) -> Observation:
        known = self._runs.get(run_id)
        if known is not None:
            return Observation(run_id, RUNNING, Reason.REATTACHED, f"process {known.pid} is already watched")
        try:
            pid = int(handle["pid"])
            create_time = float(handle["create_time"])
            started_at = float(handle.get("started_at") or create_time)  # handles of earlier versions: the process's
            exit_file = str(handle["exit_file"])
            timeout = handle.get("timeout_seconds")
            timeout_seconds = float(timeout) if timeout else None
            boot = handle.get("boot_time")
            boot_time = float(boot) if boot is not None else None
        except (KeyError, TypeError, ValueError) as exc:
            return Observation(
                run_id, FAILED, Reason.LOST, f"the run's handle is unusable ({exc!r}); nothing to re-attach to"
            )
        gone = f"process {pid} is gone and left no exit record (the machine may have restarted)"
        run = _Run(
            run_id, pid, create_time, exit_file, own=False, timeout_seconds=timeout_seconds, started_at=started_at
        )
        run.stop = read_json(run.stop_file)
        record = read_json(exit_file)
        if record is not None:
            return make_final_observation(run_id, pid, record, None, run.stop, gone)
        boot_id = handle.get("boot_id")
        if boot_id and boot_id != current_boot_id():
            gone = f"process {pid} is gone and left no exit record (the machine has restarted since)"
            return make_final_observation(run_id, pid, None, None, run.stop, gone)
        run.process = identify(pid, create_time, boot_time)
        if run.process is None:
            return make_final_observation(run_id, pid, None, None, run.stop, gone)
        code = self._check_exit(run)
        if code is not _ALIVE:
            return make_final_observation(run_id, pid, read_json(exit_file), code, run.stop, gone)
        if self._closed:
            raise ExecutorError(f"run {run_id}: the local executor is closed")
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            raise ExecutorError(f"run {run_id}: attach must be called on the event-loop thread") from None
        self._runs[run_id] = run
        self._poll(run)
        if timeout_seconds and run.stop is None:
            self._arm_timeout(run, started_at + timeout_seconds - time.time())
        return Observation(
            run_id,
            RUNNING,
            Reason.REATTACHED,
            f"re-attached to process {pid}, running for {time.time() - started_at:.0f} s",
        )

    # -- stop ------------------------------------------------------------------------------

    async def stop(self, run_id: str, handle: Mapping[str, Any], grace_seconds: float | None = None) -> None:
        """SIGTERM the run, SIGKILL its process group after the grace period.

        The launcher passes SIGTERM on to its whole group. Returns once the run has
        ended (its final Observation sent) or could not be confirmed to end.
        """
        grace = self.stop_grace_seconds if grace_seconds is None else max(0.0, float(grace_seconds))
        run = self._runs.get(run_id)
        if run is None:
            observation = self.attach(run_id, handle)
            if observation.final:
                self._emit(observation)
                return
            run = self._runs[run_id]
        await self._stop_run(run, "Stopped", grace)

    async def _stop_run(self, run: _Run, reason: str, grace: float) -> None:
        if run.stopping is None:  # a second request waits for the first
            run.stopping = asyncio.ensure_future(self._terminate(run, reason, grace))
        await asyncio.shield(run.stopping)

    async def _terminate(self, run: _Run, reason: str, grace: float) -> None:
        if run.stop is None:
            run.stop = {
                "reason": reason,
                "requested_at": time.time(),
                "grace_seconds": grace,
                "timeout_seconds": run.timeout_seconds,
                "killed": False,
            }
            self._write_stop(run)
        self._signal(run, signal.SIGTERM, group=False)
        if await self._wait_done(run, grace):
            return
        run.stop.update(killed=True, grace_seconds=grace)
        self._write_stop(run)
        self._signal(run, signal.SIGKILL, group=True)
        self._confine.kill(run.run_id)  # what left its process group (setsid) is still in its cgroup
        if not await self._wait_done(run, KILL_WAIT_SECONDS):
            self.log.warning(
                "gpuplat: run %s (pid %d) still not gone %.0f s after SIGKILL", run.run_id, run.pid, KILL_WAIT_SECONDS
            )

    def _write_stop(self, run: _Run) -> None:
        try:
            dirfd = safefs.open_dir(os.path.dirname(run.stop_file))
            try:
                safefs.write_atomic(dirfd, layout.STOP_FILE, json.dumps(run.stop).encode(), durable=False)
            finally:
                os.close(dirfd)
        except OSError as exc:  # the stop still happens; only a restart in the middle would miss it
            self.log.warning("gpuplat: cannot record the stop request of run %s: %s", run.run_id, exc)

    def _signal(self, run: _Run, signum: int, *, group: bool) -> None:
        if run.done.is_set():
            return
        # Our own launcher's pid cannot be reused before we reap it; a re-attached one is checked first.
        if not run.own and not run.warm and (run.process is None or not run.process.is_running()):
            return
        try:
            if run.warm and run.pidfd is not None:
                # The pidfd is this very process: until its parent reaps it (after killing its
                # group), its pid and group id cannot be another's.
                signal.pidfd_send_signal(run.pidfd, 0 if group else signum)
            if group:
                os.killpg(run.pid, signum)
            elif not run.warm or run.pidfd is None:
                os.kill(run.pid, signum)
        except ProcessLookupError:
            pass
        except PermissionError as exc:
            self.log.warning("gpuplat: cannot signal run %s (pid %d): %s", run.run_id, run.pid, exc)

    @staticmethod
    async def _wait_done(run: _Run, seconds: float) -> bool:
        try:
            await asyncio.wait_for(run.done.wait(), seconds)
        except TimeoutError:
            return False
        return True

    def _arm_timeout(self, run: _Run, delay: float) -> None:
        run.timer = asyncio.get_running_loop().call_later(max(0.0, delay), self._time_limit_reached, run)

    def _time_limit_reached(self, run: _Run) -> None:
        run.timer = None
        if self._runs.get(run.run_id) is run:
            self._spawn(self._stop_run(run, "TimedOut", self.stop_grace_seconds))

    # -- watching --------------------------------------------------------------------------

    def _watch_child(self, run: _Run, loop: asyncio.AbstractEventLoop) -> None:
        try:
            run.pidfd = os.pidfd_open(run.pid)
            loop.add_reader(run.pidfd, self._on_child_exit, run)
            run.loop = loop
        except (OSError, NotImplementedError, AttributeError):
            if run.pidfd is not None:
                os.close(run.pidfd)
                run.pidfd = None
            self._poll(run)  # no pidfd here: the shared poll loop reaps it instead

    def _on_child_exit(self, run: _Run) -> None:
        code = self._check_exit(run)
        if code is not _ALIVE:
            self._finish(run, code)

    def _poll(self, run: _Run) -> None:
        self._polled[run.run_id] = run
        if self._poll_task is None or self._poll_task.done():
            self._poll_task = asyncio.get_running_loop().create_task(self._poll_loop(), name="gpuplat-local-poll")

    async def _poll_loop(self) -> None:
        while self._polled:
            await asyncio.sleep(self.poll_interval_seconds)
            for run in list(self._polled.values()):
                try:
                    code = self._check_exit(run)
                    if code is not _ALIVE:
                        self._finish(run, code)
                except Exception:
                    self.log.exception("gpuplat: checking run %s (pid %d) failed", run.run_id, run.pid)

    def _check_exit(self, run: _Run) -> int | Literal[_State.ALIVE] | None:
        """_ALIVE, or the launcher's Popen-style code, or None when it ended where we cannot see how."""
        if not run.own:
            try:
                if run.process is None or not run.process.is_running():
                    return None
                if run.process.status() != psutil.STATUS_ZOMBIE:
                    return _ALIVE
            except psutil.NoSuchProcess:
                return None
            except psutil.Error:
                return _ALIVE
        try:  # WNOWAIT: look without reaping, so the pid stays reserved until its group is cleaned
            info = os.waitid(os.P_PID, run.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return None  # not our child, or reaped elsewhere
        if info is None:
            return _ALIVE
        # The run is over: whatever it left running in its group would hold GPUs nobody accounts for.
        with contextlib.suppress(OSError):
            os.killpg(run.pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(run.pid, 0)
        return info.si_status if info.si_code == os.CLD_EXITED else -info.si_status

    def _unwatch(self, run: _Run) -> None:
        if run.pidfd is not None:
            if run.loop is not None and not run.loop.is_closed():
                run.loop.remove_reader(run.pidfd)
            os.close(run.pidfd)
            run.pidfd = None
        if run.timer is not None:
            run.timer.cancel()
            run.timer = None
        self._polled.pop(run.run_id, None)

    def _finish(self, run: _Run, launcher_code: int | None) -> None:
        if self._runs.get(run.run_id) is not run:
            return
        del self._runs[run.run_id]
        remove_run_secrets(run.run_id)
        self._release(run.run_id)
        if run.warm is not None and run.warm.runs.get(run.pid) is run:
            del run.warm.runs[run.pid]
        self._unwatch(run)
        lost = f"process {run.pid} ended without leaving an exit record"
        observation = make_final_observation(
            run.run_id, run.pid, read_json(run.exit_file), launcher_code, run.stop, lost
        )
        run.done.set()
        self._emit(observation)

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            self.log.error("gpuplat: local executor task failed", exc_info=task.exception())

    # -- the rest --------------------------------------------------------------------------

    def isolation(self) -> dict[str, Any]:
        return self._confine.isolation(self.devices())

    def capture_code(self, req: LaunchRequest) -> dict[str, Any] | None:
        """What ran, read as the run's account in `user` mode (no file it could not read reaches its record)."""
        try:
            account = self._confine.account(req)
        except ExecutorError:
            return None  # submit says why it cannot start
        return capture_code(req.entrypoint, req.working_dir, req.workdir, account)

    async def kernel_connection(self, run_id: str, handle: Mapping[str, Any]) -> dict[str, Any] | None:
        """The agent's connection file, with the kernel's pid and generation; None until both are written."""
        path = layout.in_run(str(handle["workdir"]), layout.KERNEL)
        info, state = read_json(path), read_json(path + ".state")
        if info is None or state is None:
            return None
        return {**info, "gpuplat_pid": state.get("pid"), "gpuplat_generation": state.get("generation")}

    def log_path(self, handle: Mapping[str, Any]) -> str:
        path = handle.get("log_path")
        return str(path) if path else layout.in_run(str(handle["workdir"]), layout.LOG)

    async def close(self) -> None:
        """Stop watching and cancel pending stops; running processes are left running."""
        self._closed = True
        tasks: list[asyncio.Future[None]] = list(self._tasks)
        if self._poll_task is not None:
            tasks.append(self._poll_task)
        for run in self._runs.values():
            self._unwatch(run)
            if run.stopping is not None:
                tasks.append(run.stopping)
        self._runs.clear()
        self._polled.clear()
        self._warm.forget()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._poll_task = None
        await self._warm.close()
