"""`gpuplat server`, the team-mode control plane: identity from a real JupyterHub, probes, metrics,
standby, signals, and the refusal of SQLite. Real PostgreSQL, real Hub and proxy, real processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import psycopg
from prometheus_client.parser import text_string_to_metric_families

from .. import hubenv
from ..hubenv import ACCESS_SCOPE, ControlPlaneProcess, HubEnv, free_port
from ..pg import psycopg_conninfo
from ..waiting import until

hub, hub_platform_config = hubenv.hub, hubenv.hub_platform_config  # module-scoped fixtures
SERVER = hubenv.CONTROL_PLANE
standby = hubenv.standby  # a second control plane on the Hub's database


def _sample(text: str, name: str, **labels: str) -> float:
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                return float(s.value)
    return 0.0


# ---- identity through the Hub ------------------------------------------------------------


def test_whoami_through_the_hub_is_alice_with_her_groups(hub: HubEnv) -> None:
    code, body = hub.call("GET", "gpuplat/api/whoami", hub.token("alice"))
    assert code == 200, body
    assert body["user"] == "alice"
    assert body["groups"] == ["team-a"]
    # The project grants its role to the Hub group, not to alice by name.
    assert body["projects"] == [{"name": "team-a", "role": "member", "may_submit": True}]
    # Direct to the service (not through the proxy) is the same person.
    code, direct = hub.call("GET", "gpuplat/api/whoami", hub.token("bob"), direct=True)
    assert code == 200 and direct["user"] == "bob" and direct["groups"] == ["team-b"]


def test_a_token_without_the_service_scope_is_refused_with_the_scope_named(hub: HubEnv) -> None:
    tok = hub.token("alice", scopes=["read:users:name!user"])
    code, body = hub.call("GET", "gpuplat/api/whoami", tok)
    assert code == 403
    assert body["error"]["code"] == "Forbidden"
    assert ACCESS_SCOPE in body["error"]["message"]
    assert "server_token_scopes" in body["error"]["hint"]


def test_no_token_or_a_bad_one_is_refused(hub: HubEnv) -> None:
    code, body = hub.call("GET", "gpuplat/api/whoami", None)
    assert code == 403 and "no JupyterHub token" in body["error"]["message"]
    code, body = hub.call("GET", "gpuplat/api/runs", "not-a-token")
    assert code == 403 and "does not accept this token" in body["error"]["message"]
    # A user's name in a header or a parameter changes nothing.
    r = httpx.get(f"{hub.service_url}gpuplat/api/whoami?user=alice", headers={"X-Forwarded-User": "alice"})
    assert r.status_code == 403
    # Nor does a token in the URL (it would leak into logs and Referer headers): the header only.
    r = httpx.get(f"{hub.service_url}gpuplat/api/whoami", params={"token": hub.token("alice")})
    assert r.status_code == 403


def test_a_hub_service_token_is_service_name(hub: HubEnv) -> None:
    code, body = hub.call("GET", "gpuplat/api/whoami", hub.admin_token)
    assert code == 200, body
    assert body["user"] == "service:admin-bot"
    assert body["platform_admin"] is True  # the team config lists it in admins


# ---- probes and metrics -----------------------------------------------------------------


def test_health_live_and_ready_say_leader_epoch_store_and_executor(hub: HubEnv) -> None:
    code, live = hub.call("GET", "health/live", None)
    assert (code, live) == (200, {"live": True})
    code, ready = hub.call("GET", "health/ready", None)
    assert code == 200, ready
    assert ready["ready"] is True and ready["role"] == "leader"
    assert isinstance(ready["epoch"], int) and ready["epoch"] >= 1
    assert ready["store"] == {"ok": True, "error": None}
    assert ready["executor"] == {"ok": True, "error": None}


def test_metrics_parse_and_count_an_admission_and_its_wait(hub: HubEnv) -> None:
    tok = hub.token("alice")
    _, before = hub.call("GET", "metrics", None)
    code, run = hub.call("POST", "gpuplat/api/runs", tok, {"project": "team-a", "queue": "shared", "command": ["true"]})
    assert code == 201, run

    def ended() -> bool:
        return hub.call("GET", f"gpuplat/api/runs/{run['id']}", tok)[1]["status"] == "succeeded"

    until(ended, "the run to succeed")
    code, text = hub.call("GET", "metrics", None)
    assert code == 200
    assert _sample(text, "gpuplat_admissions_total", queue="shared") == (
        _sample(before, "gpuplat_admissions_total", queue="shared") + 1
    )
    assert _sample(text, "gpuplat_queue_wait_seconds_count", queue="shared") >= 1
    assert _sample(text, "gpuplat_queue_pending", queue="shared") == 0
    assert _sample(text, "gpuplat_leader") == 1
    assert (
        _sample(text, "gpuplat_api_request_duration_seconds_count", method="POST", route="RunsHandler", code="201") >= 1
    )


# ---- a second control plane on the same database: a standby ------------------------------------


def test_a_standby_answers_503_not_leader_naming_the_leader(hub: HubEnv, standby: str) -> None:
    r = httpx.get(standby + "health/ready")
    assert r.status_code == 503
    ready = r.json()
    assert ready["role"] == "standby" and ready["ready"] is False and ready["epoch"] is None
    assert ready["store"]["ok"] is True and ready["holder"] == "standby-1"
    r = httpx.get(standby + "gpuplat/api/runs", headers={"Authorization": f"token {hub.token('alice')}"})
    assert r.status_code == 503
    assert r.headers["Retry-After"] == "2"
    err = r.json()["error"]
    assert err["code"] == "NotLeader"
    assert "standby-1" in err["message"]
    leader_holder = hub.call("GET", "health/ready", None)[1]["holder"]
    assert leader_holder in err["hint"]
    _, text = httpx.get(standby + "metrics").status_code, httpx.get(standby + "metrics").text
    assert _sample(text, "gpuplat_leader") == 0


# ---- no Hub needed ------------------------------------------------------------------------------


def test_sqlite_is_refused_at_start_naming_what_is_allowed(tmp_path: Path) -> None:
    sqlite = f"sqlite:///{tmp_path / 'x.db'}"
    conf = tmp_path / "gpuplat_server_config.json"  # a Deployment's ConfigMap
    conf.write_text(json.dumps({"GpuPlatServer": {"db_url": sqlite}}))
    for argv in (
        [*SERVER, f"--db-url={sqlite}"],
        [sys.executable, "-m", "jupyter_gpuplat.cli", "server", f"--config={conf}"],
    ):
        res = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        assert res.returncode == 2, res
        assert "sqlite database" in res.stderr and "postgresql+psycopg://" in res.stderr
        assert not (tmp_path / "x.db").exists()
    res = subprocess.run(SERVER, capture_output=True, text=True, timeout=60, env={**os.environ, "GPUPLAT_DB_URL": ""})
    assert res.returncode == 2 and "no db_url" in res.stderr


def test_help_all_lists_the_traits(tmp_path: Path) -> None:
    out = subprocess.run([*SERVER, "--help-all"], capture_output=True, text=True, timeout=60).stdout
    for trait in (
        "ip",
        "port",
        "base_url",
        "config_file",
        "db_url",
        "artifacts_root",
        "executor_class",
        "hub_api_url",
        "service_name",
        "access_scopes",
        "leader_renew_deadline_seconds",
        "server_config_file",
    ):
        assert f"--GpuPlatServer.{trait}=" in out, trait
    assert "--HubIdentityProvider.cache_max_age_seconds=" in out
    assert "--KubernetesExecutor.namespace=" in out and "--LocalExecutor.gpus=" in out


def test_sigint_stops_it_even_when_inherited_as_ignored(pg_db_url: str, tmp_path: Path) -> None:
    # As a service started with `&` from a non-interactive shell: SIGINT arrives ignored.
    cp = ControlPlaneProcess(
        tmp_path, pg_db_url, base_url="/cp", preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)
    ).start()
    proc, log, url = cp.proc, cp.log, cp.url
    assert proc is not None
    try:
        ready = cp.wait_leader()
        assert ready["role"] == "leader" and ready["epoch"] == 1  # a fresh database: the first leader
        # Not a Hub service and no hub_api_url: nobody can be identified, and it says why.
        r = httpx.get(url + "gpuplat/api/whoami", headers={"Authorization": "token t"})
        assert r.status_code == 503 and "JupyterHub API URL" in r.json()["error"]["message"]
        proc.send_signal(signal.SIGINT)
        assert proc.wait(15) == 0, log.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert "stopped (exit 0)" in log.read_text()


def test_a_deposed_leader_stops_serving_and_exits_non_zero(pg_db_url: str, tmp_path: Path) -> None:
    leader_args = [
        "--GpuPlatServer.holder=cp-1",
        "--GpuPlatServer.leader_renew_seconds=0.2",
        "--GpuPlatServer.leader_renew_deadline_seconds=1",
        "--GpuPlatServer.leader_idle_timeout_seconds=3",
    ]
    dead_hub = f"http://127.0.0.1:{free_port()}/hub/api/"
    cp = ControlPlaneProcess(
        tmp_path, pg_db_url, *leader_args, f"--GpuPlatServer.hub_api_url={dead_hub}", base_url="/cp"
    ).start()
    proc, log, url = cp.proc, cp.log, cp.url
    assert proc is not None
    try:
        cp.wait_leader()
        # The Hub unreachable: 503 (retry), not 403 (the token may be fine) nor 500.
        r = httpx.get(url + "gpuplat/api/whoami", headers={"Authorization": "token t"})
        assert r.status_code == 503, r.text
        assert r.json()["error"]["message"].startswith(f"cannot check the token with JupyterHub at {dead_hub}")
        # Its lock's database session ends (an admin, a failover of the database, a cut network).
        with psycopg.connect(psycopg_conninfo(pg_db_url), autocommit=True) as conn:
            n = conn.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = %s",
                ("gpuplat-leader cp-1",),
            ).fetchone()
        assert n is not None and n[0] == 1
        assert proc.wait(15) == 3, log.read_text()  # its supervisor restarts it as a standby
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    text = log.read_text()
    assert "deposed: the leader lock's database session ended" in text and "stopped (exit 3)" in text


def test_a_leader_that_cannot_start_exits_1_saying_why(pg_db_url: str, tmp_path: Path) -> None:
    bad = tmp_path / "platform.yaml"
    bad.write_text("queues:\n  - {name: q, concurrency: -1}\n")
    cp = ControlPlaneProcess(tmp_path, pg_db_url, f"--config-file={bad}").start()
    proc, log = cp.proc, cp.log
    assert proc is not None
    assert proc.wait(60) == 1, log.read_text()
    text = log.read_text()
    assert "the engine failed to start" in text and "concurrency" in text and "stopped (exit 1)" in text
