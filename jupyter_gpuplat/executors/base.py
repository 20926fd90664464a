"""The executor contract: what the engine hands over, what executors report back.

An executor starts, observes and stops workloads. It never writes run state: it
reports `Observation`s (through the observer callback, or as the return value of
`attach`) and the engine records them. Handles are plain JSON so that a restarted
server can re-attach to work that kept running.
"""

from __future__ import annotations

import abc
import signal
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import IO, Any, ClassVar

from traitlets import MetaHasTraits
from traitlets.config import LoggingConfigurable

from ..core.artifacts import LOG
from ..core.errors import GpuPlatError
from ..core.gpu_usage import NotMeasured, Sample
from ..core.reasons import Reason
from ..core.request import Entrypoint
from ..core.status import FINAL, Status

# Observation statuses are the run statuses' strings (core.status owns them).
RUNNING = Status.RUNNING.value
SUCCEEDED = Status.SUCCEEDED.value
FAILED = Status.FAILED.value
STOPPED = Status.STOPPED.value
FINAL_STATUSES = FINAL

Observer = Callable[["Observation"], None]
# `Executor.gpu_samples`' answer: run id → its samples or why none; or why nothing was read at all.
GpuReading = dict[str, list[Sample] | NotMeasured] | NotMeasured


class ExecutorError(GpuPlatError):
    """An executor could not do what was asked; the message is safe to show a user."""

    status = 500
    code = "ExecutorError"


@dataclass(frozen=True)
class LaunchRequest:
    """Everything an executor needs to start one run.

    What to run is an `Entrypoint` (a command, a script, a notebook, a cell), not an argv:
    each executor builds its own argv (this machine's Python is not the one in a pod).
    """

    run_id: str
    entrypoint: Entrypoint
    env: dict[str, str]  # from the resolved spec
    devices: tuple[int, ...]  # GPU indices assigned by admission (may be empty)
    workdir: str  # absolute: the run's artifact directory, <artifacts_root>/<run_id>; the executor creates it
    timeout_seconds: int | None = None
    spec: Mapping[str, Any] = field(default_factory=dict)  # the whole resolved spec
    project: str = ""
    user: str = ""
    # Which layer set each spec field ("placement.tolerations" → "preset:gpu"), so that an
    # executor can say where a setting came from when the cluster refuses it.
    provenance: Mapping[str, str] = field(default_factory=dict)
    # Where the run starts (absolute, checked by the service); None: in `workdir`, as before.
    working_dir: str | None = None
    # The flavor admission chose, as the platform config declares it ({name, node_labels, tolerations, ...});
    # None where its queue has no flavors. Admin-controlled placement: the run's own placement never overrides it.
    flavor: Mapping[str, Any] | None = None

    @property
    def command(self) -> list[str]:
        """The command for people, as the run record shows it."""
        return self.entrypoint.display()

    @property
    def cwd(self) -> str:
        return self.working_dir or self.workdir


@dataclass(frozen=True)
class OutputFile:
    """One file of a run's outputs: its path relative to the run's directory."""

    path: str
    size: int
    modified: float


class ArtifactError(GpuPlatError):
    """A path asked of a run's artifacts is not one the reader may serve (outside the run, a link out)."""

    status = 400
    code = "InvalidPath"


class ArtifactReader(abc.ABC):
    """Reads what runs leave in their artifact directories (layout: core.artifacts).

    The service's logs, outputs and metrics endpoints and the metrics indexer read through
    this, never by opening files themselves: a control plane that is not the machine that runs
    the work replaces it (shared storage, an object store). Paths are layout paths relative to
    the run's directory; whatever is read stays inside that directory (links included).
    """

    @abc.abstractmethod
    def size(self, run_id: str, rel: str) -> int:
        """Bytes in the file, or -1 when it does not exist (or may not be read)."""

    @abc.abstractmethod
    def read(self, run_id: str, rel: str, offset: int = 0, limit: int = -1) -> bytes:
        """Up to `limit` bytes (all when -1) from `offset`; b"" when the file does not exist."""

    def read_bookkeeping(self, run_id: str, rel: str, offset: int = 0, limit: int = -1) -> bytes:
        """A file the platform keeps in the run's directory (tracking's index, metrics); b"" where the run
        put a link (or anything but a file) in its place: its own record is what it spoils, nobody else's."""
        try:
            return self.read(run_id, rel, offset, limit)
        except ArtifactError:
            return b""

    def log_size(self, run_id: str) -> int:
        return self.size(run_id, LOG)

    def read_log(self, run_id: str, offset: int = 0, limit: int = -1) -> bytes:
        return self.read(run_id, LOG, offset, limit)

    @abc.abstractmethod
    def is_dir(self, run_id: str, rel: str) -> bool:
        """True when `rel` names a directory of the run (raises ArtifactError for a path outside it)."""

    @abc.abstractmethod
    def list_outputs(self, run_id: str, rel: str = "") -> list[OutputFile]:
        """The run's files under `rel`, without the platform's bookkeeping; links out are not followed."""

    @abc.abstractmethod
    def open_output(self, run_id: str, rel: str) -> IO[bytes]:
        """One output file for reading; FileNotFoundError when it is not there."""

    def iter_output(self, run_id: str, rel: str, chunk: int = 1 << 20) -> Iterator[bytes]:
        with self.open_output(run_id, rel) as f:
            while data := f.read(chunk):
                yield data


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
    minor: int | None = None  # its /dev/nvidiaN (what a devices cgroup denies); None where unknown


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

    def gpu_interval(self) -> float | None:
        """Seconds between GPU samples of the devices runs hold (None: not sampled)."""
        return None

    def gpu_samples(self, held: Mapping[str, tuple[int, ...]], at: float) -> GpuReading:
        """A reading of the GPUs each run holds now (blocking: the engine calls it off its loop), or why none.

        `held`: run id → the run's devices. Where the engine assigns devices (local) these are its
        indices of this machine's GPUs; where the executor's scheduler places work (Kubernetes) they
        are the run's own ordinals 0..n-1, the numbering its process sees (CUDA_VISIBLE_DEVICES inside
        the pod). Samples carry the same numbers. The answer is per run: its samples, or why that run
        has none (a MIG or shared device, a pod the source does not report); or one NotMeasured for all.
        Executors that cannot see their GPUs say so: nothing is estimated in their place.
        """
        return NotMeasured(f"the {self.name} executor does not sample GPUs")

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
    def artifact_reader(self, artifacts_root: str) -> ArtifactReader:
        """How the platform reads the runs' artifacts (executors.artifacts.FilesystemArtifacts: this machine's disk)."""

    def check_working_dir(self, working_dir: str, artifacts_root: str) -> str | None:
        """Why runs of this executor cannot start in `working_dir` (a sentence), or None when they can."""
        return None

    @abc.abstractmethod
    def capture_code(self, req: LaunchRequest) -> dict[str, Any] | None:
        """What the run executes, kept in its artifacts: `{snapshot, git}` (blocking I/O: call it in a thread)."""

    def isolation(self) -> dict[str, Any]:
        """What this executor enforces between runs, as `capacity.isolation` shows it.

        `{"mode": str, "controls": [{"name", "enforced": bool, "detail"}]}`: each control says
        plainly whether it holds on this machine or cluster, and why not where it does not.
        """
        return {"mode": self.name, "controls": []}

    async def kernel_connection(self, run_id: str, handle: Mapping[str, Any]) -> dict[str, Any] | None:
        """A running session's kernel: Jupyter connection info (ip, ports, key, ...), None until it is up.

        Executors that know the kernel's process add `gpuplat_pid` and `gpuplat_generation`
        (which start of the kernel this is) so the provisioner can tell a restart happened.
        """
        raise ExecutorError(f"the {self.name} executor does not run GPU sessions")

    @abc.abstractmethod
    async def close(self) -> None:
        """Stop watching. Must not stop running work: a restarted server re-attaches to it."""
