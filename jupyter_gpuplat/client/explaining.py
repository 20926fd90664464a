"""One renderer of an explanation (the answer of `GET runs/{id}/explain`) into lines of text.

Shared by the CLI (`gpuplat runs explain`), the magics (`%gpu_explain`, the waiting status
line) and the notebook monitor (which wraps the lines in HTML). The sidebar renders the
same API fields in TypeScript. Layer words and their meaning come from the reason registry.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..core.reasons import LAYER_TEXT
from ..core.status import FINAL

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
        ("held by", layer),
        ("where", LAYER_TEXT.get(layer, layer)),
        ("why", f"{ex.get('message', '')} [{ex.get('reason', '')}]"),
    ]
    nums = ex.get("numbers") or {}
    if nums:
        lines.append(("numbers", _numbers(nums)))
    if ex.get("position") is not None:
        lines.append(("position", position_text(ex)))
    usage = ex.get("queue_usage")
    if usage:
        lines.append(("queue", _usage(usage)))
    blockers = ex.get("blockers") or []
    if blockers:
        lines.append(("blocked by", "; ".join(blocker_text(b) for b in blockers)))
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


def position_text(ex: Mapping[str, Any], short: bool = False) -> str:
    head = f"{ex.get('position')} of {ex.get('pending_in_queue')}"
    return f"position {head}" if short else f"{head} waiting in queue {ex.get('queue')}"


def blocker_text(b: Mapping[str, Any]) -> str:
    if b.get("id"):
        return f"{b['id']} ({b.get('name') or '-'}, {b.get('user')}, {b['status']}, {b.get('gpu', 0)} GPU)"
    return f"a run of project {b['project']} ({b['status']}, {b.get('gpu', 0)} GPU)"


def _numbers(nums: Mapping[str, Any]) -> str:
    if "used" in nums and "limit" in nums and not isinstance(nums["used"], dict):
        return f"{nums['used']}/{nums['limit']} in use"
    return ", ".join(f"{k} {_value(v)}" for k, v in nums.items())


def _usage(u: Mapping[str, Any]) -> str:
    quota = "∞" if u.get("gpu_quota") is None else u["gpu_quota"]
    conc = "∞" if u.get("concurrency") is None else u["concurrency"]
    # free_gpus is null where the executor has no count (Kubernetes): say nothing then
    free = "" if u.get("free_gpus") is None else f"; {u['free_gpus']} GPU(s) free on the machine"
    return f"{u['runs']}/{conc} runs, {u['gpu']}/{quota} GPUs in use, {u['pending']} pending{free}"


def _value(v: Any) -> str:
    if v is None:
        return "—"
    return v if isinstance(v, str) else json.dumps(v, separators=(",", ":"), default=str)
