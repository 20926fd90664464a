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

Idempotent launch (reattach.py): before starting a launcher, submit takes the run's launch lock
(`.gpuplat/launch.lock`) and hands it to the launcher, which keeps it until it exits and
writes its launch record (`launch.json`) before the command can start. A submit for a run
whose lock is held adopts that launcher (after checking pid, start tick and the lock fd it
holds); one whose lock is free but whose launch or exit record exists reports how the
earlier start ended. So a server that crashed between "dispatched" and saving the handle
never starts a run twice.

Watching (watch.py): children of this server are watched through a pidfd in the event loop (no
polling); children of the warm launcher are reported by it (it reaps them, after killing
what is left of their group); runs re-attached or adopted are not our children and share
one poll loop. Nothing here writes run state: the final Observation goes to the observer.
Also beside it: settings.py (the traits), commands.py (argv), runs.py, stopping.py (SIGTERM, SIGKILL).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import time
from collections.abc import Coroutine, Mapping
from typing import Any

import psutil

from ...core import artifacts as layout
from ...core.reasons import Reason
from .. import safefs
from ..artifacts import FilesystemArtifacts, capture_code, write_cell
from ..base import (
    RUNNING,
    Device,
    Executor,
    ExecutorError,
    GpuReading,
    LaunchRequest,
    Observation,
)
from .commands import KERNEL_AGENT, kernel_command, launcher_argv, python_env
from .confine import Confinement
from .connections import connection_env, remove_run_secrets, remove_secret_dir
from .env import kept, make_env
from .gpus import MachineGpus
from .process import (
    LAUNCH_FILE,
    create_time_from_ticks,
    current_boot_id,
    make_final_observation,
    open_launch_lock,
    open_log,
    process_create_time,
    read_json,
    spawn_launcher,
)
from .reattach import adopt, earlier_end, find_launcher, record_exists, run_from_handle
from .runs import LocalRun
from .settings import LocalSettings
from .stopping import terminate
from .users import Account, user_mode_problems
from .warm.client import WarmLauncherError, WarmStart
from .warm.slots import WarmLaunchers, WarmSlot
from .watch import RunWatcher


def _remove(workdir: str, rel: str) -> None:
    try:
        dirfd = safefs.open_dir(workdir)
    except FileNotFoundError:
        return
    try:
        safefs.unlink(dirfd, rel)
    finally:
        os.close(dirfd)


class LocalExecutor(LocalSettings, FilesystemArtifacts, Executor):
    """Runs each submission as a process group on this machine."""

    name = "local"

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
        self._runs: dict[str, LocalRun] = {}
        self._watcher = RunWatcher(self._finish, lambda: self.poll_interval_seconds, self.log)
        self._tasks: set[asyncio.Task[None]] = set()
        self._gpus = MachineGpus(self.gpus, self.nvidia_smi_path)
        self._closed = False
        self._submitting: set[str] = set()
        self._warm: WarmLaunchers[LocalRun] = WarmLaunchers(
            self._launcher_env, self._finish, self._watcher.watch_pidfd, self.log
        )

    # -- devices ---------------------------------------------------------------------------

    def devices(self) -> list[Device]:
        """Declared GPUs, or those nvidia-smi finds (asked once per executor)."""
        return self._gpus.devices()

    def gpu_interval(self) -> float | None:
        return self.gpu_sample_seconds

    def gpu_samples(self, held: Mapping[str, tuple[int, ...]], at: float) -> GpuReading:
        """NVML's reading (executors/local/nvml.py); declared GPUs are not real ones to read."""
        return self._gpus.samples(held)

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
            if record_exists(state_dir, LAUNCH_FILE) or record_exists(state_dir, layout.EXIT_FILE):
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
                argv = launcher_argv(exit_file, req.cwd, account, cgroups, command)
                try:
                    pid = spawn_launcher(argv, env, log_fd, lock_fd)
                except (OSError, ValueError) as exc:
                    raise ExecutorError(
                        f"run {req.run_id}: cannot start the launcher ({sys.executable}): {exc}"
                    ) from exc
                run = LocalRun(
                    req.run_id, pid, process_create_time(pid), exit_file, own=True, timeout_seconds=req.timeout_seconds
                )
                self._runs[run.run_id] = run
                self._watcher.watch_child(run, asyncio.get_running_loop())
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

    def _took_warm(self, req: LaunchRequest, started: WarmStart, slot: WarmSlot[LocalRun]) -> dict[str, Any]:
        run = LocalRun(
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
            self._watcher.watch_pidfd(run)
        elif code is not None:  # it already ended: report it once the handle is saved
            asyncio.get_running_loop().call_soon(self._finish, run, code)
        return self._started(run, req)

    def _started(self, run: LocalRun, req: LaunchRequest) -> dict[str, Any]:
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
        found = await find_launcher(req.run_id, state_dir, lambda: self._closed)
        run = adopt(req.run_id, found, self._exit_file(req), req.timeout_seconds) if found is not None else None
        if run is None:
            return None
        self.log.info(
            "gpuplat: run %s was started before (pid %d): adopting it, not starting again", req.run_id, run.pid
        )
        self._runs[run.run_id] = run
        self._watcher.poll(run)
        # The launch moment died with the crashed server: the launcher's start (earlier, for a spare) stands for it.
        if req.timeout_seconds and run.stop is None:
            self._arm_timeout(run, run.create_time + req.timeout_seconds - time.time())
        return self._handle(req, run.pid, run.create_time)

    def _ended_earlier(self, req: LaunchRequest, state_dir: str) -> dict[str, Any]:
        """Started before and its launcher has ended (its lock is free): report that end, never restart it."""
        remove_run_secrets(req.run_id)  # its secret files, if it ended while no server watched it
        self._release(req.run_id)
        observation, pid, ticks = earlier_end(req.run_id, state_dir, self._exit_file(req))
        self.log.info("gpuplat: run %s was started before and has ended: %s", req.run_id, observation.message)
        asyncio.get_running_loop().call_soon(self._emit, observation)  # after the handle is saved
        return self._handle(req, pid, create_time_from_ticks(ticks))

    # -- the warm launcher -----------------------------------------------------------------

    def _warm_for(self, req: LaunchRequest, env: Mapping[str, str]) -> WarmSlot[LocalRun]:
        """The notebook warm launcher for a notebook it can run exactly as a fresh interpreter would."""
        if (
            req.entrypoint.kind == "notebook"
            and self.warm_notebooks
            and not self._confine.by_user  # it would run the kernel in a fork of a root process: exec'd instead
            and python_env(env) == python_env(self._launcher_env())
        ):
            return self._warm.notebook
        return self._warm.command

    def _env_keep(self) -> list[str]:
        return list(self.env_keep) if self.inherit_env else ["PATH"]

    def _launcher_env(self) -> dict[str, str]:
        # The allow-listed part of every run's env (PYTHONUNBUFFERED included: forked runs keep unbuffered stdio)
        return kept(os.environ, self._env_keep())

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
        run = run_from_handle(run_id, handle)
        if isinstance(run, Observation):
            return run
        if self._closed:
            raise ExecutorError(f"run {run_id}: the local executor is closed")
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            raise ExecutorError(f"run {run_id}: attach must be called on the event-loop thread") from None
        self._runs[run_id] = run
        self._watcher.poll(run)
        started_at = run.started_at or run.create_time
        if run.timeout_seconds and run.stop is None:
            self._arm_timeout(run, started_at + run.timeout_seconds - time.time())
        return Observation(
            run_id,
            RUNNING,
            Reason.REATTACHED,
            f"re-attached to process {run.pid}, running for {time.time() - started_at:.0f} s",
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

    async def _stop_run(self, run: LocalRun, reason: str, grace: float) -> None:
        if run.stopping is None:  # a second request waits for the first
            run.stopping = asyncio.ensure_future(terminate(run, reason, grace, self._confine.kill, self.log))
        await asyncio.shield(run.stopping)

    def _arm_timeout(self, run: LocalRun, delay: float) -> None:
        run.timer = asyncio.get_running_loop().call_later(max(0.0, delay), self._time_limit_reached, run)

    def _time_limit_reached(self, run: LocalRun) -> None:
        run.timer = None
        if self._runs.get(run.run_id) is run:
            self._spawn(self._stop_run(run, "TimedOut", self.stop_grace_seconds))

    # -- watching --------------------------------------------------------------------------

    def _finish(self, run: LocalRun, launcher_code: int | None) -> None:
        if self._runs.get(run.run_id) is not run:
            return
        del self._runs[run.run_id]
        remove_run_secrets(run.run_id)
        self._release(run.run_id)
        if run.warm is not None and run.warm.runs.get(run.pid) is run:
            del run.warm.runs[run.pid]
        self._watcher.unwatch(run)
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
        self._gpus.close()
        tasks: list[asyncio.Future[None]] = list(self._tasks)
        if self._watcher.poll_task is not None:
            tasks.append(self._watcher.poll_task)
        for run in self._runs.values():
            self._watcher.unwatch(run)
            if run.stopping is not None:
                tasks.append(run.stopping)
        self._runs.clear()
        self._watcher.polled.clear()
        self._warm.forget()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._watcher.poll_task = None
        await self._warm.close()
