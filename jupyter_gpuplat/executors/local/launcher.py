"""Run one command as a child, pass on stop signals, and leave a launch and an exit record.

    python launcher.py --exit-file PATH [--cwd DIR] [--lock-fd N] [--as UID:GID:GIDS] [--cgroup FILE]...
                       -- COMMAND [ARG...]

The local executor runs this file by path (stdlib only, never imports
jupyter_gpuplat, so it starts in a few milliseconds) as the leader of a new
session and process group; the warm launcher (warm/launcher.py) calls `launch`
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

Records are written beneath a descriptor of the state directory taken before the command
starts (executors/safefs.py): the run may replace anything in its own directory with a link,
and the launcher, root when runs run as their users, never writes through one.

With `--as` (LocalExecutor.run_as = "user") or `--cgroup`, the command is forked rather than
posix_spawn'ed, and between fork and exec the child joins the run's cgroups (each FILE is a
`cgroup.procs`), drops to the run's account (groups, then gid, then uid, all three ids of each,
checked; no_new_privs; umask 077), enters its working directory as that account (so it gets
in only where the account may), and execs; a failure at any step comes back over a close-on-exec
pipe and is reported as the command not starting. The launcher itself stays what it was
(root): the run cannot signal it, and it never runs the run's code.
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

if TYPE_CHECKING or __package__:  # imported by the executor or the warm notebook launcher
    from .. import safefs
else:  # run by path with -I, which leaves the script's directory out: never imports jupyter_gpuplat
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # safefs: executors/
    import safefs

    del sys.path[0]

USAGE = (
    "usage: launcher.py --exit-file PATH [--cwd DIR] [--lock-fd N] [--as UID:GID:GIDS] [--cgroup FILE]... "
    "-- COMMAND [ARG...]"
)
LAUNCH_FILE = "launch.json"  # next to the exit record
BOOT_ID_FILE = "/proc/sys/kernel/random/boot_id"
FORWARDED_SIGNALS = (signal.SIGTERM, signal.SIGINT)
NOT_STARTED = 127
PR_SET_NO_NEW_PRIVS = 38
RUN_UMASK = 0o077
_STAGES = {
    "cgroup": "cannot join the run's cgroup",
    "account": "cannot switch to the run's account",
    "cwd": "cannot enter the working directory",
    "exec": "cannot run",
}


class SpawnError(OSError):
    """The command did not start: which step failed (a key of _STAGES) and its errno."""

    def __init__(self, stage: str, err: int) -> None:
        super().__init__(err, os.strerror(err))
        self.stage = stage


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


class Options:
    """What the executor asked of this launcher (argv, or the warm launcher's spec)."""

    def __init__(
        self,
        exit_file: str,
        cwd: str | None,
        lock_fd: int | None,
        command: list[str],
        account: dict[str, object] | None = None,
        cgroups: list[str] | None = None,
    ) -> None:
        self.exit_file = exit_file
        self.cwd = cwd
        self.lock_fd = lock_fd
        self.command = command
        self.account = account
        self.cgroups = cgroups or []


def parse_account(text: str) -> dict[str, object]:
    uid, gid, groups = text.split(":")
    return {"uid": int(uid), "gid": int(gid), "groups": [int(g) for g in groups.split(",") if g]}


def parse_args(args: list[str]) -> Options:
    options: dict[str, str] = {}
    cgroups: list[str] = []
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
            try:
                account = parse_account(options["--as"]) if "--as" in options else None
            except ValueError:
                break
            return Options(
                options["--exit-file"], options.get("--cwd"), int(lock) if lock else None, command, account, cgroups
            )
        if arg == "--cgroup" and i + 1 < len(args):
            cgroups.append(args[i + 1])
            i += 2
            continue
        if arg in ("--exit-file", "--cwd", "--lock-fd", "--as") and i + 1 < len(args):
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
    """Write a record into the run's state directory, beneath its descriptor (never through a link)."""
    data = ("{" + ", ".join(f"{to_json(k)}: {to_json(v)}" for k, v in record.items()) + "}\n").encode()
    try:
        dirfd = safefs.open_dir(os.path.dirname(path))
        try:
            safefs.write_atomic(dirfd, os.path.basename(path), data, durable=durable)
        finally:
            os.close(dirfd)
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


def no_new_privs() -> None:
    """prctl(PR_SET_NO_NEW_PRIVS): no setuid binary or file capability raises the run's privileges again."""
    import ctypes  # the warm launcher imported it already; a direct launcher in user mode pays ~1 ms

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def _become(account: dict[str, object]) -> None:
    uid, gid, groups = account["uid"], account["gid"], account["groups"]
    assert isinstance(uid, int) and isinstance(gid, int) and isinstance(groups, list)
    if uid == 0:
        raise OSError(1, "refusing to run a command as root")
    os.setgroups(groups)  # before the gid and the uid: afterwards we could not
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    if os.getresuid() != (uid, uid, uid) or os.getresgid() != (gid, gid, gid):
        raise OSError(1, "the account switch did not take")
    no_new_privs()
    os.umask(RUN_UMASK)


def _which(name: str) -> str:
    """The command's path by PATH, looked up here: os.execvpe in the child would import warnings (~5 ms)."""
    if "/" in name:
        return name
    for d in os.environ.get("PATH", os.defpath).split(os.pathsep):
        path = os.path.join(d or ".", name)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return name  # not found: the exec says so (ENOENT)


def spawn_confined(command: list[str], cwd: str | None, account: dict[str, object] | None, cgroups: list[str]) -> int:
    """Fork the command; in the child join the cgroups, drop to the account, enter cwd, exec (see module doc)."""
    executable = _which(command[0])
    r, w = os.pipe2(os.O_CLOEXEC)
    pid = os.fork()
    if pid == 0:  # the child: no Python beyond this block; every error goes up the pipe
        stage = "cgroup"
        try:
            os.close(r)
            for signum in FORWARDED_SIGNALS:
                signal.signal(signum, signal.SIG_DFL)
            me = str(os.getpid()).encode()
            for procs in cgroups:
                fd = os.open(procs, os.O_WRONLY | os.O_CLOEXEC)
                try:
                    os.write(fd, me)
                finally:
                    os.close(fd)
            if account is not None:
                stage = "account"
                _become(account)
            if cwd:
                stage = "cwd"
                os.chdir(cwd)
            stage = "exec"
            os.execve(executable, command, os.environ)
        except OSError as exc:
            try:
                os.write(w, f"{stage}:{exc.errno or 1}".encode())
            finally:
                os._exit(NOT_STARTED)
        except BaseException:
            os._exit(NOT_STARTED)
    os.close(w)
    try:
        report = b""
        while chunk := os.read(r, 64):  # EOF: the exec closed our pipe (or the child died trying)
            report += chunk
    finally:
        os.close(r)
    if report:
        os.waitpid(pid, 0)
        stage, _, err = report.decode().partition(":")
        raise SpawnError(stage, int(err) if err.isdigit() else 1)
    return pid


def launch(
    exit_file: str,
    cwd: str | None,
    command: list[str],
    lock_fd: int | None = None,
    forwarder: _Forwarder | None = None,
    spawn: Callable[[list[str]], int] = spawn_command,
    account: dict[str, object] | None = None,
    cgroups: list[str] | None = None,
) -> int:
    """Be the run's launcher: record, start the command with os.environ, wait, leave the exit record.

    `spawn` starts the command in our process group and returns its pid (the warm notebook
    launcher forks it from an interpreter that has nbclient imported already). With an
    `account` or `cgroups` the command is started by `spawn_confined` instead.
    """
    if forwarder is None:
        forwarder = forward_stop_signals()
    if lock_fd is not None:
        os.set_inheritable(lock_fd, False)  # held until we exit; the command must not keep the run "alive"
    write_launch_record(exit_file, lock_fd)
    confined = account is not None or bool(cgroups)
    try:
        if confined:
            child = spawn_confined(command, cwd, account, cgroups or [])
        else:
            try:
                if cwd:
                    os.chdir(cwd)
            except OSError as exc:
                raise SpawnError("cwd", exc.errno or 1) from None
            try:
                child = spawn(command)
            except OSError as exc:
                raise SpawnError("exec", exc.errno or 1) from None
    except SpawnError as exc:
        what = {"cwd": f" {cwd!r}", "exec": f" {command[0]!r}"}.get(exc.stage, "")
        return not_started(exit_file, f"{_STAGES.get(exc.stage, exc.stage)}{what}: {exc.strerror}")
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
    o = parse_args(sys.argv[1:] if argv is None else argv)
    return launch(o.exit_file, o.cwd, o.command, o.lock_fd, forwarder, account=o.account, cgroups=o.cgroups)


if __name__ == "__main__":
    sys.exit(main())
