"""`gpuplat server` with the token-map identity (`TokenMapIdentityProvider`), as outside JupyterHub:
a token in the `Authorization` header is enough, with no cookie secret set, and no cookie is issued."""

from __future__ import annotations

import json
from pathlib import Path

import httpx

from ..hubenv import ControlPlaneProcess

PLATFORM = """
admins: [ops]
queues:
  - name: q
    concurrency: 1
projects:
  - name: p
    members: {alice: member}
"""


def test_token_map_identity_creates_a_run_without_a_cookie_secret(pg_db_url: str, tmp_path: Path) -> None:
    (tmp_path / "platform.yaml").write_text(PLATFORM)
    config = tmp_path / "gpuplat_server_config.json"
    config.write_text(
        json.dumps(
            {
                "GpuPlatServer": {"identity_provider_class": "jupyter_gpuplat.auth.TokenMapIdentityProvider"},
                "TokenMapIdentityProvider": {"tokens": {"tok-alice": "alice"}},
            }
        )
    )
    cp = ControlPlaneProcess(
        tmp_path, pg_db_url, f"--config={config}", f"--config-file={tmp_path / 'platform.yaml'}", base_url="/cp"
    ).start()
    url = cp.url
    try:
        cp.wait_leader()
        auth = {"Authorization": "token tok-alice"}
        r = httpx.post(url + "gpuplat/api/runs", json={"project": "p", "queue": "q", "command": "true"}, headers=auth)
        assert r.status_code in (200, 201), r.text
        assert "set-cookie" not in r.headers  # a header token only: no login cookie to forge requests with
        r = httpx.get(url + "gpuplat/api/whoami", headers=auth)
        assert r.status_code == 200 and r.json()["user"] == "alice", r.text
        # A cookie is no identity here (requests are not checked for XSRF), nor is no token.
        r = httpx.get(url + "gpuplat/api/whoami", cookies={"username-127-0-0-1": "x"})
        assert r.status_code == 403, r.text
    finally:
        cp.kill()
