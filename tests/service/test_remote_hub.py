"""Remote mode behind a real JupyterHub: a user's `jupyterhub-singleuser` server forwarding to
`gpuplat server` (a Hub-managed service on real PostgreSQL, under /services/gpuplat/), and a
standby control plane's 503 passed through verbatim. Real Hub, proxy, servers and database.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from .. import hubenv
from ..conftest import TOKENS
from ..hubenv import ACCESS_SCOPE, HubEnv

hub, hub_platform_config = hubenv.hub, hubenv.hub_platform_config
standby = hubenv.standby  # a second control plane on the Hub's database  # module-scoped fixtures


def test_her_server_forwards_as_the_visitor_with_her_hub_token(hub: HubEnv) -> None:
    url = hub.spawn("alice")
    own_server = "access:servers!user=alice"
    tok = hub.token("alice", [ACCESS_SCOPE, own_server])
    headers = {"Authorization": f"token {tok}"}
    r = httpx.get(f"{url}gpuplat/api/whoami", headers=headers, timeout=30)
    assert r.status_code == 200 and r.json() == hub.call("GET", "gpuplat/api/whoami", tok)[1]
    assert r.json()["user"] == "alice"
    # Her token is what went upstream: without the service's scope the control plane refuses it, word for word.
    no_scope = hub.token("alice", [own_server])
    r = httpx.get(f"{url}gpuplat/api/whoami", headers={"Authorization": f"token {no_scope}"}, timeout=30)
    assert (r.status_code, r.json()) == hub.call("GET", "gpuplat/api/whoami", no_scope) and r.status_code == 403
    # A submission's Location names her server, not /services/gpuplat/.
    body = {"project": "team-a", "command": ["true"]}
    r = httpx.post(f"{url}gpuplat/api/runs", headers=headers, content=json.dumps(body), timeout=30)
    assert r.status_code == 201, r.text
    assert r.headers["Location"] == f"/user/alice/gpuplat/api/runs/{r.json()['id']}"
    code, direct = hub.call("GET", f"gpuplat/api/runs/{r.json()['id']}", tok)
    assert code == 200 and direct["user"] == "alice"


@pytest.fixture
def jp_server_config(hub: HubEnv, standby: str) -> dict[str, Any]:
    return {
        "ServerApp": {
            "jpserver_extensions": {"jupyter_gpuplat": True},
            "allow_unauthenticated_access": False,
            "identity_provider_class": "jupyter_gpuplat.auth.TokenMapIdentityProvider",
        },
        "TokenMapIdentityProvider": {"tokens": TOKENS},
        "GpuPlat": {"mode": "remote", "control_plane_url": standby, "control_plane_token": hub.token("alice")},
    }


async def test_a_standby_s_503_not_leader_passes_through_verbatim(jp_fetch: Any, hub: HubEnv, standby: str) -> None:
    r = await jp_fetch("gpuplat", "api", "runs", raise_error=False)  # the server's own token: its owner, alice
    direct = httpx.get(f"{standby}gpuplat/api/runs", headers={"Authorization": f"token {hub.token('alice')}"})
    assert r.code == 503 == direct.status_code
    assert json.loads(r.body) == direct.json() and json.loads(r.body)["error"]["code"] == "NotLeader"
    assert r.headers["Retry-After"] == direct.headers["Retry-After"]
    assert r.headers["Content-Type"] == direct.headers["Content-Type"]
