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

from pydantic import BaseModel, ConfigDict, Field

from ...core.config import PresetConfig, ProjectConfig, Role
from ...core.status import Phase, Status  # noqa: F401  (re-exported: `models.Status`)
from .base import _Open, _Out
from .errors import (  # noqa: F401  (re-exported: `models.RefusingRule` keeps working)
    Alternative,
    Error,
    ErrorDetail,
    RefusingRule,
)
from .explain import (  # noqa: F401  (re-exported: `models.KernelReport` keeps working)
    Blocker,
    Explain,
    KernelConnection,
    KernelReport,
    NumberLine,
    QueueUsage,
    SessionsPage,
    WhoCanAct,
)
from .results import (  # noqa: F401  (re-exported: `models.Violation` keeps working)
    Compare,
    CompareRun,
    ConfigDiff,
    ConfigDifference,
    Curve,
    EtaChange,
    EtaEvent,
    LogEnd,
    Metrics,
    MetricSummary,
    OpenAPIDocument,
    OutputFile,
    Outputs,
    ParamsDiff,
    Preview,
    PreviewWait,
    StatusEvent,
    SweepChild,
    SweepCompare,
    Verdict,
    Violation,
)
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
    StartEstimate,
    SweepChange,
    SweepChildren,
    TimelineEvent,
    eta_field,
    eta_unknown_field,
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
    eta: StartEstimate | None = eta_field()
    eta_unknown: str | None = eta_unknown_field()


class FlavorUsage(_Out):
    """One flavor a queue offers: its quota there, what the queue's runs hold of it, its free GPUs here."""

    name: str
    quota: ResourceAmounts
    usage: ResourceAmounts
    free_gpus: int | None = Field(description="Free GPUs of this flavor on this machine; null where not counted")


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
    flavors: list[FlavorUsage] = Field(
        default_factory=list, description="Its GPU quota split by flavor, in the order tried; empty: no flavors"
    )
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
    flavor: str | None = Field(default=None, description="Its flavor (kind of GPU); null where no flavor claims it")


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
STREAM_MODELS: tuple[type[BaseModel], ...] = (StatusEvent, EtaEvent, LogEnd)


def render(model: type[BaseModel], data: Any) -> Any:
    """Validate `data` against `model` and return it as JSON-ready data, keeping only what was given."""
    return model.model_validate(data).model_dump(mode="json", exclude_unset=True, fallback=str)


def render_json(model: type[BaseModel], data: Any) -> str:
    """`render`, serialised to JSON text in one step (about half the cost of render + json.dumps)."""
    return model.model_validate(data).model_dump_json(exclude_unset=True, fallback=str)
