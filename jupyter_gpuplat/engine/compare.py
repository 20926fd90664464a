"""Compare: params, resolved-config differences, metric summaries and curves of runs; and a sweep's
children against its objective (compare_sweep: every child's params and value, curves of the top N)."""

from __future__ import annotations

import difflib
import math
from collections import Counter
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np

from ..core.compare import differing, direction, flatten
from ..core.config import PlatformConfig
from ..core.downsample import downsample
from ..core.errors import InvalidInput
from ..core.gpu_usage import compare_rows
from ..core.policy import require_visible_run
from ..core.status import phase_of
from ..core.sweep_compare import Objective, ranked, top
from ..store import Store

MAX_RUNS = 500
MAX_SWEEP_CHILDREN = 10_000
MAX_TOP = 50


class Source(Protocol):
    """What compare reads: the store and the config (an Engine or its state)."""

    @property
    def store(self) -> Store: ...

    @property
    def cfg(self) -> PlatformConfig: ...


def curve(steps: np.ndarray, values: np.ndarray, max_points: int) -> dict[str, Any]:
    s, v = downsample(steps, values, max_points)
    return {
        "steps": s.tolist(),
        "values": [x if math.isfinite(x) else None for x in v.tolist()],  # JSON has no NaN
        "count": int(steps.size),
    }


def default_metric(summaries: dict[str, dict[str, Any]], run_ids: list[str]) -> str | None:
    """The metric most of the runs logged (the first by name among equals): a curve every run can draw."""
    counts = Counter(n for rid in run_ids for n in summaries.get(rid, {}))
    return min(counts, key=lambda n: (-counts[n], n)) if counts else None


def _is_code(path: str, value: Any) -> bool:
    return isinstance(value, str) and ("\n" in value or path.rsplit(".", 1)[-1] == "code")


def config_difference(path: str, values: dict[str, Any], run_ids: list[str]) -> dict[str, Any]:
    """One resolved-config difference. Code (`entrypoint.code`, any multi-line text) is not shown once per
    run: each run's value says whether it is the first run's code, and `diff` holds every other run's
    unified diff against the first."""
    if not any(_is_code(path, v) for v in values.values()):
        return {"path": path, "values": values, "diff": None}
    first = run_ids[0]
    base = str(values.get(first) or "")
    diffs = []
    for rid in run_ids[1:]:
        other = str(values.get(rid) or "")
        if other != base:
            diffs.append(
                "".join(
                    difflib.unified_diff(
                        base.splitlines(keepends=True),
                        other.splitlines(keepends=True),
                        f"{path} ({first})",
                        f"{path} ({rid})",
                    )
                ).rstrip("\n")
            )
    summary = {
        rid: "first run's code"
        if rid == first
        else "same code"
        if str(values.get(rid) or "") == base
        else "code differs"
        for rid in run_ids
    }
    return {"path": path, "values": summary, "diff": "\n".join(diffs)}


def metrics_of(engine: Source, user: str, run_id: str, names: list[str] | None, max_points: int) -> dict[str, Any]:
    require_visible_run(engine.cfg, user, run_id, engine.store.get_run(run_id))
    return {n: curve(s, v, max_points) for n, (s, v) in engine.store.metrics.series(run_id, names).items()}


def compare(
    engine: Source,
    user: str,
    run_ids: list[str],
    names: list[str] | None,
    max_points: int,
    gpu_usage: Callable[[dict[str, Any]], dict[str, Any] | None] = lambda _: None,
) -> dict[str, Any]:
    """`gpu_usage`: a run's summary of its GPU samples (engine.reads.gpu_usage), shown per run and as rows."""
    if not run_ids:
        raise InvalidInput("give the runs to compare: compare?runs=ID,ID", "e.g. compare?runs=r-1,r-2&metrics=loss")
    if len(run_ids) > MAX_RUNS:
        raise InvalidInput(f"{len(run_ids)} runs given; at most {MAX_RUNS} can be compared at once")
    rows = engine.store.runs_by_ids(run_ids)
    for rid in run_ids:
        require_visible_run(engine.cfg, user, rid, rows.get(rid))
    logged = engine.store.metrics.params(run_ids)
    summaries = engine.store.metrics.summaries(run_ids, names)
    series = engine.store.metrics.series_many(run_ids, names)
    params = {rid: {**((rows[rid]["request"] or {}).get("params") or {}), **logged.get(rid, {})} for rid in run_ids}
    configs = {rid: flatten({k: v for k, v in rows[rid]["resolved"].items() if k != "params"}) for rid in run_ids}
    config_diff = differing(configs)
    metric_names = sorted({n for s in summaries.values() for n in s})
    usages = {rid: gpu_usage(rows[rid]) for rid in run_ids}
    runs = []
    for rid in run_ids:
        r = rows[rid]
        runs.append(
            {
                "id": rid,
                "name": r["name"],
                "project": r["project"],
                "user": r["user"],
                "queue": r["queue"],
                "flavor": r.get("flavor"),  # the kind of GPU it ran on
                "status": r["status"],
                "phase": phase_of(r["status"]).value,
                "created_at": r["created_at"],
                "params": params[rid],
                "metrics": summaries.get(rid, {}),
                # what code ran (snapshot, git commit and diff) and where it started
                "code": r.get("code"),
                "working_dir": r.get("working_dir"),
                "gpu_usage": usages[rid],
            }
        )
    return {
        "runs": runs,
        "gpu": compare_rows(usages, run_ids),
        "metrics": metric_names,
        "metric_runs": {n: sum(1 for rid in run_ids if n in summaries.get(rid, {})) for n in metric_names},
        "default_metric": default_metric(summaries, run_ids),
        "direction": {n: direction(n) for n in metric_names},
        "params": {"keys": sorted({k for p in params.values() for k in p}), "differ": differing(params)},
        "config": {
            "differ": [
                config_difference(p, {rid: configs[rid].get(p) for rid in run_ids}, run_ids) for p in config_diff
            ]
        },
        "curves": {rid: {n: curve(s, v, max_points) for n, (s, v) in series.get(rid, {}).items()} for rid in run_ids},
    }


def compare_sweep(
    engine: Source, user: str, sweep_id: str, metric: str | None, n_top: int, max_points: int
) -> dict[str, Any]:
    """A sweep's children against its objective, best first, with the curves of the top `n_top`.

    Three reads whatever the sweep's size: the children (parent index), one metric's chunk
    summaries, the top children's series; no curve is read for the rest.
    """
    if not 0 <= n_top <= MAX_TOP:
        raise InvalidInput(f"top={n_top}: at most {MAX_TOP} children's curves can be overlaid", "e.g. top=5")
    row = engine.store.get_run(sweep_id)
    require_visible_run(engine.cfg, user, sweep_id, row)
    assert row is not None  # require_visible_run refuses a missing run
    if row.get("kind") != "sweep":
        raise InvalidInput(f"run {sweep_id} is not a sweep (kind {row.get('kind')})", "give a sweep's id")
    matrix = ((row.get("resolved") or {}).get("sweep") or {}).get("matrix") or {}
    objective = Objective.of(matrix.get("objective"))
    if metric:
        objective = Objective(metric, objective.maximize if objective and objective.metric == metric else False)
    children = engine.store.list_runs([row["project"]], parent=sweep_id, limit=MAX_SWEEP_CHILDREN)
    children.reverse()  # submission order: a grid's first child first
    ids = [c["id"] for c in children]
    summaries = engine.store.metrics.summaries(ids, [objective.metric] if objective else None)
    names = sorted({n for s in summaries.values() for n in s})
    if objective is None and names:
        objective = Objective(names[0])
    values = {rid: objective.value(summaries.get(rid, {}).get(objective.metric)) for rid in ids} if objective else {}
    order = ranked(ids, values, objective) if objective else ids
    by_id = {c["id"]: c for c in children}
    leaders = top(ids, values, objective, n_top) if objective else []
    series = engine.store.metrics.series_many(leaders, [objective.metric]) if objective and leaders else {}
    return {
        "sweep": sweep_id,
        "objective": None
        if objective is None
        else {"metric": objective.metric, "optimization": objective.optimization},
        "children": [
            {
                "id": rid,
                "name": by_id[rid]["name"],
                "status": by_id[rid]["status"],
                "params": (by_id[rid].get("resolved") or {}).get("params") or {},
                "value": values.get(rid),
            }
            for rid in order
        ],
        # The first ranked child with a value, whatever `top` is (top=0 still names the best).
        "best": next((rid for rid in order if values.get(rid) is not None), None),
        "top": leaders,
        "curves": {rid: {n: curve(s, v, max_points) for n, (s, v) in series.get(rid, {}).items()} for rid in leaders},
    }
