"""Run one command as a child, pass on stop signals, and leave a launch and an exit record.

    python launcher.py --exit-file PATH [--cwd DIR] [--lock-fd N] -- COMMAND [ARG...]

The local executor runs this file by path (stdlib only, never imports
jupyter_gpuplat, so it starts in a few milliseconds) as the leader of a new
session and process group; the warm launcher (warm_launcher.py) calls `launch`
in a forked child instead. stdout/stderr are already the run's log file and the
command inherits them.

Before the command can start, the launcher writes its launch record next to the exit
record (`launch.json`: its pid, start time in clock ticks since boot, boot id, the fd of
the run's launch lock), atomically. With `--lock-fd` it keeps that fd, a lock the
executor took on `.gpuplat/launch.lock` before starting it, open until it exits (never
passed to the command): the lock is held from before the launch until the launcher's
end, so a restarted server that finds it held adopts this launcher instead of starting
the run twice.

SIGTERM and SIGINT do not end the launcher: it passes them on to its whole process
group (the command and everything the command started), ignoring its own copy, so
signalling the launcher's pid stops the run exactly once per process. When the
command ends, the launcher writes the exit record atomically (tmp + os.replace):

    {"returncode": int, "signal": int | null, "finished_at": epoch seconds}

`returncode` is negative for a signal, as with Popen. A command that cannot be
started gets returncode 127 and an "error" message, which is also printed to the
log. The launcher exits with the command's code (128 + N for signal N).
"""

from __future__ import annotations

import os
import sys
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    import signal
    from collections.abc import Callable
    from types import FrameType
else:
    import _signal as signal  # the C module: `signal` imports enum, milliseconds on every run

USAGE = "usage: launcher.py --exit-file PATH [--cwd DIR] [--lock-fd N] -- COMMAND [ARG...]"
LAUNCH_FILE = "launch.json"  # next to the exit record
BOOT_ID_FILE = "/proc/sys/kernel/random/boot_id"
FORWARDED_SIGNALS = (signal.SIGTERM, signal.SIGINT)
NOT_STARTED = 127


class _Forwarder:
    """Passes stop signals on to the process group; holds them until the child exists."""

    def __init__(self) -> None:
        self.child: int | None = None  # cleared before the child is reaped, so its pid is never reused under us
        self.pending: list[int] = []

    def handle(self, signum: int, frame: FrameType | None) -> None:
        if self.child is None:
            self.pending.append(signum)
        else:
            self.forward(signum)

    def forward(self, signum: int) -> None:
        # Ignore our own copy while signalling the group: the launcher outlives its child.
        signal.signal(signum, signal.SIG_IGN)
        try:
            os.killpg(os.getpgrp(), signum)
        finally:
            signal.signal(signum, self.handle)
        child = self.child
        if child is None:
            return
        try:  # a command that left our group (setsid) still hears from us
            if os.getpgid(child) != os.getpgrp():
                os.kill(child, signum)
        except ProcessLookupError:
            pass


def parse_args(args: list[str]) -> tuple[str, str | None, int | None, list[str]]:
    options: dict[str, str] = {}
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            command = args[i + 1 :]
            if "--exit-file" not in options or not command:
                break
            lock = options.get("--lock-fd")
            if lock is not None and not lock.isdigit():
                break
            return options["--exit-file"], options.get("--cwd"), int(lock) if lock else None, command
        if arg in ("--exit-file", "--cwd", "--lock-fd") and i + 1 < len(args):
            options[arg] = args[i + 1]
            i += 2
            continue
        break
    print(USAGE, file=sys.stderr)
    raise SystemExit(2)


def to_json(value: float | str | None) -> str:
    """The few JSON values an exit record holds (the json module would cost ~10-25 ms to import)."""
    if value is None:
        return "null"
    if isinstance(value, str):
        # lone surrogates (undecodable bytes in a path) are escaped too: they cannot be written as UTF-8
        plain = (c >= " " and c not in '"\\' and not "\ud800" <= c <= "\udfff" for c in value)
        return '"' + "".join(c if ok else f"\\u{ord(c):04x}" for c, ok in zip(value, plain, strict=True)) + '"'
    return repr(value)


def write_record(path: str, record: dict[str, float | str | None], durable: bool = True) -> None:
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write("{" + ", ".join(f"{to_json(k)}: {to_json(v)}" for k, v in record.items()) + "}\n")
            f.flush()
            if durable:
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        print(f"gpuplat launcher: could not write the record {path}: {exc}", file=sys.stderr, flush=True)


write_exit_record = write_record


def start_ticks(pid: int | str = "self") -> int:
    """When the process started, in clock ticks since boot (/proc/PID/stat field 22): exact, never stepped."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        return int(f.read().rsplit(b")", 1)[1].split()[19])


def boot_id() -> str | None:
    try:
        with open(BOOT_ID_FILE, encoding="ascii") as f:
            return f.read().strip() or None
    except OSError:
        return None


def write_launch_record(exit_file: str, lock_fd: int | None) -> None:
    """Who launches this run, written before its command can start (the executor adopts by it)."""
    try:
        ticks: int | None = start_ticks()
    except (OSError, ValueError, IndexError):
        ticks = None
    write_record(
        os.path.join(os.path.dirname(exit_file), LAUNCH_FILE),
        {"pid": os.getpid(), "start_ticks": ticks, "boot_id": boot_id(), "lock_fd": lock_fd, "exit_file": exit_file},
        durable=False,  # it must outlive a crash of the server, not of the machine (that ends the run too)
    )


def not_started(exit_file: str, error: str) -> int:
    print(f"gpuplat: {error}", file=sys.stderr, flush=True)
    write_exit_record(
        exit_file, {"returncode": NOT_STARTED, "signal": None, "finished_at": time.time(), "error": error}
    )
    return NOT_STARTED


def forward_stop_signals() -> _Forwarder:
    forwarder = _Forwarder()
    for signum in FORWARDED_SIGNALS:
        signal.signal(signum, forwarder.handle)
    return forwarder


def spawn_command(command: list[str]) -> int:
    # posix_spawnp, not subprocess: its imports would double the launcher's start-up time
    return os.posix_spawnp(command[0], command, os.environ)


def launch(
    exit_file: str,
    cwd: str | None,
    command: list[str],
    lock_fd: int | None = None,
    forwarder: _Forwarder | None = None,
    spawn: Callable[[list[str]], int] = spawn_command,
) -> int:
    """Be the run's launcher: record, start the command with os.environ, wait, leave the exit record.

    `spawn` starts the command in our process group and returns its pid (the warm notebook
    launcher forks it from an interpreter that has nbclient imported already).
    """
    if forwarder is None:
        forwarder = forward_stop_signals()
    if lock_fd is not None:
        os.set_inheritable(lock_fd, False)  # held until we exit; the command must not keep the run "alive"
    write_launch_record(exit_file, lock_fd)
    try:
        if cwd:
            os.chdir(cwd)
    except OSError as exc:
        return not_started(exit_file, f"cannot enter the working directory {cwd!r}: {exc.strerror or exc}")
    try:
        child = spawn(command)
    except OSError as exc:
        return not_started(exit_file, f"cannot run {command[0]!r}: {exc.strerror or exc}")
    forwarder.child = child
    for pending in forwarder.pending:
        forwarder.forward(pending)
    os.waitid(os.P_PID, child, os.WEXITED | os.WNOWAIT)  # a zombie until reaped: its pid stays ours
    forwarder.child = None
    returncode = os.waitstatus_to_exitcode(os.waitpid(child, 0)[1])
    write_exit_record(
        exit_file,
        {"returncode": returncode, "signal": -returncode if returncode < 0 else None, "finished_at": time.time()},
    )
    return returncode if returncode >= 0 else 128 - returncode


def main(argv: list[str] | None = None) -> int:
    forwarder = forward_stop_signals()  # first: a stop that comes while we start is held, not lost
    exit_file, cwd, lock_fd, command = parse_args(sys.argv[1:] if argv is None else argv)
    return launch(exit_file, cwd, command, lock_fd, forwarder)


if __name__ == "__main__":
    sys.exit(main())
