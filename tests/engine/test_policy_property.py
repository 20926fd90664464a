"""Property: preview's verdict is submit's outcome, for generated requests on the example platform.

A request preview allows is accepted by submit; a request it refuses makes submit raise the
first violation preview lists; an access error (unknown project, not a member) is raised by
both alike. Users of every role, queues and presets allowed or not, locked fields, GPU counts
up to more than the platform has.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jupyter_gpuplat.core.config import load_config_text
from jupyter_gpuplat.core.errors import GpuPlatError
from jupyter_gpuplat.core.request import RunRequest
from jupyter_gpuplat.engine.engine import Engine
from jupyter_gpuplat.executors.fake import FakeClock, FakeExecutor
from jupyter_gpuplat.store import Store

EXAMPLE = Path(__file__).resolve().parents[2] / "jupyter_gpuplat" / "platform.example.yaml"
USERS = ["ops", "alice", "bob", "carol", "dave", "erin", "frank", "mallory"]
PROJECTS = ["team-a", "team-b", "team-z"]
QUEUES = [None, "team-a-train", "team-b-train", "interactive", "no-such-queue"]
PRESETS = ["single-gpu", "multi-gpu", "notebook", "no-such-preset"]


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    """One engine over a real store, config applied, no loop: submitted runs stay queued."""
    tmp = tmp_path_factory.mktemp("prop")
    store = Store(f"sqlite:///{tmp / 'gpuplat.db'}")
    eng = Engine(store, FakeExecutor(gpus=4, clock=FakeClock()), artifacts_root=str(tmp / "a"), clock=FakeClock())
    eng.apply_config(load_config_text(EXAMPLE.read_text()), source="test", by="test")
    yield eng
    store.close()


@st.composite
def requests(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    body: dict[str, Any] = {"project": draw(st.sampled_from(PROJECTS)), "command": ["python", "train.py"]}
    queue = draw(st.sampled_from(QUEUES))
    if queue is not None:
        body["queue"] = queue
    body["presets"] = draw(st.lists(st.sampled_from(PRESETS), max_size=2, unique=True))
    resources: dict[str, Any] = {}
    gpu = draw(st.sampled_from([None, 0, 1, 2, 3, 5]))
    if gpu is not None:
        resources["gpu"] = gpu
    memory = draw(st.sampled_from([None, "1Gi", "100Gi", "500Gi"]))
    if memory is not None:
        resources["memory"] = memory
    if resources:
        body["resources"] = resources
    if draw(st.booleans()):
        body["termination"] = {"timeout_seconds": draw(st.sampled_from([60, 3600, 999_999]))}
    return draw(st.sampled_from(USERS)), body


@settings(max_examples=150, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(requests())
def test_preview_verdict_is_submit_outcome(engine: Engine, case: tuple[str, dict[str, Any]]) -> None:
    user, body = case
    req = RunRequest.model_validate(body)
    try:
        verdict = engine.preview(user, req)["verdict"]
    except GpuPlatError as access:  # who may not submit here at all: both refuse alike
        with pytest.raises(type(access)) as refused:
            engine.submit(user, req)
        assert refused.value.to_dict() == access.to_dict()
        return
    if verdict["allowed"]:
        row = engine.submit(user, req)
        assert row["status"] == "queued"
        return
    assert verdict["violations"], verdict
    with pytest.raises(GpuPlatError) as refused:
        engine.submit(user, req)
    # The refusal is the preview's verdict, judged once: the first violation's code and fields,
    # every violation's words, and the same rules and alternatives.
    body, first = refused.value.to_dict(), verdict["violations"][0]
    assert body["message"] == "; ".join(dict.fromkeys(v["message"] for v in verdict["violations"]))
    assert (body["rules"], body["alternatives"]) == (verdict["rules"], verdict["alternatives"])
    own = {k: v for k, v in body.items() if k not in ("message", "hint", "rules", "alternatives")}
    assert own == {k: v for k, v in first.items() if k not in ("message", "hint")}


def test_the_generator_reaches_every_outcome(engine: Engine) -> None:
    """The property is not vacuous: allowed, refused by policy, refused for capacity, no access."""
    seen: set[str] = set()

    @settings(max_examples=150, deadline=None, database=None, derandomize=True)
    @given(requests())
    def collect(case: tuple[str, dict[str, Any]]) -> None:
        user, body = case
        try:
            v = engine.preview(user, RunRequest.model_validate(body))["verdict"]
        except GpuPlatError as exc:
            seen.add(f"raised:{exc.status}")
            return
        seen.update(["allowed"] if v["allowed"] else [x["code"] for x in v["violations"]])

    collect()
    assert {"allowed", "raised:404", "raised:403", "NoCapacity", "FieldLocked", "QueueNotAllowed"} <= seen, seen
