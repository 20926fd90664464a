"""Tracking inside runs → indexed metrics → metrics and compare endpoints."""

from __future__ import annotations

import os
import re
import signal
import sys
from pathlib import Path
from typing import Any

PY = sys.executable

TRAIN = """
from jupyter_gpuplat import tracking
p = tracking.params()
tracking.log_params(lr=p.get("lr", 0.1), arch="resnet")
for step in range(50):
    tracking.log_metrics(step=step, loss=1.0 / (step + 1) * p.get("scale", 1), acc=step / 50)
open("model.txt", "w").write("weights")
tracking.log_output("model.txt", name="model/final.txt")
"""


async def test_metrics_params_outputs_and_compare(api: Any) -> None:
    a = await api.submit(name="a", command=[PY, "-c", TRAIN], params={"lr": 0.1, "scale": 1})
    b = await api.submit(name="b", command=[PY, "-c", TRAIN], params={"lr": 0.01, "scale": 2}, env={"SEED": "7"})
    for r in (a, b):
        await api.wait_status(r["id"], "succeeded")
    m = await api.ok("GET", f"runs/{a['id']}/metrics")
    assert set(m) == {"loss", "acc"}
    assert m["loss"]["steps"] == list(range(50))
    assert m["loss"]["values"] == [1.0 / (s + 1) for s in range(50)]
    assert m["acc"]["values"][-1] == 49 / 50
    small = await api.ok("GET", f"runs/{a['id']}/metrics", names="loss", max_points="10")
    assert list(small) == ["loss"] and len(small["loss"]["steps"]) <= 10
    assert small["loss"]["values"][0] == 1.0 and small["loss"]["values"][-1] == 1.0 / 50  # extremes kept
    outs = await api.ok("GET", f"runs/{a['id']}/outputs")
    assert "outputs/model/final.txt" in [o["path"] for o in outs["outputs"]]

    c = await api.ok("GET", "compare", runs=f"{a['id']},{b['id']}", metrics="loss")
    assert [r["id"] for r in c["runs"]] == [a["id"], b["id"]]
    ra, rb = c["runs"]
    assert ra["params"] == {"lr": 0.1, "scale": 1, "arch": "resnet"}
    assert rb["params"]["lr"] == 0.01
    assert c["params"]["differ"] == ["lr", "scale"]
    assert ra["metrics"]["loss"] == {"count": 50, "min": 1 / 50, "max": 1.0, "last": 1 / 50, "last_step": 49}
    assert rb["metrics"]["loss"]["max"] == 2.0
    paths = {d["path"]: d["values"] for d in c["config"]["differ"]}
    assert "name" in paths and any(p.startswith("env") for p in paths)
    assert c["curves"][b["id"]]["loss"]["values"][0] == 2.0
    assert "acc" not in c["curves"][a["id"]]


async def test_sigkill_mid_training_keeps_every_logged_metric(api: Any) -> None:
    code = (
        "import itertools\n"
        "from jupyter_gpuplat import tracking\n"
        "for step in itertools.count():\n"
        "    tracking.log_metrics(step=step, loss=step * 0.5)\n"
        "    print('logged', step, flush=True)\n"
    )
    run = await api.submit(command=[PY, "-c", code])
    log = await api.wait_log(run["id"], "logged 300\n")
    pid = (await api.run(run["id"]))["pid"]
    os.killpg(pid, signal.SIGKILL)
    final = await api.wait_status(run["id"], "failed", "stopped")
    assert "SIGKILL" in final["message"]
    log = await api.ok("GET", f"runs/{run['id']}/logs", format="text")
    # the run's stdout is unbuffered: the kill may cut the last line ("logged" alone)
    printed = [int(m[1]) for m in re.finditer(r"^logged (\d+)$", log.decode(), re.MULTILINE)]
    m = await api.ok("GET", f"runs/{run['id']}/metrics", max_points="1000000")
    steps = m["loss"]["steps"]
    # every metric whose 'logged' line was printed is there (the print came after the write)
    assert steps[: printed[-1] + 1] == list(range(printed[-1] + 1))
    assert steps == list(range(len(steps))) and m["loss"]["values"] == [s * 0.5 for s in steps]


async def test_metrics_and_compare_respect_project_access(api: Any) -> None:
    run = await api.submit(command=[PY, "-c", TRAIN])
    await api.wait_status(run["id"], "succeeded")
    code, body = await api("GET", f"runs/{run['id']}/metrics", "dave")
    assert code == 404 and body["error"]["message"] == f"run {run['id']!r} not found"
    mine = await api.submit("erin", project="team-b", command=[PY, "-c", TRAIN])
    await api.wait_status(mine["id"], "succeeded", user="erin")
    code, body = await api("GET", "compare", "erin", runs=f"{mine['id']},{run['id']}")
    assert code == 404 and run["id"] in body["error"]["message"]
    assert (await api.ok("GET", "compare", "carol", runs=run["id"]))["runs"][0]["metrics"]["loss"]["count"] == 50
    code, body = await api("GET", "compare")
    assert code == 400 and "give the runs to compare" in body["error"]["message"]
    code, body = await api("GET", f"runs/{run['id']}/metrics", max_points="0")
    assert code == 400


def test_tracking_outside_a_run_writes_locally_and_says_so(tmp_path: Path) -> None:
    import subprocess

    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUPLAT_")}
    out = subprocess.run(
        [
            PY,
            "-c",
            "from jupyter_gpuplat import tracking\nfor i in range(3): tracking.log_metrics(loss=i)\n"
            "print(tracking.artifacts_dir())",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert out.stderr.count("not inside a run") == 1
    root = Path(out.stdout.strip())
    assert root.is_relative_to(tmp_path / "gpuplat-local")
    from jupyter_gpuplat.core import metric_format as fmt
    from jupyter_gpuplat.engine.metric_log import concatenated, parse_records

    raw = (root / ".gpuplat" / "metrics.bin").read_bytes()
    end = fmt.committed(raw[: fmt.HEADER_BYTES])
    assert end == len(raw)
    out: dict[str, Any] = {}
    assert parse_records(raw[fmt.HEADER_BYTES :], fmt.HEADER_BYTES, lambda _: None, out) == end
    steps, values = concatenated(out)["loss"]
    assert steps.tolist() == [0, 1, 2] and values.tolist() == [0.0, 1.0, 2.0]
