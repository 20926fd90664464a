"""A Job controller: pods from the template, counts, backoff limit, deadline, pod failure policy.

Conditions and messages are the batch/v1 ones: `Complete` (with `SuccessCriteriaMet`
before it, as since 1.31), `FailureTarget` then `Failed` with reason
`BackoffLimitExceeded` ("Job has reached the specified backoff limit") or
`DeadlineExceeded` ("Job was active longer than specified deadline"). A pod failure
matched by a `podFailurePolicy` rule with action Ignore (e.g. on `DisruptionTarget`)
does not count against the backoff limit; one matched by a FailJob rule fails the Job
(reason `PodFailurePolicy`). With a pod failure policy (or `podReplacementPolicy:
Failed`) a terminating pod is replaced only once it has failed, as the real controller
does; without, at once. A pod whose PriorityClass does not exist is refused at creation
with a `FailedCreate` event on the Job.
"""

from __future__ import annotations

import calendar
import copy
import time
from typing import Any

from .clock import Clock
from .events import EventRecorder
from .store import JOB, POD, RESOURCES, ApiError, Store, now_rfc3339

PRIORITY_CLASS = RESOURCES[("scheduling.k8s.io", "priorityclasses")]
DEADLINE_MESSAGE = "Job was active longer than specified deadline"
BACKOFF_MESSAGE = "Job has reached the specified backoff limit"


def _finished(job: dict[str, Any]) -> bool:
    return any(
        c["type"] in ("Complete", "Failed") and c["status"] == "True"
        for c in (job.get("status") or {}).get("conditions") or ()
    )


def _has_condition(pod: dict[str, Any], type_: str) -> bool:
    return any(c["type"] == type_ and c["status"] == "True" for c in (pod.get("status") or {}).get("conditions") or ())


def _matching_rule(job: dict[str, Any], pod: dict[str, Any]) -> tuple[int, dict[str, Any], str] | None:
    """The first podFailurePolicy rule (index, rule, what matched) that matches this failed pod."""
    for i, rule in enumerate((job["spec"].get("podFailurePolicy") or {}).get("rules") or ()):
        for pc in rule.get("onPodConditions") or ():
            if _has_condition(pod, pc.get("type", "")):
                return i, rule, f"has condition {pc.get('type')}"
    return None


def _ignored(job: dict[str, Any], pod: dict[str, Any]) -> bool:
    """A podFailurePolicy rule with action Ignore matches this failed pod."""
    found = _matching_rule(job, pod)
    return found is not None and found[1].get("action") == "Ignore"


def _replaced_when_failed(job: dict[str, Any]) -> bool:
    spec = job["spec"]
    return spec.get("podReplacementPolicy") == "Failed" or bool(spec.get("podFailurePolicy"))


class JobController:
    """Reconciles Jobs with their pods; reads and writes through `store`, reports through `recorder`."""

    def __init__(self, store: Store, recorder: EventRecorder, clock: Clock) -> None:
        self.store = store
        self.recorder = recorder
        self.clock = clock
        self._deadlines: set[str] = set()  # job uids whose activeDeadlineSeconds timer is set
        self.counted: dict[str, dict[str, str]] = {}  # job uid → pod uid → succeeded|failed|ignored
        self.create_failed: set[str] = set()  # job uids waiting for a PriorityClass
        self.backoff_seconds = 0.05

    def _pods(self, job: dict[str, Any]) -> list[dict[str, Any]]:
        return [o for rt, o in self.store.dependents(job["metadata"]["uid"]) if rt is POD]

    def pod_gone(self, pod: dict[str, Any]) -> None:
        """A pod was removed: one that never reached a terminal phase counts as failed."""
        for ref in pod["metadata"].get("ownerReferences") or ():
            if ref.get("kind") != "Job":
                continue
            counted = self.counted.setdefault(ref["uid"], {})
            uid = pod["metadata"]["uid"]
            job = self._by_uid(ref["uid"], pod["metadata"]["namespace"], ref["name"])
            if uid not in counted and (pod.get("status") or {}).get("phase") not in ("Succeeded",):
                counted[uid] = "ignored" if job is None or _ignored(job, pod) else "failed"
                found = _matching_rule(job, pod) if job is not None else None
                if job is not None and not _finished(job) and found is not None and found[1].get("action") == "FailJob":
                    pm = pod["metadata"]
                    msg = f"Pod {pm['namespace']}/{pm['name']} {found[2]} matching FailJob rule at index {found[0]}"
                    failed = sum(1 for v in counted.values() if v == "failed")
                    done = sum(1 for v in counted.values() if v == "succeeded")
                    self._fail(job, done, failed, [p for p in self._pods(job) if p is not pod], "PodFailurePolicy", msg)
                    continue
            if job is not None:
                self.sync(job)

    def _by_uid(self, uid: str, ns: str, name: str) -> dict[str, Any] | None:
        job = self.store.find(JOB, ns, name)
        return job if job is not None and job["metadata"]["uid"] == uid else None

    def sync(self, job: dict[str, Any], changed: dict[str, Any] | None = None) -> None:
        """Bring the Job up to date; `changed`: the pod change that woke it (it may be gone from the store by now)."""
        meta = job["metadata"]
        if meta.get("deletionTimestamp") or _finished(job) or job["spec"].get("suspend"):
            return
        uid = meta["uid"]
        spec = job["spec"]
        counted = self.counted.setdefault(uid, {})
        pods = self._pods(job)
        if changed is not None and (changed.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            if changed["metadata"]["uid"] not in {p["metadata"]["uid"] for p in pods}:
                pods.append(changed)  # it ended, then went: count its end now, or it would be replaced
        for p in pods:
            puid = p["metadata"]["uid"]
            phase = (p.get("status") or {}).get("phase")
            if puid in counted:
                continue
            if phase == "Succeeded":
                counted[puid] = "succeeded"
            elif phase == "Failed":
                counted[puid] = "ignored" if _ignored(job, p) else "failed"
                found = _matching_rule(job, p)
                if found is not None and found[1].get("action") == "FailJob":
                    pm = p["metadata"]
                    msg = f"Pod {pm['namespace']}/{pm['name']} {found[2]} matching FailJob rule at index {found[0]}"
                    active = [q for q in pods if (q.get("status") or {}).get("phase") not in ("Succeeded", "Failed")]
                    done = sum(1 for v in counted.values() if v == "succeeded")
                    failed_n = sum(1 for v in counted.values() if v == "failed")
                    self._fail(job, done, failed_n, active, "PodFailurePolicy", msg)
                    return
        succeeded = sum(1 for v in counted.values() if v == "succeeded")
        failed = sum(1 for v in counted.values() if v == "failed")
        terminating_counts = _replaced_when_failed(job)  # a terminating pod is replaced only once it failed
        active = [
            p
            for p in pods
            if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
            and (terminating_counts or not p["metadata"].get("deletionTimestamp"))
        ]
        ready = sum(1 for p in active if _has_condition(p, "Ready"))
        completions = int(spec.get("completions") or 1)
        parallelism = int(spec.get("parallelism") if spec.get("parallelism") is not None else 1)
        backoff_limit = int(spec.get("backoffLimit") if spec.get("backoffLimit") is not None else 6)
        now = now_rfc3339()

        if succeeded >= completions:
            self._set_status(
                job,
                succeeded,
                failed,
                [],
                0,
                [
                    ("SuccessCriteriaMet", "CompletionsReached", "Reached expected number of succeeded pods"),
                    ("Complete", "CompletionsReached", "Reached expected number of succeeded pods"),
                ],
                completion=now,
            )
            return
        if failed > backoff_limit:
            self._fail(job, succeeded, failed, active, "BackoffLimitExceeded", BACKOFF_MESSAGE)
            return
        want = min(parallelism, completions - succeeded) - len(active)
        created = 0
        for _ in range(max(0, want)):
            if self._create_pod(job):
                created += 1
        self._set_status(job, succeeded, failed, active, ready, [], created=created)
        deadline = spec.get("activeDeadlineSeconds")
        if deadline:
            fresh = self.store.find(JOB, meta["namespace"], meta["name"])
            if fresh is not None and fresh["metadata"]["uid"] == uid:
                self._deadline(fresh, int(deadline))

    def _deadline(self, job: dict[str, Any], seconds: int) -> None:
        """Set the Job's activeDeadlineSeconds timer once, counted from its startTime."""
        uid = job["metadata"]["uid"]
        if uid in self._deadlines:
            return
        self._deadlines.add(uid)
        start = (job.get("status") or {}).get("startTime")
        elapsed = 0.0
        if start:
            started = calendar.timegm(time.strptime(start, "%Y-%m-%dT%H:%M:%SZ"))
            elapsed = max(0.0, self.clock.time_ns() / 1e9 - started)
        ns, name = job["metadata"]["namespace"], job["metadata"]["name"]
        self.clock.after(max(0.0, seconds - elapsed), lambda: self._deadline_passed(ns, name, uid))

    def _deadline_passed(self, ns: str, name: str, uid: str) -> None:
        job = self._by_uid(uid, ns, name)
        if job is None or _finished(job) or job["metadata"].get("deletionTimestamp"):
            return
        counted = self.counted.get(uid, {})
        pods = self._pods(job)
        active = [p for p in pods if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")]
        self._fail(
            job,
            sum(1 for v in counted.values() if v == "succeeded"),
            sum(1 for v in counted.values() if v == "failed"),
            active,
            "DeadlineExceeded",
            DEADLINE_MESSAGE,
        )

    def _fail(
        self, job: dict[str, Any], succeeded: int, failed: int, active: list[dict[str, Any]], reason: str, message: str
    ) -> None:
        self._set_status(
            job, succeeded, failed, [], 0, [("FailureTarget", reason, message), ("Failed", reason, message)]
        )
        for p in active:
            if not p["metadata"].get("deletionTimestamp"):
                self.store.delete(POD, p["metadata"]["namespace"], p["metadata"]["name"], "Background")
        self.recorder.event(job, "Warning", reason, message, "job-controller")

    def _set_status(
        self,
        job: dict[str, Any],
        succeeded: int,
        failed: int,
        active: list[dict[str, Any]],
        ready: int,
        conditions: list[tuple[str, str, str]],
        completion: str | None = None,
        created: int = 0,
    ) -> None:
        now = now_rfc3339()

        def change(j: dict[str, Any]) -> None:
            s = j.setdefault("status", {})
            s.setdefault("startTime", now)
            n_active = len(active) + created
            for key, value in (("active", n_active), ("ready", ready), ("succeeded", succeeded), ("failed", failed)):
                if value or key == "ready":
                    s[key] = value
                else:
                    s.pop(key, None)
            s["terminating"] = 0
            for type_, reason, message in conditions:
                s.setdefault("conditions", []).append(
                    {
                        "type": type_,
                        "status": "True",
                        "reason": reason,
                        "message": message,
                        "lastProbeTime": now,
                        "lastTransitionTime": now,
                    }
                )
            if completion:
                s["completionTime"] = completion

        meta = job["metadata"]
        self.store.update(JOB, meta["namespace"], meta["name"], change)

    def _create_pod(self, job: dict[str, Any]) -> bool:
        meta = job["metadata"]
        template = copy.deepcopy(job["spec"]["template"])
        pmeta = template.get("metadata") or {}
        labels = dict(pmeta.get("labels") or {})
        labels.update(
            {
                "batch.kubernetes.io/controller-uid": meta["uid"],
                "batch.kubernetes.io/job-name": meta["name"],
                "controller-uid": meta["uid"],
                "job-name": meta["name"],
            }
        )
        spec = template["spec"]
        pc_name = spec.get("priorityClassName")
        if pc_name:
            pc = self.store.find(PRIORITY_CLASS, "", pc_name)
            if pc is None:
                self.create_failed.add(meta["uid"])
                self.recorder.event(
                    job,
                    "Warning",
                    "FailedCreate",
                    f'Error creating: pods "{meta["name"]}-" is forbidden: '
                    f"no PriorityClass with name {pc_name} was found",
                    "job-controller",
                )
                return False
            spec["priority"] = int(pc.get("value", 0))
        self.create_failed.discard(meta["uid"])
        spec.setdefault("schedulerName", "default-scheduler")
        spec.setdefault("restartPolicy", "Never")
        for c in spec.get("containers") or []:
            c.setdefault("terminationMessagePath", "/dev/termination-log")
            c.setdefault("imagePullPolicy", "IfNotPresent")
        pod = {
            "metadata": {
                "generateName": f"{meta['name']}-",
                "labels": labels,
                "annotations": dict(pmeta.get("annotations") or {}),
                "ownerReferences": [
                    {
                        "apiVersion": "batch/v1",
                        "kind": "Job",
                        "name": meta["name"],
                        "uid": meta["uid"],
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
            },
            "spec": spec,
            "status": {"phase": "Pending", "qosClass": "Burstable"},
        }
        try:
            created = self.store.create(POD, meta["namespace"], pod)
        except ApiError as exc:
            self.recorder.event(job, "Warning", "FailedCreate", f"Error creating: {exc.message}", "job-controller")
            return False
        self.recorder.event(
            job, "Normal", "SuccessfulCreate", f"Created pod: {created['metadata']['name']}", "job-controller"
        )
        return True

    def retry_failed_creates(self) -> None:
        for job in list(self.store.iter(JOB)):
            if job["metadata"]["uid"] in self.create_failed:
                self.sync(job)
