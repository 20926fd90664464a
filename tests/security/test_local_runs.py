"""A team member's run on the local executor, as several users share one machine (run_as = user).

Each test starts real runs through the API of a real server (root) and has a hostile run, erin's
(a member of team-b), try to reach past its own run: alice's (team-a) files and records, the
store, the server's credentials, alice's session kernel, other processes. Every attempt must
fail below the API: the kernel answers EACCES/EPERM, not the platform's good manners. Without
root the platform cannot switch users: the tests then check it says so (capacity.isolation).
"""

from __future__ import annotations

import json
import os
import pwd
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from ..kernel_ws import KernelSocket
from ..server import ServerProcess
from ..waiting import until
from .conftest import (
    PROBE,
    SERVER_SECRETS,
    Machine,
    isolation,
    log_of,
    report,
    submit,
    user_mode_config,
    wait_final,
    wait_status,
)

VICTIM_CODE = """
import os, pathlib
d = pathlib.Path(os.environ["GPUPLAT_ARTIFACTS_DIR"])
(d / "outputs").mkdir(exist_ok=True)
(d / "outputs" / "weights.txt").write_text("alice-secret-weights")
print("alice-secret-log-line", flush=True)
"""


@pytest.fixture(scope="module")
def notebooks(machine: Machine, accounts: dict[str, str] | None) -> Path:
    """A shared Jupyter root, each user's directory their own (0700), as on a multi-user machine."""
    root = machine.artifacts.parent / "notebooks"
    root.mkdir(exist_ok=True)
    os.chmod(root, 0o711)
    for user, account in (accounts or {}).items():
        home = root / user
        home.mkdir(exist_ok=True)
        pw = pwd.getpwnam(account)
        os.chown(home, pw.pw_uid, pw.pw_gid)
        os.chmod(home, 0o700)
    return root


@pytest.fixture(scope="module")
def srv(
    accounts: dict[str, str] | None,
    reachable: None,
    machine: Machine,
    notebooks: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[ServerProcess]:
    root = tmp_path_factory.mktemp("user-mode")
    config: dict[str, Any] = {"LocalExecutor": {"pids_max": 64}, "ServerApp": {"root_dir": str(notebooks)}}
    if accounts is not None:
        mode = user_mode_config(machine, accounts)
        config["GpuPlat"] = mode["GpuPlat"]
        config["LocalExecutor"].update(mode["LocalExecutor"])
    server = ServerProcess(root, gpus=4, extra_config=config)
    server.env.update(SERVER_SECRETS)
    server.start()
    yield server
    server.stop_all_runs()
    server.stop()


def runs_as_users(srv: ServerProcess) -> bool:
    controls = isolation(srv)
    if controls["users"]["enforced"]:
        return True
    # No root here: the platform must say plainly that runs are not kept apart.
    assert "server's account" in controls["users"]["detail"], controls["users"]
    assert not controls["files"]["enforced"] and not controls["signals"]["enforced"]
    return False


def artifacts_of(srv: ServerProcess, machine: Machine, run_id: str) -> Path:
    return machine.artifacts / run_id if runs_as_users(srv) else srv.root / "artifacts" / run_id


def probe(srv: ServerProcess, body: str, user: str = "erin", project: str = "team-b", **fields: Any) -> dict[str, Any]:
    run_id = submit(srv, user, project, PROBE + body + "\ndone()\n", **fields)
    run = wait_final(srv, run_id)
    assert run["status"] == "succeeded", (run["message"], log_of(srv, run_id)[-3000:])
    return report(srv, run_id)


def test_each_run_runs_as_its_users_account_in_a_directory_of_its_own(srv: ServerProcess, machine: Machine) -> None:
    if not runs_as_users(srv):
        return
    seen = probe(srv, "attempt('id', lambda: (os.getuid(), os.getgid(), os.getgroups(), os.umask(0o077)))")
    erin = pwd.getpwnam("gpt-erin")
    assert seen["id"][0] == "ok" and seen["id"][1].startswith(f"({erin.pw_uid}, {erin.pw_gid}, [")
    alice = submit(srv, "alice", "team-a", VICTIM_CODE)
    assert wait_final(srv, alice)["status"] == "succeeded"
    st = os.stat(machine.artifacts / alice)
    assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (pwd.getpwnam("gpt-alice").pw_uid, 0o700)
    root = os.stat(machine.artifacts)
    assert (root.st_uid, stat.S_IMODE(root.st_mode)) == (0, 0o711)


def test_a_sweeps_children_run_as_its_users_account_too(srv: ServerProcess) -> None:
    body = {
        "project": "team-b",
        "code": "import json, os; print('REPORT', json.dumps({'uid': os.getuid()}), flush=True)",
        "matrix": {"kind": "grid", "params": {"lr": {"values": [0.1, 0.2]}}, "concurrency": 2},
    }
    parent = srv.ok("POST", "runs", user="erin", body=body)
    assert wait_final(srv, parent["id"])["status"] == "succeeded"
    kids = srv.ok("GET", "runs", user="erin", parent=parent["id"])["runs"]
    assert len(kids) == 2
    uids = {report(srv, k["id"])["uid"] for k in kids}
    expected = pwd.getpwnam("gpt-erin").pw_uid if runs_as_users(srv) else os.geteuid()
    assert uids == {expected}


def test_a_run_cannot_read_or_forge_another_teams_run(srv: ServerProcess, machine: Machine) -> None:
    alice = submit(srv, "alice", "team-a", VICTIM_CODE)
    assert wait_final(srv, alice)["status"] == "succeeded"
    d = artifacts_of(srv, machine, alice)
    body = f"""
d = {str(d)!r}
attempt("list artifacts root", lambda: os.listdir(os.path.dirname(d)))
attempt("list alice's run", lambda: os.listdir(d))
attempt("read alice's log", lambda: open(d + "/output.log").read())
attempt("read alice's outputs", lambda: open(d + "/outputs/weights.txt").read())
attempt("append to alice's log", lambda: open(d + "/output.log", "a").write("forged by erin\\n"))
attempt("forge alice's metrics", lambda: open(d + "/.gpuplat/metrics.csv", "a").write("0,loss,999\\n"))
attempt("replace alice's outputs", lambda: open(d + "/outputs/weights.txt", "w").write("forged"))
"""
    seen = probe(srv, body)
    if not runs_as_users(srv):
        return
    assert seen == dict.fromkeys(seen, "EACCES") and len(seen) == 7, seen
    # What alice sees through the API is what her run wrote, nothing of erin's.
    assert "forged" not in log_of(srv, alice) and "alice-secret-log-line" in log_of(srv, alice)
    assert srv.ok("GET", f"runs/{alice}/outputs/outputs/weights.txt", user="alice") == b"alice-secret-weights"
    assert srv.ok("GET", f"runs/{alice}/metrics", user="alice") == {}


def test_a_run_cannot_reach_the_store_or_the_servers_credentials(srv: ServerProcess) -> None:
    server_pid = srv.proc.pid if srv.proc else 0
    body = f"""
attempt("read the store", lambda: open({str(srv.root / "gpuplat.db")!r}, "rb").read(16))
attempt("write the store", lambda: open({str(srv.root / "gpuplat.db")!r}, "r+b"))
attempt("read the token map", lambda: open({str(srv.root / "jupyter-config" / "jupyter_server_config.json")!r}).read())
attempt("list runtime files", lambda: os.listdir({str(srv.root / "runtime")!r}))
attempt("server environ", lambda: open("/proc/{server_pid}/environ", "rb").read())
RESULT["cmdline"] = open("/proc/{server_pid}/cmdline", "rb").read().decode(errors="replace")
RESULT["env"] = dict(os.environ)
"""
    seen = probe(srv, body)
    env = seen.pop("env")
    # In every mode: the run's environment is an allow-list; no secret of the server's is in it or in argv.
    for name, value in SERVER_SECRETS.items():
        assert name not in env and value not in json.dumps(env), name
    assert "tok-" not in seen.pop("cmdline") and "server-token" not in json.dumps(env)
    if not runs_as_users(srv):
        return
    assert seen == dict.fromkeys(seen, "EACCES"), seen
    assert stat.S_IMODE(os.stat(srv.root / "gpuplat.db").st_mode) == 0o600


def _pids_of(uid: int) -> list[int]:
    return [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit() and p.stat().st_uid == uid]


def test_a_run_cannot_signal_another_users_processes(srv: ServerProcess) -> None:
    alice = submit(srv, "alice", "team-a", "import time; print('up', flush=True); time.sleep(120)")
    wait_status(srv, alice, "running")
    until(lambda: "up" in log_of(srv, alice), "alice's run to be up")
    try:
        if not runs_as_users(srv):
            return
        victims = _pids_of(pwd.getpwnam("gpt-alice").pw_uid)
        launchers = {int(Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()[1]) for p in victims}
        targets = sorted({*victims, *launchers, srv.proc.pid if srv.proc else 1})
        seen = probe(srv, "\n".join(f"attempt('kill {p}', lambda: os.kill({p}, signal.SIGKILL))" for p in targets))
        assert set(seen.values()) == {"EPERM"} and len(seen) == len(targets), seen
        assert srv.ok("GET", f"runs/{alice}", user="alice")["status"] == "running"
    finally:
        srv.ok("POST", f"runs/{alice}/stop", user="alice")
        wait_final(srv, alice)


def test_a_run_cannot_reach_another_users_session_kernel(srv: ServerProcess, machine: Machine) -> None:
    body = {"path": "alice/s.ipynb", "type": "notebook", "name": "s.ipynb", "kernel": {"name": "gpuplat-notebook"}}
    headers = {"Authorization": f"token {srv.token}"}  # the server's own token: its owner, alice
    answer = requests.post(srv.url + "api/sessions", headers=headers, json=body, timeout=90)
    assert answer.status_code == 201, answer.text
    lease = srv.ok("GET", "sessions", notebook="alice/s.ipynb")["sessions"][0]
    ks = KernelSocket(srv, answer.json()["kernel"]["id"])
    out, status = ks.execute("import os; print(os.getuid())")
    ks.close()
    assert status == "ok"
    state = artifacts_of(srv, machine, lease["id"]) / ".gpuplat"
    info = json.loads((state / "kernel.json").read_text())
    try:
        if not runs_as_users(srv):
            return
        assert int(out) == pwd.getpwnam("gpt-alice").pw_uid  # the kernel is alice's own process
        assert info["transport"] == "ipc" and stat.S_IMODE(os.stat(state / "kernel.json").st_mode) == 0o600
        sockets = [f"{info['ip']}-{info[p]}" for p in ("shell_port", "iopub_port", "control_port")]
        connects = "\n".join(
            f"attempt('connect {s}', lambda: socket.socket(socket.AF_UNIX).connect({s!r}))" for s in sockets
        )
        seen = probe(
            srv, f"attempt('read connection file', lambda: open({str(state / 'kernel.json')!r}).read())\n" + connects
        )
        assert seen == dict.fromkeys(seen, "EACCES") and len(seen) == 4, seen
    finally:
        srv.ok("POST", f"runs/{lease['id']}/stop", user="alice")
        wait_final(srv, lease["id"])


def test_a_run_opens_only_its_own_gpus(srv: ServerProcess, machine: Machine) -> None:
    controls = isolation(srv)
    if not controls["gpu_devices"]["enforced"]:
        assert "CUDA_VISIBLE_DEVICES only asks CUDA" in controls["gpu_devices"]["detail"], controls
        return
    nodes = sorted(machine.devices.iterdir())
    body = "RESULT['mine'] = os.environ['CUDA_VISIBLE_DEVICES']\n" + "\n".join(
        f"attempt({n.name!r}, lambda: os.open({str(n)!r}, os.O_RDWR))" for n in nodes
    )
    seen = probe(srv, body, presets=["single-gpu"])
    mine = f"nvidia{seen.pop('mine')}"
    # Its own device gets as far as the (absent) driver: ENXIO. Every other is refused by the cgroup: EPERM.
    assert seen == {n.name: "ENXIO" if n.name == mine else "EPERM" for n in nodes}, seen


def test_memory_and_process_limits_hold_where_the_machine_has_cgroups(srv: ServerProcess) -> None:
    controls = isolation(srv)
    if controls["memory"]["enforced"]:
        run_id = submit(
            srv,
            "erin",
            "team-b",
            "x = bytearray(512 * 1024 * 1024)\nprint('allocated', flush=True)",
            resources={"memory": "64Mi"},
        )
        run = wait_final(srv, run_id)
        assert run["status"] == "failed" and run["exit_code"] == -9, run  # the OOM killer, inside the run
        assert "allocated" not in log_of(srv, run_id)
    else:
        assert controls["memory"]["detail"], controls
    if controls["pids"]["enforced"]:
        body = """
import subprocess, time
kids = []
try:
    for _ in range(100):
        kids.append(subprocess.Popen(["sleep", "30"]))
except OSError as exc:
    RESULT["fork"] = errno.errorcode.get(exc.errno)
RESULT["started"] = len(kids)
for k in kids:
    k.kill()
"""
        seen = probe(srv, body)
        assert seen["fork"] == "EAGAIN" and seen["started"] < 64, seen  # pids_max = 64 on this server
    else:
        assert controls["pids"]["detail"], controls


def test_a_stopped_run_leaves_no_process_behind_even_one_that_left_its_group(srv: ServerProcess) -> None:
    code = (
        "import subprocess, time\n"
        "p = subprocess.Popen(['sleep', '300'], start_new_session=True)\n"
        "print('stray', p.pid, flush=True)\n"
        "time.sleep(300)\n"
    )
    run_id = submit(srv, "erin", "team-b", code)
    wait_status(srv, run_id, "running")
    line = until(lambda: [x for x in log_of(srv, run_id).splitlines() if x.startswith("stray ")], "the stray's pid")[0]
    stray = int(line.split()[1])
    srv.ok("POST", f"runs/{run_id}/stop", user="erin")
    assert wait_final(srv, run_id)["status"] == "stopped"
    if isolation(srv)["processes"]["enforced"]:
        until(lambda: not os.path.exists(f"/proc/{stray}"), "the stray to be killed with its run")
    else:
        assert "setsid outlives a stop" in isolation(srv)["processes"]["detail"]
        os.kill(stray, 9)


def test_links_a_run_plants_in_its_directory_are_never_followed(srv: ServerProcess, machine: Machine) -> None:
    decoy = machine.artifacts.parent / "decoy"
    decoy.mkdir(exist_ok=True)
    secret = decoy / "secret.txt"
    secret.write_text("root's secret")
    os.chmod(secret, 0o600)
    code = f"""
import os, time
d = os.environ["GPUPLAT_ARTIFACTS_DIR"]
os.makedirs(d + "/outputs", exist_ok=True)
os.symlink({str(secret)!r}, d + "/outputs/leak.txt")
os.mkfifo(d + "/outputs/hang.txt")
print("planted", flush=True)
os.rename(d + "/output.log", d + "/old.log")
os.symlink({str(secret)!r}, d + "/output.log")
os.rename(d + "/.gpuplat", d + "/.gpuplat-old")
os.symlink({str(decoy)!r}, d + "/.gpuplat")
"""
    run_id = submit(srv, "erin", "team-b", code)
    run = wait_final(srv, run_id)
    code_, body = srv.call("GET", f"runs/{run_id}/logs", user="erin", format="text")
    assert code_ == 400 and "leaves the directory" in body["error"]["message"], (code_, body)
    listed = [o["path"] for o in srv.ok("GET", f"runs/{run_id}/outputs", user="erin")["outputs"]]
    assert "outputs/leak.txt" not in listed and "outputs/hang.txt" not in listed, listed
    code_, body = srv.call("GET", f"runs/{run_id}/outputs/outputs/leak.txt", user="erin")
    assert code_ == 400, (code_, body)
    # The launcher's exit record went nowhere near the decoy: it refused the planted link.
    assert sorted(p.name for p in decoy.iterdir()) == ["secret.txt"], list(decoy.iterdir())
    assert run["status"] == "failed", run


def test_the_platform_copies_no_file_the_runs_account_could_not_read(srv: ServerProcess, notebooks: Path) -> None:
    private = notebooks / "alice" / "secret.py"
    private.write_text("print('alice-private-code')\n")
    if runs_as_users(srv):
        pw = pwd.getpwnam("gpt-alice")
        os.chown(private, pw.pw_uid, pw.pw_gid)
        os.chmod(private, 0o600)
    run_id = str(
        srv.ok(
            "POST", "runs", user="erin", body={"project": "team-b", "script": "alice/secret.py", "working_dir": "erin"}
        )["id"]
    )
    run = wait_final(srv, run_id)
    if not runs_as_users(srv):
        return
    assert run["status"] == "failed"
    assert (run.get("code") or {}).get("snapshot") is None, run["code"]
    code_, _ = srv.call("GET", f"runs/{run_id}/outputs/code/secret.py", user="erin")
    assert code_ == 404
    assert "alice-private-code" not in log_of(srv, run_id)


def test_capacity_says_what_this_machine_enforces(srv: ServerProcess) -> None:
    controls = isolation(srv)
    assert {"users", "files", "signals", "environment", "links", "memory", "cpu", "pids", "gpu_devices"} <= set(
        controls
    )
    assert controls["environment"]["enforced"] and "PATH" in controls["environment"]["detail"]
    assert controls["network"]["enforced"] is False  # said plainly: local runs share the machine's network
    assert all(c["detail"] for c in controls.values()), controls
