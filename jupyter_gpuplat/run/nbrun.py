"""Run a notebook headless as a GPU run: `python -m jupyter_gpuplat.nbrun NOTEBOOK`.

Params given at submission (GPUPLAT_PARAMS) are injected as a cell after the
cell tagged "parameters" (or first). Each cell's text output is echoed to
stdout as it completes, so the run's log follows the notebook; the executed
notebook, outputs included, becomes the run's output `outputs/<name>.ipynb`
even when a cell fails.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

from ..core.artifacts import OUTPUTS_DIR


def inject_params(nb: Any, params: dict[str, Any]) -> None:
    if not params:
        return
    source = "# Parameters injected by jupyter-gpuplat\n" + "\n".join(f"{k} = {v!r}" for k, v in params.items())
    cell = nbformat.v4.new_code_cell(source, metadata={"tags": ["injected-parameters"]})
    tagged = [i for i, c in enumerate(nb.cells) if "parameters" in c.get("metadata", {}).get("tags", [])]
    nb.cells.insert(tagged[0] + 1 if tagged else 0, cell)


def echo(cell: Any, index: int, total: int) -> None:
    print(f"[nbrun] cell {index + 1}/{total} done", flush=True)
    for out in cell.get("outputs", []):
        if out.get("output_type") == "stream":
            sys.stdout.write(out.get("text", ""))
        elif out.get("output_type") in ("execute_result", "display_data"):
            text = out.get("data", {}).get("text/plain")
            if text:
                sys.stdout.write(text + "\n")
        elif out.get("output_type") == "error":
            sys.stdout.write("\n".join(out.get("traceback", [])) + "\n")
    sys.stdout.flush()


def main(argv: list[str], kernel_manager_class: type[Any] | None = None) -> int:
    """Execute the notebook; `kernel_manager_class` is the warm launcher's forking one (warm/notebooks.py)."""
    if not argv:
        print("usage: python -m jupyter_gpuplat.nbrun NOTEBOOK.ipynb", file=sys.stderr)
        return 2
    path = Path(argv[0])
    nb = nbformat.read(path, as_version=4)
    inject_params(nb, json.loads(os.environ.get("GPUPLAT_PARAMS") or "{}"))
    out_dir = Path(os.environ.get("GPUPLAT_ARTIFACTS_DIR", ".")) / OUTPUTS_DIR
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / path.name
    total = len(nb.cells)
    extra: dict[str, Any] = {"kernel_manager_class": kernel_manager_class} if kernel_manager_class else {}
    client = NotebookClient(
        nb,
        **extra,
        timeout=None,
        kernel_name=nb.metadata.get("kernelspec", {}).get("name", "python3"),
        resources={"metadata": {"path": str(path.parent)}},
        on_cell_executed=lambda cell, cell_index, execute_reply: echo(cell, cell_index, total),
    )
    print(f"[nbrun] executing {path} ({total} cells)", flush=True)
    code = 0
    try:
        client.execute()
    except CellExecutionError as exc:
        print(f"[nbrun] a cell failed: {str(exc).splitlines()[0] if str(exc) else exc}", flush=True)
        code = 1
    finally:
        tmp = target.with_name(f".{target.name}.tmp")
        nbformat.write(nb, tmp)
        os.replace(tmp, target)
        print(f"[nbrun] executed notebook saved as {OUTPUTS_DIR}/{target.name}", flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
