"""GPU sessions in remote mode: the session client over a control plane's REST API, and full kernels.

The control plane is a real Jupyter server in embedded mode (tests/server.py) with the
sessions config and the token map, so `tok-alice` is alice there. First `HttpSessionClient`
is driven directly against it (lease, wait on the events stream, connection, reports, stop,
refusals); then a second real Jupyter server in remote mode starts `gpuplat-notebook`
kernels through its kernels API, and the lease is the control plane's.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
import requests
from jupyter_client.asynchronous.client import AsyncKernelClient

from jupyter_gpuplat.client import Client
from jupyter_gpuplat.core.errors import FieldNotAllowed, Forbidden, NotFound, NotLeader, Unprocessable
from jupyter_gpuplat.core.sse import SSEParser
from jupyter_gpuplat.service.errors import error_body
from jupyter_gpuplat.service.remote.control_plane import ControlPlaneAPI, remote_error
from jupyter_gpuplat.service.sessions.http_client import HttpSessionClient
from jupyter_gpuplat.service.sessions.kernelspecs import remote_session_specs

from ..kernel_ws import (
    SESSIONS,
    KernelSocket,
    a_cell_sent_at_once_is_not_culled,
    add_kernelspec,
    headers,
    kernel_ids,
    start_kernel,
)
from ..server import ServerProcess
from ..waiting import until


@pytest.fixture(scope="module")
def upstream(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    srv = ServerProcess(tmp_path_factory.mktemp("control-plane"), gpus=4, config_file=SESSIONS)
    srv.start()
    yield srv
    srv.stop()


@pytest.fixture
def plane(upstream: ServerProcess, jp_asyncio_loop: asyncio.AbstractEventLoop) -> Iterator[ControlPlaneAPI]:
    api = ControlPlaneAPI(upstream.url, "tok-alice")
    yield api
    api.close()
    jp_asyncio_loop.run_until_complete(asyncio.sleep(0))  # the feed's task sees its cancellation
    for row in upstream.ok("GET", "sessions")["sessions"]:  # each test leaves no lease of alice's
        upstream.call("POST", f"runs/{row['id']}/stop")
        upstream.wait_status(row["id"], "stopped", "failed", "succeeded")


async def run_cell(info: dict[str, Any], code: str) -> str:
    """Execute `code` in the kernel at `info` (as the provisioner's kernel manager would connect); its stdout."""
    kc = AsyncKernelClient()
    kc.load_connection_info({**info, "key": info["key"].encode()})
    kc.start_channels(hb=False)
    try:
        await kc.wait_for_ready(timeout=30)
        msg_id = kc.execute(code)
        out = []
        while True:
            msg = await kc.get_iopub_msg(timeout=30)
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            if msg["msg_type"] == "stream":
                out.append(msg["content"]["text"])
            elif msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
                return "".join(out)
    finally:
        kc.stop_channels()


def reasons(upstream: ServerProcess, run_id: str) -> list[str]:
    return [e["reason"] for e in upstream.ok("GET", f"runs/{run_id}")["timeline"]]


async def test_lease_wait_connect_report_and_stop_over_rest(upstream: ServerProcess, plane: ControlPlaneAPI) -> None:
    client = HttpSessionClient(plane, "alice")
    run = await client.start("team-a", "notebook", "remote/a.ipynb", str(upstream.root / "elsewhere"))
    assert run["kind"] == "session" and run["presets"] == ["notebook"] and run["queue"] == "interactive"
    assert run["working_dir"] is None  # a path of the user's machine is never sent
    # The same notebook and preset attach to the unfinished lease.
    assert (await client.start("team-a", "notebook", "remote/a.ipynb", None))["id"] == run["id"]

    row = await client.wait_running(run["id"], 30)
    assert row["status"] == "running" and row["session"]["kernel"] in ("starting", "ready"), row
    info = await client.connection(run["id"])
    assert info is not None and "gpuplat_pid" not in info and info["gpuplat_generation"] == 1
    assert await client.kernel_generation(run["id"]) == 1
    out = await run_cell(info, "import os; print(os.environ['CUDA_VISIBLE_DEVICES'], os.environ['GPUPLAT_RUN_ID'])")
    assert out.split() == [str(row["devices"][0]), run["id"]]

    await client.report(run["id"], "ready", "k-remote-1")
    lease = upstream.ok("GET", f"runs/{run['id']}")
    assert lease["session"]["kernel"] == "ready" and lease["session"]["kernel_id"] == "k-remote-1"
    assert {"Admitted", "KernelStarting", "KernelReady"} <= set(reasons(upstream, run["id"]))

    # The lease's events, live: an external stop (sidebar, CLI) is seen by the lease watcher.
    seen: list[str] = []

    async def watch() -> None:
        async for ev in client.events(run["id"]):
            seen.append(ev["status"])
            if ev["status"] == "stopped":
                return

    watcher = asyncio.ensure_future(watch())
    await asyncio.sleep(0)  # the watcher subscribes (the feed is open: wait_running opened it)
    await asyncio.to_thread(upstream.ok, "POST", f"runs/{run['id']}/stop")
    await asyncio.wait_for(watcher, 30)
    assert seen[-1] == "stopped" and "stopping" in seen
    assert await client.connection(run["id"]) is None  # ended: no kernel, and no 10 s wait for one
    # A report on an ended lease is refused as in process (Conflict), which the provisioner ignores.
    with pytest.raises(Exception) as ended:
        await client.report(run["id"], "shutdown")
    assert getattr(ended.value, "status", None) == 409


async def test_waiting_then_admitted_when_the_slot_frees_by_the_events_stream(
    upstream: ServerProcess, plane: ControlPlaneAPI
) -> None:
    client = HttpSessionClient(plane, "alice")
    first = await client.start("team-a", "notebook", "remote/first.ipynb", None)
    assert (await client.wait_running(first["id"], 30))["status"] == "running"
    second = await client.start("team-a", "notebook", "remote/second.ipynb", None)
    # Bounded: still queued when the wait ends, with the same explanation as in process.
    started = time.monotonic()
    row = await client.wait_running(second["id"], 0.5)
    assert row["status"] == "queued" and time.monotonic() - started < 5
    why = await client.explain(second["id"])
    assert why["position"] == 1 and why["reason"] == "UserLimit" and "1/1" in why["message"]

    waiting = asyncio.ensure_future(client.wait_running(second["id"], 60))
    await asyncio.sleep(0)  # one loop turn: the wait subscribes; the run is still queued
    assert not waiting.done()
    stopped_at = time.monotonic()
    await asyncio.to_thread(upstream.ok, "POST", f"runs/{first['id']}/stop")
    row = await asyncio.wait_for(waiting, 30)
    admitted_after = time.monotonic() - stopped_at
    assert row["status"] == "running" and row["id"] == second["id"]
    assert admitted_after < 5, admitted_after  # woken by the event, not by the 60 s deadline
    info = await client.connection(second["id"])
    assert info is not None
    print(f"stop -> admitted seen over REST: {admitted_after * 1000:.0f} ms")


async def test_refusals_surface_as_the_control_plane_raised_them(
    upstream: ServerProcess, plane: ControlPlaneAPI
) -> None:
    client = HttpSessionClient(plane, "alice")
    # Not allowed in the project (403) and unknown (422): each raised as the control plane raised it.
    for preset, status, kind in (("big", 403, Forbidden), ("no-such-preset", 422, Unprocessable)):
        direct = upstream.call("POST", "runs", body={"project": "team-a", "presets": [preset]})
        assert direct[0] == status, direct
        with pytest.raises(kind) as refused:
            await client.start("team-a", preset, f"remote/{preset}.ipynb", None)
        err = direct[1]["error"]
        assert (refused.value.status, refused.value.code, refused.value.message, refused.value.hint) == (
            status,
            err["code"],
            err["message"],
            err["hint"],
        )
        assert "notebook" in refused.value.hint and "quick" in refused.value.hint  # the allowed values
        assert upstream.ok("GET", "sessions", notebook=f"remote/{preset}.ipynb")["sessions"] == []

    with pytest.raises(NotFound):
        await client.explain("no-such-run")
    outsider = HttpSessionClient(ControlPlaneAPI(upstream.url, "not-a-token"))
    with pytest.raises(Forbidden) as forbidden:
        await outsider.start("team-a", "notebook", None, None)
    assert forbidden.value.status == 403
    outsider.plane.close()
    gone = HttpSessionClient(ControlPlaneAPI("http://127.0.0.1:9/", "tok-alice"))
    with pytest.raises(Exception) as unreachable:
        await gone.start("team-a", "notebook", None, None)
    assert getattr(unreachable.value, "code", None) == "Unreachable" and "cannot reach" in str(unreachable.value)
    gone.plane.close()


def test_a_standby_s_503_is_a_not_leader_error_with_its_words() -> None:
    # The body as the control plane writes it (service/errors.py), decoded as the client does.
    body = error_body(NotLeader("this control plane is a standby", "retry: the leader answers"))
    err = remote_error(503, json.dumps(body).encode())
    assert isinstance(err, NotLeader) and err.status == 503 and err.code == "NotLeader"
    assert (err.message, err.hint) == ("this control plane is a standby", "retry: the leader answers")
    assert remote_error(502, b"<html>bad gateway</html>").message == "the control plane answered 502"
    login = remote_error(302, b"")  # the Hub sends a token it did not take to its login page
    assert isinstance(login, Forbidden) and login.code == "NotAuthenticated" and "server_token_scopes" in login.hint


def test_a_member_rule_refusal_keeps_its_field_rule_and_allowed_values_through_remote_mode() -> None:
    refused = FieldNotAllowed(
        "env.NVIDIA_VISIBLE_DEVICES is reserved", "GPUs come from resources.gpu", field="env.NVIDIA_VISIBLE_DEVICES",
        rule="env.reserved", allowed=["preset:gpu"],
    )  # fmt: skip
    err = remote_error(403, json.dumps(error_body(refused)).encode())
    assert isinstance(err, FieldNotAllowed) and err.status == 403
    assert err.to_dict() == refused.to_dict()


def test_sse_parser_takes_chunks_cut_anywhere() -> None:
    stream = b'id: 7\nevent: status\ndata: {"a": 1}\n\n: keep-alive\n\nevent: ready\r\ndata: x\r\ndata: y\r\n\r\n'
    whole = SSEParser().feed(stream)
    assert whole == [("status", '{"a": 1}', "7"), ("ready", "x\ny", None)]
    parser = SSEParser()
    cut = [e for i in range(len(stream)) for e in parser.feed(stream[i : i + 1])]
    assert cut == whole
    # The CLI's and notebook client's streams (client/rest.py) are told of keep-alives too.
    told = SSEParser(keepalives=True).feed(stream)
    assert told == [whole[0], ("keep-alive", "", None), whole[1]]


async def test_remote_kernelspecs_are_the_embedded_ones(upstream: ServerProcess, plane: ControlPlaneAPI) -> None:
    embedded = requests.get(
        upstream.url + "api/kernelspecs", headers={"Authorization": f"token {upstream.token}"}, timeout=30
    ).json()["kernelspecs"]
    want = {n: s["spec"]["display_name"] for n, s in embedded.items() if n.startswith("gpuplat-")}
    specs = remote_session_specs(await plane.call("GET", "projects"), await plane.call("GET", "presets"))
    assert {s.name: s.display_name for s in specs} == want  # the embedded server's owner is alice too
    assert {s.name for s in specs} == {"gpuplat-notebook", "gpuplat-quick", "gpuplat-capped"}


# ---- full kernels in a Jupyter server in remote mode ------------------------------------------------
@pytest.fixture(scope="module")
def remote(tmp_path_factory: pytest.TempPathFactory, upstream: ServerProcess) -> Iterator[ServerProcess]:
    extra = {
        "GpuPlat": {"mode": "remote", "control_plane_url": upstream.url, "control_plane_token": "tok-alice"},
        "RemoteSessionKernels": {"refresh_seconds": 0.5},
    }
    srv = ServerProcess(tmp_path_factory.mktemp("user-server"), extra_config=extra)
    srv.start()
    yield srv
    srv.stop()


def specs(srv: ServerProcess) -> dict[str, Any]:
    got = requests.get(srv.url + "api/kernelspecs", headers=headers(srv), timeout=30).json()["kernelspecs"]
    return {name: s["spec"] for name, s in got.items() if name.startswith("gpuplat-")}


def lease_of(upstream: ServerProcess, notebook: str) -> dict[str, Any]:
    found = upstream.ok("GET", "sessions", notebook=notebook)["sessions"]
    assert len(found) == 1, found
    return dict(found[0])


def reported_busy(remote: ServerProcess, upstream: ServerProcess, notebook: str) -> dict[str, Any]:
    """Wait for the remote server to report the running cell busy; a miss says what both servers saw."""

    def busy() -> dict[str, Any] | None:
        lease = lease_of(upstream, notebook)
        return lease if lease["session"]["busy"] else None

    try:
        return until(busy, "the cell reported busy")
    except AssertionError as exc:
        seen = (remote.root / "server.log").read_text(errors="replace")[-4000:]
        raise AssertionError(f"{exc}; lease: {lease_of(upstream, notebook)}; remote server log: {seen}") from None


def end(upstream: ServerProcess, run_id: str) -> None:
    if upstream.ok("GET", f"runs/{run_id}")["status"] not in ("stopped", "failed", "succeeded"):
        upstream.call("POST", f"runs/{run_id}/stop")
    upstream.wait_status(run_id, "stopped", "failed", "succeeded")


def test_remote_kernelspecs_follow_the_control_plane_config(remote: ServerProcess, upstream: ServerProcess) -> None:
    offered = until(lambda: specs(remote), "the session kernelspecs from the control plane")
    assert set(offered) == {"gpuplat-notebook", "gpuplat-quick", "gpuplat-capped"}
    assert offered["gpuplat-notebook"]["display_name"] == "Python 3 (GPU · notebook)"
    assert offered["gpuplat-notebook"]["metadata"]["kernel_provisioner"] == {
        "provisioner_name": "gpuplat-session",
        "config": {"project": "team-a", "preset": "notebook"},
    }
    project = {"name": "team-a", "members": {"alice": "admin", "bob": "member"}, "default_queue": "batch"}
    allowed = ["notebook", "quick", "capped", "single-gpu"]
    upstream.ok("PUT", "projects/team-a", "ops", {**project, "allowed_presets": [*allowed, "big"]})
    try:
        until(lambda: "gpuplat-big" in specs(remote), "the new preset's kernelspec (next re-read)")
    finally:
        upstream.ok("PUT", "projects/team-a", "ops", {**project, "allowed_presets": allowed})
    until(lambda: "gpuplat-big" not in specs(remote), "the preset's kernelspec to go")


def test_a_remote_kernel_runs_in_the_control_plane_s_lease_restarts_inside_it_and_shutdown_ends_it(
    remote: ServerProcess, upstream: ServerProcess
) -> None:
    until(lambda: "gpuplat-notebook" in specs(remote), "the session kernelspecs")
    answer = start_kernel(remote, "remote-nb.ipynb")
    assert answer.status_code == 201, answer.text
    kid = answer.json()["kernel"]["id"]
    lease = lease_of(upstream, "remote-nb.ipynb")
    assert (lease["user"], lease["kind"], lease["status"]) == ("alice", "session", "running")
    ks = KernelSocket(remote, kid)
    out, status = ks.execute("import os; print(os.environ['CUDA_VISIBLE_DEVICES'], os.environ['GPUPLAT_RUN_ID'])")
    assert (out.split(), status) == ([str(lease["devices"][0]), lease["id"]], "ok")
    assert ks.execute("x = 41")[1] == "ok"
    until(lambda: lease_of(upstream, "remote-nb.ipynb")["session"]["kernel"] == "ready", "the kernel reported ready")

    # Restart: the same lease and devices, a new kernel (the agent's next generation).
    started = time.monotonic()
    r = requests.post(remote.url + f"api/kernels/{kid}/restart", headers=headers(remote), timeout=60)
    restart_s = time.monotonic() - started
    assert r.status_code == 200, r.text
    ks.close()
    ks = KernelSocket(remote, kid)
    out, status = ks.execute("import os; print(os.environ['CUDA_VISIBLE_DEVICES']); x")
    assert status == "error" and "NameError" in out and out.startswith(str(lease["devices"][0]))
    after = lease_of(upstream, "remote-nb.ipynb")
    assert (after["id"], after["devices"], after["status"]) == (lease["id"], lease["devices"], "running")
    until(lambda: "KernelRestarted" in reasons(upstream, lease["id"]), "the restart on the timeline")
    assert restart_s < 4, restart_s  # ended by the agent's next generation, not the 5 s shutdown wait
    ks.close()

    r = requests.delete(remote.url + f"api/kernels/{kid}", headers=headers(remote), timeout=60)
    assert r.status_code == 204
    done = upstream.wait_status(lease["id"], "stopped")
    assert done["reason"] == "KernelShutdown" and f"GPU {lease['devices'][0]} returned" in done["message"]
    print(f"remote kernel restart: {restart_s:.2f} s")


def test_waiting_refusal_and_external_stop_read_as_in_embedded_mode(
    remote: ServerProcess, upstream: ServerProcess
) -> None:
    until(lambda: "gpuplat-notebook" in specs(remote), "the session kernelspecs")
    # A refusal: the kernel error of the remote server is the embedded server's, word for word.
    for srv in (remote, upstream):
        add_kernelspec(srv, "gpuplat-shared-big", project="team-a", preset="big")
        add_kernelspec(srv, "gpuplat-test-wait", project="team-a", preset="notebook", launch_wait_seconds=1.0)
    refused = [start_kernel(srv, "refused.ipynb", "gpuplat-shared-big") for srv in (remote, upstream)]
    assert [r.status_code >= 400 for r in refused] == [True, True]
    texts = [r.json()["message"] for r in refused]
    assert texts[0] == texts[1] and texts[0].startswith("GPU session refused:") and "quick" in texts[0], texts

    holder = start_kernel(remote, "holder.ipynb")
    assert holder.status_code == 201, holder.text
    held = lease_of(upstream, "holder.ipynb")
    # Waiting: bounded, and the same sentence (position, explain) as embedded mode's.
    answer = start_kernel(remote, "late.ipynb", "gpuplat-test-wait")
    assert answer.status_code >= 400
    text = answer.json()["message"]
    assert text.startswith("Waiting for a GPU: position 1 of 1 in interactive · UserLimit 1/1 · "), text
    late = lease_of(upstream, "late.ipynb")
    assert late["status"] == "queued"

    # An external stop (sidebar, CLI) shuts the remote kernel down through its manager: no respawn.
    upstream.ok("POST", f"runs/{held['id']}/stop")
    until(lambda: holder.json()["kernel"]["id"] not in kernel_ids(remote), "the stopped session's kernel to go")
    upstream.wait_status(late["id"], "running")
    again = start_kernel(remote, "late.ipynb", "gpuplat-test-wait")  # what the notebook does when admitted
    assert again.status_code == 201, again.text
    assert lease_of(upstream, "late.ipynb")["id"] == late["id"]
    ks = KernelSocket(remote, again.json()["kernel"]["id"])
    assert ks.execute("import os; print(os.environ['GPUPLAT_RUN_ID'])")[0].strip() == late["id"]
    ks.close()
    end(upstream, late["id"])


def test_a_lease_the_client_makes_through_the_remote_server_is_the_one_its_notebook_s_kernel_joins(
    remote: ServerProcess, upstream: ServerProcess
) -> None:
    """`Client.start_session` (what %gpu_session, the Launcher tab and `gpuplat sessions start` call)
    against the remote server: the lease is the control plane's, the notebook is written here on the
    remote kernelspec, and opening it attaches its kernel to that lease."""
    until(lambda: "gpuplat-notebook" in specs(remote), "the session kernelspecs")
    client = Client(url=remote.url, token=remote.token)  # the server's own token: its owner, alice, upstream
    client.root_dir = str(remote.root)
    try:
        lease = client.start_session("team-a", notebook="from-client.ipynb")
        assert lease["kind"] == "session" and lease["user"] == "alice"
        written = json.loads((remote.root / "from-client.ipynb").read_text())
        assert written["metadata"]["kernelspec"]["name"] == "gpuplat-notebook"
        assert [x["id"] for x in client.sessions(notebook="from-client.ipynb")] == [lease["id"]]
        answer = start_kernel(remote, "from-client.ipynb")
        assert answer.status_code == 201, answer.text
        assert lease_of(upstream, "from-client.ipynb")["id"] == lease["id"]  # joined, not a second lease
        ks = KernelSocket(remote, answer.json()["kernel"]["id"])
        assert ks.execute("import os; print(os.environ['GPUPLAT_RUN_ID'])")[0].strip() == lease["id"]
        ks.close()
        assert client.stop(lease["id"])["status"] in ("stopping", "stopped")
        until(lambda: answer.json()["kernel"]["id"] not in kernel_ids(remote), "the stopped session's kernel to go")
    finally:
        client.session.close()


def test_a_restarted_user_server_re_adopts_the_running_kernel(remote: ServerProcess, upstream: ServerProcess) -> None:
    until(lambda: "gpuplat-notebook" in specs(remote), "the session kernelspecs")
    answer = start_kernel(remote, "keep.ipynb")
    assert answer.status_code == 201, answer.text
    lease = lease_of(upstream, "keep.ipynb")
    ks = KernelSocket(remote, answer.json()["kernel"]["id"])
    assert ks.execute("x = 42")[1] == "ok"
    ks.close()
    remote.stop()  # graceful: the server forgets its session kernels, it does not end their leases
    assert upstream.ok("GET", f"runs/{lease['id']}")["status"] == "running"
    remote.start()
    until(lambda: "gpuplat-notebook" in specs(remote), "the session kernelspecs after the restart")
    again = start_kernel(remote, "keep.ipynb")
    assert again.status_code == 201, again.text
    assert lease_of(upstream, "keep.ipynb")["id"] == lease["id"]
    ks = KernelSocket(remote, again.json()["kernel"]["id"])
    assert ks.execute("print(x)") == ("42\n", "ok")
    ks.close()
    end(upstream, lease["id"])


def test_a_remote_cell_sent_before_the_kernel_is_reported_ready_keeps_the_lease_busy(
    remote: ServerProcess, upstream: ServerProcess
) -> None:
    until(lambda: "gpuplat-quick" in specs(remote), "the session kernelspecs")
    answer = start_kernel(remote, "remote-run-all.ipynb", "gpuplat-quick")  # idle limit 3 s
    assert answer.status_code == 201, answer.text
    lease = lease_of(upstream, "remote-run-all.ipynb")
    a_cell_sent_at_once_is_not_culled(remote, upstream, answer.json()["kernel"]["id"], lease["id"], 3)


def test_after_a_control_plane_restart_the_remote_kernel_is_reported_up_and_busy_again(
    remote: ServerProcess, upstream: ServerProcess
) -> None:
    """The control plane watches a re-attached lease from "starting", idle from the restart: the
    kernel's server says it is up and busy again, so a long cell is not culled as idle."""
    until(lambda: "gpuplat-notebook" in specs(remote), "the session kernelspecs")
    answer = start_kernel(remote, "failover.ipynb")
    assert answer.status_code == 201, answer.text
    kid = answer.json()["kernel"]["id"]
    lease = lease_of(upstream, "failover.ipynb")
    until(lambda: lease_of(upstream, "failover.ipynb")["session"]["kernel"] == "ready", "the kernel reported ready")
    ks = KernelSocket(remote, kid)
    # Interrupted below: with stop_on_error the kernel would abort the check cell sent right after.
    msg = ks.send_execute("import time; time.sleep(60)", stop_on_error=False)
    reported_busy(remote, upstream, "failover.ipynb")
    upstream.stop()
    upstream.start()

    def up_and_busy() -> dict[str, Any] | None:
        now = lease_of(upstream, "failover.ipynb")
        return now if now["session"]["kernel"] == "ready" and now["session"]["busy"] else None

    after = until(up_and_busy, "the kernel reported up and busy to the restarted control plane", timeout=30)
    assert after["id"] == lease["id"] and after["session"]["idle_deadline"] is None
    assert reasons(upstream, lease["id"]).count("KernelReady") == 2
    r = requests.post(remote.url + f"api/kernels/{kid}/interrupt", headers=headers(remote), timeout=30)
    assert r.status_code == 204
    assert ks.wait_reply(msg) == "error"  # KeyboardInterrupt: the kernel was never lost
    assert ks.execute("print('still here')") == ("still here\n", "ok")
    ks.close()
    end(upstream, lease["id"])
    until(lambda: kid not in kernel_ids(remote), "the ended session's kernel to go")


async def test_the_events_stream_resumes_after_the_control_plane_restarts(
    upstream: ServerProcess, plane: ControlPlaneAPI
) -> None:
    client = HttpSessionClient(plane, "alice")
    run = await client.start("team-a", "quick", "remote/resume.ipynb", None)
    assert (await client.wait_running(run["id"], 30))["status"] == "running"
    seen: list[str] = []

    async def watch() -> None:
        async for ev in client.events(run["id"]):
            seen.append(ev["status"])
            if ev["status"] == "stopped":
                return

    watcher = asyncio.ensure_future(watch())
    await asyncio.to_thread(upstream.stop)  # the lease keeps running (runs outlive the server)
    await asyncio.to_thread(upstream.start)
    await asyncio.to_thread(upstream.ok, "POST", f"runs/{run['id']}/stop")
    await asyncio.wait_for(watcher, 30)  # reconnected by itself, from the last event id it had
    assert seen[-1] == "stopped"
    assert plane.feed.last_id is not None and int(plane.feed.last_id) >= max(
        e["id"] for e in upstream.ok("GET", f"runs/{run['id']}")["timeline"]
    )
