"""`gpuplat submit -f polyaxonfile.yaml` against a real server; `-f` alone still follows."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from ..server import ServerProcess

FIX = Path(__file__).parents[1] / "fixtures" / "polyaxon"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    srv = ServerProcess(tmp_path_factory.mktemp("polyaxon"))
    # a sweep child's command runs `python -m jupyter_gpuplat.polyaxon fill`: this interpreter's
    srv.env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{srv.env.get('PATH', '')}"
    srv.start()
    yield srv
    srv.stop()


def gp(server: ServerProcess, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return server.gpuplat(*args, check=check)


def write(server: ServerProcess, name: str, data: object) -> str:
    (server.root / name).write_text(yaml.safe_dump(data))
    return name


def test_component_with_params_resources_and_placement_runs(server: ServerProcess) -> None:
    component: dict[str, Any] = {
        "kind": "component",
        "tags": ["examples"],
        "inputs": [{"name": "greeting", "type": "str"}],
        "run": {
            "kind": "job",
            "environment": {"nodeSelector": {"pool": "gpu"}},
            "container": {
                "command": [sys.executable, "-c"],
                "args": ["print('{{ greeting }}', flush=True)"],
                "resources": {"limits": {"nvidia.com/gpu": 1, "memory": "1Gi"}},
            },
        },
    }
    op = {
        "version": 1.1,
        "kind": "operation",
        "name": "hello-polyaxon",
        "queue": "team-a-train",
        "params": {"greeting": {"value": "hi from polyaxon"}},
        "component": component,
    }
    # placement in the file is a run's own field: refused by name, nothing submitted
    before = len(server.ok("GET", "runs")["runs"])
    out = gp(server, "submit", "-p", "team-a", "-f", write(server, "placed.yaml", op), check=False)
    assert out.returncode == 1 and "component.run.environment.nodeSelector" in out.stderr
    assert "move it into a preset" in out.stderr
    assert len(server.ok("GET", "runs")["runs"]) == before
    # moved into a preset (a platform admin's) the file names, it runs there
    server.ok("PUT", "presets/gpu-pool", "ops", {"name": "gpu-pool", "placement": {"node_selector": {"pool": "gpu"}}})
    team_a = next(p for p in server.ok("GET", "projects", "ops")["projects"] if p["name"] == "team-a")
    record = {k: v for k, v in team_a.items() if k not in ("role", "usable_queues", "usable_presets")}
    server.ok("PUT", "projects/team-a", "ops", {**record, "allowed_presets": [*record["allowed_presets"], "gpu-pool"]})
    del component["run"]["environment"]
    f = write(server, "hello.yaml", {**op, "presets": ["gpu-pool"]})
    out = gp(server, "--json", "submit", "-p", "team-a", "-f", f)
    run = json.loads(out.stdout)
    assert run["name"] == "hello-polyaxon" and run["queue"] == "team-a-train"
    assert "run.container.command" in out.stderr  # the report: stderr, so stdout stays JSON
    done = server.wait_status(run["id"], "succeeded")
    shown = server.ok("GET", f"runs/{done['id']}")
    resolved = shown["resolved"]
    assert resolved["resources"]["gpu"] == 1 and resolved["resources"]["memory"] == "1Gi"
    assert resolved["placement"]["node_selector"] == {"pool": "gpu"}
    assert shown["provenance"]["placement.node_selector.pool"] == "preset:gpu-pool"
    assert resolved["params"] == {"greeting": "hi from polyaxon"}
    logs = gp(server, "runs", "logs", run["id"]).stdout
    assert logs.strip() == "hi from polyaxon"


def test_matrix_becomes_a_sweep_and_children_get_their_params(server: ServerProcess) -> None:
    f = write(
        server,
        "grid.yml",
        {
            "kind": "operation",
            "matrix": {"kind": "grid", "concurrency": 2, "params": {"x": {"kind": "choice", "value": [1, 2]}}},
            "component": {
                "run": {"kind": "job", "container": {"command": [sys.executable, "-c", "print('x={{ x }}')"]}}
            },
        },
    )
    out = gp(server, "submit", "-p", "team-a", "-f", f)
    sweep_id = out.stdout.split()[0]
    assert "sweep of" in out.stdout and "matrix.params.x" in out.stderr
    server.wait_status(sweep_id, "succeeded", timeout=60)
    children = server.ok("GET", "runs", parent=sweep_id)["runs"]
    logs = sorted(gp(server, "runs", "logs", c["id"]).stdout.strip() for c in children)
    assert logs == ["x=1", "x=2"]


def test_a_random_search_file_creates_its_sweep(server: ServerProcess) -> None:
    shutil.copy(FIX / "random-search.yaml", server.root / "seeds.yaml")
    server.ok("POST", "queues/team-a-train/pause", "ops")  # the children need a requirements.txt: let them wait
    try:
        sweep = json.loads(gp(server, "--json", "submit", "-p", "team-a", "-f", "seeds.yaml").stdout)
        assert sweep["kind"] == "sweep" and sweep["name"] == "lr-random-search"
        shown = server.ok("GET", f"runs/{sweep['id']}")
        assert shown["resolved"]["resources"]["cpu"] == "2"
        gp(server, "sweeps", "stop", sweep["id"])
    finally:
        server.ok("POST", "queues/team-a-train/resume", "ops")


def test_unknown_fields_refused_by_name_and_nothing_submitted(server: ServerProcess) -> None:
    f = write(
        server, "bad.yaml", {"kind": "component", "hooks": [], "run": {"container": {"command": ["true"], "gpuz": 1}}}
    )
    before = len(server.ok("GET", "runs")["runs"])
    out = gp(server, "submit", "-p", "team-a", "-f", f, check=False)
    assert out.returncode == 1
    assert "run.container.gpuz is not a Polyaxon field here" in out.stderr and "hooks has no equivalent" in out.stderr
    assert "hint: supported:" in out.stderr
    assert len(server.ok("GET", "runs")["runs"]) == before
    missing = gp(server, "submit", "-p", "team-a", "-f", "nope.yaml", check=False)
    assert missing.returncode == 1 and "no such polyaxonfile" in missing.stderr


def test_f_alone_still_follows_and_a_word_after_it_starts_the_command(server: ServerProcess) -> None:
    out = gp(server, "submit", "-p", "team-a", "-f", sys.executable, "-c", "print('followed', flush=True)")
    first, *rest = out.stdout.splitlines()
    assert "queue team-a-train" in first and rest == ["followed"]
    out = gp(server, "submit", "-p", "team-a", "--follow", "--", sys.executable, "-c", "print('too', flush=True)")
    assert out.stdout.splitlines()[1:] == ["too"]
