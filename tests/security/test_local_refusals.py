"""run_as = user refuses to start where it cannot hold, and says why (never a silent fallback to one account)."""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from jupyter_gpuplat.executors.base import ExecutorError
from jupyter_gpuplat.executors.local.executor import LocalExecutor

from ..conftest import EXAMPLE, TOKENS
from ..server import ServerProcess
from .conftest import Machine, is_root, user_mode_config


def _server_as(account: str | None, tmp: Path) -> subprocess.CompletedProcess[str]:
    """`jupyter server` with run_as = user, as `account` (or as ourselves), in directories it owns."""
    for d in ("config", "data", "runtime", "root", "artifacts"):
        (tmp / d).mkdir(parents=True, exist_ok=True)
    config = {
        "ServerApp": {"jpserver_extensions": {"jupyter_gpuplat": True}, "root_dir": str(tmp / "root")},
        "GpuPlat": {
            "config_file": str(EXAMPLE),
            "db_url": f"sqlite:///{tmp / 'gpuplat.db'}",
            "artifacts_root": str(tmp / "artifacts"),
        },
        "LocalExecutor": {"run_as": "user", "gpus": 1},
    }
    (tmp / "config" / "jupyter_server_config.json").write_text(json.dumps(config))
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp),
        "JUPYTER_CONFIG_DIR": str(tmp / "config"),
        "JUPYTER_DATA_DIR": str(tmp / "data"),
        "JUPYTER_RUNTIME_DIR": str(tmp / "runtime"),
        "JUPYTER_PLATFORM_DIRS": "1",
    }
    kwargs: dict[str, object] = {}
    if account is not None:
        pw = pwd.getpwnam(account)
        subprocess.run(["chown", "-R", f"{pw.pw_uid}:{pw.pw_gid}", str(tmp)], check=True, timeout=60)
        kwargs = {"user": pw.pw_uid, "group": pw.pw_gid, "extra_groups": []}
    argv = [sys.executable, "-m", "jupyter_server", "--ip=127.0.0.1", "--port=0", "--no-browser"]
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120, check=False, **kwargs)  # type: ignore[call-overload]


def test_a_server_that_cannot_switch_users_refuses_to_start_saying_why(
    accounts: dict[str, str] | None, reachable: None
) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="gpuplat-noroot-", dir="/var/tmp"))
    try:
        done = _server_as(accounts["dave"] if accounts else None, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    out = done.stdout + done.stderr
    assert done.returncode != 0, out[-3000:]
    assert "LocalExecutor.run_as = 'user' cannot work on this machine" in out, (done.returncode, out[-3000:])
    assert "not root, so it cannot switch to the runs' accounts" in out and "run_as = 'server'" in out


def test_an_interpreter_the_runs_cannot_execute_is_refused_by_name(tmp_path: Path) -> None:
    hidden = tmp_path / "private"
    hidden.mkdir(mode=0o700)
    os.chmod(hidden, 0o700)
    python = hidden / "python3"
    python.symlink_to(sys.executable)
    with pytest.raises(ExecutorError) as refused:
        LocalExecutor(run_as="user", python=str(python))
    message = refused.value.message
    assert "cannot work on this machine" in message
    if is_root():  # without root that is said first; the interpreter is checked all the same
        assert f"LocalExecutor.python ({python})" in message and "other accounts cannot enter it" in message


def test_a_token_map_other_accounts_could_read_keeps_the_server_from_starting(
    accounts: dict[str, str] | None, reachable: None, machine: Machine
) -> None:
    if accounts is None:
        return  # without root run_as = user refuses before this (the test above)
    root = Path(tempfile.mkdtemp(prefix="gpuplat-exposed-", dir=str(machine.artifacts.parent)))
    os.chmod(root, 0o755)
    srv = ServerProcess(root, gpus=1, extra_config=user_mode_config(machine, accounts))
    config = srv.root / "jupyter-config" / "jupyter_server_config.json"
    os.chmod(srv.root / "jupyter-config", 0o755)
    os.chmod(config, 0o644)
    assert "tok-alice" in config.read_text() and set(TOKENS) <= set(
        json.loads(config.read_text())["TokenMapIdentityProvider"]["tokens"]
    )
    with pytest.raises(RuntimeError) as exited:
        srv.start(timeout=60)
    assert f"{config} holds the server's secrets and other accounts can read it: chmod 600 {config}" in str(
        exited.value
    )
    srv.stop()


def _check(*args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "jupyter_gpuplat.cli", "cluster", "check", "--local", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)


def test_cluster_check_local_says_what_this_machine_enforces(tmp_path: Path) -> None:
    server = _check("--run-as", "server", "--json")
    assert server.returncode == 0, server.stderr
    controls = {c["name"]: c for c in json.loads(server.stdout)["controls"]}
    assert not controls["users"]["enforced"] and "server's account" in controls["users"]["detail"]
    assert controls["environment"]["enforced"] and not controls["network"]["enforced"]
    hidden = tmp_path / "private"
    hidden.mkdir(mode=0o700)
    refused = _check("--python", str(hidden / "python3"))
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert "NOT FIT, a server with it refuses to start" in refused.stdout
    assert f"LocalExecutor.python ({hidden / 'python3'})" in refused.stdout


def test_an_artifacts_root_the_runs_cannot_reach_keeps_the_server_from_starting(
    accounts: dict[str, str] | None, reachable: None, machine: Machine, tmp_path: Path
) -> None:
    if accounts is None:
        return  # without root run_as = user refuses before this (the first test)
    # pytest's tmp_path lies under a 0700 directory of root's: no run could enter its own directory there
    srv = ServerProcess(
        tmp_path, gpus=1, extra_config={"LocalExecutor": user_mode_config(machine, accounts)["LocalExecutor"]}
    )
    with pytest.raises(RuntimeError) as exited:
        srv.start(timeout=60)
    text = str(exited.value)
    assert "LocalExecutor.run_as = 'user' cannot hold here" in text, text[-2000:]
    assert "runs' accounts cannot reach GpuPlat.artifacts_root (" in text and "other accounts cannot enter it" in text
    srv.stop()
