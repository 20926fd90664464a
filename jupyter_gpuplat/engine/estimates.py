"""Start estimates kept for every waiting run (issue 26): core.eta, fed by the snapshot and the history.

The estimator is told which queues changed (a submit, a dispatch, a finish, a config change: every
recorded change names its queue) and recomputes only their groups of coupled queues
(`eta.components`), after a short pause that merges a burst of changes into one recompute. The
inputs (queue copies, free devices, each run's traits) are taken on the loop, so a cycle never
sees a half-read snapshot; the simulation runs in a worker thread, so the admission cycle never
waits on it. Readers get the last answer and when it was computed (`computed_at`).

Durations come from `core.durations.DurationModel`, filled from the store's finished runs at
start-up and with each run as it ends. A run's first known estimate is recorded once
(store.estimates) for calibration: insights compare it with when the run was dispatched.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import multiprocessing
import os
from collections.abc import Iterable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any

from ..core.admission import PendingRun, QueueState
from ..core.durations import DurationModel, FinishedRun, NoBasis, Prediction, RunTraits
from ..core.eta import Estimate, Eta, EtaUnknown, components, estimate, view
from ..core.forward import DevicePool
from ..core.status import FINAL, Status
from ..store import StoreUnavailable
from ..store import estimates as stored
from .state import ActiveRun, EngineState

log = logging.getLogger("jupyter_gpuplat.engine")

# Scenarios per estimate: p90 covered 88% of starts at 50 and at 100 (tests/core/test_eta.py), at half the cost.
SCENARIOS = 50
# From this many waiting runs in a recompute, it runs in a worker process (started once, on first need).
PROCESS_FROM = 1_000
# Finished runs read at start-up to predict durations (the latest; each level keeps its latest 50).
HISTORY_RUNS = 20_000


@dataclass(frozen=True, slots=True)
class Known:
    """The estimate of one waiting run and the clock when it was computed."""

    estimate: Estimate
    computed_at: float


def traits(a: ActiveRun) -> RunTraits:
    """What a run's duration is predicted from: its sweep, presets, command, user and time limit."""
    return traits_of(a.id, a.user, a.resolved or {}, a.parent)


def traits_of(run_id: str, user: str, resolved: dict[str, Any], sweep: str | None) -> RunTraits:
    presets = resolved.get("presets") or []
    limit = (resolved.get("termination") or {}).get("timeout_seconds")
    return RunTraits(
        run_id,
        user,
        "+".join(presets) if presets else None,
        _command_key(resolved.get("command")),
        sweep,
        float(limit) if limit else None,
    )


def _command_key(command: object) -> str | None:
    return command if isinstance(command, str) or command is None else json.dumps(command)


def finished(row: dict[str, Any]) -> FinishedRun:
    presets = row.get("presets") or []
    return FinishedRun(
        row["id"],
        float(row["finished_at"]) - float(row["dispatched_at"]),
        row["user"],
        "+".join(presets) if presets else None,
        _command_key(row.get("command")),
        row.get("parent"),
    )


# A run's first estimate, as store.estimates records it: run id, queue, computed at, p50 at, p90 at.
FirstEstimate = tuple[str, str, float, float, float]


@dataclass(frozen=True, slots=True)
class _Inputs:
    """What one recompute reads, taken on the loop: private queue copies, the devices, each run's traits."""

    queues: dict[str, QueueState]
    free: tuple[int, ...] | None
    typed: dict[int, str] | None
    held: dict[str, tuple[RunTraits, float]]  # run id -> traits, seconds since dispatch
    waiting: dict[str, RunTraits]
    at: float


class Estimates:
    """The estimate of every waiting run, recomputed for the queues that changed."""

    def __init__(
        self,
        state: EngineState,
        *,
        scenarios: int = SCENARIOS,
        pause_seconds: float = 0.025,
        refresh_seconds: float = 30.0,
        process_from: int = PROCESS_FROM,
    ) -> None:
        self.s = state
        self.scenarios = scenarios
        self.pause_seconds = pause_seconds
        self.refresh_seconds = refresh_seconds
        self.process_from = process_from
        self._pool: ProcessPoolExecutor | None = None
        self.model = DurationModel()
        self.known: dict[str, dict[str, Known]] = {}  # queue -> run id -> its estimate
        self.dirty: set[str] = set()
        self.recomputes = 0
        self._first_recorded: set[str] = set()
        # Each active run's traits (a snapshot takes thousands), valid while its `resolved` is the same object.
        self._traits: dict[str, tuple[object, RunTraits]] = {}
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    # ---- inputs ------------------------------------------------------------------
    def load(self) -> None:
        """Durations from the store's latest finished runs; which waiting runs already have a first estimate."""
        for row in stored.history(self.s.store.engine, HISTORY_RUNS):
            self.model.add(finished(row))
        self._first_recorded = stored.recorded(self.s.store.engine, list(self.s.active))

    def changed(self, queue: str | None = None) -> None:
        """Something in `queue` (None: every queue) changed: its group is recomputed soon."""
        if self.scenarios <= 0:  # estimates turned off
            return
        self.dirty |= {queue} if queue is not None else set(self.s.queues) | {"*"}
        self._wake.set()

    def ended(self, a: ActiveRun, status: Status, at: float) -> None:
        """A run ended: what it held is free, and how long it held it is history (if it ran, and no one stopped it)."""
        self.known.get(a.queue, {}).pop(a.id, None)
        self._first_recorded.discard(a.id)
        self._traits.pop(a.id, None)
        dispatched = a.times.get("dispatched_at")
        # Someone's stop says when they chose to end it, not how long such runs take (an idle or time limit does).
        if status in FINAL and dispatched is not None and not a.stop_requested_by and a.resolved.get("kind") != "sweep":
            t = traits(a)
            self.model.add(FinishedRun(a.id, at - dispatched, t.user, t.preset, t.command, t.sweep))
        self.changed(a.queue)

    # ---- the recompute -------------------------------------------------------------
    def _overdue(self) -> None:
        """Nothing changed for a while: queues whose runs were due to start by now (a blocker ran long) recompute."""
        now = self.s.clock()
        for queue, runs in self.known.items():
            if any(isinstance(k.estimate, Eta) and k.computed_at + k.estimate.p50_seconds < now for k in runs.values()):
                self.dirty.add(queue)
        self._wake.set()  # the loop turns: with nothing dirty it only waits again

    def start(self) -> None:
        if self.scenarios <= 0:
            return
        self._task = asyncio.ensure_future(self._loop())

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()  # not awaited: a server may close its engine from another loop than the task's
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)

    async def _loop(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            timer = loop.call_later(self.refresh_seconds, self._overdue)
            try:
                await self._wake.wait()
            finally:
                timer.cancel()
            await asyncio.sleep(self.pause_seconds)  # one recompute for a burst of changes
            self._wake.clear()
            try:
                inputs = self._inputs()
                if inputs is None:
                    continue
                answers = await self._run(inputs)
                # The first estimates' write stays on the loop: from a thread, SQLite's deferred transaction
                # would meet the engine's own writes and fail busy instead of waiting.
                self._record_first(self._take(inputs, answers))
            except Exception:  # an estimate must never stop the engine; the next change tries again
                log.exception("start estimates failed")

    def refresh(self) -> None:
        """Recompute what changed now, on this thread (tests and benchmarks)."""
        inputs = self._inputs()
        if inputs is not None:
            self._record_first(self._take(inputs, self._compute(inputs)))

    def _inputs(self) -> _Inputs | None:
        names, self.dirty = self.dirty, set()
        if not names:
            return None
        return self._snapshot(None if "*" in names else names)

    def _snapshot(self, names: Iterable[str] | None) -> _Inputs:
        """Copies of the queues coupled with `names` (None: every queue), the devices and each run's traits."""
        s = self.s
        free = tuple(s.free_devices) if s.assigns_devices else None
        typed = dict(s.device_flavor) if s.assigns_devices and s.device_flavor else None
        wanted = set(s.queues) if names is None else _groups_of(s.queues, DevicePool(free, typed), names)
        queues = {n: s.queues[n].copy() for n in wanted}
        now = s.clock()
        held: dict[str, tuple[RunTraits, float]] = {}
        waiting: dict[str, RunTraits] = {}
        for q in queues.values():
            for rid in q.held:
                a = s.active.get(rid)
                if a is not None:
                    held[rid] = (self._traits_of(a), max(0.0, now - (a.times.get("dispatched_at") or now)))
            for p in q.ordered_pending():
                a = s.active.get(p.id)
                if a is not None:
                    waiting[p.id] = self._traits_of(a)
        return _Inputs(queues, free, typed, held, waiting, now)

    def _traits_of(self, a: ActiveRun) -> RunTraits:
        kept = self._traits.get(a.id)
        if kept is not None and kept[0] is a.resolved:
            return kept[1]
        t = traits(a)
        self._traits[a.id] = (a.resolved, t)
        return t

    def probe(self, run: PendingRun, t: RunTraits, scenarios: int | None = None) -> Known:
        """The estimate of a run not submitted (a preview, an alternative): added after every run waiting in
        its queue now, as a submission would be. Computed here and now, for its group of queues only."""
        x = self._snapshot({run.queue})
        q = x.queues.get(run.queue)
        if q is None:
            return Known(EtaUnknown(f"queue {run.queue} does not exist"), x.at)
        q.add_pending(run)
        x.waiting[run.id] = t
        answers = self._compute(x, scenarios)
        return Known(answers.get(run.id) or EtaUnknown(f"{run.queue} could not be estimated"), x.at)

    def _compute(self, x: _Inputs, scenarios: int | None = None) -> dict[str, Estimate]:
        return self._job(x, scenarios)()

    def _job(self, x: _Inputs, scenarios: int | None = None) -> functools.partial[dict[str, Estimate]]:
        """The simulation as one picklable call (core.eta.estimate and its inputs), predictions made here."""
        # Runs alike share a prediction (a sweep's 10,000 children: one); one with no basis is named by it.
        memo: dict[tuple[object, ...], Prediction] = {}

        def predict(t: RunTraits, elapsed: float) -> Prediction:
            key = (t.user, t.preset, t.command, t.sweep, t.timeout_seconds, elapsed)
            p = memo.get(key)
            if p is None:
                p = self.model.remaining(t, elapsed)
                if isinstance(p, NoBasis):
                    return p
                memo[key] = p
            return p

        return functools.partial(
            estimate,
            x.queues,
            free_devices=x.free,
            typed=x.typed,
            remaining={rid: predict(t, el) for rid, (t, el) in x.held.items()},
            durations={rid: predict(t, 0.0) for rid, t in x.waiting.items()},
            scenarios=scenarios or self.scenarios,
        )

    async def _run(self, x: _Inputs) -> dict[str, Estimate]:
        """Off the loop: in a worker process where many runs wait on the platform (a thread would contend with
        the admission cycle for the GIL while it computes), else in a thread."""
        job = self._job(x)
        if sum(q.pending_count for q in self.s.queues.values()) < self.process_from:
            return await asyncio.to_thread(job)
        if self._pool is None:
            # Niced: where the server has few cores, the admission loop goes first.
            self._pool = ProcessPoolExecutor(
                max_workers=1, mp_context=multiprocessing.get_context("forkserver"), initializer=os.nice, initargs=(10,)
            )
        return await asyncio.get_running_loop().run_in_executor(self._pool, job)

    def _take(self, x: _Inputs, answers: dict[str, Estimate]) -> list[FirstEstimate]:
        """Keep the answers of the recomputed groups (runs of those queues no longer waiting drop out), publish
        those that moved; the first estimates to record (the caller writes them, off the loop where it runs)."""
        self.recomputes += 1
        before: dict[str, Known] = {}
        for queue in x.queues:  # every estimate of a recomputed queue is replaced (a run gone or started drops)
            before.update(self.known.pop(queue, {}))
        first: list[FirstEstimate] = []
        moved: dict[str, dict[str, Any]] = {}
        for rid, e in answers.items():
            a = self.s.active.get(rid)
            if a is None or a.status not in (Status.CREATED, Status.QUEUED):
                continue  # dispatched while this was computed
            k = self.known.setdefault(a.queue, {})[rid] = Known(e, x.at)
            if isinstance(e, Eta) and rid not in self._first_recorded:
                first.append((rid, a.queue, x.at, x.at + e.p50_seconds, x.at + e.p90_seconds))
            if _moved(before.get(rid), k):
                eta, unknown = view(e, x.at, x.at)
                moved[rid] = {"project": a.project, "eta": eta, "eta_unknown": unknown}
        self._first_recorded.update(r[0] for r in first)  # once: a later recompute does not queue it again
        self.s.publish_etas(moved)
        return first

    def _record_first(self, first: list[FirstEstimate]) -> None:
        if not first:
            return
        try:
            stored.record_first(self.s.store.engine, first)
        except StoreUnavailable:
            self._first_recorded.difference_update(r[0] for r in first)  # the next recompute tries again
            log.warning("could not record %d first start estimates (the store is unavailable)", len(first))

    # ---- reads -----------------------------------------------------------------------
    def of(self, run_id: str) -> Known | None:
        a = self.s.active.get(run_id)
        return self.known.get(a.queue, {}).get(run_id) if a is not None else None

    def count(self) -> int:
        return sum(len(runs) for runs in self.known.values())


def _moved(old: Known | None, new: Known) -> bool:
    """Worth telling watchers: a first answer, known ↔ unknown, or a start that moved by over 30 s and 10%."""
    if old is None or type(old.estimate) is not type(new.estimate):
        return True
    if isinstance(old.estimate, EtaUnknown) or isinstance(new.estimate, EtaUnknown):
        return old.estimate != new.estimate
    for was, now in (
        (old.estimate.p50_seconds, new.estimate.p50_seconds),
        (old.estimate.p90_seconds, new.estimate.p90_seconds),
    ):
        shift = abs((new.computed_at + now) - (old.computed_at + was))
        if shift > max(30.0, 0.1 * now):
            return True
    return False


def _groups_of(queues: dict[str, QueueState], pool: DevicePool, names: Iterable[str]) -> set[str]:
    wanted = set(names)
    return {n for g in components(queues, pool) if wanted.intersection(g) for n in g}
