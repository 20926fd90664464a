"""Every Python entry point of a GPU session makes the same lease: the client, `gpuplat sessions`,
`%gpu_session` in a real kernel, and the Launcher's "GPU session" tab, against a real server.

The interactive queue lets a user hold one session (max_per_user 1), so a second one waits
(UserLimit) until the first is stopped: that is how each entry point is seen waiting and then
admitted, without pausing anything.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from jupyter_gpuplat.client import Client, GpuPlatAPIError
from jupyter_gpuplat.notebook.widgets import Launcher, SessionView
from jupyter_gpuplat.notebook.widgets import _html as h
from jupyter_gpuplat.notebook.widgets.session import session_state_text

from ..kernel_ws import KernelSocket
from ..server import ServerProcess
from ..waiting import until
from ..widget_env import run_cells, served, texts

SESSIONS = Path(__file__).parents[1] / "fixtures" / "sessions.yaml"
WAITING = re.compile(
    r"position 1 of 1 in interactive · UserLimit 1/1 · "
    r"alice has 1/1 runs dispatched in queue interactive \(max_per_user\)"
)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    yield from served(tmp_path_factory, "sessions")


@pytest.fixture(autouse=True)
def no_session_left(server: ServerProcess) -> Iterator[None]:
    """Each test starts with no session of alice's, and leaves none (nor a widget thread)."""
    yield
    for r in server.ok("GET", "sessions")["sessions"]:
        server.call("POST", f"runs/{r['id']}/stop")
    for r in server.ok("GET", "runs", kind="session")["runs"]:
        server.wait_status(r["id"], "stopped", "failed", "succeeded")
    for t in threading.enumerate():
        if t.name.startswith("gpuplat-"):
            t.join(10)
            assert not t.is_alive(), f"thread {t.name} still running after the test"


def notebook_kernel(path: Path) -> dict[str, Any]:
    return dict(json.loads(path.read_text())["metadata"]["kernelspec"])


def running(server: ServerProcess, run_id: str) -> dict[str, Any]:
    return server.wait_status(run_id, "running")


# ---- the client ------------------------------------------------------------------------------------
def test_client_lease_with_a_new_notebook_on_the_preset_kernel(server: ServerProcess, client: Client) -> None:
    client.root_dir = str(server.root)  # as when found through the runtime files
    lease = client.start_session("team-a")
    assert lease["kind"] == "session" and lease["presets"] == ["notebook"] and lease["queue"] == "interactive"
    notebook = lease["session"]["notebook"]
    # No notebook given: a new one where we are (the current directory is not under this root: its top).
    assert re.fullmatch(r"gpu-session-\d{8}-\d{6}\.ipynb", notebook)
    assert notebook_kernel(server.root / notebook) == {
        "name": "gpuplat-notebook",
        "display_name": "Python 3 (GPU · notebook)",
        "language": "python",
    }
    assert lease["id"] in (server.root / notebook).read_text()
    assert running(server, lease["id"])["devices"]
    assert [s["id"] for s in client.sessions()] == [lease["id"]]
    assert [s["id"] for s in client.sessions(notebook=notebook)] == [lease["id"]]
    assert client.sessions(notebook="other.ipynb") == []
    kept = client.keepalive(lease["id"])
    assert kept["reason"] == "KeepAlive" and kept["session"]["idle_deadline"] is not None

    # An existing notebook is leased as it is (nothing written to it).
    mine = server.root / "mine.ipynb"
    mine.write_text(json.dumps({"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    before = mine.read_text()
    second = client.start_session("team-a", "notebook", str(mine))
    assert second["status"] == "queued" and second["session"]["notebook"] == "mine.ipynb"
    assert mine.read_text() == before
    assert [s["id"] for s in client.sessions()] == [second["id"], lease["id"]]  # newest first
    assert client.stop(second["id"])["status"] == "stopped"


def test_the_notebook_a_lease_creates_opens_on_the_lease(server: ServerProcess, client: Client) -> None:
    lease = client.start_session("team-a", notebook="opened/gpu.ipynb")
    devices = running(server, lease["id"])["devices"]
    # Opened as JupyterLab opens it: a kernel session on the kernelspec the notebook names.
    kernel = notebook_kernel(server.root / "opened" / "gpu.ipynb")["name"]
    auth = {"Authorization": f"token {server.token}"}
    body = {"path": "opened/gpu.ipynb", "type": "notebook", "name": "gpu.ipynb", "kernel": {"name": kernel}}
    opened = requests.post(server.url + "api/sessions", headers=auth, json=body, timeout=90)
    assert opened.status_code == 201, opened.text
    ks = KernelSocket(server, opened.json()["kernel"]["id"])
    try:
        out, status = ks.execute("import os; print(os.environ['CUDA_VISIBLE_DEVICES'])")
    finally:
        ks.close()
    assert (out.strip(), status) == (",".join(map(str, devices)), "ok")
    (attached,) = client.sessions(notebook="opened/gpu.ipynb")
    assert attached["id"] == lease["id"]  # the kernel runs in the lease: no second one
    until(lambda: client.get(lease["id"])["session"]["kernel"] == "ready", "the kernel to be ready")
    closed = requests.delete(server.url + f"api/sessions/{opened.json()['id']}", headers=auth, timeout=60)
    assert closed.status_code == 204
    assert server.wait_status(lease["id"], "stopped")["reason"] == "KernelShutdown"


def test_client_refusals_name_what_is_allowed(server: ServerProcess, client: Client) -> None:
    before = len(server.ok("GET", "runs", kind="session")["runs"])
    notebooks = set(server.root.rglob("*.ipynb"))
    with pytest.raises(GpuPlatAPIError) as job:
        client.start_session("team-a", "single-gpu")
    assert job.value.code == "NotASessionPreset"
    assert job.value.message == "preset single-gpu is a job preset, not a GPU session"
    assert job.value.hint == "session presets in team-a: notebook"
    with pytest.raises(GpuPlatAPIError) as unknown:
        client.start_session("team-a", "nope")
    assert unknown.value.code == "UnknownPreset" and "single-gpu, multi-gpu, notebook" in unknown.value.hint
    with pytest.raises(GpuPlatAPIError) as outside:
        client.start_session("team-a", notebook="../elsewhere.ipynb")
    assert "not under the Jupyter root" in outside.value.message
    # This server offers kernels for its owner's (alice's) session presets only: none for team-b,
    # so erin gets no lease whose notebook nobody could open on it.
    erin = Client(url=server.url, token="tok-erin")
    try:
        with pytest.raises(GpuPlatAPIError) as nokernel:
            erin.start_session("team-b")
        assert nokernel.value.code == "NoSessionKernel"
        assert (
            nokernel.value.message == "this Jupyter server offers no kernel for preset 'notebook' in project 'team-b'"
        )
        assert "GPU session kernels here: gpuplat-notebook" in nokernel.value.hint
        assert erin.sessions() == []
    finally:
        erin.session.close()
    assert len(server.ok("GET", "runs", kind="session")["runs"]) == before  # no lease was made
    assert set(server.root.rglob("*.ipynb")) == notebooks  # nor a notebook


# ---- gpuplat sessions --------------------------------------------------------------------------------
def test_cli_sessions_start_list_keep_stop(server: ServerProcess) -> None:
    here = server.root / "cli"
    here.mkdir()
    first = json.loads(server.gpuplat("--json", "sessions", "start", cwd=here).stdout)
    notebook = first["session"]["notebook"]
    assert notebook.startswith("cli/gpu-session-")  # beside the caller, named from the root
    assert notebook_kernel(server.root / notebook)["name"] == "gpuplat-notebook"
    running(server, first["id"])

    out = server.gpuplat("sessions", "start", "--notebook", "second.ipynb", cwd=here).stdout.splitlines()
    second = out[0].split()[0]
    assert out[0] == f"{second}  queued  queue interactive  notebook cli/second.ipynb"
    assert out[1] == (
        "waiting: position 1 of 1 in interactive · UserLimit 1/1 · "
        "alice has 1/1 runs dispatched in queue interactive (max_per_user)"
    )
    assert (here / "second.ipynb").exists()

    table = server.gpuplat("sessions", "list").stdout.splitlines()
    assert table[0].split() == ["ID", "PROJECT", "PRESET/QUEUE", "STATUS/KERNEL", "DEVICES", "NOTEBOOK", "IDLE"]
    rows = {line.split()[0]: line.split() for line in table[1:]}
    assert rows[second] == [second, "team-a", "notebook/interactive", "queued/waiting", "cli/second.ipynb"]
    cells = rows[first["id"]]
    assert cells[:4] == [first["id"], "team-a", "notebook/interactive", "running/starting"]
    assert cells[5] == notebook and re.fullmatch(r"\d+s/60m", cells[6])
    assert list(rows) == [second, first["id"]]

    kept = server.gpuplat("sessions", "keep", first["id"]).stdout.split()
    assert kept[:4] == [first["id"], "running", "kept", "by"]
    stopped = server.gpuplat("sessions", "stop", first["id"]).stdout.split()
    assert stopped[0] == first["id"] and stopped[1] in ("stopping", "stopped")
    assert server.wait_status(first["id"], "stopped")["reason"] == "Stopped"
    running(server, second)  # the freed place goes to the waiting one
    listed = json.loads(server.gpuplat("--json", "sessions", "list").stdout)["sessions"]
    assert [(s["id"], s["status"]) for s in listed] == [(second, "running")]

    job = server.ok("POST", "runs", body={"project": "team-a", "command": ["true"]})["id"]
    wrong = server.gpuplat("sessions", "stop", job, check=False)
    assert wrong.returncode == 1
    assert f"gpuplat: {job} is a job, not a session; use gpuplat runs stop" in wrong.stderr
    refused = server.gpuplat("sessions", "start", "--preset", "multi-gpu", check=False)
    assert refused.returncode == 1
    assert "preset multi-gpu is a job preset, not a GPU session" in refused.stderr
    assert "hint: session presets in team-a: notebook" in refused.stderr
    assert server.gpuplat("sessions", "stop", second).stdout.split()[0] == second
    assert server.gpuplat("sessions", "list").stdout.splitlines()[1:] == []


# ---- %gpu_session ----------------------------------------------------------------------------------
def test_magic_start_status_stop_in_a_real_kernel(server: ServerProcess) -> None:
    work = server.root / "magic"
    work.mkdir()
    outs = run_cells(
        server,
        [
            "%load_ext jupyter_gpuplat",
            "%gpu_session start --notebook here.ipynb",
            "first = gpu_last_session['id']\n"
            "from jupyter_gpuplat.client import Client\n"
            "Client().wait(first, timeout=30, statuses=['running'])",
            "%gpu_session start\nqueued_line = gpu_last_status.text  # as shown now (it follows the lease)",
            "%gpu_session status",
            "%gpu_session stop",
            "%gpu_session stop {first}",
            "%gpu_session start --preset single-gpu",
            "%gpu_session frobnicate",
            "gpu_last_status.thread.join(30)  # it ends once the lease is final\n"
            "print(queued_line)\nprint('final:', gpu_last_status.text)",
        ],
        cwd=work,
    )
    started = texts(outs[1])  # as the cell left it (nbclient drops the updates that come later)
    first = re.search(r"(r-[0-9a-f]+) (queued|running) in queue interactive", started)
    assert first is not None, started
    # The link is relative to the notebook showing it (JupyterLab opens it as a document).
    assert '<a class="gpuplat-open-notebook" href="here.ipynb" title="magic/here.ipynb">Open notebook</a>' in started
    assert any("application/vnd.jupyter.widget-view+json" in o.get("data", {}) for o in outs[1])
    assert notebook_kernel(work / "here.ipynb")["name"] == "gpuplat-notebook"

    queued = texts(outs[9]).splitlines()[0]  # the second lease's line as it first showed
    second = re.search(r"(r-[0-9a-f]+) queued in queue interactive — UserLimit: ", queued)
    assert second is not None, queued
    assert "(max_per_user) (position 1 of 1); its notebook connects when admitted · waiting " in queued
    # The line followed the lease to its final state (the display updates come after the cell, which
    # nbclient does not apply: tests/client/test_magics_live.py watches them on the kernel's iopub).
    assert f"final: {second.group(1)} stopped in queue interactive — stopped by alice" in texts(outs[9])
    href = re.search(r'href="(gpu-session-[0-9-]+\.ipynb)" title="magic/\1"', texts(outs[3]))
    assert href is not None and (work / href.group(1)).exists()

    status = texts(outs[4])
    assert status.index(second.group(1)) < status.index(first.group(1))  # newest first
    assert ">running</td>" in status and ">queued</td>" in status and 'href="here.ipynb"' in status

    assert f"{second.group(1)} stopped: stopped by alice" in texts(outs[5])  # the last one started
    assert re.search(rf"{first.group(1)} (stopping|stopped): stop", texts(outs[6]))
    refused = texts(outs[7])
    assert "gpu_session refused</b> (NotASessionPreset)" in refused
    assert "session presets in team-a: notebook" in refused and "Traceback" not in refused
    assert "usage: %gpu_session start|status|keep|stop" in texts(outs[8]) and "ERROR" not in texts(outs[8])
    for run_id in (first.group(1), second.group(1)):
        assert server.wait_status(run_id, "stopped")["reason"] == "Stopped"


# ---- the Launcher's GPU session tab --------------------------------------------------------------
def test_launcher_tab_starts_a_lease_shows_it_waiting_then_running(server: ServerProcess, client: Client) -> None:
    holder = client.start_session("team-a", notebook="held.ipynb")
    running(server, holder["id"])
    launcher = Launcher(client, project="team-a")
    try:
        assert launcher.tabs.titles == ("Run", "GPU session") and launcher.tabs.children[1] is launcher.session_tab
        tab = launcher.session_tab
        assert tab.project_picker.options == ("team-a",)
        assert tab.preset_picker.options == ("notebook",) and tab.preset_picker.value == "notebook"
        assert "GPU session (a notebook kernel) on one GPU" in tab.preset_help.value

        tab.notebook_field.value = "../outside.ipynb"
        assert tab.start() is None and "not under the Jupyter root" in tab.error_html
        assert tab.view is None

        tab.notebook_field.value = "tab.ipynb"
        tab.start_button.click()
        lease = tab.started
        assert lease is not None and lease["session"]["notebook"] == "tab.ipynb" and tab.error_html == ""
        view = tab.view
        assert isinstance(view, SessionView) and tab.view_box.children == (view,)
        assert view.status == "queued"
        text = until(lambda: WAITING.search(view.state_text) and view.state_text, "its place in line and why")
        assert text.startswith("waiting for a GPU: ")
        assert view.link_html == "" and view.link.outputs == ()  # no notebook to open before admission
        assert view.keep_button.disabled and not view.stop_button.disabled
        assert 'class="gpuplat-status gpuplat-status-queued"' in view.header.value

        client.stop(holder["id"])  # the lease ahead leaves: this one is admitted, seen live
        until(lambda: view.status == "running", "the lease to run")
        until(lambda: view.link_html, "the Open notebook link")
        devices = client.get(lease["id"])["devices"]
        assert re.fullmatch(rf"running: kernel \w+ on GPU {devices[0]}( · .*)?", view.state_text), view.state_text
        assert 'href="tab.ipynb"' in view.link_html and ">Open notebook</a>" in view.link_html
        (out,) = view.link.outputs
        assert out["data"] == {"text/html": view.link_html, "text/plain": "tab.ipynb"}
        assert notebook_kernel(server.root / "tab.ipynb")["name"] == "gpuplat-notebook"
        until(lambda: not view.keep_button.disabled, "Keep session to be enabled")
        view.keep_button.click()
        assert view.message.value == "" and view.run["reason"] == "KeepAlive"

        view.stop_button.click()
        until(lambda: view.status == "stopped", "the session to end")
        assert view.state_text.startswith("ended: stopped — stopped by alice")
        assert view.link_html == "" and view.stop_button.disabled
        view.thread.join(10)
        assert not view.thread.is_alive()
    finally:
        launcher.close()
    assert tab.view is not None and tab.view.closed


def test_session_view_warns_then_says_why_the_session_ended(tmp_path: Path) -> None:
    """`quick` (tests/fixtures/sessions.yaml) gives its GPU back after 3 s without kernel activity."""
    srv = ServerProcess(tmp_path, config_file=SESSIONS)
    srv.start()
    c = Client(url=srv.url, token="tok-alice")
    try:
        lease = c.start_session("team-a", "quick")
        view = SessionView(lease, c)
        try:
            ended = until(lambda: view.status == "stopped" and view.state_text, "the idle cull")
            gpu = c.get(lease["id"])
            assert gpu["reason"] == "IdleTimeout"
            assert ended == f"ended: stopped — {gpu['message']}"
            assert re.fullmatch(r"no kernel activity for 3 s; GPU \d returned", gpu["message"])
            # The warning came first; shown while it is the lease's latest word (0.3 s here, 10 minutes for
            # an hour's limit), it says when the session ends unless kept.
            (warning,) = [e for e in gpu["timeline"] if e["reason"] == "IdleWarning"]
            warned = {**gpu, "status": "running", "reason": "IdleWarning", "message": warning["message"]}
            warned["session"] = {
                **gpu["session"],
                "kernel": "starting",
                "idle_deadline": warning["details"]["deadline"],
            }
            text = session_state_text(warned, None)
            assert text.endswith(
                f" · ends if idle until {h.when(warning['details']['deadline'])} · {warning['message']}"
            )
            assert view.link_html == "" and view.keep_button.disabled and view.stop_button.disabled
            view.thread.join(10)
            assert not view.thread.is_alive()
        finally:
            view.close()
    finally:
        c.session.close()
        srv.stop()


def test_the_cli_and_the_session_view_render_the_server_s_idle_clock_and_its_signal() -> None:
    """A session judged by GPU use: the CLI's IDLE column reads the server's `idle_for_seconds` and names
    the signal; the notebook's state line shows the server's `idle_reason` as it is (no recount)."""
    from jupyter_gpuplat.cli.sweeps import idle_text

    sess = {
        "kernel": "ready",
        "busy": True,  # a cell runs; its GPU idles
        "idle_seconds": 3600,
        "idle_deadline": 2_000_000_000.0,
        "last_activity": 0.0,  # long ago: the kernel's clock is not the one that counts
        "idle_for_seconds": 720.0,
        "idle_by": "gpu",
        "idle_judged_by": "gpu",
        "idle_reason": "GPU 0 idle for 12 min (util < 5%)",
    }
    assert idle_text(sess) == "12m/60m gpu"
    assert idle_text({**sess, "idle_by": "kernel", "idle_judged_by": "kernel", "idle_for_seconds": None}) == "busy"
    run = {"status": "running", "devices": [0], "session": sess, "reason": "KernelReady"}
    text = session_state_text(run, None)
    assert text.startswith("running: kernel ready on GPU 0 · ends if idle until ")
    assert text.endswith(" · GPU 0 idle for 12 min (util < 5%)")
