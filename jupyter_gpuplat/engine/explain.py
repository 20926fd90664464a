"""Explain: one answer to "why is my run where it is?".

Which layer holds the run (`queue`, `executor`, `running`, `done`), the reason
code, a message with the numbers, its position in the queue, the runs holding
what it waits for, and who can act.
"""

from __future__ import annotations

from typing import Any

from ..core.admission import QueueState, Wait, wait_reason
from ..core.policy import admins_of
from ..core.status import Reason, Status
from .engine import ActiveRun, Engine

_LAYER = {
    Status.CREATED: "queue",
    Status.QUEUED: "queue",
    Status.DISPATCHED: "executor",
    Status.STARTING: "executor",
    Status.RUNNING: "running",
    Status.STOPPING: "running",
}


def explain(engine: Engine, user: str, run_id: str) -> dict[str, Any]:
    row = engine.get_visible(user, run_id)
    a = engine.active.get(run_id)
    base = {"run_id": run_id, "status": row["status"], "queue": row["queue"], "position": None, "blockers": []}
    if a is None:
        return {
            **base,
            "layer": "done",
            "reason": row["reason"],
            "message": row["message"],
            "who_can_act": [{"who": row["user"], "can": "submit it again"}],
        }
    q = engine.queues.get(a.queue)
    if a.status in (Status.CREATED, Status.QUEUED) and q is not None:
        return {**base, **_explain_waiting(engine, a, q)}
    last = row["timeline"][-1] if row["timeline"] else {"reason": row["reason"], "message": row["message"]}
    layer = _LAYER[a.status]
    if a.status == Status.RUNNING:
        started = row["started_at"] or row["dispatched_at"] or engine.clock()
        msg = f"running for {engine.clock() - started:.0f}s on devices {','.join(map(str, a.devices)) or 'none'}"
        return {
            **base,
            "layer": layer,
            "reason": "Running",
            "message": msg,
            "who_can_act": [{"who": row["user"], "can": "stop it"}],
        }
    details = last.get("details") or {}
    return {
        **base,
        "layer": details.get("layer", layer),
        "reason": last["reason"],
        "message": last["message"],
        "details": details,
        "who_can_act": details.get("who_can_act")
        or [{"who": ", ".join(engine.cfg.admins) or "platform admins", "can": "check the executor"}],
    }


def _explain_waiting(engine: Engine, a: ActiveRun, q: QueueState) -> dict[str, Any]:
    p = q.pending(a.id)
    assert p is not None
    w: Wait = wait_reason(q, p, engine.free_gpus)
    blocker_ids = list(w.blockers)
    if w.reason == Reason.NO_CAPACITY:
        blocker_ids = [r.id for r in engine.active.values() if r.devices and r.status not in (Status.QUEUED,)]
    briefs = engine.store.runs_brief(blocker_ids)
    visible = set(engine.visible_projects(a.user))
    blockers = []
    for rid in blocker_ids:
        b = briefs.get(rid)
        if b is None:
            continue
        same_team = b["project"] in visible
        # Other teams' runs are counted, not named: their ids and names are theirs.
        blockers.append(
            {
                "id": rid if same_team else None,
                "name": b["name"] if same_team else None,
                "user": b["user"] if same_team else None,
                "project": b["project"],
                "status": b["status"],
                "gpu": b["gpu"],
                "devices": b["devices"],
            }
        )
    lim = q.limits
    usage = {
        "runs": len(q.held),
        "concurrency": lim.concurrency,
        "gpu": q.used.gpu,
        "gpu_quota": lim.quota.gpu,
        "pending": q.pending_count,
        "free_gpus": engine.free_gpus,
    }
    return {
        "layer": "queue",
        "reason": str(w.reason),
        "message": w.message,
        "numbers": dict(w.numbers),
        "position": q.position(p),
        "pending_in_queue": q.pending_count,
        "blockers": blockers,
        "queue_usage": usage,
        "who_can_act": _who_can_act(engine, a, w, blockers),
    }


def _who_can_act(engine: Engine, a: ActiveRun, w: Wait, blockers: list[dict[str, Any]]) -> list[dict[str, str]]:
    admins = ", ".join(engine.cfg.admins) or "platform admins"
    owners = sorted({b["user"] for b in blockers if b["user"]})
    out: list[dict[str, str]] = []
    reason = str(w.reason)
    if reason == Reason.QUEUE_PAUSED:
        out.append({"who": admins, "can": f"resume queue {a.queue}"})
    elif reason in (Reason.QUEUE_CONCURRENCY, Reason.QUEUE_QUOTA):
        limit = "concurrency" if reason == Reason.QUEUE_CONCURRENCY else "quota"
        out.append({"who": admins, "can": f"raise the {limit} of queue {a.queue}"})
        if owners:
            out.append({"who": ", ".join(owners), "can": "stop their runs that hold the queue"})
    elif reason == Reason.USER_LIMIT:
        out.append({"who": a.user, "can": "stop one of your dispatched runs in this queue"})
        out.append({"who": admins, "can": f"raise max_per_user of queue {a.queue}"})
    elif reason == Reason.NO_CAPACITY:
        out.append({"who": admins, "can": "add GPUs or lower other queues' limits"})
        if owners:
            out.append({"who": ", ".join(owners), "can": "stop their runs that hold GPUs"})
    elif reason == Reason.BEHIND_HEAD:
        out.append({"who": ", ".join(owners) or a.user, "can": "stop the run at the head of the queue"})
    pr = engine.cfg.project(a.project)
    if pr is not None and reason != "Admissible":
        out.append({"who": a.user, "can": "wait, stop this run, or submit it to another allowed queue"})
        padmins = admins_of(pr)
        if padmins and reason in (Reason.QUEUE_CONCURRENCY, Reason.QUEUE_QUOTA):
            out.append({"who": ", ".join(padmins), "can": f"change project {pr.name}'s default queue"})
    return out
