"""The warm launcher: one long-lived process per local executor that forks each run's launcher.

    python -I -S warm/launcher.py FD [SPARES]

Starting a fresh interpreter for every run's launcher costs ~10-20 ms of CPU on the server's
machine; forking this already-started one costs well under a millisecond. Stdlib only, like
launcher.py (whose `launch` the forked child runs), and never anything that touches a GPU.

FD is a SOCK_SEQPACKET socket to the executor. A run is a JSON object
`{"argv", "env", "cwd", "exit_file", "account"?, "cgroups"?}` with two descriptors attached, the run's log (opened for
append) and its launch lock (already locked by the executor).

Spares: the warm launcher keeps SPARES (default 1) launchers forked ahead of their runs, each
waiting on its own socket, sent to the executor as `{"spare": pid, "start_ticks"}` with a pidfd
and that socket. The executor sends a run straight to a spare (no round trip through us: the
pid is known already) and tells us `{"taken": pid}`, and we fork the next spare. A spare whose
socket closes unused exits 0. Without a spare at hand the executor sends the run to us and we:

1. forks a child that becomes the run's launcher exactly as launcher.py would be: leader of a
   new session and process group, stdin /dev/null, stdout/stderr the log, the lock at fd 3,
   default signal dispositions, `os.environ` replaced by the run's env (CUDA_VISIBLE_DEVICES
   set before anything of the run starts), then `launcher.launch` (launch record, command,
   stop-signal forwarding, exit record);
   and the scheduling policy the warm launcher had before it took SCHED_BATCH (so that, woken
   by a request, it does not preempt the server on a busy machine);
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
    from collections.abc import Callable
    from typing import NoReturn

    from .. import launcher
else:
    import _signal as signal

    if __package__:  # imported by the warm notebook launcher (warm/notebooks.py)
        from .. import launcher
    else:  # run by path with -I, which leaves the script's directory out: never imports jupyter_gpuplat
        sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # local/launcher.py
        import launcher

        del sys.path[0]

MAX_MESSAGE_BYTES = 1 << 20
LOCK_FD = 3  # where each run's launcher keeps its launch lock (the executor checks it there)
_DEFAULT_SIGNALS = [s for s in range(1, signal.NSIG) if s not in (signal.SIGKILL, signal.SIGSTOP)]


def _batch() -> int | None:
    """Schedule the warm launcher as SCHED_BATCH: woken by a request it does not preempt the server.

    Returns the policy it had (the server's), which each run's launcher takes back.
    """
    try:
        policy = os.sched_getscheduler(0)
        os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))
    except (OSError, AttributeError):
        return None
    return policy


def _be_the_run(
    spec: dict[str, object],
    log_fd: int,
    lock_fd: int,
    policy: int | None,
    spawn: Callable[[list[str]], int] = launcher.spawn_command,
) -> int:
    """In the forked child: take the run's session, stdio, env, signals and scheduling, then launch it."""
    if policy is not None:
        try:
            os.sched_setscheduler(0, policy, os.sched_param(0))
        except OSError:
            pass
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
    command = [str(a) for a in argv]
    account = spec.get("account")
    cgroups = spec.get("cgroups") or []
    assert account is None or isinstance(account, dict)
    assert isinstance(cgroups, list)
    return launcher.launch(
        str(spec["exit_file"]),
        str(cwd) if cwd else None,
        command,
        LOCK_FD,
        spawn=spawn,
        account=account,
        cgroups=[str(c) for c in cgroups],
    )


class WarmLauncher:
    def __init__(
        self, sock: socket.socket, spares: int, spawn: Callable[[list[str]], int] = launcher.spawn_command
    ) -> None:
        self.sock = sock
        self.spawn = spawn
        self.poller = select.poll()
        self.poller.register(sock.fileno(), select.POLLIN)
        self.children: dict[int, int] = {}  # pidfd → pid
        self.open = True
        self.spares = spares
        self.policy = _batch()

    def send(self, message: dict[str, object], fds: list[int] | None = None) -> None:
        if not self.open:
            return
        try:
            socket.send_fds(self.sock, [json.dumps(message).encode()], fds or [], socket.MSG_NOSIGNAL)
        except OSError:
            self.open = False  # the executor is gone: nobody to tell

    def _child(self, pid: int) -> tuple[int, int | None]:
        """Watch a forked child: its pidfd (ours to keep) and start tick (not reaped yet: still ours)."""
        pidfd = os.pidfd_open(pid)
        self.children[pidfd] = pid
        self.poller.register(pidfd, select.POLLIN)
        try:
            return pidfd, launcher.start_ticks(pid)
        except (OSError, ValueError, IndexError):
            return pidfd, None

    def start(self, payload: bytes, fds: list[int]) -> None:
        """A run asked of us (no spare was at hand): fork its launcher, answer with its pid."""
        if len(fds) != 2:
            for fd in fds:
                os.close(fd)
            self.send({"error": f"expected 2 descriptors (log, lock), got {len(fds)}"})
            return
        log_fd, lock_fd = fds
        try:
            spec = json.loads(payload)
            pid = _fork()
        except (ValueError, OSError) as exc:
            os.close(log_fd)
            os.close(lock_fd)
            self.send({"error": f"cannot start the run's launcher: {exc}"})
            return
        if pid == 0:
            _run_and_exit(lambda: _be_the_run(spec, log_fd, lock_fd, self.policy, self.spawn))
        os.close(log_fd)
        os.close(lock_fd)
        pidfd, ticks = self._child(pid)
        self.send({"pid": pid, "start_ticks": ticks}, [pidfd])

    def make_spare(self) -> None:
        """Fork a launcher before its run exists: the executor hands it a run directly, with no round trip.

        The spare keeps only its own socket (and stdio) and waits; EOF (the executor went away)
        ends it unused. Its pid is known before its run is: the executor returns the handle at once.
        """
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            pid = _fork()
        except OSError:
            ours.close()
            theirs.close()
            return
        if pid == 0:
            keep = theirs.fileno()
            os.closerange(3, keep)  # the control socket, other spares: EOF must reach whoever waits on them
            os.closerange(keep + 1, 1 << 20)
            _run_and_exit(lambda: _wait_for_a_run(theirs, self.policy, self.spawn))
        theirs.close()
        pidfd, ticks = self._child(pid)
        self.send({"spare": pid, "start_ticks": ticks}, [pidfd, ours.fileno()])
        ours.close()

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

    def receive(self) -> None:
        try:
            payload, fds, _flags, _ = socket.recv_fds(self.sock, MAX_MESSAGE_BYTES, 2)
        except OSError:
            payload, fds = b"", []
        if not payload:
            self.open = False
            return
        if payload.startswith(b'{"taken"'):  # a spare became a run: fork the next one
            self.make_spare()
            return
        self.start(payload, fds)

    def serve(self) -> None:
        self.send({"ready": os.getpid()})
        for _ in range(self.spares):
            self.make_spare()
        while self.open:
            for fd, _ in self.poller.poll():
                if fd == self.sock.fileno():
                    self.receive()
                    if not self.open:
                        break
                elif fd in self.children:
                    self.reap(fd)


def _fork() -> int:
    sys.stdout.flush()
    sys.stderr.flush()
    return os.fork()


def _run_and_exit(body: Callable[[], int]) -> NoReturn:
    """In a forked child: never return into the warm launcher's loop."""
    code = 70
    try:
        code = body()
    except BaseException as exc:
        try:
            os.write(2, f"gpuplat warm launcher: {exc!r}\n".encode())
        finally:
            os._exit(code)
    os._exit(code)


def _wait_for_a_run(sock: socket.socket, policy: int | None, spawn: Callable[[list[str]], int]) -> int:
    payload, fds, _flags, _ = socket.recv_fds(sock, MAX_MESSAGE_BYTES, 2)
    if not payload or len(fds) != 2:
        return 0  # never used
    return _be_the_run(json.loads(payload), fds[0], fds[1], policy, spawn)


def main(argv: list[str], spawn: Callable[[list[str]], int] = launcher.spawn_command) -> int:
    if len(argv) not in (1, 2) or not all(a.isdigit() for a in argv):
        print("usage: warm/launcher.py FD [SPARES]", file=sys.stderr)
        return 2
    if os.geteuid() == 0:
        import ctypes  # noqa: F401 - once here, not in each run's launcher (its account switch sets no_new_privs)
    WarmLauncher(socket.socket(fileno=int(argv[0])), int(argv[1]) if len(argv) > 1 else 1, spawn).serve()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
