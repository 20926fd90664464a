"""Comparing a sweep's children (pure): their objective values, best first, the top N, and the
axes of a parallel-coordinates plot over params of mixed types.

1. A child's objective value is its best over steps (min when minimizing, max when maximizing),
   as the service's `best` child is chosen (ReadModel.sweep_view); a child with no value yet ranks last.
2. Ranking is stable: equal values keep the children's given order, so the first of equals is
   best, as the service's strict comparison keeps the first it met.
3. A param is numeric when every value given is a number (bools are not numbers here); otherwise
   it is categorical: its values map to 0..k-1 in a fixed order (False before True, numbers by
   value, then strings), and the axis carries those as tick labels. A child without the param has
   no value on that axis (None), never a made-up one.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Objective:
    """The metric a sweep is judged by and which way is better."""

    metric: str
    maximize: bool = False

    @classmethod
    def of(cls, objective: Mapping[str, Any] | None) -> Objective | None:
        """From a matrix's `objective: {metric, optimization}` (None when it has none)."""
        if not objective or not objective.get("metric"):
            return None
        return cls(str(objective["metric"]), objective.get("optimization") == "maximize")

    @property
    def optimization(self) -> str:
        return "maximize" if self.maximize else "minimize"

    def value(self, summary: Mapping[str, Any] | None) -> float | None:
        """A child's value from its metric summary ({min, max, ...}): its best over steps."""
        if not summary:
            return None
        v = summary.get("max" if self.maximize else "min")
        return float(v) if v is not None and is_number(v) else None


def is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def ranked(ids: Sequence[str], values: Mapping[str, float | None], objective: Objective) -> list[str]:
    """Child ids best first; those without a value last, in their given order."""
    scored = [(i, rid) for i, rid in enumerate(ids) if values.get(rid) is not None]
    sign = -1.0 if objective.maximize else 1.0
    scored.sort(key=lambda p: (sign * float(values[p[1]] or 0.0), p[0]))
    have = {rid for _, rid in scored}
    return [rid for _, rid in scored] + [rid for rid in ids if rid not in have]


def best(ids: Sequence[str], values: Mapping[str, float | None], objective: Objective) -> str | None:
    """The best child's id, or None when no child has a value."""
    order = ranked(ids, values, objective)
    return order[0] if order and values.get(order[0]) is not None else None


def top(ids: Sequence[str], values: Mapping[str, float | None], objective: Objective, n: int) -> list[str]:
    """The n best children that have a value (fewer when fewer have one)."""
    return [rid for rid in ranked(ids, values, objective)[: max(0, n)] if values.get(rid) is not None]


@dataclass(frozen=True)
class Axis:
    """One parallel-coordinates axis: a value per child (None where it has none)."""

    label: str
    values: list[float | None]
    categorical: bool = False
    tickvals: list[int] = field(default_factory=list)
    ticktext: list[str] = field(default_factory=list)

    def dimension(self) -> dict[str, Any]:
        """A plotly `go.Parcoords` dimension."""
        out: dict[str, Any] = {"label": self.label, "values": self.values}
        present = [v for v in self.values if v is not None]
        if self.categorical:
            out.update(tickvals=self.tickvals, ticktext=self.ticktext, range=[0, max(0, len(self.tickvals) - 1)])
        elif present:
            out["range"] = [min(present), max(present)]
        return out


def _category_key(v: Any) -> tuple[int, Any]:
    if isinstance(v, bool):
        return (0, int(v))
    if is_number(v):
        return (1, float(v))
    return (2, json.dumps(v, sort_keys=True, default=str) if not isinstance(v, str) else v)


def category_label(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return v if isinstance(v, str) else json.dumps(v, default=str)


def param_axis(name: str, values: Sequence[Any]) -> Axis:
    """One param's axis over the children's values (None: the child has no such param)."""
    given = [v for v in values if v is not None]
    if all(is_number(v) for v in given):
        return Axis(name, [float(v) if v is not None else None for v in values])
    cats: list[Any] = []
    seen: set[str] = set()
    for v in sorted(given, key=_category_key):
        key = json.dumps(v, sort_keys=True, default=str)
        if key not in seen:
            seen.add(key)
            cats.append(v)
    index = {json.dumps(v, sort_keys=True, default=str): i for i, v in enumerate(cats)}
    coded: list[float | None] = [
        None if v is None else float(index[json.dumps(v, sort_keys=True, default=str)]) for v in values
    ]
    return Axis(name, coded, True, list(range(len(cats))), [category_label(v) for v in cats])


def param_keys(params: Sequence[Mapping[str, Any]]) -> list[str]:
    """Param names in first-seen order (a grid's own param order)."""
    return list(dict.fromkeys(k for p in params for k in p))


def parcoords_axes(
    params: Sequence[Mapping[str, Any]], values: Sequence[float | None], objective: Objective
) -> list[Axis]:
    """One axis per param (in first-seen order), the last the objective metric."""
    axes = [param_axis(k, [p.get(k) for p in params]) for k in param_keys(params)]
    return [*axes, Axis(f"{objective.metric} ({objective.optimization})", list(values))]
