"""Indexing what runs record with jupyter_gpuplat.tracking into the store.

Runs append JSON lines to files in their artifact directory; the indexer reads
from the offset it stored last time, up to the last complete line, and appends
the points in one transaction with the new offset. It is incremental and
idempotent: indexing twice, or after a crash, neither loses nor duplicates.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from ..store import Store

STATE_DIR = ".gpuplat"  # kept in step with jupyter_gpuplat.tracking
METRICS_FILE = "metrics.jsonl"
PARAMS_FILE = "params.jsonl"
READ_BYTES = 64 * 1024 * 1024


def _float(v: Any) -> float:
    try:
        return float(v)  # "nan" / "inf" were written as strings
    except (TypeError, ValueError):
        return float("nan")


def _read_new(path: Path, offset: int) -> tuple[bytes, int]:
    """Complete lines written after `offset`, and the offset after them."""
    try:
        with path.open("rb") as f:
            f.seek(offset)
            data = f.read(READ_BYTES)
    except FileNotFoundError:
        return b"", offset
    cut = data.rfind(b"\n") + 1
    return data[:cut], offset + cut


def parse_metrics(data: bytes) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """JSON lines {"s": step, "t": time, "m": {name: value}} → per-name (steps, values)."""
    if not data:
        return {}
    try:
        records = json.loads(b"[" + data.rstrip(b"\n").replace(b"\n", b",") + b"]")
    except ValueError:
        records = []
        for line in data.splitlines():  # one damaged line must not hide the others
            try:
                records.append(json.loads(line))
            except ValueError:
                continue
    steps: dict[str, list[int]] = {}
    values: dict[str, list[float]] = {}
    for rec in records:
        if not isinstance(rec, dict) or not isinstance(rec.get("m"), dict):
            continue
        step = rec.get("s", 0)
        for name, v in rec["m"].items():
            steps.setdefault(name, []).append(step)
            values.setdefault(name, []).append(v if type(v) is float else _float(v))
    return {n: (np.asarray(steps[n], dtype=np.int64), np.asarray(values[n], dtype=np.float64)) for n in steps}


class MetricsIndexer:
    def __init__(self, store: Store, artifacts_root: str) -> None:
        self.store = store
        self.artifacts_root = artifacts_root
        self._sizes: dict[str, tuple[int, int]] = {}

    def _files(self, run_id: str) -> tuple[Path, Path]:
        d = Path(self.artifacts_root, run_id, STATE_DIR)
        return d / METRICS_FILE, d / PARAMS_FILE

    def catch_up(self, run_id: str) -> int:
        """Index everything complete on disk for this run; returns the points added."""
        mpath, ppath = self._files(run_id)
        sizes = (_size(mpath), _size(ppath))
        if self._sizes.get(run_id) == sizes:
            return 0  # nothing new since last time: a stat, no query
        state = self.store.metrics.state(run_id)
        mdata, moff = _read_new(mpath, state.metrics_offset)
        pdata, poff = _read_new(ppath, state.params_offset)
        if not mdata and not pdata:
            self._sizes[run_id] = sizes
            return 0
        series = parse_metrics(mdata)
        params = dict(state.params)
        for line in pdata.splitlines():
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if isinstance(rec, dict):
                params.update(rec)
        self.store.metrics.append(run_id, series, params=params, metrics_offset=moff, params_offset=poff)
        if moff == sizes[0] and poff == sizes[1]:
            self._sizes[run_id] = sizes
        return sum(int(s.size) for s, _ in series.values())

    def forget(self, run_id: str) -> None:
        self._sizes.pop(run_id, None)


def _size(path: Path) -> int:
    try:
        return os.stat(path).st_size
    except FileNotFoundError:
        return -1
