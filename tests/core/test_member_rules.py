"""What a member may set in a run's own fields (core/member_rules.py), as tables; pure, no server.

The rule itself (check), image references and patterns, reserved env names, then the rule
inside the policy (resolve: presets, org defaults and connections keep working; the config's
allow-lists), its refusal alternatives (each accepted by the same policy) and the config keys.
"""

from __future__ import annotations

from typing import Any

import pytest

from jupyter_gpuplat.core.config import ProjectConfig, parse_config
from jupyter_gpuplat.core.errors import ConfigErrors, FieldNotAllowed, Forbidden
from jupyter_gpuplat.core.member_rules import (
    MemberContext,
    check,
    image_allowed,
    normalize_image,
    normalize_pattern,
    provides,
    reserved_env,
    strip,
)
from jupyter_gpuplat.core.policy import require_project_write, resolve
from jupyter_gpuplat.core.refusal import apply, judge
from jupyter_gpuplat.core.refusal import check as policy_check
from jupyter_gpuplat.core.request import RunRequest

# ---- image references -----------------------------------------------------------------------------
IMAGES = [
    ("python", "docker.io/library/python:latest"),
    ("python:3.11", "docker.io/library/python:3.11"),
    ("library/python:3.11", "docker.io/library/python:3.11"),
    ("docker.io/python:3.11", "docker.io/library/python:3.11"),
    ("index.docker.io/library/python:3.11", "docker.io/library/python:3.11"),
    ("pytorch/pytorch", "docker.io/pytorch/pytorch:latest"),
    ("nvcr.io/nvidia/pytorch:24.05-py3", "nvcr.io/nvidia/pytorch:24.05-py3"),
    ("localhost/x", "localhost/x:latest"),
    ("registry:5000/team/img", "registry:5000/team/img:latest"),
    ("python@sha256:abc", "docker.io/library/python@sha256:abc"),
    ("python:3@sha256:abc", "docker.io/library/python:3@sha256:abc"),
]


@pytest.mark.parametrize(("ref", "want"), IMAGES)
def test_image_refs_are_normalised_before_matching(ref: str, want: str) -> None:
    assert normalize_image(ref) == want


PATTERNS = [
    ("python:3.*", "docker.io/library/python:3.*"),
    ("pytorch/*", "docker.io/pytorch/*"),
    ("registry.internal/vision/*", "registry.internal/vision/*"),
    ("*", "*"),
    ("*/team/*", "*/team/*"),
    ("python", "docker.io/library/python:latest"),  # no wildcard: a reference
]


@pytest.mark.parametrize(("pattern", "want"), PATTERNS)
def test_image_patterns_get_the_hub_prefix_where_they_name_a_hub_image(pattern: str, want: str) -> None:
    assert normalize_pattern(pattern) == want


ALLOWED = [
    # (image, patterns, admin images, allowed)
    ("python:3.11", ("python:3.*",), (), True),
    ("docker.io/library/python:3.11", ("python:3.*",), (), True),
    ("python:2.7", ("python:3.*",), (), False),
    ("registry.internal/vision/train:1", ("registry.internal/vision/*",), (), True),
    ("registry.internal/visionx/train:1", ("registry.internal/vision/*",), (), False),
    ("evil.io/vision/train:1", ("registry.internal/vision/*",), (), False),
    ("nvcr.io/nvidia/pytorch:24.05-py3", ("nvcr.io/nvidia/pytorch:2[45].*-py3",), (), True),
    ("nvcr.io/nvidia/pytorch:23.05-py3", ("nvcr.io/nvidia/pytorch:2[45].*-py3",), (), False),
    # the default: no pattern, only images the admin layers name (as the same reference)
    ("python", (), ("python:latest",), True),
    ("docker.io/library/python:latest", (), ("python",), True),
    ("python:3.12", (), ("python:3.11",), False),
    ("anything", (), (), False),
    ("anything", ("*",), (), True),
]


@pytest.mark.parametrize(("image", "patterns", "admin", "ok"), ALLOWED)
def test_image_allowed(image: str, patterns: tuple[str, ...], admin: tuple[str, ...], ok: bool) -> None:
    ctx = MemberContext("p", image_patterns=patterns, admin_images=admin)
    assert image_allowed(image, ctx) is ok


# ---- env names --------------------------------------------------------------------------------------
ENV = [
    ("NVIDIA_VISIBLE_DEVICES", "NVIDIA_*"),
    ("NVIDIA_DRIVER_CAPABILITIES", "NVIDIA_*"),
    ("CUDA_VISIBLE_DEVICES", "CUDA_*"),
    ("CUDA_DEVICE_ORDER", "CUDA_*"),
    ("CUDA_MPS_PIPE_DIRECTORY", "CUDA_*"),
    ("GPUPLAT_RUN_ID", "GPUPLAT_*"),
    ("JUPYTER_RUNTIME_DIR", "JUPYTER_*"),
    ("JUPYTERHUB_API_TOKEN", "JUPYTERHUB_*"),
    ("JPY_SESSION_NAME", "JPY_*"),
    ("KERNEL_ID", "KERNEL_*"),
    ("KUBERNETES_SERVICE_HOST", "KUBERNETES_*"),
    ("HIP_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES"),
    ("ROCR_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"),
    ("GPU_DEVICE_ORDINAL", "GPU_DEVICE_ORDINAL"),
    ("HOME", "HOME"),
    ("USER", "USER"),
    ("LOGNAME", "LOGNAME"),
    ("SHELL", "SHELL"),
    ("CUDA_LAUNCH_BLOCKING", None),
    ("CUDA_MODULE_LOADING", None),
    ("CUDA_DEVICE_MAX_CONNECTIONS", None),
    ("CUDA_CACHE_DISABLE", None),
    ("HF_HOME", None),
    ("WANDB_PROJECT", None),
    ("NCCL_DEBUG", None),
    ("PYTHONPATH", None),
    ("MY_NVIDIA_THING", None),
]


@pytest.mark.parametrize(("name", "under"), ENV)
def test_reserved_env_names(name: str, under: str | None) -> None:
    assert reserved_env(name) == under


# ---- the rule on the member layer ---------------------------------------------------------------
CTX = MemberContext(
    "team-b",
    connections=("scratch",),
    presets={
        "gpus": {"placement": {"node_selector": {"pool": "b"}, "tolerations": [{"key": "b", "operator": "Exists"}]}},
        "caps": {"env": [{"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "compute"}], "security": {"run_as_user": 7}},
        "plain": {"resources": {"gpu": 1}},
    },
    admin_images=("registry.internal/b/train:1",),
    node_selector={"zone": ["eu-1", "eu-2"], "disk": ["*"]},
    tolerations=("spot",),
)
TOL_A = {"key": "a", "operator": "Exists", "effect": "NoSchedule"}
CASES: list[tuple[str, dict[str, Any], list[tuple[str, str, list[str]]]]] = [
    ("nothing", {}, []),
    ("resources and kind", {"resources": {"gpu": 2}, "kind": "job", "queue": "q"}, []),
    ("a scratch volume", {"volumes": [{"name": "tmp", "mount_path": "/w"}]}, []),
    ("volumes deleted", {"volumes": None}, []),
    ("a source set to null", {"volumes": [{"name": "d", "host_path": None, "mount_path": "/d"}]}, []),
    *[
        (
            f"a {s} volume",
            {"volumes": [{"name": "d", s: "x", "mount_path": "/d"}]},
            [(f"volumes[d].{s}", "volumes.connection", ["scratch"])],
        )
        for s in ("host_path", "secret", "config_map", "claim")
    ],
    ("gpu_type", {"placement": {"gpu_type": "a100"}}, []),
    ("gpu_type deleted", {"placement": {"gpu_type": None}}, []),
    (
        "tolerations",
        {"placement": {"tolerations": [TOL_A]}},
        [("placement.tolerations", "placement.preset", ["preset:gpus", "toleration key spot"])],
    ),
    ("an allowed toleration", {"placement": {"tolerations": [{"key": "spot", "operator": "Exists"}]}}, []),
    (
        "a toleration of every taint",
        {"placement": {"tolerations": [{"operator": "Exists"}]}},
        [("placement.tolerations", "placement.preset", ["preset:gpus", "toleration key spot"])],
    ),
    (
        "a node selector",
        {"placement": {"node_selector": {"pool": "a"}}},
        [
            (
                "placement.node_selector",
                "placement.preset",
                ["preset:gpus", "node_selector zone=eu-1", "node_selector zone=eu-2", "node_selector disk=*"],
            )
        ],
    ),
    ("allowed labels", {"placement": {"node_selector": {"zone": "eu-2", "disk": "ssd"}}}, []),
    ("a label any value of which is allowed, deleted", {"placement": {"node_selector": {"disk": None}}}, []),
    (
        "a value outside the allowed ones",
        {"placement": {"node_selector": {"zone": "us-1"}}},
        [
            (
                "placement.node_selector",
                "placement.preset",
                ["preset:gpus", "node_selector zone=eu-1", "node_selector zone=eu-2", "node_selector disk=*"],
            )
        ],
    ),
    ("affinity", {"placement": {"affinity": {"nodeAffinity": {}}}}, [("placement.affinity", "placement.preset", [])]),
    ("placement deleted", {"placement": None}, [("placement", "placement.preset", ["preset:gpus"])]),
    (
        "tolerations deleted",
        {"placement": {"tolerations": None}},
        [("placement.tolerations", "placement.preset", ["preset:gpus"])],
    ),
    ("an admin-named image", {"image": "registry.internal/b/train:1"}, []),
    ("image deleted", {"image": None}, []),
    ("another image", {"image": "evil:1"}, [("image", "image.allowed", ["registry.internal/b/train:1"])]),
    ("plain env", {"env": [{"name": "HF_HOME", "value": "/x"}, {"name": "OLD", "value": None}]}, []),
    ("a tuning variable", {"env": [{"name": "CUDA_LAUNCH_BLOCKING", "value": "1"}]}, []),
    (
        "a device variable",
        {"env": [{"name": "CUDA_VISIBLE_DEVICES", "value": "0"}]},
        [
            (
                "env.CUDA_VISIBLE_DEVICES",
                "env.reserved",
                [
                    "CUDA_LAUNCH_BLOCKING",
                    "CUDA_MODULE_LOADING",
                    "CUDA_DEVICE_MAX_CONNECTIONS",
                    "CUDA_CACHE_DISABLE",
                    "CUDA_CACHE_MAXSIZE",
                    "CUDA_CACHE_PATH",
                    "CUDA_FORCE_PTX_JIT",
                    "CUDA_DISABLE_PTX_JIT",
                ],
            )
        ],
    ),
    (
        "a reserved name a preset sets, deleted",
        {"env": [{"name": "NVIDIA_DRIVER_CAPABILITIES", "value": None}]},
        [("env.NVIDIA_DRIVER_CAPABILITIES", "env.reserved", ["preset:caps"])],
    ),
    ("env deleted", {"env": None}, [("env", "env.reserved", [])]),
    (
        "security",
        {"security": {"run_as_root": True, "run_as_user": 0}},
        [("security.run_as_root", "security.preset", []), ("security.run_as_user", "security.preset", ["preset:caps"])],
    ),
    ("security deleted", {"security": None}, []),
    ("a relaxation deleted", {"security": {"run_as_user": None}}, []),
]


@pytest.mark.parametrize(("label", "member", "want"), CASES, ids=[c[0] for c in CASES])
def test_the_rule_on_the_member_layer(
    label: str, member: dict[str, Any], want: list[tuple[str, str, list[str]]]
) -> None:
    got = check(member, CTX)
    assert [(r.field, r.rule, r.allowed) for r in got] == want
    for r in got:
        assert r.code == "FieldNotAllowed" and r.status == 403
        assert r.field in r.message and r.rule in r.message and r.hint
        body = r.to_dict()
        assert set(body) == {"code", "message", "hint", "field", "rule", "allowed"}
    # what the refused parts leave behind is accepted
    assert check(strip(member, got), CTX) == []


def test_strip_keeps_what_is_allowed() -> None:
    member = {
        "placement": {"gpu_type": "a100", "tolerations": [TOL_A, {"key": "spot", "operator": "Exists"}]},
        "env": [{"name": "A", "value": "1"}, {"name": "HOME", "value": "/root"}],
        "volumes": [{"name": "tmp", "mount_path": "/t"}, {"name": "root", "host_path": "/", "mount_path": "/h"}],
        "image": "evil",
        "security": {"run_as_root": True},
    }
    assert strip(member, check(member, CTX)) == {
        "placement": {"gpu_type": "a100", "tolerations": [{"key": "spot", "operator": "Exists"}]},
        "env": [{"name": "A", "value": "1"}],
        "volumes": [{"name": "tmp", "mount_path": "/t"}],
    }


def test_provides_reads_the_resolved_spec() -> None:
    (tol,) = check({"placement": {"tolerations": [{"key": "b", "operator": "Exists"}]}}, CTX)
    assert provides({"placement": {"tolerations": [{"key": "b", "operator": "Exists", "effect": None}]}}, tol)
    assert not provides({"placement": {"tolerations": [TOL_A]}}, tol)
    (vol,) = check({"volumes": [{"name": "d", "claim": "data", "mount_path": "/d"}]}, CTX)
    assert provides({"connection_refs": [{"name": "data-conn", "kind": "volume", "claim": "data"}]}, vol)
    assert not provides({"volumes": [{"name": "d", "claim": "other"}]}, vol)
    (deleted,) = check({"env": [{"name": "HOME", "value": None}]}, CTX)
    assert not provides({}, deleted)  # a delete: no preset gives it


# ---- inside the policy -------------------------------------------------------------------------------
def platform(**over: Any) -> dict[str, Any]:
    cfg: dict[str, Any] = {
        "admins": ["ops"],
        "defaults": {
            "image": "registry.internal/base:1",
            "env": [{"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "compute,utility"}],
        },
        "queues": [{"name": "q"}],
        "presets": [
            {
                "name": "b-nodes",
                "placement": {"node_selector": {"pool": "b"}, "tolerations": [TOL_A | {"key": "b"}]},
                "image": "registry.internal/b/train:2",
                "security": {"run_as_user": 1000},
                "volumes": [{"name": "data", "host_path": "/srv/b", "mount_path": "/data"}],
            },
            {"name": "a-nodes", "placement": {"tolerations": [TOL_A]}},
            {"name": "plain", "resources": {"gpu": 1}},
        ],
        "projects": [
            {
                "name": "b",
                "members": {"erin": "member", "dave": "admin"},
                "default_queue": "q",
                "allowed_presets": ["b-nodes", "plain"],
            },
            {"name": "a", "members": {"bob": "member"}, "default_queue": "q", "allowed_presets": ["a-nodes"]},
        ],
        "connections": [
            {
                "name": "b-data",
                "kind": "volume",
                "claim": "b-data",
                "host_path": "/srv/b-data",
                "mount_path": "/d",
                "projects": ["b"],
            },
            {"name": "b-token", "kind": "secret", "secret": "b-token", "env": {"TOKEN": "t"}, "projects": ["b"]},
        ],
    }
    cfg.update(over)
    return cfg


def codes(cfg: dict[str, Any], user: str = "erin", **body: Any) -> list[tuple[str, str | None]]:
    req = RunRequest.model_validate({"project": "b", "command": "true", **body})
    res = resolve(parse_config(cfg), user, req)
    return [(v.code, getattr(v, "field", None)) for v in res.violations]


def test_presets_org_defaults_and_connections_keep_working() -> None:
    cfg = platform()
    assert codes(cfg, presets=["b-nodes"], connections=["b-data", "b-token"]) == []
    res = resolve(
        parse_config(cfg), "erin", RunRequest.model_validate({"project": "b", "command": "x", "presets": ["b-nodes"]})
    )
    assert res.resolved["volumes"][0]["host_path"] == "/srv/b" and res.resolved["security"] == {"run_as_user": 1000}
    assert res.provenance["env[NVIDIA_DRIVER_CAPABILITIES]"] == "org"
    # a preset that is not the project's stays PresetNotAllowed, its fields by hand FieldNotAllowed
    assert codes(cfg, presets=["a-nodes"]) == [("PresetNotAllowed", None)]
    assert codes(cfg, placement={"tolerations": [TOL_A]}) == [("FieldNotAllowed", "placement.tolerations")]


def test_platform_admins_write_presets_their_run_fields_follow_the_rule_too() -> None:
    cfg = platform()
    cfg["projects"][0]["members"]["ops"] = "member"
    assert codes(cfg, "ops", volumes=[{"name": "r", "host_path": "/"}]) == [("FieldNotAllowed", "volumes[r].host_path")]


def test_images_default_platform_and_project_patterns() -> None:
    cfg = platform()
    # no allowed_images anywhere: the images of the org defaults and of the project's presets
    assert codes(cfg, image="registry.internal/base:1") == []
    assert codes(cfg, image="registry.internal/b/train:2") == []
    assert codes(cfg, image="python:3.11") == [("FieldNotAllowed", "image")]
    cfg = platform(allowed_images=["python:3.*"])
    assert codes(cfg, image="docker.io/library/python:3.11") == []
    assert codes(cfg, image="registry.internal/b/other:1") == [("FieldNotAllowed", "image")]
    cfg["projects"][0]["allowed_images"] = ["registry.internal/b/*"]
    assert codes(cfg, image="registry.internal/b/other:1") == [] and codes(cfg, image="python:3.12") == []
    # the project's patterns are its own: team a does not get them
    req = RunRequest.model_validate({"project": "a", "command": "true", "image": "registry.internal/b/other:1"})
    assert [v.code for v in resolve(parse_config(cfg), "bob", req).violations] == ["FieldNotAllowed"]


def test_allowed_placement_per_project() -> None:
    cfg = platform()
    cfg["projects"][0]["allowed_placement"] = {"node_selector": {"zone": ["eu-1"]}, "tolerations": ["spot"]}
    assert codes(cfg, placement={"node_selector": {"zone": "eu-1"}, "tolerations": [{"key": "spot"}]}) == []
    assert codes(cfg, placement={"node_selector": {"zone": "us-1"}}) == [("FieldNotAllowed", "placement.node_selector")]
    assert codes(cfg, placement={"affinity": {"x": 1}}) == [("FieldNotAllowed", "placement.affinity")]


def test_project_admins_may_not_change_the_allow_lists() -> None:
    cfg = parse_config(platform())
    pr = cfg.project("b")
    assert pr is not None
    for field, value in (("allowed_images", ["*"]), ("allowed_placement", {"tolerations": ["a"]})):
        new = ProjectConfig.model_validate({**pr.model_dump(), field: value})
        with pytest.raises(Forbidden, match=f"{field} of project b is set by platform admins"):
            require_project_write(cfg, "dave", new)
        require_project_write(cfg, "ops", new)


# ---- alternatives are accepted by the same policy --------------------------------------------------
ALT_CASES = [
    ({"placement": {"tolerations": [TOL_A | {"key": "b"}]}}, ["use preset b-nodes"]),
    ({"placement": {"node_selector": {"pool": "b"}, "gpu_type": "x"}}, ["use preset b-nodes"]),
    ({"image": "registry.internal/b/train:2", "resources": {"gpu": 0}}, []),  # allowed: nothing to suggest
    ({"volumes": [{"name": "d", "host_path": "/srv/b", "mount_path": "/data"}]}, ["use preset b-nodes"]),
    ({"volumes": [{"name": "d", "claim": "b-data", "mount_path": "/d"}]}, ["use connection b-data"]),
    ({"security": {"run_as_user": 1000}}, ["use preset b-nodes"]),
    ({"placement": {"tolerations": [TOL_A]}}, []),  # only team a's preset sets it: none
    ({"security": {"run_as_root": True}}, []),
    ({"env": [{"name": "HOME", "value": "/root"}]}, []),
]


@pytest.mark.parametrize(("fields", "hints"), ALT_CASES)
def test_alternatives_give_what_was_asked_and_are_accepted(fields: dict[str, Any], hints: list[str]) -> None:
    cfg = parse_config(platform())
    req = RunRequest.model_validate({"project": "b", "command": "true", **fields})
    j = judge(cfg, "erin", req, 4)
    assert [h for a in j.alternatives for h in hints if h in a.hint] == hints, [a.hint for a in j.alternatives]
    assert len(j.alternatives) == len(hints)
    refused = [v for v in j.violations if isinstance(v, FieldNotAllowed)]
    for alt in j.alternatives:
        got, left = policy_check(cfg, "erin", apply(req, alt.changes), 4)
        assert left == [], (alt, left)
        assert all(provides(got.resolved, r) for r in refused), alt
        for r in refused:
            assert r.field in alt.hint
    # with no alternative, each refusal keeps the rule's own words (what is allowed)
    own = {v.field: v.hint for v in resolve(cfg, "erin", req).violations if isinstance(v, FieldNotAllowed)}
    for v in refused:
        assert (v.hint == own[v.field]) is (not j.alternatives), (v.hint, own[v.field])


# ---- the config keys ------------------------------------------------------------------------------------
def test_config_accepts_the_allow_lists() -> None:
    cfg = platform(allowed_images=["registry.internal/*"])
    cfg["projects"][0] |= {
        "allowed_images": ["nvcr.io/nvidia/pytorch:2*"],
        "allowed_placement": {"node_selector": {"zone": ["eu-1", "*"]}, "tolerations": ["spot"]},
    }
    parsed = parse_config(cfg)
    pr = parsed.project("b")
    assert pr is not None and pr.allowed_placement is not None
    assert parsed.allowed_images == ["registry.internal/*"] and pr.allowed_placement.tolerations == ["spot"]


@pytest.mark.parametrize(
    ("where", "value", "error"),
    [
        ("allowed_images", ["bad image"], "allowed_images[0]: an image pattern has no spaces"),
        ("allowed_images", [""], "allowed_images[0]: must not be empty"),
        ("allowed_images", "python:*", "allowed_images: Input should be a valid list"),
        (
            "project.allowed_placement",
            {"tolerations": ["*"]},
            "projects[0].allowed_placement.tolerations[0]: name a taint key",
        ),
        ("project.allowed_placement", {"affinity": {}}, "projects[0].allowed_placement.affinity: unknown field"),
        (
            "project.allowed_placement",
            {"node_selector": {"zone": "eu-1"}},
            "projects[0].allowed_placement.node_selector.zone: Input should be a valid list",
        ),
    ],
)
def test_config_errors_name_the_path(where: str, value: Any, error: str) -> None:
    cfg = platform()
    if where.startswith("project."):
        cfg["projects"][0][where.removeprefix("project.")] = value
    else:
        cfg[where] = value
    with pytest.raises(ConfigErrors) as exc:
        parse_config(cfg)
    assert any(e.startswith(error) for e in exc.value.errors), exc.value.errors
