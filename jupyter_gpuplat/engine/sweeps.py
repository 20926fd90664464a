"""Sweeps: a parent run (kind `sweep`) whose children are ordinary runs of one queue.

The parent holds no slot and no resources; it is a record and a gate. Its workflow
concurrency is a `SweepGate` in its queue's state, which admission checks for each child
group head (a sweep's children are one group), so a sweep of 10,000 children costs the
dispatcher one head, not 10,000. Changing the concurrency or pausing changes the gate and
wakes the queue; lowering it never stops a running child.

The parent's status: queued until a child is dispatched, then running; it ends when every
child has ended (succeeded if none failed, else failed), when a child reaches an
early-stopping target (succeeded, EarlyStopped), when more children failed than
`max_failures` (failed, MaxFailures), or when stopped (stopped). Ending early stops the
children that have not ended.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any

from ..core.admission import SweepGate
from ..core.errors import Conflict, InvalidInput
from ..core.matrix import Matrix
from ..core.policy import require_can_stop
from ..core.reasons import Reason
from ..core.search import BayesSearch
from ..core.status import FINAL, Status
from .state import ActiveRun, EngineState

MAX_CONCURRENCY = 10_000
# The median rule waits for this many ended children before it compares anyone to them.
MEDIAN_MIN_ENDED = 3


def _best(summary: dict[str, Any] | None, optimization: str) -> float | None:
    """A metric's best value so far: its max when maximizing, else its min."""
    if not summary or summary.get("min") is None:
        return None
    return float(summary["max"] if optimization == "maximize" else summary["min"])


@dataclass
class Sweep:
    """What the engine keeps of an unfinished sweep."""

    parent: ActiveRun
    gate: SweepGate
    total: int
    ended: int = 0
    failed: int = 0
    max_failures: int | None = None
    targets: list[dict[str, Any]] = field(default_factory=list)  # metric early-stopping rules
    medians: list[dict[str, Any]] = field(default_factory=list)  # median-stopping rules
    ended_best: dict[str, list[float]] = field(default_factory=dict)  # metric → ended children's best values
    children: set[str] = field(default_factory=set)  # unfinished children
    created: int = 0  # children made so far (bayes makes them as its search asks)
    bayes: bool = False
    search: Any = None  # bayes: the BayesSearch (core.search), rebuilt from the record after a restart
    trials: dict[str, int] = field(default_factory=dict)  # bayes: child id → the search's params id

    @property
    def id(self) -> str:
        return self.parent.id


def sweep_spec(resolved: dict[str, Any]) -> dict[str, Any]:
    return dict(resolved.get("sweep") or {})


class Sweeps:
    def __init__(self, state: EngineState) -> None:
        self.s = state
        self.sweeps: dict[str, Sweep] = {}
        self.stopper: Any = None  # the reconciler: stop(user, row), finish(...) (set by the engine)
        self.waker: Any = None  # the dispatcher: dirty queues, schedule
        self.spawner: Any = None  # the dispatcher: add_children

    # ---- creation and reload ------------------------------------------------
    def register(
        self, parent: ActiveRun, children: list[ActiveRun], ended: int = 0, failed: int = 0, created: int | None = None
    ) -> Sweep:
        spec = sweep_spec(parent.resolved)
        gate = SweepGate(int(spec.get("concurrency") or 1), bool(spec.get("paused")))
        sw = Sweep(
            parent,
            gate,
            total=int(spec.get("total") or len(children)),
            ended=ended,
            failed=failed,
            max_failures=spec.get("max_failures"),
            targets=[r for r in spec.get("early_stopping") or [] if r.get("value") is not None],
            medians=[r for r in spec.get("early_stopping") or [] if r.get("policy") == "median"],
            children={c.id for c in children},
            created=created if created is not None else len(children),
            bayes=(spec.get("matrix") or {}).get("kind") == "bayes",
        )
        self.sweeps[parent.id] = sw
        q = self.s.queues.get(parent.queue)
        if q is not None:
            q.gates[parent.id] = gate
        return sw

    def of(self, run_id: str) -> Sweep | None:
        return self.sweeps.get(run_id)

    # ---- children's life ------------------------------------------------------
    def dispatched(self, child: ActiveRun) -> None:
        sw = self.sweeps.get(child.parent or "")
        if sw is None or sw.parent.status != Status.QUEUED:
            return
        self.s.record(
            sw.parent, Status.RUNNING, Reason.SWEEP_STARTED, f"child {child.id} dispatched", started_at=self.s.clock()
        )

    def child_ended(self, child: ActiveRun, status: Status) -> None:
        sw = self.sweeps.get(child.parent or "")
        if sw is None:
            return
        sw.children.discard(child.id)
        sw.ended += 1
        if status == Status.FAILED:
            sw.failed += 1
        if sw.parent.status in FINAL or sw.parent.stop_requested_by:
            self._maybe_final(sw)
            return
        if sw.max_failures is not None and sw.failed > sw.max_failures:
            self._end_early(
                sw,
                Status.FAILED,
                Reason.MAX_FAILURES,
                f"{sw.failed} children failed (max_failures {sw.max_failures}); the rest stopped",
            )
            return
        self.top_up(sw)
        self._maybe_final(sw)

    # ---- bayes: children as the search asks -------------------------------------
    def top_up(self, sw: Sweep) -> None:
        """Keep `concurrency` children unfinished while the search has trials left to ask."""
        if not sw.bayes:
            return
        want = min(sw.gate.concurrency - len(sw.children), sw.total - sw.created)
        if want <= 0 or sw.gate.paused or sw.parent.stop_requested_by is not None:
            return
        search = self._search(sw)
        asked = [search.ask() for _ in range(want)]
        made = self.spawner.add_children(sw.parent, [p for _, p in asked], sw.created)
        sw.created += len(made)
        for a, (trial, _) in zip(made, asked, strict=True):
            sw.children.add(a.id)
            sw.trials[a.id] = trial

    def child_metrics(self, sweep_id: str, child_id: str, *, final: bool) -> None:
        """A child's metrics as indexed so far (`final`: all of them, it has ended).

        Early-stopping targets compare its best value so far; the median rule stops a running
        child whose best value after `min_steps` is worse than the median of the ended children's;
        a bayes search is told an ended child's objective (the metric's last value).
        """
        sw = self.sweeps.get(sweep_id)
        if sw is None:
            return
        if not final and not sw.targets and not sw.medians:
            return  # nothing to check while it runs (a bayes search learns at the end)
        objective = (sweep_spec(sw.parent.resolved).get("matrix") or {}).get("objective") if sw.bayes else None
        names = {r["metric"] for r in (*sw.targets, *sw.medians)} | ({objective["metric"]} if objective else set())
        if not names:
            return
        summary = self.s.store.metrics.summaries([child_id], sorted(names)).get(child_id, {})
        for rule in sw.targets:
            value = _best(summary.get(rule["metric"]), rule.get("optimization", "maximize"))
            if value is not None:
                self.metric(sweep_id, child_id, rule["metric"], value)
        for rule in sw.medians:
            self._median(sw, rule, child_id, summary.get(rule["metric"]), final)
        if final and objective is not None:
            last = (summary.get(objective["metric"]) or {}).get("last")
            self._tell(sw, child_id, float(last) if last is not None else None)

    def _median(self, sw: Sweep, rule: dict[str, Any], child_id: str, s: dict[str, Any] | None, final: bool) -> None:
        opt = rule.get("optimization", "minimize")
        value = _best(s, opt)
        if value is None:
            return
        ended = sw.ended_best.setdefault(rule["metric"], [])
        if final:
            ended.append(value)
            return
        if len(ended) < MEDIAN_MIN_ENDED or (s or {}).get("count", 0) < int(rule.get("min_steps") or 0):
            return
        median = statistics.median(ended)
        if (value > median) if opt == "minimize" else (value < median):
            child = self.s.active.get(child_id)
            if child is None or child.stop_requested_by is not None:
                return
            by = f"the median rule ({rule['metric']} {value:g}, median of ended children {median:g})"
            row = {"id": child_id, "project": child.project, "user": child.user, "status": child.status.value}
            self.stopper.stop_child(by, child, row)

    def _tell(self, sw: Sweep, child_id: str, value: float | None) -> None:
        search = self._search(sw)
        trial = sw.trials.pop(child_id, None)
        if trial is not None:
            search.tell(trial, value)
        else:  # made before a restart: the search learns it as a finished trial
            row = self.s.store.get_run(child_id) or {}
            search.add((row.get("resolved") or {}).get("params") or {}, value)

    def _search(self, sw: Sweep) -> Any:
        if sw.search is None:
            sw.search = BayesSearch(Matrix.model_validate(sweep_spec(sw.parent.resolved)["matrix"]))
        return sw.search

    def metric(self, sweep_id: str, child_id: str, name: str, value: float) -> None:
        """A child's best value so far of a metric: an early-stopping target reached ends the sweep."""
        sw = self.sweeps.get(sweep_id)
        if sw is None or sw.parent.stop_requested_by or sw.parent.status in FINAL:
            return
        for rule in sw.targets:
            if rule.get("metric") != name:
                continue
            target = float(rule["value"])
            hit = value >= target if rule.get("optimization", "maximize") == "maximize" else value <= target
            if hit:
                message = f"child {child_id} reached {name} = {value:g} (target {target:g}); the rest stopped"
                self._end_early(sw, Status.SUCCEEDED, Reason.EARLY_STOPPED, message)
                return

    # ---- control ------------------------------------------------------------------
    def update(self, user: str, row: dict[str, Any], concurrency: int | None, paused: bool | None) -> None:
        sw = self.sweeps.get(row["id"])
        require_can_stop(self.s.cfg, user, row)  # who may stop a sweep may change it
        if row.get("kind") != "sweep":
            raise Conflict(f"run {row['id']} is a {row.get('kind')}, not a sweep", "only sweeps have a concurrency")
        if sw is None:
            raise Conflict(f"sweep {row['id']} has ended ({row['status']})", "only unfinished sweeps can be changed")
        a, gate = sw.parent, sw.gate
        spec = sweep_spec(a.resolved)
        if concurrency is not None:
            if not 1 <= concurrency <= MAX_CONCURRENCY:
                raise InvalidInput(f"concurrency must be between 1 and {MAX_CONCURRENCY}, got {concurrency}")
            if concurrency != gate.concurrency:
                old, gate.concurrency = gate.concurrency, concurrency
                spec["concurrency"] = concurrency
                a.resolved = {**a.resolved, "sweep": spec}
                details = {"from": old, "to": concurrency, "by": user}
                self.s.record(
                    a,
                    a.status,
                    Reason.CONCURRENCY_CHANGED,
                    f"concurrency {old} → {concurrency} by {user}",
                    details=details,
                    resolved=a.resolved,
                )
        if paused is not None and paused != gate.paused:
            gate.paused = paused
            spec["paused"] = paused
            a.resolved = {**a.resolved, "sweep": spec}
            reason = Reason.SWEEP_PAUSED if paused else Reason.SWEEP_RESUMED
            what = "paused: no more children are dispatched" if paused else "resumed"
            self.s.record(a, a.status, reason, f"{what} by {user}", details={"by": user}, resolved=a.resolved)
        self.top_up(sw)
        self.waker.dirty.add(a.queue)
        self.waker.schedule()

    def stop(self, user: str, sweep: Sweep) -> None:
        """Stop the sweep: its queued children end now, its running ones get the normal stop."""
        a = sweep.parent
        if a.stop_requested_by is None:
            a.stop_requested_by = user
            self.s.record(
                a, Status.STOPPING, Reason.STOP_REQUESTED, f"stop requested by {user}", stop_requested_by=user
            )
        self._stop_children(sweep, user)
        self._maybe_final(sweep)

    # ---- endings ----------------------------------------------------------------------
    def _end_early(self, sw: Sweep, status: Status, reason: str, message: str) -> None:
        a = sw.parent
        a.end = (reason, message)
        a.stop_requested_by = "the sweep"
        self.s.record(a, Status.STOPPING, reason, message, stop_requested_by="the sweep")
        a.end_status = status
        self._stop_children(sw, "the sweep")
        self._maybe_final(sw)

    def _stop_children(self, sw: Sweep, user: str) -> None:
        for cid in list(sw.children):
            child = self.s.active.get(cid)
            if child is None or child.stop_requested_by is not None:
                continue
            row = {"id": cid, "project": child.project, "user": child.user, "status": child.status.value}
            self.stopper.stop_child(user, child, row)

    def _maybe_final(self, sw: Sweep) -> None:
        if sw.children or sw.id not in self.sweeps:
            return
        if sw.created < sw.total and sw.parent.end is None and sw.parent.stop_requested_by is None:
            return  # bayes: more children to come
        a = sw.parent
        if a.end is not None:
            reason, message = a.end
            status = a.end_status or Status.STOPPED
        elif a.stop_requested_by is not None:
            status, reason = Status.STOPPED, Reason.STOPPED
            message = f"stopped by {a.stop_requested_by}; {sw.ended} of {sw.total} children ended"
        elif sw.failed:
            status, reason = Status.FAILED, Reason.ERROR
            message = f"{sw.failed} of {sw.total} children failed"
        else:
            status, reason, message = Status.SUCCEEDED, Reason.COMPLETED, f"all {sw.total} children succeeded"
        self.sweeps.pop(a.id, None)
        q = self.s.queues.get(a.queue)
        if q is not None:
            q.gates.pop(a.id, None)
        self.stopper.finish(a, status, reason, message)
