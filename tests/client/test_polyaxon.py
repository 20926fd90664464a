"""Polyaxon's published files into presets and run requests, with the per-field report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from jupyter_gpuplat.cli.polyaxon import import_presets, load, main, split_follow, submit_body
from jupyter_gpuplat.core.config import parse_config
from jupyter_gpuplat.core.errors import InvalidInput
from jupyter_gpuplat.core.matrix import Matrix, count
from jupyter_gpuplat.core.polyaxon import Refused, convert_preset
from jupyter_gpuplat.core.polyaxon_op import FILL, convert_operation
from jupyter_gpuplat.core.request import RunRequest

FIX = Path(__file__).parents[1] / "fixtures" / "polyaxon"


def notes_of(notes: list[Any]) -> dict[str, Any]:
    return {n.field: (n.to, n.note) for n in notes}


def test_presets_become_presets_with_a_report() -> None:
    presets, reports = import_presets(sorted(str(p) for p in FIX.glob("preset-*.yaml")))
    by = {p["name"]: p for p in presets}
    assert by["eight-gpus"] == {"name": "eight-gpus", "merge": "isnull", "resources": {"gpu": 8}}
    assert by["a100-pool"] == {
        "name": "a100-pool",
        "placement": {"node_selector": {"pool": "a100"}},
    }  # no patchStrategy: post_merge (the default), so not written
    machine = by["two-gpus-shared-queue"]
    assert machine["queue"] == "shared-gpus" and machine["resources"] == {"gpu": 2}
    rep = notes_of(reports["two-gpus-shared-queue"])
    assert rep["runPatch.container.resources.limits.nvidia.com/gpu"][0] == "resources.gpu"
    assert rep["runPatch.environment.nodeSelector"][0] == "placement.node_selector"
    assert rep["queue"] == ("queue", "the agent 'my-agent' is dropped: queues are the platform's")
    assert "post_merge" in rep["patchStrategy"][1] and "says replace" in rep["patchStrategy"][1]
    assert "same name and meaning" in notes_of(reports["eight-gpus"])["patchStrategy"][1]
    # the output is a valid piece of a platform config (with the queue it names)
    cfg = parse_config({"queues": [{"name": "shared-gpus", "concurrency": 2}], "presets": presets})
    assert cfg.preset("eight-gpus") and cfg.preset("eight-gpus").merge == "isnull"  # type: ignore[union-attr]


def test_preset_fields_without_equivalent_are_reported_and_unknown_ones_refused() -> None:
    preset = {
        "patchStrategy": "replace",
        "queue": "gpus",
        "cache": {"disable": True},
        "termination": {"timeout": 3600, "maxRetries": 2},
        "runPatch": {
            "environment": {
                "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
                "labels": {"a": "b"},
            },
            "container": {"image": "pytorch:2", "env": [{"name": "A", "value": 1}], "imagePullPolicy": "Always"},
        },
    }
    out, notes = convert_preset("p", preset)
    assert out == {
        "name": "p",
        "merge": "replace",
        "queue": "gpus",
        "termination": {"timeout_seconds": 3600},
        "placement": {"tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]},
        "image": "pytorch:2",
        "env": [{"name": "A", "value": "1"}],
    }
    rep = notes_of(notes)
    for field in (
        "cache",
        "termination.maxRetries",
        "runPatch.environment.labels",
        "runPatch.container.imagePullPolicy",
    ):
        assert rep[field][0] is None and rep[field][1], field
    assert rep["termination.timeout"][0] == "termination.timeout_seconds"
    with pytest.raises(Refused) as exc:
        convert_preset("p", {"runPatch": {"contaner": {}}, "qeue": "x", "patchStrategy": "postMerge"})
    msg = exc.value.message
    assert "runPatch.contaner is not a Polyaxon field" in msg and "qeue is not a Polyaxon field" in msg
    assert "patchStrategy 'postMerge' is not one of replace, isnull, post_merge, pre_merge" in msg


def test_a_random_search_becomes_a_sweep_request() -> None:
    body, notes = submit_body(str(FIX / "random-search.yaml"), "team-a")
    assert body["name"] == "lr-random-search"
    assert body["matrix"] == {
        "kind": "random",
        "num_runs": 5,
        "concurrency": 2,
        "seed": 7,
        "params": {"lr": {"choice": [0.0001, 0.0005, 0.001, 0.005, 0.01]}},
    }
    assert body["resources"] == {"cpu": "2", "memory": "2Gi"} and body["image"] == "python:3.11-slim"
    # {{ lr }} is a matrix param: filled in each child at run time
    assert body["command"][: len(FILL)] == FILL and body["command"][len(FILL) : len(FILL) + 2] == ["sh", "-c"]
    assert "--lr {{ lr }}" in body["command"][-1]
    assert "working_dir" not in body  # Polyaxon globals: the run starts where gpuplat submit is run
    rep = notes_of(notes)
    assert rep["component.run.container.resources.requests.cpu"][0] == "resources.cpu"
    assert rep["matrix.params.lr"][0] == "matrix.params.lr.choice"
    assert rep["run.container.workingDir"][0] is None
    req = RunRequest.model_validate(body)
    assert req.matrix is not None and count(req.matrix) == 5


def test_a_grid_over_a_component_file(tmp_path: Path) -> None:
    grid = load(FIX / "mnist" / "grid.yml")
    # A component with a git init: refused by name through pathRef, nothing half-read.
    with pytest.raises(Refused, match=r"run.init has no equivalent \(no init containers"):
        submit_body(str(FIX / "mnist" / "grid.yml"), "team-a")
    component = yaml.safe_load((FIX / "mnist" / "component.yml").read_text())
    with pytest.raises(Refused, match=r"run.init has no equivalent \(no init containers"):
        convert_operation("team-a", grid, component)
    del component["run"]["init"]  # cloning the code is the user's: the run starts in their directory
    body, notes = convert_operation("team-a", grid, component)
    m = Matrix.model_validate(body["matrix"])
    assert m.kind == "grid" and m.concurrency == 3 and count(m) == 12
    assert body["matrix"]["params"]["hidden"] == {"range": [16, 64, 16]}
    assert body["matrix"]["params"]["lr_exp"] == {"range": [-4, -1, 1]}
    assert body["command"] == [*FILL, "python", "-u", "train_mnist.py", "--units={{ units }}"] + [
        f"--{n}={{{{ {n} }}}}" for n in ("dropout", "optimizer", "hidden", "lr_exp")
    ]
    assert "params" not in body  # every input is a matrix param
    assert notes_of(notes)["component.tags"][0] is None


def test_a_random_with_pchoice_is_refused_by_name() -> None:
    data = load(FIX / "mnist" / "random.yml")
    component = {"kind": "component", "run": {"kind": "job", "container": {"command": ["true"]}}}
    with pytest.raises(Refused) as exc:
        convert_operation("team-a", data, component)
    assert "matrix.params.optimizer.kind 'pchoice' has no equivalent (supported: choice, range, linspace, uniform)" in (
        exc.value.message
    )
    assert "supported:" in exc.value.hint


def test_run_patch_gpu_limit_and_placement_over_a_component() -> None:
    op = load(FIX / "operation-gpu.yml")
    with pytest.raises(InvalidInput, match=r"pathRef \./missing-component\.yaml not found"):
        submit_body(str(FIX / "operation-gpu.yml"), "team-a")
    component = {
        "kind": "component",
        "inputs": [{"name": "steps", "type": "int", "value": 10}],
        "run": {
            "kind": "job",
            "environment": {
                "nodeSelector": {"pool": "a100"},
                "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "tolerationSeconds": 60}],
            },
            "container": {
                "image": "img",
                "command": ["python", "train.py"],
                "args": ["--steps={{ steps }}"],
                "resources": {"limits": {"cpu": 4, "memory": "8Gi"}},
            },
        },
    }
    # placement in a submitted operation is a run's own field: refused by name, to move into a preset
    with pytest.raises(Refused) as exc:
        convert_operation("team-a", op, component)
    for key, to in (("nodeSelector", "node_selector"), ("tolerations", "tolerations")):
        assert (
            f"component.run.environment.{key}: placement.{to} comes from the platform's presets: move it into a preset"
        ) in exc.value.message
    # the same environment in a Polyaxon preset file is what becomes placement (test_a_preset_file...)
    preset, _ = convert_preset("a100", {"runPatch": {"environment": component["run"].pop("environment")}})
    assert preset["placement"] == {
        "node_selector": {"pool": "a100"},
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "toleration_seconds": 60}],
    }
    body, notes = convert_operation("team-a", op, component)
    assert body["resources"] == {"cpu": 4, "memory": "8Gi", "gpu": 1} and "placement" not in body
    assert body["command"] == ["python", "train.py", "--steps=10"] and body["params"] == {"steps": 10}
    assert notes_of(notes)["runPatch.container.resources.limits.nvidia.com/gpu"][0] == "resources.gpu"
    RunRequest.model_validate(body)
    component["run"]["kind"] = "pytorchjob"
    with pytest.raises(Refused, match="only kind job runs here"):
        convert_operation("team-a", op, component)


def test_unknown_and_unsupported_fields_refused_by_name() -> None:
    op = {
        "kind": "operation",
        "hooks": [{"connection": "slack"}],
        "colour": "blue",
        "params": {"lr": {"ref": "ops.a", "value": "outputs.lr"}},
        "component": {
            "run": {
                "kind": "job",
                "container": {"command": ["x"], "gpuz": 1, "resources": {"limits": {"amd.com/gpu": 1}}},
            },
        },
    }
    with pytest.raises(Refused) as exc:
        convert_operation("team-a", op)
    msg = exc.value.message
    for part in (
        "hooks has no equivalent (no hooks after a run ends)",
        "colour is not a Polyaxon field here",
        "params.lr: only literal {value: ...} params",
        "component.run.container.gpuz is not a Polyaxon field here",
        "component.run.container.resources.limits.amd.com/gpu has no equivalent",
    ):
        assert part in msg, part
    with pytest.raises(Refused, match=r"\{\{ globals.run_uuid \}\} is not a param or input"):
        convert_operation(
            "team-a", {"kind": "component", "run": {"container": {"command": ["echo", "{{ globals.run_uuid }}"]}}}
        )


def test_submit_f_rule(tmp_path: Path) -> None:
    f = tmp_path / "op.yaml"
    f.write_text("kind: component\n")
    assert split_follow(True, ["python", "x.py"]) == (None, True, ["python", "x.py"])
    assert split_follow(False, ["python"]) == (None, False, ["python"])
    assert split_follow(False, [str(f)]) == (None, False, [str(f)])  # no -f: a command named op.yaml
    assert split_follow(True, ["--", str(f)]) == (None, True, ["--", str(f)])
    assert split_follow(True, [str(f), "-q", "x"]) == (str(f), False, ["-q", "x"])
    with pytest.raises(InvalidInput, match="no such polyaxonfile"):
        split_follow(True, [str(tmp_path / "missing.yml")])


def test_import_command_writes_presets_and_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "presets.yaml"
    files = [str(FIX / "preset-eight-gpus.yaml"), str(FIX / "preset-a100-pool.yaml")]
    assert main(["--url", "http://x/", "--token", "t", "polyaxon", *files, "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "# preset eight-gpus" in text and "-> resources.gpu" in text and "wrote 2 preset(s)" in text
    assert [p["name"] for p in yaml.safe_load(out.read_text())["presets"]] == ["eight-gpus", "a100-pool"]
    assert main(["--json", "polyaxon", files[0]]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["presets"][0]["merge"] == "isnull"
    assert {"field": "runPatch.container.resources.limits.nvidia.com/gpu", "to": "resources.gpu", "note": ""} in (
        data["report"]["eight-gpus"]
    )
    bad = tmp_path / "bad.yaml"
    bad.write_text("runPatch: {contaner: {}}\n")
    assert main(["polyaxon", str(bad)]) == 1
    assert "runPatch.contaner is not a Polyaxon field" in capsys.readouterr().err


def test_malformed_sections_are_refused_not_crashed(tmp_path: Path) -> None:
    f = tmp_path / "op.yaml"
    f.write_text('kind: component\nrun:\n  container:\n    workingDir: ""{{ globals.artifacts_path }}"\n')
    with pytest.raises(InvalidInput, match="not valid YAML"):
        submit_body(str(f), "team-a")
    f.write_text("kind: component\nrun: {container: {command: [x], resources: {limits: [1]}}}\n")
    with pytest.raises(InvalidInput, match="wrong shape"):
        submit_body(str(f), "team-a")
    f.write_text(
        "kind: operation\nmatrix: {kind: grid, params: {x: {kind: choice}}}\n"
        "component: {run: {container: {command: [x]}}}\n"
    )
    with pytest.raises(Refused, match=r"matrix.params.x.value must be a list"):
        submit_body(str(f), "team-a")


def test_a_reserved_env_name_in_an_operation_is_refused_a_preset_keeps_it() -> None:
    env = [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}, {"name": "WANDB_PROJECT", "value": "p"}]
    run = {"kind": "job", "container": {"command": ["x"], "env": env}}
    with pytest.raises(Refused) as exc:
        convert_operation("team-a", {"kind": "component", "run": run})
    assert (
        "run.container.env[0] NVIDIA_VISIBLE_DEVICES: NVIDIA_* is reserved for the platform: move it into a preset"
        in (exc.value.message)
    )
    assert "WANDB_PROJECT" not in exc.value.message
    preset, _ = convert_preset("p", {"runPatch": {"container": run["container"] | {"command": None}}})
    assert {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"} in preset["env"]
