"""Explain: one answer to "why is my run where it is?".

Which layer holds the run (`queue`, `executor`, `running`, `done`), the reason
code, a message with the numbers, its position in the queue, the runs holding
what it waits for, and who can act. Read from the read model only (`reads.py`).

A running run is not always running: after a preemption or an eviction its
replacement waits for the executor again. The timeline's last event says so
(its reason's layer in the registry), and the answer then is the executor's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..core.admission import QueueState, Wait, flavor_waits, wait_reason
from ..core.clocks import clocks
from ..core.explain_text import number_lines, wait_line
from ..core.policy import admins_of
from ..core.reasons import LAYER_TEXT, PLATFORM_ADMINS, Layer, Reason, layer_of
from ..core.status import Status
from .reads import ReadModel
from .state import ActiveRun

if TYPE_CHECKING:
    from .engine import Engine

_LAYER = {
    Status.CREATED: Layer.QUEUE,
    Status.QUEUED: Layer.QUEUE,
    Status.DISPATCHED: Layer.EXECUTOR,
    Status.STARTING: Layer.EXECUTOR,
    Status.RUNNING: Layer.RUNNING,
    Status.STOPPING: Layer.RUNNING,
}


def explain(source: Engine | ReadModel, user: str, run_id: str) -> dict[str, Any]:
    """The answer, with its layer's meaning and its numbers in words: clients render these, none words them."""
    out = _explain(source, user, run_id)
    reads = source if isinstance(source, ReadModel) else source.reads
    if out["layer"] in (Layer.QUEUE.value, Layer.EXECUTOR.value):
        out["eta"], out["eta_unknown"] = reads.eta({"id": run_id})
    layer = str(out["layer"])
    out["layer_text"] = LAYER_TEXT.get(layer, layer)
    out["number_lines"] = number_lines(out)
    out["wait_line"] = wait_line(out)
    return out


def _explain(source: Engine | ReadModel, user: str, run_id: str) -> dict[str, Any]:
    reads = source if isinstance(source, ReadModel) else source.reads
    row = reads.get_visible(user, run_id)
    a = reads.active_run(run_id)
    base = {"run_id": run_id, "status": row["status"], "queue": row["queue"], "position": None, "blockers": []}
    if a is None:
        return {
            **base,
            "layer": Layer.DONE.value,
            "reason": row["reason"],
            "message": row["message"],
            "who_can_act": [{"who": row["user"], "can": "submit it again", "action": "resubmit"}],
        }
    q = reads.queue_state(a.queue)
    if a.status in (Status.CREATED, Status.QUEUED) and q is not None:
        if q.pending(a.id) is not None:
            return {**base, **_explain_waiting(reads, user, a, q)}
        # a sweep's parent holds no place in the queue: its children wait, each explained on its own
        return {
            **base,
            "layer": Layer.QUEUE.value,
            "reason": row["reason"],
            "message": row["message"],
            "pending_in_queue": q.pending_count,
            "who_can_act": [{"who": row["user"], "can": "wait, or stop it"}],
        }
    last = row["timeline"][-1] if row["timeline"] else {"reason": row["reason"], "message": row["message"]}
    if a.status == Status.RUNNING and layer_of(str(last["reason"])) not in (Layer.EXECUTOR, Layer.QUEUE):
        # The run clock (core/clocks): a wait again after a preemption is start wait, not running time.
        ran = clocks(row, row["timeline"], reads.now())["run_seconds"] or 0.0
        msg = f"running for {ran:.0f}s on devices {','.join(map(str, a.devices)) or 'none'}"
        return {
            **base,
            "layer": Layer.RUNNING.value,
            "reason": Reason.RUNNING.value,
            "message": msg,
            "who_can_act": [{"who": row["user"], "can": "stop it"}],
        }
    # Held by the executor: before the start, or again after it (a replacement pod waiting).
    details = last.get("details") or {}
    layer = layer_of(str(last["reason"])) if a.status == Status.RUNNING else _LAYER[a.status]
    return {
        **base,
        "layer": details.get("layer", (layer or _LAYER[a.status]).value),
        "reason": last["reason"],
        "message": last["message"],
        "details": details,
        "who_can_act": details.get("who_can_act")
        or [{"who": ", ".join(reads.platform_admins()) or PLATFORM_ADMINS, "can": "check the executor"}],
    }


def _explain_waiting(reads: ReadModel, user: str, a: ActiveRun, q: QueueState) -> dict[str, Any]:
    p = q.pending(a.id)
    assert p is not None
    w: Wait = wait_reason(q, p, reads.free_gpus, reads.free_by_flavor)
    blockers = _blockers(reads, user, w)
    lim = q.limits
    usage = {
        "runs": len(q.held),
        "concurrency": lim.concurrency,
        "gpu": q.used.gpu,
        "gpu_quota": lim.quota.gpu,
        "pending": q.pending_count,
        "free_gpus": reads.free_gpus,  # None: the executor (Kubernetes) has no such number
    }
    out = {
        "layer": Layer.QUEUE.value,
        "reason": str(w.reason),
        "message": w.message,
        "numbers": dict(w.numbers),
        "position": q.position(p),
        "pending_in_queue": q.pending_count,
        "blockers": blockers,
        "queue_usage": usage,
        "who_can_act": _who_can_act(reads, a, w, blockers),
    }
    if lim.flavors:
        out["flavors"] = [
            {
                "name": name,
                "reason": str(fw.reason),
                "message": fw.message,
                "numbers": dict(fw.numbers),
                "blockers": _blockers(reads, user, fw, name),
            }
            for name, fw in flavor_waits(q, p, reads.free_gpus, reads.free_by_flavor)
        ]
    return out


def _blockers(reads: ReadModel, user: str, w: Wait, flavor: str | None = None) -> list[dict[str, Any]]:
    """The runs holding what `w` waits for, named only where the caller may see them."""
    blocker_ids = list(w.blockers)
    if w.reason == Reason.NO_CAPACITY:
        typed = reads.device_flavor if flavor is not None else {}
        blocker_ids = [
            r.id for r in reads.device_holders() if flavor is None or any(typed.get(d) == flavor for d in r.devices)
        ]
    briefs = reads.briefs(blocker_ids)
    # Named only for the projects the *caller* may see (not the run owner's: an admin's run
    # explained to a member must not name other teams' runs).
    visible = set(reads.visible_projects(user))
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
    return blockers


def _who_can_act(reads: ReadModel, a: ActiveRun, w: Wait, blockers: list[dict[str, Any]]) -> list[dict[str, str]]:
    admins = ", ".join(reads.platform_admins()) or PLATFORM_ADMINS
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
        # The head's owner, when the caller may see that run; else only a platform admin can stop it.
        out.append({"who": ", ".join(owners) or admins, "can": "stop the run at the head of the queue"})
    pr = reads.project(a.project)
    if pr is not None and reason != Reason.ADMISSIBLE:
        out.append({"who": a.user, "can": "wait, stop this run, or submit it to another allowed queue"})
        padmins = admins_of(pr)
        if padmins and reason in (Reason.QUEUE_CONCURRENCY, Reason.QUEUE_QUOTA):
            out.append({"who": ", ".join(padmins), "can": f"change project {pr.name}'s default queue"})
    return out
