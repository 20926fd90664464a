"""What a user sends to create or preview a run."""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator

from .spec import PartialSpec

MAX_NAME = 128
MAX_COMMAND_BYTES = 64 * 1024


class RunRequest(PartialSpec):
    """Explicit run fields: the last and strongest layer of the spec.

    Extends PartialSpec with the fields only a run has.
    """

    project: str = Field(min_length=1, max_length=63)
    name: str | None = Field(default=None, min_length=1, max_length=MAX_NAME)
    command: list[str] | str
    presets: list[str] = Field(default_factory=list, max_length=16)
    params: dict[str, str | int | float | bool] | None = None

    @field_validator("command")
    @classmethod
    def _command(cls, v: Any) -> Any:
        if isinstance(v, str):
            if not v.strip():
                raise ValueError("must not be empty: give an argv list or a shell string")
            size = len(v.encode())
        else:
            if not v:
                raise ValueError("must not be empty: give an argv list or a shell string")
            if any(not isinstance(a, str) or "\x00" in a for a in v):
                raise ValueError("argv items must be strings without NUL bytes")
            size = sum(len(a.encode()) for a in v)
        if size > MAX_COMMAND_BYTES:
            raise ValueError(f"is too long ({size} bytes; at most {MAX_COMMAND_BYTES})")
        return v

    @field_validator("name")
    @classmethod
    def _name(cls, v: str | None) -> str | None:
        if v is not None and any(ord(c) < 32 for c in v):
            raise ValueError("must not contain control characters")
        return v

    def argv(self) -> list[str]:
        return ["/bin/sh", "-c", self.command] if isinstance(self.command, str) else list(self.command)

    def explicit_layer(self) -> dict[str, Any]:
        d = self.model_dump(exclude_unset=True, mode="json")
        for key in ("project", "name", "command", "presets", "params"):
            d.pop(key, None)
        return d
