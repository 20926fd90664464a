"""What a user sends to create or preview a run."""

from __future__ import annotations

import math
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Self

from pydantic import Field, field_validator, model_validator

from .artifacts import CELL_FILE
from .errors import InvalidInput
from .matrix import Matrix
from .spec import PartialSpec, Text

MAX_NAME = 128
# Fields of a run request that are not spec fields (not merged with presets).
RUN_ONLY_FIELDS = (
    "project",
    "name",
    "command",
    "script",
    "code",
    "args",
    "presets",
    "params",
    "working_dir",
    "notebook",
    "matrix",
)
EXACTLY_ONE = (
    "give exactly one of command (an argv list or a shell string), script (a .py or .ipynb path) "
    "and code (Python source)"
)
MAX_COMMAND_BYTES = 64 * 1024
# Params are stored as JSON and compared across runs: finite numbers, integers within 64 bits.
MAX_PARAM_INT = 2**63 - 1
NBRUN = ("-m", "jupyter_gpuplat.nbrun")
EntrypointKind = Literal["command", "shell", "script", "notebook", "cell", "kernel"]
# A session runs a kernel: what the kernel agent runs, for people (the executor builds the real argv).
KERNEL_DISPLAY = ("python", "-m", "ipykernel_launcher")


@dataclass(frozen=True)
class Entrypoint:
    """What a run executes, before any executor turns it into an argv.

    `command`: `argv` as given; `shell`: `shell` run by /bin/sh -c; `script`: a .py file at
    `path` run by the executor's Python with `args`; `notebook`: an .ipynb at `path` executed
    headless by jupyter_gpuplat.nbrun (params reach it as GPUPLAT_PARAMS); `cell`: Python
    source in `code`, which the executor writes to the run's `code/cell.py` and runs with `args`;
    `kernel`: a GPU session's kernel, kept alive for the lease by the executor's kernel agent.
    Plain JSON through `to_json`/`from_json`: it is kept in the run's resolved spec.
    """

    kind: EntrypointKind
    argv: tuple[str, ...] = ()
    shell: str | None = None
    path: str | None = None
    code: str | None = None
    args: tuple[str, ...] = ()
    params: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind}
        if self.kind == "command":
            out["argv"] = list(self.argv)
        elif self.kind == "shell":
            out["shell"] = self.shell
        elif self.kind in ("script", "notebook"):
            out["path"] = self.path
        elif self.kind == "cell":
            out["code"] = self.code
        if self.args:
            out["args"] = list(self.args)
        if self.params:
            out["params"] = dict(self.params)
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Entrypoint:
        kind = data.get("kind")
        if kind not in ("command", "shell", "script", "notebook", "cell", "kernel"):
            raise ValueError(f"unknown entrypoint kind {kind!r}")
        return cls(
            kind=kind,
            argv=tuple(str(a) for a in data.get("argv") or ()),
            shell=data.get("shell"),
            path=data.get("path"),
            code=data.get("code"),
            args=tuple(str(a) for a in data.get("args") or ()),
            params=dict(data.get("params") or {}),
        )

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any]) -> Entrypoint:
        """The entrypoint of a resolved spec; specs stored before entrypoints existed had only `command`."""
        raw = spec.get("entrypoint")
        if isinstance(raw, Mapping):
            return cls.from_json(raw)
        command = spec.get("command") or []
        if isinstance(command, str):
            return cls("shell", shell=command)
        return cls("command", argv=tuple(str(a) for a in command))

    def argv_with(self, python: str, cell_path: str = CELL_FILE) -> list[str]:
        """The command line, with `python` as the interpreter of scripts, notebooks and cells."""
        if self.kind == "command":
            return list(self.argv)
        if self.kind == "shell":
            return ["/bin/sh", "-c", self.shell or ""]
        if self.kind == "script":
            return [python, str(self.path), *self.args]
        if self.kind == "notebook":
            return [python, *NBRUN, str(self.path), *self.args]
        if self.kind == "kernel":
            return [python, *KERNEL_DISPLAY[1:]]
        return [python, cell_path, *self.args]

    def display(self) -> list[str]:
        """For people: what the user gave (`python train.py --lr 0.1`), no executor's paths in it."""
        return self.argv_with("python")

    def files(self) -> list[str]:
        """The code files this entrypoint names: its script or notebook, or the .py/.ipynb of a command."""
        if self.kind in ("script", "notebook"):
            return [str(self.path)]
        if self.kind == "command":
            words: Sequence[str] = self.argv
        elif self.kind == "shell":
            try:
                words = shlex.split(self.shell or "")
            except ValueError:
                return []
        else:
            return []
        return [w for w in words[1:] if w.endswith((".py", ".ipynb")) and not w.startswith("-")]


class RunRequest(PartialSpec):
    """Explicit run fields: the last and strongest layer of the spec.

    Extends PartialSpec with the fields only a run has.
    """

    project: str = Field(min_length=1, max_length=63)
    name: str | None = Field(default=None, min_length=1, max_length=MAX_NAME)
    command: list[str] | str | None = None
    # A .py or .ipynb file, relative to the Jupyter root (the service makes it absolute).
    script: Text | None = Field(default=None, min_length=1, max_length=4096)
    # Python source to run as the run's script (a notebook cell): saved as cell.py in the run's directory.
    code: Text | None = Field(default=None, min_length=1, max_length=512 * 1024)
    args: list[Text] = Field(default_factory=list, max_length=256)
    # The directory the run starts in: relative to the Jupyter root or absolute inside it (the
    # service makes it absolute). None: the run's artifact directory, as before working_dir existed.
    working_dir: Text | None = Field(default=None, min_length=1, max_length=4096)
    presets: list[str] = Field(default_factory=list, max_length=16)
    params: dict[str, str | int | float | bool] | None = None

    # A session's notebook, relative to the Jupyter root: a kernel started on it attaches to the lease.
    notebook: Text | None = Field(default=None, min_length=1, max_length=4096)
    # A sweep: this request is the template of its children, one per param dict of the matrix.
    matrix: Matrix | None = None

    @model_validator(mode="after")
    def _command_or_script(self) -> Self:
        # None of them is a session (it runs a kernel); whether the resolved kind is one is
        # known only after the presets are merged (`check_entrypoint`).
        if sum(x is not None for x in (self.command, self.script, self.code)) > 1:
            raise ValueError(EXACTLY_ONE)
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
            if "\x00" in v:
                raise ValueError("must not contain NUL bytes")
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

    @field_validator("params")
    @classmethod
    def _params(cls, v: dict[str, Any] | None) -> dict[str, Any] | None:
        # NaN and Infinity are not JSON: stored, they break every read of the run.
        for key, value in (v or {}).items():
            if isinstance(value, float) and not math.isfinite(value):
                raise ValueError(f"{key!r} must be a finite number, got {value!r}")
            if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_PARAM_INT:
                raise ValueError(f"{key!r} must be an integer within 64 bits (-{MAX_PARAM_INT}..{MAX_PARAM_INT})")
        return v

    @field_validator("name")
    @classmethod
    def _name(cls, v: str | None) -> str | None:
        if v is not None and any(ord(c) < 32 for c in v):
            raise ValueError("must not contain control characters")
        return v

    def check_entrypoint(self, kind: str) -> None:
        """What to run must fit the resolved kind: a job runs one thing, a session a kernel."""
        given = [f for f in ("command", "script", "code") if getattr(self, f) is not None]
        if kind == "session":
            if given:
                raise InvalidInput(
                    f"a session runs a kernel, not {given[0]}",
                    f"remove {given[0]} (open a notebook on the session's kernel), or submit a job",
                )
        elif self.notebook is not None:
            raise InvalidInput("notebook names a session's notebook; this run is a job", "remove notebook")
        elif not given:
            raise InvalidInput(EXACTLY_ONE, "or use a session preset (kind: session) to start a kernel")

    def entrypoint(self) -> Entrypoint:
        """What to run; each executor builds its own argv from it."""
        if self.command is None and self.script is None and self.code is None:
            return Entrypoint("kernel")
        args = tuple(self.args)
        if self.code is not None:
            return Entrypoint("cell", code=self.code, args=args)
        if self.script is not None:
            kind: EntrypointKind = "notebook" if self.script.endswith(".ipynb") else "script"
            return Entrypoint(kind, path=self.script, args=args, params=dict(self.params or {}))
        assert self.command is not None
        if isinstance(self.command, str):
            return Entrypoint("shell", shell=self.command)
        return Entrypoint("command", argv=tuple(self.command))

    def argv(self) -> list[str]:
        """The command for people (the run record's `command`): `python train.py`, never a server's interpreter."""
        return self.entrypoint().display()

    def explicit_layer(self) -> dict[str, Any]:
        d = self.model_dump(exclude_unset=True, mode="json")
        for key in RUN_ONLY_FIELDS:
            d.pop(key, None)
        return d
