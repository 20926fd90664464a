"""A refused run request as the API answers it: every refusing rule and hints the policy accepts.

The engine refuses with the first violation (`POST runs`) or lists them (`runs/preview`);
both are answered from `core.refusal.judge`, so the submit error and the preview's verdict
name the same rules, each with its own limit, and suggest only what the policy accepts.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..core.errors import GpuPlatError
from ..core.refusal import Judgement


class Refusal(GpuPlatError):
    """The engine's refusal (its status and code), with every rule that refuses and the alternatives."""

    def __init__(self, first: GpuPlatError, judged: Judgement) -> None:
        messages = list(dict.fromkeys(v.message for v in judged.violations))
        hints = list(dict.fromkeys(v.hint for v in judged.violations if v.hint))
        super().__init__("; ".join(messages), "; ".join(hints), code=first.code)
        self.status = first.status
        self.judged = judged

    def details(self) -> dict[str, Any]:
        """rules and alternatives, and the first violation's own fields (FieldNotAllowed: field, rule, allowed)."""
        first = self.judged.violations[0].to_dict()
        own = {k: v for k, v in first.items() if k not in ("code", "message", "hint")}
        return {**own, "rules": self.judged.rules, "alternatives": [a.to_dict() for a in self.judged.alternatives]}


def refusal(e: GpuPlatError, judge: Callable[[], Judgement]) -> GpuPlatError:
    """A submit's policy refusal (403/422) made whole; any other error as it was."""
    if e.status not in (403, 422):
        return e
    try:
        judged = judge()
    except GpuPlatError:
        return e
    if not judged.violations or judged.violations[0].code != e.code:
        return e  # not the policy's (e.g. a kind that needs no command): the engine's own words
    return Refusal(e, judged)


def judged_verdict(judged: Judgement, engine_verdict: dict[str, Any]) -> dict[str, Any]:
    """The preview's verdict: the judged violations, then the engine's others (e.g. working_dir)."""
    out = judged.verdict()
    known = {v["code"] for v in out["violations"]}
    extra = [v for v in engine_verdict["violations"] if v["code"] not in known and v["code"] != "NoCapacity"]
    out["violations"] += extra
    out["rules"] += [{"rule": v["code"], "limit": None, "message": v["message"]} for v in extra]
    out["allowed"] = not out["violations"]
    return out
