"""Indexing what runs record with jupyter_gpuplat.tracking into the store.

Runs append lines to files in their artifact directory (layout: core.artifacts); the
indexer reads them through the platform's ArtifactReader, from the offset it stored last
time, up to the last complete line, and appends the points in one transaction with the new offset. It is incremental and
idempotent: indexing twice, or after a crash, neither loses nor duplicates.
"""

from __future__ import annotations

import json
import re
import threading
import warnings

import numpy as np

from ..core.artifacts import METRICS, PARAMS
from ..executors.base import ArtifactError, ArtifactReader
from ..store import Store

READ_BYTES = 64 * 1024 * 1024


def _read(reader: ArtifactReader, run_id: str, rel: str, offset: int, limit: int) -> bytes:
    try:
        return reader.read(run_id, rel, offset, limit)
    except ArtifactError:  # a tracking file that links out of the run is not read
        return b""


def _read_new(reader: ArtifactReader, run_id: str, rel: str, offset: int) -> tuple[bytes, int]:
    """Complete lines written after `offset`, and the offset after them."""
    data = _read(reader, run_id, rel, offset, READ_BYTES)
    cut = data.rfind(b"\n") + 1
    return data[:cut], offset + cut


def parse_metrics(data: bytes, names: list[str] | None = None) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """`#k [names]` lines, each followed by `step,time,v1,v2,...` lines → per-name (steps, values).

    `names` is the signature in effect before the first `#k` line of `data`. Blocks are
    parsed by numpy in C; a damaged block falls back to line by line, skipping bad lines.
    """
    parts = _HEADER.split(data)
    out: dict[str, tuple[list[np.ndarray], list[np.ndarray]]] = {}
    blocks = [(names, parts[0])] + [(_names(parts[i]), parts[i + 1]) for i in range(1, len(parts) - 1, 2)]
    for sig, block in blocks:
        if not sig or not block.strip():
            continue
        table = _parse_block(block, len(sig) + 2)
        if not table.size:
            continue
        steps = table[:, 0].astype(np.int64)
        for j, name in enumerate(sig):
            s, v = out.setdefault(name, ([], []))
            s.append(steps)
            v.append(np.ascontiguousarray(table[:, 2 + j]))
    return {n: (np.concatenate(s), np.concatenate(v)) for n, (s, v) in out.items()}


_HEADER = re.compile(rb"^#k (.*)\n", re.MULTILINE)


def _names(raw: bytes) -> list[str] | None:
    try:
        names = json.loads(raw)
    except ValueError:
        return None
    return [str(n) for n in names] if isinstance(names, list) else None


def _parse_block(block: bytes, ncols: int) -> np.ndarray:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy warns (not raises) when text stops parsing early
        try:
            flat = np.fromstring(block.replace(b"\n", b","), sep=",")
            if flat.size % ncols == 0 and block.count(b"\n") == flat.size // ncols:
                return flat.reshape(-1, ncols)
        except (ValueError, DeprecationWarning):
            pass
    rows = []
    for line in block.splitlines():
        try:
            row = [float(x) for x in line.split(b",")]
        except ValueError:
            continue
        if len(row) == ncols:
            rows.append(row)
    return np.array(rows, dtype=np.float64).reshape(-1, ncols)


def signature_before(reader: ArtifactReader, run_id: str, rel: str, offset: int) -> list[str] | None:
    """The `#k` names in effect at `offset`: the last header line before it."""
    end = offset
    while end > 0:
        start = max(0, end - (1 << 20))
        chunk = _read(reader, run_id, rel, start, end - start)
        found = list(_HEADER.finditer(chunk))
        if found:
            return _names(found[-1].group(1))
        end = start
    return None


class MetricsIndexer:
    def __init__(self, store: Store, reader: ArtifactReader) -> None:
        self.store = store
        self.reader = reader
        self._sizes: dict[str, tuple[int, int]] = {}
        # Indexing runs in worker threads; two at once on one run would append twice.
        self._locks: dict[str, threading.Lock] = {}
        self._locks_guard = threading.Lock()

    def _size(self, run_id: str, rel: str) -> int:
        try:
            return self.reader.size(run_id, rel)
        except ArtifactError:
            return -1

    def catch_up(self, run_id: str) -> int:
        """Index everything complete on disk for this run; returns the points added."""
        with self._locks_guard:
            lock = self._locks.setdefault(run_id, threading.Lock())
        with lock:
            return self._catch_up(run_id)

    def _catch_up(self, run_id: str) -> int:
        sizes = (self._size(run_id, METRICS), self._size(run_id, PARAMS))
        if self._sizes.get(run_id) == sizes:
            return 0  # nothing new since last time: a stat, no query
        state = self.store.metrics.state(run_id)
        mdata, moff = _read_new(self.reader, run_id, METRICS, state.metrics_offset)
        pdata, poff = _read_new(self.reader, run_id, PARAMS, state.params_offset)
        if not mdata and not pdata:
            self._sizes[run_id] = sizes
            return 0
        names = signature_before(self.reader, run_id, METRICS, state.metrics_offset) if mdata else None
        series = parse_metrics(mdata, names)
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
        with self._locks_guard:
            self._locks.pop(run_id, None)
