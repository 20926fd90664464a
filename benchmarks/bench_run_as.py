"""What running each run as its user's account costs: LocalExecutor.run_as = "user" against "server".

Two measurements, both real (no stand-ins), one run at a time, the command `sh -c 'date +%s.%N'`:

1. launch, in-process (labelled so): a `LocalExecutor` with its warm launcher, on this
   process's event loop; per run, `submit()` entered → its handle returned (what the dispatcher
   waits for before it records `running`), and → the time the command itself printed (the
   launcher has forked, joined the run's cgroups, dropped to the account, entered the directory
   and exec'd). Modes: `server` (today's default), `server, no cgroups`, `user` (root only).
2. through the server, as a user meets it: `python -m jupyter server` with the extension (the
   bench_api.py harness), create → running: POST send (client clock) → the run's `started_at`
   (server clock, same machine), in `server` and `user` mode.

`user` mode needs root: the script makes a throwaway account `gpb-ops` for the platform user
`ops`, lets it execute this interpreter (o+x on the directories in the way, as the hostile test
suite does, put back at the end) and removes it after. Run the same script against the code
before issue 21 with `PYTHONPATH=<old checkout> python benchmarks/bench_run_as.py --modes server`
(its LocalExecutor has no run_as/cgroups traits; the script then sets none).

Run: python benchmarks/bench_run_as.py [--runs 60] [--rounds 3] [--modes server,server-nocg,user] [--no-api]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import pwd
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from _common import machine, ms, rounds_summary, table
from bench_api import SERVER_TOKEN, Client, EventStream, Server, create_to_running, setup_bench_project

from jupyter_gpuplat.core.request import Entrypoint
from jupyter_gpuplat.executors.base import LaunchRequest, Observation
from jupyter_gpuplat.executors.local.executor import LocalExecutor

ACCOUNT = "gpb-ops"


@contextlib.contextmanager
def account_for_runs() -> Iterator[str]:
    """A throwaway account that may execute this interpreter (root only)."""
    made = False
    try:
        pwd.getpwnam(ACCOUNT)
    except KeyError:
        subprocess.run(["useradd", "--create-home", "--user-group", ACCOUNT], check=True, timeout=60)
        made = True
    changed: list[tuple[str, int]] = []
    for target in (os.path.realpath(sys.executable), sys.prefix, str(Path(__file__).resolve().parents[1])):
        parent = "/"
        for part in [p for p in os.path.realpath(target).split("/") if p]:
            parent = os.path.join(parent, part)
            if os.path.isdir(parent) and not os.stat(parent).st_mode & stat.S_IXOTH:
                changed.append((parent, stat.S_IMODE(os.stat(parent).st_mode)))
                os.chmod(parent, changed[-1][1] | stat.S_IXOTH)
    try:
        yield ACCOUNT
    finally:
        for path, mode in reversed(changed):
            os.chmod(path, mode)
        if made:
            subprocess.run(["userdel", "--remove", ACCOUNT], capture_output=True, timeout=60)


def executor_config(mode: str) -> dict[str, Any]:
    traits = LocalExecutor.class_traits()
    config: dict[str, Any] = {"warm_launcher": True}
    if "cgroups" in traits:
        config["cgroups"] = "off" if mode == "server-nocg" else "auto"
    if mode == "user":
        config.update(run_as="user", unix_users={"ops": ACCOUNT})
    return config


async def launch_rounds(mode: str, root: Path, runs: int, rounds: int) -> dict[str, dict[str, float]]:
    executor = LocalExecutor(**executor_config(mode))
    ended: dict[str, asyncio.Event] = {}

    def observe(o: Observation) -> None:
        ended.setdefault(o.run_id, asyncio.Event()).set()

    executor.set_observer(observe)
    returned: list[list[float]] = []
    command: list[list[float]] = []
    try:
        for r in range(rounds + 1):  # round 0 warms the warm launcher up
            ret, cmd = [], []
            for i in range(runs):
                run_id = f"b-{mode}-{r}-{i}"
                ended[run_id] = asyncio.Event()
                req = LaunchRequest(
                    run_id,
                    Entrypoint("command", argv=("sh", "-c", "date +%s.%N")),
                    {},
                    (),
                    str(root / run_id),
                    spec={"resources": {"cpu": "1", "memory": "2Gi"}},
                    user="ops",
                )
                t_send = time.time()
                t0 = time.perf_counter()
                handle = await executor.submit(req)
                ret.append(time.perf_counter() - t0)
                await asyncio.wait_for(ended[run_id].wait(), 30)
                printed = Path(handle["log_path"]).read_text().split()
                cmd.append(float(printed[0]) - t_send)
            if r:
                returned.append(ret)
                command.append(cmd)
    finally:
        await executor.close()
    return {"submit → handle": rounds_summary(returned), "submit → the command's own clock": rounds_summary(command)}


def api_create_to_running(mode: str, runs: int, artifacts: Path) -> dict[str, float]:
    tmp = tempfile.mkdtemp(prefix=f"bench-run-as-{mode}-")
    extra: tuple[str, ...] = ()
    if mode == "user":
        extra = ("--LocalExecutor.run_as=user", f"--LocalExecutor.unix_users={{'ops': '{ACCOUNT}'}}")
    server = Server(tmp, f"sqlite:///{tmp}/gpuplat.db", extra_args=extra, artifacts_root=str(artifacts / mode))
    try:
        server.wait_ready()
        ops = Client(server.base, SERVER_TOKEN)
        setup_bench_project(ops)
        events = EventStream(server.base, SERVER_TOKEN)
        try:
            return create_to_running(ops, events, runs)["server: send → started_at"]
        finally:
            events.close()
    except Exception:
        print(server.tail(60), file=sys.stderr)
        raise
    finally:
        server.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=60, help="runs per round (in-process) / measured (through the server)")
    ap.add_argument("--rounds", type=int, default=3, help="rounds of the in-process launch; figures are medians")
    ap.add_argument("--modes", default="server,server-nocg,user", help="comma-separated: server, server-nocg, user")
    ap.add_argument("--no-api", action="store_true", help="skip the through-the-server measurement")
    args = ap.parse_args()
    modes = [m for m in args.modes.split(",") if m]
    if "user" in modes and os.geteuid() != 0:
        print("user mode needs root: measuring the others only", file=sys.stderr)
        modes.remove("user")
    print(machine())
    base = Path(tempfile.mkdtemp(prefix="bench-run-as-", dir="/var/tmp"))
    os.chmod(base, 0o711)
    rows: list[list[Any]] = []
    try:
        with account_for_runs() if "user" in modes else contextlib.nullcontext():
            for mode in modes:
                found = asyncio.run(launch_rounds(mode, base / mode, args.runs, args.rounds))
                for what, s in found.items():
                    rows.append(
                        [
                            f"{mode}: {what} (in-process)",
                            ms(s["p50"]),
                            ms(s["p95"]),
                            f"{ms(s['p50_lo'])}–{ms(s['p50_hi'])}",
                        ]
                    )
            if not args.no_api:
                for mode in [m for m in modes if m in ("server", "user")]:
                    s = api_create_to_running(mode, args.runs, base)
                    rows.append([f"{mode}: create → running, send → started_at", ms(s["p50"]), ms(s["p95"]), ""])
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print(table(["what", "p50", "p95", "round p50s"], rows))


if __name__ == "__main__":
    main()
