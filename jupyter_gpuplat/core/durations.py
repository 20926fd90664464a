"""How long a run will hold its slot, predicted from finished runs like it (pure; for core.eta).

A prediction is the empirical distribution of the most similar finished runs' hold times
(dispatch to finish, what a run holds its queue slot, quota and GPUs for), in this order of
similarity, the first level with at least `min_similar` runs winning (else the most similar
level with any): 1. the same sweep; 2. the same preset, command and user; 3. the same preset and
command; 4. the same preset. Only the latest `max_similar` of a level count (recent runs tell
more). Every value is bounded by the run's time limit; a run with a limit and no history is
predicted to take its whole limit (the only bound known). No history and no limit: no basis,
and the answer says so, naming the run — never an invented number.

A running run's remaining time is conditioned on how long it has run: only the similar runs
that ran longer count, less its elapsed time. A finished run that was ended at its own time limit
counts at that limit (a lower bound of what it would have taken).
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class FinishedRun:
    """One finished run, as the predictor reads it (its hold time in seconds)."""

    id: str
    duration_seconds: float
    user: str
    preset: str | None = None  # the presets it picked, as one key (e.g. "gpu-small+pytorch"); None: none
    command: str | None = None
    sweep: str | None = None


@dataclass(frozen=True, slots=True)
class RunTraits:
    """What a run to predict is matched on, and its time limit."""

    id: str
    user: str
    preset: str | None = None
    command: str | None = None
    sweep: str | None = None
    timeout_seconds: float | None = None


@dataclass(frozen=True, slots=True)
class Empirical:
    """A duration as equally likely values (seconds, sorted, at least one) and what they rest on."""

    values: tuple[float, ...]
    basis: str
    from_history: bool = True  # False: the run's time limit alone

    @property
    def fixed(self) -> bool:
        return self.values[0] == self.values[-1]

    def sample(self, rng: random.Random) -> float:
        v = self.values
        return v[0] if len(v) == 1 else v[int(rng.random() * len(v))]


@dataclass(frozen=True, slots=True)
class NoBasis:
    """No duration can be predicted: the reason names the run ("r-1 has no time limit and no history")."""

    reason: str


Prediction = Empirical | NoBasis

_LEVELS = ("the same sweep", "the same preset, command and user", "the same preset and command", "the same preset")


@dataclass
class DurationModel:
    """Finished runs indexed by each level of similarity; build once, predict in O(max_similar)."""

    min_similar: int = 3
    max_similar: int = 50
    _by: tuple[dict[object, list[float]], ...] = field(default_factory=lambda: ({}, {}, {}, {}))

    @classmethod
    def from_history(cls, runs: Iterable[FinishedRun], *, min_similar: int = 3, max_similar: int = 50) -> DurationModel:
        """`runs` oldest first (the latest count when a level has more than `max_similar`)."""
        model = cls(min_similar, max_similar)
        for r in runs:
            model.add(r)
        return model

    def add(self, r: FinishedRun) -> None:
        """One more finished run (the engine adds each as it ends)."""
        d = max(0.0, r.duration_seconds)
        for level, key in enumerate(_keys(r.sweep, r.preset, r.command, r.user)):
            if key is not None:
                self._by[level].setdefault(key, []).append(d)

    def similar(self, run: RunTraits) -> tuple[str, list[float]] | None:
        """The most similar level with enough runs (else the most similar with any): its name and latest values."""
        fallback: tuple[str, list[float]] | None = None
        for level, key in enumerate(_keys(run.sweep, run.preset, run.command, run.user)):
            found = self._by[level].get(key) if key is not None else None
            if not found:
                continue
            latest = found[-self.max_similar :]
            if len(latest) >= self.min_similar:
                return _LEVELS[level], latest
            fallback = fallback or (_LEVELS[level], latest)
        return fallback

    def predict(self, run: RunTraits) -> Prediction:
        """How long `run` will hold its slot once dispatched."""
        return self.remaining(run, 0.0)

    def remaining(self, run: RunTraits, elapsed_seconds: float) -> Prediction:
        """How much longer `run`, dispatched `elapsed_seconds` ago, will hold its slot."""
        limit = run.timeout_seconds
        found = self.similar(run)
        if found is not None:
            level, values = found
            if limit is not None:
                values = [min(v, limit) for v in values]
            # Conditioned on its elapsed time: runs that ended sooner say nothing of this one now.
            longer = sorted(v - elapsed_seconds for v in values if v > elapsed_seconds)
            if longer:
                return Empirical(tuple(longer), f"{len(values)} finished runs of {level}")
            if limit is None:
                return NoBasis(
                    f"{run.id} has no time limit and has run longer than its {len(values)} similar finished runs"
                )
        if limit is None:
            return NoBasis(f"{run.id} has no time limit and no history")
        return Empirical((max(0.0, limit - elapsed_seconds),), f"its time limit ({limit:g} s)", from_history=False)


def _keys(sweep: str | None, preset: str | None, command: str | None, user: str) -> tuple[object, ...]:
    """The key of each level (None: the level does not apply, e.g. not in a sweep)."""
    return (
        sweep,
        (preset, command, user) if command is not None else None,
        (preset, command) if command is not None else None,
        preset,
    )
