"""Indexing what runs record with jupyter_gpuplat.tracking into the store.

Runs write metrics to a binary log (`metrics.bin`, format: core.metric_format) and, from
processes that cannot have it and in runs recorded before it existed, to text lines
(`metrics.csv`); params to JSON lines (layout: core.artifacts). The indexer reads them through
the platform's ArtifactReader, each from the offset it stored last time up to the last complete
record (the log's committed length, the text's last newline), and appends the points in one
transaction with the new offsets. It is incremental and idempotent: indexing twice, or after a
crash, neither loses nor duplicates.
"""

from __future__ import annotations

import json
import re
import threading
import warnings

import numpy as np

from ..core import metric_format as fmt
from ..core.artifacts import METRICS, METRICS_LOG, PARAMS
from ..core.gpu_usage import SYSTEM_PREFIX
from ..executors.base import ArtifactError, ArtifactReader
from ..store import Store
from .metric_log import Series, concatenated, parse_records

READ_BYTES = 64 * 1024 * 1024


def _read(reader: ArtifactReader, run_id: str, rel: str, offset: int, limit: int) -> bytes:
    return reader.read_bookkeeping(run_id, rel, offset, limit)  # a tracking file that links out is not read


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
        self._sizes: dict[str, tuple[int, int, int]] = {}
        self._names: dict[str, dict[int, list[str]]] = {}  # per run: the log's names records read
        # Indexing runs in worker threads; two at once on one run would append twice.
        self._locks: dict[str, threading.Lock] = {}
        self._locks_guard = threading.Lock()

    def _size(self, run_id: str, rel: str) -> int:
        try:
            return self.reader.size(run_id, rel)
        except ArtifactError:
            return -1

    def _committed(self, run_id: str) -> int:
        """The metrics log's committed length (0 when the run has none)."""
        return fmt.committed(_read(self.reader, run_id, METRICS_LOG, 0, fmt.HEADER_BYTES)) or 0

    def catch_up(self, run_id: str) -> int:
        """Index everything complete on disk for this run; returns the points added."""
        with self._locks_guard:
            lock = self._locks.setdefault(run_id, threading.Lock())
        with lock:
            return self._catch_up(run_id)

    def _catch_up(self, run_id: str) -> int:
        sizes = (self._committed(run_id), max(self._size(run_id, METRICS), 0), max(self._size(run_id, PARAMS), 0))
        if self._sizes.get(run_id) == sizes:
            return 0  # nothing new since last time: a header read and two stats, no query
        state = self.store.metrics.state(run_id)
        lstart = max(state.log_offset, fmt.HEADER_BYTES)
        ldata = (
            _read(self.reader, run_id, METRICS_LOG, lstart, min(sizes[0] - lstart, READ_BYTES))
            if sizes[0] > lstart
            else b""
        )
        mdata, moff = _read_new(self.reader, run_id, METRICS, state.metrics_offset)
        pdata, poff = _read_new(self.reader, run_id, PARAMS, state.params_offset)
        if not ldata and not mdata and not pdata:
            self._sizes[run_id] = sizes
            return 0
        parts: Series = {}
        loff = parse_records(ldata, lstart, lambda at: self._names_at(run_id, at), parts) if ldata else lstart
        series = concatenated(parts)
        if mdata:
            names = signature_before(self.reader, run_id, METRICS, state.metrics_offset)
            for name, (s, v) in parse_metrics(mdata, names).items():
                old = series.get(name)
                series[name] = (s, v) if old is None else (np.concatenate([old[0], s]), np.concatenate([old[1], v]))
        # `system/…` is the platform's (GPU samples): a run's own series of that name are not taken.
        series = {n: v for n, v in series.items() if not n.startswith(SYSTEM_PREFIX)}
        params = dict(state.params)
        for line in pdata.splitlines():
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if isinstance(rec, dict):
                params.update(rec)
        self.store.metrics.append(
            run_id, series, params=params, metrics_offset=moff, params_offset=poff, log_offset=loff
        )
        if (loff if sizes[0] else 0, moff, poff) == sizes:
            self._sizes[run_id] = sizes
        return sum(int(s.size) for s, _ in series.values())

    def _names_at(self, run_id: str, at: int) -> list[str] | None:
        """The names record at `at` in the run's log (read once, then remembered)."""
        known = self._names.setdefault(run_id, {})
        names = known.get(at)
        if names is None:
            head = _read(self.reader, run_id, METRICS_LOG, at, 8)
            length = -int(np.frombuffer(head, "<i8")[0]) if len(head) == 8 else 0
            if 16 <= length <= fmt.MAX_NAMES_BYTES:
                names = fmt.decode_names(_read(self.reader, run_id, METRICS_LOG, at, length))
            if names is not None:  # what is not readable now is tried again next time
                known[at] = names
        return names

    def forget(self, run_id: str) -> None:
        self._sizes.pop(run_id, None)
        self._names.pop(run_id, None)
        with self._locks_guard:
            self._locks.pop(run_id, None)
