"""What a run produced and what is asked of it: the preview, outputs, metrics, compare, status events, the log's end.

Split out of service/schemas/models.py (which re-exports every name here).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, RootModel

from ...core.status import Phase, Status
from .base import Number, Seconds, _Open, _Out
from .errors import ALLOWED_DOC, FIELD_DOC, RULE_DOC, Alternative, RefusingRule
from .runs import GpuUsage, StartEstimate, eta_field, eta_unknown_field

# ---- preview, outputs, metrics, compare ---------------------------------------------------------


class Violation(_Out):
    code: str
    message: str
    hint: str
    field: str | None = Field(default=None, description=FIELD_DOC)
    rule: str | None = Field(default=None, description=RULE_DOC)
    allowed: list[str] | None = Field(default=None, description=ALLOWED_DOC)


class Verdict(_Out):
    allowed: bool
    violations: list[Violation]
    rules: list[RefusingRule] = Field(description="Every refusing rule once, each with its own limit")
    alternatives: list[Alternative] = Field(description="Variants the policy accepts; the hints come from these")


class PreviewWait(_Out):
    reason: str
    message: str
    position: int = Field(description="1-based place among the queue's pending runs, this one added last")


class SoonerAlternative(_Out):
    """A variant of the request the policy accepts, expected to start sooner."""

    changes: dict[str, Any] = Field(description="queue, resources and/or placement, as a request gives them")
    hint: str = Field(description="e.g. 'use queue team-a-interactive', 'ask for 1 GPU instead of 2'")
    eta: StartEstimate | None = eta_field()
    eta_unknown: str | None = eta_unknown_field()


class Preview(_Open):
    """A run request resolved: the spec, which layer set each field, and the policy verdict."""

    resolved: dict[str, Any]
    provenance: dict[str, str]
    layers: list[str]
    locks: dict[str, str] = Field(
        description="Each path a layer locks (queue, resources.gpu…) and that layer, as provenance names it "
        "(`preset:notebook`, `project:team-a/preset:x`): later layers and the request cannot change it"
    )
    verdict: Verdict
    working_dir: str | None = Field(
        default=None, description="The directory the run starts in (null: the run's own artifact directory)"
    )
    notes: list[str] = Field(default_factory=list, description="Cautions the policy allows (e.g. no GPU: CPU only)")
    waits: PreviewWait | None = Field(
        default=None, description="What it would wait for if submitted now (null: allowed and starts next cycle)"
    )
    flavor: str | None = Field(
        default=None,
        description="The flavor (kind of GPU) it would take if submitted now and it fits now; null: it would wait, "
        "or its queue has no flavors",
    )
    eta: StartEstimate | None = Field(
        default=None,
        description="When it would start if submitted now (added after every run waiting in its queue); null for a "
        "sweep, a refused run, or where there is no basis (eta_unknown says why)",
    )
    eta_unknown: str | None = eta_unknown_field()
    alternatives: list[SoonerAlternative] = Field(
        default_factory=list,
        description="Allowed: ways to start sooner the policy accepts (another allowed queue, fewer GPUs, another "
        "flavor), soonest first, empty when it would start now or nothing is sooner. Refused: the verdict's "
        "alternatives (what the policy would accept), in its order. Each with its own estimate",
    )


class OutputFile(_Out):
    path: str
    size: int
    modified: Seconds


class Outputs(_Out):
    run_id: str
    outputs: list[OutputFile]


class Curve(_Out):
    """One metric curve, downsampled keeping extremes; null where the run logged NaN or infinity."""

    steps: list[Number]
    values: list[Number | None]
    count: int = Field(description="Points before downsampling")


class Metrics(RootModel[dict[str, Curve]]):
    """`GET runs/{id}/metrics`: one curve per metric name."""


class MetricSummary(_Open):
    count: int
    min: Number | None = None
    max: Number | None = None
    last: Number | None = None
    last_step: Number | None = None


class CompareRun(_Open):
    id: str
    name: str | None
    project: str
    user: str
    queue: str
    flavor: str | None = Field(default=None, description="The flavor (kind of GPU) it was admitted on, if any")
    status: Status
    phase: Phase = Field(description="The phase of the status (as a run's `phase`)")
    created_at: Seconds | None
    params: dict[str, Any]
    metrics: dict[str, MetricSummary]
    gpu_usage: GpuUsage | None = Field(default=None, description="Its GPU samples summarised; null where it held none")


class CompareGpuRow(_Out):
    """One GPU row of Compare, worded on the server: busy share or memory peak of each run."""

    key: Literal["busy_text", "memory_peak_text"] = Field(description="The `gpu_usage` field each value is")
    label: str
    values: dict[str, str] = Field(description="Run id → its value ('73%', '31.2 GiB'), 'not measured' or 'no GPU'")


class ParamsDiff(_Out):
    keys: list[str]
    differ: list[str]


class ConfigDifference(_Out):
    path: str
    values: dict[str, Any]
    diff: str | None = Field(
        None,
        description="For code (a multi-line text): each other run's unified diff against the first run's; "
        "`values` then say only 'same code' or 'code differs'",
    )


class ConfigDiff(_Out):
    differ: list[ConfigDifference]


class Compare(_Open):
    runs: list[CompareRun]
    metrics: list[str]
    metric_runs: dict[str, int] = Field(default_factory=dict, description="How many of the runs logged each metric")
    default_metric: str | None = Field(
        None, description="The metric to show first: the one most runs logged (the first by name among equals)"
    )
    direction: dict[str, Literal["min", "max"]] = Field(
        description="Each metric's better way: min (losses, errors, times, by name) or max; its best is that one",
    )
    params: ParamsDiff
    config: ConfigDiff
    curves: dict[str, dict[str, Curve]]
    gpu: list[CompareGpuRow] = Field(
        default_factory=list, description="GPU busy share and memory peak of each run; empty where none held a GPU"
    )


class SweepChild(_Open):
    id: str
    name: str | None
    status: str
    params: dict[str, Any]
    value: float | None = Field(description="The child's best value of the objective metric so far")


class SweepCompare(_Open):
    """A sweep's children against its objective (best first), with the curves of the top N."""

    sweep: str
    objective: dict[str, str] | None
    children: list[SweepChild]
    best: str | None
    top: list[str]
    curves: dict[str, dict[str, Curve]]


class StatusEvent(_Open):
    """One `event: status` of `GET events` (its SSE id is `id`)."""

    id: int
    run_id: str
    project: str
    queue: str
    user: str
    name: str | None
    status: Status
    phase: Phase = Field(description="The phase of the status (as a run's `phase`): dispatch, execution, run, end")
    reason: str
    message: str
    at: Seconds
    details: dict[str, Any] | None = None
    parent: str | None = Field(default=None, description="A sweep's child: the sweep's id")


class EtaChange(_Out):
    """One run in an `event: eta`: its new start estimate, or why it has none."""

    run_id: str
    project: str
    eta: StartEstimate | None = eta_field()
    eta_unknown: str | None = eta_unknown_field()


class EtaEvent(_Out):
    """One `event: eta` of `GET events`: the waiting runs whose start estimate moved (no SSE id: estimates are
    not part of any timeline, and a reconnect reads them again with the runs)."""

    runs: list[EtaChange]


class LogEnd(_Out):
    """The `event: end` closing `GET runs/{id}/logs`: the run's status and the offset to resume from."""

    status: Status
    offset: int


class OpenAPIDocument(RootModel[dict[str, Any]]):
    """This API's OpenAPI 3.1 document."""
