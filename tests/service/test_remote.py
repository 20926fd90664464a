"""Remote mode: a user's Jupyter server forwarding /gpuplat/api/* to a real control plane.

The control plane is a second real Jupyter server in embedded mode (tests/server.py, SQLite)
with the same token map, so `tok-alice` means alice on both sides; the user's server is the
in-process pytest-jupyter server with `GpuPlat.mode = "remote"` (or a ServerProcess for the
CLI and a real kernel). `GpuPlat.control_plane_token` stands in for the owner's Hub token.
"""

from __future__ import annotations

import asyncio
import json
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import psutil
import pytest
import requests
from tornado.httpclient import AsyncHTTPClient

from jupyter_gpuplat.service.remote.forward import ControlPlane

from ..conftest import TOKENS, Api
from ..kernel_ws import KernelSocket
from ..server import ServerProcess, free_port, parse_sse
from ..waiting import wait_for


@pytest.fixture(scope="module")
def upstream(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    srv = ServerProcess(tmp_path_factory.mktemp("control-plane"))
    srv.start()
    yield srv
    srv.stop()


@pytest.fixture
def jp_server_config(tmp_path: Path, upstream: ServerProcess) -> dict[str, Any]:
    return {
        "ServerApp": {
            "jpserver_extensions": {"jupyter_gpuplat": True},
            "allow_unauthenticated_access": False,
            "identity_provider_class": "jupyter_gpuplat.auth.TokenMapIdentityProvider",
        },
        "TokenMapIdentityProvider": {"tokens": TOKENS},
        "GpuPlat": {
            "mode": "remote",
            "control_plane_url": upstream.url,
            "control_plane_token": "tok-alice",
            # Configured by mistake in remote mode: never opened, never created.
            "db_url": f"sqlite:///{tmp_path / 'must-not-exist.db'}",
        },
    }


@pytest.fixture
def remote(jp_fetch: Any) -> Api:
    return Api(jp_fetch)


class SSE:
    """A raw HTTP/1.0 SSE client: events as they arrive; `close()` drops the connection mid-stream."""

    def __init__(self, port: int, path: str, user: str = "alice", last_event_id: str | None = None) -> None:
        self.port, self.path, self.user, self.last_event_id = port, path, user, last_event_id
        self.raw = b""

    async def open(self) -> SSE:
        self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)
        head = f"GET {self.path} HTTP/1.0\r\nHost: 127.0.0.1\r\nAuthorization: token tok-{self.user}\r\n"
        if self.last_event_id:
            head += f"Last-Event-ID: {self.last_event_id}\r\n"
        self.writer.write((head + "\r\n").encode())
        await self.writer.drain()
        return self

    def events(self) -> list[dict[str, str]]:
        _, _, body = self.raw.partition(b"\r\n\r\n")
        return parse_sse(body.decode())

    async def until(self, cond: Any, what: str, timeout: float = 20) -> list[dict[str, str]]:
        async def check() -> list[dict[str, str]] | None:
            try:
                self.raw += await asyncio.wait_for(self.reader.read(65536), 0.2)
            except TimeoutError:
                pass
            evs = self.events()
            return evs if cond(evs) else None

        result: list[dict[str, str]] = await wait_for(check, timeout, what)
        return result

    def close(self) -> None:
        self.writer.close()


def ready(evs: list[dict[str, str]]) -> bool:
    return any(e.get("event") == "ready" for e in evs)


def established(server: ServerProcess) -> int:
    """Open connections the control plane holds on its port (the forwarder's upstream requests)."""
    assert server.proc is not None
    conns = psutil.Process(server.proc.pid).net_connections(kind="tcp")
    return sum(1 for c in conns if c.status == psutil.CONN_ESTABLISHED and c.laddr.port == server.port)


def cmd(code: str) -> list[str]:
    return [sys.executable, "-c", code]


async def test_reads_equal_direct_and_nothing_of_the_platform_is_built(
    remote: Api, upstream: ServerProcess, jp_serverapp: Any, tmp_path: Path
) -> None:
    run = upstream.ok("POST", "runs", body={"project": "team-a", "command": cmd("print(1)")})
    upstream.wait_status(run["id"], "succeeded")  # a finished run reads the same twice
    for user in ("alice", "bob", "dave"):
        for path in ("whoami", "projects", "presets", "runs"):
            assert await remote.ok("GET", path, user) == upstream.ok("GET", path, user), (user, path)
    queues = await remote.ok("GET", "queues", "bob")
    assert [q["name"] for q in queues["queues"]] == [q["name"] for q in upstream.ok("GET", "queues", "bob")["queues"]]
    # No Store, Engine or executor here: no platform object, no database file.
    assert "gpuplat" not in jp_serverapp.web_app.settings
    (ext,) = jp_serverapp.extension_manager.extension_apps["jupyter_gpuplat"]
    assert ext.platform is None and ext.mode == "remote"
    assert not (tmp_path / "must-not-exist.db").exists()


async def test_errors_pass_through_verbatim(remote: Api, upstream: ServerProcess) -> None:
    cases: list[tuple[str, str, str, Any]] = [
        ("GET", "runs/no-such-run", "alice", None),
        ("POST", "runs", "alice", {"project": "team-b", "command": ["true"]}),  # not a member
        ("POST", "runs", "alice", {"project": "team-a"}),  # nothing to run
        ("POST", "runs", "alice", {"project": "team-a", "command": ["true"], "gpus": "many"}),
        ("PUT", "queues/q1", "alice", {"gpus": 1}),  # not a platform admin
        ("GET", "no/such/endpoint", "bob", None),
    ]
    for method, path, user, body in cases:
        via, via_body = await remote(method, path, user, body)
        direct, direct_body = upstream.call(method, path, user, body)
        assert 400 <= via < 500 and (via, via_body) == (direct, direct_body), (method, path)
    # Malformed JSON is the control plane's refusal, word for word.
    via, via_body = await remote("POST", "runs", raw=b"{not json")
    r = requests.post(
        f"{upstream.url}gpuplat/api/runs", data=b"{not json", headers={"Authorization": "token tok-alice"}
    )
    assert (via, via_body) == (r.status_code, r.json()) and via == 400


async def test_submit_then_read_back(remote: Api, upstream: ServerProcess, jp_fetch: Any, jp_base_url: str) -> None:
    resp = await jp_fetch(
        "gpuplat",
        "api",
        "runs",
        method="POST",
        body=json.dumps({"project": "team-a", "name": "via-remote", "command": cmd("print('remote hi')")}),
        headers={"Authorization": "token tok-bob"},
    )
    assert resp.code == 201 and resp.headers["Content-Type"].startswith("application/json")
    run = json.loads(resp.body)
    # Location names this server, not the control plane.
    assert resp.headers["Location"] == f"{jp_base_url}gpuplat/api/runs/{run['id']}"
    assert run["user"] == "bob" and run["name"] == "via-remote"
    done = await remote.wait_status(run["id"], "succeeded", user="bob")
    assert done == upstream.ok("GET", f"runs/{run['id']}", "bob")
    log = await remote.ok("GET", f"runs/{run['id']}/logs", "bob", format="text")
    assert log == b"remote hi\n"


async def test_events_live_and_resumed_with_last_event_id(
    remote: Api, upstream: ServerProcess, jp_http_port: int, jp_base_url: str
) -> None:
    path = f"{jp_base_url}gpuplat/api/events"
    live = await SSE(jp_http_port, path).open()
    await live.until(ready, "the forwarded stream's ready event")
    first = await remote.submit(command=cmd("print('a')"))

    def finished(run_id: str) -> Any:
        def cond(evs: list[dict[str, str]]) -> bool:
            data = [json.loads(e["data"]) for e in evs if e.get("event") == "status"]
            return any(d["run_id"] == run_id and d.get("status") == "succeeded" for d in data)

        return cond

    evs = await live.until(finished(first["id"]), "the first run's events, live")
    last = [e for e in evs if e.get("event") == "status"][-1]["id"]
    live.close()
    # While nobody listens: another run comes and goes.
    second = await remote.submit(command=cmd("print('b')"))
    await remote.wait_status(second["id"], "succeeded")
    resumed = await SSE(jp_http_port, path, last_event_id=last).open()
    got = await resumed.until(ready, "the resumed backlog")
    resumed.close()
    direct = await SSE(upstream.port, "/gpuplat/api/events", last_event_id=last).open()
    want = await direct.until(ready, "the direct backlog")
    direct.close()
    ids = [e["id"] for e in got if e.get("event") == "status"]
    assert ids == [e["id"] for e in want if e.get("event") == "status"] and ids
    assert {json.loads(e["data"])["run_id"] for e in got if e.get("event") == "status"} == {second["id"]}


async def test_logs_stream_and_output_download(
    remote: Api, upstream: ServerProcess, jp_http_port: int, jp_base_url: str
) -> None:
    code = (
        "import os, pathlib\n"
        "for i in range(3): print(f'step {i}', flush=True)\n"
        "out = pathlib.Path(os.environ['GPUPLAT_ARTIFACTS_DIR'], 'outputs')\n"
        "out.mkdir(exist_ok=True)\n"
        "(out / 'weights b.bin').write_bytes(bytes(range(256)) * 4096)\n"
    )
    run = await remote.submit(command=cmd(code))
    logs = await SSE(jp_http_port, f"{jp_base_url}gpuplat/api/runs/{run['id']}/logs").open()
    evs = await logs.until(lambda evs: any(e.get("event") == "end" for e in evs), "the log stream's end")
    logs.close()
    assert [e["data"] for e in evs if "event" not in e] == ["step 0", "step 1", "step 2"]
    assert json.loads(evs[-1]["data"])["status"] == "succeeded"
    listed = await remote.ok("GET", f"runs/{run['id']}/outputs")
    assert listed == upstream.ok("GET", f"runs/{run['id']}/outputs")
    r = await AsyncHTTPClient().fetch(
        f"http://127.0.0.1:{jp_http_port}{jp_base_url}gpuplat/api/runs/{run['id']}/outputs/outputs/weights%20b.bin",
        headers={"Authorization": "token tok-alice"},
    )
    assert r.code == 200 and r.body == bytes(range(256)) * 4096
    assert r.headers["Content-Type"] == "application/octet-stream"
    assert r.headers["Content-Disposition"] == "attachment; filename*=UTF-8''weights%20b.bin"


async def test_client_disconnect_closes_the_upstream_stream(
    remote: Api, upstream: ServerProcess, jp_http_port: int, jp_base_url: str
) -> None:
    # Awaited, not polled with the loop blocked: this server's own start-up calls (the session
    # kernelspecs' first read) must run to their end to close their connections.
    await wait_for(lambda: established(upstream) == 0, 20, "no open connection to the control plane")
    streams = [await SSE(jp_http_port, f"{jp_base_url}gpuplat/api/events?heartbeat=300").open() for _ in range(3)]
    for s in streams:
        await s.until(ready, "a forwarded stream")
    assert established(upstream) == 3
    streams[0].close()

    async def two() -> bool:
        return established(upstream) == 2

    await wait_for(two, 10, "the upstream side of the closed stream to close")
    for s in streams[1:]:
        s.close()

    async def none() -> bool:
        return established(upstream) == 0

    await wait_for(none, 10, "every upstream stream closed")


async def test_unreachable_control_plane_is_a_502(remote: Api, jp_serverapp: Any) -> None:
    settings = jp_serverapp.web_app.settings
    reachable = settings["gpuplat_remote"]
    settings["gpuplat_remote"] = ControlPlane(f"http://127.0.0.1:{free_port()}/", "", 5.0)  # nothing listens
    try:
        code, body = await remote("GET", "whoami")
    finally:
        await settings["gpuplat_remote"].aclose()
        settings["gpuplat_remote"] = reachable
    assert code == 502 and body["error"]["code"] == "ControlPlaneUnreachable"
    assert "did not answer" in body["error"]["message"] and body["error"]["hint"]


async def test_a_control_plane_that_never_answers_is_a_502_after_the_request_timeout(
    remote: Api, jp_serverapp: Any
) -> None:
    settings = jp_serverapp.web_app.settings
    reachable = settings["gpuplat_remote"]
    with socket.socket() as silent:  # the kernel completes the handshake from the backlog; nobody reads
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        settings["gpuplat_remote"] = ControlPlane(f"http://127.0.0.1:{silent.getsockname()[1]}/", "", 0.5)
        try:
            code, body = await remote("GET", "whoami")
        finally:
            await settings["gpuplat_remote"].aclose()
            settings["gpuplat_remote"] = reachable
    assert code == 502 and body["error"]["code"] == "ControlPlaneUnreachable"
    assert "no answer within 0.5 s" in body["error"]["message"]


async def test_scripts_are_sent_as_content_never_as_paths(
    remote: Api, upstream: ServerProcess, jp_root_dir: Path, tmp_path: Path
) -> None:
    (jp_root_dir / "exp").mkdir()
    (jp_root_dir / "exp" / "train.py").write_text("import sys\nprint('trained with', sys.argv[1:])\n")
    run = await remote.submit(script="exp/train.py", args=["--lr", "0.1"], working_dir="exp")
    assert run["name"] == "train.py"
    done = await remote.wait_status(run["id"], "succeeded")
    assert await remote.ok("GET", f"runs/{run['id']}/logs", format="text") == b"trained with ['--lr', '0.1']\n"
    # What the control plane got: the file's text, no path of this server's disk.
    direct = upstream.ok("GET", f"runs/{run['id']}")
    assert direct["resolved"]["entrypoint"] == {
        "kind": "cell",
        "code": "import sys\nprint('trained with', sys.argv[1:])\n",
        "args": ["--lr", "0.1"],
    }
    assert str(jp_root_dir) not in json.dumps(direct) and done["working_dir"] is None
    # A notebook runs headless there; its executed copy is the run's output as in embedded mode.
    nb = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_code_cell("x = 1", metadata={"tags": ["parameters"]}),
            nbformat.v4.new_code_cell("print('x is', x)"),
        ]
    )
    nbformat.write(nb, jp_root_dir / "analysis.ipynb")
    nb_run = await remote.submit(script="analysis.ipynb", params={"x": 42})
    assert nb_run["name"] == "analysis.ipynb"
    await remote.wait_status(nb_run["id"], "succeeded", timeout=60)
    assert b"x is 42" in await remote.ok("GET", f"runs/{nb_run['id']}/logs", format="text")
    executed = await remote.ok("GET", f"runs/{nb_run['id']}/outputs/outputs/analysis.ipynb")
    assert "x is 42" in nbformat.reads(executed.decode(), 4).cells[2].outputs[0]["text"]
    # Outside the root, missing, a working_dir outside: the same 400s as embedded mode, sent nowhere.
    (tmp_path / "outside.py").write_text("print('no')")
    before = len(upstream.ok("GET", "runs")["runs"])
    for body, what in (
        ({"script": str(tmp_path / "outside.py")}, "is not a file under the Jupyter root"),
        ({"script": "../outside.py"}, "is not a file under the Jupyter root"),
        ({"script": "missing.py"}, "is not a file under the Jupyter root"),
        ({"command": ["true"], "working_dir": str(tmp_path)}, "is outside the Jupyter root"),
    ):
        code, err = await remote("POST", "runs", body={"project": "team-a", **body})
        assert code == 400 and err["error"]["code"] == "InvalidInput" and what in err["error"]["message"], err
    (jp_root_dir / "big.py").write_text("x = 1\n" * 200_000)
    code, err = await remote("POST", "runs/preview", body={"project": "team-a", "script": "big.py"})
    assert code == 413 and err["error"]["code"] == "FileTooLarge"
    assert len(upstream.ok("GET", "runs")["runs"]) == before


@pytest.fixture(scope="module")
def remote_server(tmp_path_factory: pytest.TempPathFactory, upstream: ServerProcess) -> Iterator[ServerProcess]:
    extra = {"GpuPlat": {"mode": "remote", "control_plane_url": upstream.url, "control_plane_token": "tok-alice"}}
    srv = ServerProcess(tmp_path_factory.mktemp("user-server"), extra_config=extra)
    srv.start()
    yield srv
    srv.stop()


def test_cli_works_unchanged_against_the_remote_server(remote_server: ServerProcess, upstream: ServerProcess) -> None:
    out = remote_server.gpuplat("submit", "-p", "team-a", "-n", "cli-remote", "-f", "--", *cmd("print('from cli')"))
    first, *rest = out.stdout.splitlines()
    run_id = first.split()[0]
    assert rest == ["from cli"]
    # The owner's token (the server's own, from the runtime file) went out as alice's.
    assert upstream.ok("GET", f"runs/{run_id}")["user"] == "alice"
    show = remote_server.gpuplat("runs", "show", run_id).stdout
    assert "status: succeeded" in show and "working_dir: (the run artifact directory)" in show
    assert not (remote_server.root / "gpuplat.db").exists()  # configured, never opened


def test_gpu_submit_magic_in_a_real_kernel_of_the_remote_server(
    remote_server: ServerProcess, upstream: ServerProcess
) -> None:
    (remote_server.root / "job.py").write_text("import sys; print('job args', sys.argv[1:])")
    headers = {"Authorization": f"token {remote_server.token}"}
    kernel = requests.post(f"{remote_server.url}api/kernels", json={"name": "python3"}, headers=headers, timeout=60)
    ws = KernelSocket(remote_server, kernel.json()["id"])
    try:
        assert ws.execute("%load_ext jupyter_gpuplat")[1] == "ok"
        out, status = ws.execute(
            "%gpu_submit --wait job.py --epochs 3\nprint(gpu_last_run['id'], gpu_last_run['status'])"
        )
    finally:
        ws.close()
        requests.delete(f"{remote_server.url}api/kernels/{kernel.json()['id']}", headers=headers, timeout=60)
    assert status == "ok", out
    run_id, final = out.split()[-2:]
    assert final == "succeeded"
    assert upstream.ok("GET", f"runs/{run_id}/logs", format="text") == b"job args ['--epochs', '3']\n"


async def test_whose_token_goes_upstream(jp_fetch: Any, jp_http_port: int, jp_base_url: str, jp_serverapp: Any) -> None:
    base = f"http://127.0.0.1:{jp_http_port}{jp_base_url}gpuplat/api/"
    client = AsyncHTTPClient()
    # A visitor's token in the query is theirs, and is not passed on in the query.
    r = await client.fetch(base + "whoami?token=tok-bob")
    assert json.loads(r.body)["user"] == "bob"
    # The server's own token (kernels, the CLI) is the owner: the configured control-plane token.
    r = await jp_fetch("gpuplat", "api", "whoami")  # pytest-jupyter sends the server's token
    assert json.loads(r.body)["user"] == "alice"
    # Without one, the owner's requests are refused here rather than sent as nobody (or as anyone).
    settings = jp_serverapp.web_app.settings
    configured = settings["gpuplat_remote"]
    settings["gpuplat_remote"] = ControlPlane(configured.url, "", 5.0)
    try:
        r = await jp_fetch("gpuplat", "api", "whoami", raise_error=False)
    finally:
        await settings["gpuplat_remote"].aclose()
        settings["gpuplat_remote"] = configured
    body = json.loads(r.body)
    assert r.code == 403 and body["error"]["code"] == "Forbidden" and "control_plane_token" in body["error"]["hint"]
