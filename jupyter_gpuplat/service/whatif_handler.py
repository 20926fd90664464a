"""POST whatif: replay a period under changed queue limits (engine/whatif.py does the work).

The request names queues and the settings to change (QueueConfig's own fields and bounds, and a
flavor's quota by name); the answer is observed beside predicted, per queue (and per flavor) and
per run, with the model's assumptions.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from tornado import web

from ..core.config import NAME_PATTERN
from ..core.errors import InvalidInput
from ..engine import whatif
from .handlers import BaseHandler

Epoch = float
_MAX_EPOCH = 1e11  # year 5138: any real instant is below
_DURATION = re.compile(r"^([0-9]{1,6})([smhdw])$")
_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class QuotaChange(_Strict):
    gpu: int | None = Field(default=None, ge=0, le=1024, strict=True)
    cpu: str | int | None = Field(default=None, description="cores, e.g. 8 or 500m")
    memory: str | None = Field(default=None, max_length=32, description="e.g. 64Gi")


class FlavorQuotaChange(_Strict):
    """A flavor's quota to change in one queue: its GPUs (no null: a flavor's GPU quota is a number)."""

    gpu: int | None = Field(default=None, ge=0, le=1024, strict=True)
    cpu: str | int | None = Field(default=None, description="cores, e.g. 8 or 500m; null: no limit")
    memory: str | None = Field(default=None, max_length=32, description="e.g. 64Gi; null: no limit")

    @field_validator("gpu")
    @classmethod
    def _number(cls, v: int | None) -> int:
        if v is None:  # the default is not validated: only an explicit null comes here
            raise ValueError("a flavor's GPU quota is a number of GPUs, not null")
        return v


class QueueChange(_Strict):
    """Settings to change on one queue; a field left out keeps its setting, null means no limit."""

    priority: int | None = Field(default=None, ge=-1000, le=1000, strict=True)
    concurrency: int | None = Field(default=None, ge=0, le=100_000, strict=True)
    quota: QuotaChange | None = None
    max_per_user: int | None = Field(default=None, ge=1, le=100_000, strict=True)
    ordering: Literal["best_effort_fifo", "strict_fifo"] | None = None
    paused: bool | None = Field(default=None, strict=True)
    flavors: dict[str, FlavorQuotaChange] | None = Field(
        default=None,
        max_length=64,
        description="a flavor's quota in this queue, by flavor name (one the queue offers): {h100: {gpu: 4}}",
    )

    def change(self) -> dict[str, object]:
        out = self.model_dump(mode="json", exclude_unset=True)
        if self.quota is not None:
            out["quota"] = self.quota.model_dump(mode="json", exclude_unset=True)
        if self.flavors is not None:
            out["flavors"] = {n: f.model_dump(mode="json", exclude_unset=True) for n, f in self.flavors.items()}
        else:
            out.pop("flavors", None)
        for key in ("priority", "ordering", "paused"):  # these have no "unlimited": null keeps the setting
            if out.get(key) is None:
                out.pop(key, None)
        return out


class WhatIfRequest(_Strict):
    """A period (epoch seconds, or a duration back from now such as 7d, 12h) and the changes."""

    since: Epoch | str = Field(description="epoch seconds, or how long ago: 30m, 12h, 7d, 2w")
    until: Epoch | str | None = Field(default=None, description="epoch seconds or how long ago; default now")
    changes: dict[str, QueueChange] = Field(default_factory=dict, max_length=100)
    queues: list[str] | None = Field(default=None, max_length=100, description="queues to report (default: changed)")
    max_runs: int = Field(default=1000, ge=0, le=10_000, strict=True, description="per-run rows at most")

    @field_validator("since", "until")
    @classmethod
    def _instant(cls, v: float | str | None) -> float | str | None:
        if isinstance(v, str):
            if not _DURATION.match(v):
                raise ValueError("give epoch seconds or a duration such as 30m, 12h, 7d, 2w")
        elif v is not None and not (0 <= v <= _MAX_EPOCH):
            raise ValueError(f"epoch seconds must be between 0 and {_MAX_EPOCH:.0f}")
        return v

    @field_validator("changes")
    @classmethod
    def _names(cls, v: dict[str, QueueChange]) -> dict[str, QueueChange]:
        for name in v:
            if not re.fullmatch(NAME_PATTERN, name):
                raise ValueError(f"{name[:64]!r} is not a queue name")
        return v

    @model_validator(mode="after")
    def _queue_names(self) -> WhatIfRequest:
        for name in self.queues or []:
            if not re.fullmatch(NAME_PATTERN, name):
                raise ValueError(f"{name[:64]!r} is not a queue name")
        return self

    def instant(self, value: float | str | None, now: float) -> float:
        if value is None:
            return now
        if isinstance(value, str):
            m = _DURATION.match(value)
            assert m is not None
            return now - int(m.group(1)) * _UNIT[m.group(2)]
        return float(value)


# ---- the answer ---------------------------------------------------------------------------------


class WaitFigures(_Strict):
    wait_p50_seconds: float | None
    wait_p90_seconds: float | None
    wait_p99_seconds: float | None
    wait_mean_seconds: float | None
    gpu_hours: float
    utilisation: float | None = Field(
        description="GPU-hours / allowance (quota GPUs, else the devices, × period); observed: of the settings in force"
    )
    waiting_at_end: int


class FlavorSettings(_Strict):
    name: str
    quota: dict[str, int | str]


class QueueSettings(_Strict):
    priority: int
    concurrency: int | None
    quota: dict[str, int | str]
    max_per_user: int | None
    ordering: str
    paused: bool
    flavors: list[FlavorSettings] = Field(default_factory=list, description="the queue's flavors in order; empty: none")


class FlavorSide(_Strict):
    runs: int = Field(description="the counted runs dispatched on this flavor in the period")
    gpu_hours: float
    utilisation: float | None = Field(description="GPU-hours / (the flavor's GPU quota × period)")


class FlavorWhatIf(_Strict):
    name: str
    quota_gpu: int = Field(description="the replayed settings' GPU quota of this flavor")
    observed_quota_gpu: int | None = Field(description="the settings in force")
    observed: FlavorSide = Field(description="by the flavor each run was admitted on")
    predicted: FlavorSide = Field(description="by the flavor the replay admitted it on")
    allowance_gpu_hours: float | None
    observed_allowance_gpu_hours: float | None
    predicted_held_seconds: dict[str, float] = Field(
        description="seconds this flavor's limit (quota; locally capacity) held the queue's head run in the replay"
    )


class QueueWhatIf(_Strict):
    name: str
    settings: QueueSettings
    observed_settings: QueueSettings
    observed: WaitFigures
    predicted: WaitFigures
    allowance_gpu_hours: float | None = Field(description="the replayed settings' GPU quota (else devices) × period")
    observed_allowance_gpu_hours: float | None = Field(description="the same for the settings in force")
    runs: int = Field(description="the caller's projects' runs (admins: all) the figures count")
    predicted_binding: str | None = Field(
        description="the limit that held the queue's waiting runs longest in the replay "
        "(quota, concurrency, max_per_user, capacity, paused, other); null: nothing waited"
    )
    predicted_binding_flavor: str | None = Field(
        default=None, description="the flavor whose limit (quota or its free devices) is the binding one; null: none"
    )
    predicted_binding_text: str | None = Field(
        default=None, description="the binding limit in words, e.g. the queue's h100 quota (flavors.h100)"
    )
    notes: list[str] = Field(description="e.g. a changed limit that does not bind, and the one that does")
    flavors: list[FlavorWhatIf] = Field(
        default_factory=list, description="per flavor of the queue, in its order (empty: the queue has no flavors)"
    )


class RunWhatIf(_Strict):
    id: str
    queue: str
    project: str
    user: str
    gpu: int
    queued_at: float
    observed_dispatched_at: float | None
    predicted_dispatched_at: float | None
    observed_wait_seconds: float
    predicted_wait_seconds: float


class WhatIfResponse(_Strict):
    since: float
    until: float
    devices: int | None
    queues: list[QueueWhatIf]
    runs: list[RunWhatIf] = Field(description="the caller's projects' runs only (admins: all), observed order")
    runs_truncated: bool
    hidden_runs: int = Field(
        description="other projects' runs in these queues: replayed (they compete), not in the figures, not named"
    )
    predicted_order: list[str]
    cycles: int
    assumptions: list[str]


class WhatIfHandler(BaseHandler):
    @web.authenticated
    async def post(self) -> None:
        req: WhatIfRequest = self.body(WhatIfRequest)
        now = self.engine.reads.now()
        since, until = req.instant(req.since, now), req.instant(req.until, now)
        if not until > since:
            raise InvalidInput(f"until ({until}) must be after since ({since})", "give a period that is not empty")
        changes = {name: c.change() for name, c in req.changes.items()}
        out = whatif.what_if(self.engine, self.user_name, changes, since, until, req.queues, req.max_runs)
        self.send_model(WhatIfResponse, out)
