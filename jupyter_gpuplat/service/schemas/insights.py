"""Response models of GET insights (engine/insights.py computes them; docs/insights.md explains them)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


class WaitSummary(_Out):
    """Exact nearest-rank percentiles of a wait, in seconds (null: no runs)."""

    n: int
    p50: float | None
    p90: float | None
    p99: float | None
    max: float | None
    mean: float | None


class ReasonWait(_Out):
    reason: str = Field(description="The reason code the run was held by (core/reasons.py)")
    category: str = Field(description="quota, concurrency, max_per_user, capacity, placement or other")
    seconds: float = Field(description="Seconds runs spent held by this reason")
    runs: int = Field(description="Stretches of waiting with this reason")


class WaitsByCategory(_Out):
    quota: float
    concurrency: float
    max_per_user: float
    capacity: float
    placement: float
    other: float


class FailureCount(_Out):
    reason: str
    count: int


class RefusalCount(_Out):
    rule: str = Field(description="The refusal's error code (the policy rule that refused the submit)")
    count: int


class EtaCalibration(_Out):
    """How right the platform's start estimates were: each run's first estimate against its dispatch
    (start means dispatch: on Kubernetes the wait for nodes after it is not estimated)"""

    n: int = Field(description="Runs dispatched in the range that had a start estimate while waiting")
    p90_hit_rate: float | None = Field(
        description="The share of them dispatched at or before their first estimate's p90; null: n = 0"
    )
    p50_abs_error_seconds: float | None = Field(
        description="The mean of |dispatched_at - p50_at| of their first estimates, seconds; null: n = 0"
    )
    p50_abs_error_median_seconds: float | None = Field(
        description="The median (nearest rank) of the same errors, seconds; null: n = 0"
    )

    @classmethod
    def none(cls) -> EtaCalibration:
        """No run counted (an older answer without the figure reads as this)."""
        return cls(n=0, p90_hit_rate=None, p50_abs_error_seconds=None, p50_abs_error_median_seconds=None)


class BusyFigures(_Out):
    """GPU-hours held against busy: only runs whose devices were sampled count; null busy figures: none was."""

    gpu_hours_measured: float = Field(
        description="Device-hours sampled of the runs measured in the range (samples taken in it): held "
        "GPU-hours that were measured; 0: none was"
    )
    gpu_hours_busy: float | None = Field(
        description="Of gpu_hours_measured, the device-hours at or over the busy threshold (util ≥ 5%); "
        "null: nothing was measured"
    )
    busy_fraction: float | None = Field(description="gpu_hours_busy / gpu_hours_measured; null: nothing was measured")


class Figures(BusyFigures):
    runs: int = Field(description="Runs queued in the range")
    queue_wait: WaitSummary
    start_wait: WaitSummary
    waits_by_reason: list[ReasonWait]
    waits_by_category: WaitsByCategory
    gpu_hours: float = Field(description="GPUs x running time inside the range")
    allowance_gpu_hours: float | None = Field(description="The GPU quota x the range; null: no GPU quota")
    utilisation: float | None = Field(description="gpu_hours / allowance_gpu_hours")
    goodput: float | None = Field(description="Running time / lifetime of the runs that ended in the range")
    ended_runs: int
    failures: list[FailureCount]


class QueueFlavorFigures(Figures):
    """One flavor a queue offers (or its runs counted on): the figures of its runs admitted on that flavor."""

    name: str = Field(description="The flavor (kind of GPU)")
    quota_gpu: int | None = Field(description="The queue's GPU quota on this flavor; null: it no longer offers it")


class QueueFigures(Figures):
    name: str
    quota_gpu: int | None
    flavors: list[QueueFlavorFigures] = Field(
        default_factory=list, description="Per flavor, in the order the queue tries them; empty: it has no flavors"
    )
    eta_calibration: EtaCalibration = Field(
        default_factory=EtaCalibration.none,
        description="The start estimates of the queue's runs dispatched in the range",
    )


class FlavorFigures(Figures):
    """One flavor over the selected queues: the figures of the runs admitted on it (a run without one counts in none)"""

    name: str = Field(description="The flavor (kind of GPU)")
    quota_gpu: int | None = Field(
        description="Its GPU quotas summed over the selected queues that offer it (the allowance's GPUs); "
        "null: none of them offers it now"
    )
    machine_gpus: int | None = Field(description="This machine's GPUs of this flavor; null on a cluster")
    machine_gpu_hours: float | None = Field(description="machine_gpus x the range")
    machine_utilisation: float | None = Field(description="gpu_hours / machine_gpu_hours")


class TotalFigures(Figures):
    machine_gpu_hours: float | None = Field(description="The machine's GPUs x the range; null on a cluster")
    machine_utilisation: float | None
    eta_calibration: EtaCalibration = Field(
        default_factory=EtaCalibration.none,
        description="The start estimates of all the selected runs dispatched in the range",
    )


class BucketFigures(_Out):
    start: float
    gpu_hours: float
    allowance_gpu_hours: float | None
    machine_gpu_hours: float | None
    utilisation: float | None
    machine_utilisation: float | None
    queued: int
    queue_wait_p50: float | None
    queue_wait_p90: float | None
    queue_wait_p99: float | None


class TopUser(BusyFigures):
    user: str
    project: str
    runs: int
    gpu_hours: float


class ProjectGpu(BusyFigures):
    """One project's GPU-hours held and busy in the range."""

    project: str
    runs: int = Field(description="Its runs queued in the range")
    gpu_hours: float = Field(description="GPUs x running time inside the range")


class IdleRun(BusyFigures):
    """One measured run of an idle holder."""

    id: str
    user: str
    project: str
    queue: str
    gpu_hours: float = Field(description="GPU-hours it held inside the range")
    gpu_hours_idle: float = Field(description="gpu_hours_measured - gpu_hours_busy")


class IdleHolder(BusyFigures):
    """A (project, user) holding idle GPU time: measured, not busy."""

    project: str
    user: str
    gpu_hours: float = Field(description="GPU-hours its measured runs held inside the range")
    gpu_hours_idle: float = Field(description="gpu_hours_measured - gpu_hours_busy")
    measured_runs: int
    worst_runs: list[IdleRun] = Field(description="Its runs with the most idle GPU-hours, most first (at most 3)")


class Insights(_Out):
    """Observed waits, GPU-hours against quota, goodput, refusals and failures over a range"""

    since: float
    until: float
    bucket_seconds: float
    now: float
    queue: str | None
    project: str | None
    platform_admin: bool
    machine_gpus: int | None = Field(description="The executor's GPUs; null on a cluster (it places work itself)")
    busy_percent: float | None = Field(
        default=None, description="The utilisation (%) from which a sampled device counts as busy (gpu_hours_busy)"
    )
    total: TotalFigures
    queues: list[QueueFigures]
    flavors: list[FlavorFigures] = Field(
        default_factory=list,
        description="Per flavor (kind of GPU), in the platform config's order: those the selected queues offer "
        "or runs in the range were admitted on; empty: the platform has no flavors",
    )
    series: list[BucketFigures]
    top_users: list[TopUser]
    projects: list[ProjectGpu] = Field(default_factory=list, description="Per visible project, by name")
    idle_holders: list[IdleHolder] = Field(
        default_factory=list,
        description="Who held the most idle GPU time (measured, not busy), most first; runs not measured are left out",
    )
    refusals: list[RefusalCount]
