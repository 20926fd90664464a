"""GPU sessions on Kubernetes: one Job, one pod, one Secret; a real kernel in the "pod".

The real `KubernetesExecutor` (official client over HTTP) against the project's emulator,
with the project's Role enforced (plus what sessions need, tests/k8s.py SESSION_RULE). With
the emulator running pods' commands as local processes, the pod runs the kernel agent and
ipykernel on its own loopback IP, and jupyter_client connected with what
`kernel_connection` returns executes a cell in it. A session that no node can hold is
explained by the executor exactly as a job is.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import requests
from jupyter_client.asynchronous.client import AsyncKernelClient
from kube_emulator import EmulatedCluster
from kube_emulator.store import POD

from jupyter_gpuplat.core.request import Entrypoint
from jupyter_gpuplat.executors.base import ExecutorError, LaunchRequest, Observation
from jupyter_gpuplat.executors.kubernetes.manifests import (
    ANN_SAFE_TO_EVICT,
    JobSettings,
    agent_source,
    make_job,
    make_kernel_secret,
)

from ...k8s import NAMESPACE, deployed_cluster, executor_config, run_selector
from ...kernel_ws import KernelSocket, a_cell_sent_at_once_is_not_culled
from ...server import ServerProcess
from ...waiting import until, wait_for
from .conftest import Executors

NB = "artifacts/notebooks/"
SESSIONS_CONFIG = Path(__file__).parents[2] / "fixtures" / "sessions.yaml"
PORTS = [52700, 52701, 52702, 52703, 52704]
SECRETS = ("", "secrets")


def session_request(run_id: str, artifacts: Path, gpus: int = 1) -> LaunchRequest:
    return LaunchRequest(
        run_id=run_id,
        entrypoint=Entrypoint("kernel"),
        env={"TEAM": "a"},
        devices=(),
        workdir=str(artifacts / run_id),
        spec={"kind": "session", "queue": "interactive", "resources": {"gpu": gpus, "cpu": "1", "memory": "1Gi"}},
        project="team-a",
        user="alice",
    )


def test_a_session_job_runs_the_kernel_agent_and_never_replaces_its_pod() -> None:
    settings = JobSettings(artifacts_claim="gpuplat-artifacts", artifacts_mount_path="/srv/a", backoff_limit=3)
    req = session_request("s-manifest", Path("/srv/a"))
    job = make_job(req, settings)
    spec = job["spec"]
    assert spec["backoffLimit"] == 0  # a second pod would have lost the kernel's state
    assert spec["podFailurePolicy"] == {
        "rules": [{"action": "FailJob", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}]
    }
    pod = spec["template"]["spec"]
    assert pod["restartPolicy"] == "Never"
    assert spec["template"]["metadata"]["annotations"][ANN_SAFE_TO_EVICT] == "false"
    [c] = pod["containers"]
    assert c["command"] == [
        "python", "-c", agent_source(), "--connection-file", "/tmp/gpuplat-kernel.json", "--ports",
        "52700,52701,52702,52703,52704", "--", "python", "-m", "ipykernel_launcher", "-f", "{connection_file}",
    ]  # fmt: skip
    assert "import subprocess" in agent_source() and "from jupyter_gpuplat" not in agent_source()  # self-contained
    env = {e["name"]: e for e in c["env"]}
    assert env["GPUPLAT_KERNEL_KEY"]["valueFrom"] == {
        "secretKeyRef": {"name": "gpuplat-s-manifest-kernel", "key": "key"}
    }
    assert env["GPUPLAT_KERNEL_IP"]["valueFrom"] == {"fieldRef": {"fieldPath": "status.podIP"}}
    assert env["TEAM"]["value"] == "a" and env["GPUPLAT_RUN_ID"]["value"] == "s-manifest"
    assert [p["containerPort"] for p in c["ports"]] == PORTS
    assert c["resources"]["limits"]["nvidia.com/gpu"] == "1"
    secret = make_kernel_secret(req, settings, "k" * 64)
    assert secret["metadata"]["name"] == "gpuplat-s-manifest-kernel" and secret["immutable"] is True
    assert secret["metadata"]["labels"]["gpuplat.io/run-id"] == "s-manifest"
    for doc in (job, secret):
        for v in ("1.27.0", "1.34.0"):
            kubernetes_validate.validate(doc, v, strict=True)
    with pytest.raises(ExecutorError, match="kernel_ports must be 5 ports"):
        make_job(req, JobSettings(kernel_ports=(1, 2)))


@pytest.fixture
def cluster() -> Iterator[EmulatedCluster]:
    c = deployed_cluster(local_processes=True)
    yield c
    c.stop()
    assert not c.errors, c.errors


@pytest.fixture
def executor_settings() -> dict[str, Any]:
    """This module's executors settle a pod's phase for 0.3 s (conftest.py `executors`)."""
    return {"pod_settle_seconds": 0.3}


def secrets_of(cluster: EmulatedCluster, run_id: str) -> list[dict[str, Any]]:
    from kube_emulator.store import RESOURCES

    return cluster.store.select(RESOURCES[SECRETS], NAMESPACE, run_selector(run_id))[0]


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


async def run_cell(info: dict[str, Any], code: str) -> str:
    """Execute `code` in the kernel at `info` (jupyter_client, as a notebook would); its stdout."""
    kc = AsyncKernelClient()
    kc.load_connection_info(info)
    kc.start_channels(hb=False)  # readiness by kernel_info, not a 1 s heartbeat (flaky on a loaded machine)
    try:
        await kc.wait_for_ready(timeout=30)
        msg_id = kc.execute(code)
        out = []
        while True:
            msg = await kc.get_iopub_msg(timeout=30)
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            if msg["msg_type"] == "stream":
                out.append(msg["content"]["text"])
            elif msg["msg_type"] == "error":
                raise AssertionError(msg["content"])
            elif msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
                return "".join(out)
    finally:
        kc.stop_channels()


async def test_a_session_is_one_pod_and_one_secret_and_a_cell_runs_in_its_kernel(
    cluster: EmulatedCluster, executors: Executors
) -> None:
    cluster.add_node("gpu-1", gpus=4)
    ex, seen = executors.new()
    req = session_request("s-kernel1", executors.artifacts)
    handle = await ex.submit(req)
    assert handle["secret"] == "gpuplat-s-kernel1-kernel" and handle["kernel_ports"] == PORTS

    async def connection() -> dict[str, Any] | None:
        return await ex.kernel_connection(req.run_id, handle)

    info = await wait_for(connection, 20, "the kernel's connection info")
    [job] = cluster.jobs_in(NAMESPACE, run_selector(req.run_id))
    [pod] = cluster.pods(NAMESPACE, run_selector(req.run_id))
    [secret] = secrets_of(cluster, req.run_id)
    assert secret["metadata"]["ownerReferences"] == [
        {"apiVersion": "batch/v1", "kind": "Job", "name": job["metadata"]["name"], "uid": job["metadata"]["uid"]}
    ]
    key = base64.b64decode(secret["data"]["key"]).decode()
    ip = pod["status"]["podIP"]
    assert ip.startswith("127.") and ip != "127.0.0.1"
    assert info.pop("gpuplat_generation", 1) == 1  # from the agent's log line, once archived
    assert "gpuplat_pid" not in info  # the pod's pids are not this machine's
    assert info == {
        "ip": ip,
        "shell_port": 52700,
        "iopub_port": 52701,
        "stdin_port": 52702,
        "control_port": 52703,
        "hb_port": 52704,
        "key": key,
        "transport": "tcp",
        "signature_scheme": "hmac-sha256",
        "kernel_name": "",
    }
    assert len(key) == 64
    assert await wait_for(lambda: any(o.status == "running" for o in seen), 10, "the run reported running")

    out = await run_cell(info, 'import os; print(os.environ["GPUPLAT_KERNEL_IP"], "GPUPLAT_KERNEL_KEY" in os.environ)')
    assert out == f"{ip} False\n"  # the cell ran in the pod's kernel, on the pod's own IP; the key is not in its env
    leader = cluster.kubelet.local.processes[pod["metadata"]["uid"]].popen.pid  # type: ignore[union-attr]
    log_path = executors.artifacts / req.run_id / "output.log"
    started = await wait_for(
        lambda: re.search(r"kernel 1 started \(pid (\d+)\)", log_path.read_text()),
        10,
        "the agent's line in the archived log",
    )
    kernel = int(started.group(1))
    assert alive(leader) and alive(kernel)

    await ex.stop(req.run_id, handle)
    final = [o for o in seen if o.final]
    assert [(o.status, o.reason) for o in final] == [("stopped", "Stopped")]
    assert not cluster.jobs_in(NAMESPACE) and not cluster.pods(NAMESPACE) and not secrets_of(cluster, req.run_id)
    await wait_for(lambda: not alive(leader) and not alive(kernel), 5, "the pod's processes to end")


async def test_a_restarted_executor_reads_the_key_back_from_the_secret(
    cluster: EmulatedCluster, executors: Executors
) -> None:
    cluster.add_node("gpu-1", gpus=4)
    first, _ = executors.new()
    req = session_request("s-reattach", executors.artifacts)
    handle = await first.submit(req)
    info = await wait_for(lambda: first.kernel_connection(req.run_id, handle), 20, "the kernel's connection info")
    await first.close()  # the server goes; the session's pod stays

    second, seen = executors.new()
    second.attach(req.run_id, handle)
    again = await wait_for(lambda: second.kernel_connection(req.run_id, handle), 20, "the connection after restart")
    info.pop("gpuplat_generation", None)
    assert again.pop("gpuplat_generation", 1) == 1 and again == info
    assert (await run_cell(again, "x = 6 * 7; print(x)")) == "42\n"

    # A kernel restart (shutdown_request with restart) is the agent's: same pod, same ports, generation 2.
    kc = AsyncKernelClient()
    kc.load_connection_info(again)
    kc.start_channels(hb=False)  # readiness by kernel_info, not a 1 s heartbeat (flaky on a loaded machine)
    kc.shutdown(restart=True)
    await kc.get_control_msg(timeout=10)  # shutdown_reply: ipykernel exits, the agent starts the next
    kc.stop_channels()

    async def restarted() -> dict[str, Any] | None:
        info = await second.kernel_connection(req.run_id, handle)
        return info if info and info.get("gpuplat_generation") == 2 else None

    fresh = await wait_for(restarted, 20, "the second kernel")
    assert {k: v for k, v in fresh.items() if k != "gpuplat_generation"} == again
    assert (await run_cell(fresh, "print('x' in dir())")) == "False\n"  # a new kernel in the same lease
    assert len(cluster.pods(NAMESPACE, run_selector(req.run_id))) == 1
    await second.stop(req.run_id, handle)
    assert [(o.status, o.reason) for o in seen if o.final] == [("stopped", "Stopped")]
    with pytest.raises(ExecutorError, match="not a GPU session"):
        await second.kernel_connection("r-job", {"job": "gpuplat-r-job", "workdir": str(executors.artifacts)})


@pytest.mark.parametrize(
    ("gpus", "reason", "says"),
    [
        (8, "NoNodeLargeEnough", "No node has 8 GPUs in all (the largest has 4; 2 GPU node(s) of 2)"),
        (2, "InsufficientGPU", "Admitted by the queue, but no node has 2 free nvidia.com/gpu right now: 2 of 2 nodes"),
    ],
    ids=["larger-than-any-node", "every-gpu-taken"],
)
async def test_an_unplaceable_session_is_explained_as_a_job_is(
    cluster: EmulatedCluster, executors: Executors, gpus: int, reason: str, says: str
) -> None:
    cluster.add_node("gpu-1", gpus=4)
    cluster.add_node("gpu-2", gpus=4)
    for i in (1, 2):  # another team's pods hold every GPU (real processes here: `sleep`)
        cluster.add_pod("research", f"other-{i}", gpus=4, command="sleep 600")
    ex, seen = executors.new()
    req = session_request(f"s-big{gpus}", executors.artifacts, gpus=gpus)
    handle = await ex.submit(req)

    async def explained() -> Observation | None:
        await asyncio.sleep(0)
        return next((o for o in seen if o.reason == reason), None)

    obs = await wait_for(explained, 20, f"the {reason} explanation")
    assert obs.status == "starting" and obs.details["layer"] == "executor"
    assert obs.message.startswith(says), obs.message
    assert obs.details["raw"].startswith("0/2 nodes are available: 2 Insufficient nvidia.com/gpu.")
    assert await ex.kernel_connection(req.run_id, handle) is None  # no pod running: nothing to connect to
    assert len(secrets_of(cluster, req.run_id)) == 1
    await ex.stop(req.run_id, handle)
    assert not secrets_of(cluster, req.run_id) and not cluster.jobs_in(NAMESPACE)


def test_the_pod_sees_the_agent_source_unchanged() -> None:
    from jupyter_gpuplat.executors import kernel_agent

    assert agent_source() == Path(kernel_agent.__file__).read_text()
    assert os.path.basename(kernel_agent.__file__) == "kernel_agent.py"


async def test_a_secret_left_by_a_crash_is_adopted_and_another_runs_is_refused(
    cluster: EmulatedCluster, executors: Executors
) -> None:
    from kube_emulator.store import RESOURCES

    cluster.add_node("gpu-1", gpus=4)
    settings = JobSettings(namespace=NAMESPACE)
    ex, _ = executors.new()
    # The server made the Secret, then died before creating the Job: the same key is used again.
    req = session_request("s-crashed", executors.artifacts)
    cluster.store.create(RESOURCES[SECRETS], NAMESPACE, make_kernel_secret(req, settings, "earlier-key"))
    handle = await ex.submit(req)
    info = await wait_for(lambda: ex.kernel_connection(req.run_id, handle), 20, "the connection")
    assert info["key"] == "earlier-key"
    [job] = cluster.jobs_in(NAMESPACE, run_selector(req.run_id))
    [secret] = secrets_of(cluster, req.run_id)
    assert [r["uid"] for r in secret["metadata"]["ownerReferences"]] == [job["metadata"]["uid"]]
    await ex.stop(req.run_id, handle)

    # A Secret of that name carrying another run id is not this run's: refused, left alone, no Job.
    other = session_request("s-other", executors.artifacts)
    squatter = make_kernel_secret(other, settings, "theirs")
    squatter["metadata"]["labels"]["gpuplat.io/run-id"] = "s-someone-else"
    cluster.store.create(RESOURCES[SECRETS], NAMESPACE, squatter)
    with pytest.raises(ExecutorError, match=r"carries run id 's-someone-else'.*not adopted"):
        await ex.submit(other)
    assert not cluster.jobs_in(NAMESPACE, run_selector("s-other"))
    assert cluster.store.find(RESOURCES[SECRETS], NAMESPACE, "gpuplat-s-other-kernel") is not None

    # Kubernetes refuses the Job: the Secret made for it goes too.
    cluster.faults.fail_next("create", "jobs", code=403, message="jobs is forbidden: injected")
    refused = session_request("s-refused", executors.artifacts)
    with pytest.raises(ExecutorError, match="refused the Job of run s-refused: jobs is forbidden"):
        await ex.submit(refused)
    assert not secrets_of(cluster, "s-refused")
    # The Secret cannot be given its Job as owner: the Job goes too (nothing holds a GPU without a run).
    cluster.faults.fail_next("patch", "secrets", code=403, message="secrets is forbidden: injected")
    unowned = session_request("s-unowned", executors.artifacts)
    with pytest.raises(ExecutorError, match="cannot give Secret gpuplat-s-unowned-kernel its Job"):
        await ex.submit(unowned)
    cluster.wait_for(lambda: not cluster.jobs_in(NAMESPACE, run_selector("s-unowned")), 10, "the Job deleted")
    assert not secrets_of(cluster, "s-unowned")


@pytest.mark.parametrize("how", ["preempted", "deleted"])
async def test_a_session_pod_ended_from_outside_ends_the_session_without_a_replacement(
    cluster: EmulatedCluster, executors: Executors, how: str
) -> None:
    cluster.add_node("gpu-1", gpus=4)
    ex, seen = executors.new()
    req = session_request(f"s-{how}", executors.artifacts)
    handle = await ex.submit(req)
    await wait_for(lambda: ex.kernel_connection(req.run_id, handle), 20, "the pod running")
    [pod] = cluster.pods(NAMESPACE, run_selector(req.run_id))
    if how == "preempted":
        cluster.preempt(NAMESPACE, pod["metadata"]["name"], by="research/urgent")
    else:
        cluster.store.delete(POD, NAMESPACE, pod["metadata"]["name"])

    async def final() -> Observation | None:
        await asyncio.sleep(0)
        return next((o for o in seen if o.final), None)

    end = await wait_for(final, 20, "the session's end")
    # The agent exits 0 on SIGTERM, so the Job "completes": for a session that is no success.
    assert (end.status, end.reason) == ("failed", "Lost"), end
    assert end.message.startswith("The session ended from outside the platform: ")
    if how == "preempted":
        assert "its pod was preempted by a higher-priority pod (" in end.message, end.message
        assert not [o for o in seen if o.reason == "Preempted"]  # never "a replacement starts" on the way
    else:
        assert "its pod was deleted outside the platform." in end.message
    added = [c.obj["metadata"]["name"] for c in cluster.store.history if c.rt is POD and c.type == "ADDED"]
    assert added == [pod["metadata"]["name"]]  # no second pod


# -- end to end: a real Jupyter server, its kernel provisioner, the Kubernetes executor --------


def start_kernel(srv: ServerProcess, path: str, kernel: str) -> requests.Response:
    """As JupyterLab starts a notebook's kernel (POST /api/sessions)."""
    body = {"path": path, "type": "notebook", "name": os.path.basename(path), "kernel": {"name": kernel}}
    headers = {"Authorization": f"token {srv.token}"}
    return requests.post(srv.url + "api/sessions", headers=headers, json=body, timeout=90)


def add_kernelspec(srv: ServerProcess, name: str, **config: Any) -> None:
    """A gpuplat kernelspec with a short launch wait (the offered ones wait 45 s)."""
    d = srv.root / "data" / "kernels" / name
    d.mkdir(parents=True, exist_ok=True)
    spec = {
        "argv": ["python", "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": name,
        "language": "python",
        "interrupt_mode": "message",
        "metadata": {"kernel_provisioner": {"provisioner_name": "gpuplat-session", "config": config}},
    }
    (d / "kernel.json").write_text(json.dumps(spec))


def session_of(srv: ServerProcess, notebook: str) -> dict[str, Any]:
    found = srv.ok("GET", "sessions", notebook=notebook)["sessions"]
    assert len(found) == 1, [x["session"] for x in srv.ok("GET", "sessions")["sessions"]]
    return found[0]


def pod_kernel_server(tmp_path: Path) -> tuple[EmulatedCluster, ServerProcess]:
    """An emulated cluster with one 1-GPU node and a real server whose sessions run there (not started)."""
    cluster = deployed_cluster(local_processes=True)
    cluster.add_node("gpu-1", gpus=1)
    srv = ServerProcess(
        tmp_path,
        config_file=SESSIONS_CONFIG,
        extra_config={
            "GpuPlat": {"executor_class": "jupyter_gpuplat.executors.kubernetes.KubernetesExecutor"},
            "KubernetesExecutor": executor_config(cluster, tmp_path, tmp_path / "artifacts"),
        },
    )
    return cluster, srv


def test_a_notebook_kernel_runs_in_a_pod_and_an_unplaceable_one_says_why(tmp_path: Path) -> None:
    cluster, srv = pod_kernel_server(tmp_path)
    try:
        (tmp_path / NB).mkdir(parents=True)
        srv.start()
        # A session's pod sees only its own run's directory: the notebook's folder is not its working_dir there.
        first = start_kernel(srv, NB + "pod.ipynb", "gpuplat-notebook")
        assert first.status_code == 201, first.text
        lease = session_of(srv, NB + "pod.ipynb")
        [pod] = cluster.pods(NAMESPACE, run_selector(lease["id"]))
        assert len(cluster.jobs_in(NAMESPACE)) == 1 and len(secrets_of(cluster, lease["id"])) == 1
        ks = KernelSocket(srv, first.json()["kernel"]["id"])
        assert ks.execute('import os; print(os.environ["GPUPLAT_KERNEL_IP"])') == (f"{pod['status']['podIP']}\n", "ok")
        ks.close()

        # The queue admits a second session (lab: room for 4 GPUs), the cluster has no GPU left for it.
        add_kernelspec(srv, "gpuplat-k8s-wait", project="team-a", preset="quick", launch_wait_seconds=1.0)
        second = start_kernel(srv, NB + "later.ipynb", "gpuplat-k8s-wait")
        assert second.status_code >= 400
        text = second.json()["message"]
        assert text.startswith("Waiting for a GPU: in lab · "), text
        assert " · Admitted by the queue, but no node has 1 free nvidia.com/gpu right now" in text, text
        later = session_of(srv, NB + "later.ipynb")
        ex = srv.ok("GET", f"runs/{later['id']}/explain")
        assert (ex["layer"], ex["reason"], ex["status"]) == ("executor", "InsufficientGPU", "starting")

        until(
            lambda: "KernelReady" in [e["reason"] for e in srv.ok("GET", f"runs/{lease['id']}")["timeline"]],
            "KernelReady in the session's timeline",
            10,
        )
        srv.ok("POST", f"runs/{lease['id']}/stop")
        assert srv.wait_status(lease["id"], "stopped")["reason"] == "Stopped"
        srv.wait_status(later["id"], "running")  # its pod is placed once the first pod's GPU is free
        again = start_kernel(srv, NB + "later.ipynb", "gpuplat-k8s-wait")
        assert again.status_code == 201, again.text
        ks = KernelSocket(srv, again.json()["kernel"]["id"])
        assert ks.execute("print(6 * 7)") == ("42\n", "ok")
        ks.close()
        srv.ok("POST", f"runs/{later['id']}/stop")
        srv.wait_status(later["id"], "stopped")
        assert not cluster.jobs_in(NAMESPACE) and not cluster.pods(NAMESPACE)
        assert not secrets_of(cluster, lease["id"]) and not secrets_of(cluster, later["id"])
    finally:
        srv.stop()
        cluster.stop()
    assert not cluster.errors, cluster.errors


def test_a_pod_kernel_s_cell_sent_before_ready_keeps_the_lease_busy(tmp_path: Path) -> None:
    cluster, srv = pod_kernel_server(tmp_path)
    try:
        (tmp_path / NB).mkdir(parents=True)
        srv.start()
        answer = start_kernel(srv, NB + "run-all.ipynb", "gpuplat-quick")  # idle limit 3 s
        assert answer.status_code == 201, answer.text
        lease = session_of(srv, NB + "run-all.ipynb")
        a_cell_sent_at_once_is_not_culled(srv, srv, answer.json()["kernel"]["id"], lease["id"], 3)
    finally:
        srv.stop()
        cluster.stop()
    assert not cluster.errors, cluster.errors
