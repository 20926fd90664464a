"""Fixtures of the hostile-run suite: real Unix accounts, and a real server that runs runs as them.

- `accounts`: throwaway Unix accounts `gpt-<user>` for the example config's platform users, made
  with useradd for the session and removed after it (with every process they still have). None
  where the suite does not run as root: then tests assert that the platform says what it does not
  enforce, rather than pretending.
- `reachable`: the interpreter and this checkout made enterable by other accounts (pyenv lives
  under /root, mode 0700, here): o+x on the directories in the way, put back after the session.
- `machine`: a directory for the artifacts root of a user-mode server (reachable by the run
  accounts, unlike pytest's 0700 tmp), and device nodes `nvidia0..3` (char 195:N, no driver
  behind them): opening your own gives ENXIO, another's EPERM from the devices cgroup.
- `user_mode_config`: LocalExecutor.run_as = "user" with the accounts, for a ServerProcess.
- `hostile`: submit a cell as a platform user and wait for it to end, reading what it printed.
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import signal
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ..server import ServerProcess
from ..waiting import until

CHECKOUT = Path(__file__).resolve().parents[2]
USERS = ("alice", "bob", "erin", "dave")
PREFIX = "gpt-"
GPUS = 4
FINAL = ("succeeded", "failed", "stopped")
# What the server's environment holds that no run may see (team mode's URL and Hub token among them).
SERVER_SECRETS = {
    "GPUPLAT_DB_URL": "postgresql+psycopg://gpuplat:db-secret-1@db/gpuplat",
    "JUPYTERHUB_API_TOKEN": "hub-secret-2",
    "AWS_SECRET_ACCESS_KEY": "cloud-secret-3",
}


def is_root() -> bool:
    return os.geteuid() == 0


def _run(*argv: str) -> None:
    subprocess.run(argv, check=True, capture_output=True, timeout=60)


def _kill_all_of(uid: int) -> None:
    def none_left() -> bool:
        pids = []
        for entry in os.scandir("/proc"):
            if entry.name.isdigit():
                with contextlib.suppress(OSError):
                    if os.stat(entry.path).st_uid == uid:
                        pids.append(int(entry.name))
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        return not pids

    with contextlib.suppress(AssertionError):  # as before: best effort for 10 s
        until(none_left, f"no process of uid {uid} left", 10)


@pytest.fixture(scope="session")
def accounts() -> Iterator[dict[str, str] | None]:
    """platform user → Unix account, made for the session (None without root)."""
    if not is_root():
        yield None
        return
    made: list[str] = []
    for user in USERS:
        name = PREFIX + user
        try:
            pwd.getpwnam(name)
        except KeyError:
            _run("useradd", "--create-home", "--user-group", "--shell", "/bin/sh", name)
            made.append(name)
    try:
        yield {user: PREFIX + user for user in USERS}
    finally:
        for name in (PREFIX + u for u in USERS):
            with contextlib.suppress(KeyError):
                _kill_all_of(pwd.getpwnam(name).pw_uid)
        for name in made:
            subprocess.run(["userdel", "--remove", name], capture_output=True, timeout=60)


@pytest.fixture(scope="session")
def reachable(accounts: dict[str, str] | None) -> Iterator[None]:
    """Let other accounts execute this interpreter and read this checkout (o+x on the directories in the way)."""
    changed: list[tuple[str, int]] = []
    if accounts is not None:
        for target in (os.path.realpath(sys.executable), str(CHECKOUT), sys.prefix):
            parent = "/"
            for part in [p for p in os.path.realpath(target).split("/") if p]:
                parent = os.path.join(parent, part)
                if not os.path.isdir(parent):
                    break
                mode = stat.S_IMODE(os.stat(parent).st_mode)
                if not mode & stat.S_IXOTH:
                    changed.append((parent, mode))
                    os.chmod(parent, mode | stat.S_IXOTH)
    try:
        yield
    finally:
        for path, mode in reversed(changed):
            os.chmod(path, mode)


@dataclass
class Machine:
    """Where the user-mode server keeps what the tests look at."""

    artifacts: Path
    devices: Path  # nvidia0..3: character devices 195:N without a driver
    db: Path


@pytest.fixture(scope="session")
def machine(accounts: dict[str, str] | None) -> Iterator[Machine]:
    base = Path(tempfile.mkdtemp(prefix="gpuplat-sec-", dir="/var/tmp"))
    os.chmod(base, 0o711)  # runs enter their own directories below, list nothing
    devices = base / "dev"
    devices.mkdir()
    os.chmod(devices, 0o755)
    if accounts is not None:
        for i in range(GPUS):
            node = devices / f"nvidia{i}"
            os.mknod(node, 0o666 | stat.S_IFCHR, os.makedev(195, i))
            os.chmod(node, 0o666)  # past the umask: file modes let everyone in, only the cgroup may refuse
    try:
        yield Machine(base / "artifacts", devices, base / "private" / "gpuplat.db")
    finally:
        subprocess.run(["rm", "-rf", str(base)], capture_output=True, timeout=60)


def user_mode_config(machine: Machine, accounts: dict[str, str]) -> dict[str, Any]:
    return {
        "GpuPlat": {"artifacts_root": str(machine.artifacts)},
        "LocalExecutor": {
            "run_as": "user",
            "unix_users": accounts,
            "python": sys.executable,
            "warm_launcher": True,
        },
    }


def wait_final(srv: ServerProcess, run_id: str, timeout: float = 60) -> dict[str, Any]:
    last: dict[str, Any] = {}

    def final() -> dict[str, Any] | None:
        last.update(srv.ok("GET", f"runs/{run_id}", user="ops"))
        return dict(last) if last["status"] in FINAL else None

    try:
        return until(final, f"run {run_id} to end", timeout)
    except AssertionError as e:
        raise AssertionError(f"run {run_id} is {last.get('status')} after {timeout}s: {last.get('message')}") from e


def wait_status(srv: ServerProcess, run_id: str, status: str, timeout: float = 60) -> dict[str, Any]:
    last: dict[str, Any] = {}

    def reached() -> dict[str, Any] | None:
        last.update(srv.ok("GET", f"runs/{run_id}", user="ops"))
        if last["status"] != status and last["status"] in FINAL:  # it will not get there any more
            raise AssertionError(f"run {run_id} is {last['status']}, not {status}: {last.get('message')}")
        return dict(last) if last["status"] == status else None

    try:
        return until(reached, f"run {run_id} to be {status}", timeout)
    except AssertionError as e:
        raise AssertionError(f"run {run_id} is {last.get('status')}, not {status}: {last.get('message')}") from e


def submit(srv: ServerProcess, user: str, project: str, code: str, **fields: Any) -> str:
    body = {"project": project, "code": code, "name": fields.pop("name", "hostile"), **fields}
    return str(srv.ok("POST", "runs", user=user, body=body)["id"])


def log_of(srv: ServerProcess, run_id: str) -> str:
    data = srv.ok("GET", f"runs/{run_id}/logs", user="ops", format="text")
    return data.decode() if isinstance(data, bytes) else str(data)


def report(srv: ServerProcess, run_id: str) -> dict[str, Any]:
    """The JSON object a probe run printed on its last line starting with REPORT."""
    lines = [x for x in log_of(srv, run_id).splitlines() if x.startswith("REPORT ")]
    assert lines, log_of(srv, run_id)[-3000:]
    return dict(json.loads(lines[-1].removeprefix("REPORT ")))


def isolation(srv: ServerProcess) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in srv.ok("GET", "capacity")["isolation"]["controls"]}


# A probe's helpers, prepended to every hostile cell: `attempt` records what an action gave.
PROBE = r"""
import json, os, errno, socket, signal, sys
RESULT = {}
def attempt(label, fn):
    try:
        value = fn()
        RESULT[label] = "ok" if value is None else ("ok", repr(value)[:200])
    except OSError as exc:
        RESULT[label] = errno.errorcode.get(exc.errno, str(exc.errno))
    except Exception as exc:
        RESULT[label] = type(exc).__name__
def done():
    print("REPORT " + json.dumps(RESULT), flush=True)
"""
