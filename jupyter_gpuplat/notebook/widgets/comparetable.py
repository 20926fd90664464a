"""Compare's side-by-side table: GPU use, params, resolved-config differences, metrics, deltas against a baseline."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from . import _html as h

__all__ = ["table_html"]


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _delta(v: Any, base: Any, *, better_lower: bool | None = None) -> str:
    if not (_is_number(v) and _is_number(base)) or v == base:
        return ""
    d = v - base
    rel = f", {d / abs(base):+.1%}" if base else ""
    color = h.FG_DIM
    if better_lower is not None:
        color = h.GOOD if (d < 0) == better_lower else h.BAD
    return f' <span class="gpuplat-delta" style="color:{color}">(Δ {d:+.4g}{rel})</span>'


def _section(title: str, ncols: int) -> str:
    return (
        f'<tr><td colspan="{ncols + 1}" style="padding:8px 8px 2px;font-weight:600;color:{h.FG_DIM};'
        f'border-bottom:1px solid {h.BORDER}">{h.esc(title)}</td></tr>'
    )


def _code_row(label: str, diff: str, n: int) -> str:
    """A code difference in one cell across the runs: "code differs" that opens the server's diff."""
    return (
        '<tr class="gpuplat-differ gpuplat-code-differ">'
        + h.td(h.esc(label), mark=True, extra=f"border-left:3px solid {h.WARN};font-family:{h.MONO}")
        + f'<td colspan="{n}"><details><summary>code differs (diff against the first run)</summary>'
        f'<pre style="font-family:{h.MONO};white-space:pre-wrap;margin:0">{h.esc(diff)}</pre></details></td></tr>'
    )


def _row(label: str, cells: list[str], *, differ: bool = False) -> str:
    mark = f"border-left:3px solid {h.WARN};" if differ else ""
    cls = ' class="gpuplat-differ"' if differ else ""
    return (
        f"<tr{cls}>"
        + h.td(h.esc(label), mark=differ, extra=mark + f"font-family:{h.MONO}")
        + "".join(h.td(c, mark=differ) for c in cells)
        + "</tr>"
    )


def _best(summary: dict[str, Any], lower: bool) -> Any:
    return summary.get("min") if lower else summary.get("max")


def table_html(
    data: dict[str, Any],
    baseline: str,
    labels: dict[str, str] | None = None,
    clock: Callable[[str], str] | None = None,
) -> str:
    runs = data["runs"]
    base = next(r for r in runs if r["id"] == baseline)
    n = len(runs)
    head = "<tr>" + h.td("", header=True)
    for r in runs:
        star = " ★ baseline" if r["id"] == baseline else ""
        label = (labels or {}).get(r["id"]) or r["name"] or r["id"]
        when = clock(r["id"]) if clock is not None else ""
        ticking = f' <span class="gpuplat-run-clock">{h.dim(h.esc(when))}</span>' if when else ""
        head += h.td(
            f"{h.esc(label)}{h.esc(star)}<br>{h.dim(h.esc(r['id']))} {h.badge(r['status'])}{ticking}",
            header=True,
        )
    head += "</tr>"
    rows = [_section("run", n)]
    # the flavor (kind of GPU) each ran on, where any did: an H100 and an A100 run differ in speed
    keys = (
        ("project", "user", "queue", "flavor") if any(r.get("flavor") for r in runs) else ("project", "user", "queue")
    )
    for key in keys:
        values = [r.get(key) or "—" for r in runs]
        rows.append(_row(key, [h.esc(v) for v in values], differ=len(set(values)) > 1))

    if data.get("gpu"):  # busy share and memory peak, as the server worded them (core.gpu_usage.compare_rows)
        rows.append(_section("GPU use", n))
        for g in data["gpu"]:
            values = [g["values"].get(r["id"], "—") for r in runs]
            rows.append(_row(g["label"], [h.esc(v) for v in values], differ=len(set(values)) > 1))

    rows.append(_section("params", n))
    differ = set(data["params"]["differ"])
    for key in data["params"]["keys"]:
        cells = []
        for r in runs:
            v = r["params"].get(key)
            delta = "" if r["id"] == baseline else _delta(v, base["params"].get(key))
            cells.append(h.esc(h.value(v)) + delta)
        rows.append(_row(key, cells, differ=key in differ))
    if not data["params"]["keys"]:
        rows.append(_row("(none logged)", ["" for _ in runs]))

    rows.append(_section("resolved config: differences", n))
    for d in data["config"]["differ"]:
        if d.get("diff") is not None:  # code: said once, its diff behind a disclosure, not each run's whole text
            rows.append(_code_row(d["path"], d["diff"], n))
        else:
            rows.append(_row(d["path"], [h.esc(h.value(d["values"].get(r["id"]))) for r in runs], differ=True))
    if not data["config"]["differ"]:
        rows.append(_row("(identical)", ["" for _ in runs]))

    rows.append(_section("metrics: last and best (min for losses/errors, else max)", n))
    for m in data["metrics"]:
        lower = data["direction"][m] == "min"  # the service's answer (core.compare.direction)
        bs = base["metrics"].get(m) or {}
        for kind in ("last", "best"):
            cells = []
            values = []
            for r in runs:
                s = r["metrics"].get(m)
                if not s:
                    cells.append(h.dim("—"))
                    continue
                v = s["last"] if kind == "last" else _best(s, lower)
                values.append(v)
                bv = bs.get("last") if kind == "last" else _best(bs, lower) if bs else None
                delta = "" if r["id"] == baseline else _delta(v, bv, better_lower=lower)
                step = f" {h.dim('@' + str(s['last_step']))}" if kind == "last" else ""
                cells.append(h.esc(h.value(v)) + step + delta)
            rows.append(_row(f"{m} ({kind})", cells, differ=len({h.value(v) for v in values}) > 1))
    if not data["metrics"]:
        rows.append(_row("(no metrics logged)", ["" for _ in runs]))
    return h.box(f'<div class="gpuplat-compare-table" style="overflow-x:auto">{h.table(rows, head)}</div>')
