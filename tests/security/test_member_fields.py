"""Hostile spec fields: what a plain member writes in a run's own fields, against a real server.

erin is a member of team-b. Each class of field only platform admins may grant (volume
sources, placement, images, reserved env names, security relaxations) is tried by hand, the
placement copied from team-a's preset; preview says not allowed with a FieldNotAllowed
violation naming the field, the rule and what is allowed, and POST runs answers 403 and
creates nothing. The same fields through a preset team-b may use are accepted.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import yaml

from jupyter_gpuplat.client import Client, GpuPlatAPIError

from ..conftest import EXAMPLE

MEMBER, PROJECT = "erin", "team-b"
TEAM_A_PLACEMENT = {
    "node_selector": {"pool": "team-a-h100"},
    "tolerations": [{"key": "team-a", "operator": "Exists", "effect": "NoSchedule"}],
    "affinity": {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": "pool", "operator": "In", "values": ["a"]}]}]
            }
        }
    },
}
TEAM_B_TOLERATION = {"key": "team-b", "operator": "Exists", "effect": "NoSchedule"}
TEAM_B_IMAGE = "registry.internal/team-b/train:1"


@pytest.fixture
def platform_config_file(tmp_path: Path) -> Path:
    cfg = yaml.safe_load(EXAMPLE.read_text())
    cfg.pop("allowed_images", None)  # the default: only images the admin layers name
    cfg["presets"] += [
        {"name": "team-a-reserved", "description": "team-a's reserved nodes", "placement": TEAM_A_PLACEMENT},
        {
            "name": "team-b-gpus",
            "placement": {"node_selector": {"pool": "team-b"}, "tolerations": [TEAM_B_TOLERATION]},
        },
        {
            "name": "team-b-data",
            "image": TEAM_B_IMAGE,
            "volumes": [{"name": "data", "host_path": "/srv/team-b-data", "mount_path": "/data", "read_only": True}],
            "env": [{"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "compute,utility"}],
            "security": {"run_as_user": 1000},
        },
    ]
    for pr in cfg["projects"]:
        pr["allowed_presets"] += ["team-a-reserved"] if pr["name"] == "team-a" else ["team-b-gpus", "team-b-data"]
    cfg["connections"] = [
        {"name": "team-b-scratch", "kind": "volume", "claim": "team-b-scratch", "host_path": str(tmp_path),
         "mount_path": "/scratch", "projects": ["team-b"]},
        {"name": "team-a-data", "kind": "volume", "claim": "team-a-data", "host_path": str(tmp_path),
         "mount_path": "/data", "projects": ["team-a"]},
    ]  # fmt: skip
    path = tmp_path / "platform.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def body(**fields: Any) -> dict[str, Any]:
    return {"project": PROJECT, "command": ["true"], **fields}


async def run_count(api: Any) -> int:
    return len((await api.ok("GET", "runs", "ops"))["runs"])


async def refused(api: Any, req: dict[str, Any], field: str, rule: str) -> dict[str, Any]:
    """Preview: not allowed, with the violation; POST: 403 FieldNotAllowed and no run. Returns the error."""
    preview = await api.ok("POST", "runs/preview", MEMBER, req)
    verdict = preview["verdict"]
    assert verdict["allowed"] is False, verdict
    mine = [v for v in verdict["violations"] if v["code"] == "FieldNotAllowed" and v.get("field") == field]
    assert len(mine) == 1, verdict["violations"]
    (v,) = mine
    assert v["rule"] == rule and isinstance(v["allowed"], list), v
    assert field in v["message"] and rule in v["message"], v
    before = await run_count(api)
    code, err = await api("POST", "runs", MEMBER, req)
    assert code == 403, (code, err)
    e = err["error"]
    assert e["code"] == "FieldNotAllowed" and {"message", "hint", "field", "rule", "allowed"} <= set(e), e
    assert field in e["message"]
    assert await run_count(api) == before
    return dict(e)


@pytest.mark.parametrize(
    ("source", "value"),
    [("host_path", "/"), ("secret", "gpuplat-control-plane"), ("config_map", "kube-root-ca.crt"), ("claim", "db")],
)
async def test_a_volume_source_in_run_fields_is_refused(api: Any, source: str, value: str) -> None:
    req = body(volumes=[{"name": "x", source: value, "mount_path": "/mnt/x"}])
    e = await refused(api, req, f"volumes[x].{source}", "volumes.connection")
    # what is allowed: the connections team-b may use (not team-a's)
    assert e["allowed"] == ["team-b-scratch"], e
    assert e["alternatives"] == []


async def test_a_volume_without_a_source_is_scratch_and_allowed(api: Any) -> None:
    preview = await api.ok("POST", "runs/preview", MEMBER, body(volumes=[{"name": "tmp", "mount_path": "/tmp/w"}]))
    assert preview["verdict"]["allowed"] is True, preview["verdict"]


@pytest.mark.parametrize("key", ["node_selector", "tolerations", "affinity"])
async def test_placement_copied_from_another_teams_preset_is_refused(api: Any, key: str) -> None:
    # the preset itself is not team-b's
    code, err = await api("POST", "runs", MEMBER, body(presets=["team-a-reserved"]))
    assert code == 403 and err["error"]["code"] == "PresetNotAllowed"
    # the same fields written by hand
    e = await refused(api, body(placement={key: TEAM_A_PLACEMENT[key]}), f"placement.{key}", "placement.preset")
    want = [] if key == "affinity" else ["preset:team-b-gpus"]
    assert e["allowed"] == want, e
    # no team-b preset sets team-a's placement: nothing to suggest
    assert e["alternatives"] == [], e["alternatives"]


async def test_placement_a_team_preset_sets_is_suggested_as_that_preset(api: Any) -> None:
    req = body(placement={"tolerations": [TEAM_B_TOLERATION], "gpu_type": "any"})
    e = await refused(api, req, "placement.tolerations", "placement.preset")
    (alt,) = e["alternatives"]
    assert alt["changes"] == {"placement": {"gpu_type": "any"}, "presets": ["team-b-gpus"]}, alt
    assert "use preset team-b-gpus" in alt["hint"] and "team-b-gpus" in e["hint"]
    fixed = {**req, **alt["changes"]}
    preview = await api.ok("POST", "runs/preview", MEMBER, fixed)
    assert preview["verdict"]["allowed"] is True, preview["verdict"]


async def test_gpu_type_stays_member_settable(api: Any) -> None:
    preview = await api.ok("POST", "runs/preview", MEMBER, body(placement={"gpu_type": "a100"}))
    assert preview["verdict"]["allowed"] is True, preview["verdict"]


async def test_an_image_no_admin_layer_names_is_refused(api: Any) -> None:
    e = await refused(api, body(image="docker.io/evil/miner:latest"), "image", "image.allowed")
    # no allowed_images: only the images the admin layers team-b may use name
    assert e["allowed"] == [TEAM_B_IMAGE], e


async def test_an_image_matching_the_projects_allowed_images(api: Any) -> None:
    projects = {p["name"]: p for p in (await api.ok("GET", "projects", "ops"))["projects"]}
    record = {k: v for k, v in projects["team-b"].items() if k not in ("role", "usable_queues", "usable_presets")}
    await api.ok("PUT", "projects/team-b", "ops", {**record, "allowed_images": ["python:3.*"]})
    preview = await api.ok("POST", "runs/preview", MEMBER, body(image="docker.io/library/python:3.11"))
    assert preview["verdict"]["allowed"] is True, preview["verdict"]
    e = await refused(api, body(image="docker.io/evil/python:3.11"), "image", "image.allowed")
    assert e["allowed"] == ["python:3.*", TEAM_B_IMAGE], e


async def test_an_image_a_team_preset_names_is_allowed(api: Any) -> None:
    preview = await api.ok("POST", "runs/preview", MEMBER, body(image=TEAM_B_IMAGE))
    assert preview["verdict"]["allowed"] is True, preview["verdict"]


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("NVIDIA_VISIBLE_DEVICES", "all"),
        ("CUDA_VISIBLE_DEVICES", "0,1,2,3"),
        ("CUDA_MPS_PIPE_DIRECTORY", "/tmp/other-mps"),
        ("GPUPLAT_RUN_ID", "someone-elses"),
        ("JUPYTERHUB_API_TOKEN", "x"),
        ("KUBERNETES_SERVICE_HOST", "10.0.0.1"),
        ("HOME", "/root"),
        ("CUDA_VISIBLE_DEVICES", None),  # deleting a reserved name is setting it too
    ],
)
async def test_a_reserved_env_name_is_refused(api: Any, name: str, value: str | None) -> None:
    e = await refused(api, body(env=[{"name": name, "value": value}]), f"env.{name}", "env.reserved")
    assert "resources.gpu" in e["hint"] or name in e["message"]


async def test_cuda_tuning_variables_stay_allowed(api: Any) -> None:
    env = [{"name": "CUDA_LAUNCH_BLOCKING", "value": "1"}, {"name": "CUDA_MODULE_LOADING", "value": "LAZY"}]
    preview = await api.ok("POST", "runs/preview", MEMBER, body(env=env))
    assert preview["verdict"]["allowed"] is True, preview["verdict"]


async def test_security_in_run_fields_is_refused(api: Any) -> None:
    e = await refused(api, body(security={"run_as_root": True}), "security.run_as_root", "security.preset")
    assert e["allowed"] == [], e  # no preset team-b may use sets it
    e = await refused(api, body(security={"run_as_user": 0}), "security.run_as_user", "security.preset")
    assert e["allowed"] == ["preset:team-b-data"] and e["alternatives"] == [], e  # that one sets 1000, not 0


async def test_a_sweep_with_a_volume_source_creates_nothing(api: Any) -> None:
    matrix = {"kind": "grid", "params": {"lr": {"values": [0.1, 0.01]}}}
    req = body(matrix=matrix, volumes=[{"name": "root", "host_path": "/", "mount_path": "/host"}])
    await refused(api, req, "volumes[root].host_path", "volumes.connection")


async def test_every_class_at_once_names_every_field(api: Any) -> None:
    req = body(
        image="evil:latest",
        volumes=[{"name": "root", "host_path": "/", "mount_path": "/host"}],
        placement={"tolerations": TEAM_A_PLACEMENT["tolerations"]},
        env=[{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}],
        security={"allow_privilege_escalation": True},
    )
    verdict = (await api.ok("POST", "runs/preview", MEMBER, req))["verdict"]
    fields = {v["field"] for v in verdict["violations"] if v["code"] == "FieldNotAllowed"}
    assert fields == {
        "image",
        "volumes[root].host_path",
        "placement.tolerations",
        "env.NVIDIA_VISIBLE_DEVICES",
        "security.allow_privilege_escalation",
    }, verdict
    code, err = await api("POST", "runs", MEMBER, req)
    assert code == 403 and err["error"]["code"] == "FieldNotAllowed"
    for f in fields:
        assert f in err["error"]["message"]


async def test_the_same_fields_through_team_b_presets_are_accepted(api: Any) -> None:
    await api.ok("POST", "queues/team-b-train/pause", "ops")  # acceptance is the point: nothing needs to run
    try:
        req = body(presets=["team-b-gpus", "team-b-data"])
        preview = await api.ok("POST", "runs/preview", MEMBER, req)
        assert preview["verdict"]["allowed"] is True, preview["verdict"]
        resolved, prov = preview["resolved"], preview["provenance"]
        assert resolved["placement"]["tolerations"] == [TEAM_B_TOLERATION]
        assert resolved["volumes"][0]["host_path"] == "/srv/team-b-data" and resolved["image"] == TEAM_B_IMAGE
        assert resolved["security"] == {"run_as_user": 1000}
        assert prov["volumes[data]"] == "preset:team-b-data" and prov["env[NVIDIA_DRIVER_CAPABILITIES]"] == (
            "preset:team-b-data"
        )
        run = await api.submit(MEMBER, **req)
        assert run["status"] == "queued"
        await api.ok("POST", f"runs/{run['id']}/stop", MEMBER)
    finally:
        await api.ok("POST", "queues/team-b-train/resume", "ops")


async def test_a_connection_team_b_may_use_is_the_way_to_a_volume(api: Any) -> None:
    preview = await api.ok("POST", "runs/preview", MEMBER, body(connections=["team-b-scratch"]))
    assert preview["verdict"]["allowed"] is True, preview["verdict"]
    code, err = await api("POST", "runs/preview", MEMBER, body(connections=["team-a-data"]))
    assert code == 200 and err["verdict"]["violations"][0]["code"] == "ConnectionNotAllowed"


async def test_project_admins_may_not_change_allowed_images_or_placement(api: Any) -> None:
    projects = {p["name"]: p for p in (await api.ok("GET", "projects", "dave"))["projects"]}
    mine = {k: v for k, v in projects["team-b"].items() if k not in ("role", "usable_queues", "usable_presets")}
    for field, value in (("allowed_images", ["docker.io/*"]), ("allowed_placement", {"tolerations": ["team-a"]})):
        code, err = await api("PUT", "projects/team-b", "dave", {**mine, field: value})
        assert code == 403 and "set by platform admins" in err["error"]["message"], err
    await api.ok("PUT", "projects/team-b", "ops", {**mine, "allowed_placement": {"tolerations": ["spot"]}})
    spot = {"key": "spot", "operator": "Exists", "effect": "NoSchedule"}
    preview = await api.ok("POST", "runs/preview", MEMBER, body(placement={"tolerations": [spot]}))
    assert preview["verdict"]["allowed"] is True, preview["verdict"]
    e = await refused(api, body(placement={"tolerations": TEAM_A_PLACEMENT["tolerations"]}), "placement.tolerations",
                      "placement.preset")  # fmt: skip
    assert "toleration key spot" in e["allowed"], e


async def test_the_python_client_gets_the_field_the_rule_and_what_is_allowed(api: Any, jp_serverapp: Any) -> None:
    client = Client(url=jp_serverapp.connection_url, token="tok-erin")
    req = {"env": {"NVIDIA_VISIBLE_DEVICES": "all"}}
    with pytest.raises(GpuPlatAPIError) as exc:
        await asyncio.to_thread(client.submit, PROJECT, ["true"], **req)
    err = exc.value
    assert (err.status, err.code) == (403, "FieldNotAllowed")
    assert (err.error["field"], err.error["rule"], err.error["allowed"]) == (
        "env.NVIDIA_VISIBLE_DEVICES",
        "env.reserved",
        [],
    )
    assert "resources.gpu" in err.hint
