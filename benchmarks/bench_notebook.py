"""Notebook runs: create → done for a trivial 1-cell notebook, through the REST API of a real server.

Everything is real: `python -m jupyter server` with the extension (bench_api's `Server`), SQLite,
the local executor starting real processes, nbclient and an IPython kernel. As the server's
owner, the script creates the `bench-open` queue, writes `nb.ipynb` (one cell: `print(1 + 1)`)
in the Jupyter root, then submits it N times, one at a time (`POST runs {"script": "nb.ipynb"}`),
and measures for each:

- client: POST send time → the `succeeded` event arriving on the `events` SSE stream;
- server: POST send time → the run's `finished_at` (server clock, same machine);
- the run's own phases from its timeline: created → running, running → finished.

The first run (which starts the warm launchers) is reported apart, not in the p50. Compared
with jupyter-scheduler on the same notebook (6.4 s create → done; figure as given, not
measured here). Target ≤ 1.5 s.

Run: python benchmarks/bench_notebook.py [--runs 10] [--direct-launcher]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import nbformat

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import machine, ms, summary, table
from bench_api import SERVER_TOKEN, Client, EventStream, Server, setup_bench_project

PEER_S = {"jupyter-scheduler": 6.4}
TARGET_S = 1.5


def one_run(ops: Client, events: EventStream) -> dict[str, float]:
    body = {"project": "bench", "queue": "bench-open", "script": "nb.ipynb"}
    t_send = time.time()
    r = ops.s.post(ops.base + "runs", json=body, timeout=60)
    if r.status_code != 201:
        raise RuntimeError(f"POST runs: {r.status_code} {r.text}")
    rid = r.json()["id"]
    t_done = events.wait(rid, "succeeded", 120)
    run = ops.call("GET", f"runs/{rid}")
    if run["status"] != "succeeded":
        raise RuntimeError(f"run {rid} ended {run['status']}: {run['message']}")
    at = {e["status"]: e["at"] for e in reversed(run["timeline"])}  # the first event of each status
    log = ops.s.get(ops.base + f"runs/{rid}/logs", params={"format": "text"}, timeout=60).text
    if "2" not in log.split():
        raise RuntimeError(f"run {rid}: the cell's output is not in its log: {log!r}")
    return {
        "client": t_done - t_send,
        "server": run["finished_at"] - t_send,
        "created → running": at["running"] - at["created"],
        "running → finished": run["finished_at"] - at["running"],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=10, help="notebook runs measured (after one warm-up run)")
    ap.add_argument(
        "--direct-launcher",
        action="store_true",
        help="spawn launcher.py per run (LocalExecutor.warm_launcher=False): a fresh interpreter and kernel",
    )
    ap.add_argument("--keep", action="store_true", help="keep the temp dir (server log, database)")
    args = ap.parse_args()

    print(f"bench_notebook — {machine()}")
    print("launcher: " + ("launcher.py spawned per run" if args.direct_launcher else "warm launcher (forks)"))
    tmp = tempfile.mkdtemp(prefix="gpuplat-bench-nb-")
    server: Server | None = None
    events: EventStream | None = None
    try:
        nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print(1 + 1)")])
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
        nbformat.write(nb, Path(tmp, "nb.ipynb"))
        extra = ("--LocalExecutor.warm_launcher=False",) if args.direct_launcher else ()
        server = Server(tmp, f"sqlite:///{tmp}/gpuplat.db", None, extra)
        print(f"server: ready in {server.wait_ready():.1f} s on port {server.port}", flush=True)
        ops = Client(server.base, SERVER_TOKEN)
        setup_bench_project(ops)
        events = EventStream(server.base, SERVER_TOKEN)
        first = one_run(ops, events)
        samples = [one_run(ops, events) for _ in range(args.runs)]
        rows: list[list[Any]] = []
        for key, label in (
            ("client", "client: send → succeeded on events SSE"),
            ("server", "server: send → finished_at"),
            ("created → running", "(created → running)"),
            ("running → finished", "(running → finished: interpreter, nbclient, kernel, cell)"),
        ):
            s = summary([x[key] for x in samples])
            target = key in ("client", "server")
            rows.append(
                [
                    f"notebook create → done, {label}",
                    ms(s["p50"]),
                    ms(s["p95"]),
                    ms(first[key]),
                    f"≤ {TARGET_S * 1e3:.0f}" if target else "",
                    ("meets" if s["p50"] <= TARGET_S else "MISSES") if target else "",
                    f"{s['n']} runs",
                ]
            )
        print()
        print(table(["measurement", "p50 ms", "p95 ms", "first run ms", "target ms", "", "samples"], rows))
        client = summary([x["client"] for x in samples])["p50"]
        print("\nvs peers (peer figure as given, not measured here):")
        print(table(["peer", "peer s", "ours s (client p50)", "peer / ours"], [
            [name, f"{v:.1f}", f"{client:.2f}", f"{v / client:.1f}×"] for name, v in PEER_S.items()
        ]))  # fmt: skip
        print(json.dumps({"p50_client_s": client}))
    finally:
        if events is not None:
            events.close()
        if server is not None:
            server.stop()
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
