"""Roles and `resolve`: layer order, provenance, and every policy rule with its message."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from jupyter_gpuplat.core.config import PlatformConfig, load_config_text, parse_config
from jupyter_gpuplat.core.errors import Forbidden, GpuPlatError, NotFound, Unprocessable
from jupyter_gpuplat.core.policy import (
    Resolution,
    admins_of,
    allowed_presets,
    allowed_queues,
    can_see,
    can_stop,
    has_role,
    is_platform_admin,
    listable_presets,
    listable_queues,
    listable_run_projects,
    require_can_stop,
    require_platform_admin,
    require_project,
    require_project_write,
    require_visible_run,
    resolve,
    role_in,
    run_actions,
    visible_projects,
)
from jupyter_gpuplat.core.request import RunRequest
from jupyter_gpuplat.core.resources import Resources

EXAMPLE = Path(__file__).resolve().parents[2] / "jupyter_gpuplat" / "platform.example.yaml"
GI = 2**30


@pytest.fixture(scope="module")
def cfg() -> PlatformConfig:
    return load_config_text(EXAMPLE.read_text())


def run(cfg: PlatformConfig, user: str, **req: Any) -> Resolution:
    req.setdefault("project", "team-a")
    req.setdefault("command", ["python", "train.py"])
    return resolve(cfg, user, RunRequest(**req))


def codes(res: Resolution) -> list[str]:
    return [v.code for v in res.violations]


# ---- roles ------------------------------------------------------------------
ROLE_CASES = [
    # user, project, role
    ("alice", "team-a", "admin"),
    ("bob", "team-a", "member"),
    ("carol", "team-a", "viewer"),
    ("alice", "team-b", None),
    ("dave", "team-b", "admin"),
    ("dave", "team-a", None),
    ("mallory", "team-a", None),
    ("ops", "team-a", "admin"),  # platform admin acts as admin everywhere
    ("ops", "team-b", "admin"),
    ("bob", "nope", None),
]


@pytest.mark.parametrize(("user", "project", "role"), ROLE_CASES)
def test_role_in(cfg: PlatformConfig, user: str, project: str, role: str | None) -> None:
    assert role_in(cfg, user, project) == role


@pytest.mark.parametrize(
    ("user", "project", "need", "ok"),
    [
        ("carol", "team-a", "viewer", True),
        ("carol", "team-a", "member", False),
        ("bob", "team-a", "member", True),
        ("bob", "team-a", "admin", False),
        ("alice", "team-a", "admin", True),
        ("alice", "team-b", "viewer", False),
        ("ops", "team-b", "admin", True),
        ("mallory", "team-a", "viewer", False),
    ],
)
def test_has_role(cfg: PlatformConfig, user: str, project: str, need: Any, ok: bool) -> None:
    assert has_role(cfg, user, project, need) is ok


def test_platform_admin_sees_every_project(cfg: PlatformConfig) -> None:
    assert is_platform_admin(cfg, "ops")
    assert not is_platform_admin(cfg, "alice")
    assert visible_projects(cfg, "ops") == ["team-a", "team-b"]
    assert visible_projects(cfg, "carol") == ["team-a"]
    assert visible_projects(cfg, "mallory") == []
    assert require_project(cfg, "ops", "team-b", "admin").name == "team-b"


@pytest.mark.parametrize(
    ("user", "project", "owner", "ok"),
    [
        ("bob", "team-a", "bob", True),  # a member stops their own run
        ("bob", "team-a", "alice", False),  # but not someone else's
        ("carol", "team-a", "carol", False),  # a viewer stops nothing
        ("alice", "team-a", "bob", True),  # a project admin stops anyone's
        ("ops", "team-b", "erin", True),  # so does a platform admin, anywhere
        ("dave", "team-a", "bob", False),  # an admin elsewhere is nobody here
    ],
)
def test_can_stop(cfg: PlatformConfig, user: str, project: str, owner: str, ok: bool) -> None:
    assert can_stop(cfg, user, project, owner) is ok


def test_run_actions_are_what_the_caller_may_do_now(cfg: PlatformConfig) -> None:
    # Run views carry these (`actions`); the sidebar shows its controls from them, with no rule of its own.
    sweep = {"id": "r-1", "project": "team-a", "user": "bob", "kind": "sweep", "status": "running"}
    assert run_actions(cfg, "bob", sweep) == ["stop", "edit", "resubmit"]  # its owner, a member
    assert run_actions(cfg, "alice", sweep) == ["stop", "edit", "resubmit"]  # a project admin
    assert run_actions(cfg, "ops", sweep) == ["stop", "edit", "resubmit"]  # a platform admin
    assert run_actions(cfg, "carol", sweep) == []  # a viewer
    assert run_actions(cfg, "bob", {**sweep, "status": "succeeded"}) == ["resubmit"]  # over: nothing to stop
    session = {**sweep, "kind": "session", "user": "alice"}
    assert run_actions(cfg, "bob", session) == ["resubmit"]  # someone else's, not an admin
    assert run_actions(cfg, "alice", session) == ["stop", "keep", "resubmit"]
    # the same rule as the one enforced on stop
    for user in ("alice", "bob", "carol", "dave", "ops", "mallory"):
        assert ("stop" in run_actions(cfg, user, sweep)) is can_stop(cfg, user, "team-a", "bob"), user


def test_admins_of(cfg: PlatformConfig) -> None:
    pr = parse_config(
        {"projects": [{"name": "x", "members": {"zed": "admin", "amy": "admin", "bo": "member"}}]}
    ).projects[0]
    assert admins_of(pr) == ["amy", "zed"]


def test_viewer_cannot_submit(cfg: PlatformConfig) -> None:
    with pytest.raises(Forbidden) as exc:
        run(cfg, "carol")
    e = exc.value
    assert (e.status, e.code) == (403, "Forbidden")
    assert e.message == "carol is a viewer in project team-a; this needs the member role or higher"
    assert e.hint == "ask a project admin (alice) to change your role"


@pytest.mark.parametrize(
    ("user", "project", "hint"),
    [
        ("mallory", "team-a", "your projects: none"),
        ("dave", "team-a", "your projects: team-b"),  # an admin of another project is a stranger here
        ("alice", "nope", "your projects: team-a"),
        ("ops", "nope", "your projects: team-a, team-b"),
    ],
)
def test_non_member_and_unknown_project_look_alike(cfg: PlatformConfig, user: str, project: str, hint: str) -> None:
    with pytest.raises(NotFound) as exc:
        run(cfg, user, project=project)
    e = exc.value
    assert (e.status, e.code) == (404, "UnknownProject")
    assert e.message == f"project {project!r} not found"
    assert e.hint == hint


def test_platform_admin_may_submit_anywhere(cfg: PlatformConfig) -> None:
    res = run(cfg, "ops", project="team-b")
    assert res.violations == ()
    assert res.queue == "team-b-train"


# ---- a clean resolution -------------------------------------------------------
def test_resolve_example_with_preset(cfg: PlatformConfig) -> None:
    res = run(cfg, "bob", presets=["single-gpu"], command="echo hi && nvidia-smi")
    assert res.violations == ()
    assert res.layers == ("org", "project:team-a", "preset:single-gpu", "run")
    assert res.resolved == {
        "kind": "job",
        "queue": "team-a-train",
        "resources": {"gpu": 1, "cpu": "4", "memory": "16Gi"},
        "placement": {"gpu_type": "any"},
        "env": [{"name": "HF_HOME", "value": "/tmp/hf-cache"}],
        "termination": {"timeout_seconds": 86400},
        "presets": ["single-gpu"],
        "command": ["/bin/sh", "-c", "echo hi && nvidia-smi"],
        "name": "echo",  # no name given: named after what it runs (core/naming.py)
    }
    assert res.provenance == {
        "resources.gpu": "preset:single-gpu",
        "resources.cpu": "preset:single-gpu",
        "resources.memory": "preset:single-gpu",
        "placement.gpu_type": "preset:single-gpu",
        "env[HF_HOME]": "org",
        "termination.timeout_seconds": "org",
        "queue": "project:team-a",
        "kind": "preset:single-gpu",
    }
    assert res.queue == "team-a-train"
    assert res.resources == Resources(1, 4000, 16 * GI)
    assert res.verdict() == {"allowed": True, "violations": []}
    res.raise_first()  # nothing to raise


@pytest.mark.parametrize(
    ("command", "argv"),
    [
        ("echo hi", ["/bin/sh", "-c", "echo hi"]),
        ("python -c 'print(1)' | tee out", ["/bin/sh", "-c", "python -c 'print(1)' | tee out"]),
        (["python", "train.py", "--lr", "0.1"], ["python", "train.py", "--lr", "0.1"]),
        (["echo hi"], ["echo hi"]),  # an argv list is never re-split
    ],
)
def test_command_becomes_argv(cfg: PlatformConfig, command: Any, argv: list[str]) -> None:
    assert run(cfg, "bob", command=command).resolved["command"] == argv


def test_name_params_and_default_kind(cfg: PlatformConfig) -> None:
    res = run(cfg, "bob", name="lr sweep 1", params={"lr": 0.1, "epochs": 3})
    assert res.resolved["kind"] == "job"
    assert res.resolved["name"] == "lr sweep 1"
    assert res.resolved["params"] == {"lr": 0.1, "epochs": 3}
    assert "kind" not in res.provenance  # the default kind is not set by any layer


# ---- layer order and provenance ---------------------------------------------
LAYERED = {
    "defaults": {
        "image": "org-img",
        "env": [{"name": "A", "value": "org"}, {"name": "C", "value": "org"}],
        "resources": {"cpu": "1"},
        "termination": {"timeout_seconds": 100},
    },
    "queues": [{"name": "q-default"}, {"name": "q-preset"}, {"name": "q-run"}],
    "presets": [
        {"name": "dp1", "image": "dp1-img", "env": [{"name": "B", "value": "dp1"}], "resources": {"memory": "1Gi"}},
        {"name": "dp2", "env": [{"name": "A", "value": "dp2"}], "termination": {"timeout_seconds": 50}},
        {"name": "pick1", "image": "pick1-img", "queue": "q-preset", "resources": {"gpu": 1, "memory": "2Gi"}},
        {"name": "pick2", "env": [{"name": "B", "value": "pick2"}], "resources": {"gpu": 2}},
    ],
    "projects": [
        {"name": "p", "members": {"u": "member"}, "default_queue": "q-default", "default_presets": ["dp1", "dp2"]}
    ],
}


@pytest.fixture(scope="module")
def layered() -> PlatformConfig:
    return parse_config(LAYERED)


def test_layer_order_and_provenance(layered: PlatformConfig) -> None:
    res = run(layered, "u", project="p", presets=["pick1", "pick2"], resources={"cpu": "2"})
    assert res.violations == ()
    assert res.layers == (
        "org",
        "project:p",
        "project:p/preset:dp1",
        "project:p/preset:dp2",
        "preset:pick1",
        "preset:pick2",
        "run",
    )
    spec = res.resolved
    assert spec["image"] == "pick1-img"
    assert spec["queue"] == "q-preset"
    assert spec["resources"] == {"cpu": "2", "memory": "2Gi", "gpu": 2}
    assert spec["termination"] == {"timeout_seconds": 50}
    assert {e["name"]: e["value"] for e in spec["env"]} == {"A": "dp2", "B": "pick2", "C": "org"}
    assert res.provenance == {
        "image": "preset:pick1",
        "queue": "preset:pick1",
        "resources.cpu": "run",
        "resources.memory": "preset:pick1",
        "resources.gpu": "preset:pick2",
        "termination.timeout_seconds": "project:p/preset:dp2",
        "env[A]": "project:p/preset:dp2",
        "env[B]": "preset:pick2",
        "env[C]": "org",
    }


def test_picked_preset_order_matters(layered: PlatformConfig) -> None:
    res = run(layered, "u", project="p", presets=["pick2", "pick1"])
    assert res.resolved["resources"]["gpu"] == 1
    assert res.provenance["resources.gpu"] == "preset:pick1"
    assert res.layers[-3:] == ("preset:pick2", "preset:pick1", "run")


@pytest.mark.parametrize(
    ("presets", "run_queue", "queue", "source"),
    [
        ([], None, "q-default", "project:p"),
        (["pick1"], None, "q-preset", "preset:pick1"),
        ([], "q-run", "q-run", "run"),
        (["pick1"], "q-run", "q-run", "run"),
    ],
)
def test_queue_comes_from_strongest_layer(
    layered: PlatformConfig, presets: list[str], run_queue: str | None, queue: str, source: str
) -> None:
    req: dict[str, Any] = {"project": "p", "presets": presets}
    if run_queue:
        req["queue"] = run_queue
    res = run(layered, "u", **req)
    assert res.violations == ()
    assert (res.queue, res.provenance["queue"]) == (queue, source)


def test_run_none_deletes_a_lower_layer_field(layered: PlatformConfig) -> None:
    res = run(layered, "u", project="p", image=None)
    assert "image" not in res.resolved
    assert "image" not in res.provenance


# ---- allow-lists -----------------------------------------------------------
def test_queue_not_allowed(cfg: PlatformConfig) -> None:
    res = run(cfg, "erin", project="team-b", queue="team-a-train")
    assert codes(res) == ["QueueNotAllowed"]
    (v,) = res.violations
    assert isinstance(v, Forbidden) and v.status == 403
    assert v.message == "queue 'team-a-train' is not allowed in project team-b"
    assert v.hint == "allowed queues: team-b-train, interactive"


def test_preset_not_allowed_and_unknown(cfg: PlatformConfig) -> None:
    res = run(cfg, "erin", project="team-b", presets=["multi-gpu", "nope"])
    assert codes(res) == ["PresetNotAllowed", "UnknownPreset"]
    na, unk = res.violations
    assert isinstance(na, Forbidden)
    assert na.message == "preset 'multi-gpu' is not allowed in project team-b"
    assert na.hint == "allowed presets: single-gpu, notebook"
    assert isinstance(unk, Unprocessable) and unk.status == 422
    assert unk.message == "unknown preset 'nope'"
    assert unk.hint == "presets allowed in project team-b: single-gpu, notebook"
    # a refused preset contributes nothing to the spec
    assert res.layers == ("org", "project:team-b", "run")
    assert "gpu" not in res.resolved["resources"]


def test_unknown_queue(cfg: PlatformConfig) -> None:
    res = run(cfg, "bob", queue="nope")
    assert codes(res) == ["UnknownQueue"]
    assert res.violations[0].message == "unknown queue 'nope'"
    assert res.violations[0].hint == "allowed queues: team-a-train, interactive"


def _restricted(restrict: bool, **project: Any) -> PlatformConfig:
    return parse_config(
        {
            "restrict_by_default": restrict,
            "queues": [{"name": "q1"}, {"name": "q2"}],
            "presets": [{"name": "p1", "resources": {"gpu": 1}}, {"name": "p2"}],
            "projects": [{"name": "x", "members": {"u": "member"}, **project}],
        }
    )


@pytest.mark.parametrize(
    ("restrict", "project", "queues", "presets"),
    [
        (False, {}, ["q1", "q2"], ["p1", "p2"]),
        (True, {}, [], []),
        (True, {"allowed_queues": ["q2"], "allowed_presets": ["p1"]}, ["q2"], ["p1"]),
        (False, {"allowed_queues": ["q2"]}, ["q2"], ["p1", "p2"]),
        (False, {"allowed_queues": [], "allowed_presets": []}, [], []),  # an empty list allows nothing
    ],
)
def test_allow_lists(restrict: bool, project: dict[str, Any], queues: list[str], presets: list[str]) -> None:
    c = _restricted(restrict, **project)
    pr = c.projects[0]
    assert allowed_queues(c, pr) == queues
    assert allowed_presets(c, pr) == presets


def test_restrict_by_default_true_allows_nothing_without_lists() -> None:
    res = run(_restricted(True), "u", project="x", queue="q1", presets=["p1"])
    assert codes(res) == ["PresetNotAllowed", "QueueNotAllowed"]
    assert res.violations[0].hint == "allowed presets: none"
    assert res.violations[1].message == "queue 'q1' is not allowed in project x"
    assert res.violations[1].hint == "allowed queues: none"


def test_restrict_by_default_false_allows_everything_without_lists() -> None:
    res = run(_restricted(False), "u", project="x", queue="q2", presets=["p1", "p2"])
    assert res.violations == ()
    assert res.queue == "q2"
    assert res.resources.gpu == 1


def test_restrict_by_default_true_with_lists() -> None:
    c = _restricted(True, allowed_queues=["q2"], allowed_presets=["p1"])
    assert run(c, "u", project="x", queue="q2", presets=["p1"]).violations == ()
    assert codes(run(c, "u", project="x", queue="q1", presets=["p2"])) == ["PresetNotAllowed", "QueueNotAllowed"]


# ---- locked fields -------------------------------------------------------------
def test_locked_queue_from_preset(cfg: PlatformConfig) -> None:
    res = run(cfg, "bob", presets=["notebook"], queue="team-a-train")
    assert codes(res) == ["FieldLocked"]
    (v,) = res.violations
    assert isinstance(v, Forbidden)
    assert v.message == "queue is locked by preset:notebook (interactive); run tried to set team-a-train"
    assert v.hint == "remove the override or pick presets that do not lock this field"
    assert res.queue == "interactive"  # the lock holds in the resolved spec
    assert res.verdict() == {
        "allowed": False,
        "violations": [
            {
                "code": "FieldLocked",
                "message": "queue is locked by preset:notebook (interactive); run tried to set team-a-train",
                "hint": "remove the override or pick presets that do not lock this field",
            }
        ],
    }
    with pytest.raises(Forbidden, match="queue is locked by preset:notebook"):
        res.raise_first()


def test_locked_preset_overrides_project_default_queue(cfg: PlatformConfig) -> None:
    # The lock binds later layers only: the project's default queue came earlier.
    res = run(cfg, "bob", presets=["notebook"])
    assert res.violations == ()
    assert (res.queue, res.provenance["queue"]) == ("interactive", "preset:notebook")
    assert res.resolved["kind"] == "session"


def test_run_repeating_the_locked_value_is_fine(cfg: PlatformConfig) -> None:
    assert run(cfg, "bob", presets=["notebook"], queue="interactive").violations == ()


def test_lock_binds_later_presets_too() -> None:
    c = parse_config(
        {
            "queues": [{"name": "q"}],
            "presets": [
                {"name": "small", "resources": {"gpu": 1}, "locked": ["resources.gpu"]},
                {"name": "big", "resources": {"gpu": 4}},
            ],
            "projects": [{"name": "x", "members": {"u": "member"}, "default_queue": "q"}],
        }
    )
    res = run(c, "u", project="x", presets=["small", "big"])
    assert codes(res) == ["FieldLocked"]
    assert res.violations[0].message == "resources.gpu is locked by preset:small (1); preset:big tried to set 4"
    assert res.resources.gpu == 1


# ---- resource limits ------------------------------------------------------------
def test_exceeds_queue_quota_with_numbers(cfg: PlatformConfig) -> None:
    res = run(cfg, "bob", resources={"cpu": "32", "memory": "200Gi"})
    assert codes(res) == ["ExceedsQueueQuota", "ExceedsQueueQuota"]
    cpu, mem = res.violations
    assert isinstance(cpu, Unprocessable) and cpu.status == 422
    assert cpu.message == "requests 32 cpu but queue team-a-train has a quota of 16 cpu: it could never be dispatched"
    assert cpu.hint == "ask for at most 16 cpu"  # core/refusal.py adds the queues that accept it
    assert mem.message == (
        "requests 200Gi memory but queue team-a-train has a quota of 128Gi memory: it could never be dispatched"
    )
    assert mem.hint == "ask for at most 128Gi memory"


def test_exactly_the_queue_quota_is_fine(cfg: PlatformConfig) -> None:
    assert run(cfg, "bob", resources={"gpu": 2, "cpu": "16", "memory": "128Gi"}).violations == ()


def test_gpu_over_quota_and_max_run_resources(cfg: PlatformConfig) -> None:
    res = run(cfg, "bob", resources={"gpu": 3})
    assert codes(res) == ["ExceedsQueueQuota", "MaxRunResources"]
    q, m = res.violations
    assert q.message == "requests 3 gpu but queue team-a-train has a quota of 2 gpu: it could never be dispatched"
    assert m.message == "requests 3 gpu; project team-a allows at most 2 gpu per run (max_run_resources)"
    assert m.hint == "ask for at most 2 gpu per run"


@pytest.fixture(scope="module")
def capped() -> PlatformConfig:
    return parse_config(
        {
            "queues": [{"name": "big", "quota": {"gpu": 8, "cpu": "64", "memory": "512Gi"}}, {"name": "free"}],
            "projects": [
                {
                    "name": "x",
                    "members": {"u": "member"},
                    "default_queue": "big",
                    "max_run_resources": {"gpu": 2, "memory": "32Gi"},
                }
            ],
        }
    )


@pytest.mark.parametrize(
    ("resources", "expected"),
    [
        ({"gpu": 2, "cpu": "64", "memory": "32Gi"}, []),
        ({"gpu": 4}, ["requests 4 gpu; project x allows at most 2 gpu per run (max_run_resources)"]),
        (
            {"memory": "64Gi"},
            ["requests 64Gi memory; project x allows at most 32Gi memory per run (max_run_resources)"],
        ),
        (
            {"gpu": 4, "cpu": "48", "memory": "64Gi"},
            [
                "requests 4 gpu; project x allows at most 2 gpu per run (max_run_resources)",
                "requests 64Gi memory; project x allows at most 32Gi memory per run (max_run_resources)",
            ],
        ),
    ],
)
def test_max_run_resources(capped: PlatformConfig, resources: dict[str, Any], expected: list[str]) -> None:
    res = run(capped, "u", project="x", resources=resources)
    assert codes(res) == ["MaxRunResources"] * len(expected)
    assert [v.message for v in res.violations] == expected
    for v in res.violations:
        assert isinstance(v, Unprocessable)
        # the hint names only the limited resources: cpu is not capped, so it is not "0"
        assert v.hint == "ask for at most 2 gpu, 32Gi memory per run"


def test_max_run_resources_applies_on_an_unlimited_queue(capped: PlatformConfig) -> None:
    res = run(capped, "u", project="x", queue="free", resources={"gpu": 100})
    assert codes(res) == ["MaxRunResources"]


# ---- no queue -------------------------------------------------------------------
def test_no_queue() -> None:
    c = parse_config(
        {"queues": [{"name": "a"}, {"name": "b"}], "projects": [{"name": "x", "members": {"u": "member"}}]}
    )
    res = run(c, "u", project="x", resources={"gpu": 1})
    assert codes(res) == ["NoQueue"]
    (v,) = res.violations
    assert isinstance(v, Unprocessable)
    assert v.message == "no queue: the run sets none and neither do its presets or the project"
    assert v.hint == "set queue to one of: a, b"
    assert res.queue is None
    assert res.verdict()["allowed"] is False


def test_no_queue_when_the_run_deletes_it(cfg: PlatformConfig) -> None:
    res = run(cfg, "bob", queue=None)
    assert codes(res) == ["NoQueue"]
    assert res.violations[0].hint == "set queue to one of: team-a-train, interactive"


def test_org_default_queue_is_the_weakest(layered: PlatformConfig) -> None:
    data = {**LAYERED, "defaults": {**LAYERED["defaults"], "queue": "q-run"}}
    c = parse_config(data)
    res = run(c, "u", project="p")
    assert (res.queue, res.provenance["queue"]) == ("q-default", "project:p")


# ---- verdict collects every violation -----------------------------------------------
def test_verdict_lists_every_violation_in_order(cfg: PlatformConfig) -> None:
    res = run(cfg, "erin", project="team-b", presets=["multi-gpu"], queue="team-a-train", resources={"gpu": 3})
    assert codes(res) == ["PresetNotAllowed", "QueueNotAllowed", "ExceedsQueueQuota", "MaxRunResources"]
    verdict = res.verdict()
    assert verdict["allowed"] is False
    assert [v["code"] for v in verdict["violations"]] == codes(res)
    assert all(set(v) == {"code", "message", "hint"} for v in verdict["violations"])
    with pytest.raises(GpuPlatError) as exc:
        res.raise_first()
    assert exc.value.code == "PresetNotAllowed"


def test_resolve_does_not_mutate_config(cfg: PlatformConfig) -> None:
    before = cfg.model_dump()
    run(cfg, "bob", presets=["multi-gpu"], resources={"gpu": None}, env={"HF_HOME": None})
    run(cfg, "bob", presets=["notebook"], queue="team-a-train")
    assert cfg.model_dump() == before


# ---- who may: one pure function per rule ------------------------------------------------
RUN = {"id": "r-1", "project": "team-a", "user": "bob", "status": "running"}


@pytest.mark.parametrize(
    ("user", "see", "stop"),
    [
        ("bob", True, True),  # the owner
        ("alice", True, True),  # a project admin
        ("ops", True, True),  # a platform admin
        ("carol", True, False),  # a viewer sees, never stops
        ("dave", False, False),  # another team
        ("mallory", False, False),  # nobody
    ],
)
def test_see_and_stop_a_run(cfg: PlatformConfig, user: str, see: bool, stop: bool) -> None:
    assert can_see(cfg, user, "team-a") is see
    if see:
        assert require_visible_run(cfg, user, "r-1", RUN) is RUN
    else:
        with pytest.raises(NotFound) as nf:
            require_visible_run(cfg, user, "r-1", RUN)
        # unknown and invisible look alike
        with pytest.raises(NotFound) as unknown:
            require_visible_run(cfg, user, "r-1", None)
        assert nf.value.to_dict() == unknown.value.to_dict()
    if stop:
        require_can_stop(cfg, user, RUN)
    else:
        with pytest.raises(Forbidden, match="may not stop run r-1"):
            require_can_stop(cfg, user, RUN)


def test_platform_admin_writes(cfg: PlatformConfig) -> None:
    require_platform_admin(cfg, "ops")
    with pytest.raises(Forbidden, match="alice is not a platform admin") as exc:
        require_platform_admin(cfg, "alice")  # a project admin is not a platform admin
    assert exc.value.hint == "platform admins: ops"


def test_project_writes(cfg: PlatformConfig) -> None:
    team_a = cfg.project("team-a")
    assert team_a is not None
    members = team_a.model_copy(update={"members": {**team_a.members, "mallory": "member"}})
    require_project_write(cfg, "alice", members)  # project admin: members
    require_project_write(cfg, "ops", team_a.model_copy(update={"allowed_queues": ["interactive"]}))
    with pytest.raises(Forbidden, match="allowed_queues of project team-a is set by platform admins"):
        require_project_write(cfg, "alice", team_a.model_copy(update={"allowed_queues": ["interactive"]}))
    with pytest.raises(Forbidden, match="team-b-train not allowed in project team-a"):
        require_project_write(cfg, "alice", team_a.model_copy(update={"default_queue": "team-b-train"}))
    with pytest.raises(Forbidden, match="needs the admin role"):
        require_project_write(cfg, "bob", members)
    # A new project and another team's look alike to a non-admin: nothing tells whether it exists.
    with pytest.raises(NotFound) as new:
        require_project_write(cfg, "alice", team_a.model_copy(update={"name": "team-z"}))
    with pytest.raises(NotFound) as other:
        require_project_write(cfg, "dave", members)  # another team's admin: it does not exist for him
    assert str(new.value) == "project 'team-z' not found" and str(other.value) == "project 'team-a' not found"
    assert new.value.hint == "your projects: team-a; platform admins create projects"


def test_what_a_user_may_list(cfg: PlatformConfig) -> None:
    assert listable_queues(cfg, "ops") == ["team-a-train", "team-b-train", "interactive"]
    assert listable_queues(cfg, "carol") == ["team-a-train", "interactive"]
    assert listable_queues(cfg, "mallory") == []
    assert listable_presets(cfg, "erin") == ["single-gpu", "notebook"]
    assert listable_presets(cfg, "bob", "team-a") == ["single-gpu", "multi-gpu", "notebook"]
    with pytest.raises(NotFound):
        listable_presets(cfg, "bob", "team-b")
    assert listable_run_projects(cfg, "ops") == ["team-a", "team-b"]
    assert listable_run_projects(cfg, "frank", "team-b") == ["team-b"]
    with pytest.raises(NotFound, match="project 'team-a' not found"):
        listable_run_projects(cfg, "frank", "team-a")
