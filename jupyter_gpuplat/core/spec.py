"""Run specs as users write them: partial specs (presets, defaults, run fields).

A partial spec is validated here, then handled as a plain dict by the merge
(merge.py), so an explicit `None` survives to mean "delete this field".
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic_core import PydanticCustomError

from .resources import MAX_CPU_MILLI, MAX_GPU, MAX_MEMORY_BYTES, Resources, parse_cpu, parse_memory

NAME_PATTERN = r"^[a-z0-9]([a-z0-9._-]{0,61}[a-z0-9])?$"
NAME_HINT = "lowercase letters, digits, '.', '_' and '-', 1-63 characters, starting and ending alphanumeric"
Kind = Literal["job", "session", "sweep"]
# What runs today. A kind or field the platform would silently ignore is refused instead
# (error type NOT_IMPLEMENTED, a 422), until the release that implements it.
IMPLEMENTED_KINDS: tuple[str, ...] = ("job",)
NOT_IMPLEMENTED = "not_implemented"
_COMING = {"session": "GPU sessions", "sweep": "sweeps"}


def not_implemented(what: str, comes_with: str) -> PydanticCustomError:
    return PydanticCustomError(
        NOT_IMPLEMENTED,
        "{what} is not implemented in this release (it comes with {comes_with}); remove it",
        {"what": what, "comes_with": comes_with},
    )


MergeStrategy = Literal["post_merge", "pre_merge", "isnull", "replace"]

# Top-level spec fields a layer may set, in display order.
SPEC_FIELDS = ("kind", "queue", "resources", "placement", "image", "env", "volumes", "termination")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ResourcesSpec(_Strict):
    gpu: int | None = Field(default=None, ge=0, le=MAX_GPU)
    cpu: str | float | None = None
    memory: str | int | None = None

    @field_validator("cpu")
    @classmethod
    def _cpu(cls, v: Any) -> Any:
        if v is not None and not (0 <= parse_cpu(v) <= MAX_CPU_MILLI):
            raise ValueError(f"must be between 0 and {MAX_CPU_MILLI // 1000} cores")
        return v

    @field_validator("memory")
    @classmethod
    def _memory(cls, v: Any) -> Any:
        if v is not None and not (0 <= parse_memory(v) <= MAX_MEMORY_BYTES):
            raise ValueError("must be between 0 and 1Ei")
        return v


class Toleration(_Strict):
    key: str | None = None
    operator: Literal["Equal", "Exists"] = "Equal"
    value: str | None = None
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = None
    toleration_seconds: int | None = None


class Placement(_Strict):
    node_selector: dict[str, str | None] | None = None
    tolerations: list[Toleration] | None = None
    affinity: dict[str, Any] | None = None
    gpu_type: str | None = None


class EnvVar(_Strict):
    name: str = Field(min_length=1, max_length=256, pattern=r"^[A-Za-z_][A-Za-z0-9_.-]*$")
    value: str | None = Field(default=None, max_length=65536)


class Volume(_Strict):
    name: str = Field(min_length=1, max_length=63)
    mount_path: str | None = None
    claim: str | None = None
    host_path: str | None = None
    secret: str | None = None
    config_map: str | None = None
    read_only: bool | None = None


class Termination(_Strict):
    timeout_seconds: int | None = Field(default=None, gt=0, le=365 * 86400)
    idle_seconds: int | None = Field(default=None, gt=0, le=365 * 86400)

    @field_validator("idle_seconds")
    @classmethod
    def _idle_not_implemented(cls, v: int | None) -> int | None:
        if v is not None:
            raise not_implemented("idle_seconds", "GPU sessions")
        return v


class PartialSpec(_Strict):
    """Every field optional: what one layer contributes."""

    kind: Kind | None = None
    queue: str | None = Field(default=None, max_length=63)
    resources: ResourcesSpec | None = None
    placement: Placement | None = None
    image: str | None = Field(default=None, max_length=512)
    env: list[EnvVar] | None = None
    volumes: list[Volume] | None = None
    termination: Termination | None = None

    @field_validator("kind")
    @classmethod
    def _kind_implemented(cls, v: str | None) -> str | None:
        if v is not None and v not in IMPLEMENTED_KINDS:
            raise not_implemented(f"kind {v!r}", _COMING.get(v, "a later release"))
        return v

    @field_validator("env", mode="before")
    @classmethod
    def _env_mapping(cls, v: Any) -> Any:
        # {"A": "1"} is accepted as shorthand for [{"name": "A", "value": "1"}].
        if isinstance(v, dict):
            return [{"name": k, "value": None if val is None else str(val)} for k, val in v.items()]
        return v

    def layer_dict(self) -> dict[str, Any]:
        """The fields this layer set, explicit None kept (it deletes)."""
        return self.model_dump(exclude_unset=True, mode="json")


def spec_resources(resolved: dict[str, Any]) -> Resources:
    return Resources.parse(resolved.get("resources") or {})
