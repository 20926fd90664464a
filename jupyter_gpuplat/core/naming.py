"""Default run names, given where a request is resolved so every client shows the same `name`.

A run submitted without a name is named after what it runs: `python crash.py` -> `crash.py`,
`python -m pkg.train` -> `pkg.train`, `bash run.sh` -> `run.sh`, `sleep 60` -> `sleep`. A sweep's
child is its sweep's name and the params its point sets, the ones that differ between children
(`train.py · lr=0.1, k=2`); the params every child shares are left to its record. Pure.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["MAX_NAME", "SEP", "child_name", "command_name", "value_text"]

SEP = " · "
MAX_NAME = 128  # RunRequest.name's limit
# Programs that run a file named after them: the file names the run, not the program.
INTERPRETERS = re.compile(r"^(python[\d.]*|pypy[\d.]*|bash|sh|zsh|node|Rscript|julia|perl|ruby|torchrun|accelerate)$")
_ENV_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


def value_text(v: Any) -> str:
    """A param value as people read it: floats to 6 significant digits (0.3, not 0.30000000000000004)."""
    if isinstance(v, str):
        return v
    if isinstance(v, float):
        return f"{v:.6g}"
    return json.dumps(v, separators=(",", ":"), default=str)


def cut(name: str) -> str:
    return name if len(name) <= MAX_NAME else name[: MAX_NAME - 1] + "…"


def command_name(command: Sequence[str] | str | None) -> str | None:
    """What a command runs, as a name: its script or module, else its program (None for an empty one)."""
    if isinstance(command, str):
        try:
            words = shlex.split(command)
        except ValueError:  # unbalanced quotes: the shell will say so; the name need not
            words = command.split()
    else:
        words = [str(w) for w in command or ()]
    words = words[next((i for i, w in enumerate(words) if not _ENV_ASSIGNMENT.match(w)), len(words)) :]
    if not words:
        return None
    program = os.path.basename(words[0])
    if program == "env":  # `env -i FOO=1 python x.py`: its options, then the command
        after = words[1:]
        while after and after[0].startswith("-"):
            after = after[1:]
        return command_name(after) if after else program
    if INTERPRETERS.match(program):
        rest = iter(words[1:])
        for w in rest:
            if w in ("-m", "-c"):
                target = next(rest, "")
                return cut(target) if w == "-m" and target else f"{program} {w}"
            if w.startswith("-m") and len(w) > 2:
                return cut(w[2:])
            if not w.startswith("-"):
                return cut(os.path.basename(w.rstrip("/")) or w)
    return cut(program)


def child_name(base: str, point: Mapping[str, Any]) -> str:
    """A sweep child's name: its sweep's, then the params its point sets (those that differ)."""
    shown = ", ".join(f"{k}={value_text(v)}" for k, v in point.items())
    return cut(f"{base}{SEP}{shown}" if shown else base)
