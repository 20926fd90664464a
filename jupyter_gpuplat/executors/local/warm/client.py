"""The executor's end of its warm launcher (warm/launcher.py): start it, hand it runs, hear their ends.

One warm launcher per local executor, started on the first run and again after it dies. A
launch is one SOCK_SEQPACKET message (the run's argv, env, cwd and exit file, with its log and
launch lock attached). Sent to a spare (a launcher forked ahead, whose pid, start tick and
pidfd we hold) it needs no answer: `Spare.hand_over` is synchronous. Sent to the warm launcher
itself (no spare at hand) the answer carries the launcher's pid, start tick and a pidfd, in the
order of the requests. Everything here runs on the event loop and never blocks: the sockets
are non-blocking and read through `add_reader`.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import fcntl
import json
import os
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..process import DEFAULT_SIGNALS

CONTROL_FD = 3
SPARES = 2  # launchers kept forked ahead: a burst of starts rarely finds none
_REPLY_BYTES = 1 << 16


class WarmLauncherError(Exception):
    """The warm launcher could not take the run (gone, refused, message too large)."""


@dataclass(frozen=True)
class WarmStart:
    pid: int
    start_ticks: int | None
    pidfd: int  # ours to close


@dataclass
class Spare:
    """A launcher forked ahead of its run, waiting on its socket for one."""

    pid: int
    start_ticks: int | None
    pidfd: int
    sock: socket.socket

    def hand_over(self, spec: Mapping[str, Any], log_fd: int, lock_fd: int) -> WarmStart | None:
        """Give it the run (it is the run's launcher from then on); None when it cannot take it."""
        try:
            socket.send_fds(self.sock, [json.dumps(spec).encode()], [log_fd, lock_fd], socket.MSG_NOSIGNAL)
        except OSError:
            self.discard()
            return None
        self.sock.close()  # it has its message; EOF after it means nothing more
        return WarmStart(self.pid, self.start_ticks, self.pidfd)

    def discard(self) -> None:
        self.sock.close()
        with contextlib.suppress(OSError):
            os.close(self.pidfd)


class WarmLauncherClient:
    """One running warm launcher process; `alive` is False once it has gone (then make a new one)."""

    def __init__(
        self,
        argv: list[str],
        env: Mapping[str, str],
        on_exit: Callable[[int, int], None],
        on_gone: Callable[[], None],
    ) -> None:
        """Start `argv FD SPARES` (warm/launcher.py by path, or warm/notebooks.py by module)."""
        self._on_exit = on_exit
        self._on_gone = on_gone
        self._pending: collections.deque[asyncio.Future[WarmStart]] = collections.deque()
        self._spares: dict[int, Spare] = {}  # pid → spare, oldest first
        self._loop = asyncio.get_running_loop()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        # above CONTROL_FD: posix_spawn's dup2 onto the same number would keep O_CLOEXEC
        theirs_fd = fcntl.fcntl(theirs.fileno(), fcntl.F_DUPFD_CLOEXEC, CONTROL_FD + 1)
        theirs.close()
        try:
            self.pid = os.posix_spawn(
                argv[0],
                [*argv, str(CONTROL_FD), str(SPARES)],
                dict(env),
                file_actions=[
                    (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                    (os.POSIX_SPAWN_DUP2, theirs_fd, CONTROL_FD),
                ],
                setsid=True,  # a Ctrl-C meant for the server is not for it
                setsigmask=(),
                setsigdef=DEFAULT_SIGNALS,
            )
        except BaseException:
            ours.close()
            raise
        finally:
            os.close(theirs_fd)
        ours.setblocking(False)
        self._sock: socket.socket | None = ours
        self._pidfd: int | None = os.pidfd_open(self.pid)
        self._loop.add_reader(ours.fileno(), self._on_readable)
        self._loop.add_reader(self._pidfd, self._reap)

    @property
    def alive(self) -> bool:
        return self._sock is not None

    def take_spare(self) -> Spare | None:
        """A spare launcher, if one is ready; the warm launcher forks the next one."""
        if self._sock is None or not self._spares:
            return None
        pid = next(iter(self._spares))
        spare = self._spares.pop(pid)
        with contextlib.suppress(OSError):
            socket.send_fds(self._sock, [json.dumps({"taken": pid}).encode()], [])
        return spare

    def launch(self, spec: Mapping[str, Any], log_fd: int, lock_fd: int) -> asyncio.Future[WarmStart]:
        """Hand over one run; the fds are duplicated into the message (close yours when this returns)."""
        if self._sock is None:
            raise WarmLauncherError("the warm launcher has ended")
        try:
            socket.send_fds(self._sock, [json.dumps(spec).encode()], [log_fd, lock_fd])
        except OSError as exc:  # EAGAIN (it is behind), EMSGSIZE (a huge env), EPIPE (it died)
            raise WarmLauncherError(f"cannot hand the run to the warm launcher: {exc}") from exc
        future: asyncio.Future[WarmStart] = self._loop.create_future()
        self._pending.append(future)
        return future

    def _on_readable(self) -> None:
        while self._sock is not None:
            try:
                payload, fds, _flags, _ = socket.recv_fds(self._sock, _REPLY_BYTES, 2)
            except BlockingIOError:
                return
            except OSError:
                payload, fds = b"", []
            for fd in fds:  # pidfds and spare sockets must not leak into what this server spawns
                os.set_inheritable(fd, False)
            if not payload:
                self._gone()
                return
            try:
                message = json.loads(payload)
            except ValueError:
                message = {"error": f"unreadable answer {payload[:80]!r}"}
            if "exit" in message:
                pid = int(message["exit"])
                unused = self._spares.pop(pid, None)
                if unused is not None:  # a spare that died before it had a run
                    unused.discard()
                else:
                    self._on_exit(pid, int(message["code"]))
            elif "spare" in message:
                self._add_spare(message, fds)
            elif "ready" not in message:
                self._answer(message, fds)

    def _add_spare(self, message: dict[str, Any], fds: list[int]) -> None:
        if len(fds) != 2:
            for fd in fds:
                os.close(fd)
            return
        sock = socket.socket(fileno=fds[1])
        sock.setblocking(False)
        pid = int(message["spare"])
        self._spares[pid] = Spare(pid, message.get("start_ticks"), fds[0], sock)

    def _answer(self, message: dict[str, Any], fds: list[int]) -> None:
        future = self._pending.popleft() if self._pending else None
        if future is None or future.done() or "pid" not in message or not fds:
            for fd in fds:  # nobody waits for it (a cancelled submit): the run is adopted on restart
                os.close(fd)
            if future is not None and not future.done():
                future.set_exception(WarmLauncherError(str(message.get("error") or "the warm launcher refused")))
            return
        future.set_result(WarmStart(int(message["pid"]), message.get("start_ticks"), fds[0]))

    def _gone(self) -> None:
        if self._sock is None:
            return
        self._detach("the warm launcher ended before it answered")
        self._on_gone()

    def _detach(self, why: str) -> None:
        """Stop reading, close the socket (the warm launcher ends at EOF), drop the spares, fail what waits."""
        if self._sock is None:
            return
        self._loop.remove_reader(self._sock.fileno())
        self._sock.close()
        self._sock = None
        self._drop_spares()
        while self._pending:
            future = self._pending.popleft()
            if not future.done():
                future.set_exception(WarmLauncherError(why))

    def _drop_spares(self) -> None:
        for spare in self._spares.values():  # EOF ends them unused
            spare.discard()
        self._spares.clear()

    def _release(self) -> None:
        """Stop watching the warm launcher's pidfd and reap it."""
        if self._pidfd is not None:
            self._loop.remove_reader(self._pidfd)
            os.close(self._pidfd)
            self._pidfd = None
        with contextlib.suppress(ChildProcessError):
            os.waitpid(self.pid, 0)

    def _reap(self) -> None:
        self._release()
        self._on_readable()  # read what it said before it went, then notice EOF
        self._gone()

    async def close(self, wait_seconds: float = 2.0) -> None:
        """Close the socket: the warm launcher ends at once (its runs keep running); reap it."""
        self._detach("the executor closed")
        if self._pidfd is None:
            return
        done: asyncio.Future[None] = self._loop.create_future()

        def ended() -> None:
            if not done.done():
                done.set_result(None)

        self._loop.remove_reader(self._pidfd)
        self._loop.add_reader(self._pidfd, ended)
        try:
            await asyncio.wait_for(done, wait_seconds)
        except TimeoutError:
            return  # left to the kernel: it ends when it reads EOF
        finally:
            if self._pidfd is not None:
                self._loop.remove_reader(self._pidfd)
        self._release()
