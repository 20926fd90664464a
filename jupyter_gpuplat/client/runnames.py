"""Names that tell runs apart: a magic's run after its notebook and cell, labels by the params that differ.

A cell run from `%%gpu_submit` is named `train.ipynb · cell 3 · lr=0.03`:

- the notebook: `__session__`, which ipykernel puts in the user namespace from
  JPY_SESSION_NAME (the notebook's path, set by Jupyter Server when JupyterLab starts the
  kernel); without it (a console, nbclient) the name has no notebook part;
- the cell: JupyterLab sends the cell's id as `cellId` in the execute request's metadata;
  its place in the notebook as last saved gives `cell N` (1-based, every cell counted, as
  they appear top to bottom). A cell not in the saved file (new since the last save), no
  cell id (nbclient, a console) or no readable notebook gives `In [n]`, the execution count;
- the params: `--param` pairs in the order given.

Compare's legend and column heads keep the notebook/cell part and show only the params
whose values differ between the runs shown (`label_runs`).

Pure and dependency-free, below the client, the widgets and runedits (a resubmit with new params
renames a magic's run with the same `params_text`), so the three cannot drift.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from typing import Any

from ..core.naming import MAX_NAME, SEP, value_text

__all__ = ["SEP", "cell_label", "label_runs", "params_text", "run_name", "value_text"]


def params_text(params: Mapping[str, Any] | None, keys: Sequence[str] | None = None) -> str:
    """`lr=0.03, batch=64` (only `keys`, when given)."""
    items = params or {}
    chosen = [k for k in (keys if keys is not None else list(items)) if k in items]
    return ", ".join(f"{k}={value_text(items[k])}" for k in chosen)


def cell_index(notebook: str, cell_id: str) -> int | None:
    """The 1-based place of the cell with `cell_id` in the saved notebook (None when not there)."""
    try:
        with open(notebook, encoding="utf-8") as f:
            cells = json.load(f).get("cells") or []
    except (OSError, ValueError, AttributeError):
        return None
    for i, cell in enumerate(cells):
        if isinstance(cell, dict) and cell.get("id") == cell_id:
            return i + 1
    return None


def cell_label(notebook: str | None, cell_id: str | None, execution_count: int | None) -> str:
    """`train.ipynb · cell 3`, `train.ipynb · In [7]`, or `In [7]` without a notebook."""
    path = notebook if notebook is None or os.path.isabs(notebook) else os.path.abspath(notebook)
    index = cell_index(path, cell_id) if path and cell_id else None
    cell = f"cell {index}" if index is not None else f"In [{execution_count if execution_count else ' '}]"
    return f"{os.path.basename(notebook)}{SEP}{cell}" if notebook else cell


def run_name(cell: str, params: Mapping[str, Any] | None) -> str:
    """The cell's label and its params, cut to the service's limit."""
    text = params_text(params)
    name = f"{cell}{SEP}{text}" if text else cell
    return name if len(name) <= MAX_NAME else name[: MAX_NAME - 1] + "…"


def _base(name: str, params: Mapping[str, Any]) -> str:
    """A name without its trailing params part (`… · lr=0.1, k=2`), when that part is the run's own params."""
    head, sep, tail = name.rpartition(SEP)
    if not sep or not params:
        return name
    pairs = [p.strip() for p in tail.split(", ")]
    return head if all("=" in p and p.partition("=")[0] in params for p in pairs) else name


def label_runs(runs: Sequence[Mapping[str, Any]], differ: Sequence[str] | None = None) -> dict[str, str]:
    """A label per run id: its name (or id) and the params that differ between these runs.

    `differ` is the service's list of differing param keys (Compare answers it); without it
    they are found here. A name that already ends with the run's params (a magic's run) keeps
    its notebook/cell part only, so common params are not repeated in every label.
    """
    if differ is None:
        keys = sorted({k for r in runs for k in (r.get("params") or {})})
        differ = [k for k in keys if len({value_text((r.get("params") or {}).get(k)) for r in runs}) > 1]
    out: dict[str, str] = {}
    for r in runs:
        params = r.get("params") or {}
        name = str(r.get("name") or r["id"])
        base = _base(name, params)
        shown = params_text(params, differ)
        out[str(r["id"])] = f"{base}{SEP}{shown}" if shown else base
    # Two runs that still read the same: the id tells them apart.
    seen: dict[str, int] = {}
    for label in out.values():
        seen[label] = seen.get(label, 0) + 1
    return {rid: (f"{label}{SEP}{rid}" if seen[label] > 1 else label) for rid, label in out.items()}
