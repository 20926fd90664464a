"""A sweep's matrix: which params its children get (issue 11, .coord/SWEEPS.md "The matrix").

Pure: `expand` and `count` compute children from the matrix alone (random draws come from
`random.Random(seed)`, never from the clock). A param's domain is in domain.py; model-based
search (kind `bayes`) in search.py.
"""

from __future__ import annotations

import itertools
import math
import random
from typing import Annotated, Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .domain import MAX_CHILDREN, MAX_INT, Domain, Number, ParamName, Value, parse_param

__all__ = [
    "MAX_CHILDREN",
    "Domain",
    "EarlyStopping",
    "Matrix",
    "Objective",
    "count",
    "expand",
    "parse_param",
]

MAX_PARAMS = 100
MAX_SEED = 2**32 - 1  # Optuna's samplers take a numpy seed
MatrixKind = Literal["grid", "random", "mapping", "bayes"]
Optimization = Literal["maximize", "minimize"]
Metric = Annotated[str, Field(min_length=1, max_length=256, pattern=r"^[^\x00-\x1f]+$")]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Objective(_Strict):
    metric: Metric
    optimization: Optimization


class EarlyStopping(_Strict):
    """Without a policy: stop the sweep once a child's `metric` reaches `value`.
    With policy `median`: stop a child whose `metric` after `min_steps` steps is worse than the median of the others.
    """

    metric: Metric
    optimization: Optimization
    value: Number | None = None
    policy: Literal["median"] | None = None
    min_steps: int = Field(default=0, ge=0, le=MAX_INT)

    @model_validator(mode="after")
    def _check(self) -> Self:
        if self.policy is None and self.value is None:
            raise ValueError("a metric target needs value (or set policy: median)")
        if self.policy == "median" and self.value is not None:
            raise ValueError("policy median compares children with each other: remove value")
        if self.policy is None and "min_steps" in self.model_fields_set:
            raise ValueError("min_steps goes with policy median")
        return self


class Matrix(_Strict):
    """What a sweep runs: see .coord/SWEEPS.md for each field."""

    kind: MatrixKind
    params: dict[ParamName, Domain] | None = Field(default=None, min_length=1, max_length=MAX_PARAMS)
    values: list[Annotated[dict[ParamName, Value], Field(min_length=1, max_length=MAX_PARAMS)]] | None = Field(
        default=None, min_length=1, max_length=MAX_CHILDREN
    )
    num_runs: int | None = Field(default=None, ge=1, le=MAX_CHILDREN)
    seed: int | None = Field(default=None, ge=0, le=MAX_SEED)
    concurrency: int = Field(default=1, ge=1, le=MAX_CHILDREN)
    max_failures: int | None = Field(default=None, ge=0, le=MAX_CHILDREN)
    early_stopping: list[EarlyStopping] = Field(default_factory=list, max_length=16)
    objective: Objective | None = None

    @model_validator(mode="after")
    def _check(self) -> Self:
        kind = self.kind
        if kind == "mapping":
            _require(self.values is not None, "kind mapping needs values (a list of param dicts)")
            for name in ("params", "num_runs", "seed"):
                _require(getattr(self, name) is None, f"{name} does not go with kind mapping: its children are values")
            return self
        _require(self.params is not None, f"kind {kind} needs params (name: domain)")
        _require(self.values is None, "values goes with kind mapping; give params for kind " + kind)
        if kind == "grid":
            _require(self.seed is None, "seed goes with kinds random and bayes; a grid has no draws")
            for name, domain in (self.params or {}).items():
                _require(
                    domain.discrete,
                    f"params.{name} is {domain.kind}, which a grid cannot list: use values, range, linspace "
                    "or choice, or kind random or bayes",
                )
        else:
            _require(self.num_runs is not None, f"kind {kind} needs num_runs (how many children to run)")
        if kind == "bayes":
            _require(self.objective is not None, "kind bayes needs objective ({metric, optimization}) to search on")
        n = count(self)
        if n > MAX_CHILDREN:
            sizes = " x ".join(f"{d.size():,}" for d in (self.params or {}).values())
            raise ValueError(
                f"this grid has {n:,} children ({sizes}); a sweep has at most {MAX_CHILDREN:,}: "
                "give fewer values, or cap it with num_runs"
            )
        return self


def _require(ok: bool, message: str) -> None:
    if not ok:
        raise ValueError(message)


def count(matrix: Matrix) -> int:
    """How many children the sweep has (num_runs for random and bayes)."""
    if matrix.kind == "mapping":
        return len(matrix.values or ())
    if matrix.kind != "grid":
        return int(matrix.num_runs or 0)
    n = math.prod(d.size() for d in (matrix.params or {}).values())
    return min(n, matrix.num_runs) if matrix.num_runs is not None else n


def expand(matrix: Matrix) -> list[dict[str, Any]]:
    """Every child's params, in order: a grid's product (first param slowest), random draws, or mapping values."""
    params = matrix.params or {}
    if matrix.kind == "mapping":
        return [dict(v) for v in matrix.values or ()]
    if matrix.kind == "grid":
        names = list(params)
        combos = itertools.product(*(params[name].points() for name in names))
        return [dict(zip(names, combo, strict=True)) for combo in itertools.islice(combos, count(matrix))]
    if matrix.kind == "random":
        # No seed draws as seed 0: the same matrix always makes the same children (the service may pick one).
        rng = random.Random(matrix.seed or 0)
        samplers = {name: d.sampler() for name, d in params.items()}
        return [{name: draw(rng) for name, draw in samplers.items()} for _ in range(count(matrix))]
    raise ValueError("a bayes sweep's children come one by one from BayesSearch.ask, not from expand")
