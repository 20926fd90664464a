"""Metric series and logged params, stored as chunks of packed arrays.

A series is split into chunks of at most CHUNK_POINTS points (int64 steps,
float64 values). Appending tops up the last chunk, then adds new ones, so the
row count stays ~points/CHUNK_POINTS however often a run is indexed. Each chunk
keeps its min/max/last, so summaries never read the arrays.

The indexer's positions in a run's files are kept with its params, in one row per run:
`metrics_offset` (metrics.csv), `params_offset` (params.jsonl) and `log_offset` (the binary
metrics log, .gpuplat/metrics.bin).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlalchemy import Connection, Engine, and_, bindparam, insert, select, update

from . import schema

CHUNK_POINTS = 16_384
_mc = schema.metric_chunks
_rt = schema.run_tracking
_UPDATE_CHUNK = update(_mc).where(
    and_(_mc.c.run_id == bindparam("_run"), _mc.c.name == bindparam("_name"), _mc.c.chunk == bindparam("_chunk"))
)


@dataclass(frozen=True)
class TrackingState:
    params: dict[str, Any]
    metrics_offset: int
    params_offset: int
    log_offset: int = 0


def _stats(values: np.ndarray) -> tuple[float | None, float | None]:
    finite = values[np.isfinite(values)]
    if not finite.size:
        return None, None
    return float(finite.min()), float(finite.max())


def _num(v: float) -> float | None:
    return v if math.isfinite(v) else None


def _chunk_row(steps: np.ndarray, values: np.ndarray) -> dict[str, Any]:
    vmin, vmax = _stats(values)
    return {
        "n": int(steps.size),
        "steps": steps.astype(np.int64).tobytes(),
        "values": values.astype(np.float64).tobytes(),
        "vmin": vmin,
        "vmax": vmax,
        "last_step": int(steps[-1]),
        "last_value": _num(float(values[-1])),
    }


class MetricStore:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        # append reads each series' last chunk, then writes: on SQLite it takes the write lock first.
        self._writer = engine.execution_options(gpuplat_writes_after_reads=True)

    def state(self, run_id: str) -> TrackingState:
        with self.engine.connect() as conn:
            row = conn.execute(select(_rt).where(_rt.c.run_id == run_id)).mappings().first()
        if row is None:
            return TrackingState({}, 0, 0)
        return TrackingState(dict(row["params"]), row["metrics_offset"], row["params_offset"], row["log_offset"])

    def append(
        self,
        run_id: str,
        series: Mapping[str, tuple[np.ndarray, np.ndarray]],
        *,
        params: Mapping[str, Any],
        metrics_offset: int,
        params_offset: int,
        log_offset: int = 0,
    ) -> None:
        """Add points and params and move the offsets, in one transaction (a crash re-reads, never skips)."""
        with self._writer.begin() as conn:
            _add_points(conn, run_id, series)
            found = conn.execute(select(_rt.c.run_id).where(_rt.c.run_id == run_id)).first()
            values_ = {
                "params": dict(params),
                "metrics_offset": metrics_offset,
                "params_offset": params_offset,
                "log_offset": log_offset,
            }
            if found is None:
                conn.execute(insert(_rt).values(run_id=run_id, **values_))
            else:
                conn.execute(update(_rt).where(_rt.c.run_id == run_id).values(**values_))

    def append_system(self, points: Mapping[str, Mapping[str, tuple[np.ndarray, np.ndarray]]]) -> None:
        """The platform's own series of several runs (`system/…`: GPU samples), in one transaction; no offset moves."""
        with self._writer.begin() as conn:
            for run_id, series in points.items():
                _add_points(conn, run_id, series)

    def series(self, run_id: str, names: Sequence[str] | None = None) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        return self.series_many([run_id], names).get(run_id, {})

    def series_many(
        self, run_ids: Sequence[str], names: Sequence[str] | None = None, prefix: str | None = None
    ) -> dict[str, dict[str, tuple[np.ndarray, np.ndarray]]]:
        """Whole series of several runs in one query: {run_id: {name: (steps, values)}} (those named, or whose
        names start with `prefix`)."""
        q = select(_mc.c.run_id, _mc.c.name, _mc.c.steps, _mc.c["values"]).where(_mc.c.run_id.in_(list(run_ids)))
        if names:
            q = q.where(_mc.c.name.in_(list(names)))
        if prefix:
            q = q.where(_mc.c.name.startswith(prefix, autoescape=True))
        parts: dict[tuple[str, str], tuple[list[np.ndarray], list[np.ndarray]]] = {}
        with self.engine.connect() as conn:
            for run_id, name, steps, values in conn.execute(q.order_by(_mc.c.run_id, _mc.c.name, _mc.c.chunk)):
                s, v = parts.setdefault((run_id, name), ([], []))
                s.append(np.frombuffer(steps, np.int64))
                v.append(np.frombuffer(values, np.float64))
        out: dict[str, dict[str, tuple[np.ndarray, np.ndarray]]] = {}
        for (run_id, name), (s, v) in parts.items():
            out.setdefault(run_id, {})[name] = (np.concatenate(s), np.concatenate(v))
        return out

    def summaries(self, run_ids: Sequence[str], names: Sequence[str] | None = None) -> dict[str, dict[str, Any]]:
        """Per run and metric: count, min, max, last value and step, from chunk aggregates only."""
        if not run_ids:
            return {}
        q = select(_mc.c.run_id, _mc.c.name, _mc.c.n, _mc.c.vmin, _mc.c.vmax, _mc.c.last_step, _mc.c.last_value)
        q = q.where(_mc.c.run_id.in_(list(run_ids)))
        if names:
            q = q.where(_mc.c.name.in_(list(names)))
        out: dict[str, dict[str, Any]] = {r: {} for r in run_ids}
        with self.engine.connect() as conn:
            for run_id, name, n, vmin, vmax, last_step, last_value in conn.execute(q.order_by(_mc.c.chunk)):
                s = out[run_id].setdefault(name, {"count": 0, "min": None, "max": None})
                s["count"] += n
                if vmin is not None:
                    s["min"] = vmin if s["min"] is None else min(s["min"], vmin)
                    s["max"] = vmax if s["max"] is None else max(s["max"], vmax)
                s["last"], s["last_step"] = last_value, last_step
        return out

    def params(self, run_ids: Iterable[str]) -> dict[str, dict[str, Any]]:
        ids = list(run_ids)
        if not ids:
            return {}
        with self.engine.connect() as conn:
            rows = conn.execute(select(_rt.c.run_id, _rt.c.params).where(_rt.c.run_id.in_(ids)))
            return {r: dict(p) for r, p in rows}


def _add_points(conn: Connection, run_id: str, series: Mapping[str, tuple[np.ndarray, np.ndarray]]) -> None:
    """Append each series' points: top up its last chunk, then add chunks."""
    for name, (steps, values) in series.items():
        if not steps.size:
            continue
        last = conn.execute(
            select(_mc.c.chunk, _mc.c.n, _mc.c.steps, _mc.c["values"])
            .where(_mc.c.run_id == run_id, _mc.c.name == name)
            .order_by(_mc.c.chunk.desc())
            .limit(1)
        ).first()
        chunk = -1
        if last is not None:
            chunk = last.chunk
            room = CHUNK_POINTS - last.n
            if room > 0:
                merged_s = np.concatenate([np.frombuffer(last.steps, np.int64), steps[:room]])
                merged_v = np.concatenate([np.frombuffer(last.values, np.float64), values[:room]])
                conn.execute(
                    _UPDATE_CHUNK,
                    {"_run": run_id, "_name": name, "_chunk": chunk, **_chunk_row(merged_s, merged_v)},
                )
                steps, values = steps[room:], values[room:]
        rows = []
        for start in range(0, steps.size, CHUNK_POINTS):
            chunk += 1
            part = slice(start, start + CHUNK_POINTS)
            rows.append({"run_id": run_id, "name": name, "chunk": chunk, **_chunk_row(steps[part], values[part])})
        if rows:
            conn.execute(insert(_mc), rows)
