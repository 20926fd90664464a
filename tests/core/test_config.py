"""Platform config: the example parses; a bad document is refused whole, every error named by path."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from jupyter_gpuplat.core.config import PlatformConfig, dump_config, load_config_text, named_paths, parse_config
from jupyter_gpuplat.core.errors import ConfigErrors
from jupyter_gpuplat.core.resources import Quota

EXAMPLE = Path(__file__).resolve().parents[2] / "jupyter_gpuplat" / "platform.example.yaml"
GI = 2**30
MEM_HINT = "use bytes or a suffix Ki, Mi, Gi, Ti (binary) or k, M, G, T"
NAME_MSG = "invalid name: use lowercase letters, digits, '.', '_' and '-', 1-63 characters"
SPEC_FIELDS = "kind, queue, resources, placement, image, env, volumes, connections, termination, security"


def errors_of(data: Any) -> list[str]:
    with pytest.raises(ConfigErrors) as exc:
        parse_config(data)
    err = exc.value
    assert err.code == "InvalidConfig"
    assert err.status == 400
    assert err.message == f"{len(err.errors)} error(s) in platform config: " + "; ".join(err.errors)
    assert err.hint == "fix every listed path; nothing was applied"
    return err.errors


# ---- the example ------------------------------------------------------------
def test_example_parses() -> None:
    cfg = load_config_text(EXAMPLE.read_text())
    assert cfg.admins == ["ops"]
    assert cfg.restrict_by_default is False
    assert [q.name for q in cfg.queues] == ["team-a-train", "team-b-train", "interactive"]
    assert [p.name for p in cfg.presets] == ["single-gpu", "multi-gpu", "notebook"]
    assert [p.name for p in cfg.projects] == ["team-a", "team-b"]

    a = cfg.queue("team-a-train")
    assert a is not None
    assert (a.priority, a.concurrency, a.max_per_user, a.ordering, a.paused) == (10, 2, None, "best_effort_fifo", False)
    assert a.quota.quota() == Quota(2, 16000, 128 * GI)
    b = cfg.queue("team-b-train")
    assert b is not None and (b.max_per_user, b.ordering) == (1, "strict_fifo")
    inter = cfg.queue("interactive")
    assert inter is not None and inter.priority == 100 and inter.quota.quota() == Quota(gpu=2)
    assert cfg.queue("nope") is None

    nb = cfg.preset("notebook")
    assert nb is not None and nb.locked == ["queue"] and nb.merge == "post_merge"
    assert nb.layer_dict() == {
        "kind": "session",
        "queue": "interactive",
        "resources": {"gpu": 1, "cpu": "2", "memory": "8Gi"},
        "termination": {"timeout_seconds": 14400, "idle_seconds": 3600},
    }
    assert cfg.defaults.layer_dict() == {
        "resources": {"cpu": "1", "memory": "2Gi"},
        "termination": {"timeout_seconds": 86400},
        "env": [{"name": "HF_HOME", "value": "/tmp/hf-cache"}],
    }

    ta = cfg.project("team-a")
    assert ta is not None
    assert ta.members == {"alice": "admin", "bob": "member", "carol": "viewer"}
    assert ta.default_queue == "team-a-train"
    assert ta.allowed_queues == ["team-a-train", "interactive"]
    assert ta.max_run_resources is not None and ta.max_run_resources.gpu == 2


def test_example_dump_round_trips() -> None:
    cfg = load_config_text(EXAMPLE.read_text())
    again = parse_config(dump_config(cfg))
    assert again == cfg


@pytest.mark.parametrize("data", [None, {}, ""])
def test_empty_document_is_an_empty_platform(data: Any) -> None:
    cfg = load_config_text(data) if isinstance(data, str) else parse_config(data)
    assert cfg == PlatformConfig()
    assert (cfg.admins, cfg.queues, cfg.presets, cfg.projects) == ([], [], [], [])


def test_env_shorthand_mapping() -> None:
    cfg = parse_config({"defaults": {"env": {"A": 1, "B": None}}})
    assert cfg.defaults.layer_dict() == {"env": [{"name": "A", "value": "1"}, {"name": "B", "value": None}]}


# ---- refused whole ----------------------------------------------------------
def test_every_error_named_by_path() -> None:
    errors = errors_of(
        {
            "queues": [
                {"name": "a", "bogus": 1},
                {"name": "b", "quota": {"gpu": -1}},
                {"name": "c", "ordering": "lifo"},
            ],
            "presets": [{"name": "p", "resources": {"gpu": 2000}}],
            "projects": [{"name": "x", "members": {"u": "owner"}}],
        }
    )
    assert errors == [
        "queues[0].bogus: unknown field",
        "queues[1].quota.gpu: must be >= 0",
        "queues[2].ordering: must be one of 'best_effort_fifo' or 'strict_fifo'",
        "presets[0].resources.gpu: must be <= 1024",
        "projects[0].members.u: must be one of 'viewer', 'member' or 'admin'",
    ]


SHAPE_CASES = [
    pytest.param({"bogus": 1}, ["bogus: unknown field"], id="unknown-top-level"),
    pytest.param({"queues": [{"name": "a", "bogus": 1}]}, ["queues[0].bogus: unknown field"], id="unknown-queue-field"),
    pytest.param(
        {"queues": [{"name": "a", "quota": {"gpu": 1, "tpu": 2}}]},
        ["queues[0].quota.tpu: unknown field"],
        id="unknown-quota-field",
    ),
    pytest.param(
        {"presets": [{"name": "p", "placement": {"zone": "x"}}]},
        ["presets[0].placement.zone: unknown field"],
        id="unknown-preset-nested-field",
    ),
    pytest.param({"queues": [{"description": "x"}]}, ["queues[0].name: is required"], id="missing-name"),
    pytest.param({"queues": [{"name": "Bad_Name"}]}, [f"queues[0].name: {NAME_MSG}"], id="bad-queue-name"),
    pytest.param({"queues": [{"name": "-a"}]}, [f"queues[0].name: {NAME_MSG}"], id="leading-dash"),
    pytest.param({"queues": [{"name": "a" * 64}]}, [f"queues[0].name: {NAME_MSG}"], id="name-too-long"),
    pytest.param({"presets": [{"name": "x y"}]}, [f"presets[0].name: {NAME_MSG}"], id="bad-preset-name"),
    pytest.param({"projects": [{"name": ""}]}, [f"projects[0].name: {NAME_MSG}"], id="empty-project-name"),
    pytest.param(
        {"queues": [{"name": "a", "ordering": "lifo"}]},
        ["queues[0].ordering: must be one of 'best_effort_fifo' or 'strict_fifo'"],
        id="bad-ordering",
    ),
    pytest.param(
        {"queues": [{"name": "a", "concurrency": -1, "priority": 5000, "max_per_user": 0}]},
        [
            "queues[0].priority: must be <= 1000",
            "queues[0].concurrency: must be >= 0",
            "queues[0].max_per_user: must be >= 1",
        ],
        id="queue-bounds",
    ),
    pytest.param(
        {"queues": [{"name": "a", "quota": {"gpu": 1025}}]}, ["queues[0].quota.gpu: must be <= 1024"], id="gpu-typo"
    ),
    pytest.param(
        {"queues": [{"name": "a", "quota": {"cpu": "abc", "memory": "-1"}}]},
        [
            "queues[0].quota.cpu: invalid cpu quantity 'abc': use cores (2, 0.5) or millicores ('500m')",
            f"queues[0].quota.memory: invalid memory quantity '-1': {MEM_HINT}",
        ],
        id="bad-quota-quantities",
    ),
    pytest.param(
        {"queues": [{"name": "a", "quota": {"cpu": -1, "memory": -5}}]},
        ["queues[0].quota.cpu: must be >= 0", "queues[0].quota.memory: must be >= 0"],
        id="negative-quota-numbers",
    ),
    pytest.param(
        {"queues": [{"name": "a", "quota": {"cpu": float("inf")}}]},
        ["queues[0].quota.cpu: invalid cpu quantity inf: must be a finite number of cores"],
        id="infinite-quota-cpu",
    ),
    pytest.param(
        {"presets": [{"name": "p", "kind": "thing", "resources": {"cpu": "abc", "memory": "1Zi"}}]},
        [
            "presets[0].kind: must be one of 'job' or 'session'",
            "presets[0].resources.cpu: invalid cpu quantity 'abc': use cores (2, 0.5) or millicores ('500m')",
            f"presets[0].resources.memory: invalid memory quantity '1Zi': {MEM_HINT}",
        ],
        id="bad-preset-values",
    ),
    pytest.param(
        {"presets": [{"name": "p", "resources": {"cpu": "200000"}}]},
        ["presets[0].resources.cpu: must be between 0 and 100000 cores"],
        id="preset-cpu-upper-bound",
    ),
    pytest.param(
        {"presets": [{"name": "p", "merge": "union"}]},
        ["presets[0].merge: must be one of 'post_merge', 'pre_merge', 'isnull' or 'replace'"],
        id="bad-merge-strategy",
    ),
    pytest.param(
        {"presets": [{"name": "p", "env": [{"name": "1A"}]}]},
        ["presets[0].env[0].name: must match the pattern ^[A-Za-z_][A-Za-z0-9_.-]*$"],
        id="bad-env-name-is-not-described-as-a-resource-name",
    ),
    pytest.param(
        {"presets": [{"name": "p", "termination": {"timeout_seconds": 0}}]},
        ["presets[0].termination.timeout_seconds: must be > 0"],
        id="zero-timeout",
    ),
    pytest.param(
        {"projects": [{"name": "x", "members": {"u": "owner"}}]},
        ["projects[0].members.u: must be one of 'viewer', 'member' or 'admin'"],
        id="bad-role",
    ),
    pytest.param(
        {"defaults": {"image": "x" * 513}},
        ["defaults.image: is too long (at most 512 characters)"],
        id="defaults-image-too-long",
    ),
]


@pytest.mark.parametrize(("data", "expected"), SHAPE_CASES)
def test_shape_errors(data: dict[str, Any], expected: list[str]) -> None:
    assert errors_of(data) == expected


@pytest.mark.parametrize("data", [[1, 2], "a string", 3, ["queues"]])
def test_top_level_must_be_a_mapping(data: Any) -> None:
    assert errors_of(data) == ["(top level): must be a mapping with admins, queues, presets, projects"]


def test_top_level_list_in_yaml() -> None:
    with pytest.raises(ConfigErrors) as exc:
        load_config_text("- name: a\n- name: b\n")
    assert exc.value.errors == ["(top level): must be a mapping with admins, queues, presets, projects"]


def test_yaml_syntax_error() -> None:
    with pytest.raises(ConfigErrors) as exc:
        load_config_text("queues: [1,\n  b: }\n")
    (only,) = exc.value.errors
    assert only.startswith("(yaml): ")
    assert "line 2, column" in only
    assert exc.value.message.startswith("1 error(s) in platform config: (yaml): ")


def test_yaml_text_goes_through_the_same_checks() -> None:
    with pytest.raises(ConfigErrors) as exc:
        load_config_text("queues:\n  - name: a\n  - name: b\n    quota: {gpu: -1}\n")
    assert exc.value.errors == ["queues[1].quota.gpu: must be >= 0"]


def test_duplicate_names() -> None:
    errors = errors_of(
        {
            "queues": [{"name": "a"}, {"name": "b"}, {"name": "a"}],
            "presets": [{"name": "p"}, {"name": "p"}],
            "projects": [{"name": "x"}, {"name": "x"}, {"name": "x"}],
        }
    )
    assert errors == [
        "queues[2].name: duplicate name 'a'",
        "presets[1].name: duplicate name 'p'",
        "projects[1].name: duplicate name 'x'",
        "projects[2].name: duplicate name 'x'",
    ]


def test_cross_reference_errors_all_reported() -> None:
    errors = errors_of(
        {
            "defaults": {"queue": "zz"},
            "queues": [{"name": "a"}, {"name": "b"}],
            "presets": [{"name": "p", "queue": "zz", "locked": ["queue", "bogus.x", "resources.gpu"]}],
            "projects": [
                {
                    "name": "x",
                    "allowed_queues": ["a", "nope"],
                    "default_queue": "b",
                    "allowed_presets": ["q"],
                    "default_presets": ["p", "r"],
                },
                {"name": "y", "default_queue": "zz"},
            ],
        }
    )
    assert errors == [
        "defaults.queue: unknown queue 'zz' (known: a, b)",
        "presets[0].queue: unknown queue 'zz' (known: a, b)",
        f"presets[0].locked[1]: unknown field 'bogus.x' (fields: {SPEC_FIELDS})",
        "projects[0].allowed_queues[1]: unknown queue 'nope' (known: a, b)",
        "projects[0].allowed_presets[0]: unknown preset 'q' (known: p)",
        "projects[0].default_presets[1]: unknown preset 'r' (known: p)",
        "projects[0].default_presets[0]: 'p' is not in the project's allowed presets ['q']",
        "projects[0].default_queue: 'b' is not in allowed_queues ['a', 'nope']",
        "projects[1].default_queue: unknown queue 'zz' (known: a, b)",
    ]


XREF_CASES = [
    pytest.param(
        {
            "restrict_by_default": True,
            "queues": [{"name": "a"}],
            "presets": [{"name": "p"}],
            "projects": [{"name": "x", "default_queue": "a", "default_presets": ["p"]}],
        },
        [
            "projects[0].default_presets[0]: 'p' is not in the project's allowed presets []",
            "projects[0].default_queue: restrict_by_default is true and the project lists no allowed_queues, "
            "so it may use no queue",
        ],
        id="restrict-by-default-defaults-unusable",
    ),
    pytest.param(
        {"projects": [{"name": "x", "allowed_queues": ["a"]}]},
        ["projects[0].allowed_queues[0]: unknown queue 'a' (known: none)"],
        id="no-queues-at-all",
    ),
    pytest.param(
        {"queues": [{"name": "a"}], "projects": [{"name": "x", "default_queue": "b"}]},
        ["projects[0].default_queue: unknown queue 'b' (known: a)"],
        id="unknown-default-queue",
    ),
    pytest.param(
        {
            "queues": [{"name": "a"}, {"name": "b"}],
            "projects": [{"name": "x", "default_queue": "b", "allowed_queues": ["a"]}],
        },
        ["projects[0].default_queue: 'b' is not in allowed_queues ['a']"],
        id="default-queue-not-allowed",
    ),
    pytest.param(
        {"queues": [{"name": "a"}], "presets": [{"name": "p", "queue": "b"}]},
        ["presets[0].queue: unknown queue 'b' (known: a)"],
        id="preset-queue",
    ),
    pytest.param(
        {"presets": [{"name": "p"}], "projects": [{"name": "x", "allowed_presets": ["p", "q"]}]},
        ["projects[0].allowed_presets[1]: unknown preset 'q' (known: p)"],
        id="unknown-allowed-preset",
    ),
    pytest.param(
        {"projects": [{"name": "x", "default_presets": ["p"]}]},
        ["projects[0].default_presets[0]: unknown preset 'p' (known: none)"],
        id="unknown-default-preset",
    ),
    pytest.param(
        {"presets": [{"name": "p", "locked": ["command"]}]},
        [f"presets[0].locked[0]: unknown field 'command' (fields: {SPEC_FIELDS})"],
        id="locked-unknown-field",
    ),
    pytest.param(
        {"queues": [{"name": "a"}], "defaults": {"queue": "b"}},
        ["defaults.queue: unknown queue 'b' (known: a)"],
        id="defaults-queue",
    ),
]


@pytest.mark.parametrize(("data", "expected"), XREF_CASES)
def test_cross_reference_errors(data: dict[str, Any], expected: list[str]) -> None:
    assert errors_of(data) == expected


def test_every_error_at_once_shape_roles_and_references() -> None:
    """One validation names every problem (docs/platform-config.md), not schema errors first and the
    references on the next try; a broken item's other fields are still checked, and a name stays known."""
    data = {
        "queues": [{"name": "a", "priority": "high"}],
        "presets": [{"name": "p", "queue": "nope", "resources": {"gpu": -1}}],
        "projects": [
            {"name": "x", "default_queue": "b", "members": {"u": "boss"}},
            {"name": "y", "allowed_queues": ["a"], "allowed_presets": ["p", "q"]},
        ],
    }
    errors = errors_of(data)
    assert errors == [
        "queues[0].priority: Input should be a valid integer, unable to parse string as an integer",
        "presets[0].resources.gpu: must be >= 0",
        "projects[0].members.u: must be one of 'viewer', 'member' or 'admin'",
        "presets[0].queue: unknown queue 'nope' (known: a)",
        "projects[0].default_queue: unknown queue 'b' (known: a)",
        "projects[1].allowed_presets[1]: unknown preset 'q' (known: p)",
    ]
    assert named_paths(errors, data)[2] == "projects[0] (x).members.u: must be one of 'viewer', 'member' or 'admin'"
    assert named_paths(["(yaml): bad", "queues[5].x: y"], data) == ["(yaml): bad", "queues[5].x: y"]


@pytest.mark.parametrize(
    "data",
    [
        {"queues": [{"name": "a"}], "projects": [{"name": "x", "default_queue": "a"}]},  # no allow-list: any queue
        {"queues": [{"name": "a"}], "projects": [{"name": "x", "default_queue": "a", "allowed_queues": ["a"]}]},
        {"presets": [{"name": "p", "locked": ["resources.gpu", "placement", "env"]}]},
        {"queues": [{"name": "a", "concurrency": 0}]},  # 0 is allowed: nothing dispatches
        {"queues": [{"name": "a.b_c-1"}]},
        {"projects": [{"name": "x", "allowed_queues": [], "allowed_presets": []}]},
    ],
)
def test_valid_documents(data: dict[str, Any]) -> None:
    assert isinstance(parse_config(data), PlatformConfig)


def test_a_preset_that_locks_a_queue_the_project_may_not_use() -> None:
    """Listed for the project but locked to another team's queue: refused by validation when the project
    names it, and never among the project's usable presets (what submit accepts), so hints and listings
    agree. One that only sets that queue stays usable: the run names its own queue (the hint says so)."""
    from jupyter_gpuplat.core.policy import allowed_presets

    base = {
        "queues": [{"name": "a"}, {"name": "b"}],
        "presets": [
            {"name": "on-b", "queue": "b", "locked": ["queue"]},
            {"name": "free"},
            {"name": "to-b", "queue": "b"},
        ],
    }
    named = {"name": "x", "allowed_queues": ["a"], "allowed_presets": ["to-b", "on-b"], "default_presets": ["on-b"]}
    assert errors_of({**base, "projects": [named]}) == [
        "projects[0].allowed_presets[1]: preset 'on-b' locks queue 'b', which project x may not use "
        "(allowed queues: a); allow the queue or drop the preset",
        "projects[0].default_presets[0]: preset 'on-b' locks queue 'b', which project x may not use "
        "(allowed queues: a); allow the queue or drop the preset",
    ]
    cfg = parse_config({**base, "projects": [{"name": "x", "allowed_queues": ["a"]}]})  # every preset, one queue
    pr = cfg.project("x")
    assert pr is not None and allowed_presets(cfg, pr) == ["free", "to-b"]


def test_kind_sweep_is_refused_in_a_config_and_not_offered() -> None:
    """A sweep is made by a sweep request (docs/sweeps.md), never by a preset's kind: the refusal says so,
    and the list of kinds a preset may name leaves it out."""
    with pytest.raises(ConfigErrors) as err:
        parse_config({"presets": [{"name": "p", "kind": "sweep"}]})
    assert (err.value.status, err.value.code) == (422, "NotImplemented")
    assert err.value.errors == [
        "presets[0].kind: kind 'sweep' is made by a run request with a `matrix` (docs/sweeps.md), "
        "not by a preset, the defaults or a run's kind; remove it"
    ]
    assert errors_of({"presets": [{"name": "p", "kind": "batch"}]}) == [
        "presets[0].kind: must be one of 'job' or 'session'"
    ]
