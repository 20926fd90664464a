"""Hostile runs on Kubernetes: what a member's run pod holds, and what the cluster refuses.

Real parts: a Jupyter server with the Kubernetes executor, the official client over HTTP, the
project's emulator laid out as deploy/kubernetes/ (two namespaces, Pod Security `restricted`
enforced on gpuplat-runs, the Role enforced). bob and erin are plain members of team-a and
team-b. Each pod mounts the artifact claim only as its own run's directory (the other run's is
not in it), its code read-only, with the restricted security context, no service account
token, no service links, no device variable even if one reached the executor, and
NVIDIA_VISIBLE_DEVICES=void at 0 GPUs. A platform preset's `security` relaxes the context,
and the restricted namespace then refuses that pod, as it refuses any hostile pod spec. The
control plane follows no link or FIFO a pod planted in its run's directory.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import posixpath
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kube_emulator import EmulatedCluster, Permissions
from kube_emulator.store import POD, RESOURCES
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from jupyter_gpuplat.core.request import Entrypoint
from jupyter_gpuplat.executors.base import ExecutorError, LaunchRequest, Observation
from jupyter_gpuplat.executors.kubernetes.executor import KubernetesExecutor
from jupyter_gpuplat.executors.kubernetes.manifests import JobSettings, make_job
from jupyter_gpuplat.executors.kubernetes.networkpolicy import kubespawner_username
from jupyter_gpuplat.executors.kubernetes.sessions import kernel_generation

from ..conftest import EXAMPLE
from ..k8s import NAMESPACE, deployed_cluster, executor_config, on_emulator, run_selector
from ..waiting import wait_for

ARTIFACTS = "gpuplat-artifacts"
NETWORK_POLICIES = RESOURCES[("networking.k8s.io", "networkpolicies")]
DEVICE_ENV = {
    "NVIDIA_VISIBLE_DEVICES": "all",
    "NVIDIA_DRIVER_CAPABILITIES": "all",
    "CUDA_VISIBLE_DEVICES": "0,1,2,3",
    "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
    "CUDA_MPS_PIPE_DIRECTORY": "/tmp/mps",
    "HIP_VISIBLE_DEVICES": "0",
    "ROCR_VISIBLE_DEVICES": "0",
    "GPU_DEVICE_ORDINAL": "0",
}
RELAXED = {
    "run_as_root": True,
    "allow_privilege_escalation": True,
    "add_capabilities": ["SYS_PTRACE"],
    "seccomp_profile": "Unconfined",
}


@pytest.fixture
def cluster() -> Iterator[EmulatedCluster]:
    c = deployed_cluster()
    c.add_node("gpu-1", gpus=4)
    yield c
    c.stop()
    assert not c.errors, c.errors


@pytest.fixture
def platform_config_file(tmp_path: Path) -> Path:
    """The example platform, plus a platform admin's preset relaxing the restricted default."""
    cfg = yaml.safe_load(EXAMPLE.read_text())
    cfg["presets"].append({"name": "debug-root", "description": "root, for a debugger", "security": RELAXED})
    for pr in cfg["projects"]:
        pr["allowed_presets"].append("debug-root")
    path = tmp_path / "platform.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


@pytest.fixture
def jp_server_config(jp_server_config: dict[str, Any], tmp_path: Path, cluster: EmulatedCluster) -> dict[str, Any]:
    return on_emulator(jp_server_config, cluster, tmp_path)


def admitted(cluster: EmulatedCluster, run_id: str) -> list[dict[str, Any]]:
    """The run's pods as the cluster admitted them (their first version: a finished Job may be deleted since)."""
    return [
        c.obj
        for c in list(cluster.store.history)
        if c.rt is POD and c.type == "ADDED" and c.obj["metadata"]["labels"].get("gpuplat.io/run-id") == run_id
    ]


async def pod_of(cluster: EmulatedCluster, run_id: str) -> dict[str, Any]:
    """The run's first pod; waited for on the event loop (the server under test runs on it too)."""
    found = await wait_for(lambda: admitted(cluster, run_id), 20, f"the pod of {run_id}")
    return dict(found[0])


def seen_dirs(pod: dict[str, Any]) -> dict[str, tuple[str, bool]]:
    """mountPath -> (the directory of the artifact volume mounted there, read-only?) for the pod's one container."""
    [volume] = [
        v for v in pod["spec"]["volumes"] if (v.get("persistentVolumeClaim") or {}).get("claimName") == ARTIFACTS
    ]
    [container] = pod["spec"]["containers"]
    out = {}
    for m in container["volumeMounts"]:
        if m["name"] == volume["name"]:
            assert m.get("subPath"), f"the whole artifact volume is mounted at {m['mountPath']}"
            out[m["mountPath"]] = (posixpath.normpath(m["subPath"]), bool(m.get("readOnly")))
    return out


def env_of(pod: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in pod["spec"]["containers"][0]["env"]}


async def test_a_members_pod_holds_only_its_own_run(api: Any, cluster: EmulatedCluster, tmp_path: Path) -> None:
    mine = await api.submit("bob", name="mine", code="print('bob')")  # a cell: its code/cell.py in the pod
    theirs = await api.submit("erin", project="team-b", name="theirs", command="echo erin")
    artifacts = tmp_path / "artifacts"
    mount = str(artifacts)
    for run, other in ((mine, theirs), (theirs, mine)):
        pod = await pod_of(cluster, run["id"])
        own = run["id"]
        # The artifact claim only as this run's directory, its code/ read-only over it: nothing of the other run.
        assert seen_dirs(pod) == {f"{mount}/{own}": (own, False), f"{mount}/{own}/code": (f"{own}/code", True)}
        assert not any(sub.split("/")[0] == other["id"] for sub, _ in seen_dirs(pod).values())
        assert [v for v in pod["spec"]["volumes"] if "hostPath" in v] == []
        spec = pod["spec"]
        assert spec["securityContext"] == {
            "runAsNonRoot": True,
            "runAsUser": 1000,
            "runAsGroup": 1000,
            "seccompProfile": {"type": "RuntimeDefault"},
        }
        assert spec["containers"][0]["securityContext"] == {
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
        }
        assert spec["automountServiceAccountToken"] is False and spec["enableServiceLinks"] is False
        assert spec["serviceAccountName"] == "gpuplat-run"
        env = env_of(pod)
        assert env["NVIDIA_VISIBLE_DEVICES"] == "void"  # 0 GPUs: an image's NVIDIA_VISIBLE_DEVICES=all exposes none
        assert [k for k in env if k.startswith(("NVIDIA_", "CUDA_"))] == ["NVIDIA_VISIBLE_DEVICES"]
    # The cell's code was on the volume before its pod existed, and the pod runs it from the read-only code/.
    assert (artifacts / mine["id"] / "code" / "cell.py").read_text() == "print('bob')"
    assert (await pod_of(cluster, mine["id"]))["spec"]["containers"][0]["command"] == [
        "python",
        f"{mount}/{mine['id']}/code/cell.py",
    ]
    assert (await api.wait_status(theirs["id"], "succeeded", user="erin"))["exit_code"] == 0

    # With a GPU the device plugin's grant is the only selection: no device variable at all.
    gpu = await api.submit("bob", presets=["single-gpu"], command="echo gpu")
    assert not [k for k in env_of(await pod_of(cluster, gpu["id"])) if k.startswith(("NVIDIA_", "CUDA_"))]
    for run in (mine, gpu):
        await api.wait_status(run["id"], "succeeded", "failed")


async def test_a_platform_presets_security_relaxes_it_and_the_restricted_namespace_refuses_that_pod(
    api: Any, cluster: EmulatedCluster
) -> None:
    run = await api.submit("bob", presets=["debug-root"], command="echo root")
    [job] = await wait_for(lambda: cluster.jobs_in(NAMESPACE, run_selector(run["id"])), 20, "the Job")
    pod = job["spec"]["template"]["spec"]
    assert pod["securityContext"] == {
        "runAsNonRoot": False,
        "runAsUser": 0,
        "runAsGroup": 0,
        "seccompProfile": {"type": "Unconfined"},
    }
    assert pod["containers"][0]["securityContext"] == {
        "allowPrivilegeEscalation": True,
        "capabilities": {"drop": ["ALL"], "add": ["SYS_PTRACE"]},
    }

    async def refused() -> dict[str, Any] | None:
        ex = await api.ok("GET", f"runs/{run['id']}/explain", "bob")
        return ex if ex["reason"] == "PodCreateFailed" else None

    ex = await wait_for(refused, 20, "the cluster's refusal of the relaxed pod")
    assert 'violates PodSecurity "restricted:latest"' in ex["message"], ex["message"]
    for check in ("allowPrivilegeEscalation != false", "unrestricted capabilities", "runAsNonRoot != true",
                  "runAsUser=0", "seccompProfile"):  # fmt: skip
        assert check in ex["message"], (check, ex["message"])
    assert not admitted(cluster, run["id"])
    await api.ok("POST", f"runs/{run['id']}/stop", "bob")
    await api.wait_status(run["id"], "stopped", user="bob")


def launch(run_id: str, artifacts: Path, command: str, **kw: Any) -> LaunchRequest:
    return LaunchRequest(
        run_id=run_id,
        entrypoint=Entrypoint("shell", shell=command),
        env=kw.pop("env", {}),
        devices=(),
        workdir=str(artifacts / run_id),
        spec={"queue": "team-b-train", **kw.pop("spec", {})},
        project="team-b",
        user=kw.pop("user", "erin"),
        provenance=kw.pop("provenance", {}),
    )


def test_security_set_outside_a_platform_admins_layer_is_refused_by_the_executor() -> None:
    settings = JobSettings(artifacts_claim=ARTIFACTS, artifacts_mount_path="/srv/a")
    for layer in ("run", "project:team-b/preset:debug", ""):
        req = launch(
            "r-0a1b2c3d4e",
            Path("/srv/a"),
            "true",
            spec={"security": {"run_as_root": True}},
            provenance={"security.run_as_root": layer} if layer else {},
        )
        with pytest.raises(
            ExecutorError, match=r"security\.run_as_root was set by .*only the org defaults and platform"
        ):
            make_job(req, settings)
    ok = launch(
        "r-0a1b2c3d4e", Path("/srv/a"), "true", spec={"security": {"run_as_user": 2000}},
        provenance={"security.run_as_user": "preset:uid-2000"},
    )  # fmt: skip
    assert make_job(ok, settings)["spec"]["template"]["spec"]["securityContext"]["runAsUser"] == 2000
    # A preset's volume naming the artifact claim would mount it whole: refused too.
    whole = launch(
        "r-0a1b2c3d4e", Path("/srv/a"), "true",
        spec={"volumes": [{"name": "all", "claim": ARTIFACTS, "mount_path": "/all"}]},
    )  # fmt: skip
    with pytest.raises(ExecutorError, match="would mount the whole artifact claim"):
        make_job(whole, settings)


def admin_client(cluster: EmulatedCluster, tmp_path: Path) -> Any:
    cluster.permissions = Permissions()  # a cluster admin's credentials: Pod Security holds for them too
    return config.new_client_from_config(str(cluster.write_kubeconfig(tmp_path / "admin-kc", NAMESPACE)))


HOSTILE = {
    "hostPath /": (
        {"volumes": [{"name": "root", "hostPath": {"path": "/"}}]},
        {"volumeMounts": [{"name": "root", "mountPath": "/host"}]},
        ['hostPath volumes (volume "root")', 'restricted volume types (volume "root" uses restricted volume type'],
    ),
    "root": ({"securityContext": {"runAsNonRoot": False, "runAsUser": 0}}, {}, ["runAsNonRoot != true", "runAsUser=0"]),
    "privileged": ({}, {"securityContext": {"privileged": True}}, ["privileged (container"]),
    "privilege escalation": (
        {}, {"securityContext": {"allowPrivilegeEscalation": True}}, ["allowPrivilegeEscalation != false"],
    ),
    "capabilities kept": ({}, {"securityContext": {"capabilities": {"add": ["SYS_ADMIN"]}}}, [
        'must set securityContext.capabilities.drop=["ALL"]', 'must not include "SYS_ADMIN"',
    ]),
    "no seccomp": ({"securityContext": {"seccompProfile": None}}, {}, ["seccompProfile (pod or container"]),
    "host network": ({"hostNetwork": True}, {}, ["host namespaces (hostNetwork=true)"]),
}  # fmt: skip


def restricted_pod(name: str) -> dict[str, Any]:
    """A pod spec as the executor writes it: admitted by Pod Security restricted."""
    return {
        "metadata": {"name": name},
        "spec": {
            "restartPolicy": "Never",
            "securityContext": {"runAsNonRoot": True, "runAsUser": 1000, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [
                {
                    "name": "main",
                    "image": "busybox:1.36",
                    "command": ["sh", "-c", "echo hi"],
                    "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
                }
            ],
        },
    }


@pytest.mark.parametrize("what", list(HOSTILE))
def test_the_restricted_namespace_refuses_a_hostile_pod_spec(
    cluster: EmulatedCluster, tmp_path: Path, what: str
) -> None:
    pod_part, container_part, says = HOSTILE[what]
    a = admin_client(cluster, tmp_path)
    try:
        core = client.CoreV1Api(a)
        assert core.create_namespaced_pod(NAMESPACE, restricted_pod("fine")).metadata.name == "fine"
        body = restricted_pod("hostile")
        for key, value in pod_part.items():
            if isinstance(value, dict) and isinstance(body["spec"].get(key), dict):
                body["spec"][key] = {k: v for k, v in {**body["spec"][key], **value}.items() if v is not None}
            else:
                body["spec"][key] = value
        c = body["spec"]["containers"][0]
        for key, value in container_part.items():
            c[key] = {**c.get(key, {}), **value} if isinstance(value, dict) and key in c else value
        with pytest.raises(ApiException) as refused:
            core.create_namespaced_pod(NAMESPACE, body)
        assert refused.value.status == 403, refused.value.body
        assert 'is forbidden: violates PodSecurity \\"restricted:latest\\"' in refused.value.body
        for text in says:
            assert text.replace('"', '\\"') in refused.value.body, (text, refused.value.body)
        assert [p["metadata"]["name"] for p in cluster.pods(NAMESPACE)] == ["fine"]
    finally:
        a.close()


class Observed:
    def __init__(self) -> None:
        self.seen: list[Observation] = []

    async def final(self, run_id: str, timeout: float = 20) -> Observation:
        async def done() -> Observation | None:
            await asyncio.sleep(0)
            return next((o for o in self.seen if o.run_id == run_id and o.final), None)

        return await wait_for(done, timeout, f"the end of {run_id}")

    async def running(self, run_id: str) -> None:
        async def up() -> bool:
            await asyncio.sleep(0)
            return any(o.run_id == run_id and o.status == "running" for o in self.seen)

        await wait_for(up, 20, f"{run_id} running")


async def test_the_control_plane_follows_no_link_or_fifo_a_pod_planted(
    cluster: EmulatedCluster, tmp_path: Path
) -> None:
    artifacts = tmp_path / "artifacts"
    victim = tmp_path / "victim.log"  # outside the artifact volume: the control plane's to protect
    victim.write_text("gpuplat: kernel 7 started\n")
    victim_dir = tmp_path / "elsewhere"
    victim_dir.mkdir()
    ex = KubernetesExecutor(**executor_config(cluster, tmp_path, artifacts))
    obs = Observed()
    ex.set_observer(obs.seen.append)
    try:
        linked = launch("r-planted01", artifacts, "gate planted; echo secret line; echo more")
        fifo = launch("r-fifo00001", artifacts, "gate planted; echo into the fifo")
        env_run = launch("r-devenv001", artifacts, "echo env", env={**DEVICE_ENV, "CUDA_LAUNCH_BLOCKING": "1"})
        for req in (linked, fifo, env_run):
            await ex.submit(req)
        await obs.running(linked.run_id)
        await obs.running(fifo.run_id)
        # As the pods could, in their own directories on the shared volume: output.log made a link out of the
        # volume, .gpuplat a link to another directory, output.log a FIFO nobody reads.
        run_dir = artifacts / linked.run_id
        os.symlink(victim, run_dir / "output.log")
        (run_dir / ".gpuplat").rmdir()
        os.symlink(victim_dir, run_dir / ".gpuplat")
        os.mkfifo(artifacts / fifo.run_id / "output.log")
        cluster.open_gate("planted")
        for req in (linked, fifo, env_run):
            assert (await obs.final(req.run_id)).status == "succeeded"
        assert victim.read_text() == "gpuplat: kernel 7 started\n"  # not appended to through the link
        assert list(victim_dir.iterdir()) == []  # no k8s-logs.json written through .gpuplat
        assert kernel_generation(str(run_dir)) is None  # not read through the link either
        assert os.path.islink(run_dir / "output.log") and os.path.islink(run_dir / ".gpuplat")
        # A device variable that reached the executor anyway (the policy refuses them) is not in the pod.
        env = env_of(await pod_of(cluster, env_run.run_id))
        assert not set(DEVICE_ENV) - {"NVIDIA_VISIBLE_DEVICES"} & set(env)
        assert env["NVIDIA_VISIBLE_DEVICES"] == "void" and env["CUDA_LAUNCH_BLOCKING"] == "1"  # tuning stays
        assert (artifacts / env_run.run_id / "output.log").read_text() == "env\n"  # an honest run's log is archived
    finally:
        await ex.close()


@pytest.mark.parametrize(
    ("name", "label"),
    [
        ("alice", "alice"),
        ("jupyter-Alex", "jupyter-Alex"),  # a valid label value stays as it is
        ("user@email.com", "user-email-com---0925f997"),  # KubeSpawner 7's safe_slug, from its own tests
        ("username--servername", "username-servername---d957f1de"),
        ("-start", "start---f587e2dc"),
    ],
)
def test_the_username_label_is_escaped_as_kubespawner_does(name: str, label: str) -> None:
    assert kubespawner_username(name) == label


async def test_a_sessions_kernel_admits_only_its_owners_server(cluster: EmulatedCluster, tmp_path: Path) -> None:
    artifacts = tmp_path / "artifacts"
    ex = KubernetesExecutor(**executor_config(cluster, tmp_path, artifacts))
    obs = Observed()
    ex.set_observer(obs.seen.append)
    try:
        req = LaunchRequest(
            run_id="s-owned0001",
            entrypoint=Entrypoint("kernel"),
            env={},
            devices=(),
            workdir=str(artifacts / "s-owned0001"),
            spec={"kind": "session", "queue": "interactive", "resources": {"gpu": 1}},
            project="team-a",
            user="Bob@Example.org",
        )
        handle = await ex.submit(req)
        [policy] = [
            c.obj
            for c in cluster.store.history
            if c.rt is NETWORK_POLICIES and c.type == "ADDED"
            and (c.obj["metadata"].get("labels") or {}).get("gpuplat.io/run-id") == req.run_id
        ]  # fmt: skip
        assert policy["metadata"]["ownerReferences"] == [
            {"apiVersion": "batch/v1", "kind": "Job", "name": handle["job"], "uid": handle["uid"]}
        ]
        assert policy["spec"]["podSelector"]["matchLabels"]["gpuplat.io/run-id"] == req.run_id
        assert policy["spec"]["policyTypes"] == ["Ingress"]
        [rule] = policy["spec"]["ingress"]
        assert rule["from"] == [
            {
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "jhub"}},
                "podSelector": {
                    "matchLabels": {
                        "component": "singleuser-server",
                        "hub.jupyter.org/username": kubespawner_username("Bob@Example.org"),
                    }
                },
            }
        ]
        assert rule["ports"] == [{"protocol": "TCP", "port": p} for p in range(52700, 52705)]
        labels = (await pod_of(cluster, req.run_id))["metadata"]["labels"]
        assert policy["spec"]["podSelector"]["matchLabels"].items() <= labels.items()  # it selects the kernel's pod
        await ex.stop(req.run_id, handle)
        gone = lambda: not cluster.store.select(NETWORK_POLICIES, NAMESPACE, run_selector(req.run_id))[0]  # noqa: E731
        await wait_for(lambda: gone(), 10, "the policy gone with its Job")
        # Without its policy nobody could reach the kernel: a session whose policy is refused does not start.
        cluster.faults.fail_next("create", "networkpolicies", code=403, message="networkpolicies is forbidden")
        unreachable = dataclasses.replace(req, run_id="s-nopolicy1", workdir=str(artifacts / "s-nopolicy1"))
        with pytest.raises(ExecutorError, match="refused the NetworkPolicy of session s-nopolicy1"):
            await ex.submit(unreachable)
        assert not cluster.jobs_in(NAMESPACE, run_selector("s-nopolicy1"))
        assert not cluster.store.select(RESOURCES[("", "secrets")], NAMESPACE, run_selector("s-nopolicy1"))[0]
    finally:
        await ex.close()
