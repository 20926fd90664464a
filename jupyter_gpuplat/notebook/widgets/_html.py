"""Small HTML builders shared by the widgets.

Colours come from JupyterLab's CSS variables so every render reads in the light
and the dark theme; plots use transparent backgrounds and a mid-grey font.
"""

from __future__ import annotations

import datetime as dt
import html
import json
import posixpath
import urllib.parse
from copy import deepcopy
from typing import Any

from ...core.status import FINAL, HOLDING, WAITING

__all__ = ["EXECUTION", "FINAL", "WAITING"]

EXECUTION = HOLDING  # dispatched until it ends: the executor holds the run

FG = "var(--jp-ui-font-color1)"
FG_DIM = "var(--jp-ui-font-color2)"
BORDER = "var(--jp-border-color2)"
BG_MARK = "var(--jp-layout-color2)"
MONO = "var(--jp-code-font-family)"
GOOD = "var(--jp-success-color1)"
BAD = "var(--jp-error-color1)"
WARN = "var(--jp-warn-color1)"

STATUS_COLOR = {
    "created": WARN,
    "queued": WARN,
    "dispatched": "var(--jp-info-color1)",
    "starting": "var(--jp-info-color1)",
    "running": "var(--jp-brand-color1)",
    "stopping": "var(--jp-brand-color1)",
    "succeeded": GOOD,
    "failed": BAD,
    "stopped": FG_DIM,
}

# Plotly cannot read CSS variables: transparent backgrounds and a grey that reads on both themes.
PLOT_LAYOUT: dict[str, Any] = {
    "paper_bgcolor": "rgba(0,0,0,0)",
    "plot_bgcolor": "rgba(0,0,0,0)",
    "font": {"color": "#8a8a8a", "size": 11},
    "xaxis": {"gridcolor": "rgba(128,128,128,0.25)", "zerolinecolor": "rgba(128,128,128,0.4)"},
    "yaxis": {"gridcolor": "rgba(128,128,128,0.25)", "zerolinecolor": "rgba(128,128,128,0.4)"},
}


def esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def box(inner: str, *, mono: bool = False) -> str:
    font = f"font-family:{MONO};" if mono else ""
    return f'<div style="color:{FG};{font}font-size:var(--jp-ui-font-size1);line-height:1.45">{inner}</div>'


def badge(status: str) -> str:
    color = STATUS_COLOR.get(status, FG)
    return (
        f'<span class="gpuplat-status gpuplat-status-{esc(status)}" style="color:{color};border:1px solid {color};'
        f'border-radius:3px;padding:0 5px;font-weight:600">{esc(status)}</span>'
    )


def dim(text: str) -> str:
    return f'<span style="color:{FG_DIM}">{text}</span>'


def error_block(message: str, hint: str = "") -> str:
    hint_html = f'<div style="color:{FG_DIM}">{esc(hint)}</div>' if hint else ""
    return (
        f'<div class="gpuplat-error" style="color:{FG};border-left:3px solid {BAD};padding:2px 8px;margin:4px 0">'
        f'<span style="color:{BAD};font-weight:600">{esc(message)}</span>{hint_html}</div>'
    )


def table(rows: list[str], head: str = "") -> str:
    style = f"border-collapse:collapse;color:{FG};font-size:var(--jp-ui-font-size1)"
    return f'<table style="{style}">{head}{"".join(rows)}</table>'


def td(inner: str, *, header: bool = False, mark: bool = False, extra: str = "") -> str:
    tag = "th" if header else "td"
    bg = f"background:{BG_MARK};" if mark else ""
    weight = "font-weight:600;" if header else ""
    style = f"{bg}{weight}text-align:left;padding:2px 8px;border-bottom:1px solid {BORDER};{extra}"
    return f'<{tag} style="{style}">{inner}</{tag}>'


def when(ts: float | None) -> str:
    if ts is None:
        return ""
    return dt.datetime.fromtimestamp(ts).strftime("%H:%M:%S")


def seconds(v: float | None) -> str:
    if v is None:
        return "—"
    if v < 60:
        return f"{v:.1f}s"
    m, s = divmod(int(v), 60)
    if m < 60:
        return f"{m}m{s:02d}s"
    h, m = divmod(m, 60)
    return f"{h}h{m:02d}m"


def size(n: int) -> str:
    """Bytes for people, as the sidebar writes them: `812 B`, `1.2 KiB`, `34 MiB`."""
    if n < 1024:
        return f"{n} B"
    v = float(n)
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        v /= 1024
        if v < 1024 or unit == "TiB":
            break
    return f"{v:.1f} {unit}" if v < 10 else f"{round(v)} {unit}"


def value(v: Any) -> str:
    """A param or config value, compact."""
    if v is None:
        return "—"
    if isinstance(v, float):
        return f"{v:.6g}"
    if isinstance(v, (dict, list)):
        return json.dumps(v, separators=(",", ":"), default=str)
    return str(v)


def notebook_link(path: str, here: str, label: str = "Open notebook") -> str:
    """An anchor to a notebook (relative to the Jupyter root) from the notebook showing it (in `here`).

    The href is relative: JupyterLab resolves a relative link in an output against the
    document showing it and opens the target as a document, under any base URL.
    """
    href = posixpath.relpath(path, here or ".")
    return (
        f'<a class="gpuplat-open-notebook" href="{esc(urllib.parse.quote(href))}" '
        f'title="{esc(path)}">{esc(label)}</a> {dim(esc(path))}'
    )


def keep_figure_state(figure: Any) -> None:
    """Put the traces drawn into the widget's synced state too. A FigureWidget inside a box sends
    its traces as messages and syncs only the figure it was built with (plotly refreshes that state
    only when it is displayed itself): a page reload drew the saved state, an empty plot."""
    if hasattr(figure, "_widget_data"):
        figure._widget_layout = deepcopy(figure._layout_obj._props)
        figure._widget_data = deepcopy(figure._data)
