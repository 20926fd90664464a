"""Pure helpers for comparing runs: flattened configs and the keys that differ."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

_MISSING = object()


def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """Leaf paths of a nested mapping; lists are leaves (compared whole)."""
    if isinstance(value, Mapping) and value:
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    return {prefix: value} if prefix else {}


def differing(per_run: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Keys whose values are not the same in every run (absent counts as a value)."""
    keys = sorted({k for d in per_run.values() for k in d})
    out = []
    for k in keys:
        seen = {
            json.dumps(d.get(k, _MISSING) if k in d else "<absent>", sort_keys=True, default=str)
            for d in per_run.values()
        }
        if len(seen) > 1:
            out.append(k)
    return out


# Which way a metric is better, from its name: the one list (compare answers carry it as `direction`).
_LOWER_BETTER = ("loss", "err", "mse", "mae", "rmse", "nll", "perplexity", "ppl", "wer", "cer", "latency", "time")


def direction(metric: str) -> str:
    """`min` for losses, errors and times (a name holding one of those words), else `max`."""
    name = metric.lower()
    return "min" if any(word in name for word in _LOWER_BETTER) else "max"
