"""Submission, admission, explain, stop and access control through the REST API."""

from __future__ import annotations

import itertools
import sys
from pathlib import Path
from typing import Any

from jupyter_gpuplat.core.status import Status, can_transition

PY = sys.executable


def gated(gate: Path, extra: str = "") -> list[str]:
    """A run that prints its devices, then waits until the test creates `gate`."""
    code = (
        "import os, pathlib, time\n"
        f"{extra}\n"
        "print('devices', os.environ.get('CUDA_VISIBLE_DEVICES'), flush=True)\n"
        f"while not pathlib.Path({str(gate)!r}).exists(): time.sleep(0.02)\n"
        "print('done', flush=True)\n"
    )
    return [PY, "-c", code]


async def test_queue_concurrency_admission_explain_and_order(api: Any, tmp_path: Path) -> None:
    gates = [tmp_path / f"go{i}" for i in range(4)]
    runs = [await api.submit(name=f"r{i}", presets=["single-gpu"], command=gated(g)) for i, g in enumerate(gates)]
    assert all(r["queue"] == "team-a-train" and r["status"] == "queued" for r in runs)
    ids = [r["id"] for r in runs]
    await api.wait_status(ids[0], "running")
    await api.wait_status(ids[1], "running")

    third = await api.ok("GET", f"runs/{ids[2]}/explain")
    assert third["layer"] == "queue"
    assert third["reason"] == "QueueConcurrency"
    assert "2/2" in third["message"]
    assert third["position"] == 1
    assert sorted(b["id"] for b in third["blockers"]) == sorted(ids[:2])
    assert third["numbers"] == {"used": 2, "limit": 2}
    assert any("raise the concurrency" in w["can"] for w in third["who_can_act"])
    fourth = await api.ok("GET", f"runs/{ids[3]}/explain")
    assert fourth["position"] == 2 and fourth["reason"] == "QueueConcurrency"
    # The wait reason was recorded on the timeline when the run started waiting.
    tl = (await api.run(ids[2]))["timeline"]
    assert [e["reason"] for e in tl if e["status"] == "queued"][-1] == "QueueConcurrency"

    for i, g in enumerate(gates):
        g.touch()
        await api.wait_status(ids[i], "succeeded")
    done = [await api.run(i) for i in ids]
    assert [r["exit_code"] for r in done] == [0, 0, 0, 0]
    dispatched = [r["dispatched_at"] for r in done]
    assert dispatched == sorted(dispatched), "waiting runs are dispatched in submission order"
    for r in done:
        assert len(r["devices"]) == 1
        log = await api.ok("GET", f"runs/{r['id']}/logs", format="text")
        assert f"devices {r['devices'][0]}" in log.decode()
    for a in done:
        for b in done:
            overlap = a["id"] != b["id"] and a["started_at"] < b["finished_at"] and b["started_at"] < a["finished_at"]
            if overlap:
                assert not set(a["devices"]) & set(b["devices"]), (a, b)
    assert [c["queue_wait_seconds"] is not None for c in (r["clocks"] for r in done)] == [True] * 4
    for r in done:
        steps = [Status(e["status"]) for e in r["timeline"]]
        assert all(can_transition(a, b) for a, b in itertools.pairwise(steps)), steps


async def test_request_above_queue_quota_is_refused_before_it_exists(api: Any) -> None:
    code, body = await api("POST", "runs", body={"project": "team-a", "command": "true", "resources": {"gpu": 3}})
    assert code == 422
    assert body["error"]["code"] == "ExceedsQueueQuota"
    assert "team-a-train" in body["error"]["message"] and "quota of 2 gpu" in body["error"]["message"]
    assert (await api.ok("GET", "runs"))["runs"] == []


async def test_disallowed_queue_and_preset_are_refused_with_the_allowed_lists(api: Any) -> None:
    code, body = await api("POST", "runs", body={"project": "team-a", "command": "true", "queue": "team-b-train"})
    assert code == 403 and body["error"]["code"] == "QueueNotAllowed"
    assert body["error"]["hint"] == "allowed queues: team-a-train, interactive"
    code, body = await api("POST", "runs", "erin", {"project": "team-b", "command": "true", "presets": ["multi-gpu"]})
    assert code == 403 and body["error"]["code"] == "PresetNotAllowed"
    assert body["error"]["hint"] == "allowed presets: single-gpu, notebook (or drop preset multi-gpu)"
    code, body = await api("POST", "runs", body={"project": "team-a", "command": "true", "presets": ["nope"]})
    assert code == 422 and body["error"]["code"] == "UnknownPreset"
    code, body = await api(
        "POST", "runs", body={"project": "team-a", "command": "true", "presets": ["notebook"], "queue": "team-a-train"}
    )
    assert (
        code == 403
        and body["error"]["code"] == "FieldLocked"
        and "queue is locked by preset:notebook" in (body["error"]["message"])
    )
    assert (await api.ok("GET", "runs", "ops"))["runs"] == []


async def test_roles_and_project_isolation(api: Any, tmp_path: Path) -> None:
    code, body = await api("POST", "runs", "carol", {"project": "team-a", "command": "true"})
    assert code == 403 and "viewer" in body["error"]["message"]
    gate = tmp_path / "go"
    run = await api.submit("bob", name="secret", command=gated(gate, "open('out.txt','w').write('weights')"))
    await api.wait_status(run["id"], "running", user="bob")
    await api.wait_log(run["id"], "devices", user="bob")
    # carol (viewer, same project) can read; dave (other project) sees nothing.
    assert (await api.run(run["id"], "carol"))["name"] == "secret"
    for path in (
        f"runs/{run['id']}",
        f"runs/{run['id']}/logs",
        f"runs/{run['id']}/outputs",
        f"runs/{run['id']}/outputs/out.txt",
        f"runs/{run['id']}/explain",
    ):
        code, body = await api("GET", path, "dave", follow="false")
        assert code == 404, path
        assert body["error"]["message"] == f"run {run['id']!r} not found"
    code, _ = await api("POST", f"runs/{run['id']}/stop", "dave")
    assert code == 404
    assert (await api.ok("GET", "runs", "dave"))["runs"] == []
    code, body = await api("GET", "runs", "dave", project="team-a")
    assert code == 404
    # another member cannot stop bob's run; the project admin can.
    code, body = await api("POST", f"runs/{run['id']}/stop", "carol")
    assert code == 403
    stopped = await api.ok("POST", f"runs/{run['id']}/stop", "alice")
    assert stopped["status"] in ("stopping", "stopped")
    final = await api.wait_status(run["id"], "stopped", user="bob")
    assert "stopped by alice" in final["message"]
    outs = await api.ok("GET", f"runs/{run['id']}/outputs", "carol")
    assert "out.txt" in [o["path"] for o in outs["outputs"]]
    code, data = await api("GET", f"runs/{run['id']}/outputs/out.txt", "carol")
    assert code == 200 and data == b"weights"
    code, body = await api("GET", f"runs/{run['id']}/outputs/../../gpuplat.db", "carol")
    assert code in (400, 404)


async def test_stop_queued_and_running(api: Any, tmp_path: Path) -> None:
    gate = tmp_path / "never"
    a = await api.submit(presets=["multi-gpu"], command=gated(gate))
    b = await api.submit(presets=["single-gpu"], command=gated(gate))
    await api.wait_status(a["id"], "running")
    ex = await api.ok("GET", f"runs/{b['id']}/explain")
    assert ex["reason"] == "QueueQuota" and "2/2 in use" in ex["message"]
    stopped = await api.ok("POST", f"runs/{b['id']}/stop")
    assert stopped["status"] == "stopped" and stopped["dispatched_at"] is None
    assert stopped["timeline"][-1]["message"] == "stopped by alice before dispatch"
    await api.ok("POST", f"runs/{a['id']}/stop")
    final = await api.wait_status(a["id"], "stopped")
    statuses = [e["status"] for e in final["timeline"]]
    assert statuses[:2] == ["created", "queued"] and statuses[-2:] == ["stopping", "stopped"]
    code, body = await api("POST", f"runs/{a['id']}/stop")
    assert code == 409 and "already ended" in body["error"]["message"]


async def test_failure_exit_code_and_reason(api: Any) -> None:
    run = await api.submit(command="echo boom >&2; exit 3")
    final = await api.wait_status(run["id"], "failed")
    assert final["exit_code"] == 3 and final["reason"] == "Error" and "exited with code 3" in final["message"]
    log = await api.ok("GET", f"runs/{run['id']}/logs", format="text")
    assert b"boom" in log
    ex = await api.ok("GET", f"runs/{run['id']}/explain")
    assert ex["layer"] == "done" and ex["reason"] == "Error"
    # The line names its action; the run's `actions` say who may take it (the sidebar's button needs both).
    assert ex["who_can_act"] == [{"who": "alice", "can": "submit it again", "action": "resubmit"}]
    assert "resubmit" in final["actions"]
    assert "resubmit" not in (await api.ok("GET", f"runs/{run['id']}", "carol"))["actions"]


async def test_preview_shows_provenance_and_verdict(api: Any) -> None:
    body = {"project": "team-a", "command": ["python", "train.py"], "presets": ["multi-gpu"], "env": {"LR": "0.1"}}
    p = await api.ok("POST", "runs/preview", body=body)
    assert p["verdict"] == {"allowed": True, "violations": [], "rules": [], "alternatives": []}
    assert p["resolved"]["queue"] == "team-a-train"
    assert p["resolved"]["resources"] == {"cpu": "8", "memory": "64Gi", "gpu": 2}
    prov = p["provenance"]
    assert prov["queue"] == "project:team-a"
    assert prov["resources.gpu"] == "preset:multi-gpu"
    assert prov["env[HF_HOME]"] == "org"
    assert prov["env[NCCL_DEBUG]"] == "preset:multi-gpu"
    assert prov["env[LR]"] == "run"
    assert prov["termination.timeout_seconds"] == "preset:multi-gpu"
    assert p["layers"] == ["org", "project:team-a", "preset:multi-gpu", "run"]
    assert p["locks"] == {}  # multi-gpu locks nothing
    # Issue 24: the preview says what is locked and by which layer; clients need not read the presets.
    session = await api.ok("POST", "runs/preview", body={"project": "team-a", "presets": ["notebook"]})
    assert session["locks"] == {"queue": "preset:notebook"}, session["locks"]
    bad = await api.ok("POST", "runs/preview", body={**body, "queue": "team-b-train"})
    assert bad["verdict"]["allowed"] is False
    assert bad["verdict"]["violations"][0]["code"] == "QueueNotAllowed"
    assert (await api.ok("GET", "runs"))["runs"] == []


async def test_bad_input_is_refused_clearly_and_creates_nothing(api: Any) -> None:
    cases = [
        (b"{not json", 400, "malformed JSON"),
        (b"[1,2]", 400, "must be a JSON object"),
        (b'{"project": "team-a", "command": "true", "colour": "red"}', 400, "colour: unknown field"),
        (b'{"project": "team-a", "command": "true", "resources": {"gpu": -1}}', 400, "resources.gpu: must be >= 0"),
        (
            b'{"project": "team-a", "command": "true", "resources": {"gpu": 100000}}',
            400,
            "resources.gpu: must be <= 1024",
        ),
        (b'{"project": "team-a", "command": "true", "resources": {"memory": "12 parsecs"}}', 400, "invalid memory"),
        (b'{"project": "team-a", "command": "true", "resources": {"cpu": "-2"}}', 400, "cpu"),
        (b'{"project": "team-a"}', 400, "give exactly one of command"),
        (b'{"project": "team-a", "command": "true", "script": "a.py"}', 400, "give exactly one of command"),
        (b'{"project": "team-a", "script": "../../etc/passwd.py"}', 400, "is not a file under the Jupyter root"),
        (b'{"project": "team-a", "script": "notes.txt"}', 400, "must be a .py or .ipynb file"),
        (b'{"project": "team-a", "command": []}', 400, "command: "),
        (b'{"project": "nope", "command": "true"}', 404, "project 'nope' not found"),
        (b'{"project": "team-a", "command": "true", "queue": "nope"}', 422, "unknown queue 'nope'"),
        (b'{"project": "team-a", "command": "true", "name": "' + b"x" * 500 + b'"}', 400, "name: is too long"),
        (b'{"project": "team-a", "command": "true", "resources": {"gpu": 8}}', 422, "quota"),
    ]
    for raw, code, text in cases:
        got, body = await api("POST", "runs", raw=raw)
        assert got == code, (raw[:60], got, body)
        assert text in body["error"]["message"], (text, body)
        assert body["error"]["code"] and "hint" in body["error"]
    got, body = await api("GET", "runs", status="bogus")
    assert got == 400 and "unknown status" in body["error"]["message"]
    got, body = await api("GET", "runs", limit="abc")
    assert got == 400
    assert (await api.ok("GET", "runs", "ops"))["runs"] == []


async def test_whoami_queues_presets_projects_capacity_openapi(api: Any, tmp_path: Path) -> None:
    me = await api.ok("GET", "whoami", "bob")
    assert me == {
        "user": "bob",
        "groups": [],
        "platform_admin": False,
        "projects": [{"name": "team-a", "role": "member", "may_submit": True}],
    }
    assert (await api.ok("GET", "whoami", "ops"))["platform_admin"] is True
    # A viewer sees the project and is told, by the server, that it may not submit there.
    assert (await api.ok("GET", "whoami", "carol"))["projects"] == [
        {"name": "team-a", "role": "viewer", "may_submit": False}
    ]
    qs = await api.ok("GET", "queues", "erin")
    assert [q["name"] for q in qs["queues"]] == ["interactive", "team-b-train"]  # dispatch order
    gate = tmp_path / "g"
    run = await api.submit("bob", presets=["single-gpu"], command=gated(gate))
    await api.wait_status(run["id"], "running")
    q = next(q for q in (await api.ok("GET", "queues"))["queues"] if q["name"] == "team-a-train")
    assert q["usage"]["runs"] == 1 and q["usage"]["gpu"] == 1 and q["quota"]["gpu"] == 2 and q["pending"] == 0
    presets = await api.ok("GET", "presets", "erin", project="team-b")
    assert [p["name"] for p in presets["presets"]] == ["single-gpu", "notebook"]
    code, _ = await api("GET", "presets", "erin", project="team-a")
    assert code == 404
    projects = await api.ok("GET", "projects", "erin")
    assert [p["name"] for p in projects["projects"]] == ["team-b"]
    cap = await api.ok("GET", "capacity")
    assert cap["gpus"] == 4 and all(d["declared"] for d in cap["devices"])
    assert [d["in_use"] for d in cap["devices"]].count(True) == 1
    spec = await api.ok("GET", "openapi.json")
    assert "/gpuplat/api/runs" in spec["paths"] and "RunRequest" in spec["components"]["schemas"]
    gate.touch()
    await api.wait_status(run["id"], "succeeded")


async def test_unauthenticated_requests_are_refused(jp_fetch: Any, platform: Any) -> None:
    resp = await jp_fetch("gpuplat", "api", "whoami", headers={"Authorization": ""}, raise_error=False)
    assert resp.code == 403


async def test_script_relative_to_the_jupyter_root(api: Any, jp_root_dir: Path) -> None:
    (jp_root_dir / "exp").mkdir()
    (jp_root_dir / "exp" / "train.py").write_text("import sys; print('args', sys.argv[1:])")
    run = await api.submit(script="exp/train.py", args=["--lr", "0.1"], presets=["single-gpu"])
    done = await api.wait_status(run["id"], "succeeded")
    assert done["name"] == "train.py"
    assert done["command"][1:] == [str(jp_root_dir / "exp" / "train.py"), "--lr", "0.1"]
    assert b"args ['--lr', '0.1']" in await api.ok("GET", f"runs/{run['id']}/logs", format="text")


async def test_list_filters_and_pagination(api: Any) -> None:
    ids = [(await api.submit(name=f"job-{i}", command="true"))["id"] for i in range(5)]
    for i in ids:
        await api.wait_status(i, "succeeded")
    page1 = await api.ok("GET", "runs", limit="2")
    assert [r["id"] for r in page1["runs"]] == ids[::-1][:2]
    page2 = await api.ok("GET", "runs", limit="2", before=str(page1["next_before"]))
    assert [r["id"] for r in page2["runs"]] == ids[::-1][2:4]
    found = await api.ok("GET", "runs", q="job-3")
    assert [r["id"] for r in found["runs"]] == [ids[3]]
    assert len((await api.ok("GET", "runs", status="succeeded,failed"))["runs"]) == 5
    assert (await api.ok("GET", "runs", status="queued"))["runs"] == []
    # by phase, as the sidebar's filter asks (it holds no status lists): a phase is its statuses
    assert len((await api.ok("GET", "runs", phase="end"))["runs"]) == 5
    assert (await api.ok("GET", "runs", phase="dispatch,execution,run"))["runs"] == []
    assert len((await api.ok("GET", "runs", phase="end", status="succeeded,queued"))["runs"]) == 5
    assert (await api.ok("GET", "runs", phase="run", status="succeeded"))["runs"] == []
    got, body = await api("GET", "runs", phase="waiting")
    assert got == 400 and "unknown phase" in body["error"]["message"]
    # each row names the presets the run asked for (the sidebar shows them)
    assert found["runs"][0]["presets"] == []
    with_preset = await api.submit(name="pre", command="true", presets=["single-gpu"])
    assert with_preset["presets"] == ["single-gpu"]
    assert (await api.ok("GET", "runs", q="pre"))["runs"][0]["presets"] == ["single-gpu"]
    assert (await api.run(with_preset["id"]))["presets"] == ["single-gpu"]
    await api.wait_status(with_preset["id"], "succeeded")


async def test_explain_names_blockers_only_of_the_callers_projects(api: Any, tmp_path: Path) -> None:
    # ops (platform admin) waits behind erin's team-b run in the shared interactive queue;
    # bob (team-a) may see ops's team-a run, but not who holds team-b's GPUs.
    gate = tmp_path / "g"
    cmd = ["sh", "-c", f"while [ ! -e {gate} ]; do sleep 0.02; done"]
    holder = await api.submit("erin", project="team-b", command=cmd, queue="interactive", resources={"gpu": 2})
    await api.wait_status(holder["id"], "running", user="erin")
    waiting = await api.submit("ops", project="team-a", command="true", queue="interactive", resources={"gpu": 1})
    as_ops = await api.ok("GET", f"runs/{waiting['id']}/explain", "ops")
    as_bob = await api.ok("GET", f"runs/{waiting['id']}/explain", "bob")
    assert as_ops["reason"] == as_bob["reason"] == "QueueQuota"
    assert [b["id"] for b in as_ops["blockers"]] == [holder["id"]]  # ops sees every project
    assert [(b["id"], b["name"], b["user"], b["project"]) for b in as_bob["blockers"]] == [(None, None, None, "team-b")]
    gate.touch()
    await api.wait_status(waiting["id"], "succeeded", user="ops")


async def test_preview_says_the_working_dir_the_cpu_only_note_and_the_wait(api: Any, tmp_path: Path) -> None:
    # The dialog and the magic render these; the service makes them once (issue 23).
    body = {"project": "team-a", "command": "true", "working_dir": "."}
    cpu = await api.ok("POST", "runs/preview", body=body)
    assert cpu["working_dir"] and cpu["working_dir"].startswith("/")  # absolute, inside the root
    assert cpu["notes"] and "runs on CPU only" in cpu["notes"][0]
    assert cpu["waits"] is None  # nothing holds it: it starts on the next cycle
    made = await api.ok("POST", "runs", body=body)
    assert made["notes"] == cpu["notes"]  # POST runs carries the same note (%%gpu_submit prints it)
    gate = tmp_path / "go"
    holders = [await api.submit(name=f"h{i}", presets=["single-gpu"], command=gated(gate)) for i in range(2)]
    for h in holders:
        await api.wait_status(h["id"], "running")
    p = await api.ok("POST", "runs/preview", body={"project": "team-a", "command": "true", "presets": ["single-gpu"]})
    assert p["notes"] == []
    assert p["waits"]["reason"] == "QueueConcurrency" and "2/2" in p["waits"]["message"]
    assert p["waits"]["position"] == 1
    assert [r["id"] for r in (await api.ok("GET", "runs", status="queued"))["runs"]] == []  # the probe left nothing
    gate.touch()
    for h in holders:
        await api.wait_status(h["id"], "succeeded")
