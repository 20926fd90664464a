"""What a local run leaves behind and the process it runs in.

Pure reading of the launcher's exit record into the final Observation, spawning the launcher
as a process-group leader, the run's launch lock and launch record, and telling a run's
process from a reused pid. The executor (local.py) watches and stops; this module knows
processes and files.

Everything here is read and opened through executors/safefs.py: these files live in the run's
own directory, where the run may have put links, FIFOs or hard links in their place.

Launch lock: `.gpuplat/launch.lock`, flock'ed by the executor before it starts a launcher and
handed to it (fd 3), which holds it until it exits. Held means a launcher of this run is alive;
free with a launch record (`launch.json`) or an exit record means one ran and ended; free and
neither means the run never started.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import signal
import stat
import time
from collections.abc import Mapping
from typing import Any

import psutil

from ...core.reasons import Reason
from .. import safefs
from ..base import FAILED, STOPPED, SUCCEEDED, Observation, describe_returncode

# psutil derives create_time from clock ticks; a reused pid starts at another time
CREATE_TIME_TOLERANCE_SECONDS = 0.05
BOOT_ID_FILE = "/proc/sys/kernel/random/boot_id"
LAUNCH_FILE = "launch.json"  # written by the launcher (launcher.LAUNCH_FILE)
LAUNCH_LOCK_FILE = "launch.lock"
LAUNCHER_LOCK_FD = 3  # where every launcher keeps its launch lock
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
# Ignored signals survive exec (the server ignores SIGPIPE); a run starts with defaults.
DEFAULT_SIGNALS = frozenset(signal.valid_signals()) - {signal.SIGKILL, signal.SIGSTOP}


def read_json(path: str) -> dict[str, Any] | None:
    """A JSON object a launcher or run left in the run's directory; None when missing, refused or not one."""
    raw = safefs.read_path(path)
    if raw is None:
        return None
    try:
        data = json.loads(raw)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _number(value: Any) -> float | None:
    # stop.json and exit.json live where the run can write: read them defensively
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _seconds(value: Any) -> str:
    number = _number(value)
    return "?" if number is None else f"{number:g} s"


def make_final_observation(
    run_id: str,
    pid: int,
    record: Mapping[str, Any] | None,
    launcher_code: int | None,
    stop: Mapping[str, Any] | None,
    lost: str,
) -> Observation:
    """Turn what a run left behind into its final Observation.

    `record` is the launcher's exit record, `launcher_code` the launcher's own
    Popen-style code when we reaped it, `stop` the stop request (reason, time,
    grace, whether SIGKILL was needed), `lost` the message for a run that left nothing.
    """
    returncode = _int(record.get("returncode")) if record else None
    finished_at = _number(record.get("finished_at")) if record else None
    requested_at = _number(stop.get("requested_at")) if stop else None
    if finished_at is not None and requested_at is not None and finished_at < requested_at:
        stop = None  # it ended on its own before the stop request
    if returncode is not None:
        outcome, exit_code = describe_returncode(returncode), returncode
    elif stop and stop.get("killed"):
        outcome = (
            f"still running {_seconds(stop.get('grace_seconds'))} after SIGTERM, "
            f"so its process group was killed with SIGKILL ({int(signal.SIGKILL)})"
        )
        exit_code = -int(signal.SIGKILL)
    elif launcher_code is not None:
        was = "was " if launcher_code < 0 else ""
        outcome = f"its launcher (pid {pid}) {was}{describe_returncode(launcher_code)} and left no exit record"
        exit_code = launcher_code
    else:
        outcome, exit_code = lost, None

    if stop:
        if stop.get("reason") == "TimedOut":
            head = f"exceeded its timeout of {_seconds(stop.get('timeout_seconds'))}"
            return Observation(run_id, FAILED, Reason.TIMED_OUT, f"{head}; {outcome}", exit_code)
        return Observation(run_id, STOPPED, Reason.STOPPED, f"stopped by request; {outcome}", exit_code)
    if returncode is not None:
        error = record.get("error") if record else None
        if error:
            return Observation(run_id, FAILED, Reason.START_FAILED, f"{error} (exit code {returncode})", returncode)
        if returncode == 0:
            return Observation(run_id, SUCCEEDED, Reason.COMPLETED, outcome, 0)
        return Observation(run_id, FAILED, Reason.ERROR if returncode > 0 else Reason.SIGNALED, outcome, returncode)
    if launcher_code is not None:
        return Observation(run_id, FAILED, Reason.SIGNALED if launcher_code < 0 else Reason.ERROR, outcome, exit_code)
    return Observation(run_id, FAILED, Reason.LOST, outcome, None)


def open_log(path: str) -> int:
    """The run's log, opened for append by us (the run inherits the descriptor, never opens it)."""
    dirfd = safefs.open_dir(os.path.dirname(path))
    try:
        fd = safefs.open_append(dirfd, os.path.basename(path))
    finally:
        os.close(dirfd)
    if fd < 3:  # dup2 onto itself would keep O_CLOEXEC and the run would lose its output
        moved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
        os.close(fd)
        fd = moved
    return fd


def spawn_launcher(argv: list[str], env: dict[str, str], log_fd: int, lock_fd: int | None = None) -> int:
    """Start the launcher as a new session leader with its output in the log (and its lock at fd 3).

    posix_spawn returns once the launcher is exec'd (vfork-style), well under a
    millisecond of work, so it runs on the event loop rather than in a thread: a
    cancelled await in between could otherwise leave a process nobody watches.
    """
    actions: list[tuple[Any, ...]] = [
        (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
        (os.POSIX_SPAWN_DUP2, log_fd, 1),
        (os.POSIX_SPAWN_DUP2, log_fd, 2),
    ]
    if lock_fd is not None:
        actions.append((os.POSIX_SPAWN_DUP2, lock_fd, LAUNCHER_LOCK_FD))
    return os.posix_spawn(
        argv[0],
        argv,
        env,
        file_actions=actions,
        setsid=True,
        setsigmask=(),
        setsigdef=DEFAULT_SIGNALS,
    )


def process_create_time(pid: int) -> float:
    try:
        return psutil.Process(pid).create_time()
    except psutil.Error:  # reaped by someone else already; the exit record still tells
        return time.time()


_boot_id: list[str] = []  # read once: it cannot change while this process lives


def current_boot_id() -> str | None:
    if _boot_id:
        return _boot_id[0]
    try:
        with open(BOOT_ID_FILE, encoding="ascii") as f:
            found = f.read().strip()
    except OSError:
        return None
    if found:
        _boot_id.append(found)
    return found or None


def identify(pid: int, create_time: float, boot_time: float | None) -> psutil.Process | None:
    """The process with this pid, unless the pid now belongs to another process.

    With the boot time recorded at submit, start times are compared relative to
    boot: the epoch create_time moves when the wall clock is stepped, and a false
    "Lost" would leave a live run holding GPUs nobody accounts for.
    """
    try:
        process = psutil.Process(pid)
        started = process.create_time()
        if boot_time is not None:
            started, create_time = started - psutil.boot_time(), create_time - boot_time
        if abs(started - create_time) <= CREATE_TIME_TOLERANCE_SECONDS:
            return process
    except psutil.Error:
        pass
    return None


# -- the launch lock and record ------------------------------------------------------------


def open_launch_lock(state_dir: str) -> tuple[int, bool]:
    """The run's launch lock, opened; True when we took it, False when a live launcher holds it."""
    fd = _open_lock_file(state_dir, os.O_RDWR | os.O_CREAT)
    if fd <= LAUNCHER_LOCK_FD:  # posix_spawn's dup2 onto 3 would keep O_CLOEXEC
        moved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, LAUNCHER_LOCK_FD + 1)
        os.close(fd)
        fd = moved
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return fd, False
    except OSError:
        os.close(fd)
        raise
    return fd, True


def _open_lock_file(state_dir: str, flags: int) -> int:
    dirfd = safefs.open_dir(state_dir)
    try:
        fd = safefs.open_beneath(dirfd, LAUNCH_LOCK_FILE, flags | os.O_NONBLOCK, 0o600)
    finally:
        os.close(dirfd)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:  # a FIFO, a device or another run's lock linked in
            raise safefs.UnsafePath(errno.EINVAL, f"{LAUNCH_LOCK_FILE} in {state_dir} is not a file of its own")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def start_ticks(pid: int) -> int | None:
    """When the process started, in clock ticks since boot (/proc/PID/stat field 22)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return int(f.read().rsplit(b")", 1)[1].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def create_time_from_ticks(ticks: int | None) -> float:
    """The epoch create time psutil reports for a process that started at `ticks` (for handles)."""
    return time.time() if ticks is None else psutil.boot_time() + ticks / CLOCK_TICKS


def launcher_in_record(state_dir: str) -> tuple[int, int] | None:
    """(pid, start ticks) of the live launcher the run's launch record names, or None.

    A reused pid is never taken for it: the process must have started at the recorded clock
    tick of this boot and hold this run's launch lock file open at the recorded fd.
    """
    record = read_json(os.path.join(state_dir, LAUNCH_FILE))
    if record is None:
        return None
    pid, ticks, lock_fd = _int(record.get("pid")), _int(record.get("start_ticks")), _int(record.get("lock_fd"))
    if pid is None or pid <= 0 or ticks is None or lock_fd is None:
        return None
    if record.get("boot_id") != current_boot_id() or start_ticks(pid) != ticks:
        return None
    try:
        held = os.stat(f"/proc/{pid}/fd/{lock_fd}")
        fd = _open_lock_file(state_dir, os.O_RDONLY)
    except OSError:
        return None
    try:
        lock = os.fstat(fd)
    finally:
        os.close(fd)
    if (held.st_dev, held.st_ino) != (lock.st_dev, lock.st_ino):
        return None
    return pid, ticks
