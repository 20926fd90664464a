"""The one reason registry: every code any module emits is in it, with its layer, meaning and who can act."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest
import yaml

import jupyter_gpuplat
from jupyter_gpuplat.core import reasons, status
from jupyter_gpuplat.core.admission import wait_reason
from jupyter_gpuplat.core.reasons import REGISTRY, ROLES, Layer, Reason, info, layer_of
from jupyter_gpuplat.executors.kubernetes.explain import NodeView, explain_pod, explain_run

FIXTURES = Path(__file__).parents[1] / "fixtures" / "k8s" / "explain_cases.yaml"
PACKAGE = Path(jupyter_gpuplat.__file__).parent

# The codes of earlier issues: a contract (timeline, explain, API, clients); never renamed.
CONTRACT = (
    "QueueConcurrency QueueQuota UserLimit SweepConcurrency QueuePaused NoCapacity BehindQueueHead "
    "WaitingForHigherPriority Submitted Admitted Started Reattached Completed Error Signaled StopRequested Stopped "
    "TimedOut Lost StartFailed InsufficientGPU GPUsFragmented NoNodeLargeEnough InsufficientResources "
    "UntoleratedTaint NodeSelectorMismatch NodesCordoned VolumeNotBound VolumeNodeConflict Unschedulable "
    "SchedulingGated Pending PodCreateFailed ExceededQuota ImagePullError ConfigError ContainerError "
    "VolumeMountFailed ContainerCreating CrashLoop OOMKilled GPUAllocationFailed Preempted Evicted Running "
    "Suspended Admissible"
).split()


def test_every_code_of_the_contract_is_in_the_registry_and_status_reexports_it() -> None:
    assert status.Reason is reasons.Reason
    assert status.DISPATCH_REASONS is reasons.DISPATCH_REASONS
    assert {str(r) for r in Reason} >= set(CONTRACT)


@pytest.mark.parametrize("code", list(Reason), ids=str)
def test_every_entry_has_layer_meaning_and_who(code: Reason) -> None:
    entry = REGISTRY[code]
    assert entry.layer in Layer
    assert entry.meaning and not entry.meaning.endswith(".")
    assert set(entry.who) <= ROLES
    assert info(str(code)) is entry and layer_of(str(code)) == entry.layer


def test_unknown_codes_have_no_entry() -> None:
    assert info("NoSuchReason") is None and layer_of("") is None


def _explained_codes() -> set[str]:
    cases: list[dict[str, Any]] = yaml.safe_load(FIXTURES.read_text())["cases"]
    codes = set()
    for case in cases:
        nodes = [NodeView(n["name"], n["gpus"], n["gpus_free"], n.get("labels", {})) for n in case.get("nodes", [])]
        for settle in (False, True):
            ex = explain_run(case["job"], case["pods"], case["events"], nodes or None, settle=settle)
            codes.add(ex.reason)
            assert isinstance(ex.reason, Reason), (case["name"], ex.reason)
        for pod in case["pods"]:
            codes.add(explain_pod(pod, case["events"], case["job"]).reason)
    return codes


def test_every_code_the_kubernetes_explainer_emits_over_the_recorded_cases_is_registered() -> None:
    codes = _explained_codes()
    assert all(isinstance(c, Reason) for c in codes), codes
    assert len(codes) >= 25  # the recorded cases reach most of the execution side
    assert all(layer_of(c) is not None for c in codes)


def test_every_dispatch_wait_is_registered_in_the_queue_layer() -> None:
    # wait_reason's codes are the dispatch side: each one a queue-layer entry.
    assert wait_reason.__module__ == "jupyter_gpuplat.core.admission"
    for code in reasons.DISPATCH_REASONS | {Reason.PRIORITY, Reason.ADMISSIBLE}:
        assert REGISTRY[code].layer == Layer.QUEUE


# Calls that carry a reason code, and the position of its argument: executors' observations, the
# engine's timeline writes (record, finish: after the run and the status), admission's waits.
_REASON_ARG = {"Observation": 2, "record": 2, "finish": 2, "_finish": 2, "Wait": 0}


def _literal_reasons(tree: ast.AST) -> list[tuple[int, str]]:
    """String literals passed as a reason (by position or as `reason=`) to the calls that carry one."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
        if name not in _REASON_ARG:
            continue
        at = _REASON_ARG[name]
        args = list(node.args[at : at + 1]) + [k.value for k in node.keywords if k.arg == "reason"]
        for arg in args:
            for sub in ast.walk(arg):
                if isinstance(sub, ast.Constant) and isinstance(sub.value, str):
                    found.append((sub.lineno, sub.value))
    return found


def test_no_module_reports_an_unregistered_code() -> None:
    unknown = []
    for path in [p for layer in ("core", "engine", "executors") for p in (PACKAGE / layer).rglob("*.py")]:
        for line, code in _literal_reasons(ast.parse(path.read_text())):
            if info(code) is None:
                unknown.append(f"{path.relative_to(PACKAGE)}:{line}: {code}")
    assert not unknown, unknown


def test_the_scan_finds_literals() -> None:
    tree = ast.parse(
        'Observation("r", "failed", "Bogus", "m")\nObservation("r", "failed", reason="Lost", message="")\n'
        'self.s.record(a, Status.RUNNING, "Nope", "m")\nWait("Admissible", "fits")'
    )
    assert sorted(c for _, c in _literal_reasons(tree)) == ["Admissible", "Bogus", "Lost", "Nope"]


def test_the_config_docs_list_every_lifecycle_and_final_reason_of_a_run() -> None:
    """docs/platform-config.md "Statuses and reasons" names what a plain run's timeline can show."""
    docs = (PACKAGE.parent / "docs" / "platform-config.md").read_text()
    section = docs.split("## Statuses and reasons", 1)[1].split("\n## ", 1)[0]
    lifecycle = "Submitted Admitted Started Running Reattached StopRequested".split()
    final = "Completed Error Signaled Stopped TimedOut StartFailed Lost".split()
    for code in lifecycle + final:
        assert code in {str(r) for r in Reason}, code
        assert f"`{code}`" in section, code
