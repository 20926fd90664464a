"""A sweep's options and its one-line texts, shared by the CLI, the magics and the widgets.

`make_matrix` turns the compact options (`--grid lr=1e-3,3e-4`, `--random lr=loguniform:1e-5:1e-2`,
`--mapping values.json`, `--num-runs`, `--seed`, `--concurrency`, `--max-failures`, `--objective`) into the
`matrix` of `POST runs`; each param is read by `core.matrix.parse_param`, the one parser of the
compact form. `children_text` and `best_text` say where a sweep is (its children by status, its
best child) the same way everywhere.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..core.errors import InvalidInput
from ..core.status import Status
from . import runnames

# Counts read in lifecycle order: what waits, what runs, how it ended.
STATUS_ORDER = [s.value for s in Status]
MAPPING_HINT = 'a JSON file holding a list of param objects, one child each: [{"lr": 0.1}, {"lr": 0.01}]'


def make_matrix(
    *,
    grid: Sequence[str] = (),
    random: Sequence[str] = (),
    mapping: str | Path | None = None,
    num_runs: int | None = None,
    seed: int | None = None,
    concurrency: int | None = None,
    max_failures: int | None = None,
    objective: str | None = None,
) -> dict[str, Any]:
    """The matrix of the options (`POST runs`' JSON); InvalidInput naming the option when they make none.

    Whether the matrix as a whole holds (a grid of a continuous domain, too many children) is the
    service's schema's to say: the client checks it before sending, the service again.
    """
    from ..core.matrix import parse_param

    given = [flag for flag, v in (("--grid", grid), ("--random", random), ("--mapping", mapping)) if v]
    if len(given) != 1:
        raise InvalidInput(
            f"a sweep takes one of --grid, --random or --mapping, got {', '.join(given) or 'none'}",
            "repeat --grid or --random once per param, e.g. --grid lr=1e-3,3e-4 --grid batch=32,64",
        )
    matrix: dict[str, Any]
    if mapping:
        matrix = {"kind": "mapping", "values": _mapping_values(Path(mapping))}
    else:
        kind = "grid" if grid else "random"
        matrix = {"kind": kind, "params": {}}
        for text in grid or random:
            name, domain = parse_param(text)
            if name in matrix["params"]:
                raise InvalidInput(f"param {name} is given twice (--{kind} {text})", "give each param once")
            matrix["params"][name] = domain.model_dump(mode="json", exclude_none=True)
        if kind == "random" and num_runs is None:
            raise InvalidInput("--random needs --num-runs", "how many children to draw, e.g. --num-runs 20")
    extra = {"num_runs": num_runs, "seed": seed, "concurrency": concurrency, "max_failures": max_failures}
    matrix.update({k: v for k, v in extra.items() if v is not None})
    if objective:
        matrix["objective"] = parse_objective(objective)
    return matrix


def parse_objective(text: str) -> dict[str, str]:
    """`val_loss` (minimized) or `acc:maximize`: the metric the sweep's best child is chosen on."""
    metric, _, optimization = text.partition(":")
    optimization = optimization or "minimize"
    if not metric or optimization not in ("minimize", "maximize"):
        raise InvalidInput(
            f"--objective {text!r} is not metric[:minimize|maximize]", "e.g. --objective val_loss or acc:maximize"
        )
    return {"metric": metric, "optimization": optimization}


def _mapping_values(path: Path) -> list[dict[str, Any]]:
    try:
        values = json.loads(path.read_text())
    except OSError as exc:
        raise InvalidInput(f"--mapping {path}: cannot read it ({exc.strerror})", MAPPING_HINT) from None
    except ValueError as exc:
        raise InvalidInput(f"--mapping {path}: not JSON ({exc})", MAPPING_HINT) from None
    if not isinstance(values, list) or not all(isinstance(v, dict) for v in values):
        raise InvalidInput(f"--mapping {path}: not a list of param objects", MAPPING_HINT)
    return values


def by_status(run: Mapping[str, Any]) -> list[tuple[str, int]]:
    """The sweep's children counted by status, in lifecycle order, zeros left out."""
    counts = dict((run.get("children") or {}).get("by_status") or {})
    ordered = [(s, int(counts.pop(s))) for s in STATUS_ORDER if counts.get(s)]
    return ordered + sorted((s, int(n)) for s, n in counts.items() if n)


def children_text(run: Mapping[str, Any]) -> str:
    """`12 children: 2 running, 10 queued` (`0 children` for none yet)."""
    total = int((run.get("children") or {}).get("total") or 0)
    counts = ", ".join(f"{n} {s}" for s, n in by_status(run))
    return f"{total} {'child' if total == 1 else 'children'}" + (f": {counts}" if counts else "")


def done_count(run: Mapping[str, Any]) -> int:
    """Children that have ended, whatever the outcome (the progress bar's value)."""
    final = {Status.SUCCEEDED.value, Status.FAILED.value, Status.STOPPED.value}
    return sum(n for s, n in by_status(run) if s in final)


def params_text(params: Mapping[str, Any] | None) -> str:
    return runnames.params_text(params)  # the magics' names format values the same way


def best_text(run: Mapping[str, Any]) -> str:
    """`best r-… val_loss=0.12 (lr=0.001, batch=32)`, or "" while no child reported the objective."""
    best = run.get("best")
    if not best:
        return ""
    metric = ((run.get("matrix") or {}).get("objective") or {}).get("metric") or "value"
    return f"best {best['id']} {metric}={runnames.value_text(best.get('value'))} ({params_text(best.get('params'))})"


def concurrency_text(run: Mapping[str, Any]) -> str:
    """`concurrency 4` or `concurrency 4, paused`."""
    conc = run.get("concurrency", (run.get("matrix") or {}).get("concurrency"))
    return f"concurrency {conc}" + (", paused" if run.get("paused") else "")
