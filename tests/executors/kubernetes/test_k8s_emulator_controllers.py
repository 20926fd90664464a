"""The emulator's controllers built alone from their collaborators (a store, an event recorder, a
clock), with no cluster, thread or HTTP server: the narrow constructors let a test drive a deadline
with a clock it moves by hand instead of waiting for one (Kueue's scheduler with `WithClock`)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from kube_emulator.events import EventRecorder
from kube_emulator.jobs import DEADLINE_MESSAGE, JobController
from kube_emulator.scheduling import Scheduler
from kube_emulator.store import EVENT, JOB, NODE, POD, RESOURCES, Store

NAMESPACE = RESOURCES[("", "namespaces")]


class ManualClock:
    """A `Clock` that moves only when the test says: timers run in `advance`, in due order."""

    def __init__(self) -> None:
        self.now_ns = time.time_ns()  # the store stamps objects with the wall clock; start there
        self.timers: list[tuple[int, Callable[[], None]]] = []

    def after(self, seconds: float, action: Callable[[], None]) -> None:
        self.timers.append((self.now_ns + int(seconds * 1e9), action))

    def time_ns(self) -> int:
        return self.now_ns

    def advance(self, seconds: float) -> None:
        self.now_ns += int(seconds * 1e9)
        due = sorted((t for t in self.timers if t[0] <= self.now_ns), key=lambda t: t[0])
        self.timers = [t for t in self.timers if t[0] > self.now_ns]
        for _, action in due:
            action()


def _store() -> Store:
    store = Store()
    store.create(NAMESPACE, "", {"metadata": {"name": "ns"}})
    return store


def _reasons(store: Store, obj: dict[str, Any]) -> list[str]:
    uid = obj["metadata"]["uid"]
    return [e["reason"] for e in store.iter(EVENT) if e["involvedObject"]["uid"] == uid]


def test_the_job_controller_fails_a_job_at_its_deadline_on_the_clock_it_is_given() -> None:
    store, clock = _store(), ManualClock()
    jobs = JobController(store, EventRecorder(store), clock)
    pod_spec = {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox:1.36"}]}
    spec = {"activeDeadlineSeconds": 30, "template": {"spec": pod_spec}}
    store.create(JOB, "ns", {"metadata": {"name": "train"}, "spec": spec})
    jobs.sync(store.get(JOB, "ns", "train"))
    assert len(store.select(POD, "ns")[0]) == 1

    clock.advance(29)
    job = store.get(JOB, "ns", "train")
    assert not (job["status"].get("conditions") or []), job["status"]

    clock.advance(2)
    job = store.get(JOB, "ns", "train")
    failed = [c for c in job["status"]["conditions"] if c["type"] == "Failed"]
    assert failed and failed[0]["reason"] == "DeadlineExceeded" and failed[0]["message"] == DEADLINE_MESSAGE
    assert store.select(POD, "ns")[0] == []  # its pod deleted
    assert _reasons(store, job) == ["SuccessfulCreate", "DeadlineExceeded"]


def test_the_scheduler_binds_a_pending_pod_and_records_it() -> None:
    store = _store()
    scheduler = Scheduler(store, EventRecorder(store), taint_wording="v1.34", dra_message=False)
    node_status = {"allocatable": {"pods": "110", "nvidia.com/gpu": "1"}}
    store.create(NODE, "", {"metadata": {"name": "gpu-1"}, "status": node_status})
    gpu = {"limits": {"nvidia.com/gpu": "1"}, "requests": {"nvidia.com/gpu": "1"}}
    for name in ("first", "second"):
        pod = store.create(
            POD, "ns", {"metadata": {"name": name}, "spec": {"containers": [{"name": "c", "resources": gpu}]}}
        )
        scheduler.pod_changed(pod)

    scheduler.schedule_pending()

    first, second = store.get(POD, "ns", "first"), store.get(POD, "ns", "second")
    assert first["spec"]["nodeName"] == "gpu-1" and "nodeName" not in second["spec"]
    assert _reasons(store, first) == ["Scheduled"] and _reasons(store, second) == ["FailedScheduling"]
    assert scheduler.node_used["gpu-1"]["nvidia.com/gpu"] == 1

    scheduler.pod_gone(first["metadata"]["uid"])  # its GPU freed: the unschedulable pod is tried again
    scheduler.schedule_pending()
    assert store.get(POD, "ns", "second")["spec"]["nodeName"] == "gpu-1"
