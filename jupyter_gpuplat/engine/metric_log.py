"""Reading a run's binary metrics log (format: core.metric_format) into per-name arrays.

Records of one names record follow each other at a fixed size, so a stretch of them is one
numpy view of the bytes: no parsing per point. The reader never trusts more than the header's
committed length, and stops at the first record it cannot read whole (it is read again next
time, so a record seen before its bytes arrive is not lost either).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..core import metric_format as fmt

Series = dict[str, tuple[list[np.ndarray], list[np.ndarray]]]
NamesAt = Callable[[int], "list[str] | None"]


def parse_records(data: bytes, base: int, names_at: NamesAt, out: Series) -> int:
    """Add the records in `data` (read from file offset `base`) to `out`; returns the offset after them.

    `names_at(offset)` gives the names of the names record at a file offset before `base`
    (None when there is none); names records inside `data` are remembered as they are met.
    """
    seen: dict[int, list[str]] = {}
    pos, size = 0, len(data) - len(data) % 8
    words = np.frombuffer(data, dtype="<i8", count=size // 8)
    while pos < size:
        head = int(words[pos // 8])
        if head < 0:  # a names record
            length = -head
            if length > fmt.MAX_NAMES_BYTES or pos + length > size:
                break
            names = fmt.decode_names(data[pos : pos + length])
            if names is None:
                break
            seen[base + pos] = names
            pos += length
            continue
        if not fmt.HEADER_BYTES <= head < base + pos:
            break  # not written yet, or damage: stop here
        names = seen.get(head)
        if names is None:
            names = names_at(head)
            if names is None:
                break
            seen[head] = names
        width = 3 + len(names)
        count = (size - pos) // (8 * width)
        table = words[pos // 8 : pos // 8 + count * width].reshape(count, width)
        ends = np.flatnonzero(table[:, 0] != head)  # the stretch ends where another record starts
        count = int(ends[0]) if ends.size else count
        if not count:
            break
        table = table[:count]
        steps = table[:, 1]
        values = table[:, 3:].view("<f8")
        for j, name in enumerate(names):
            s, v = out.setdefault(name, ([], []))
            s.append(steps)
            v.append(values[:, j])
        pos += count * width * 8
    return base + pos


def concatenated(series: Series) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    return {
        n: (np.concatenate(s).astype(np.int64), np.ascontiguousarray(np.concatenate(v), dtype=np.float64))
        for n, (s, v) in series.items()
    }
