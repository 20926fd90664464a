"""Response models of runs: a run as listed, its full record, a page of them.

Split out of service/schemas/models.py (which re-exports every name here).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field, model_validator

from ...core.status import Phase, Status
from .base import Seconds, _Open, _Out

# ---- runs ---------------------------------------------------------------------------------------


class ResourceAmounts(_Out):
    """Amounts for people: gpu a count, cpu and memory as quantities (`4`, `500m`, `16Gi`)."""

    gpu: int | None = None
    cpu: str | None = None
    memory: str | None = None


class Clocks(_Out):
    """Separate clocks: waiting in our queue, waiting to start, running."""

    queue_wait_seconds: Seconds | None
    start_wait_seconds: Seconds | None
    run_seconds: Seconds | None
    ticking: Literal["queue_wait_seconds", "start_wait_seconds", "run_seconds"] | None = Field(
        description="The clock that goes on now (null once the run is final): between two reads a client adds "
        "the time since its read to this one only (a preempted run waiting again ticks start wait, not run time)",
    )


class GitState(_Open):
    commit: str | None = None
    dirty: bool | None = None
    diff_path: str | None = None


class CodeRecord(_Open):
    """What code ran: the snapshot in the artifacts and, in a git repository, the commit and diff."""

    snapshot: str | None = None
    git: GitState | None = None


class SweepChildren(_Out):
    total: int
    by_status: dict[str, int]
    ended: int = Field(description="How many children are final (succeeded, failed or stopped)")


class BestChild(_Out):
    id: str
    value: float
    params: dict[str, Any]


class SweepChange(_Out):
    """PATCH runs/{id}: a sweep's concurrency or pausing/resuming its dispatch; a session's notebook
    (the notebook was renamed or moved: the lease, and its default name, follow it)."""

    model_config = ConfigDict(extra="forbid")
    concurrency: int | None = Field(default=None, ge=1, le=10_000, strict=True)
    paused: bool | None = Field(default=None, strict=True)
    notebook: str | None = Field(default=None, min_length=1, max_length=1024, pattern=r"^[^\x00]*\.ipynb$")

    @model_validator(mode="after")
    def _something(self) -> SweepChange:
        if self.concurrency is None and self.paused is None and self.notebook is None:
            raise ValueError("give concurrency (1..10000), paused (true/false), or a session's notebook (path.ipynb)")
        return self


class SessionState(_Out):
    """A GPU session's kernel and idle clock (null for jobs)."""

    notebook: str | None = Field(description="The notebook (relative to the Jupyter root) whose kernel this is")
    kernel: Literal["waiting", "starting", "ready", "ended"]
    kernel_id: str | None
    busy: bool
    idle_seconds: int | None = Field(description="The resolved termination.idle_seconds; null: never idle-culled")
    idle_deadline: Seconds | None = Field(description="When the session ends unless its kernel is used or kept")
    last_activity: Seconds | None
    idle_for_seconds: Seconds | None = Field(
        default=None,
        description="The idle clock: seconds since idle_since, the last activity of what judges it (null: not idle)",
    )
    idle_by: Literal["kernel", "gpu", "both"] = Field(
        default="kernel", description="The resolved termination.idle_by: what judges the session idle"
    )
    idle_judged_by: Literal["kernel", "gpu", "both"] = Field(
        default="kernel",
        description="What judges it now: idle_by, or kernel where its GPU use is not measured (gpu_not_measured)",
    )
    gpu_idle_threshold: float = Field(
        default=5.0, description="Utilisation percent under which a device counts idle (termination.gpu_idle_threshold)"
    )
    cull_busy_kernel: bool = Field(
        default=False, description="idle_by gpu: ended at the deadline even while a cell runs (else when it ends)"
    )
    idle_since: Seconds | None = Field(
        default=None, description="When the idle clock started (kernel activity, GPU use, or both); null: not idle"
    )
    gpu_last_busy: Seconds | None = Field(
        default=None, description="The last GPU sample at or over the threshold (or the start, or a keep); null: none"
    )
    gpu_not_measured: str | None = Field(
        default=None,
        description="idle_by gpu|both: why its GPU use is not seen (then judged by kernel activity); null: it is",
    )
    idle_reason: str | None = Field(
        default=None,
        description="The idle clock in words, as clients show it: 'GPU 0 idle for 52 min (util < 5%)', "
        "'no kernel activity for 12 min', 'GPU use is not measured here (…); idleness judged by kernel activity: …'",
    )


class RunWaiting(_Out):
    """Why a run that has not started waits: the reason code and message explain gives (no other team's names)."""

    reason: str = Field(description="A reason code of the queue or the executor layer, e.g. QueueQuota, NoCapacity")
    message: str = Field(description="With the numbers, e.g. 'queue a-train quota is exhausted: 2 gpu requested, ...'")


class StartEstimate(_Out):
    """When a waiting run is expected to start: the platform's admission run forward over predicted times."""

    p50_at: Seconds = Field(description="The median start (epoch seconds), fixed when computed")
    p90_at: Seconds = Field(description="The 90th percentile of its start: it starts by then 9 times in 10")
    p50_seconds: Seconds = Field(description="Seconds from this answer to p50_at (0 once it has passed)")
    p90_seconds: Seconds = Field(description="Seconds from this answer to p90_at (0 once it has passed)")
    basis: str = Field(description="What the estimate rests on: scenarios, runs and where their times came from")
    computed_at: Seconds = Field(description="When it was computed (a change in its queues recomputes it)")
    text: str = Field(description='The estimate as clients show it: "starts in ~6 min (p90 25 min)"')


def eta_field() -> Any:
    return Field(
        default=None,
        description="A waiting run's start estimate (our queue's: on Kubernetes not the wait for nodes); null when "
        "it does not wait, is not estimated yet, or has no basis (then eta_unknown says why)",
    )


def eta_unknown_field() -> Any:
    return Field(
        default=None,
        description='Why a run that has not started has no estimate: "r-… has no time limit and no history", '
        "a paused queue, or dispatched and held by the executor (Kubernetes: waiting for nodes)",
    )


class GpuUsage(_Out):
    """A run's GPU samples summarised (issue 27), or why there are none (`measured` false, `reason`)."""

    measured: bool
    reason: str | None = Field(default=None, description="Why not measured: no NVML, sampling off, a MIG device…")
    devices: list[int] | None = None
    samples: int | None = None
    mean_util: float | None = Field(default=None, description="Mean utilisation (%), each sample weighted by its time")
    p50_util: float | None = Field(default=None, description="Median utilisation (%) of the samples")
    memory_peak_bytes: int | None = None
    busy_fraction: float | None = Field(default=None, description="Share of sampled time at or over busy_percent")
    seconds_sampled: float | None = Field(default=None, description="Device-seconds sampled (summed over devices)")
    seconds_busy: float | None = Field(default=None, description="Device-seconds at or over busy_percent")
    busy_percent: float = Field(description="The utilisation (%) from which a device counts as busy")
    interval_seconds: float | None = Field(default=None, description="The sampling interval the figures were taken at")
    text: str = Field(
        description="The summary in words, for clients to show as it is: 'GPU busy 73% of 2.1 h · mean util 64% · "
        "memory peak 31.2 GiB', or 'GPU use not measured: <reason>'"
    )
    busy_text: str | None = Field(default=None, description="busy_fraction as shown: '73%'; null where not measured")
    memory_peak_text: str | None = Field(
        default=None, description="memory_peak_bytes as shown: '31.2 GiB'; null where not measured"
    )


class RunSummary(_Open):
    """One run, as listed (and the body of `POST runs`)."""

    id: str
    seq: int
    project: str
    user: str
    name: str | None
    kind: str
    queue: str
    status: Status
    phase: Phase = Field(
        description="Where the status sits: dispatch (our queue), execution (the executor places and starts it), "
        "run, or end (final)"
    )
    reason: str
    message: str
    resources: ResourceAmounts
    devices: list[int]
    flavor: str | None = Field(
        default=None,
        description="The flavor (kind of GPU) it was admitted on; null before dispatch or where its queue has none",
    )
    presets: list[str] = Field(description="The presets the request picked (its `presets`)")
    presets_applied: list[str] = Field(
        description="Every preset that made the spec, in merge order: the project's default_presets, then those picked"
    )
    waiting: RunWaiting | None = Field(
        description="Why it waits, while our queue or the executor holds it (not started); null otherwise"
    )
    eta: StartEstimate | None = eta_field()
    eta_unknown: str | None = eta_unknown_field()
    actions: list[Literal["stop", "edit", "keep", "resubmit"]] = Field(
        default_factory=list,
        description="What the caller may do to it now: stop; edit (a sweep's concurrency, pausing); keep (a "
        "session's idle clock); resubmit (a new run from its request). The service decides (core/policy.py)",
    )
    notes: list[str] | None = Field(
        default=None, description="POST runs only: cautions on the new run (e.g. no GPU: CPU only); as the preview's"
    )
    exit_code: int | None
    command: list[str] | None
    clocks: Clocks
    pid: int | None
    created_at: Seconds | None
    queued_at: Seconds | None
    dispatched_at: Seconds | None
    started_at: Seconds | None
    finished_at: Seconds | None
    updated_at: Seconds | None
    code: CodeRecord | None = None
    working_dir: str | None = None
    session: SessionState | None = None
    parent: str | None = Field(default=None, description="A sweep's child: the sweep's id")
    params: dict[str, Any] | None = Field(default=None, description="A sweep's child: its params")
    children: SweepChildren | None = Field(default=None, description="A sweep: its children by status")
    concurrency: int | None = Field(default=None, description="A sweep: children dispatched at once, at most")
    paused: bool | None = Field(default=None, description="A sweep: no more children are dispatched")
    matrix: dict[str, Any] | None = Field(default=None, description="A sweep: what it runs")
    best: BestChild | None = Field(default=None, description="A sweep: its best child by the matrix's objective")
    gpu_usage: GpuUsage | None = Field(
        default=None,
        description="What it did with the GPUs it held, from their samples; null where it held none. Listed: "
        "the summary kept on the record when it ended; null while it runs (GET runs/{id} has it then)",
    )


class TimelineEvent(_Open):
    id: int | None = None
    status: Status
    phase: Phase = Field(description="The phase of this event's status (as a run's `phase`)")
    reason: str
    message: str
    at: Seconds
    details: dict[str, Any] | None = None


class RunDetail(RunSummary):
    """One run's full record: request, resolved spec, provenance and timeline."""

    request: dict[str, Any] | None
    resolved: dict[str, Any] | None
    provenance: dict[str, str] | None
    timeline: list[TimelineEvent]
    stop_requested_by: str | None


class RunsPage(_Out):
    runs: list[RunSummary]
    next_before: int | None = Field(description="Pass as `before` for the next (older) page; null on the last")
