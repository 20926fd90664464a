"""The executor contract: what the engine hands over, what executors report back.

An executor starts, observes and stops workloads. It never writes run state: it
reports `Observation`s (through the observer callback, or as the return value of
`attach`) and the engine records them. Handles are plain JSON so that a restarted
server can re-attach to work that kept running.
"""

from __future__ import annotations

import abc
import signal
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from traitlets import MetaHasTraits
from traitlets.config import LoggingConfigurable

from ..core.errors import GpuPlatError
from ..core.reasons import Reason

RUNNING = "running"
SUCCEEDED = "succeeded"
FAILED = "failed"
STOPPED = "stopped"
FINAL_STATUSES = frozenset({SUCCEEDED, FAILED, STOPPED})

Observer = Callable[["Observation"], None]


class ExecutorError(GpuPlatError):
    """An executor could not do what was asked; the message is safe to show a user."""

    status = 500
    code = "ExecutorError"


@dataclass(frozen=True)
class LaunchRequest:
    """Everything an executor needs to start one run."""

    run_id: str
    command: list[str]  # argv; the engine turns a shell string into ["/bin/sh", "-c", s]
    env: dict[str, str]  # from the resolved spec
    devices: tuple[int, ...]  # GPU indices assigned by admission (may be empty)
    workdir: str  # absolute: <artifacts_root>/<run_id>; the executor creates it
    timeout_seconds: int | None = None
    spec: Mapping[str, Any] = field(default_factory=dict)  # the whole resolved spec
    project: str = ""
    user: str = ""
    # Which layer set each spec field ("placement.tolerations" → "preset:gpu"), so that an
    # executor can say where a setting came from when the cluster refuses it.
    provenance: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Observation:
    """What an executor saw happen to a run.

    `status` is "starting", "running", "succeeded", "failed" or "stopped"; `reason` a code of
    the registry (`core/reasons.py`: Started, Completed, Error, …, and the execution side's);
    `message` a sentence with the numbers in it.
    """

    run_id: str
    status: str
    reason: Reason
    message: str
    exit_code: int | None = None
    # Executor-specific facts kept on the timeline event: the raw text (e.g. Kubernetes'
    # "0/4 nodes are available: …"), the layer, who can act, counts.
    details: Mapping[str, Any] | None = None

    @property
    def final(self) -> bool:
        return self.status in FINAL_STATUSES


@dataclass(frozen=True)
class Device:
    """One GPU an executor can hand out."""

    index: int
    name: str
    memory_mb: int | None
    uuid: str | None
    declared: bool  # True when configured by hand rather than found by nvidia-smi


def describe_returncode(returncode: int) -> str:
    """`Popen`-style return code → "exited with code 3" / "killed by signal SIGKILL (9)"."""
    if returncode >= 0:
        return f"exited with code {returncode}"
    number = -returncode
    try:
        name = signal.Signals(number).name
    except ValueError:
        return f"killed by signal {number}"
    return f"killed by signal {name} ({number})"


class _ExecutorMeta(abc.ABCMeta, MetaHasTraits):
    """Lets an executor be both an ABC and a configurable traitlets class."""


class Executor(LoggingConfigurable, metaclass=_ExecutorMeta):
    """Base of every executor.

    Lifecycle: `submit` starts a run and returns a plain-JSON handle; the engine
    stores it. The final Observation of a run arrives through the observer (set with
    `set_observer`, called on the event-loop thread). After a server restart the
    engine calls `attach` with the stored handle. `close` stops watching but never
    stops runs.
    """

    name: ClassVar[str] = "base"
    # True when the engine hands out device indices (local GPUs); False when the
    # executor's own scheduler places work (Kubernetes).
    assigns_devices: ClassVar[bool] = True
    # True when `submit` returns once the work is handed over, before it runs (a cluster
    # queues and places it): the engine records "starting", and the executor reports a
    # "running" Observation itself when the work starts, so start wait is not run time.
    reports_start: ClassVar[bool] = False

    _observer: Observer | None = None

    def set_observer(self, callback: Observer) -> None:
        """Receive Observations; called on the asyncio loop thread."""
        self._observer = callback

    def _emit(self, observation: Observation) -> None:
        if self._observer is None:
            self.log.warning("gpuplat: no observer for %s", observation)
            return
        try:
            self._observer(observation)
        except Exception:  # one faulty observer must not stop the watchers
            self.log.exception("gpuplat: observer failed on %s", observation)

    @abc.abstractmethod
    def devices(self) -> list[Device]:
        """The GPUs this executor can assign."""

    @abc.abstractmethod
    async def submit(self, req: LaunchRequest) -> dict[str, Any]:
        """Start a run; returns its plain-JSON handle once the workload is running.

        Raises ExecutorError when it cannot start (the engine records StartFailed).
        """

    @abc.abstractmethod
    def attach(self, run_id: str, handle: Mapping[str, Any]) -> Observation:
        """After a restart: "running" (reason Reattached, now watched) or a final Observation."""

    @abc.abstractmethod
    async def stop(self, run_id: str, handle: Mapping[str, Any], grace_seconds: float | None = None) -> None:
        """Ask a run to end, forcing it after the grace period; the final Observation goes to the observer."""

    @abc.abstractmethod
    def log_path(self, handle: Mapping[str, Any]) -> str:
        """Where the run's combined stdout/stderr is written."""

    @abc.abstractmethod
    async def close(self) -> None:
        """Stop watching. Must not stop running work: a restarted server re-attaches to it."""
