"""GPU sessions: kernel start through the lease vs a plain ipykernel, wake-up after a GPU frees, idle error.

Everything is real: a Jupyter server with the extension (tests/server.py), the local executor
with 4 declared GPUs, the session provisioner, the kernel agent and ipykernel. Kernels are
started as JupyterLab starts them (POST /api/sessions) and used over their websocket.

1. Start → kernel answers, client side: POST /api/sessions, then the first execute_reply on the
   websocket. Plain `python3` kernelspec (jupyter_client's LocalProvisioner: the baseline) vs
   `gpuplat-quick` (a lease admitted at once, the agent, the kernel). Overhead = session p50 −
   plain p50; target ≤ 150 ms. Also the server's own admission → KernelReady (timeline).
2. Waiting → connected after the GPU frees: a second session of the same user waits on
   UserLimit; the first is stopped; from the stop request returning to the waiting kernel start
   returning (201), and on the server's clock from the first's final event to the second's
   KernelStarting. Target ≤ 1 s p50.
3. Idle detection error: `quick` has idle_seconds 3; the error is when the session was told to
   end (its StopRequested event) minus the deadline its IdleWarning named. Target ≤ 1 s.

Run: python benchmarks/bench_sessions.py [--runs 10]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _common import machine, ms, summary  # noqa: E402

from tests.kernel_ws import (  # noqa: E402
    SESSIONS,
    KernelSocket,
    session_of,
    start_kernel,
)
from tests.server import ServerProcess  # noqa: E402

TARGET_OVERHEAD_S = 0.150
TARGET_WAKE_S = 1.0
TARGET_IDLE_ERROR_S = 1.0


def delete_kernel(srv: ServerProcess, kernel_id: str) -> None:
    import requests

    requests.delete(srv.url + f"api/kernels/{kernel_id}", headers={"Authorization": f"token {srv.token}"}, timeout=60)


def started_and_answered(srv: ServerProcess, path: str, kernel: str) -> tuple[float, str]:
    t0 = time.perf_counter()
    r = start_kernel(srv, path, kernel)
    assert r.status_code == 201, r.text
    kid = r.json()["kernel"]["id"]
    ks = KernelSocket(srv, kid)
    assert ks.execute("pass")[1] == "ok"
    took = time.perf_counter() - t0
    ks.close()
    return took, kid


def events(srv: ServerProcess, run_id: str) -> list[dict[str, Any]]:
    return list(srv.ok("GET", f"runs/{run_id}")["timeline"])


def at(evs: list[dict[str, Any]], reason: str, status: str | None = None) -> float:
    return next(e["at"] for e in evs if e["reason"] == reason and (status is None or e["status"] == status))


def bench_start(srv: ServerProcess, runs: int) -> None:
    plain, session, server_side = [], [], []
    started_and_answered(srv, "warm-plain.ipynb", "python3")  # first of each: imports, warm launcher
    first, kid = started_and_answered(srv, "warm.ipynb", "gpuplat-quick")
    delete_kernel(srv, kid)
    for i in range(runs):
        took, kid = started_and_answered(srv, f"plain{i}.ipynb", "python3")
        plain.append(took)
        delete_kernel(srv, kid)
        took, kid = started_and_answered(srv, f"s{i}.ipynb", "gpuplat-quick")
        session.append(took)
        rid = session_of(srv, f"s{i}.ipynb")["id"]
        evs = events(srv, rid)
        while not any(e["reason"] == "KernelReady" for e in evs):  # reported just after the kernel answers
            time.sleep(0.01)
            evs = events(srv, rid)
        server_side.append(at(evs, "KernelReady") - at(evs, "Admitted"))
        delete_kernel(srv, kid)
    p, s = summary(plain), summary(session)
    print("1. start → kernel answers (client: POST /api/sessions → first execute_reply)")
    print(f"   plain ipykernel (python3):     p50 {ms(p['p50'])}  p95 {ms(p['p95'])}  n={p['n']}")
    print(f"   GPU session (gpuplat-quick):   p50 {ms(s['p50'])}  p95 {ms(s['p95'])}  n={s['n']}  (first {ms(first)})")
    overhead = s["p50"] - p["p50"]
    verdict = "met" if overhead <= TARGET_OVERHEAD_S else "MISSED"
    print(f"   overhead p50 {ms(overhead)}  (ratio {s['p50'] / p['p50']:.2f}x; target ≤ 150 ms: {verdict})")
    a = summary(server_side)
    print(f"   server: Admitted → KernelReady p50 {ms(a['p50'])}  p95 {ms(a['p95'])}")


def bench_wake(srv: ServerProcess, runs: int) -> None:
    client, server = [], []
    for i in range(runs):
        r = start_kernel(srv, f"hold{i}.ipynb", "gpuplat-notebook")
        assert r.status_code == 201, r.text
        held = session_of(srv, f"hold{i}.ipynb")
        answer: dict[str, Any] = {}
        waiter = threading.Thread(
            target=lambda i=i, answer=answer: answer.setdefault("r", start_kernel(srv, f"wait{i}.ipynb"))
        )
        waiter.start()
        deadline = time.monotonic() + 30
        while not srv.ok("GET", "sessions", notebook=f"wait{i}.ipynb")["sessions"]:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        t0 = time.perf_counter()
        srv.ok("POST", f"runs/{held['id']}/stop")
        waiter.join(60)
        client.append(time.perf_counter() - t0)
        assert answer["r"].status_code == 201, answer["r"].text
        waited = session_of(srv, f"wait{i}.ipynb")
        freed = at(events(srv, held["id"]), "Stopped", "stopped")
        server.append(at(events(srv, waited["id"]), "KernelStarting") - freed)
        srv.ok("POST", f"runs/{waited['id']}/stop")
        srv.wait_status(waited["id"], "stopped")
    c, s = summary(client), summary(server)
    verdict = "met" if c["p50"] <= TARGET_WAKE_S else "MISSED"
    print("2. waiting → connected after the GPU frees (same user, UserLimit 1/1)")
    print(
        f"   client: stop returns → waiting kernel start returns  p50 {ms(c['p50'])}  p95 {ms(c['p95'])}  ({verdict})"
    )
    print(f"   server: first's final → second's KernelStarting       p50 {ms(s['p50'])}  p95 {ms(s['p95'])}")


def bench_idle(srv: ServerProcess, runs: int) -> None:
    errors = []
    for i in range(runs):
        r = start_kernel(srv, f"idle{i}.ipynb", "gpuplat-quick")
        assert r.status_code == 201, r.text
        rid = session_of(srv, f"idle{i}.ipynb")["id"]
        srv.wait_status(rid, "stopped", timeout=30)
        evs = events(srv, rid)
        warning = next(e for e in evs if e["reason"] == "IdleWarning")
        told = next(e["at"] for e in evs if e["status"] == "stopping")
        errors.append(told - warning["details"]["deadline"])
    e = summary(errors)
    verdict = "met" if max(abs(e["min"]), abs(e["max"])) <= TARGET_IDLE_ERROR_S else "MISSED"
    print("3. idle detection error (told to end − deadline), idle_seconds 3")
    print(f"   p50 {ms(e['p50'])}  max {ms(e['max'])}  min {ms(e['min'])}  n={e['n']}  (target ≤ 1 s: {verdict})")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10)
    args = ap.parse_args()
    print(machine())
    with tempfile.TemporaryDirectory(prefix="bench-sessions-") as tmp:
        srv = ServerProcess(Path(tmp), gpus=4, config_file=SESSIONS)
        srv.start()
        try:
            bench_start(srv, args.runs)
            bench_wake(srv, max(3, args.runs // 2))
            bench_idle(srv, max(3, args.runs // 3))
        finally:
            srv.stop()


if __name__ == "__main__":
    main()
