"""Table-driven tests of the execution-side explanations over recorded objects (fixtures/k8s/)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from kube_emulator.scheduler import TAINT_WORDINGS, fit_message, taint_reason

from jupyter_gpuplat.executors.kubernetes.explain import NodeView, episode, explain_pod, explain_run, parse_fit_error

CASES = yaml.safe_load((Path(__file__).parents[2] / "fixtures" / "k8s" / "explain_cases.yaml").read_text())["cases"]


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_explanations_over_recorded_objects(case: dict[str, Any]) -> None:
    nodes = None
    if "nodes" in case:
        nodes = [
            NodeView(n["name"], n["gpus"], n["gpus_free"], n.get("labels", {}), tuple(n.get("taints", ())))
            for n in case["nodes"]
        ]
    ex = explain_run(case["job"], case["pods"], case["events"], nodes, settle=case.get("settle", False))
    want = case["expect"]
    assert (ex.status, ex.reason) == (want["status"], want["reason"]), ex
    if "message" in want:
        assert ex.message == want["message"]
    for part in want.get("contains", ()):
        assert part in ex.message, (part, ex.message)
    if "counts" in want:
        assert dict(ex.counts) == want["counts"]
    if "exit_code" in want:
        assert ex.exit_code == want["exit_code"]
    for part in want.get("raw_contains", ()):
        assert part in ex.raw
    details = ex.details()
    assert details["layer"] == "executor"
    if ex.reason not in ("Running", "Completed", "Pending"):
        assert details["who_can_act"], "every waiting or failure explanation says who can act"


def test_fixtures_cover_every_variant() -> None:
    reasons = {c["expect"]["reason"] for c in CASES}
    assert reasons >= {
        "InsufficientGPU", "GPUsFragmented", "NoNodeLargeEnough", "InsufficientResources", "UntoleratedTaint",
        "NodeSelectorMismatch", "NodesCordoned", "VolumeNotBound", "VolumeNodeConflict", "Unschedulable",
        "SchedulingGated", "ImagePullError", "ConfigError", "VolumeMountFailed", "CrashLoop", "OOMKilled",
        "GPUAllocationFailed", "Preempted", "Evicted", "Completed", "Error", "TimedOut", "ExceededQuota",
        "PodCreateFailed", "Suspended",
    }  # fmt: skip
    wordings = " ".join(str(c["pods"]) for c in CASES)
    for w in (
        "had taints that the pod didn't tolerate",
        "that the pod didn't tolerate.",
        "had untolerated taint {",
        "had untolerated taint(s)",
        "no new claims to deallocate",
        "No nodes are available that match",
    ):
        assert w in wordings, w


@pytest.mark.parametrize("wording", TAINT_WORDINGS)
def test_the_emulators_messages_parse(wording: str) -> None:
    """The emulator writes what the parser reads, in every taint wording it can produce."""
    from collections import Counter

    taint = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
    reasons = Counter({taint_reason(taint, wording): 2, "Insufficient nvidia.com/gpu": 10})
    post = Counter({"Preemption is not helpful for scheduling": 2, "No preemption victims found for incoming pod": 10})
    for dra in (False, True):
        msg = fit_message(12, "", reasons, post, dra)
        fit = parse_fit_error(msg)
        assert fit is not None and fit.nodes == 12
        cats = sorted((c.count, c.category) for c in fit.causes)
        assert cats == [(2, "taint"), (10, "insufficient")], msg
        assert fit.preemption.startswith(("preemption:", "no new claims"))


def test_unparseable_text_never_raises() -> None:
    for text in ("", "0/", "0/x nodes are available", "0/3 nodes are available:", "0/3 nodes are available: ., , 3"):
        ex = explain_run(
            None,
            [{"metadata": {"name": "p"}, "spec": {}, "status": {"conditions": [
                {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": text}]}}],
        )  # fmt: skip
        assert ex.status == "starting"


def test_one_disruption_is_one_episode_however_it_is_worded() -> None:
    # The pod's DisruptionTarget condition arrives first; the scheduler's Preempted event about the
    # (deleted) pod later: two wordings of one preemption, one timeline event.
    pod = {
        "metadata": {"name": "gpuplat-r-1-abcde", "uid": "pod-1"},
        "spec": {"nodeName": "gpu-1"},
        "status": {
            "phase": "Running",
            "conditions": [
                {
                    "type": "DisruptionTarget",
                    "status": "True",
                    "reason": "PreemptionByScheduler",
                    "message": "research/urgent: preempting to accommodate a higher priority pod",
                }
            ],
        },
    }
    event = {
        "involvedObject": {"uid": "pod-1", "name": "gpuplat-r-1-abcde"},
        "reason": "Preempted",
        "message": "Preempted by pod 1a2b-uid on node gpu-1",
        "lastTimestamp": "2026-01-01T00:00:01Z",
    }
    first, later = explain_pod(pod), explain_run(None, [pod], [event])
    assert first.reason == later.reason == "Preempted" and first.message != later.message
    assert episode("running", first) == episode("running", later)
    other = explain_pod({**pod, "metadata": {"name": "gpuplat-r-1-fghij", "uid": "pod-2"}})
    assert episode("running", other) != episode("running", first)  # the next preemption is a new episode
    waiting = explain_run(None, [], [])
    assert episode("starting", waiting) == ("starting", "Pending", waiting.message)
