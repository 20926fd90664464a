"""One listing entry per output: a file kept with `tracking.log_output` is listed once.

`log_output("out/summary.txt")` copies the file into `outputs/summary.txt` (copy2: same bytes,
same size and modification time) and records `outputs/summary.txt` in `.gpuplat/outputs.jsonl`.
When the source lies in the run's directory (the run's working directory by default), the
walk found both, so one file was listed twice. The listing keeps the logged copy (that is the
output) and drops a source twin: the same relative tail (`summary.txt`, or `model/final.txt`
of a logged directory), the same size and the same modification time. Pure functions, no I/O.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from .artifacts import OUTPUTS_DIR

_PREFIX = OUTPUTS_DIR + "/"


def logged_names(index: bytes) -> set[str]:
    """The layout paths `tracking.log_output` recorded (`outputs/...`); unreadable lines are skipped."""
    names: set[str] = set()
    for line in index.splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        name = rec.get("name") if isinstance(rec, dict) else None
        if isinstance(name, str) and name.startswith(_PREFIX):
            names.add(name.rstrip("/"))
    return names


def _logged(path: str, logged: set[str]) -> bool:
    """`path` is a logged file, or inside a logged directory."""
    parts = path.split("/")
    return any("/".join(parts[:i]) in logged for i in range(2, len(parts) + 1))


def one_per_file(files: Sequence[dict[str, Any]], logged: set[str]) -> list[dict[str, Any]]:
    """`files` ({path, size, modified}) without the sources of logged outputs listed beside them."""
    twins: dict[tuple[str, int, float], list[str]] = {}
    for f in files:
        if f["path"].startswith(_PREFIX) and _logged(f["path"], logged):
            tail = f["path"][len(_PREFIX) :]
            # the tail below the logged entry's parent: `summary.txt`, `model/final.txt`
            twins.setdefault((tail.rsplit("/", 1)[-1], f["size"], f["modified"]), []).append(tail)
    if not twins:
        return list(files)
    out = []
    for f in files:
        path = f["path"]
        if not path.startswith(_PREFIX):
            tails = twins.get((path.rsplit("/", 1)[-1], f["size"], f["modified"]), ())
            if any(path == t or path.endswith("/" + t) for t in tails):
                continue  # the source of a logged copy: the copy is its entry
        out.append(f)
    return out
