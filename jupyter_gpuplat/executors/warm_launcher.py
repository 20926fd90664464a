"""The warm launcher: one long-lived process per local executor that forks each run's launcher.

    python -I -S warm_launcher.py FD

Starting a fresh interpreter for every run's launcher costs ~10-20 ms of CPU on the server's
machine; forking this already-started one costs well under a millisecond. Stdlib only, like
launcher.py (whose `launch` the forked child runs), and never anything that touches a GPU.

FD is a SOCK_SEQPACKET socket to the executor. Each message asks for one run: a JSON object
`{"argv", "env", "cwd", "exit_file"}` with two descriptors attached, the run's log (opened for
append) and its launch lock (already locked by the executor). For each, the warm launcher:

1. forks a child that becomes the run's launcher exactly as launcher.py would be: leader of a
   new session and process group, stdin /dev/null, stdout/stderr the log, the lock at fd 3,
   default signal dispositions, `os.environ` replaced by the run's env (CUDA_VISIBLE_DEVICES
   set before anything of the run starts), then `launcher.launch` (launch record, command,
   stop-signal forwarding, exit record);
2. answers `{"pid", "start_ticks"}` with a pidfd of the child attached (or `{"error"}`);
3. when the child ends, kills what is left of its process group, reaps it and sends
   `{"exit": pid, "code": Popen-style code}`: the pid stays reserved until its group is gone.

Lifetime: it lives as long as its executor. EOF on FD (the executor closed, or the server
died, even by SIGKILL) ends it at once; runs are their own sessions, not tied to it, so they
keep running, are reparented to init and are re-attached by a restarted server by pid and
start time, as runs of the direct launcher are.
"""

from __future__ import annotations

import json
import os
import select
import socket
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    import signal

    from . import launcher
else:
    import _signal as signal

    # launcher.py by path (-I leaves the script's directory out): this never imports jupyter_gpuplat
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import launcher

MAX_MESSAGE_BYTES = 1 << 20
LOCK_FD = 3  # where each run's launcher keeps its launch lock (the executor checks it there)
_DEFAULT_SIGNALS = [s for s in range(1, signal.NSIG) if s not in (signal.SIGKILL, signal.SIGSTOP)]


def _be_the_run(spec: dict[str, object], log_fd: int, lock_fd: int) -> int:
    """In the forked child: take the run's session, stdio, env and signals, then launch it."""
    os.setsid()
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    os.dup2(lock_fd, LOCK_FD)
    os.closerange(LOCK_FD + 1, 1 << 20)  # the control socket, other runs' pidfds, the received fds
    for signum in _DEFAULT_SIGNALS:
        try:
            signal.signal(signum, signal.SIG_DFL)
        except (OSError, ValueError):
            pass
    env = spec["env"]
    argv = spec["argv"]
    assert isinstance(env, dict) and isinstance(argv, list)
    os.environ.clear()  # putenv too: posix_spawnp looks the command up in this PATH
    os.environ.update(env)
    cwd = spec.get("cwd")
    return launcher.launch(str(spec["exit_file"]), str(cwd) if cwd else None, [str(a) for a in argv], LOCK_FD)


class WarmLauncher:
    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.poller = select.poll()
        self.poller.register(sock.fileno(), select.POLLIN)
        self.children: dict[int, int] = {}  # pidfd → pid
        self.open = True

    def send(self, message: dict[str, object], fds: list[int] | None = None) -> None:
        if not self.open:
            return
        try:
            socket.send_fds(self.sock, [json.dumps(message).encode()], fds or [], socket.MSG_NOSIGNAL)
        except OSError:
            self.open = False  # the executor is gone: nobody to tell

    def start(self, payload: bytes, fds: list[int]) -> None:
        if len(fds) != 2:
            for fd in fds:
                os.close(fd)
            self.send({"error": f"expected 2 descriptors (log, lock), got {len(fds)}"})
            return
        log_fd, lock_fd = fds
        try:
            spec = json.loads(payload)
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
        except (ValueError, OSError) as exc:
            os.close(log_fd)
            os.close(lock_fd)
            self.send({"error": f"cannot start the run's launcher: {exc}"})
            return
        if pid == 0:
            code = 70
            try:
                code = _be_the_run(spec, log_fd, lock_fd)
            except BaseException as exc:  # never return into the warm launcher's loop
                try:
                    os.write(2, f"gpuplat warm launcher: {exc!r}\n".encode())
                finally:
                    os._exit(code)
            os._exit(code)
        os.close(log_fd)
        os.close(lock_fd)
        pidfd = os.pidfd_open(pid)
        self.children[pidfd] = pid
        self.poller.register(pidfd, select.POLLIN)
        try:
            ticks: int | None = launcher.start_ticks(pid)  # not reaped yet: it is still ours
        except (OSError, ValueError, IndexError):
            ticks = None
        self.send({"pid": pid, "start_ticks": ticks}, [pidfd])

    def reap(self, pidfd: int) -> None:
        pid = self.children[pidfd]
        if os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None:
            return
        # The run is over: whatever it left in its group would hold GPUs nobody accounts for.
        try:
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            pass
        code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
        self.poller.unregister(pidfd)
        os.close(pidfd)
        del self.children[pidfd]
        self.send({"exit": pid, "code": code})

    def serve(self) -> None:
        self.send({"ready": os.getpid()})
        while self.open:
            for fd, _ in self.poller.poll():
                if fd == self.sock.fileno():
                    try:
                        payload, fds, _flags, _ = socket.recv_fds(self.sock, MAX_MESSAGE_BYTES, 2)
                    except OSError:
                        payload, fds = b"", []
                    if not payload:
                        self.open = False
                        break
                    self.start(payload, fds)
                elif fd in self.children:
                    self.reap(fd)


def main(argv: list[str]) -> int:
    if len(argv) != 1 or not argv[0].isdigit():
        print("usage: warm_launcher.py FD", file=sys.stderr)
        return 2
    WarmLauncher(socket.socket(fileno=int(argv[0]))).serve()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
