"""Containers' logs as the kubelet keeps them (timestamped lines per container run) and as the API streams them."""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from .clock import Clock


def rfc3339_nano(ns: int) -> str:
    """A log line's timestamp as the API writes it, to the nanosecond."""
    secs, nanos = divmod(ns, 1_000_000_000)
    return dt.datetime.fromtimestamp(secs, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S") + f".{nanos:09d}Z"


@dataclass
class ContainerLog:
    """One container run's output: (unix ns, line) pairs, ended when the container stops."""

    lines: list[tuple[int, str]] = field(default_factory=list)
    ended: bool = False
    started: bool = False


def stream_log(
    run: ContainerLog,
    changed: threading.Condition,
    *,
    since_ns: int,
    tail_lines: int | None,
    follow: bool,
    timestamps: bool,
    stop: Callable[[], bool],
) -> Iterator[bytes]:
    """One container run's lines from `since_ns` (the last `tail_lines`); with follow, until it ends or `stop()`.

    `changed` is the store's lock as a condition, notified when lines arrive.
    """
    pos = 0
    with changed:
        selected = [i for i, (ts, _) in enumerate(run.lines) if ts >= since_ns]
        if tail_lines is not None:
            selected = selected[-tail_lines:] if tail_lines else []
        pos = selected[0] if selected else len(run.lines)
    while True:
        with changed:
            chunk = run.lines[pos:]
            pos += len(chunk)
            ended = run.ended
        if chunk:
            yield "".join(
                (f"{rfc3339_nano(ts)} {text}\n" if timestamps else f"{text}\n") for ts, text in chunk
            ).encode()
        if not follow or ended or stop():
            return  # `ended` was read with the lines: everything has been sent
        with changed:
            if len(run.lines) == pos and not run.ended:
                changed.wait(0.25)


class ContainerLogs:
    """Every container run's log by (pod uid, container), oldest run first; `changed` is notified on each change.

    `changed` is a condition on the store's lock: writers hold that lock already (the kubelet
    writes under it), readers take it.
    """

    def __init__(self, lock: threading.RLock, clock: Clock) -> None:
        self.runs: dict[tuple[str, str], list[ContainerLog]] = {}
        self.changed = threading.Condition(lock)
        self.clock = clock
        self._last_ns = 0

    def _now_ns(self) -> int:
        ns = self.clock.time_ns()
        self._last_ns = max(ns, self._last_ns + 1)  # strictly increasing: timestamps resume logs
        return self._last_ns

    def of(self, uid: str, container: str) -> list[ContainerLog]:
        """The container's runs, oldest first ([] when it never started)."""
        return self.runs.get((uid, container), [])

    def start_run(self, uid: str, container: str) -> list[ContainerLog]:
        """A new run of the container, last in the list returned."""
        runs = self.runs.setdefault((uid, container), [])
        runs.append(ContainerLog(started=True))
        return runs

    def append(self, log: ContainerLog, text: str) -> None:
        log.lines.append((self._now_ns(), text))
        self.changed.notify_all()

    def emit(self, uid: str, container: str, text: str) -> None:
        """A line of the container's current run."""
        runs = self.runs.get((uid, container))
        if runs:
            self.append(runs[-1], text)

    def end_last(self, uid: str, container: str) -> None:
        """The container's current run stopped."""
        runs = self.runs.get((uid, container)) or [ContainerLog()]
        runs[-1].ended = True
        self.changed.notify_all()

    def end_container(self, uid: str, container: str) -> None:
        """Every run of the container is over (its pod was evicted)."""
        for run in self.runs.get((uid, container), []):
            run.ended = True
        self.changed.notify_all()

    def end_pod(self, uid: str) -> None:
        """Every run of every container of the pod is over: followers finish."""
        for key in [k for k in self.runs if k[0] == uid]:
            for run in self.runs[key]:
                run.ended = True
        self.changed.notify_all()

    def forget_pod(self, uid: str) -> None:
        for key in [k for k in self.runs if k[0] == uid]:
            del self.runs[key]

    def read(
        self,
        uid: str,
        container: str,
        *,
        follow: bool,
        timestamps: bool,
        previous: bool,
        since_seconds: int | None,
        tail_lines: int | None,
        stop: Callable[[], bool],
    ) -> Iterator[bytes]:
        """The container's log as the API streams it; with follow, until the container stops."""
        with self.changed:
            runs = self.of(uid, container)
            if previous:
                runs = runs[:-1]
            run = runs[-1] if runs else None
        if run is None:
            return
        since_ns = self.clock.time_ns() - since_seconds * 1_000_000_000 if since_seconds else 0
        yield from stream_log(
            run,
            self.changed,
            since_ns=since_ns,
            tail_lines=tail_lines,
            follow=follow,
            timestamps=timestamps,
            stop=stop,
        )
