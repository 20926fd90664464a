"""The kernel side in a real kernel: %gpu_submit, tracking inside the run, Compare reading it back."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest
from jupyter_client import BlockingKernelClient

from ..server import ServerProcess
from ..widget_env import run_cells, texts


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    srv = ServerProcess(tmp_path_factory.mktemp("kernel"))
    srv.start()
    yield srv
    srv.stop()


TRAIN_CELL = """%%gpu_submit --preset single-gpu --name nb-train --param scale=3 --wait
from jupyter_gpuplat import tracking
s = tracking.params()["scale"]
for step in range(20):
    tracking.log_metrics(step=step, loss=s / (step + 1), acc=step / 20)
print("trained")
"""


def test_cell_submitted_tracked_and_compared_in_a_real_kernel(server: ServerProcess) -> None:
    outs = run_cells(
        server,
        [
            "%load_ext jupyter_gpuplat",
            TRAIN_CELL,
            "import json\n"
            "from jupyter_gpuplat.widgets import Compare\n"
            "c = Compare([gpu_last_run['id']])\n"
            "print(json.dumps({'status': gpu_last_run['status'], 'loss': c.data['curves'][gpu_last_run['id']]['loss'],"
            " 'summary': c.data['runs'][0]['metrics']['loss'], 'params': c.data['runs'][0]['params']}))",
        ],
    )
    assert "ERROR" not in texts(outs[1]) and "succeeded in queue team-a-train" in texts(outs[1])
    assert any("application/vnd.jupyter.widget-view+json" in o.get("data", {}) for o in outs[1])
    got = json.loads(texts(outs[2]).strip().splitlines()[-1])
    assert got["status"] == "succeeded"
    assert got["loss"]["steps"] == list(range(20))
    assert got["loss"]["values"] == [3 / (s + 1) for s in range(20)]
    assert got["summary"] == {"count": 20, "min": 3 / 20, "max": 3.0, "last": 3 / 20, "last_step": 19}
    assert got["params"] == {"scale": 3}
    run = server.ok("GET", "runs", "alice", q="nb-train")["runs"][0]
    assert b"trained" in server.ok("GET", f"runs/{run['id']}/logs", format="text")


def test_full_queue_shows_explain_and_disallowed_queue_shows_allowed(server: ServerProcess, tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    hold = [
        sys.executable,
        "-c",
        f"import pathlib,time\nwhile not pathlib.Path({str(gate)!r}).exists(): time.sleep(.02)",
    ]
    holders = [
        server.ok("POST", "runs", body={"project": "team-a", "presets": ["single-gpu"], "command": hold})["id"]
        for _ in range(2)
    ]
    for h in holders:
        server.wait_status(h, "running")
    try:
        outs = run_cells(
            server,
            [
                "%load_ext jupyter_gpuplat",
                "%%gpu_submit --preset single-gpu\nprint('waits')",
                "%%gpu_submit --queue team-b-train\nprint('never')",
                "%gpu_explain",
            ],
        )
        queued = texts(outs[1])
        assert "queued in queue team-a-train" in queued
        assert "QueueConcurrency" in queued and "2/2 runs dispatched" in queued and "position 1 of 1" in queued
        refused = texts(outs[2])
        assert "gpu_submit refused" in refused and "QueueNotAllowed" in refused
        assert "allowed queues: team-a-train, interactive" in refused
        assert "ERROR" not in refused and "Traceback" not in refused
        assert "</b>: <b>queue</b> — QueueConcurrency" in texts(outs[3])
    finally:
        gate.touch()
    waiting = [r for r in server.ok("GET", "runs", "alice")["runs"] if r["command"][-1] == "cell.py"]
    for r in waiting:
        server.wait_status(r["id"], "succeeded")


def test_script_and_notebook_line_magic(server: ServerProcess) -> None:
    root = server.root
    (root / "job.py").write_text("import sys; print('job args', sys.argv[1:])")
    nb = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_code_cell("x = 1", metadata={"tags": ["parameters"]}),
            nbformat.v4.new_code_cell("print('x is', x)"),
        ]
    )
    nbformat.write(nb, root / "analysis.ipynb")
    outs = run_cells(
        server,
        [
            "%load_ext jupyter_gpuplat",
            "%gpu_submit --wait job.py --epochs 3",
            "%gpu_submit --wait --param x=42 analysis.ipynb",
        ],
    )
    runs = {r["name"]: r for r in server.ok("GET", "runs", "alice")["runs"]}
    ended = {name: (r["status"], r["reason"], r["message"]) for name, r in runs.items()}  # said on a miss
    assert "succeeded" in texts(outs[1]) and "succeeded" in texts(outs[2]), ended
    assert b"job args ['--epochs', '3']" in server.ok("GET", f"runs/{runs['job.py']['id']}/logs", format="text")
    nb_run = runs["analysis.ipynb"]["id"]
    assert b"x is 42" in server.ok("GET", f"runs/{nb_run}/logs", format="text")
    executed = nbformat.reads(server.ok("GET", f"runs/{nb_run}/outputs/outputs/analysis.ipynb").decode(), 4)
    assert executed.cells[1].metadata["tags"] == ["injected-parameters"]
    assert "x is 42" in executed.cells[2].outputs[0]["text"]


def test_kernel_started_by_the_server_finds_it_without_configuration(server: ServerProcess) -> None:
    import requests

    headers = {"Authorization": f"token {server.token}"}
    kernel = requests.post(f"{server.url}api/kernels", json={"name": "python3"}, headers=headers, timeout=60).json()
    try:
        kc = BlockingKernelClient(
            connection_file=str(Path(server.env["JUPYTER_RUNTIME_DIR"]) / f"kernel-{kernel['id']}.json")
        )
        kc.load_connection_file()
        kc.start_channels()
        kc.wait_for_ready(timeout=60)
        seen: list[dict[str, Any]] = []
        env_clear = "import os\nfor k in ('GPUPLAT_URL', 'GPUPLAT_TOKEN'): os.environ.pop(k, None)\n"
        reply = kc.execute_interactive(
            env_clear + "from jupyter_gpuplat.client import Client\nprint('me:', Client().whoami()['user'])",
            timeout=60,
            output_hook=lambda msg: seen.append(msg),
        )
        assert reply["content"]["status"] == "ok"
        printed = "".join(m["content"].get("text", "") for m in seen if m["msg_type"] == "stream")
        assert "me: alice" in printed  # the server's own token: its owner (GpuPlat.default_user)
        kc.stop_channels()
    finally:
        requests.delete(f"{server.url}api/kernels/{kernel['id']}", headers=headers, timeout=60)
