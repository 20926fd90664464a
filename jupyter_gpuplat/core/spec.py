"""Run specs as users write them: partial specs (presets, defaults, run fields).

A partial spec is validated here, then handled as a plain dict by the merge
(merge.py), so an explicit `None` survives to mean "delete this field".
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator
from pydantic_core import PydanticCustomError

from .resources import MAX_GPU, Resources, parse_cpu, parse_memory

NAME_PATTERN = r"^[a-z0-9]([a-z0-9._-]{0,61}[a-z0-9])?$"
NAME_HINT = "lowercase letters, digits, '.', '_' and '-', 1-63 characters, starting and ending alphanumeric"
Kind = Literal["job", "session", "sweep"]  # a run record's kind
# The kinds a spec layer (org defaults, a preset, a run request's `kind`) may name. A sweep is a run
# record's kind too, but only a request with a `matrix` makes one (docs/sweeps.md): named as a
# layer's kind it is refused (NOT_IMPLEMENTED's 422), never accepted and ignored.
SpecKind = Literal["job", "session"]
DEFAULT_KIND = "job"  # a spec, preset or request that names no kind is a job
IMPLEMENTED_KINDS: tuple[str, ...] = ("job", "session")
NOT_IMPLEMENTED = "not_implemented"


def not_implemented(what: str, comes_with: str) -> PydanticCustomError:
    return PydanticCustomError(
        NOT_IMPLEMENTED,
        "{what} is not implemented in this release (it comes with {comes_with}); remove it",
        {"what": what, "comes_with": comes_with},
    )


def no_nul(v: str) -> str:
    # A NUL cannot reach argv, the environment or a path (exec and open refuse it): refuse it at submit, not at start.
    if "\x00" in v:
        raise ValueError("must not contain NUL bytes")
    return v


# A string that may end up in argv, the environment, a path or a manifest.
Text = Annotated[str, AfterValidator(no_nul)]

MergeStrategy = Literal["post_merge", "pre_merge", "isnull", "replace"]

# Top-level spec fields a layer may set, in display order.
SPEC_FIELDS = (
    "kind",
    "queue",
    "resources",
    "placement",
    "image",
    "env",
    "volumes",
    "connections",
    "termination",
    "security",
)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ResourcesSpec(_Strict):
    gpu: int | None = Field(default=None, ge=0, le=MAX_GPU)
    cpu: str | float | None = None
    memory: str | int | None = None

    # Before the type: one message naming the field and the allowed range, whatever was sent
    # (1e308, a 400-digit string), instead of one per branch of the union.
    @field_validator("cpu", mode="before")
    @classmethod
    def _cpu(cls, v: Any) -> Any:
        if v is not None:
            parse_cpu(v)
        return v

    @field_validator("memory", mode="before")
    @classmethod
    def _memory(cls, v: Any) -> Any:
        if v is not None:
            parse_memory(v)
        return v


class Toleration(_Strict):
    key: Text | None = None
    operator: Literal["Equal", "Exists"] = "Equal"
    value: Text | None = None
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = None
    # Kubernetes' int64; negative means 0 there, so it is refused here.
    toleration_seconds: int | None = Field(default=None, ge=0, le=2**63 - 1)


class Placement(_Strict):
    node_selector: dict[Text, Text | None] | None = None
    tolerations: list[Toleration] | None = None
    affinity: dict[str, Any] | None = None
    gpu_type: Text | None = None


class EnvVar(_Strict):
    name: str = Field(min_length=1, max_length=256, pattern=r"^[A-Za-z_][A-Za-z0-9_.-]*$")
    value: Text | None = Field(default=None, max_length=65536)


class Volume(_Strict):
    name: Text = Field(min_length=1, max_length=63)
    mount_path: Text | None = None
    claim: Text | None = None
    host_path: Text | None = None
    secret: Text | None = None
    config_map: Text | None = None
    read_only: bool | None = None


class Termination(_Strict):
    timeout_seconds: int | None = Field(default=None, gt=0, le=365 * 86400)
    # Sessions only: seconds without kernel activity before the session ends and gives its GPUs back.
    idle_seconds: int | None = Field(default=None, gt=0, le=365 * 86400)
    # Sessions only: what judges idleness (core/idle.py); unset: `kernel`, kernel activity alone.
    idle_by: Literal["kernel", "gpu", "both"] | None = None
    # Utilisation percent under which a device counts idle; unset: core.gpu_usage.BUSY_PERCENT (5).
    gpu_idle_threshold: float | None = Field(default=None, gt=0, le=100, allow_inf_nan=False)
    # `idle_by: gpu`: end a session whose GPUs are idle even while a cell runs (default: when the cell ends).
    cull_busy_kernel: bool | None = Field(default=None, strict=True)


class Security(_Strict):
    """Relaxations of the restricted default every run gets; only platform-admin presets may set them.

    The default (each field unset) is Pod Security `restricted` on Kubernetes: non-root, no
    privilege escalation, every capability dropped, the RuntimeDefault seccomp profile.
    """

    run_as_root: bool | None = None
    run_as_user: int | None = Field(default=None, ge=0, le=2**31 - 1)
    allow_privilege_escalation: bool | None = None
    add_capabilities: list[Annotated[str, Field(pattern=r"^[A-Z][A-Z_]{1,31}$")]] | None = Field(
        default=None, max_length=16
    )
    seccomp_profile: Literal["RuntimeDefault", "Unconfined"] | None = None


class PartialSpec(_Strict):
    """Every field optional: what one layer contributes."""

    kind: SpecKind | None = None
    queue: Text | None = Field(default=None, max_length=63)
    resources: ResourcesSpec | None = None
    placement: Placement | None = None
    image: Text | None = Field(default=None, max_length=512)
    env: list[EnvVar] | None = None
    volumes: list[Volume] | None = None
    # Named connections of the platform config (core/connections.py); a plain list: a later layer's replaces.
    connections: list[Annotated[str, Field(pattern=NAME_PATTERN)]] | None = Field(default=None, max_length=32)
    termination: Termination | None = None
    security: Security | None = None

    @field_validator("kind", mode="before")
    @classmethod
    def _kind_of_a_layer(cls, v: Any) -> Any:
        if v == "sweep":
            raise PydanticCustomError(
                NOT_IMPLEMENTED,
                "kind 'sweep' is made by a run request with a `matrix` (docs/sweeps.md), not by a preset, "
                "the defaults or a run's kind; remove it",
            )
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
