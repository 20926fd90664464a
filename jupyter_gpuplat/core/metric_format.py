"""The binary metrics log a run writes with jupyter_gpuplat.tracking: `.gpuplat/metrics.bin`.

The run maps the file (MAP_SHARED), copies each record into the mapping and then stores the
new committed length in the header: no system call per record. What was copied is in the page
cache, so a SIGKILL of the run loses nothing whose `log_metrics` call returned (a machine crash
can lose what was not yet written back, as with `write()` without fsync). Readers read the
header, then the records up to the committed length, never past it.

Layout (little-endian; every record starts 8-byte aligned and its size is a multiple of 8):

    header, HEADER_BYTES (64):
        0   8 bytes   MAGIC, b"GPMETR" + format version 1 (2 bytes)
        8   int64     committed: the file offset just past the last complete record
        16  48 bytes  reserved (zero)
    records, from offset 64 up to `committed`; each begins with an int64 word w:
        w < 0   a names record of -w bytes: after w, the JSON list of the metric names
                (ASCII, non-ASCII escaped) padded with spaces to a multiple of 8
        w > 0   a point record: w is the offset of the names record it uses (earlier in the
                file); then int64 step, float64 unix time and one float64 per name, in that
                record's order: 8 * (3 + len(names)) bytes
        w = 0   not written yet (the file is zero-filled past `committed`)

`committed` is written with one aligned 8-byte store after the record's bytes, so a reader
or a kill sees either the old or the new length, whole. One process writes a file at a time
(it holds flock(LOCK_EX) on it) and appends after `committed` of whoever wrote before it.
The file grows by doubling (then by GROWTH_MAX_BYTES steps), its blocks reserved first
(posix_fallocate), so a full disk is an OSError at the call, not a SIGBUS in the run.

Processes of the run that cannot have the log (a forked child, a second rank, a filesystem
without mmap) append text lines to `metrics.csv`, the format of runs recorded before this log
existed: `#k ["name",...]` lines, each followed by `step,time,v1,v2,...` lines.

Pure: encoding and decoding of bytes, no I/O (tracking writes, the indexer reads).
"""

from __future__ import annotations

import json
import struct
from collections.abc import Sequence

MAGIC = b"GPMETR\x00\x01"
HEADER_BYTES = 64
COMMITTED_WORD = 1  # the header's int64 words: [magic, committed, reserved...]
INITIAL_BYTES = 1 << 20
GROWTH_MAX_BYTES = 256 << 20
MAX_NAMES_BYTES = 1 << 20  # a names record larger than this is damage, not names


def point_bytes(n_names: int) -> int:
    """Size of a point record carrying `n_names` values."""
    return 8 * (3 + n_names)


def point_struct(n_names: int) -> struct.Struct:
    """names offset, step, time, values: the point record's layout."""
    return struct.Struct("<qqd" + "d" * n_names)


def names_record(names: Sequence[str]) -> bytes:
    body = json.dumps(list(names)).encode()
    size = 8 + -(-len(body) // 8) * 8
    return struct.pack("<q", -size) + body.ljust(size - 8)


def decode_names(record: bytes) -> list[str] | None:
    """The names of a whole names record, or None when it is not one."""
    if len(record) < 16 or len(record) % 8:
        return None
    (word,) = struct.unpack_from("<q", record)
    if -word != len(record):
        return None
    try:
        names = json.loads(record[8:])
    except ValueError:
        return None
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        return None
    return names


def header() -> bytes:
    """The header of a new, empty log."""
    return MAGIC + struct.pack("<q", HEADER_BYTES) + bytes(HEADER_BYTES - 16)


def committed(head: bytes, file_bytes: int | None = None) -> int | None:
    """The committed length from a log's first bytes; None when they are not a valid header."""
    if len(head) < 16 or head[:8] != MAGIC:
        return None
    (end,) = struct.unpack_from("<q", head, 8)
    if end < HEADER_BYTES or end % 8 or (file_bytes is not None and end > file_bytes):
        return None
    return int(end)


def next_capacity(capacity: int, needed: int) -> int:
    """How large to grow a log of `capacity` bytes that must hold `needed`."""
    grown = capacity + min(max(capacity, INITIAL_BYTES), GROWTH_MAX_BYTES)
    return max(grown, -(-needed // INITIAL_BYTES) * INITIAL_BYTES)
