"""One answer for a whole run: the Job's end or suspension, its pods' creation, or a summary of its workers."""

from __future__ import annotations

from collections.abc import Sequence

from ....core.reasons import CLUSTER_ADMINS, OWNER, PLATFORM_ADMINS, Reason
from .job import explain_job_end
from .model import Explanation, NodeView, Obj, _latest_event, condition
from .pod import DISRUPTIONS, explain_pod


def _created(p: Obj) -> str:
    return str((p.get("metadata") or {}).get("creationTimestamp") or "")


def explain_run(
    job: Obj | None,
    pods: Sequence[Obj],
    events: Sequence[Obj] = (),
    nodes: Sequence[NodeView] | None = None,
    gpu_resource: str = "nvidia.com/gpu",
    settle: bool = False,
) -> Explanation:
    """One answer for a run from its Job, its pods and their events."""
    if job is not None:
        end = explain_job_end(job, pods, events, settle)
        if end is not None:
            return end
        if (job.get("spec") or {}).get("suspend"):
            cond = condition(job, "Suspended")
            return Explanation(
                "starting",
                Reason.SUSPENDED,
                f"The Job is suspended{': ' + str(cond.get('message')) if cond and cond.get('message') else ''}.",
                ((PLATFORM_ADMINS, "resume it, or check the queue that holds it (e.g. Kueue)"),),
            )
    live = [
        p
        for p in pods
        if not (p.get("metadata") or {}).get("deletionTimestamp") and (p.get("status") or {}).get("phase") != "Failed"
    ]
    if not live:
        return _no_live_pod(job, [p for p in pods if p not in live], events, nodes, gpu_resource)
    answers = [
        explain_pod(p, events, job, nodes, gpu_resource)
        for p in sorted(live, key=lambda p: str((p.get("metadata") or {}).get("name") or ""))
    ]
    if len(answers) == 1:
        return answers[0]
    return summarize_workers(answers, placed=sum(1 for p in live if (p.get("spec") or {}).get("nodeName")))


def _no_live_pod(
    job: Obj | None, gone: Sequence[Obj], events: Sequence[Obj], nodes: Sequence[NodeView] | None, gpu_resource: str
) -> Explanation:
    fc = _latest_event(job, events, "FailedCreate") if job is not None else None
    if fc is not None:
        msg = str(fc.get("message"))
        quota = "exceeded quota" in msg
        return Explanation(
            "starting",
            Reason.EXCEEDED_QUOTA if quota else Reason.CREATE_FAILED,
            f"Kubernetes refuses to create the run's pod: {msg}",
            (
                (CLUSTER_ADMINS, "raise the namespace's ResourceQuota" if quota else "fix what the message names"),
                (PLATFORM_ADMINS, "check the executor's settings (priority classes, service account)"),
            ),
            raw=msg,
            kubernetes_reason="FailedCreate",
        )
    if gone:
        # A disrupted pod being replaced: say so rather than "pending".
        ex = explain_pod(sorted(gone, key=_created)[-1], events, job, nodes, gpu_resource)
        if ex.reason in DISRUPTIONS:
            return ex
    return Explanation(
        "starting", Reason.PENDING, "The Job is created; Kubernetes has not created its pod yet.", ((OWNER, "wait"),)
    )


def summarize_workers(answers: Sequence[Explanation], placed: int) -> Explanation:
    """A multi-pod run: how many workers are placed and running, and why the first waiting one waits."""
    running = [a for a in answers if a.reason == Reason.RUNNING]
    waiting = [a for a in answers if a.reason != Reason.RUNNING]
    if not waiting:
        return Explanation("running", Reason.RUNNING, f"All {len(answers)} workers are running.", ((OWNER, "stop it"),))
    first = waiting[0]
    counts = dict(first.counts)
    counts.update(workers=len(answers), placed=placed, running=len(running))
    return Explanation(
        "running" if running else first.status,
        first.reason,
        f"{placed} of {len(answers)} workers placed, {len(running)} running; {len(waiting)} waiting: {first.message}",
        first.who_can_act,
        raw=first.raw,
        counts=counts,
        kubernetes_reason=first.kubernetes_reason,
    )


def episode(status: str, ex: Explanation) -> tuple[str, ...]:
    """What makes an explanation a new timeline event: the same explanation twice is not one.

    A disruption is one episode per pod, however it is worded: first from the pod's condition,
    later from the scheduler's `Preempted` event about the deleted pod.
    """
    if ex.reason in DISRUPTIONS and ex.pod_uid:
        return (str(ex.reason), ex.pod_uid)
    return (status, str(ex.reason), ex.message)
