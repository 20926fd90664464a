"""A crash of the Jupyter server loses nothing: runs re-attach, waiting runs dispatch in order.

Each scenario runs twice: with the default, the warm launcher (`warm`), and with launcher.py
spawned per run (`direct`, `warm_launcher = False`); the SIGKILL of the server must lose nothing
on either path.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ..server import ServerProcess


def gated(gate: Path) -> list[str]:
    code = (
        "import os, pathlib, time\n"
        "print('devices', os.environ['CUDA_VISIBLE_DEVICES'], flush=True)\n"
        f"while not pathlib.Path({str(gate)!r}).exists(): time.sleep(0.02)\n"
        "raise SystemExit(int(pathlib.Path(" + repr(str(gate)) + ").read_text() or 0))\n"
    )
    return [sys.executable, "-c", code]


def open_gate(gate: Path, code: str) -> None:
    """Write the exit code, then make the gate appear whole: the run never reads it half-written."""
    tmp = gate.with_suffix(".tmp")
    tmp.write_text(code)
    os.replace(tmp, gate)


@pytest.fixture(params=["warm", "direct"])
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ServerProcess]:
    extra = {"LocalExecutor": {"warm_launcher": False}} if request.param == "direct" else None
    srv = ServerProcess(tmp_path, extra_config=extra)
    srv.start()
    yield srv
    srv.stop()
    # Runs outlive servers by design; the test must not leak them.
    for run in srv.ok("GET", "runs", "ops")["runs"] if srv.proc and srv.proc.poll() is None else []:
        if run.get("pid"):
            try:
                os.killpg(run["pid"], signal.SIGKILL)
            except ProcessLookupError:
                pass


def test_sigkill_restart_reattaches_and_dispatches_in_order(server: ServerProcess, tmp_path: Path) -> None:
    gates = [tmp_path / f"gate{i}" for i in range(4)]
    ids = [
        server.ok(
            "POST", "runs", body={"project": "team-a", "name": f"r{i}", "presets": ["single-gpu"], "command": gated(g)}
        )["id"]
        for i, g in enumerate(gates)
    ]
    first = [server.wait_status(i, "running") for i in ids[:2]]
    assert [server.ok("GET", f"runs/{i}")["status"] for i in ids[2:]] == ["queued", "queued"]
    pids = [r["pid"] for r in first]

    server.kill()
    # While the server is down, run 0 finishes with exit code 3; run 1 keeps running.
    open_gate(gates[0], "3")
    for pid in pids:
        if pid == pids[0]:
            continue
        os.kill(pid, 0)  # still alive: the crash did not take the runs down

    server.start()
    try:
        r0 = server.wait_status(ids[0], "failed")
        assert r0["exit_code"] == 3 and "exited with code 3" in r0["message"]
        r1 = server.ok("GET", f"runs/{ids[1]}")
        assert r1["status"] == "running"
        assert any(e["reason"] == "Reattached" for e in r1["timeline"])
        # run 0's slot went to run 2 (submission order), run 3 still waits.
        r2 = server.wait_status(ids[2], "running")
        assert server.ok("GET", f"runs/{ids[3]}")["status"] == "queued"
        assert not set(r2["devices"]) & set(r1["devices"]), "no device handed out twice"
        explain = server.ok("GET", f"runs/{ids[3]}/explain")
        assert explain["reason"] == "QueueConcurrency" and explain["position"] == 1

        open_gate(gates[1], "0")
        assert server.wait_status(ids[1], "succeeded")["exit_code"] == 0  # observed on a re-attached process
        r3 = server.wait_status(ids[3], "running")
        assert not set(r3["devices"]) & set(r2["devices"])
        open_gate(gates[2], "0")
        open_gate(gates[3], "0")
        done = [server.wait_status(i, "succeeded", "failed") for i in ids]
        assert [r["status"] for r in done] == ["failed", "succeeded", "succeeded", "succeeded"]
        assert done[2]["dispatched_at"] < done[3]["dispatched_at"]
        for r in done:
            log = server.ok("GET", f"runs/{r['id']}/logs", format="text").decode()
            assert f"devices {r['devices'][0]}" in log  # nothing lost from the logs either
            statuses = [e["status"] for e in r["timeline"]]
            assert statuses[:2] == ["created", "queued"]
            assert statuses.index("dispatched") < statuses.index("running") < len(statuses) - 1
    finally:
        for g in gates:
            if not g.exists():
                open_gate(g, "0")


def test_stop_survives_restart_and_lost_process_is_reported(server: ServerProcess, tmp_path: Path) -> None:
    gate = tmp_path / "never"
    a = server.ok("POST", "runs", body={"project": "team-a", "command": gated(gate)})["id"]
    b = server.ok("POST", "runs", body={"project": "team-a", "command": gated(gate)})["id"]
    ra = server.wait_status(a, "running")
    rb = server.wait_status(b, "running")
    server.kill()
    # b's process disappears without an exit record while the server is down.
    os.killpg(rb["pid"], signal.SIGKILL)
    server.start()
    lost = server.wait_status(b, "failed")
    assert lost["reason"] in ("Lost", "Signaled"), lost
    assert server.ok("GET", f"runs/{a}")["status"] == "running"
    server.ok("POST", f"runs/{a}/stop")
    stopped = server.wait_status(a, "stopped")
    assert "stopped by alice" in stopped["message"]
    assert ra["pid"] == stopped["pid"]
