"""Response models: the shape of every JSON answer of the REST API.

Handlers render through `render(Model, data)`: the data is validated against the
model and serialised from it, keeping only what was given (`exclude_unset`), so a
field the service does not send stays absent and nothing is renamed. The OpenAPI
document (service/openapi.py) takes its response schemas from these models, and
the sidebar's TypeScript types are generated from that document.

Counts that have no number (an executor that does not count GPUs, e.g. Kubernetes)
are `null`, never a sentinel.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, RootModel

from ...core.config import PresetConfig, ProjectConfig, Role
from ...core.status import Phase, Status
from .base import Number, Seconds, _Open, _Out
from .runs import (  # noqa: F401  (re-exported: `models.RunSummary` keeps working)
    BestChild,
    Clocks,
    CodeRecord,
    GitState,
    ResourceAmounts,
    RunDetail,
    RunsPage,
    RunSummary,
    RunWaiting,
    SessionState,
    SweepChange,
    SweepChildren,
    TimelineEvent,
)

# ---- errors -------------------------------------------------------------------------------------


class RefusingRule(_Out):
    """One rule that refuses a run request, with its own limit."""

    rule: str = Field(description="The rule's code, e.g. ExceedsQueueQuota, MaxRunResources, NoCapacity")
    limit: str | None = Field(description="Its own limit, e.g. '2 gpu'; null for a rule without a number")
    message: str


class Alternative(_Out):
    """Request fields to change so that the policy accepts the run (checked by the policy itself)."""

    changes: dict[str, Any] = Field(description="queue, presets and/or resources, as a request gives them")
    hint: str


FIELD_DOC = "FieldNotAllowed: the run field a member may not set, e.g. volumes[data].host_path, env.HOME"
RULE_DOC = "FieldNotAllowed: the rule, e.g. volumes.connection, placement.preset, image.allowed, env.reserved"
ALLOWED_DOC = "FieldNotAllowed: what is allowed instead (connection names, preset:NAME, image patterns, ...)"


class ErrorDetail(_Out):
    code: str = Field(description="A stable code, e.g. InvalidRequest, NotFound, Forbidden")
    message: str
    hint: str
    field: str | None = Field(default=None, description=FIELD_DOC)
    rule: str | None = Field(default=None, description=RULE_DOC)
    allowed: list[str] | None = Field(default=None, description=ALLOWED_DOC)
    rules: list[RefusingRule] | None = Field(
        default=None, description="A refused run request: every refusing rule, each with its own limit"
    )
    alternatives: list[Alternative] | None = Field(
        default=None, description="A refused run request: variants the policy accepts (what the hints suggest)"
    )


class Error(_Out):
    """Every refusal: `{"error": {code, message, hint}}` (a refused run request adds rules, alternatives;
    FieldNotAllowed adds field, rule, allowed)."""

    error: ErrorDetail


# ---- explain ------------------------------------------------------------------------------------


class KernelReport(_Out):
    """What the Jupyter server running a session's kernel reports about it (its provisioner)."""

    model_config = ConfigDict(extra="forbid")
    event: Literal["ready", "restarted", "busy", "idle", "shutdown"]
    kernel_id: str | None = Field(default=None, max_length=64, pattern=r"^[A-Za-z0-9-]+$")


class KernelConnection(_Open):
    """A running session's kernel: Jupyter connection info (owner only: the key runs code as them)."""

    ready: bool = Field(description="false: the kernel is not up yet (ask again on the next event)")
    connection: dict[str, Any] | None


class SessionsPage(_Out):
    sessions: list[RunSummary]


class WhoCanAct(_Open):
    who: str
    can: str
    action: Literal["stop", "resubmit"] | None = Field(
        None,
        description="the run action this line is about; a client offers it when the run's `actions` include it",
    )


class Blocker(_Open):
    """A run that holds what this one waits for; id/name/user only when the caller may see them."""

    id: str | None
    name: str | None
    user: str | None
    project: str
    status: str
    gpu: int
    devices: list[int] | None


class QueueUsage(_Open):
    runs: int
    concurrency: int | None
    gpu: int
    gpu_quota: int | None
    pending: int
    free_gpus: int | None = Field(description="GPUs free on the executor; null where it does not count them")


class NumberLine(_Out):
    label: str = Field(description="numbers, position or queue")
    text: str = Field(description="e.g. '1/1 in use', '2 of 3 waiting in queue a-train'")


class Explain(_Open):
    """Why the run is where it is: the layer that holds it, the reason, numbers and who can act."""

    run_id: str
    status: Status
    queue: str
    layer: str = Field(description="queue (dispatch side), executor (execution side), running or done")
    reason: str
    message: str
    position: int | None
    blockers: list[Blocker]
    who_can_act: list[WhoCanAct]
    numbers: dict[str, Number | None] | None = None
    pending_in_queue: int | None = None
    queue_usage: QueueUsage | None = None
    details: dict[str, Any] | None = None
    layer_text: str = Field(description="What the layer means, in words (the reason registry's): as clients show it")
    number_lines: list[NumberLine] = Field(
        description="The numbers, the place in line and the queue's usage in words (core/explain_text.py)"
    )


# ---- queues, presets, projects, identity, capacity ---------------------------------------------


class HeadWait(_Out):
    reason: str
    message: str


class QueueUsageAmounts(ResourceAmounts):
    runs: int


class PendingEntry(_Out):
    """A pending run of a queue that the caller may see, with its place in the queue."""

    id: str
    name: str | None
    project: str
    user: str
    position: int = Field(description="1-based place among the queue's pending runs, by submission order")


class QueueView(_Open):
    """A queue with its limits, live usage and what holds its head."""

    name: str
    priority: int
    concurrency: int | None
    quota: ResourceAmounts
    max_per_user: int | None
    ordering: str
    paused: bool
    usage: QueueUsageAmounts
    pending: int = Field(description="Pending runs in all, every team's")
    pending_runs: list[PendingEntry] = Field(
        description="The caller's visible pending runs in position order (at most 100); others' are only counted"
    )
    pending_hidden: int = Field(description="Pending runs of projects the caller may not see (not named)")
    head_wait: HeadWait | None
    actions: list[Literal["pause", "resume"]] = Field(
        default_factory=list, description="What the caller may do to the queue (platform admins pause and resume it)"
    )


class QueuesPage(_Out):
    queues: list[QueueView]


class PresetView(PresetConfig):
    """A preset as configured, every field present."""

    model_config = ConfigDict(json_schema_serialization_defaults_required=True)


class PresetsPage(_Out):
    presets: list[PresetView]


class ProjectRecord(ProjectConfig):
    """A project as configured, every field present."""

    model_config = ConfigDict(json_schema_serialization_defaults_required=True)


class ProjectView(ProjectRecord):
    """A project with the caller's role and what it may use."""

    role: Role | None
    usable_queues: list[str]
    usable_presets: list[str]
    may_submit: bool = Field(description="Whether the caller may submit runs here (a member or more)")


class ProjectsPage(_Out):
    projects: list[ProjectView]
    restrict_by_default: bool


class ProjectRole(_Out):
    name: str
    role: Role | None
    may_submit: bool = Field(description="Whether the caller may submit runs here (a member or more)")


class WhoAmI(_Out):
    user: str
    groups: list[str] = Field(description="The identity provider's groups of the caller (team mode); [] otherwise")
    platform_admin: bool
    projects: list[ProjectRole]


class DeviceView(_Out):
    index: int
    name: str
    memory_mb: int | None
    uuid: str | None
    declared: bool
    in_use: bool
    run_id: str | None = Field(description="The run holding it, when the caller may see that run")


class IsolationControl(_Out):
    name: str = Field(description="users, environment, files, signals, memory, cpu, pids, gpu_devices, ...")
    enforced: bool = Field(description="True only where this machine or cluster actually enforces it")
    detail: str = Field(description="How it is enforced, or why it is not")


class Isolation(_Out):
    mode: str = Field(description="local: server | user (LocalExecutor.run_as); kubernetes: pod")
    controls: list[IsolationControl]


class Capacity(_Out):
    executor: str
    gpus: int
    free_gpus: int | None = Field(description="GPUs free now; null where the executor does not count them")
    devices: list[DeviceView]
    isolation: Isolation = Field(description="What keeps runs apart here, control by control (docs/security.md)")


# ---- admin writes -------------------------------------------------------------------------------


class QueueWritten(_Out):
    queue: QueueView
    version: int


class PresetWritten(_Out):
    preset: PresetView
    version: int


class ProjectWritten(_Out):
    project: ProjectRecord
    version: int


class Deleted(_Out):
    deleted: str
    version: int


class ConfigView(_Out):
    """The whole platform config (the YAML's content as JSON) and its version."""

    config: dict[str, Any]
    version: int = Field(description="the config's version: after a PUT the new one; a dry run's is the current one")
    applied: bool | None = Field(default=None, description="PUT only: false for a dry run")
    plan: dict[str, Any] | None = Field(
        default=None,
        description="PUT only: what the config changes (changes, members) and the runs it affects (affects); "
        "core/config_plan.py",
    )


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
    status: Status
    phase: Phase = Field(description="The phase of the status (as a run's `phase`)")
    created_at: Seconds | None
    params: dict[str, Any]
    metrics: dict[str, MetricSummary]


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


class LogEnd(_Out):
    """The `event: end` closing `GET runs/{id}/logs`: the run's status and the offset to resume from."""

    status: Status
    offset: int


class OpenAPIDocument(RootModel[dict[str, Any]]):
    """This API's OpenAPI 3.1 document."""


RESPONSE_MODELS: tuple[type[BaseModel], ...] = (
    Error,
    RunSummary,
    RunDetail,
    RunsPage,
    TimelineEvent,
    Explain,
    QueuesPage,
    QueueView,
    PresetsPage,
    ProjectsPage,
    WhoAmI,
    Capacity,
    QueueWritten,
    PresetWritten,
    ProjectWritten,
    Deleted,
    ConfigView,
    Preview,
    Outputs,
    Metrics,
    Compare,
)
# Payloads of the event streams: documented as schemas, sent as SSE `data:`.
STREAM_MODELS: tuple[type[BaseModel], ...] = (StatusEvent, LogEnd)


def render(model: type[BaseModel], data: Any) -> Any:
    """Validate `data` against `model` and return it as JSON-ready data, keeping only what was given."""
    return model.model_validate(data).model_dump(mode="json", exclude_unset=True, fallback=str)


def render_json(model: type[BaseModel], data: Any) -> str:
    """`render`, serialised to JSON text in one step (about half the cost of render + json.dumps)."""
    return model.model_validate(data).model_dump_json(exclude_unset=True, fallback=str)
