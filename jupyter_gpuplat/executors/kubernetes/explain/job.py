"""How a run's Job ended: completed, timed out, or failed (with the failed pod's exit)."""

from __future__ import annotations

from collections.abc import Sequence

from ....core.reasons import OWNER, Reason
from .model import Explanation, Obj, _container_status, condition
from .pod import explain_pod, terminated_text


def _attempts(job: Obj | None, pods: Sequence[Obj]) -> int:
    status = (job or {}).get("status") or {}
    return max(int(status.get("failed") or 0) + int(status.get("succeeded") or 0), len(pods), 1)


def _last_failed_pod(pods: Sequence[Obj]) -> Obj | None:
    failed = [p for p in pods if (p.get("status") or {}).get("phase") == "Failed"]
    return (
        sorted(failed, key=lambda p: str((p.get("metadata") or {}).get("creationTimestamp") or ""))[-1]
        if failed
        else None
    )


def _finishing(what: str) -> Explanation:
    return Explanation(
        "running", Reason.FINISHING, f"The Job has {what}; waiting for its pod's final state.", ((OWNER, "wait"),)
    )


def explain_job_end(
    job: Obj, pods: Sequence[Obj], events: Sequence[Obj] = (), settle: bool = False
) -> Explanation | None:
    """The final answer when the Job has ended (Complete or Failed), else None.

    `settle`: answer even when the failed pod's final state has not been seen (else: FINISHING).
    """
    done = condition(job, "Complete") or condition(job, "SuccessCriteriaMet")
    failed = condition(job, "Failed")
    if done is not None and failed is None:
        ok = [p for p in pods if (p.get("status") or {}).get("phase") == "Succeeded"]
        if not ok and not settle:
            return _finishing("completed")
        where = f" on node {(ok[-1].get('spec') or {}).get('nodeName')}" if ok else ""
        return Explanation(
            "succeeded", Reason.COMPLETED, f"Completed: the container exited with code 0{where}.", exit_code=0
        )
    if failed is None:
        return None
    return _failed(job, failed, pods, events, settle)


def _failed(job: Obj, failed: Obj, pods: Sequence[Obj], events: Sequence[Obj], settle: bool) -> Explanation:
    k8s = str(failed.get("reason") or "")
    text = str(failed.get("message") or "")
    spec = job.get("spec") or {}
    last = _last_failed_pod(pods)
    term = (_container_status(last).get("state") or {}).get("terminated") or {} if last else {}
    if k8s == "DeadlineExceeded":
        return Explanation(
            "failed",
            Reason.TIMED_OUT,
            f"Stopped by Kubernetes: it exceeded its time limit of {spec.get('activeDeadlineSeconds')} s "
            "(activeDeadlineSeconds; the limit counts from when the Job started, waiting included).",
            ((OWNER, "raise termination.timeout_seconds, or make the run shorter"),),
            raw=text,
            exit_code=term.get("exitCode"),
            kubernetes_reason=k8s,
        )
    if last is None and int(((job.get("status") or {}).get("failed")) or 0) > 0 and not settle:
        # The Job counts a failed pod that the pod watch has not delivered yet (separate streams):
        # wait for it a little, so the answer names the exit code.
        return _finishing("ended")
    if last is not None and term:
        code, phrase = terminated_text(term, last)
        attempts = f"attempt {_attempts(job, pods)} of {int(spec.get('backoffLimit') or 0) + 1}"
        return Explanation(
            "failed",
            code if code != Reason.COMPLETED else Reason.ERROR,
            f"Failed: the container {phrase} ({attempts}; {text}).",
            ((OWNER, "ask for more memory" if code == Reason.OOM_KILLED else "read the logs and fix the run"),),
            raw=text,
            exit_code=term.get("exitCode"),
            kubernetes_reason=k8s,
        )
    if last is not None:
        pod_ex = explain_pod(last, events, job)
        return Explanation(
            "failed",
            pod_ex.reason,
            f"Failed: {pod_ex.message} ({text})",
            pod_ex.who_can_act,
            raw=text,
            kubernetes_reason=k8s,
        )
    return Explanation(
        "failed",
        Reason.ERROR,
        f"Failed: {text or k8s}",
        ((OWNER, "read the logs and fix the run"),),
        raw=text,
        kubernetes_reason=k8s,
    )
