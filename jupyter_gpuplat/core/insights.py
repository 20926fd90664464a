"""Insights from the record, pure: runs (times + timeline) in, figures out.

Every figure is recomputed from the runs' recorded times and append-only timelines, so
the answer is a recount by construction (no rollup that could drift). Percentiles are
exact, nearest-rank: the p-th percentile of n sorted values is the ceil(p/100 * n)-th.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .clocks import clocks
from .gpu_insights import MeasuredRun, busy_view, idle_holders
from .reasons import Layer, Reason, layer_of
from .status import FINAL

PERCENTILES = (50, 90, 99)
CATEGORIES = ("quota", "concurrency", "max_per_user", "capacity", "placement", "other")
_CATEGORY: dict[str, str] = {
    Reason.QUEUE_QUOTA: "quota",
    Reason.QUEUE_CONCURRENCY: "concurrency",
    Reason.SWEEP_CONCURRENCY: "concurrency",
    Reason.USER_LIMIT: "max_per_user",
    Reason.NO_CAPACITY: "capacity",
}
# Kubernetes placement: the scheduler (or an admission gate) has not put the pod on a node.
PLACEMENT = frozenset(
    {
        Reason.INSUFFICIENT_GPU,
        Reason.GPU_FRAGMENTED,
        Reason.NO_NODE_BIG_ENOUGH,
        Reason.INSUFFICIENT_RESOURCES,
        Reason.UNTOLERATED_TAINT,
        Reason.SELECTOR_MISMATCH,
        Reason.NODES_CORDONED,
        Reason.VOLUME_NOT_BOUND,
        Reason.VOLUME_NODE_CONFLICT,
        Reason.UNSCHEDULABLE,
        Reason.SCHEDULING_GATED,
        Reason.PENDING,
        Reason.SUSPENDED,
        Reason.EXCEEDED_QUOTA,
    }
)


def category(reason: str) -> str:
    if reason in _CATEGORY:
        return _CATEGORY[reason]
    return "placement" if reason in PLACEMENT else "other"


def percentile(sorted_values: Sequence[float], p: float) -> float | None:
    """Nearest rank: exact (one of the values), None for no values."""
    if not sorted_values:
        return None
    rank = max(1, math.ceil(p / 100 * len(sorted_values)))
    return sorted_values[rank - 1]


def summary(values: Iterable[float]) -> dict[str, Any]:
    xs = sorted(values)
    out: dict[str, Any] = {"n": len(xs)}
    for p in PERCENTILES:
        out[f"p{p}"] = percentile(xs, p)
    out["max"] = xs[-1] if xs else None
    out["mean"] = round(sum(xs) / len(xs), 3) if xs else None
    return out


_HOLDS: dict[str, bool] = {}


def _holds(reason: str) -> bool:
    """Whether the reason holds a run before (or again outside) its process: cached, it is asked per event."""
    held = _HOLDS.get(reason)
    if held is None:
        held = _HOLDS[reason] = layer_of(reason) in (Layer.QUEUE, Layer.EXECUTOR)
    return held


def wait_intervals(timeline: Sequence[Mapping[str, Any]], end: float) -> list[tuple[str, float]]:
    """(reason, seconds) for each stretch the run was held (our queue or the executor) by that reason."""
    out: list[tuple[str, float]] = []
    for i, ev in enumerate(timeline):
        if ev["status"] in FINAL:
            break
        reason = str(ev.get("reason") or "")
        if not _holds(reason):
            continue
        nxt = timeline[i + 1]["at"] if i + 1 < len(timeline) else end
        if nxt > ev["at"]:
            out.append((reason, nxt - ev["at"]))
    return out


# An ended run's figures: queue wait, start wait, run time (as `clocks` gives them) and its waits by reason.
RunFacts = tuple[float | None, float | None, float | None, list[tuple[str, float]]]


def run_facts(run: Mapping[str, Any], timeline: Sequence[Mapping[str, Any]]) -> RunFacts:
    """The figures of a run that has ended: they depend on its times and timeline only, never on now."""
    end = run["finished_at"]
    c = clocks(run, timeline, end)
    return c["queue_wait_seconds"], c["start_wait_seconds"], c["run_seconds"], wait_intervals(timeline, end)


def eta_calibration(estimated: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """How right the first start estimates were: runs dispatched, each with its first estimate (`p50_at`, `p90_at`).

    `p90_hit_rate`: the share dispatched at or before their p90; `p50_abs_error_seconds`: the mean of
    |dispatched_at - p50_at|, and `p50_abs_error_median_seconds` its nearest-rank median (a few runs
    estimated from their time limits alone, far off, move the mean but not the median). None: no runs.
    """
    rows = list(estimated)
    errors = sorted(abs(r["dispatched_at"] - r["p50_at"]) for r in rows)
    hits = sum(1 for r in rows if r["dispatched_at"] <= r["p90_at"])
    return {
        "n": len(rows),
        "p90_hit_rate": round(hits / len(rows), 6) if rows else None,
        "p50_abs_error_seconds": round(sum(errors) / len(errors), 3) if errors else None,
        "p50_abs_error_median_seconds": percentile(errors, 50),
    }


def _overlap(a0: float, a1: float, b0: float, b1: float) -> float:
    return max(0.0, min(a1, b1) - max(a0, b0))


def _gpu_hours(gpus: Iterable[int | None], seconds: float) -> float | None:
    """GPUs x seconds in hours; None where any of them is unlimited (or there are none)."""
    counts = list(gpus)
    if not counts or any(g is None for g in counts):
        return None
    return round(sum(g or 0 for g in counts) * seconds / 3600, 6)


def _share(used: float, of: float | None) -> float | None:
    return None if not of else round(used / of, 6)


def _with_machine(view: dict[str, Any], gpus: int | None, seconds: float) -> dict[str, Any]:
    """A view with the machine's GPUs (of its kind) over `seconds`, and its GPU-hours' share of them."""
    view["machine_gpu_hours"] = hours = _gpu_hours([gpus], seconds)
    view["machine_utilisation"] = _share(view["gpu_hours"], hours)
    return view


class Tally:
    """Figures of one selection (a queue, or everything asked for)."""

    def __init__(self) -> None:
        self.queue_waits: list[float] = []
        self.start_waits: list[float] = []
        self.by_reason: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
        self.gpu_seconds = 0.0
        self.measured_seconds = 0.0  # device-seconds sampled (measured runs only), and of them busy
        self.busy_seconds = 0.0
        self.run_seconds = 0.0
        self.lifetime_seconds = 0.0
        self.ended = 0
        self.failures: dict[str, int] = defaultdict(int)
        self.runs = 0

    def view(self, gpu_hours_allowed: float | None) -> dict[str, Any]:
        gpu_hours = round(self.gpu_seconds / 3600, 6)
        ranked = sorted(self.by_reason.items(), key=lambda kv: (-kv[1][0], kv[0]))
        reasons: list[dict[str, Any]] = [
            {"reason": r, "category": category(r), "seconds": round(s, 3), "runs": int(n)} for r, (s, n) in ranked
        ]
        cats = dict.fromkeys(CATEGORIES, 0.0)
        for r, (s, _) in ranked:
            cats[category(r)] = round(cats[category(r)] + round(s, 3), 3)
        return {
            "runs": self.runs,
            "queue_wait": summary(self.queue_waits),
            "start_wait": summary(self.start_waits),
            "waits_by_reason": reasons,
            "waits_by_category": cats,
            "gpu_hours": gpu_hours,
            **busy_view(self.measured_seconds, self.busy_seconds),
            "allowance_gpu_hours": gpu_hours_allowed,
            "utilisation": _share(gpu_hours, gpu_hours_allowed),
            "goodput": round(self.run_seconds / self.lifetime_seconds, 6) if self.lifetime_seconds > 0 else None,
            "ended_runs": self.ended,
            "failures": [
                {"reason": r, "count": n} for r, n in sorted(self.failures.items(), key=lambda kv: (-kv[1], kv[0]))
            ],
        }


def insights(
    runs: Sequence[Mapping[str, Any]],
    timelines: Mapping[str, Sequence[Mapping[str, Any]]],
    *,
    since: float,
    until: float,
    bucket: float,
    now: float,
    quota_gpu: Mapping[str, int | None],
    machine_gpus: int | None,
    top: int = 10,
    facts: Mapping[str, RunFacts] | None = None,
    flavors: Sequence[str] = (),
    queue_flavors: Mapping[str, Mapping[str, int]] | None = None,
    machine_flavors: Mapping[str, int] | None = None,
    estimated: Sequence[Mapping[str, Any]] = (),
    gpu_seconds: Mapping[str, tuple[float, float]] | None = None,
) -> dict[str, Any]:
    """The figures over [since, until): waits of runs queued in it, GPU time and goodput inside it.

    `quota_gpu`: each selected queue's GPU quota (None: unlimited). GPU time is gpu x the part of
    [started, end) inside the range or bucket; goodput is run time / lifetime of runs that ended
    in the range; failures are failed runs that ended in it. `facts`: ended runs' `run_facts` as
    recorded when they ended (their timelines may then be left out); the answer is the same.

    Per flavor (`flavors`: the platform's, in its order), the same figures of the runs admitted on
    it (`run["flavor"]`), in all and per queue: a flavor is listed where a selected queue offers it
    (`queue_flavors`: queue -> flavor -> GPU quota, in the order tried) or a run counted it. Its
    allowance is its quotas in the selected queues offering it; `machine_flavors`: this machine's
    GPUs of each (None: not counted). Runs without a flavor count in no flavor.

    `estimated`: the runs dispatched in the range that had a first start estimate (`queue`,
    `dispatched_at`, `p50_at`, `p90_at`); their `eta_calibration` is given in all and per queue.

    `gpu_seconds`: the measured runs' (device-seconds sampled, of them busy) from their samples taken in the
    range (core.gpu_usage.seconds_in); each view adds `busy_view` of them, per project and user too, and
    `idle_holders` names who held the most idle GPU time (core.gpu_insights). Runs not in it are not measured.
    """
    horizon = min(until, now)
    n_buckets = max(1, math.ceil((until - since) / bucket))
    starts = [since + i * bucket for i in range(n_buckets)]
    series_gpu = [0.0] * n_buckets
    series_waits: list[list[float]] = [[] for _ in range(n_buckets)]
    total, per_queue = Tally(), {q: Tally() for q in quota_gpu}
    offers = queue_flavors or {}
    per_flavor = {f: Tally() for f in flavors}
    per_queue_flavor = {(q, f): Tally() for q in per_queue for f in flavors}
    counted: set[tuple[str, str]] = set()  # (queue, flavor) of the runs that counted on a flavor
    users: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0, 0.0, 0.0, 0.0])
    projects: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0.0, 0.0])
    measured_runs: list[MeasuredRun] = []
    sampled = gpu_seconds or {}
    for run in runs:
        end = run["finished_at"] if run["finished_at"] is not None else now
        known = facts.get(run["id"]) if facts is not None and run["finished_at"] is not None else None
        if known is None:
            tl = timelines.get(run["id"], ())
            c = clocks(run, tl, now)
            qw, sw, rs = c["queue_wait_seconds"], c["start_wait_seconds"], c["run_seconds"]
        else:
            qw, sw, rs, waits = known
        tallies = [total] + ([per_queue[run["queue"]]] if run["queue"] in per_queue else [])
        flavor = run.get("flavor")
        if flavor in per_flavor:
            tallies.append(per_flavor[flavor])
            counted.add((run["queue"], flavor))
            if (run["queue"], flavor) in per_queue_flavor:
                tallies.append(per_queue_flavor[(run["queue"], flavor)])
        queued = run["queued_at"]
        in_range = queued is not None and since <= queued < until
        gpu_s, buckets_hit = 0.0, []
        if run["started_at"] is not None and run["gpu"]:
            a0, a1 = run["started_at"], min(end, horizon)
            gpu_s = run["gpu"] * _overlap(a0, a1, since, until)
            if gpu_s:
                first = max(0, int((max(a0, since) - since) // bucket))
                for b in range(first, n_buckets):
                    if starts[b] >= a1:
                        break
                    buckets_hit.append((b, run["gpu"] * _overlap(a0, a1, starts[b], min(starts[b] + bucket, until))))
        for b, s in buckets_hit:
            series_gpu[b] += s
        ended = run["finished_at"] is not None and since <= run["finished_at"] < until
        held = (wait_intervals(tl, end) if known is None else waits) if in_range else []
        m_s, b_s = sampled.get(run["id"], (0.0, 0.0))
        if m_s > 0:
            measured_runs.append(MeasuredRun(run["id"], run["project"], run["user"], run["queue"], gpu_s, m_s, b_s))
        for t in tallies:
            t.gpu_seconds += gpu_s
            t.measured_seconds += m_s
            t.busy_seconds += b_s
            if in_range:
                t.runs += 1
                if run["dispatched_at"] is not None:
                    t.queue_waits.append(qw or 0.0)
                if run["started_at"] is not None:
                    t.start_waits.append(sw or 0.0)
                for reason, s in held:
                    slot = t.by_reason[reason]
                    slot[0] += s
                    slot[1] += 1
            if ended:
                t.ended += 1
                t.run_seconds += rs or 0.0
                t.lifetime_seconds += end - run["created_at"]
                if run["status"] == "failed":
                    t.failures[run["reason"] or "Unknown"] += 1
        if in_range and run["dispatched_at"] is not None:
            series_waits[min(n_buckets - 1, int((queued - since) // bucket))].append(qw or 0.0)
        if gpu_s or in_range or m_s:
            for u in (users[(run["project"], run["user"])], projects[run["project"]]):
                u[0] += 1 if in_range else 0
                u[1] += gpu_s
                u[2] += m_s
                u[3] += b_s

    def allowance(names: Iterable[str], seconds: float) -> float | None:
        return _gpu_hours((quota_gpu[n] for n in names), seconds)

    span = max(0.0, until - since)
    series = []
    for b, start in enumerate(starts):
        width = min(start + bucket, until) - start
        allowed = allowance(quota_gpu, width)
        machine = _gpu_hours([machine_gpus], width)
        gh = round(series_gpu[b] / 3600, 6)
        w = summary(series_waits[b])
        series.append(
            {
                "start": start,
                "gpu_hours": gh,
                "allowance_gpu_hours": allowed,
                "machine_gpu_hours": machine,
                "utilisation": _share(gh, allowed),
                "machine_utilisation": _share(gh, machine),
                "queued": w["n"],
                "queue_wait_p50": w["p50"],
                "queue_wait_p90": w["p90"],
                "queue_wait_p99": w["p99"],
            }
        )
    whole = _with_machine(total.view(allowance(quota_gpu, span)), machine_gpus, span)

    def queue_flavor_views(q: str) -> list[dict[str, Any]]:
        mine = offers.get(q, {})
        # The queue's order; then flavors its runs counted on that it no longer offers.
        names = [f for f in mine if f in per_flavor] + [f for f in flavors if f not in mine and (q, f) in counted]
        return [
            {"name": f, "quota_gpu": mine.get(f), **per_queue_flavor[(q, f)].view(_gpu_hours([mine.get(f)], span))}
            for f in names
        ]

    flavor_views = []
    used = {f for _, f in counted}
    for f, t in per_flavor.items():
        quotas = [mine[f] for q, mine in offers.items() if q in per_queue and f in mine]
        if not quotas and f not in used:
            continue  # no selected queue offers it and no run counted on it
        machine = None if machine_flavors is None else machine_flavors.get(f)
        head = {"name": f, "quota_gpu": sum(quotas) if quotas else None, "machine_gpus": machine}
        flavor_views.append(head | _with_machine(t.view(_gpu_hours(quotas, span)), machine, span))
    ranked = sorted(users.items(), key=lambda kv: (-kv[1][1], -kv[1][0], kv[0]))[:top]
    by_queue: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for e in estimated:
        by_queue[e["queue"]].append(e)
    whole["eta_calibration"] = eta_calibration(estimated)
    return {
        "total": whole,
        "queues": [
            {
                "name": q,
                "quota_gpu": quota_gpu[q],
                **t.view(allowance([q], span)),
                "flavors": queue_flavor_views(q),
                "eta_calibration": eta_calibration(by_queue.get(q, ())),
            }
            for q, t in per_queue.items()
        ],
        "flavors": flavor_views,
        "series": series,
        "top_users": [
            {"user": u, "project": p, "runs": int(n), "gpu_hours": round(s / 3600, 6), **busy_view(m, b)}
            for (p, u), (n, s, m, b) in ranked
        ],
        "projects": [
            {"project": p, "runs": int(n), "gpu_hours": round(s / 3600, 6), **busy_view(m, b)}
            for p, (n, s, m, b) in sorted(projects.items())
        ],
        "idle_holders": idle_holders(measured_runs, top),
    }
