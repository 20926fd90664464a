"""GPU sessions end to end: a real Jupyter server, real kernels on the local executor.

Kernels are started the way JupyterLab starts them (POST /api/sessions with a gpuplat
kernelspec) and used over their websocket; the platform is read through its REST API.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from jupyter_gpuplat.executors import kernel_agent

from ..kernel_ws import (
    SESSIONS,
    KernelSocket,
    a_cell_sent_at_once_is_not_culled,
    add_kernelspec,
    headers,
    kernel_ids,
    session_of,
    start_kernel,
)
from ..server import ServerProcess
from ..waiting import until


def reasons(srv: ServerProcess, run_id: str) -> list[str]:
    return [e["reason"] for e in srv.ok("GET", f"runs/{run_id}")["timeline"]]


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    server = ServerProcess(tmp_path_factory.mktemp("sessions"), gpus=4, config_file=SESSIONS)
    server.start()
    yield server
    server.stop()


def end(srv: ServerProcess, run_id: str) -> dict[str, Any]:
    """Stop a session (if it still runs) and wait until it is final."""
    if srv.ok("GET", f"runs/{run_id}")["status"] not in ("stopped", "failed", "succeeded"):
        srv.call("POST", f"runs/{run_id}/stop")
    return srv.wait_status(run_id, "stopped", "failed", "succeeded")


def test_kernelspecs_offer_the_session_presets_the_user_may_use_and_follow_the_config(srv: ServerProcess) -> None:
    def specs() -> dict[str, Any]:
        return requests.get(srv.url + "api/kernelspecs", headers=headers(srv), timeout=30).json()["kernelspecs"]

    offered = {name: s["spec"] for name, s in specs().items() if name.startswith("gpuplat-")}
    assert set(offered) == {"gpuplat-notebook", "gpuplat-quick", "gpuplat-capped"}  # `big` is not allowed in team-a
    assert offered["gpuplat-notebook"]["display_name"] == "Python 3 (GPU · notebook)"
    assert offered["gpuplat-notebook"]["metadata"]["gpuplat"] == {"project": "team-a", "preset": "notebook"}
    project = {"name": "team-a", "members": {"alice": "admin", "bob": "member"}, "default_queue": "batch"}
    allowed = ["notebook", "quick", "capped", "single-gpu"]
    srv.ok("PUT", "projects/team-a", "ops", {**project, "allowed_presets": [*allowed, "big"]})
    try:
        assert "gpuplat-big" in specs()
        # In a second project too: every spec is named by its project then.
        srv.ok("PUT", "projects/team-b", "ops", {"name": "team-b", "members": {"dave": "admin", "alice": "member"}})
        names = {n for n in specs() if n.startswith("gpuplat-")}
        assert "gpuplat-team-a--notebook" in names and "gpuplat-team-b--quick" in names
        assert specs()["gpuplat-team-b--quick"]["spec"]["display_name"] == "Python 3 (GPU · quick · team-b)"
    finally:
        srv.ok("PUT", "projects/team-b", "ops", {"name": "team-b", "members": {"dave": "admin"}})
        srv.ok("PUT", "projects/team-a", "ops", {**project, "allowed_presets": allowed})
    assert {n for n in specs() if n.startswith("gpuplat-")} == {"gpuplat-notebook", "gpuplat-quick", "gpuplat-capped"}


def test_a_session_waits_in_its_queue_and_connects_when_the_gpu_frees(srv: ServerProcess) -> None:
    first = start_kernel(srv, "first.ipynb")
    assert first.status_code == 201, first.text
    kid = first.json()["kernel"]["id"]
    lease = session_of(srv, "first.ipynb")
    assert lease["kind"] == "session" and lease["status"] == "running" and len(lease["devices"]) == 1
    ks = KernelSocket(srv, kid)
    out, status = ks.execute("import os; print(os.environ['CUDA_VISIBLE_DEVICES'])")
    assert (out.strip(), status) == (str(lease["devices"][0]), "ok")
    ks.close()
    until(lambda: session_of(srv, "first.ipynb")["session"]["kernel"] == "ready", "the kernel to be ready")
    assert {"Admitted", "KernelStarting", "KernelReady"} <= set(reasons(srv, lease["id"]))

    # A second notebook of alice: the interactive queue allows one session per user.
    answer: dict[str, requests.Response] = {}
    waiter = threading.Thread(target=lambda: answer.setdefault("r", start_kernel(srv, "second.ipynb")))
    waiter.start()
    second = until(lambda: srv.ok("GET", "sessions", notebook="second.ipynb")["sessions"], "the second lease")[0]
    assert second["status"] == "queued" and second["reason"] == "UserLimit"
    why = srv.ok("GET", f"runs/{second['id']}/explain")
    assert why["position"] == 1 and "1/1" in why["message"]

    stopped_at = time.monotonic()
    srv.ok("POST", f"runs/{lease['id']}/stop")
    waiter.join(60)
    connected_after = time.monotonic() - stopped_at
    assert answer["r"].status_code == 201, answer["r"].text
    # The stopped session's kernel was shut down through the kernel manager: not restarted.
    until(lambda: kid not in kernel_ids(srv), "the stopped session's kernel to be gone")
    assert srv.wait_status(lease["id"], "stopped")["reason"] == "Stopped"
    now = session_of(srv, "second.ipynb")
    ks = KernelSocket(srv, answer["r"].json()["kernel"]["id"])
    out, _ = ks.execute("import os; print(os.environ['CUDA_VISIBLE_DEVICES'])")
    assert out.strip() == str(now["devices"][0])
    ks.close()
    print(f"stop -> connected: {connected_after:.2f} s")
    end(srv, now["id"])


def test_concurrent_sessions_never_share_a_device(srv: ServerProcess) -> None:
    # Each kernel is kept busy once it has said its devices: the 3 s idle limit must not free a
    # GPU for the next session before all three hold theirs at once.
    seen, sockets, leases = [], [], []
    for i in range(3):
        k = start_kernel(srv, f"par{i}.ipynb", "gpuplat-quick")
        assert k.status_code == 201, k.text
        leases.append(session_of(srv, f"par{i}.ipynb"))
        ks = KernelSocket(srv, k.json()["kernel"]["id"])
        seen.append(ks.execute("import os; print(os.environ['CUDA_VISIBLE_DEVICES'])")[0].strip())
        ks.send_execute("import time; time.sleep(120)")
        sockets.append(ks)
    assert all(srv.ok("GET", f"runs/{x['id']}")["status"] == "running" for x in leases)
    assert len(set(seen)) == 3 and sorted(seen) == sorted(str(x["devices"][0]) for x in leases)
    for lease, ks in zip(leases, sockets, strict=True):
        end(srv, lease["id"])
        ks.close()


def test_a_lease_still_queued_after_the_launch_wait_fails_the_start_with_its_position_and_stays_queued(
    srv: ServerProcess,
) -> None:
    add_kernelspec(srv, "gpuplat-test-wait", project="team-a", preset="notebook", launch_wait_seconds=1.0)
    holder = start_kernel(srv, "holder.ipynb")
    assert holder.status_code == 201
    held = session_of(srv, "holder.ipynb")
    started = time.monotonic()
    answer = start_kernel(srv, "late.ipynb", "gpuplat-test-wait")
    assert time.monotonic() - started < 30  # bounded: never near a proxy's 60 s
    assert answer.status_code >= 400
    text = answer.json()["message"]
    assert text.startswith("Waiting for a GPU: position 1 of 1 in interactive · UserLimit 1/1 · "), text
    assert "this notebook connects when admitted" in text
    late = session_of(srv, "late.ipynb")
    assert late["status"] == "queued"
    end(srv, held["id"])
    srv.wait_status(late["id"], "running")
    again = start_kernel(srv, "late.ipynb", "gpuplat-test-wait")  # what the notebook does when admitted
    assert again.status_code == 201, again.text
    assert session_of(srv, "late.ipynb")["id"] == late["id"]  # attached to the lease, not a new one
    end(srv, late["id"])


def test_a_refused_session_shows_the_policy_message_as_the_kernel_error_and_no_run_exists(srv: ServerProcess) -> None:
    add_kernelspec(srv, "gpuplat-shared-big", project="team-a", preset="big")
    before = srv.ok("GET", "runs")["runs"]
    answer = start_kernel(srv, "refused.ipynb", "gpuplat-shared-big")
    assert answer.status_code >= 400
    text = answer.json()["message"]
    assert text.startswith("GPU session refused:") and "big" in text, text
    assert "notebook" in text and "quick" in text  # the allowed values
    assert srv.ok("GET", "runs")["runs"] == before


def test_an_idle_session_is_warned_then_culled_and_its_gpu_returned(srv: ServerProcess) -> None:
    answer = start_kernel(srv, "idle.ipynb", "gpuplat-quick")
    assert answer.status_code == 201
    kid = answer.json()["kernel"]["id"]
    lease = session_of(srv, "idle.ipynb")
    ended = srv.wait_status(lease["id"], "stopped", timeout=30)
    assert ended["reason"] == "IdleTimeout"
    assert ended["message"] == f"no kernel activity for 3 s; GPU {lease['devices'][0]} returned"
    assert reasons(srv, lease["id"]).index("IdleWarning") < reasons(srv, lease["id"]).index("IdleTimeout")
    until(lambda: kid not in kernel_ids(srv), "the culled kernel to be gone")
    capacity = srv.ok("GET", "capacity")
    assert lease["devices"][0] not in [d["index"] for d in capacity["devices"] if d.get("run_id")]


def test_timeout_seconds_caps_a_session_and_its_kernel_is_shut_down(srv: ServerProcess) -> None:
    answer = start_kernel(srv, "capped.ipynb", "gpuplat-capped")
    assert answer.status_code == 201, answer.text
    kid = answer.json()["kernel"]["id"]
    lease = session_of(srv, "capped.ipynb")
    ended = srv.wait_status(lease["id"], "stopped", "failed", timeout=60)
    assert ended["reason"] == "TimedOut", ended
    # 60 s: a full suite on 2 cores was once seen taking over 20 s for the shutdown to show.
    until(lambda: kid not in kernel_ids(srv), "the capped session's kernel to be gone", timeout=60)


def test_a_busy_kernel_is_never_idle_and_keep_session_postpones_the_cull(srv: ServerProcess) -> None:
    answer = start_kernel(srv, "busy.ipynb", "gpuplat-quick")
    assert answer.status_code == 201
    lease = session_of(srv, "busy.ipynb")
    ks = KernelSocket(srv, answer.json()["kernel"]["id"])
    until(lambda: session_of(srv, "busy.ipynb")["session"]["kernel"] == "ready", "the kernel to be ready")
    msg = ks.send_execute("import time; time.sleep(5)")  # longer than the 3 s idle limit
    until(lambda: session_of(srv, "busy.ipynb")["session"]["busy"], "the kernel to be busy")
    assert session_of(srv, "busy.ipynb")["session"]["idle_deadline"] is None
    assert ks.wait_reply(msg) == "ok"
    assert srv.ok("GET", f"runs/{lease['id']}")["status"] == "running"  # not culled during the cell
    # The warning comes; "Keep session" starts the idle clock again.
    until(lambda: "IdleWarning" in reasons(srv, lease["id"]), "the idle warning")
    warned = session_of(srv, "busy.ipynb")["session"]["idle_deadline"]
    kept = srv.ok("POST", f"runs/{lease['id']}/keepalive")
    assert kept["session"]["idle_deadline"] > warned
    assert 0 <= kept["session"]["idle_for_seconds"] < 1
    ended = srv.wait_status(lease["id"], "stopped", timeout=30)
    assert ended["reason"] == "IdleTimeout" and ended["finished_at"] >= warned + 0.2
    assert "KeepAlive" in reasons(srv, lease["id"])
    ks.close()


def test_a_cell_sent_before_the_kernel_is_reported_ready_keeps_the_lease_busy(srv: ServerProcess) -> None:
    answer = start_kernel(srv, "run-all.ipynb", "gpuplat-quick")  # idle limit 3 s
    assert answer.status_code == 201, answer.text
    lease = session_of(srv, "run-all.ipynb")
    a_cell_sent_at_once_is_not_culled(srv, srv, answer.json()["kernel"]["id"], lease["id"], 3)


def test_only_the_lease_s_own_kernel_ends_it_by_shutting_down(srv: ServerProcess) -> None:
    """Shutting down a kernel the lease has moved on from (an older start for the same notebook) leaves it running."""
    answer = start_kernel(srv, "owned.ipynb", "gpuplat-notebook")
    assert answer.status_code == 201, answer.text
    kid = answer.json()["kernel"]["id"]
    lease = session_of(srv, "owned.ipynb")
    until(lambda: session_of(srv, "owned.ipynb")["session"]["kernel_id"] == kid, "the kernel reported ready")
    srv.ok("POST", f"runs/{lease['id']}/kernel", body={"event": "shutdown", "kernel_id": "an-older-kernel"})
    assert srv.ok("GET", f"runs/{lease['id']}")["status"] == "running"
    r = requests.delete(srv.url + f"api/kernels/{kid}", headers=headers(srv), timeout=60)
    assert r.status_code == 204
    assert srv.wait_status(lease["id"], "stopped")["reason"] == "KernelShutdown"


def test_restart_and_interrupt_stay_inside_the_lease_and_shutdown_ends_it(srv: ServerProcess) -> None:
    answer = start_kernel(srv, "restart.ipynb")
    assert answer.status_code == 201
    kid = answer.json()["kernel"]["id"]
    lease = session_of(srv, "restart.ipynb")
    ks = KernelSocket(srv, kid)
    assert ks.execute("x = 41")[1] == "ok"
    r = requests.post(srv.url + f"api/kernels/{kid}/restart", headers=headers(srv), timeout=60)
    assert r.status_code == 200, r.text
    ks.close()
    ks = KernelSocket(srv, kid)
    out, status = ks.execute("import os; print(os.environ['CUDA_VISIBLE_DEVICES']); x")
    assert status == "error" and "NameError" in out and out.startswith(str(lease["devices"][0]))
    after = session_of(srv, "restart.ipynb")
    assert (after["id"], after["devices"], after["status"]) == (lease["id"], lease["devices"], "running")
    until(lambda: "KernelRestarted" in reasons(srv, lease["id"]), "the restart on the timeline")

    # Interrupted once its code runs: a SIGINT during the kernel's own set-up of the cell can be lost.
    msg = ks.send_execute("print('spinning', flush=True)\nwhile True: pass")
    ks.wait_output(msg, "spinning")
    until(lambda: session_of(srv, "restart.ipynb")["session"]["busy"], "the cell to run")
    r = requests.post(srv.url + f"api/kernels/{kid}/interrupt", headers=headers(srv), timeout=30)
    assert r.status_code == 204
    assert ks.wait_reply(msg) == "error"  # KeyboardInterrupt
    ks.close()

    r = requests.delete(srv.url + f"api/kernels/{kid}", headers=headers(srv), timeout=60)
    assert r.status_code == 204
    done = srv.wait_status(lease["id"], "stopped")
    assert done["reason"] == "KernelShutdown" and f"GPU {lease['devices'][0]} returned" in done["message"]


def test_a_server_killed_with_a_running_session_keeps_its_record_and_re_adopts_the_kernel(tmp_path: Path) -> None:
    srv = ServerProcess(tmp_path, gpus=2, config_file=SESSIONS)
    srv.start()
    try:
        answer = start_kernel(srv, "keep.ipynb")
        assert answer.status_code == 201
        lease = session_of(srv, "keep.ipynb")
        ks = KernelSocket(srv, answer.json()["kernel"]["id"])
        assert ks.execute("x = 42")[1] == "ok"
        ks.close()
        srv.kill()
        srv.start()
        run = srv.ok("GET", f"runs/{lease['id']}")
        assert (run["status"], run["devices"]) == ("running", lease["devices"])
        # Its kernel kept running in the agent: up, before any notebook has connected again.
        until(lambda: session_of(srv, "keep.ipynb")["session"]["kernel"] == "ready", "the kept kernel to read ready")
        in_use = {d["index"] for d in srv.ok("GET", "capacity")["devices"] if d.get("run_id") == lease["id"]}
        assert in_use == set(lease["devices"])
        # The other GPU is the only one left for a new session.
        other = start_kernel(srv, "other.ipynb", "gpuplat-quick")
        assert other.status_code == 201
        assert session_of(srv, "other.ipynb")["devices"] != lease["devices"]
        # Opening the notebook again attaches to the same lease and the same kernel.
        again = start_kernel(srv, "keep.ipynb")
        assert again.status_code == 201, again.text
        assert session_of(srv, "keep.ipynb")["id"] == lease["id"]
        ks = KernelSocket(srv, again.json()["kernel"]["id"])
        assert ks.execute("print(x)") == ("42\n", "ok")
        ks.close()
        # A graceful restart leaves the session running too (the server forgets, not stops, its kernel).
        srv.stop()
        srv.start()
        assert srv.ok("GET", f"runs/{lease['id']}")["status"] == "running"
        again = start_kernel(srv, "keep.ipynb")
        assert again.status_code == 201, again.text
        ks = KernelSocket(srv, again.json()["kernel"]["id"])
        assert ks.execute("print(x + 1)") == ("43\n", "ok")
        ks.close()
    finally:
        srv.stop_all_runs()  # the sessions' kernels outlive the server (that is what it tests)
        srv.stop()


def gpuplat_lab(srv: ServerProcess) -> subprocess.Popen[bytes]:
    """`gpuplat lab` (it execs `jupyter lab`) on the test server's config, port and root; up when it answers."""
    argv = [sys.executable, "-m", "jupyter_gpuplat.cli", "lab", "--config", str(SESSIONS), "--user", "alice"]
    argv += ["--gpus", "2", "--no-browser", "--ip=127.0.0.1", f"--port={srv.port}", "--ServerApp.port_retries=0"]
    with open(srv.root / "lab.log", "ab") as log:  # the child has its own copy of the descriptor
        proc = subprocess.Popen(argv, env=srv.env, stdout=log, stderr=subprocess.STDOUT, cwd=srv.root)
    srv.proc = proc

    def answers() -> bool:
        assert proc.poll() is None, (srv.root / "lab.log").read_text()[-3000:]
        try:
            return srv.call("GET", "whoami")[0] == 200
        except requests.ConnectionError:
            return False

    until(answers, "gpuplat lab to answer", timeout=60)
    return proc


def test_gpuplat_lab_exits_on_one_sigterm_and_its_session_outlives_it(tmp_path: Path) -> None:
    """One SIGTERM stops the server promptly, also after a session start that failed (jupyter_client
    keeps a failed start among its pending kernels: the cleanup's 404 for it kept the process alive);
    the lease is not ended and the next server re-attaches its kernel, state intact."""
    srv = ServerProcess(tmp_path, gpus=2, config_file=SESSIONS)
    proc = gpuplat_lab(srv)
    try:
        answer = start_kernel(srv, "keep.ipynb")
        assert answer.status_code == 201, answer.text
        lease = session_of(srv, "keep.ipynb")
        ks = KernelSocket(srv, answer.json()["kernel"]["id"])
        assert ks.execute("x = 42")[1] == "ok"
        ks.close()
        # A second notebook on the interactive queue waits (one session per user there): its start fails.
        add_kernelspec(srv, "gpuplat-wait", project="team-a", preset="notebook", launch_wait_seconds=0.5)
        assert start_kernel(srv, "waits.ipynb", "gpuplat-wait").status_code >= 400
        assert start_kernel(srv, "plain.ipynb", "python3").status_code == 201  # a kernel of no lease
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == 0, (srv.root / "lab.log").read_text()[-3000:]

        srv.start()
        kept = srv.ok("GET", f"runs/{lease['id']}")
        assert (kept["status"], kept["devices"]) == ("running", lease["devices"])
        assert not [e for e in kept["timeline"] if e["status"] in ("stopping", "stopped")]
        again = start_kernel(srv, "keep.ipynb")
        assert again.status_code == 201, again.text
        assert session_of(srv, "keep.ipynb")["id"] == lease["id"]
        ks = KernelSocket(srv, again.json()["kernel"]["id"])
        assert ks.execute("print(x)") == ("42\n", "ok")
        ks.close()
    finally:
        srv.stop_all_runs()
        srv.stop()


def test_the_agent_gives_up_on_a_kernel_that_keeps_dying(tmp_path: Path) -> None:
    path = str(tmp_path / "kernel.json")
    argv = [
        sys.executable,
        kernel_agent.__file__,
        "--connection-file",
        path,
        "--",
        sys.executable,
        "-c",
        "raise SystemExit(3)",
    ]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert proc.returncode == kernel_agent.KERNEL_DIED, proc.stdout
    assert "exited 5 times" in proc.stdout
    info = json.loads(Path(path).read_text())
    assert info["ip"] == "127.0.0.1" and len({info[p] for p in kernel_agent.PORT_NAMES}) == 5
    assert json.loads(Path(path + ".state").read_text())["generation"] == 5
    assert oct(Path(path).stat().st_mode & 0o777) == "0o600"


def test_a_renamed_notebook_keeps_its_lease_and_its_default_name(srv: ServerProcess) -> None:
    """New notebooks are all Untitled.ipynb: once renamed (the sidebar's PATCH on JupyterLab's
    rename), the lease is found at the new path on reload and its default name follows; a name
    that is not a notebook path, another user, and a run that is no session are refused."""
    answer = start_kernel(srv, "Untitled.ipynb")
    assert answer.status_code == 201, answer.text
    lease = session_of(srv, "Untitled.ipynb")
    assert lease["name"] == "Untitled.ipynb"
    code, body = srv.call("PATCH", f"runs/{lease['id']}", body={"notebook": "notes.txt"})
    assert code == 400 and "notebook" in body["error"]["message"], body
    code, body = srv.call("PATCH", f"runs/{lease['id']}", user="bob", body={"notebook": "x.ipynb"})
    assert code in (403, 404), (code, body)
    moved = srv.ok("PATCH", f"runs/{lease['id']}", body={"notebook": "exp/resnet.ipynb"})
    assert moved["name"] == "exp/resnet.ipynb" and moved["session"]["notebook"] == "exp/resnet.ipynb", moved
    assert session_of(srv, "exp/resnet.ipynb")["id"] == lease["id"]
    assert srv.ok("GET", "sessions", notebook="Untitled.ipynb")["sessions"] == []
    assert srv.ok("GET", f"runs/{lease['id']}")["reason"] == lease["reason"]  # nothing happened to the run
    ended = end(srv, lease["id"])
    code, body = srv.call("PATCH", f"runs/{ended['id']}", body={"notebook": "late.ipynb"})
    assert code == 409, (code, body)


def test_a_gpu_judged_session_where_gpu_use_is_not_measured_is_judged_by_its_kernel_and_says_so(
    tmp_path: Path,
) -> None:
    """`termination.idle_by: gpu` on this server's declared GPUs, which NVML cannot read: the status and
    the cull say GPU use is not measured and why, and the kernel's 3 s idle limit ends the session."""
    fast = {"LocalExecutor": {"gpu_sample_seconds": 0.5}}
    srv = ServerProcess(tmp_path, gpus=2, config_file=SESSIONS, extra_config=fast)
    srv.start()
    try:
        body = {"project": "team-a", "presets": ["quick"], "notebook": "blind.ipynb"}
        refused = srv.call("POST", "runs", body={**body, "termination": {"idle_by": "cpu"}})
        assert refused[0] == 400 and "termination.idle_by" in refused[1]["error"]["message"], refused
        assert "'kernel', 'gpu' or 'both'" in refused[1]["error"]["message"]
        lease = srv.ok("POST", "runs", body={**body, "termination": {"idle_by": "gpu"}})
        why = "the GPUs are declared (LocalExecutor.gpus), not found: none is sampled"
        plain = f"GPU use is not measured here ({why}); idleness judged by kernel activity"

        def blind() -> dict[str, Any] | None:
            sess = srv.ok("GET", f"runs/{lease['id']}")["session"]
            return sess if sess["gpu_not_measured"] == why or sess["kernel"] == "ended" else None

        sess = until(blind, "the first GPU sampling tick")
        assert (sess["idle_by"], sess["idle_judged_by"], sess["gpu_idle_threshold"]) == ("gpu", "kernel", 5.0)
        assert sess["idle_reason"].startswith(f"{plain}: no kernel activity for ")
        ended = srv.wait_status(lease["id"], "stopped", timeout=30)
        assert ended["reason"] == "IdleTimeout"
        assert ended["message"] == f"no kernel activity for 3 s; GPU {ended['devices'][0]} returned — {plain}"
        (warning,) = [e for e in ended["timeline"] if e["reason"] == "IdleWarning"]
        assert warning["details"]["idle_by"] == "kernel" and warning["message"].endswith(f"unless kept — {plain}")
    finally:
        srv.stop()
