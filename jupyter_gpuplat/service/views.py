"""Wire views of domain records: what the API returns for runs and queues."""

from __future__ import annotations

from typing import Any

from ..core.admission import FreeByFlavor, QueueState, shared_message, wait_reason
from ..core.clocks import run_clocks
from ..core.idle import IdleRule
from ..core.resources import Resources
from ..core.status import FINAL, phase_of

_TIMES = ("created_at", "queued_at", "dispatched_at", "started_at", "finished_at", "updated_at")


def clocks(row: dict[str, Any], now: float) -> dict[str, Any]:
    """Separate clocks: waiting in our queue, waiting to start (again, after a preemption), running;
    and which one is ticking. Computed here once: clients render them (and tick the ticking one)."""
    return run_clocks(row, now)


def session_view(row: dict[str, Any], lease: dict[str, Any] | None, now: float) -> dict[str, Any] | None:
    """A session's kernel and idle clock: live from the engine while it runs, else from its status."""
    if row["kind"] != "session":
        return None
    notebook = ((row.get("resolved") or {}).get("session") or {}).get("notebook")
    if lease is not None:
        since = lease.get("idle_since")
        idle_for = None if since is None else max(0.0, now - since)
        return {"notebook": notebook, **lease, "idle_for_seconds": idle_for}
    rule = IdleRule.of((row.get("resolved") or {}).get("termination"))
    kernel = "ended" if row["status"] in FINAL else "waiting"
    return {
        "notebook": notebook,
        "kernel": kernel,
        "kernel_id": None,
        "busy": False,
        "idle_seconds": rule.idle_seconds,
        "idle_deadline": None,
        "last_activity": None,
        "idle_for_seconds": None,
        "idle_by": rule.idle_by,
        "idle_judged_by": rule.idle_by,
        "gpu_idle_threshold": rule.gpu_threshold,
        "cull_busy_kernel": rule.cull_busy_kernel,
        "idle_since": None,
        "gpu_last_busy": None,
        "gpu_not_measured": None,
        "idle_reason": None,
    }


def presets_applied(row: dict[str, Any], picked: list[str]) -> list[str]:
    """The presets that made the run's spec: the project's defaults, then those picked (policy.resolve
    records them in the spec); a run recorded before that shows the picked ones."""
    applied = (row.get("resolved") or {}).get("presets")
    return list(applied) if isinstance(applied, list) else list(picked)


def run_summary(
    row: dict[str, Any], now: float, lease: dict[str, Any] | None = None, waiting: dict[str, str] | None = None
) -> dict[str, Any]:
    resolved = row.get("resolved") or {}
    handle = row.get("handle") or {}
    out = {
        "id": row["id"],
        "seq": row["seq"],
        "project": row["project"],
        "user": row["user"],
        "name": row["name"],
        "kind": row["kind"],
        "queue": row["queue"],
        "status": row["status"],
        "phase": phase_of(row["status"]).value,
        "reason": row["reason"],
        "message": row["message"],
        "resources": Resources(row["gpu"], row["cpu_milli"], row["memory_bytes"]).to_dict(),
        "devices": row["devices"] or [],
        "flavor": row.get("flavor"),
        # list rows carry `presets`; full rows have the request it comes from
        "presets": (row["presets"] if "presets" in row else (row.get("request") or {}).get("presets")) or [],
        "waiting": waiting,
        "exit_code": row["exit_code"],
        "command": resolved.get("command"),
        "clocks": clocks(row, now),
        "pid": handle.get("pid"),
        "code": row.get("code"),
        "working_dir": row.get("working_dir"),
        "session": session_view(row, lease, now),
        "parent": row.get("parent"),
        "params": resolved.get("params") if row.get("parent") else None,
    }
    out["presets_applied"] = presets_applied(row, out["presets"])
    for k in _TIMES:
        out[k] = row[k]
    return out


def with_sweep(out: dict[str, Any], sweep: dict[str, Any] | None) -> dict[str, Any]:
    """A sweep's record adds its children's counts, its gate, its matrix and its best child."""
    if sweep is not None:
        ended = sum(n for status, n in sweep["by_status"].items() if status in FINAL)
        out["children"] = {"total": sweep["total"], "by_status": sweep["by_status"], "ended": ended}
        out.update(concurrency=sweep["concurrency"], paused=sweep["paused"], matrix=sweep["matrix"], best=sweep["best"])
    return out


def run_detail(
    row: dict[str, Any], now: float, lease: dict[str, Any] | None = None, waiting: dict[str, str] | None = None
) -> dict[str, Any]:
    out = run_summary(row, now, lease, waiting)
    out["presets"] = (row.get("request") or {}).get("presets", [])
    out["presets_applied"] = presets_applied(row, out["presets"])
    out["request"] = row.get("request")
    out["resolved"] = row["resolved"]
    out["provenance"] = row["provenance"]
    out["timeline"] = [{**e, "phase": phase_of(e["status"]).value} for e in row.get("timeline", [])]
    out["stop_requested_by"] = row.get("stop_requested_by")
    return out


def queue_view(
    q: QueueState,
    free_gpus: int | None,
    pending: tuple[list[dict[str, Any]], int] = ([], 0),
    free_by_flavor: FreeByFlavor = None,
) -> dict[str, Any]:
    """A queue; `pending` is (the caller's visible pending runs with positions, how many others')."""
    lim = q.limits
    head = q.head()
    wait = wait_reason(q, head, free_gpus, free_by_flavor) if head is not None else None
    flavors = [
        {
            "name": f.name,
            "quota": f.quota.to_dict(),
            "usage": q.used_by_flavor.get(f.name, Resources()).to_dict(),
            "free_gpus": None if free_by_flavor is None else free_by_flavor.get(f.name, 0),
        }
        for f in lim.flavors
    ]
    return {
        "flavors": flavors,
        "name": lim.name,
        "priority": lim.priority,
        "concurrency": lim.concurrency,
        "quota": lim.quota.to_dict(),
        "max_per_user": lim.max_per_user,
        "ordering": lim.ordering,
        "paused": lim.paused,
        "usage": {"runs": len(q.held), **q.used.to_dict()},
        "pending": q.pending_count,
        "pending_runs": pending[0],
        "pending_hidden": pending[1],
        "head_wait": None
        if wait is None
        else {"reason": str(wait.reason), "message": shared_message(wait, q.limits.name)},
    }
