"""Run one command as a child, pass on stop signals, and leave an exit record.

    python launcher.py --exit-file PATH [--cwd DIR] -- COMMAND [ARG...]

The local executor runs this file by path (stdlib only, never imports
jupyter_gpuplat, so it starts in a few milliseconds) as the leader of a new
session and process group. stdout/stderr are already the run's log file and the
command inherits them.

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

import json
import os
import signal
import subprocess
import sys
import time
from types import FrameType

USAGE = "usage: launcher.py --exit-file PATH [--cwd DIR] -- COMMAND [ARG...]"
FORWARDED_SIGNALS = (signal.SIGTERM, signal.SIGINT)
NOT_STARTED = 127


class _Forwarder:
    """Passes stop signals on to the process group; holds them until the child exists."""

    def __init__(self) -> None:
        self.child: subprocess.Popen[bytes] | None = None
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
        if child is None or child.returncode is not None:
            return
        try:  # a command that left our group (setsid) still hears from us
            if os.getpgid(child.pid) != os.getpgrp():
                os.kill(child.pid, signum)
        except ProcessLookupError:
            pass


def parse_args(args: list[str]) -> tuple[str, str | None, list[str]]:
    options: dict[str, str] = {}
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            command = args[i + 1 :]
            if "--exit-file" not in options or not command:
                break
            return options["--exit-file"], options.get("--cwd"), command
        if arg in ("--exit-file", "--cwd") and i + 1 < len(args):
            options[arg] = args[i + 1]
            i += 2
            continue
        break
    raise SystemExit(USAGE)


def write_exit_record(path: str, record: dict[str, object]) -> None:
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(record, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        print(f"gpuplat launcher: could not write the exit record {path}: {exc}", file=sys.stderr, flush=True)


def not_started(exit_file: str, error: str) -> int:
    print(f"gpuplat: {error}", file=sys.stderr, flush=True)
    write_exit_record(
        exit_file, {"returncode": NOT_STARTED, "signal": None, "finished_at": time.time(), "error": error}
    )
    return NOT_STARTED


def main(argv: list[str] | None = None) -> int:
    forwarder = _Forwarder()
    for signum in FORWARDED_SIGNALS:
        signal.signal(signum, forwarder.handle)
    exit_file, cwd, command = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        if cwd:
            os.chdir(cwd)
    except OSError as exc:
        return not_started(exit_file, f"cannot enter the working directory {cwd!r}: {exc.strerror or exc}")
    try:
        child = subprocess.Popen(command)
    except OSError as exc:
        return not_started(exit_file, f"cannot run {command[0]!r}: {exc.strerror or exc}")
    forwarder.child = child
    for pending in forwarder.pending:
        forwarder.forward(pending)
    returncode = child.wait()
    write_exit_record(
        exit_file,
        {"returncode": returncode, "signal": -returncode if returncode < 0 else None, "finished_at": time.time()},
    )
    return returncode if returncode >= 0 else 128 - returncode


if __name__ == "__main__":
    sys.exit(main())
