"""Two `gpuplat server` control planes on one PostgreSQL: the leader fails, the standby takes over.

The leader is killed (SIGKILL), its lock's database session terminated, or the process frozen
(SIGSTOP). Each time the standby leads within the lease plus slack, no run is dispatched or
started twice (each run's timeline has one `dispatched` and one start; each run's own process
notes every start in a file), the runs that were running are re-attached by the new leader and
finish, and the queued ones are dispatched by it. A deposed leader exits 3 (its supervisor
would restart it as a standby); a frozen one, thawed, has its first write refused by the epoch
and exits too.

Real parts: both control planes are real processes (`python -m jupyter_gpuplat.service.team.server`),
on a real PostgreSQL (tests/pg.py), with the local executor starting real subprocesses in a
shared artifacts directory. Identity is the one stand-in, at its true outside edge: instead of
JupyterHub (tests/service/test_control_plane.py has the real Hub), `FixedTokenIdentity` below takes
one bearer token as the platform admin `ops`.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from jupyter_server.auth.identity import IdentityProvider, User
from tornado import web

from ..hubenv import ControlPlaneProcess
from ..pg import psycopg_conninfo
from ..waiting import until

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "failover-test-token"
IDLE_TIMEOUT = 3.0  # the lease: the lock session's idle_session_timeout
SLACK = 4.0  # an engine start by the restart path, on a loaded 2-core machine
TIMINGS = (
    "--GpuPlatServer.leader_retry_seconds=0.2",
    "--GpuPlatServer.leader_renew_seconds=0.4",
    "--GpuPlatServer.leader_renew_deadline_seconds=2.0",
    f"--GpuPlatServer.leader_idle_timeout_seconds={IDLE_TIMEOUT}",
)
PLATFORM = """
admins: [ops]
queues:
  - name: q
    concurrency: 2
projects:
  - name: p
    members: {ops: admin}
"""


class FixedTokenIdentity(IdentityProvider):
    """`Authorization: token <TOKEN>` is the user `ops`; anything else is no one."""

    def get_user(self, handler: web.RequestHandler) -> User | None:
        if handler.request.headers.get("Authorization") == f"token {TOKEN}":
            return User(username="ops", name="ops", display_name="ops")
        return None


class ControlPlane(ControlPlaneProcess):
    """A control plane of the pair: named (its lock holder), `ops` by a fixed token, the failover timings."""

    def __init__(self, name: str, db_url: str, tmp: Path, timings: Sequence[str] = TIMINGS) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("JUPYTERHUB_")}
        env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
        super().__init__(
            tmp,
            db_url,
            f"--config-file={tmp / 'platform.yaml'}",
            f"--GpuPlatServer.holder={name}",
            "--GpuPlatServer.identity_provider_class=tests.service.test_failover.FixedTokenIdentity",
            "--GpuPlatServer.safety_tick_seconds=1",
            *timings,
            name=name,
            env=env,
            cwd=ROOT,
        )
        self.name = name

    def api(self, method: str, path: str, body: Any = None) -> Any:
        r = httpx.request(
            method, self.url + "gpuplat/api/" + path, json=body, headers={"Authorization": f"token {TOKEN}"}, timeout=10
        )
        assert r.status_code < 300, (r.status_code, r.text)
        return r.json()

    def start(self) -> ControlPlane:
        super().start()
        return self

    def stop(self) -> None:
        self.kill()


def gated(tmp: Path, name: str) -> list[str]:
    """A run that notes each start of its own, then waits for its gate file and exits 0."""
    starts, gate = tmp / "starts" / name, tmp / "gates" / name
    code = (
        "import os, pathlib, time\n"
        f"with open({str(starts)!r}, 'a') as f: f.write(f'{{os.getpid()}}\\n')\n"
        f"while not pathlib.Path({str(gate)!r}).exists(): time.sleep(0.02)\n"
    )
    return [sys.executable, "-c", code]


@pytest.fixture
def planes(pg_db_url: str, tmp_path: Path) -> Iterator[tuple[ControlPlane, ControlPlane]]:
    (tmp_path / "platform.yaml").write_text(PLATFORM)
    (tmp_path / "starts").mkdir()
    (tmp_path / "gates").mkdir()
    a = ControlPlane("cp-a", pg_db_url, tmp_path).start()
    assert until(lambda: a.role() == "leader", "cp-a to lead", 60)
    b = ControlPlane("cp-b", pg_db_url, tmp_path).start()
    assert until(lambda: b.role() == "standby", "cp-b to stand by", 60)
    yield a, b
    for p in (a, b):
        p.stop()
    # Runs outlive control planes by design: the test must not leak them.
    for f in (tmp_path / "starts").iterdir():
        for pid in f.read_text().split():
            try:
                os.kill(int(pid), signal.SIGKILL)
            except ProcessLookupError:
                pass


def terminate_lock_session(db_url: str, holder: str) -> None:
    with psycopg.connect(psycopg_conninfo(db_url), autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity WHERE application_name = %s",
            (f"gpuplat-leader {holder}",),
        ).fetchall()
    assert rows == [(True,)], rows


@pytest.mark.parametrize("failure", ["kill", "terminate", "freeze"])
def test_the_standby_takes_over_and_every_run_is_dispatched_once_and_finishes(
    planes: tuple[ControlPlane, ControlPlane], pg_db_url: str, tmp_path: Path, failure: str
) -> None:
    a, b = planes
    names = [f"r{i}" for i in range(4)]
    ids = {
        n: a.api("POST", "runs", {"project": "p", "queue": "q", "name": n, "command": gated(tmp_path, n)})["id"]
        for n in names
    }

    def status(cp: ControlPlane, n: str) -> str:
        return str(cp.api("GET", f"runs/{ids[n]}")["status"])

    until(lambda: all(status(a, n) == "running" for n in names[:2]), "r0, r1 to run on cp-a", 30)
    assert [status(a, n) for n in names[2:]] == ["queued", "queued"]  # concurrency 2
    ready = a.health()
    assert ready is not None and ready[1]["role"] == "leader" and ready[1]["epoch"] == 1
    assert a.proc is not None

    t0, t0_wall = time.monotonic(), time.time()
    if failure == "kill":
        a.proc.kill()
    elif failure == "terminate":
        terminate_lock_session(pg_db_url, "cp-a")
    else:
        os.kill(a.proc.pid, signal.SIGSTOP)
    until(lambda: b.role() == "leader", f"cp-b to lead after cp-a's {failure}", IDLE_TIMEOUT + SLACK + 10)
    took = time.monotonic() - t0
    assert took <= IDLE_TIMEOUT + SLACK, f"cp-b led {took:.1f} s after the {failure} (lease {IDLE_TIMEOUT} s)"
    assert (b.health() or (0, {}))[1]["epoch"] == 2

    if failure == "terminate":  # its heartbeat finds the session gone: it stops and exits 3
        assert a.proc.wait(10) == 3, a.tail()
        assert "deposed" in a.log.read_text()
    if failure == "freeze":
        # While it is frozen its run r0 ends; the new leader records that. Thawed, the old leader
        # sees its child's exit in its first loop turn, before its heartbeat's thread can report the
        # session gone: that late write is refused by the epoch, which deposes it; it exits 3.
        (tmp_path / "gates" / "r0").touch()
        until(lambda: status(b, "r0") == "succeeded", "r0's end, recorded by cp-b", 30)
        os.kill(a.proc.pid, signal.SIGCONT)
        assert a.proc.wait(15) == 3, a.tail()
        log = a.log.read_text()
        assert "write refused: this control plane is no longer the leader (fencing epoch 2, ours 1)" in log, log
        assert "deposed: a write was refused" in log

    # The running runs were re-attached by cp-b; the queued ones are dispatched by it as slots free.
    for n in names[:2]:
        tl = b.api("GET", f"runs/{ids[n]}")["timeline"]
        assert any(e["reason"] == "Reattached" for e in tl), (n, tl)
    for n in names:
        (tmp_path / "gates" / n).touch()
    until(lambda: all(status(b, n) == "succeeded" for n in names), "every run to succeed on cp-b", 60)

    for n in names:
        tl = b.api("GET", f"runs/{ids[n]}")["timeline"]
        steps = [(e["status"], e["reason"]) for e in tl]
        assert sum(s == "dispatched" for s, _ in steps) == 1, (n, steps)
        assert sum(s == "running" and r != "Reattached" for s, r in steps) == 1, (n, steps)
        assert sum(s == "succeeded" for s, _ in steps) == 1, (n, steps)
        started = (tmp_path / "starts" / n).read_text().split()
        assert len(started) == 1, f"{n} was started {len(started)} times"
        if n in names[2:]:  # queued at the failure: dispatched by cp-b
            assert next(e["at"] for e in tl if e["status"] == "dispatched") >= t0_wall, (n, steps)
