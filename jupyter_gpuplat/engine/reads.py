"""The read model: every read the service needs, with access control applied.

Handlers ask this, never the snapshot (`active`, `queues`, `cfg`) or the store. Who may
see what is decided by core.policy; this only gathers the answer.
"""

from __future__ import annotations

from typing import Any

from ..core.admission import FreeByFlavor, QueueState, order_queues
from ..core.config import ProjectConfig, dump_config
from ..core.errors import InvalidInput, NotFound
from ..core.identity import groups_of
from ..core.policy import (
    allowed_presets,
    allowed_queues,
    can_see,
    has_role,
    is_platform_admin,
    listable_presets,
    listable_queues,
    listable_run_projects,
    platform_admins,
    queue_actions,
    require_platform_admin,
    require_visible_run,
    role_in,
    run_actions,
    visible_projects,
)
from ..core.spec import DEFAULT_KIND
from ..core.status import Phase, Status, statuses_in
from ..executors.base import ArtifactReader
from ..store.insights import timelines
from .bus import Subscription
from .compare import MAX_SWEEP_CHILDREN, compare, metrics_of
from .estimates import Estimates
from .gpu_sampling import GpuSampling
from .sessions import Sessions, is_session
from .state import ActiveRun, EngineState
from .sweeps import Sweeps
from .waiting import eta_of, pending_runs, waiting_of


class ReadModel:
    """The engine's read door: answers from the snapshot and the store, nothing written."""

    def __init__(
        self,
        state: EngineState,
        artifacts: ArtifactReader,
        sessions: Sessions,
        sweeps: Sweeps,
        artifacts_root: str,
        estimates: Estimates,
        gpu: GpuSampling,
    ) -> None:
        self.s = state
        self._estimates = estimates
        self._gpu = gpu
        # Logs, outputs and tracking files, read where the executor keeps them.
        self.artifacts = artifacts
        self._sessions = sessions
        self._sweeps = sweeps
        self._artifacts_root = artifacts_root

    # ---- the status events, as they happen ------------------------------------------
    def subscribe(self) -> Subscription:
        return self.s.bus.subscribe()

    def unsubscribe(self, sub: Subscription) -> None:
        self.s.bus.unsubscribe(sub)

    # ---- identity -----------------------------------------------------------
    def visible_projects(self, user: str) -> list[str]:
        return visible_projects(self.s.cfg, user)

    def is_admin(self, user: str) -> bool:
        return is_platform_admin(self.s.cfg, user)

    def whoami(self, user: str) -> dict[str, Any]:
        cfg = self.s.cfg
        projects = [
            {"name": p, "role": role_in(cfg, user, p), "may_submit": has_role(cfg, user, p, "member")}
            for p in visible_projects(cfg, user)
        ]
        groups = sorted(groups_of(user))
        return {"user": user, "groups": groups, "platform_admin": is_platform_admin(cfg, user), "projects": projects}

    # ---- capacity and queues --------------------------------------------------
    @property
    def free_gpus(self) -> int | None:
        return self.s.free_gpus

    @property
    def free_by_flavor(self) -> FreeByFlavor:
        return self.s.free_by_flavor

    @property
    def device_flavor(self) -> dict[int, str]:
        """Device index → its flavor on this machine (empty where no flavor types the devices)."""
        return self.s.device_flavor

    def capacity(self, user: str) -> dict[str, Any]:
        """The executor's devices, and which run holds each (its id only if the user may see it)."""
        s = self.s
        holders = {d: a for a in s.active.values() for d in a.devices}
        devices = []
        for d in s.devices:
            a = holders.get(d.index)
            devices.append(
                {
                    "index": d.index,
                    "name": d.name,
                    "memory_mb": d.memory_mb,
                    "uuid": d.uuid,
                    "declared": d.declared,
                    "in_use": a is not None,
                    "flavor": s.device_flavor.get(d.index),
                    "run_id": a.id if a is not None and can_see(s.cfg, user, a.project) else None,
                }
            )
        return {
            "executor": getattr(s.executor, "name", type(s.executor).__name__),
            "gpus": len(devices),
            "free_gpus": s.free_gpus,
            "devices": devices,
            "isolation": s.executor.isolation(),
        }

    def queue_states(self) -> dict[str, QueueState]:
        """Every queue's live state by name (the metrics exporter's gauges)."""
        return dict(self.s.queues)

    def queues(self, user: str) -> tuple[list[QueueState], int | None]:
        """The queues the user may list, in dispatch order, and the free GPUs (for their usage)."""
        names = listable_queues(self.s.cfg, user)
        return order_queues(self.s.queues[n] for n in names if n in self.s.queues), self.s.free_gpus

    def pending_runs(self, user: str, q: QueueState) -> tuple[list[dict[str, Any]], int]:
        """The user's visible pending runs of `q` with positions and estimates, and how many others' (not named)."""
        return pending_runs(self.s, self._estimates, q, self.visible_projects(user))

    def queue_actions(self, user: str, q: QueueState) -> list[str]:
        """What `user` may do to the queue (core.policy.queue_actions): queue views carry it as `actions`."""
        return queue_actions(self.s.cfg, user, q.limits.paused)

    def actions(self, user: str, row: dict[str, Any]) -> list[str]:
        """What `user` may do to the run (core.policy.run_actions): run views carry it as `actions`."""
        return run_actions(self.s.cfg, user, row)

    def waiting(self, row: dict[str, Any]) -> dict[str, str] | None:
        """Why a (visible) run that has not started waits: `{reason, message}` from the snapshot."""
        return waiting_of(self.s, row)

    def eta(self, row: dict[str, Any]) -> tuple[dict[str, Any] | None, str | None]:
        """A waiting run's start estimate (`eta`) or why there is none (`eta_unknown`); (None, None) for others."""
        return eta_of(self.s, self._estimates, row)

    def gpu_usage(self, row: dict[str, Any]) -> dict[str, Any] | None:
        """What a run did with the GPUs it held (`gpu_usage`): kept on its record when it ended, else from its
        samples; None where it held none."""
        return self._gpu.usage(row)

    def gpu_usage_listed(self, row: dict[str, Any]) -> dict[str, Any] | None:
        """A listed run's `gpu_usage`: its record's (kept when it ended); null while it runs."""
        return self._gpu.listed(row)

    def queue(self, name: str) -> tuple[QueueState, int | None]:
        """One queue's state and the free GPUs (after an admin write to it)."""
        q = self.queue_state(name)
        if q is None:
            known = ", ".join(self.s.queues) or "none"
            raise NotFound(f"queue {name!r} not found", f"queues: {known}")
        return q, self.s.free_gpus

    # ---- projects, presets, config ------------------------------------------------
    def projects(self, user: str) -> dict[str, Any]:
        cfg = self.s.cfg
        out = []
        for name in visible_projects(cfg, user):
            pr = cfg.project(name)
            assert pr is not None
            d = pr.model_dump(mode="json")
            d["role"] = role_in(cfg, user, name)
            d["usable_queues"] = allowed_queues(cfg, pr)
            d["usable_presets"] = allowed_presets(cfg, pr)
            d["may_submit"] = has_role(cfg, user, name, "member")  # submit() requires the same
            out.append(d)
        return {"projects": out, "restrict_by_default": cfg.restrict_by_default}

    def presets(self, user: str, project: str | None = None) -> dict[str, Any]:
        cfg = self.s.cfg
        names = set(listable_presets(cfg, user, project))
        # The resolved kind, not null: clients filter on it and must not re-derive the default.
        return {
            "presets": [
                {**p.model_dump(mode="json"), "kind": p.kind or DEFAULT_KIND} for p in cfg.presets if p.name in names
            ]
        }

    def config(self, user: str) -> dict[str, Any]:
        require_platform_admin(self.s.cfg, user)
        return {"config": dump_config(self.s.cfg), "version": self.s.config_version}

    # ---- runs -------------------------------------------------------------------
    def get_visible(self, user: str, run_id: str) -> dict[str, Any]:
        """One run's full record (with timeline), if the user may see it."""
        return require_visible_run(self.s.cfg, user, run_id, self.s.store.get_run(run_id))

    def is_final(self, run_id: str) -> bool:
        return run_id not in self.s.active

    def status_of(self, run_id: str) -> str | None:
        row = self.s.store.get_run(run_id)
        return None if row is None else str(row["status"])

    def working_dir_problem(self, path: str) -> str | None:
        """Why the executor cannot start runs in `path` (None: it can)."""
        return self.s.executor.check_working_dir(path, self._artifacts_root)

    # ---- sweeps -----------------------------------------------------------------------
    def sweep_view(self, row: dict[str, Any]) -> dict[str, Any] | None:
        """A sweep's children by status, its gate and its best child (by its objective); None for other runs."""
        if row.get("kind") != "sweep":
            return None
        spec = (row.get("resolved") or {}).get("sweep") or {}
        counts = self.s.store.child_counts(row["id"])
        live = self._sweeps.of(row["id"])
        out: dict[str, Any] = {
            "total": int(spec.get("total") or sum(counts.values())),
            "by_status": counts,
            "concurrency": live.gate.concurrency if live else spec.get("concurrency"),
            "paused": live.gate.paused if live else bool(spec.get("paused")),
            "matrix": spec.get("matrix"),
            "best": self._best_child(row["id"], row["project"], (spec.get("matrix") or {}).get("objective")),
        }
        return out

    def _best_child(self, sweep_id: str, project: str, objective: dict[str, Any] | None) -> dict[str, Any] | None:
        if not objective:
            return None
        rows = self.s.store.list_runs([project], parent=sweep_id, limit=MAX_SWEEP_CHILDREN)
        ids = [r["id"] for r in rows]
        metric, maximize = objective["metric"], objective.get("optimization") == "maximize"
        best: dict[str, Any] | None = None
        # Oldest first, so that of equal values the first submitted child is best (as compare ranks them).
        for rid, metrics in reversed(list(self.s.store.metrics.summaries(ids, [metric]).items())):
            s = metrics.get(metric)
            value = None if s is None else (s["max"] if maximize else s["min"])
            if value is None:
                continue
            if best is None or (value > best["value"] if maximize else value < best["value"]):
                best = {"id": rid, "value": value}
        if best is not None:
            params = next(r for r in rows if r["id"] == best["id"])["resolved"].get("params") or {}
            best["params"] = params
        return best

    # ---- GPU sessions -----------------------------------------------------------------
    def session_view(self, run_id: str) -> dict[str, Any] | None:
        """A session's lease (its kernel, busy, idle clock); None for other runs or before it starts."""
        return self._sessions.view(run_id)

    def session_leased(self, run_id: str) -> bool:
        return run_id in self._sessions.leases

    def user_sessions(self, user: str, notebook: str | None = None) -> list[dict[str, Any]]:
        """The user's unfinished sessions, newest first (from the snapshot, then their rows)."""
        mine = [
            a
            for a in self.s.active.values()
            if a.user == user
            and is_session(a)
            and (notebook is None or (a.resolved.get("session") or {}).get("notebook") == notebook)
        ]
        mine.sort(key=lambda a: a.seq, reverse=True)
        return [row for a in mine if (row := self.s.store.get_run(a.id)) is not None]

    def list_runs(
        self,
        user: str,
        *,
        project: str | None = None,
        statuses: list[str] | None = None,
        phases: list[str] | None = None,
        queue: str | None = None,
        owner: str | None = None,
        name_contains: str | None = None,
        kind: str | None = None,
        parent: str | None = None,
        notebook: str | None = None,
        before_seq: int | None = None,
        limit: int = 100,
    ) -> tuple[list[dict[str, Any]], int | None]:
        """A page of visible runs, newest first, and the `before` of the next page (None at the end)."""
        projects = listable_run_projects(self.s.cfg, user, project)
        statuses = statuses or []
        bad = [s for s in statuses if s not in Status.__members__.values()]
        if bad:
            raise InvalidInput(f"unknown status {bad[0]!r}", f"statuses: {', '.join(s.value for s in Status)}")
        if phases:
            odd = [p for p in phases if p not in Phase.__members__.values()]
            if odd:
                raise InvalidInput(f"unknown phase {odd[0]!r}", f"phases: {', '.join(p.value for p in Phase)}")
            # A phase is its statuses; with `status` too, a run must match both.
            in_phase = statuses_in(phases)
            statuses = [s for s in statuses if s in in_phase] if statuses else [s.value for s in in_phase]
            if not statuses:
                return [], None
        rows = self.s.store.list_runs(
            projects,
            status=statuses,
            queue=queue,
            user=owner,
            name_contains=name_contains,
            kind=kind,
            parent=parent,
            notebook=notebook,
            before_seq=before_seq,
            limit=limit,
        )
        # A started run's clocks need its timeline (a wait again after a preemption is start wait, not run
        # time): one query for the page, so a row says the same clocks as the run's record.
        started = [r["id"] for r in rows if r.get("started_at") is not None and "timeline" not in r]
        if started:
            events = timelines(self.s.store.engine, started)
            for r in rows:
                if r["id"] in events:
                    r["timeline"] = events[r["id"]]
        return rows, (rows[-1]["seq"] if len(rows) == limit else None)

    def events_since(self, user: str, last: int | None, limit: int) -> tuple[int, list[dict[str, Any]]]:
        """Status events of the user's projects after event `last` (None: from now), and where they start."""
        newest = self.s.store.last_event_id()
        # A position past the newest event (a reset database) would silently skip what comes next.
        start = newest if last is None else min(last, newest)
        return start, self.s.store.events_since(start, sorted(visible_projects(self.s.cfg, user)), limit=limit)

    def metrics(self, user: str, run_id: str, names: list[str] | None, max_points: int) -> dict[str, Any]:
        return metrics_of(self.s, user, run_id, names, max_points)

    def compare(self, user: str, run_ids: list[str], names: list[str] | None, max_points: int) -> dict[str, Any]:
        return compare(self.s, user, run_ids, names, max_points, self.gpu_usage)

    # ---- what explain needs -------------------------------------------------------
    def active_run(self, run_id: str) -> ActiveRun | None:
        """The in-memory record of an unfinished run (None once final)."""
        return self.s.active.get(run_id)

    def queue_state(self, name: str) -> QueueState | None:
        return self.s.queues.get(name)

    def device_holders(self) -> list[ActiveRun]:
        """Unfinished runs that hold devices (what a run waiting for GPUs waits on)."""
        return [a for a in self.s.active.values() if a.devices and a.status != Status.QUEUED]

    def briefs(self, run_ids: list[str]) -> dict[str, dict[str, Any]]:
        """id → {project, user, name, status, gpu, devices} of the given runs (no access check)."""
        return self.s.store.runs_brief(run_ids)

    def platform_admins(self) -> list[str]:
        return platform_admins(self.s.cfg)

    def project(self, name: str) -> ProjectConfig | None:
        return self.s.cfg.project(name)

    def now(self) -> float:
        return self.s.clock()
