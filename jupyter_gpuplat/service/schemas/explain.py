"""Explain's answer (layer, reason, numbers, blockers, who can act) and the session kernel's reports.

Split out of service/schemas/models.py (which re-exports every name here).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field

from ...core.status import Status
from .base import Number, _Open, _Out
from .runs import (
    RunSummary,
    StartEstimate,
    eta_field,
    eta_unknown_field,
)

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


class FlavorWait(_Open):
    """Why a waiting run does not start on one flavor it may use (its queue's order)."""

    name: str
    reason: str = Field(description="A reason code (QueueQuota, NoCapacity, a limit of the whole queue, Admissible)")
    message: str = Field(description="e.g. 'h100: 2/2 in use (1 more needed) (queue a's h100 quota)'")
    numbers: dict[str, Number | None]
    blockers: list[Blocker]


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
    flavors: list[FlavorWait] | None = Field(
        default=None,
        description="A waiting run whose queue has flavors: one entry per flavor it may use, in the queue's order; "
        "`reason`/`message` are the first flavor's (or the queue's, when a limit of the whole queue holds it)",
    )
    details: dict[str, Any] | None = None
    eta: StartEstimate | None = eta_field()
    eta_unknown: str | None = eta_unknown_field()
    layer_text: str = Field(description="What the layer means, in words (the reason registry's): as clients show it")
    wait_line: str = Field(
        description="Where the run stands and why, in one line: 'position 1 of 2 in interactive · UserLimit 1/1 · "
        "<message> · starts in ~6 min (p90 25 min)' (a GPU session's waiting message, as every client shows it)"
    )
    number_lines: list[NumberLine] = Field(
        description="The numbers, the place in line and the queue's usage in words (core/explain_text.py)"
    )
