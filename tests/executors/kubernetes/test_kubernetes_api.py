"""The Kubernetes executor through the REST API of a real Jupyter server, against the emulator.

The official `kubernetes` client talks HTTP to the emulated cluster, which enforces
the project's own Role (deploy/kubernetes/rbac.yaml).
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from jupyter_gpuplat.widgets._html import seconds as seconds_text
from jupyter_gpuplat.widgets.clocks import LiveClocks
from kube_emulator import EmulatedCluster

from jupyter_gpuplat.cli import main as cli_main
from jupyter_gpuplat.client import Client
from jupyter_gpuplat.widgets import RunMonitor

from ...conftest import EXAMPLE
from ...k8s import GPU_TAINT, NAMESPACE, TOLERATE_GPU, deployed_cluster, on_emulator, run_selector
from ...waiting import wait_for


@pytest.fixture
def cluster() -> Iterator[EmulatedCluster]:
    c = deployed_cluster(taint_wording="v1.25")
    yield c
    c.stop()
    assert not c.errors, c.errors


@pytest.fixture
def platform_config_file(tmp_path: Path) -> Path:
    """The example, with what members may not set in a run's own fields granted by platform admins:
    a preset tolerating the GPU taint, and team-a's registry in allowed_images."""
    cfg = yaml.safe_load(EXAMPLE.read_text())
    cfg["presets"].append({"name": "tolerate-gpu", "placement": {"tolerations": [TOLERATE_GPU]}})
    team_a = next(p for p in cfg["projects"] if p["name"] == "team-a")
    team_a["allowed_presets"].append("tolerate-gpu")
    team_a["allowed_images"] = ["registry.example.com/team-a/*"]
    path = tmp_path / "platform.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


@pytest.fixture
def jp_server_config(jp_server_config: dict[str, Any], tmp_path: Path, cluster: EmulatedCluster) -> dict[str, Any]:
    """The suite's server config (tests/conftest.py), with the Kubernetes executor on the emulator."""
    return on_emulator(jp_server_config, cluster, tmp_path)


async def explained(api: Any, run_id: str, reason: str, timeout: float = 20) -> dict[str, Any]:
    last: list[Any] = [None]

    async def cond() -> dict[str, Any] | None:
        e = last[0] = await api.ok("GET", f"runs/{run_id}/explain")
        return e if e["reason"] == reason else None

    try:
        return await wait_for(cond, timeout, f"explain of {run_id} to say {reason}")
    except AssertionError as exc:
        raise AssertionError(f"{exc}; it says {last[0]}") from None


def objects_of(cluster: EmulatedCluster, run_id: str) -> tuple[list[Any], list[Any]]:
    return cluster.jobs_in(NAMESPACE, run_selector(run_id)), cluster.pods(NAMESPACE, run_selector(run_id))


async def test_queue_held_and_executor_held_runs_explain_differently(api: Any, cluster: EmulatedCluster) -> None:
    # Two 2-GPU nodes; two jobs on the interactive queue take one GPU on each.
    cluster.add_node("gpu-1", gpus=2, labels={"nvidia.com/gpu.product": "NVIDIA-A100"})
    cluster.add_node("gpu-2", gpus=2, labels={"nvidia.com/gpu.product": "NVIDIA-A100"})
    sessions = [
        await api.submit(user, queue="interactive", resources={"gpu": 1}, command="gate never")
        for user in ("alice", "bob")
    ]
    for s in sessions:
        await api.wait_status(s["id"], "running", user="alice")
    # team-a-train's quota (2 GPUs) admits a 2-GPU run that no node can hold now.
    big = await api.submit(name="big", presets=["multi-gpu"], command="echo never")
    ex = await explained(api, big["id"], "GPUsFragmented")
    assert ex["layer"] == "executor" and ex["status"] == "starting"
    assert ex["message"].startswith("2 GPUs are free but spread over nodes (1 on gpu-2 + 1 on gpu-1)"), ex
    assert "this run needs 2 on one node" in ex["message"]
    assert ex["details"]["counts"] == {"nodes": 2, "insufficient_gpu": 2, "free_gpus": 2}
    assert ex["details"]["raw"].startswith("0/2 nodes are available: 2 Insufficient nvidia.com/gpu.")
    assert {"who": "the run's owner", "can": "wait for a node to free up, or ask for fewer GPUs per run"} in ex[
        "who_can_act"
    ]

    small = await api.submit(name="small", presets=["single-gpu"], command="echo small")
    held = await api.ok("GET", f"runs/{small['id']}/explain")
    assert held["layer"] == "queue" and held["reason"] == "QueueQuota"
    assert held["queue_usage"]["gpu"] == 2 and held["queue_usage"]["gpu_quota"] == 2
    assert "2/2" in held["message"]
    assert [b["id"] for b in held["blockers"]] == [big["id"]]

    # The wait for a node is its own clock: no run time while Kubernetes cannot place it.
    record = await api.run(big["id"])
    assert record["status"] == "starting" and record["started_at"] is None
    assert record["clocks"]["run_seconds"] is None and record["clocks"]["start_wait_seconds"] >= 0
    reasons = [e["reason"] for e in record["timeline"]]
    assert reasons[:4] == ["Submitted", "Submitted", "Admitted", "Submitted"], reasons
    assert "GPUsFragmented" in reasons

    await api.ok("POST", f"runs/{big['id']}/stop")
    stopped = await api.wait_status(big["id"], "stopped")
    assert stopped["message"].startswith("stopped by alice")
    done = await api.wait_status(small["id"], "succeeded")
    assert done["exit_code"] == 0 and done["clocks"]["run_seconds"] is not None
    assert (await api.ok("GET", f"runs/{small['id']}/logs", format="text")) == b"small\n"
    for s in sessions:
        await api.ok("POST", f"runs/{s['id']}/stop", "ops")


async def test_taint_explain_names_the_preset(api: Any, cluster: EmulatedCluster) -> None:
    for i in (1, 2):
        cluster.add_node(f"gpu-{i}", gpus=4, taints=[GPU_TAINT])
    cluster.add_node("cpu-1", gpus=0)
    run = await api.submit(presets=["single-gpu"], command="echo hi")
    ex = await explained(api, run["id"], "UntoleratedTaint")
    assert ex["layer"] == "executor"
    assert ex["message"] == (
        "2 of 3 nodes are reserved by taint(s) (nvidia.com/gpu: present) that this run does not tolerate. "
        "Its placement comes from preset single-gpu, which sets no toleration for them. "
        "Other nodes: 1 Insufficient nvidia.com/gpu."
    )
    assert ex["who_can_act"][0] == {"who": "platform admins", "can": "add the matching toleration to preset single-gpu"}
    assert "had untolerated taint {nvidia.com/gpu: present}" in ex["details"]["raw"]
    await api.ok("POST", f"runs/{run['id']}/stop")
    await api.wait_status(run["id"], "stopped")

    # the toleration from a preset (a run's own fields may not set it: core/member_rules.py)
    fixed = await api.submit(presets=["single-gpu", "tolerate-gpu"], command="echo placed")
    assert (await api.wait_status(fixed["id"], "succeeded"))["exit_code"] == 0


async def test_bad_image_explains_the_pull_error(api: Any, cluster: EmulatedCluster) -> None:
    cluster.add_node("gpu-1", gpus=2)
    cluster.missing_image("registry.example.com/team-a/trainer:nope")
    run = await api.submit(presets=["single-gpu"], image="registry.example.com/team-a/trainer:nope", command="true")
    ex = await explained(api, run["id"], "ImagePullError")
    assert ex["layer"] == "executor" and ex["status"] == "starting"
    assert ex["message"].startswith('Cannot pull image "registry.example.com/team-a/trainer:nope" on node gpu-1: ')
    assert "not found" in ex["message"]
    assert ex["details"]["kubernetes_reason"] in ("ErrImagePull", "ImagePullBackOff")
    # ErrImagePull and ImagePullBackOff alternate in Kubernetes; the timeline records the episode once.
    timeline = (await api.run(run["id"]))["timeline"]
    assert sum(e["reason"] == "ImagePullError" for e in timeline) == 1
    await api.ok("POST", f"runs/{run['id']}/stop")
    await api.wait_status(run["id"], "stopped")


async def test_logs_stream_while_the_pod_prints_and_outlive_it(api: Any, cluster: EmulatedCluster) -> None:
    cluster.add_node("gpu-1", gpus=2)
    run = await api.submit(presets=["single-gpu"], command="echo epoch 1 of $GPUPLAT_RUN_ID; gate g1; echo epoch 2")
    rid = run["id"]
    running = await api.wait_status(rid, "running")
    assert running["started_at"] is not None
    assert (await api.wait_log(rid, "epoch 1")) == f"epoch 1 of {rid}\n".encode()
    # Follow the log as SSE from while the pod still prints until the run ends.
    follow = asyncio.ensure_future(api("GET", f"runs/{rid}/logs"))
    assert (await api.run(rid))["status"] == "running" and not follow.done()
    cluster.open_gate("g1")
    code, streamed = await asyncio.wait_for(follow, 20)
    assert code == 200
    assert streamed.index(b"data: epoch 1") < streamed.index(b"data: epoch 2") < streamed.index(b"event: end")
    done = await api.wait_status(rid, "succeeded")
    assert done["exit_code"] == 0
    # Archived before the end was recorded, and kept after the Job and pod are deleted.
    await wait_for(lambda: _no_objects(cluster, rid), 10, "the finished Job to be cleaned up")
    assert (await api.ok("GET", f"runs/{rid}/logs", format="text")) == f"epoch 1 of {rid}\nepoch 2\n".encode()
    code, body = await api("GET", f"runs/{rid}/logs", follow="false")
    assert code == 200 and b"data: epoch 2" in body and b"event: end" in body
    statuses = [e["status"] for e in done["timeline"]]
    assert statuses.index("starting") < statuses.index("running") < statuses.index("succeeded") == len(statuses) - 1


async def _no_objects(cluster: EmulatedCluster, run_id: str) -> bool:
    jobs, pods = objects_of(cluster, run_id)
    return not jobs and not pods


async def test_stop_removes_the_job_and_its_pods(api: Any, cluster: EmulatedCluster) -> None:
    cluster.add_node("gpu-1", gpus=2)
    run = await api.submit(presets=["single-gpu"], command="echo started; gate never")
    await api.wait_status(run["id"], "running")
    await api.wait_log(run["id"], "started")
    jobs, pods = objects_of(cluster, run["id"])
    assert len(jobs) == 1 and len(pods) == 1
    await api.ok("POST", f"runs/{run['id']}/stop")
    final = await api.wait_status(run["id"], "stopped")
    assert final["message"].startswith("stopped by alice; Job gpuplat-")
    assert objects_of(cluster, run["id"]) == ([], [])
    assert (await api.ok("GET", f"runs/{run['id']}/logs", format="text")) == b"started\n"


async def test_dropped_watch_and_410_lose_no_status_change(api: Any, cluster: EmulatedCluster, platform: Any) -> None:
    cluster.add_node("gpu-1", gpus=2)
    run = await api.submit(presets=["single-gpu"], command="echo one; gate g; echo two; exit 3")
    rid = run["id"]
    await api.wait_status(rid, "running")
    await api.wait_log(rid, "one")
    # The network drops every watch and refuses new ones while the run ends; history is compacted.
    cluster.faults.fail_next(verb="watch", code=503, times=None)
    cluster.faults.drop_watches()
    cluster.open_gate("g")
    cluster.wait_for(lambda: any(c["type"] == "Failed" for c in _job_conditions(cluster, rid)), 10, "the Job to fail")
    assert (await api.run(rid))["status"] == "running"  # the executor has not seen it yet
    cluster.compact()
    cluster.faults.clear()
    final = await api.wait_status(rid, "failed")
    assert final["exit_code"] == 3 and final["reason"] == "Error"
    assert "exited with code 3" in final["message"]
    stats = platform.executor.stats
    assert stats["jobs.expired"] + stats["pods.expired"] >= 1, stats  # resumed with 410, listed again
    assert stats["jobs.list"] >= 2, stats
    assert (await api.ok("GET", f"runs/{rid}/logs", format="text")) == b"one\ntwo\n"  # no line lost or doubled


def _job_conditions(cluster: EmulatedCluster, run_id: str) -> list[dict[str, Any]]:
    jobs, _ = objects_of(cluster, run_id)
    return list((jobs[0].get("status") or {}).get("conditions") or []) if jobs else []


async def test_failures_timeouts_and_preemption_are_explained(api: Any, cluster: EmulatedCluster) -> None:
    cluster.add_node("gpu-1", gpus=4)
    oom = await api.submit(presets=["single-gpu"], command="echo loading; oom")
    slow = await api.submit(presets=["single-gpu"], termination={"timeout_seconds": 1}, command="gate never")
    f = await api.wait_status(oom["id"], "failed")
    assert f["reason"] == "OOMKilled" and f["exit_code"] == 137
    assert "ran out of memory (OOMKilled, exit 137, memory limit 16Gi)" in f["message"]
    t = await api.wait_status(slow["id"], "failed")
    assert t["reason"] == "TimedOut" and "time limit of 1 s" in t["message"]
    assert t["timeline"][-1]["details"]["kubernetes_reason"] == "DeadlineExceeded"

    victim = await api.submit(presets=["single-gpu"], command="echo attempt; gate again")
    await api.wait_status(victim["id"], "running")
    await api.wait_log(victim["id"], "attempt")
    _, pods = objects_of(cluster, victim["id"])
    cluster.preempt(NAMESPACE, pods[0]["metadata"]["name"], by="gpuplat/urgent")
    await explained(api, victim["id"], "Running")

    async def replaced() -> bool:
        tl = (await api.run(victim["id"]))["timeline"]
        reasons = [e["reason"] for e in tl]
        return "Preempted" in reasons and reasons[-1] == "Running"

    await wait_for(replaced, 20, "the preempted run to run again")
    tl = (await api.run(victim["id"]))["timeline"]
    pre = next(e for e in tl if e["reason"] == "Preempted")
    assert pre["status"] == "running" and "preempted by a higher-priority pod" in pre["message"]
    cluster.open_gate("again")
    assert (await api.wait_status(victim["id"], "succeeded"))["exit_code"] == 0
    log = (await api.ok("GET", f"runs/{victim['id']}/logs", format="text")).decode()
    assert log.count("attempt\n") == 2 and "--- gpuplat: next attempt, pod" in log


# -- explanation defects found from outside (issue 8, item 10) ------------------------------------
URGENT = 1_000_000_000  # another team's pod, above every priority class of the platform


async def test_a_preempted_run_whose_replacement_waits_is_held_by_the_executor(
    api: Any, cluster: EmulatedCluster
) -> None:
    cluster.add_node("gpu-1", gpus=1)
    victim = await api.submit(presets=["single-gpu"], command="echo attempt; gate again")
    rid = victim["id"]
    await api.wait_status(rid, "running")
    await api.wait_log(rid, "attempt")
    # A pod outside the platform wants the only GPU; the scheduler preempts ours for it.
    cluster.add_pod("research", "urgent", gpus=1, command="gate release", priority=URGENT)
    _, pods = objects_of(cluster, rid)
    cluster.preempt(NAMESPACE, pods[0]["metadata"]["name"], by="research/urgent")

    # The replacement pod waits for a GPU: the executor holds the run, not "running on devices none".
    ex = await explained(api, rid, "InsufficientGPU")
    assert ex["status"] == "running" and ex["layer"] == "executor", ex
    assert not ex["message"].startswith("running for"), ex
    assert ex["details"]["raw"].startswith("0/1 nodes are available: 1 Insufficient nvidia.com/gpu"), ex
    assert ex["who_can_act"] and all(w["who"] and w["can"] for w in ex["who_can_act"])
    # The wait is start wait: the run clock stands still while the start-wait clock goes on.
    before = (await api.run(rid))["clocks"]

    async def waited_on() -> dict[str, Any] | None:
        c = (await api.run(rid))["clocks"]
        return c if c["start_wait_seconds"] >= before["start_wait_seconds"] + 0.5 else None

    during = await wait_for(waited_on, 10, "the start-wait clock to go on")
    assert during["run_seconds"] == before["run_seconds"], (before, during)

    # The GPU comes back: the replacement runs, and the answer is "running" again.
    cluster.open_gate("release")
    running = await explained(api, rid, "Running")
    assert running["layer"] == "running"
    cluster.open_gate("again")
    done = await api.wait_status(rid, "succeeded")
    reasons = [e["reason"] for e in done["timeline"]]
    # One preemption is one event: not again when the scheduler's Preempted event re-explains the pod.
    assert reasons.count("Preempted") == 1, reasons
    # One wait episode: its events are consecutive, each a different explanation (the wording may
    # sharpen once the preempted pod is gone and only the outside pod holds the GPU), never one twice.
    waits = [i for i, r in enumerate(reasons) if r == "InsufficientGPU"]
    assert waits and waits == list(range(waits[0], waits[-1] + 1)), reasons
    messages = [done["timeline"][i]["message"] for i in waits]
    assert len(set(messages)) == len(messages), messages
    c = done["clocks"]
    assert c["start_wait_seconds"] >= during["start_wait_seconds"]
    total = done["finished_at"] - done["queued_at"]
    assert abs(c["queue_wait_seconds"] + c["start_wait_seconds"] + c["run_seconds"] - total) < 0.01, (c, total)


def clients_clocks(url: str, run_id: str) -> tuple[dict[str, Any], str, dict[str, Any]]:
    """The CLI's `runs show` and a RunMonitor's clocks of one run (sync clients: run in a thread)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert cli_main(["--url", url, "--token", "tok-alice", "runs", "show", run_id]) == 0
    line = next(ln for ln in out.getvalue().splitlines() if ln.startswith("clocks: "))
    shown = dict(part.split(" ") for part in line.removeprefix("clocks: ").split(", "))
    cli = {k: None if v == "None" else float(v) for k, v in shown.items()}
    mon = RunMonitor(run_id, Client(url, "tok-alice"))
    try:
        return cli, mon.timeline.value, mon.clocks
    finally:
        mon.close()


async def test_a_preempted_run_shows_the_same_clocks_in_the_api_the_cli_and_the_widgets(
    api: Any, cluster: EmulatedCluster, jp_serverapp: Any
) -> None:
    """Issue 24: the service computes the clocks once (a wait again after a preemption is start wait);
    the CLI and the widgets render them. The sidebar's part is labextension/test/viewmodel.test.ts."""
    cluster.add_node("gpu-1", gpus=1)
    victim = await api.submit(presets=["single-gpu"], command="echo attempt; gate again")
    rid = victim["id"]
    await api.wait_status(rid, "running")
    await api.wait_log(rid, "attempt")
    assert (await api.run(rid))["clocks"]["ticking"] == "run_seconds"
    cluster.add_pod("research", "urgent", gpus=1, command="gate release", priority=URGENT)
    _, pods = objects_of(cluster, rid)
    cluster.preempt(NAMESPACE, pods[0]["metadata"]["name"], by="research/urgent")
    await explained(api, rid, "InsufficientGPU")
    # Waiting again, still `running`: the phase is the run's, the ticking clock the start wait.
    held = await api.run(rid)
    assert (held["status"], held["phase"], held["clocks"]["ticking"]) == ("running", "run", "start_wait_seconds")
    assert LiveClocks.of(held).ticking == "start_wait_seconds"
    assert [e["phase"] for e in held["timeline"]][:2] == ["dispatch", "dispatch"], held["timeline"]

    async def waited() -> bool:
        c = (await api.run(rid))["clocks"]
        return c["start_wait_seconds"] >= held["clocks"]["start_wait_seconds"] + 2

    await wait_for(waited, 15, "the replacement to wait two seconds")
    cluster.open_gate("release")
    why = await explained(api, rid, "Running")
    # Explain's own words count the run clock too, not the time since the first start (the wait again in it).
    said = float(re.search(r"running for (\d+)s", why["message"])[1])  # type: ignore[index]
    now_run = await api.run(rid)
    assert said <= now_run["clocks"]["run_seconds"] + 1, (why["message"], now_run["clocks"])
    cluster.open_gate("again")
    done = await api.wait_status(rid, "succeeded")
    c = done["clocks"]
    assert done["phase"] == "end" and c["ticking"] is None
    # The wait again is not run time: a client computing from the timestamps would show more.
    assert done["finished_at"] - done["started_at"] - c["run_seconds"] >= 0.5, done
    # The runs list says the same clocks as the record (its rows' clocks see the timeline too).
    [row] = [r for r in (await api.ok("GET", "runs"))["runs"] if r["id"] == rid]
    assert row["clocks"] == c, (row["clocks"], c)

    url = jp_serverapp.connection_url
    cli, timeline_html, widget = await asyncio.to_thread(clients_clocks, url, rid)
    three = {k: c[k] for k in ("queue_wait_seconds", "start_wait_seconds", "run_seconds")}
    assert cli == three, (cli, c)
    assert widget == three, (widget, c)
    assert f"run time <b>{seconds_text(c['run_seconds'])}</b>" in timeline_html, timeline_html
    assert f"start wait <b>{seconds_text(c['start_wait_seconds'])}</b>" in timeline_html, timeline_html


async def test_gpus_held_outside_the_platform_never_make_a_fragmentation_claim(
    api: Any, cluster: EmulatedCluster
) -> None:
    for name in ("gpu-a1", "gpu-a2"):
        cluster.add_node(name, gpus=4)
    # Another namespace's pods hold 3 of the 4 GPUs on each node; the platform does not see them.
    for i in (1, 2):
        cluster.add_pod("research", f"hog-{i}", gpus=3, command="gate never")
    cluster.wait_for(
        lambda: all(p["spec"].get("nodeName") for p in cluster.pods("research")), 10, "the other team's pods placed"
    )
    run = await api.submit(presets=["multi-gpu"], command="echo never")
    ex = await explained(api, run["id"], "InsufficientGPU")
    raw = ex["details"]["raw"]
    assert raw.startswith("0/2 nodes are available: 2 Insufficient nvidia.com/gpu."), raw
    # No count the scheduler contradicts: no "8 GPUs are free", no spread over nodes.
    assert "free but spread" not in ex["message"] and "free_gpus" not in ex["details"]["counts"], ex
    assert "2 of 2 nodes lack free GPUs" in ex["message"], ex
    assert "pods outside the platform" in ex["message"] and "cannot see how many" in ex["message"], ex
    timeline = (await api.run(run["id"]))["timeline"]
    assert "GPUsFragmented" not in [e["reason"] for e in timeline]
    await api.ok("POST", f"runs/{run['id']}/stop")
    await api.wait_status(run["id"], "stopped")
