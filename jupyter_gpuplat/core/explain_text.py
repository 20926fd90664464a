"""An explanation's numbers in words: the lines every client shows (explain answers carry them).

Pure: the explain answer (`GET runs/{id}/explain`) in, `number_lines` out, so the CLI, the magics,
the widgets and the sidebar render one wording instead of each formatting the numbers again.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any


def number_lines(ex: Mapping[str, Any]) -> list[dict[str, str]]:
    """`numbers` (used/limit), `position` (in its queue) and `queue` (its usage), those the answer has."""
    lines = []
    nums = ex.get("numbers") or {}
    if nums:
        lines.append({"label": "numbers", "text": numbers_text(nums)})
    if ex.get("position") is not None:
        lines.append({"label": "position", "text": position_text(ex)})
    usage = ex.get("queue_usage")
    if usage:
        lines.append({"label": "queue", "text": usage_text(usage)})
    return lines


def wait_line(ex: Mapping[str, Any]) -> str:
    """Where the run stands, why, and when it may start, in one line:
    "position 1 of 2 in interactive · UserLimit 1/1 · <message> · starts in ~6 min (p90 25 min)".

    A GPU session's waiting message reads it (the sidebar's session bar and toast, the kernel's
    "Waiting for a GPU: …", the session widget, `gpuplat sessions start`).
    """
    pos = ex.get("position")
    where = f"in {ex.get('queue')}"
    if pos is not None:
        where = f"position {pos} of {ex.get('pending_in_queue') or pos} {where}"
    nums = ex.get("numbers") or {}
    reason = str(ex.get("reason") or "")
    if isinstance(nums.get("used"), int | float) and isinstance(nums.get("limit"), int | float):
        reason += f" {nums['used']}/{nums['limit']}"
    return " · ".join(part for part in (where, reason, ex.get("message") or "", eta_words(ex)) if part)


def eta_words(ex: Mapping[str, Any]) -> str:
    """The start estimate of a run or explain answer in words: "starts in ~6 min (p90 25 min)", "start unknown: …"."""
    eta = ex.get("eta")
    if eta:
        return str(eta["text"])
    return f"start unknown: {ex['eta_unknown']}" if ex.get("eta_unknown") else ""


def position_text(ex: Mapping[str, Any], short: bool = False) -> str:
    head = f"{ex.get('position')} of {ex.get('pending_in_queue')}"
    return f"position {head}" if short else f"{head} waiting in queue {ex.get('queue')}"


def numbers_text(nums: Mapping[str, Any]) -> str:
    if "used" in nums and "limit" in nums and not isinstance(nums["used"], dict):
        return f"{nums['used']}/{nums['limit']} in use"
    return ", ".join(f"{k} {_value(v)}" for k, v in nums.items())


def usage_text(u: Mapping[str, Any]) -> str:
    quota = "∞" if u.get("gpu_quota") is None else u["gpu_quota"]
    conc = "∞" if u.get("concurrency") is None else u["concurrency"]
    # free_gpus is null where the executor has no count (Kubernetes): say nothing then
    free = "" if u.get("free_gpus") is None else f"; {u['free_gpus']} GPU(s) free on the machine"
    return f"{u['runs']}/{conc} runs, {u['gpu']}/{quota} GPUs in use, {u['pending']} pending{free}"


def _value(v: Any) -> str:
    if v is None:
        return "—"
    return v if isinstance(v, str) else json.dumps(v, separators=(",", ":"), default=str)
