"""Insights over a time range, with access control: who may see which queues and projects.

Platform admins see every queue and project; anyone else only their projects' runs (and the
queues those projects may use), so no answer names another project or its users.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

from ..core.errors import InvalidInput, NotFound
from ..core.gpu_usage import BUSY_PERCENT, SYSTEM_PREFIX, Sample, from_series, seconds_in
from ..core.insights import insights
from ..core.policy import is_platform_admin, listable_queues, require_project, visible_projects
from ..store.estimates import calibration_rows
from ..store.insights import refusal_counts, timelines, window_runs
from ..store.metrics import MetricStore
from .state import EngineState

MAX_RANGE_SECONDS = 400 * 86400
MIN_BUCKET_SECONDS = 60
MAX_BUCKETS = 2000
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_DURATION = re.compile(r"([0-9]{1,6})([smhdw])")
_EPOCH = re.compile(r"[0-9]{1,12}(\.[0-9]{1,6})?")
TIME_HINT = "epoch seconds (e.g. 1767225600) or a duration before now (e.g. 90m, 12h, 7d, 2w)"


def duration(raw: str, name: str) -> float:
    m = _DURATION.fullmatch(raw)
    if m is None:
        raise InvalidInput(f"{name} must be a duration like 1h, 6h or 1d, got {raw[:40]!r}", "units: s, m, h, d, w")
    return float(int(m.group(1)) * _UNITS[m.group(2)])


def moment(raw: str, name: str, now: float) -> float:
    """Epoch seconds, or a duration meaning that long before now."""
    if _EPOCH.fullmatch(raw):
        return float(raw)
    if _DURATION.fullmatch(raw):
        return now - duration(raw, name)
    raise InvalidInput(f"{name} must be {TIME_HINT}, got {raw[:40]!r}")


def time_range(since: str | None, until: str | None, bucket: str | None, now: float) -> tuple[float, float, float]:
    """[since, until) and the bucket width, bounded; defaults: the last 7 days, hourly/daily buckets."""
    t1 = now if until is None else moment(until, "until", now)
    t0 = t1 - 7 * 86400 if since is None else moment(since, "since", now)
    if not t0 < t1:
        raise InvalidInput(f"since ({t0:.0f}) must be before until ({t1:.0f})", TIME_HINT)
    if t1 - t0 > MAX_RANGE_SECONDS:
        raise InvalidInput(f"the range is {(t1 - t0) / 86400:.0f} days; at most 400 days", "narrow since/until")
    if bucket is None:
        width = 3600.0 if t1 - t0 <= 2 * 86400 else 86400.0 if t1 - t0 > 60 * 86400 else 6 * 3600.0
    else:
        width = duration(bucket, "bucket")
        if not MIN_BUCKET_SECONDS <= width <= MAX_RANGE_SECONDS:
            raise InvalidInput(f"bucket must be between 1m and 400d, got {bucket[:40]!r}")
    if (t1 - t0) / width > MAX_BUCKETS:
        raise InvalidInput(
            f"{(t1 - t0) / width:.0f} buckets of {bucket or width} in the range; at most {MAX_BUCKETS}",
            "a wider bucket (e.g. 1h, 1d) or a shorter range",
        )
    return t0, t1, width


def compute(
    s: EngineState,
    user: str,
    *,
    queue: str | None = None,
    project: str | None = None,
    since: str | None = None,
    until: str | None = None,
    bucket: str | None = None,
) -> dict[str, Any]:
    cfg = s.cfg
    now = s.clock()
    t0, t1, width = time_range(since, until, bucket, now)
    queues = listable_queues(cfg, user)
    if queue is not None:
        if queue not in queues:
            raise NotFound(f"queue {queue!r} not found", "list the queues you may use with GET /gpuplat/api/queues")
        queues = [queue]
    if project is not None:
        require_project(cfg, user, project, "viewer")
        projects = [project]
    else:
        projects = visible_projects(cfg, user)
    quota = {q.name: q.quota.quota().gpu for q in cfg.queues if q.name in queues}
    offers = {q.name: {f.name: f.quota.gpu for f in q.flavors} for q in cfg.queues if q.name in queues}
    engine = s.store.engine
    runs, known = window_runs(engine, queues, projects, t0, t1) if queues and projects else ([], {})
    tls = timelines(engine, [r["id"] for r in runs if r["id"] not in known])
    # Runs dispatched in the range with a first start estimate: how right the estimates were.
    estimated = calibration_rows(engine, queues, projects, t0, t1) if queues and projects else []
    # The machine's GPUs where the executor places work on its own devices; a cluster: no number.
    machine = len(s.devices) if s.assigns_devices else None
    out = insights(
        runs,
        tls,
        since=t0,
        until=t1,
        bucket=width,
        now=now,
        quota_gpu=quota,
        machine_gpus=machine,
        facts=known,
        flavors=[f.name for f in cfg.flavors],
        queue_flavors=offers,
        machine_flavors=s.machine_flavors(cfg),
        estimated=estimated,
        gpu_seconds=window_gpu_seconds(s.store.metrics, runs, t0, t1, s.executor.gpu_interval()),
    )
    out["refusals"] = refusal_counts(engine, None if queue is None else queues, projects, t0, t1) if projects else []
    out.update(
        since=t0,
        until=t1,
        bucket_seconds=width,
        now=now,
        queue=queue,
        project=project,
        platform_admin=is_platform_admin(cfg, user),
        machine_gpus=machine,
        busy_percent=BUSY_PERCENT,
    )
    return out


def window_gpu_seconds(
    metrics: MetricStore, runs: Sequence[dict[str, Any]], since: float, until: float, interval: float | None
) -> dict[str, tuple[float, float]]:
    """Measured runs' (device-seconds sampled, busy) from their samples taken in [since, until).

    A run that ended inside the range has all its samples in it: its record's summary says them (no series
    read). The rest that held GPUs (running, crossing an edge, ended without a summary kept) are recounted
    from their stored samples; a run whose record says "not measured" counts in none.
    """
    out: dict[str, tuple[float, float]] = {}
    recount: list[dict[str, Any]] = []
    for r in runs:
        if not r["gpu"] or r["started_at"] is None:
            continue
        usage = r.get("gpu_usage")
        if usage is not None and not usage.get("measured"):
            continue
        # Samples are taken while it runs, at whole seconds: none before floor(started_at), none after its end.
        if usage is not None and math.floor(r["started_at"]) >= since and r["finished_at"] < until:
            if usage["seconds_sampled"] > 0:
                out[r["id"]] = (float(usage["seconds_sampled"]), float(usage["seconds_busy"]))
            continue
        recount.append(r)
    for i in range(0, len(recount), 900):  # SQLite's bound-parameter limit
        chunk = recount[i : i + 900]
        series = metrics.series_many([r["id"] for r in chunk], prefix=SYSTEM_PREFIX)
        for r in chunk:
            samples: list[Sample] = from_series(series.get(r["id"], {}))  # type: ignore[arg-type]
            usage = r.get("gpu_usage") or {}
            every = usage.get("interval_seconds") or interval
            if not samples or not every:
                continue
            busy = usage.get("busy_percent", BUSY_PERCENT)
            got = seconds_in(samples, interval_seconds=every, since=since, until=until, busy_percent=busy)
            if got[0] > 0:
                out[r["id"]] = got
    return out
