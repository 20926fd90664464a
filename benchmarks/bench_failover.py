"""Failover of the team-mode control plane: the leader fails → the standby dispatches, in seconds.

What runs for real: two `gpuplat server` processes (`python -m jupyter_gpuplat.service.team.server`)
on one PostgreSQL (GPUPLAT_TEST_PG_URL, else a throw-away server from tests/pg.py), with the
product's leader timings unless told otherwise (`--GpuPlatServer.leader_*`: retry 2 s, renew
2 s, renew deadline 10 s, lock session idle timeout 15 s — client-go's lease defaults) and the
local executor. Identity is tests/service/test_failover.py's fixed-token stand-in for JupyterHub.

Each round: cp-a leads, cp-b stands by, one run is running on cp-a. Then cp-a fails:
* kill: SIGKILL (the process dies; its TCP connection closes; the server frees the lock at once);
* terminate: `pg_terminate_backend` on its lock session (a DBA, a proxy or a server restart);
* freeze: SIGSTOP (a stuck process or VM: only the lock session's idle timeout frees the lock).
From t0 = the failure, a client POSTs a run to cp-b every 50 ms (503 NotLeader until it leads).

Measured per round: t(leader) = cp-b's health/ready says leader; t(dispatching) = the first run
accepted by cp-b is recorded `dispatched` (the figure the target is for); and whether the run
that was running was re-attached by cp-b.

Target: ≤ 15 s from a leader killed to the standby dispatching. Baseline: the lease itself (the
idle timeout a frozen leader must be waited out for); the figure over the lease is the ratio.

Run: python benchmarks/bench_failover.py [--rounds 2] [--modes kill,terminate,freeze] [--idle-timeout 15]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests/: PostgreSQL and the control plane

from _common import machine, table
from bench_pg_admission import fresh_database, postgres

from jupyter_gpuplat.service.team.server import GpuPlatServer
from tests.service.test_failover import TOKEN, ControlPlane, gated, terminate_lock_session
from tests.waiting import until


def one_round(admin: str, mode: str, timings: list[str]) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="gpuplat-bench-failover-") as d, fresh_database(admin) as url:
        tmp = Path(d)
        (tmp / "platform.yaml").write_text(
            "admins: [ops]\nqueues: [{name: q}]\nprojects: [{name: p, members: {ops: admin}}]\n"
        )
        for sub in ("starts", "gates"):
            (tmp / sub).mkdir()
        a = ControlPlane("cp-a", url, tmp, timings).start()
        b: ControlPlane | None = None
        try:
            until(lambda: a.role() == "leader", "cp-a to lead", 120)
            b = ControlPlane("cp-b", url, tmp, timings).start()
            until(lambda: b is not None and b.role() == "standby", "cp-b to stand by", 120)
            held = a.api("POST", "runs", {"project": "p", "queue": "q", "command": gated(tmp, "held")})["id"]
            until(lambda: a.api("GET", f"runs/{held}")["status"] == "running", "the held run to run", 60)
            assert a.proc is not None
            t0 = time.monotonic()
            if mode == "kill":
                a.proc.kill()
            elif mode == "terminate":
                terminate_lock_session(url, "cp-a")
            else:
                os.kill(a.proc.pid, signal.SIGSTOP)
            led = accepted = dispatched = None
            run_id = None
            with httpx.Client(headers={"Authorization": f"token {TOKEN}"}, timeout=10) as http:
                body = {"project": "p", "queue": "q", "command": ["true"]}
                while dispatched is None and time.monotonic() - t0 < 120:
                    if run_id is None:
                        r = http.post(b.url + "gpuplat/api/runs", json=body)
                        if r.status_code == 201:
                            run_id, accepted = r.json()["id"], time.monotonic() - t0
                        else:
                            assert r.status_code == 503 and r.json()["error"]["code"] == "NotLeader", r.text
                    else:
                        tl = http.get(b.url + f"gpuplat/api/runs/{run_id}").json()["timeline"]
                        if any(e["status"] == "dispatched" for e in tl):
                            dispatched = time.monotonic() - t0
                    if led is None and b.role() == "leader":
                        led = time.monotonic() - t0
                    time.sleep(0.05)  # the client's retry interval
            if led is None:
                led = accepted
            held_tl = b.api("GET", f"runs/{held}")["timeline"]
            return {
                "mode": mode,
                "leader_s": led,
                "accepted_s": accepted,
                "dispatching_s": dispatched,
                "reattached": any(e["reason"] == "Reattached" for e in held_tl),
            }
        finally:
            (tmp / "gates" / "held").touch()
            for cp in (a, b):
                if cp is not None:
                    cp.stop()
            for f in (tmp / "starts").iterdir():
                for pid in f.read_text().split():
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(int(pid), signal.SIGKILL)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=2, help="rounds per failure mode (the median is reported)")
    ap.add_argument("--modes", default="kill,terminate,freeze", help="failures to measure (comma-separated)")
    # The product's defaults, read from the control plane's traits.
    d = {n: t.default_value for n, t in GpuPlatServer.class_traits(config=True).items() if n.startswith("leader_")}
    ap.add_argument("--retry", type=float, default=d["leader_retry_seconds"], help="leader_retry_seconds")
    ap.add_argument("--renew", type=float, default=d["leader_renew_seconds"], help="leader_renew_seconds")
    ap.add_argument(
        "--renew-deadline", type=float, default=d["leader_renew_deadline_seconds"], help="leader_renew_deadline_seconds"
    )
    ap.add_argument(
        "--idle-timeout", type=float, default=d["leader_idle_timeout_seconds"], help="leader_idle_timeout_seconds"
    )
    args = ap.parse_args()
    timings = [
        f"--GpuPlatServer.leader_retry_seconds={args.retry}",
        f"--GpuPlatServer.leader_renew_seconds={args.renew}",
        f"--GpuPlatServer.leader_renew_deadline_seconds={args.renew_deadline}",
        f"--GpuPlatServer.leader_idle_timeout_seconds={args.idle_timeout}",
    ]
    print(f"bench_failover: {machine()}")
    print(
        f"timings: retry {args.retry} s, renew {args.renew} s, renew deadline {args.renew_deadline} s, "
        f"lease (idle timeout) {args.idle_timeout} s\n"
    )
    results: dict[str, list[dict[str, Any]]] = {}
    with postgres() as admin:
        for mode in [m for m in args.modes.split(",") if m]:
            for _ in range(args.rounds):
                r = one_round(admin, mode, timings)
                results.setdefault(mode, []).append(r)
                print(
                    f"  {mode}: leader {r['leader_s']:.2f} s, dispatching {r['dispatching_s']:.2f} s, "
                    f"re-attached {r['reattached']}",
                    flush=True,
                )

    def med(rs: list[dict[str, Any]], k: str) -> float:
        return statistics.median(float(r[k]) for r in rs)

    rows = [
        [
            mode,
            f"{med(rs, 'leader_s'):.2f}",
            f"{med(rs, 'dispatching_s'):.2f}",
            f"{min(r['dispatching_s'] for r in rs):.2f}-{max(r['dispatching_s'] for r in rs):.2f}",
            f"{med(rs, 'dispatching_s') / args.idle_timeout:.2f}x",
            "yes" if all(r["reattached"] for r in rs) else "NO",
            "yes" if med(rs, "dispatching_s") <= 15.0 else "MISSES",
        ]
        for mode, rs in results.items()
    ]
    print()
    print(
        table(
            [
                "failure",
                "→ standby leads, s",
                "→ standby dispatching, s (median)",
                "range",
                "vs lease",
                "running run re-attached",
                "≤ 15 s",
            ],
            rows,
        )
    )


if __name__ == "__main__":
    main()
