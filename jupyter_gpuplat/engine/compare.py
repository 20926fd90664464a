"""Compare: params, resolved-config differences, metric summaries and curves of runs."""

from __future__ import annotations

import math
from typing import Any, Protocol

import numpy as np

from ..core.compare import differing, flatten
from ..core.config import PlatformConfig
from ..core.downsample import downsample
from ..core.errors import InvalidInput
from ..core.policy import require_visible_run
from ..store import Store

MAX_RUNS = 500


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


def metrics_of(engine: Source, user: str, run_id: str, names: list[str] | None, max_points: int) -> dict[str, Any]:
    require_visible_run(engine.cfg, user, run_id, engine.store.get_run(run_id))
    return {n: curve(s, v, max_points) for n, (s, v) in engine.store.metrics.series(run_id, names).items()}


def compare(engine: Source, user: str, run_ids: list[str], names: list[str] | None, max_points: int) -> dict[str, Any]:
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
                "status": r["status"],
                "created_at": r["created_at"],
                "params": params[rid],
                "metrics": summaries.get(rid, {}),
                # what code ran (snapshot, git commit and diff) and where it started
                "code": r.get("code"),
                "working_dir": r.get("working_dir"),
            }
        )
    return {
        "runs": runs,
        "metrics": metric_names,
        "params": {"keys": sorted({k for p in params.values() for k in p}), "differ": differing(params)},
        "config": {
            "differ": [{"path": p, "values": {rid: configs[rid].get(p) for rid in run_ids}} for p in config_diff]
        },
        "curves": {rid: {n: curve(s, v, max_points) for n, (s, v) in series.get(rid, {}).items()} for rid in run_ids},
    }
