"""What a user sends to create or preview a run."""

from __future__ import annotations

import sys
from typing import Any, Self

from pydantic import Field, field_validator, model_validator

from .spec import PartialSpec

MAX_NAME = 128
CELL_FILE = "cell.py"
MAX_COMMAND_BYTES = 64 * 1024


class RunRequest(PartialSpec):
    """Explicit run fields: the last and strongest layer of the spec.

    Extends PartialSpec with the fields only a run has.
    """

    project: str = Field(min_length=1, max_length=63)
    name: str | None = Field(default=None, min_length=1, max_length=MAX_NAME)
    command: list[str] | str | None = None
    # A .py or .ipynb file, relative to the Jupyter root (the service makes it absolute).
    script: str | None = Field(default=None, min_length=1, max_length=4096)
    # Python source to run as the run's script (a notebook cell): saved as cell.py in the run's directory.
    code: str | None = Field(default=None, min_length=1, max_length=512 * 1024)
    args: list[str] = Field(default_factory=list, max_length=256)
    presets: list[str] = Field(default_factory=list, max_length=16)
    params: dict[str, str | int | float | bool] | None = None

    @model_validator(mode="after")
    def _command_or_script(self) -> Self:
        if sum(x is not None for x in (self.command, self.script, self.code)) != 1:
            raise ValueError(
                "give exactly one of command (an argv list or a shell string), script (a .py or .ipynb path) "
                "and code (Python source)"
            )
        if self.script is not None and not self.script.endswith((".py", ".ipynb")):
            raise ValueError(f"script must be a .py or .ipynb file, got {self.script!r}")
        if self.args and self.command is not None:
            raise ValueError("args go with script or code; put a command's arguments in command")
        return self

    @field_validator("command")
    @classmethod
    def _command(cls, v: Any) -> Any:
        if v is None:
            return v
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

    def argv(self, python: str = sys.executable) -> list[str]:
        """The command line: a notebook runs headless through jupyter_gpuplat.nbrun."""
        if self.code is not None:
            return [python, CELL_FILE, *self.args]
        if self.script is not None:
            if self.script.endswith(".ipynb"):
                return [python, "-m", "jupyter_gpuplat.nbrun", self.script, *self.args]
            return [python, self.script, *self.args]
        assert self.command is not None
        return ["/bin/sh", "-c", self.command] if isinstance(self.command, str) else list(self.command)

    def explicit_layer(self) -> dict[str, Any]:
        d = self.model_dump(exclude_unset=True, mode="json")
        for key in ("project", "name", "command", "script", "code", "args", "presets", "params"):
            d.pop(key, None)
        return d
