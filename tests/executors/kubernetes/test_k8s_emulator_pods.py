"""The emulator's local pods: with `local_processes=True` a pod's command is a real process.

Driven by the official client over HTTP, as everything else talks to the emulator: env
resolution (value, fieldRef, secretKeyRef, `$(VAR)`), one loopback IP per pod, phases from
the process's life and exit code, logs from its output, the process group killed on delete;
Secrets as the registry keeps them, collected with the Job that owns them.
"""

from __future__ import annotations

import base64
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kube_emulator import EmulatedCluster
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from ...waiting import until

NS = "ns"

# cluster.wait_for holds the store's lock while it asks: predicates that call the API use `until`.
# Prints what the container sees, binds a fixed port on its own IP (two pods at once: no clash),
# then waits for a file and exits with the code written in it.
PROBE = """
import os, socket, sys, time
print("python", sys.executable)
for k in ("POD_IP", "POD_NAME", "POD_NS", "TOKEN", "PLAIN", "REF", "HOSTNAME"):
    print(k, os.environ.get(k))
print("tmp", sys.argv[1])
s = socket.socket()
s.bind((os.environ["POD_IP"], 47123))
s.listen()
print("listening", flush=True)
gate = os.environ["GATE"]
while not os.path.exists(gate):
    time.sleep(0.01)
sys.exit(int(open(gate).read()))
"""


@pytest.fixture
def cluster() -> Iterator[EmulatedCluster]:
    with EmulatedCluster(bookmark_seconds=0.2, local_processes=True) as c:
        c.add_namespace(NS)
        c.add_node("node-1", gpus=2)
        yield c
        assert not c.errors, c.errors


@pytest.fixture
def api(cluster: EmulatedCluster, tmp_path: Path) -> Iterator[Any]:
    a = config.new_client_from_config(str(cluster.write_kubeconfig(tmp_path / "kc", NS)))
    yield a
    a.close()


def job(name: str, command: list[str], env: list[dict[str, Any]] | None = None, **pod: Any) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "backoffLimit": 0,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    **pod,
                    "containers": [{"name": "main", "image": "python:3.11-slim", "command": command, "env": env or []}],
                }
            },
        },
    }


def pod_of(cluster: EmulatedCluster, job_name: str) -> dict[str, Any] | None:
    pods = cluster.pods(NS, f"job-name={job_name}")
    return pods[0] if pods else None


def phase_of(cluster: EmulatedCluster, job_name: str, phase: str) -> dict[str, Any] | None:
    p = pod_of(cluster, job_name)
    return p if p is not None and p["status"].get("phase") == phase else None


def log_has(core: Any, pod: str, text: str) -> str | None:
    try:
        log = core.read_namespaced_pod_log(pod, NS)
    except ApiException:
        return None
    return log if text in log else None


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_env_ip_phases_and_logs_of_a_local_pod(api: Any, cluster: EmulatedCluster, tmp_path: Path) -> None:
    core, batch = client.CoreV1Api(api), client.BatchV1Api(api)
    core.create_namespaced_secret(NS, {"metadata": {"name": "s"}, "stringData": {"token": "t0ps3cret"}})
    assert core.read_namespaced_secret("s", NS).data == {"token": base64.b64encode(b"t0ps3cret").decode()}
    env = [
        {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "POD_NS", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
        {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "s", "key": "token"}}},
        {"name": "PLAIN", "value": "plain value"},
        {"name": "REF", "value": "ip=$(POD_IP) $$(kept)"},
    ]
    gates = {n: tmp_path / f"gate-{n}" for n in ("a", "b")}
    for n, gate in gates.items():
        batch.create_namespaced_job(
            NS, job(n, ["python", "-c", PROBE, "/tmp/x.json"], [*env, {"name": "GATE", "value": str(gate)}])
        )
    pods = {n: cluster.wait_for(lambda n=n: phase_of(cluster, n, "Running"), 10, f"pod {n} running") for n in gates}
    logs = {
        n: until(lambda p=p: log_has(core, p["metadata"]["name"], "listening"), "the probe's output", 10)
        for n, p in pods.items()
    }
    ips = {n: p["status"]["podIP"] for n, p in pods.items()}
    assert len(set(ips.values())) == 2 and all(ip.startswith("127.") and ip != "127.0.0.1" for ip in ips.values())
    for n, p in pods.items():
        name, ip = p["metadata"]["name"], ips[n]
        lines = dict(line.split(" ", 1) for line in logs[n].splitlines() if " " in line)
        assert lines["python"] == sys.executable  # `python` in the "image" is this interpreter
        assert (lines["POD_IP"], lines["POD_NAME"], lines["POD_NS"]) == (ip, name, NS)
        assert (lines["TOKEN"], lines["PLAIN"], lines["HOSTNAME"]) == ("t0ps3cret", "plain value", name)
        assert lines["REF"] == f"ip={ip} $(kept)"
        assert lines["tmp"] != "/tmp/x.json" and lines["tmp"].endswith("/tmp/x.json")  # a /tmp of its own
        assert p["status"]["containerStatuses"][0]["state"].get("running")

    gates["a"].write_text("3")
    failed = cluster.wait_for(lambda: phase_of(cluster, "a", "Failed"), 10, "pod a to fail")
    term = failed["status"]["containerStatuses"][0]["state"]["terminated"]
    assert (term["exitCode"], term["reason"]) == (3, "Error")
    assert phase_of(cluster, "b", "Running")  # the other pod's process lives on
    gates["b"].write_text("0")
    done = cluster.wait_for(lambda: phase_of(cluster, "b", "Succeeded"), 10, "pod b to succeed")
    assert done["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 0
    until(
        lambda: any(c.type == "Complete" for c in batch.read_namespaced_job("b", NS).status.conditions or ()),
        "Job b complete",
        10,
    )


SPAWNER = """
import signal, subprocess, sys, time
if sys.argv[1] == "stubborn":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
print("pids", child.pid, flush=True)
time.sleep(600)
"""


@pytest.mark.parametrize("kind", ["polite", "stubborn"])
def test_deleting_the_job_kills_the_process_group(api: Any, cluster: EmulatedCluster, kind: str) -> None:
    core, batch = client.CoreV1Api(api), client.BatchV1Api(api)
    batch.create_namespaced_job(NS, job("sleeper", ["python", "-c", SPAWNER, kind], terminationGracePeriodSeconds=1))
    pod = cluster.wait_for(lambda: phase_of(cluster, "sleeper", "Running"), 10, "the pod running")
    name = pod["metadata"]["name"]
    log = until(lambda: log_has(core, name, "pids"), "the child's pid", 10)
    child = int(log.split()[1])
    leader = cluster.kubelet.local.processes[pod["metadata"]["uid"]].popen.pid  # type: ignore[union-attr]
    assert alive(child) and alive(leader)

    batch.delete_namespaced_job("sleeper", NS, propagation_policy="Foreground")
    if kind == "stubborn":  # Terminating until the grace period ends
        assert (pod_of(cluster, "sleeper") or {})["metadata"]["deletionTimestamp"]
    cluster.wait_for(lambda: not cluster.jobs_in(NS) and not cluster.pods(NS), 10, "Job and pod gone")
    # (a killed process closes its files a moment before it is a zombie: wait for that moment)
    until(lambda: not alive(leader) and not alive(child), "the whole group to end with the pod", 5)
    assert any(e["reason"] == "Killing" for e in cluster.events_for(pod))
    last = [c.obj for c in cluster.store.history if c.obj["metadata"].get("uid") == pod["metadata"]["uid"]][-1]
    term = last["status"]["containerStatuses"][0]["state"]["terminated"]
    assert term["exitCode"] == {"polite": 143, "stubborn": 137}[kind]  # SIGTERM, or SIGKILL after the grace


def test_a_missing_program_is_a_start_error(api: Any, cluster: EmulatedCluster) -> None:
    client.BatchV1Api(api).create_namespaced_job(NS, job("missing", ["no-such-program-here", "x"]))
    pod = cluster.wait_for(lambda: phase_of(cluster, "missing", "Failed"), 10, "the pod to fail")
    term = pod["status"]["containerStatuses"][0]["state"]["terminated"]
    assert (term["exitCode"], term["reason"]) == (128, "StartError")
    assert 'exec: "no-such-program-here"' in term["message"]


def test_secrets_are_base64_immutable_when_asked_and_collected_with_their_job(
    api: Any, cluster: EmulatedCluster
) -> None:
    core, batch = client.CoreV1Api(api), client.BatchV1Api(api)
    made = batch.create_namespaced_job(NS, job("owner", ["python", "-c", "import time; time.sleep(600)"]))
    body = {
        "metadata": {
            "name": "key",
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "owner", "uid": made.metadata.uid}],
        },
        "immutable": True,
        "stringData": {"key": "k1"},
    }
    secret = core.create_namespaced_secret(NS, body)
    assert secret.data == {"key": base64.b64encode(b"k1").decode()} and secret.string_data is None
    with pytest.raises(ApiException) as refused:
        core.patch_namespaced_secret("key", NS, {"stringData": {"key": "k2"}})
    assert refused.value.status == 422 and "field is immutable" in refused.value.body
    core.patch_namespaced_secret("key", NS, {"metadata": {"labels": {"a": "b"}}})  # metadata may change
    cluster.wait_for(lambda: phase_of(cluster, "owner", "Running"), 10, "the pod running")
    batch.delete_namespaced_job("owner", NS, propagation_policy="Background")
    cluster.wait_for(lambda: not cluster.pods(NS), 10, "the pod gone")
    with pytest.raises(ApiException) as gone:
        core.read_namespaced_secret("key", NS)
    assert gone.value.status == 404


def test_without_the_opt_in_commands_stay_scripts(tmp_path: Path) -> None:
    with EmulatedCluster() as c:
        c.add_namespace(NS)
        c.add_node("n", gpus=1)
        c.add_pod(NS, "p", command=f"touch {tmp_path / 'ran'}")  # the kubelet's tiny script has no touch
        pod = c.wait_for(lambda: next((p for p in c.pods(NS) if p["status"].get("phase") == "Failed"), None), 10)
        assert pod["status"]["podIP"] == "10.244.0.10"
        assert pod["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 127
        assert not os.path.exists(tmp_path / "ran") and c.kubelet.local is None
        assert not c.errors, c.errors
