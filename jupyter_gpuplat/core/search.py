"""Model-based search for kind `bayes`: Optuna's ask-and-tell, behind three verbs.

The engine asks for a child's params, runs the child, and tells its objective; `add` replays a
child that ended before a restart, so a rebuilt search knows what the record knows. Optuna is an
optional extra (`pip install 'jupyter-gpuplat[bayes]'`), imported only when a bayes sweep is made;
its study lives in memory (no storage, no I/O) and its TPE sampler is seeded, so one seed and one
order of calls give the same params.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from .errors import Unprocessable
from .matrix import Domain, Matrix

if TYPE_CHECKING:
    import optuna


def _optuna() -> Any:
    try:
        import optuna
    except ImportError:
        raise Unprocessable(
            "kind bayes needs Optuna, which is not installed where the server runs",
            "install the extra: pip install 'jupyter-gpuplat[bayes]'; or use kind grid or random",
            code="NotImplemented",
        ) from None
    # Each trial's INFO line would go to the server's log; the sweep's timeline records results.
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna


def _distribution(optuna: Any, domain: Domain) -> optuna.distributions.BaseDistribution:
    d = optuna.distributions
    if domain.kind in ("uniform", "loguniform"):
        lo, hi = domain.bounds
        return d.FloatDistribution(float(lo), float(hi), log=domain.kind == "loguniform")
    points = domain.points()
    if domain.kind == "range" and all(isinstance(p, int) for p in points) and len(points) > 1:
        # ordered integers: TPE models them as numbers, not as unrelated labels
        return d.IntDistribution(min(points), max(points), step=abs(points[1] - points[0]))
    return d.CategoricalDistribution(list(dict.fromkeys(points)))


class BayesSearch:
    """`ask()` the next child's params, `tell()` its objective, `best()` so far."""

    def __init__(self, matrix: Matrix) -> None:
        if matrix.kind != "bayes" or matrix.objective is None:
            raise ValueError("BayesSearch takes a matrix of kind bayes with an objective")
        self._optuna = optuna = _optuna()
        self._distributions = {name: _distribution(optuna, d) for name, d in (matrix.params or {}).items()}
        self._study = optuna.create_study(
            direction=matrix.objective.optimization,
            sampler=optuna.samplers.TPESampler(seed=matrix.seed or 0),
        )
        self._asked: dict[int, Any] = {}

    def ask(self) -> tuple[int, dict[str, Any]]:
        """The next params and their id, to `tell` once the child has ended."""
        trial = self._study.ask(self._distributions)
        self._asked[trial.number] = trial
        return trial.number, dict(trial.params)

    def tell(self, params_id: int, value: float | None) -> None:
        """The child's objective; None (the child failed or never reported it) tells the search so."""
        trial = self._asked.pop(params_id, None)
        if trial is None:
            raise KeyError(f"no asked params with id {params_id} awaiting a value")
        if value is None or not math.isfinite(value):
            self._study.tell(trial, state=self._optuna.trial.TrialState.FAIL)
        else:
            self._study.tell(trial, float(value))

    def add(self, params: dict[str, Any], value: float | None) -> None:
        """A child that ended before this search was made (a restart): what the record says it got."""
        optuna = self._optuna
        finished = value is not None and math.isfinite(value)
        self._study.add_trial(
            optuna.trial.create_trial(
                params={k: params[k] for k in self._distributions},
                distributions=self._distributions,
                value=float(value) if finished and value is not None else None,
                state=optuna.trial.TrialState.COMPLETE if finished else optuna.trial.TrialState.FAIL,
            )
        )

    def best(self) -> tuple[dict[str, Any], float] | None:
        """The best params told so far and their objective; None before any child succeeded."""
        done = self._study.get_trials(deepcopy=False, states=(self._optuna.trial.TrialState.COMPLETE,))
        if not done:
            return None
        best = self._study.best_trial
        return dict(best.params), float(best.value)
