"""One renderer of an explanation (the answer of `GET runs/{id}/explain`) into lines of text.

Shared by the CLI (`gpuplat runs explain`), the magics (`%gpu_explain`, the waiting status
line) and the notebook monitor (which wraps the lines in HTML). The sidebar renders the
same API fields in TypeScript. Layer words and their meaning come from the reason registry.

A start estimate is the server's (`eta.text`, `eta_unknown`: issue 26), printed as given under a
"start" label (`start_text`) or shortened for a table cell (`start_cell`); no client computes a
duration of its own from `p50_at`.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping
from typing import Any

from ..core.explain_text import number_lines, position_text
from ..core.reasons import LAYER_TEXT
from ..core.status import FINAL

__all__ = [
    "blocker_text",
    "explanation_lines",
    "explanation_text",
    "position_text",
    "start_cell",
    "start_text",
    "waiting_summary",
]

# A table cell says why a start is unknown in at most this many characters (explain says it whole).
START_CELL_WIDTH = 72

Line = tuple[str, str]  # (label, text)


def explanation_lines(ex: Mapping[str, Any] | None, run: Mapping[str, Any] | None = None) -> list[Line]:
    """The explanation as labelled lines; with `run`, a run that has ended says so from its record."""
    if run is not None and run.get("status") in FINAL:
        return [("ended", f"{run['status']}: {run.get('message') or run.get('reason') or ''}")]
    if ex is None:  # not asked yet
        run = run or {}
        return [("status", f"{run.get('status', '')}: {run.get('message') or ''}")]
    layer = str(ex.get("layer", ""))
    lines: list[Line] = [
        ("layer", layer),  # the code; "where" says it in words
        # the service's words (core/reasons.py, core/explain_text.py); an older service's answer lacks them
        ("where", str(ex["layer_text"]) if "layer_text" in ex else LAYER_TEXT.get(layer, layer)),
        ("why", f"{ex.get('message', '')} [{ex.get('reason', '')}]"),
    ]
    for line in ex["number_lines"] if "number_lines" in ex else number_lines(ex):
        lines.append((line["label"], line["text"]))
    if start := start_text(ex):
        lines.append(("start", start))
        if ex.get("eta"):  # what the estimate rests on: scenarios, runs, where their times came from
            lines.append(("start basis", str(ex["eta"]["basis"])))
    blockers = ex.get("blockers") or []
    if blockers:
        lines.append(("blocked by", "; ".join(blocker_text(b) for b in blockers)))
    for f in ex.get("flavors") or []:  # each flavor the run may use, in its queue's order
        lines.append((f"flavor {f['name']}", f"{f['message']} [{f['reason']}]"))
    raw = (ex.get("details") or {}).get("raw")
    if raw:
        lines.append(("executor said", str(raw)))
    for who in ex.get("who_can_act") or []:
        lines.append(("who can act", f"{who['who']}: {who['can']}"))
    return lines


def explanation_text(ex: Mapping[str, Any] | None, run: Mapping[str, Any] | None = None) -> str:
    return "\n".join(f"{label}: {text}" for label, text in explanation_lines(ex, run))


def waiting_summary(ex: Mapping[str, Any]) -> str:
    """One line for a status line: the reason, the message and the place in line."""
    pos = f" ({position_text(ex, short=True)})" if ex.get("position") else ""
    return f"{ex.get('reason', '')}: {ex.get('message', '')}{pos}"


def start_text(x: Mapping[str, Any]) -> str:
    """The start estimate of a run, an explain answer, a queue's pending entry or a preview, for a "start"
    label: the server's `eta.text` ("starts in ~6 min (p90 25 min)"), or "unknown: <why>"; "" without either."""
    eta = x.get("eta")
    if eta:
        return str(eta["text"])
    return f"unknown: {x['eta_unknown']}" if x.get("eta_unknown") else ""


def start_cell(x: Mapping[str, Any]) -> str:
    """`start_text` for a table cell: why a start is unknown cut to its first clause and START_CELL_WIDTH."""
    if x.get("eta") or not x.get("eta_unknown"):
        return start_text(x)
    why = str(x["eta_unknown"]).split("; ", 1)[0]
    return textwrap.shorten(f"unknown: {why}", START_CELL_WIDTH, placeholder=" …")


def blocker_text(b: Mapping[str, Any]) -> str:
    if b.get("id"):
        return f"{b['id']} ({b.get('name') or '-'}, {b.get('user')}, {b['status']}, {b.get('gpu', 0)} GPU)"
    return f"a run of project {b['project']} ({b['status']}, {b.get('gpu', 0)} GPU)"
