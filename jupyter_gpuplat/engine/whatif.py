"""What-if limits over the record: read a period's runs, replay them under changed settings.

The replay itself is core.whatif (the admission functions the dispatcher uses). Here: the
period's runs from the store, the queues' current settings with the changes applied, and an
answer that names only the caller's projects' runs (admins: every run).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from ..core.config import PlatformConfig, QueueConfig, check_flavors
from ..core.errors import InvalidInput, NotFound
from ..core.flavors import asked_flavor
from ..core.policy import is_platform_admin, listable_queues, visible_projects
from ..core.resources import Resources
from ..core.whatif import (
    ASSUMPTIONS,
    RecordedRun,
    binding,
    binding_flavor,
    binding_notes,
    binding_text,
    censored_wait,
    flavor_figures,
    replay,
    summarize,
)
from ..store.insights import arrived_or_holding
from .state import queue_limits

if TYPE_CHECKING:
    from .engine import Engine

MAX_PERIOD_SECONDS = 366 * 86400
MAX_RUNS = 1_000_000


def recorded_runs(engine: Engine, since: float, until: float) -> list[RecordedRun]:
    """Runs that arrived in [since, until), and those dispatched before `since` still holding at it."""
    rows = arrived_or_holding(engine.store.engine, since, until, MAX_RUNS)
    if len(rows) > MAX_RUNS:
        raise InvalidInput(f"the period holds more than {MAX_RUNS} runs", "replay a shorter period")
    cfg = engine.cfg
    return [
        RecordedRun(
            x.id, x.seq, x.queue, x.project, x.user, Resources(x.gpu, x.cpu_milli, x.memory_bytes),
            x.queued_at if x.queued_at is not None else x.created_at,
            d := _before(x.dispatched_at, until), _before(x.finished_at, until), x.parent,
            x.flavor if d is not None else None, _asked(cfg, x.gpu_type),
        )
        for x in rows
    ]  # fmt: skip


def _asked(cfg: PlatformConfig, gpu_type: str | None) -> str | None:
    """The flavor a run asked for, read as the dispatcher reads it (core.flavors.asked_flavor)."""
    return asked_flavor(cfg, {"placement": {"gpu_type": gpu_type}}) if gpu_type else None


def _before(t: float | None, until: float) -> float | None:
    """What had happened by `until`: later times are not known to the period."""
    return t if t is not None and t <= until else None


def changed_queue(q: QueueConfig, change: dict[str, Any]) -> QueueConfig:
    body = q.model_dump(mode="json", exclude_unset=True)
    quota = change.get("quota")
    flavors: dict[str, dict[str, Any]] = change.get("flavors") or {}
    body.update({k: v for k, v in change.items() if k not in ("quota", "flavors")})
    if quota is not None:
        body["quota"] = {**body.get("quota", {}), **quota}
    offered = [f.name for f in q.flavors]
    unknown = [name for name in flavors if name not in offered]
    if unknown:
        # A proposal changes the quota of a flavor the queue offers; adding one would also need its place in the order.
        raise InvalidInput(
            f"queue {q.name} does not offer flavor {unknown[0][:64]!r} "
            + (f"(it offers: {', '.join(offered)})" if offered else "(it offers no flavors)"),
            f"set flavors.<name> for one of: {', '.join(offered)}" if offered else "change its quota instead",
        )
    if flavors:
        body["flavors"] = [
            {**f, "quota": {**f["quota"], **flavors.get(f["name"], {})}}
            for f in (fl.model_dump(mode="json", exclude_unset=True) for fl in q.flavors)
        ]
    try:
        return QueueConfig.model_validate(body)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise InvalidInput(
            f"queue {q.name}: {where}: {first['msg']}", "see the queue settings in docs/config"
        ) from None


def _check_flavor_quotas(engine: Engine, queues: list[QueueConfig], changes: dict[str, Any]) -> None:
    """A proposed flavor quota is bounded as the config's is: by this machine's devices of the flavor."""
    changed = {f"queues[{i}]." for i, q in enumerate(queues) if (changes.get(q.name) or {}).get("flavors")}
    if not changed:
        return
    cfg = engine.cfg.model_copy(update={"queues": queues})
    for err in check_flavors(cfg, engine.state.machine_flavors(engine.cfg)):
        if any(err.startswith(prefix) for prefix in changed):
            raise InvalidInput(f"proposed {err}", "propose at most the flavor's devices on this machine")


def what_if(
    engine: Engine,
    user: str,
    changes: dict[str, dict[str, Any]],
    since: float,
    until: float,
    queues: list[str] | None = None,
    max_run_rows: int = 1000,
) -> dict[str, Any]:
    """The one engine-level call of POST whatif: observed and predicted, per queue and per run."""
    cfg = engine.cfg
    if not until > since:
        raise InvalidInput(f"until ({until}) must be after since ({since})", "give a period that is not empty")
    if until - since > MAX_PERIOD_SECONDS:
        raise InvalidInput(f"the period is {until - since:.0f} s; at most {MAX_PERIOD_SECONDS} s (366 days)")
    admin = is_platform_admin(cfg, user)
    projects = set(visible_projects(cfg, user))
    # The rule GET insights keeps (docs/insights.md, "Who sees what"): a queue the caller may not see
    # is answered like an unknown one, 404, and the figures count only the caller's projects' runs.
    usable = listable_queues(cfg, user)
    wanted = list(dict.fromkeys([*(queues or []), *changes])) or usable
    for n in wanted:
        if n not in usable:
            raise NotFound(f"queue {n!r} not found", f"queues you may replay: {', '.join(usable) or 'none'}")
    settings = {q.name: changed_queue(q, changes[q.name]) if q.name in changes else q for q in cfg.queues}
    _check_flavor_quotas(engine, list(settings.values()), changes)
    runs = recorded_runs(engine, since, until)
    devices = len(engine.devices) if engine.state.assigns_devices else None
    # The dispatcher's device flavors, where it counts free devices per flavor.
    typed = engine.state.device_flavor if engine.state.free_by_flavor is not None else None
    limits = [queue_limits(q) for q in settings.values()]
    rp = replay(runs, limits, devices=devices, since=since, until=until, typed=typed)
    seen = (lambda run: True) if admin else (lambda run: run.project in projects)
    # Every run takes its place in the replay (they compete); the figures count the visible ones.
    by_queue: dict[str, list[RecordedRun]] = {}
    for run in runs:
        if seen(run):
            by_queue.setdefault(run.queue, []).append(run)

    def allowance(q: QueueConfig) -> int | None:
        return devices if q.quota.gpu is None else q.quota.gpu

    summary = summarize(
        rp,
        by_queue,
        {n: allowance(settings[n]) for n in wanted},
        {n: allowance(q) for q in cfg.queues if (n := q.name) in wanted},
    )
    rows: list[dict[str, Any]] = []
    hidden = shown = 0
    for rid in _observed_order(rp.outcomes.values()):
        o = rp.outcomes[rid]
        if o.run.queue not in wanted:
            continue
        if not seen(o.run):
            hidden += 1
            continue
        shown += 1
        if len(rows) < max_run_rows:
            ow, pw = censored_wait(o.run, o.run.dispatched_at, until), censored_wait(o.run, o.dispatched_at, until)
            rows.append({
                "id": o.run.id, "queue": o.run.queue, "project": o.run.project, "user": o.run.user,
                "gpu": o.run.request.gpu, "queued_at": o.run.queued_at,
                "observed_dispatched_at": o.run.dispatched_at, "predicted_dispatched_at": o.dispatched_at,
                "observed_wait_seconds": ow[0], "predicted_wait_seconds": pw[0],
            })  # fmt: skip
    order = [rid for rid in rp.order if rp.outcomes[rid].run.queue in wanted and seen(rp.outcomes[rid].run)]
    return {
        "since": since,
        "until": until,
        "devices": devices,
        "queues": [
            {
                "name": n,
                "settings": _settings(settings[n]),
                "observed_settings": _settings(cfg.queue(n)),
                **summary[n],
                "predicted_binding": binding(rp.held_by.get(n, {})),
                "predicted_binding_flavor": binding_flavor(rp.held_by.get(n, {}), rp.held_by_flavor.get(n, {})),
                "predicted_binding_text": binding_text(rp.held_by.get(n, {}), rp.held_by_flavor.get(n, {})),
                "notes": binding_notes(
                    changes.get(n, {}),
                    rp.held_by.get(n, {}),
                    rp.held_by_flavor.get(n, {}),
                    changes.get(n, {}).get("flavors") or (),
                ),
                "flavors": flavor_figures(
                    rp,
                    by_queue.get(n, []),
                    [(f.name, f.quota.gpu) for f in settings[n].flavors],
                    {f.name: f.quota.gpu for f in q.flavors} if (q := cfg.queue(n)) is not None else {},
                    rp.held_by_flavor.get(n, {}),
                ),
            }
            for n in wanted
        ],
        "runs": rows,
        "runs_truncated": shown > len(rows),
        "hidden_runs": hidden,
        "predicted_order": order[:max_run_rows],
        "cycles": rp.cycles,
        "assumptions": list(ASSUMPTIONS),
    }


def _observed_order(outcomes: Any) -> list[str]:
    """Replayed runs in the order they were dispatched (not dispatched: last, by arrival)."""
    inf = float("inf")
    return [
        o.run.id
        for o in sorted(
            outcomes, key=lambda o: (o.run.dispatched_at if o.run.dispatched_at is not None else inf, o.run.seq)
        )
    ]


def _settings(q: QueueConfig | None) -> dict[str, Any]:
    if q is None:
        raise NotFound("unknown queue")
    return {
        "priority": q.priority,
        "concurrency": q.concurrency,
        "quota": q.quota.model_dump(mode="json", exclude_none=True),
        "flavors": [{"name": f.name, "quota": f.quota.model_dump(mode="json", exclude_none=True)} for f in q.flavors],
        "max_per_user": q.max_per_user,
        "ordering": q.ordering,
        "paused": q.paused,
    }
