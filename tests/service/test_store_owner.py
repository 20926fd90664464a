"""One dispatcher per embedded store: real servers in two project folders on one SQLite store.

The first server to take `<db>.owner` owns the store; a second one forwards the API to it
(both Labs show one platform) or, where it cannot act for the owner there, answers 409
StoreInUse. The lock goes with the owner's process, however it ends.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml

from jupyter_gpuplat.service.store_owner import Me, client_of

from ..conftest import EXAMPLE
from ..server import ServerProcess


class Store:
    """One store shared by servers started in different folders, as the default data dir is."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.dir = tmp / "store"
        self.db = self.dir / "gpuplat.db"
        self.owner_file = self.dir / "gpuplat.db.owner"
        self.servers: list[ServerProcess] = []

    def server(self, name: str, config_file: Path = EXAMPLE, **extra: dict[str, Any]) -> ServerProcess:
        token = f"{name}-server-token"
        config: dict[str, Any] = {
            "GpuPlat": {"db_url": f"sqlite:///{self.db}", "artifacts_root": str(self.dir / "artifacts")},
            "IdentityProvider": {"token": token},
            "TokenMapIdentityProvider": {"token": token},
        }
        for section, values in extra.items():
            config.setdefault(section, {}).update(values)
        srv = ServerProcess(self.tmp / name, config_file=config_file, extra_config=config)
        srv.token = token
        self.servers.append(srv)
        return srv

    def record(self) -> dict[str, Any]:
        return dict(json.loads(self.owner_file.read_text()))

    def close(self) -> None:
        live = [s for s in self.servers if s.proc is not None and s.proc.poll() is None]
        owner = next((s for s in live if s.proc is not None and s.proc.pid == self._owner_pid()), None)
        if owner is not None:
            owner.stop_all_runs()
        for s in self.servers:
            s.stop()

    def _owner_pid(self) -> int | None:
        try:
            return int(self.record()["pid"])
        except (OSError, ValueError, KeyError):
            return None


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store(tmp_path)
    yield s
    s.close()


def gated(gate: Path) -> list[str]:
    code = f"import pathlib, time\nwhile not pathlib.Path({str(gate)!r}).exists(): time.sleep(0.02)\n"
    return [sys.executable, "-c", code]


def log_of(srv: ServerProcess) -> str:
    return (srv.root / "server.log").read_text(errors="replace")


def own_token_call(srv: ServerProcess, path: str) -> tuple[int, Any]:
    """A request with the server's own token (kernels, the CLI): the server's owner."""
    r = requests.get(f"{srv.url}gpuplat/api/{path}", headers={"Authorization": f"token {srv.token}"}, timeout=30)
    return r.status_code, r.json()


def test_two_servers_started_at_once_have_one_dispatcher(store: Store) -> None:
    a, b = store.server("project-a"), store.server("project-b")
    with ThreadPoolExecutor(2) as pool:
        list(pool.map(lambda s: s.start(), (a, b)))
    assert a.ok("GET", "config", user="ops")["version"] == 1, "the config_file was applied once"

    # team-a-train has a 2-GPU quota; multi-gpu asks for 2: one through each server.
    gate = store.tmp / "gate"
    body = {"project": "team-a", "presets": ["multi-gpu"], "command": gated(gate)}
    first = a.ok("POST", "runs", body={**body, "name": "through-a"})["id"]
    second = b.ok("POST", "runs", body={**body, "name": "through-b"})["id"]
    running = a.wait_status(first, "running")
    for srv in (a, b):  # both servers show the one platform
        assert srv.ok("GET", f"runs/{first}")["status"] == "running"
        waiting = srv.ok("GET", f"runs/{second}")
        assert waiting["status"] == "queued", waiting
        assert srv.ok("GET", f"runs/{second}/explain")["reason"] == "QueueQuota"
    assert running["devices"] and not waiting.get("devices")
    assert a.ok("GET", "capacity") == b.ok("GET", "capacity")

    gate.write_text("")
    done = b.wait_status(first, "succeeded")
    second_run = b.wait_status(second, "running", "succeeded")
    assert done["status"] == "succeeded" and second_run["devices"]

    assert a.proc is not None and b.proc is not None
    owner_pid = store.record()["pid"]
    assert owner_pid in (a.proc.pid, b.proc.pid)
    owner, client = (a, b) if owner_pid == a.proc.pid else (b, a)
    assert "this server is its client" in log_of(client) and "this server is its client" not in log_of(owner)
    assert store.owner_file.stat().st_mode & 0o777 == 0o600


def test_a_later_server_applies_no_config_and_shows_the_owners_runs(store: Store, tmp_path: Path) -> None:
    a = store.server("project-a")
    a.start()
    before = a.ok("GET", "config", user="ops")
    gate = tmp_path / "gate"
    run = a.ok("POST", "runs", body={"project": "team-a", "presets": ["single-gpu"], "command": gated(gate)})["id"]
    a.wait_status(run, "running")

    other = yaml.safe_load(EXAMPLE.read_text())
    other["queues"].append({"name": "only-in-b", "priority": 1, "concurrency": 1, "quota": {"gpu": 1}})
    b_config = tmp_path / "b-platform.yaml"
    b_config.write_text(yaml.safe_dump(other))
    b = store.server("project-b", config_file=b_config)
    b.start()

    after = b.ok("GET", "config", user="ops")
    assert after["version"] == before["version"] and after == before, "the second server's config_file is not applied"
    assert a.proc is not None and store.record()["pid"] == a.proc.pid
    assert "only-in-b" not in {q["name"] for q in b.ok("GET", "queues", user="ops")["queues"]}
    assert [r["id"] for r in b.ok("GET", "runs")["runs"]] == [run]
    assert b.ok("GET", f"runs/{run}")["status"] == "running"
    # B's own token (its kernels, its terminal's CLI) acts for the owner there: the same platform user.
    assert own_token_call(b, "whoami") == own_token_call(a, "whoami")
    assert own_token_call(b, "whoami")[1]["user"] == "alice"
    # A run submitted through B is A's to dispatch.
    through_b = b.ok("POST", "runs", body={"project": "team-a", "presets": ["single-gpu"], "command": gated(gate)})
    assert a.wait_status(through_b["id"], "running")["devices"] != a.ok("GET", f"runs/{run}")["devices"]
    gate.write_text("")
    b.wait_status(through_b["id"], "succeeded")


@pytest.mark.parametrize("why", ["no-token", "other-user"])
def test_a_server_that_cannot_be_a_client_answers_store_in_use(store: Store, why: str) -> None:
    # no-token: the owner has no server token (logins by the token map only), so there is none to act for it.
    owner_extra = (
        {"IdentityProvider": {"token": ""}, "TokenMapIdentityProvider": {"token": ""}} if why == "no-token" else {}
    )
    a = store.server("project-a", **owner_extra)
    a.start()
    b_extra = {"GpuPlat": {"default_user": "bob"}} if why == "other-user" else {}
    b = store.server("project-b", **b_extra)
    before = a.ok("GET", "config", user="ops")["version"]
    b.start(ready_status=409)
    assert a.proc is not None
    for method, path in (("GET", "whoami"), ("GET", "runs"), ("POST", "runs"), ("GET", "no/such/path")):
        code, body = b.call(method, path, body={} if method == "POST" else None)
        assert code == 409, (code, body)
        err = body["error"]
        assert err["code"] == "StoreInUse"
        assert f"pid {a.proc.pid}" in err["message"] and a.url in err["message"], err
        assert f"root {a.root}" in err["message"] and str(store.db) in err["message"], err
        assert "--GpuPlat.db_url=sqlite:///" in err["hint"] and "--GpuPlat.artifacts_root=" in err["hint"], err
        assert a.url in err["hint"], err
    assert ("no token" if why == "no-token" else "'bob'") in err["message"]
    assert b.call("GET", "whoami", user="nobody")[0] == 403, "the refusal is only for signed-in callers"
    logged = [line for line in log_of(b).splitlines() if "StoreInUse" in line or "in use by another" in line]
    assert len(logged) == 1 and f"pid {a.proc.pid}" in logged[0], logged
    assert a.ok("GET", "config", user="ops")["version"] == before, "the refused server applied nothing"
    assert a.ok("GET", "whoami")["user"] == "alice", "the owner serves on"


@pytest.mark.parametrize("how", ["stop", "crash"])
def test_the_owner_gone_frees_the_store_for_the_next_server(store: Store, tmp_path: Path, how: str) -> None:
    a = store.server("project-a")
    a.start()
    b = store.server("project-b")
    b.start()
    gate = tmp_path / "gate"
    run = a.ok("POST", "runs", body={"project": "team-a", "presets": ["single-gpu"], "command": gated(gate)})["id"]
    pid = a.wait_status(run, "running")["pid"]
    assert a.proc is not None
    if how == "stop":
        a.stop()
    else:
        a.kill()  # SIGKILL: no shutdown hook; the kernel frees the lock (the run, alive, does not hold it)
    os.kill(pid, 0)  # the run outlives its server

    code, body = b.call("GET", "runs")
    assert code == 503 and body["error"]["code"] == "Unavailable", (code, body)
    assert "has stopped" in body["error"]["message"] and "restart this server" in body["error"]["hint"]

    c = store.server("project-c")
    c.start()
    assert c.proc is not None and store.record()["pid"] == c.proc.pid
    assert "this server is its client" not in log_of(c)
    assert c.ok("GET", f"runs/{run}")["status"] == "running", "the new owner re-attached the run"
    gate.write_text("")
    c.wait_status(run, "succeeded")
    if how == "crash":
        return
    # Restarted while the new owner lives, the client is the new owner's client.
    b.stop()
    b.start()
    assert log_of(b).count("this server is its client") == 2
    assert b.ok("GET", f"runs/{run}")["status"] == "succeeded"


def test_an_owner_that_never_listens_is_refused_after_the_wait(store: Store) -> None:
    """A process that took the lock and never listens (a server still starting, or hung): refused after the wait."""
    code = (
        "import os, sys\n"
        "from jupyter_gpuplat.service.store_owner import Me, Owner, claim\n"
        f"me = Me(os.getpid(), os.geteuid(), 'here', {str(store.tmp)!r}, 'alice', '')\n"
        f"assert isinstance(claim({f'sqlite:///{store.db}'!r}, me, wait_seconds=0), Owner)\n"
        "print('held', flush=True)\n"
        "sys.stdin.read()\n"
    )
    with subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE) as proc:
        try:
            assert proc.stdout is not None and proc.stdout.readline() == b"held\n"
            b = store.server("project-b", GpuPlat={"store_owner_wait_seconds": 1.0})
            b.start(ready_status=409)
            err = b.call("GET", "whoami")[1]["error"]
            assert err["code"] == "StoreInUse" and f"pid {proc.pid}" in err["message"], err
            assert "not listening yet" in err["message"] and "within 1 s" in err["message"], err
        finally:
            proc.kill()


ME = Me(pid=2, uid=1000, host="box", root_dir="/home/me/b", default_user="alice", runtime_file="/rt/jpserver-2.json")
OWNER = {
    "pid": 1,
    "uid": 1000,
    "host": "box",
    "root_dir": "/home/me/a",
    "default_user": "alice",
    "runtime_file": "/rt/jpserver-1.json",
    "url": "http://localhost:8888/lab-a/",
    "local_url": "http://127.0.0.1:8888/lab-a/",
    "sock": None,
}
RUNTIME = {"pid": 1, "token": "owner-token"}


@pytest.mark.parametrize(
    ("record", "runtime", "answer"),
    [
        ({}, RUNTIME, ("http://127.0.0.1:8888/lab-a/", "owner-token")),
        ({"uid": 1001}, RUNTIME, "another account (uid 1001"),
        ({"host": "other"}, RUNTIME, "another machine (other)"),
        ({"url": None}, RUNTIME, "not listening yet"),
        ({"sock": "/tmp/j.sock", "local_url": ""}, RUNTIME, "Unix socket (/tmp/j.sock)"),
        ({"local_url": "https://127.0.0.1:8888/"}, RUNTIME, "serves HTTPS"),
        ({"default_user": "bob"}, RUNTIME, "platform user 'bob' and this server's is 'alice'"),
        ({}, "its runtime file /rt/jpserver-1.json cannot be read (denied)", "cannot be read (denied)"),
        ({}, {"pid": 7, "token": "t"}, "belongs to pid 7"),
        ({}, {"pid": 1, "token": ""}, "no token (a password-only login)"),
    ],
)
def test_client_of(record: dict[str, Any], runtime: Any, answer: Any) -> None:
    got = client_of({**OWNER, **record}, runtime, ME)
    assert got == answer if isinstance(answer, tuple) else (isinstance(got, str) and answer in got), got
