"""What the CLI prints for people: tables that fit the terminal, times, resources.

A table never cuts a cell: when the columns do not fit the width, the widest ones wrap at
word boundaries onto more lines of the same row (a word is split only when it alone is
wider than its column could be made).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import textwrap
import time
from collections.abc import Mapping, Sequence
from typing import Any

from ..core.merge import KEYED_LISTS

GAP = "  "
# A column is not wrapped narrower than this unless nothing else fits.
MIN_COLUMN = 6
# A free-text last column (table(tail=True)) narrower than this goes under its row instead.
TAIL_MIN = 24
TAIL_INDENT = "    "


def terminal_width() -> int | None:
    """$COLUMNS, else the terminal's width; None (no limit) when stdout is no terminal (a pipe, a file)."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    if sys.stdout.isatty():
        return shutil.get_terminal_size().columns
    return None


def column_widths(
    cells: Sequence[Sequence[str]], headers: Sequence[str], width: int | None, keep: Sequence[int] = ()
) -> list[int]:
    """Each column's width: its widest cell, shrunk (widest column first) until the row fits `width`.

    First only down to each column's longest word (it wraps between words); if that is not enough,
    further, except the `keep` columns (ids people copy): their words then break, at hyphens first.
    """
    natural = [max([len(h), *(len(r[i]) for r in cells)]) for i, h in enumerate(headers)]
    if width is None:
        return natural
    room = width - len(GAP) * (len(headers) - 1)
    words = [max([1, *(len(w) for r in [headers, *cells] for w in r[i].split())]) for i in range(len(headers))]
    widths = list(natural)
    between_words = [min(n, max(w, MIN_COLUMN)) for n, w in zip(natural, words, strict=True)]
    any_break = [natural[i] if i in keep else min(natural[i], 3) for i in range(len(headers))]
    for floor in (between_words, any_break):
        while sum(widths) > room:
            shrinkable = [i for i, w in enumerate(widths) if w > floor[i]]
            if not shrinkable:
                break
            widest = max(shrinkable, key=lambda i: widths[i])
            widths[widest] -= 1
    return widths


def wrap_cell(text: str, width: int) -> list[str]:
    """The cell on lines of at most `width`: between words; a word longer than that breaks (hyphens first)."""
    if len(text) <= width:
        return [text]
    long_words = any(len(w) > width for w in text.split())
    return textwrap.wrap(text, width, break_on_hyphens=long_words) or [""]


def table(
    rows: Sequence[Sequence[Any]],
    headers: Sequence[str],
    width: int | None = None,
    keep: Sequence[int] = (0,),
    tail: bool = False,
) -> str:
    """Rows under headers, columns two spaces apart, wrapped to `width` (default: terminal_width()).

    `keep`: columns never broken inside a word (default the first, the id). `tail`: the last column is
    free text (a message); when the others leave it fewer than TAIL_MIN characters, it goes on its own
    indented lines under each row instead of a column a word wide.
    """
    cells = [[("" if c is None else str(c)) for c in row] for row in rows]
    width = terminal_width() if width is None else width
    widths = column_widths(cells, headers, width, keep)
    if tail and width is not None:
        last = max(len(r[-1]) for r in [headers, *cells])
        overflow = sum(widths) + len(GAP) * (len(widths) - 1) > width
        if overflow or widths[-1] < min(TAIL_MIN, last):
            head = column_widths([r[:-1] for r in cells], headers[:-1], width, keep)
            out: list[str] = []
            for row in [list(headers), *cells]:
                out += _row_lines(row[:-1], head)
                out += [TAIL_INDENT + line for line in wrap_cell(row[-1], width - len(TAIL_INDENT)) if row[-1]]
            return "\n".join(out)
    return "\n".join(line for row in [list(headers), *cells] for line in _row_lines(row, widths))


def _row_lines(row: Sequence[str], widths: Sequence[int]) -> list[str]:
    wrapped = [wrap_cell(c, w) for c, w in zip(row, widths, strict=False)]
    return [
        GAP.join((w[n] if n < len(w) else "").ljust(widths[i]) for i, w in enumerate(wrapped)).rstrip()
        for n in range(max(len(w) for w in wrapped))
    ]


def ago(ts: float | None) -> str:
    if ts is None:
        return ""
    return duration(time.time() - ts)


def duration(seconds: float) -> str:
    s = max(0.0, seconds)
    return f"{s:.0f}s" if s < 120 else f"{s / 60:.0f}m" if s < 7200 else f"{s / 3600:.1f}h"


_RESOURCE_ORDER = ("gpu", "cpu", "memory")


def resources_text(resources: Mapping[str, Any] | None) -> str:
    """`{"gpu": 2, "cpu": "8", "memory": "32Gi"}` as people read it: "2 gpu, 8 cpu, 32Gi memory"."""
    res = dict(resources or {})
    keys = [k for k in _RESOURCE_ORDER if k in res] + sorted(k for k in res if k not in _RESOURCE_ORDER)
    return ", ".join(f"{res[k]} {k}" for k in keys if res[k] is not None) or "-"


def spec_rows(resolved: Mapping[str, Any], provenance: Mapping[str, str]) -> list[tuple[str, str, str]]:
    """The resolved spec as the submit dialog's Field / Value / Set by rows (labextension provenance.ts).

    Leaf paths in the service's provenance syntax: `resources.gpu`, a keyed list's items as
    `env[HF_HOME]` (core/merge.py KEYED_LISTS); a field no layer set (command, name) is `request`.
    """
    rows: list[tuple[str, str, str]] = []

    def walk(value: Any, path: str) -> None:
        if isinstance(value, Mapping) and value:
            for k, v in value.items():
                walk(v, f"{path}.{k}" if path else str(k))
        elif path in KEYED_LISTS and isinstance(value, list) and value and all(isinstance(i, Mapping) for i in value):
            fields = KEYED_LISTS[path]
            for item in value:
                key = ":".join("" if item.get(f) is None else str(item[f]) for f in fields)
                rest = {f: v for f, v in item.items() if f not in fields}
                walk_leaf(rest["value"] if list(rest) == ["value"] else rest, f"{path}[{key}]")
        elif path:
            walk_leaf(value, path)

    def walk_leaf(value: Any, path: str) -> None:
        text = value if isinstance(value, str) else json.dumps(value, default=str)
        rows.append((path, text, provenance.get(path, "request")))

    walk(resolved, "")
    return rows
