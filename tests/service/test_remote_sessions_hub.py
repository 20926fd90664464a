"""GPU sessions through JupyterHub: alice's and bob's servers (remote mode, spawned by a real Hub)
start `gpuplat-notebook` kernels whose leases the control plane (a Hub-managed `gpuplat server` on a
real PostgreSQL, tests/hubenv.py) holds, acting with each server's own Hub token
($JUPYTERHUB_API_TOKEN, granted the service's scope by `server_token_scopes`).
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from .. import hubenv
from ..hubenv import ACCESS_SCOPE, HubEnv
from ..kernel_ws import HubKernelSocket
from ..waiting import until

hub = hubenv.hub  # the module-scoped Hub (tests/hubenv.py)

SESSIONS_CONFIG = """\
admins: [service:admin-bot]
queues:
  - {name: interactive, priority: 100, concurrency: 4, quota: {gpu: 2}, max_per_user: 1}
presets:
  - {name: notebook, kind: session, queue: interactive, resources: {gpu: 1}, termination: {idle_seconds: 3600}}
projects:
  - {name: team-a, groups: {team-a: member}, allowed_presets: [notebook]}
  - {name: team-b, groups: {team-b: member}, allowed_presets: [notebook]}
"""


@pytest.fixture(scope="module")
def hub_platform_config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("hub-sessions") / "platform.yaml"
    path.write_text(SESSIONS_CONFIG)
    return path


class Server:
    def __init__(self, hub: HubEnv, name: str) -> None:
        self.hub, self.name = hub, name
        self.url = f"{hub.url}user/{name}/"
        self.token = hub.token(name, [f"access:servers!user={name}", ACCESS_SCOPE])
        self.headers = {"Authorization": f"token {self.token}"}

    def jupyter(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        r = self.hub.http.request(
            method, f"{self.url}api/{path}", headers=self.headers, content=None if body is None else json.dumps(body)
        )
        return r.status_code, (r.json() if r.content and "json" in r.headers.get("Content-Type", "") else r.text)

    def api(self, method: str, path: str, **params: Any) -> Any:
        r = self.hub.http.request(method, f"{self.url}gpuplat/api/{path}", headers=self.headers, params=params)
        assert r.status_code < 300, (r.status_code, r.text)
        return r.json()

    def start_kernel(self, notebook: str) -> tuple[int, Any]:
        body = {"path": notebook, "type": "notebook", "name": notebook, "kernel": {"name": "gpuplat-notebook"}}
        r = self.hub.http.post(f"{self.url}api/sessions", headers=self.headers, json=body, timeout=90)
        return r.status_code, r.json()

    def specs(self) -> set[str]:
        code, body = self.jupyter("GET", "kernelspecs")
        assert code == 200, body
        return {n for n in body["kernelspecs"] if n.startswith("gpuplat-")}


def test_session_kernels_of_two_hub_users_are_leases_of_the_shared_control_plane(hub: HubEnv) -> None:
    with ThreadPoolExecutor(2) as pool:
        list(pool.map(hub.spawn, ("alice", "bob")))
    alice, bob = Server(hub, "alice"), Server(hub, "bob")
    for s in (alice, bob):
        until(lambda s=s: s.specs() == {"gpuplat-notebook"}, f"{s.name}'s session kernelspec from the control plane")

    leases = {}
    for s in (alice, bob):
        code, model = s.start_kernel(f"{s.name}-gpu.ipynb")
        assert code == 201, model
        found = s.api("GET", "sessions")["sessions"]
        assert [(x["user"], x["status"]) for x in found] == [(s.name, "running")]  # each sees their own only
        lease = found[0]
        ks = HubKernelSocket(s.url, s.token, model["kernel"]["id"])
        out, status = ks.execute("import os; print(os.environ['CUDA_VISIBLE_DEVICES'], os.environ['GPUPLAT_RUN_ID'])")
        ks.close()
        assert (out.split(), status) == ([str(lease["devices"][0]), lease["id"]], "ok")
        until(lambda s=s, lease=lease: s.api("GET", f"runs/{lease['id']}")["session"]["kernel"] == "ready", "ready")
        leases[s.name] = (lease, model["kernel"]["id"])
    assert leases["alice"][0]["devices"] != leases["bob"][0]["devices"]  # one queue, one set of GPUs

    # Shutting a kernel down through its server ends that user's lease, and only that one.
    def ended(s: Server, run_id: str) -> dict[str, Any] | None:
        run = s.api("GET", f"runs/{run_id}")
        return dict(run) if run["status"] == "stopped" else None

    (a_lease, a_kid), (b_lease, b_kid) = leases["alice"], leases["bob"]
    assert alice.jupyter("DELETE", f"kernels/{a_kid}")[0] == 204
    assert until(lambda: ended(alice, a_lease["id"]), "alice's lease to end")["reason"] == "KernelShutdown"
    assert bob.api("GET", f"runs/{b_lease['id']}")["status"] == "running"
    assert bob.jupyter("DELETE", f"kernels/{b_kid}")[0] == 204
    assert until(lambda: ended(bob, b_lease["id"]), "bob's lease to end")["reason"] == "KernelShutdown"
