"""`gpuplat rollout-check` against a real Jupyter server with the local executor (4 declared GPUs).

The pure verdicts (core/rollout.py) are tested directly; the rest talks to a real server
(tests/server.py) through the real client, as an admin (ops) with mallory as the outsider.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from jupyter_gpuplat.cli import rollout
from jupyter_gpuplat.core import rollout as R

from ..conftest import EXAMPLE
from ..flavored import add_flavors
from ..server import ServerProcess


def platform(tmp_path: Path, change: Any = None) -> Path:
    doc = yaml.safe_load(EXAMPLE.read_text())
    if change:
        change(doc)
    path = tmp_path / "platform.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def check(srv: ServerProcess, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any], str]:
    capsys.readouterr()
    rc = rollout.main(
        [
            "--url",
            srv.url,
            "--token",
            "tok-ops",
            "--json",
            *args,
            "--as-outsider-token",
            "tok-mallory",
            "--timeout",
            "15",
        ]
    )
    out, err = capsys.readouterr()
    return rc, json.loads(out), err


def by_check(report: dict[str, Any], project: str = "team-a") -> dict[str, dict[str, Any]]:
    return {r["check"]: r for r in report["results"] if r["project"] == project}


def no_run_left(srv: ServerProcess) -> None:
    left = [r for r in srv.ok("GET", "runs", "ops")["runs"] if r["status"] not in ("succeeded", "failed", "stopped")]
    assert left == [], [(r["id"], r["status"], r["message"]) for r in left]


# ---- pure verdicts -------------------------------------------------------------------
def test_the_binding_limit_and_its_source() -> None:
    q = {"concurrency": 4, "quota": {"gpu": 2}, "max_per_user": None}
    assert R.queue_limit(q, {}, 1) == (2, "gpu_quota 2 (configured)")
    assert R.queue_limit(q, {"concurrency": 1}, 1) == (1, "concurrency 1 (expected)")
    assert R.queue_limit({"quota": {}}, {}, 1) == (
        None,
        "the queue declares no concurrency, GPU quota or per-user limit",
    )
    failed = R.judge_limit("p", "q", 2, "concurrency 2 (expected)", 3, "running", "Running")
    assert failed.result == "fail" and failed.detail == (
        "queue q is not enforcing its limit: concurrency 2 (expected) allows 2 run(s) at once, "
        "but 3 ran and the extra one is running"
    )
    assert R.judge_limit("p", "q", 2, "w", 2, "queued", "QueueConcurrency").result == "pass"
    assert (
        "waits for NoCapacity, not for a queue limit"
        in R.judge_limit("p", "q", 2, "w", 2, "queued", "NoCapacity").detail
    )


def test_an_expectation_other_than_the_config_and_a_reason_of_another_limit_fail() -> None:
    """--expect concurrency 3 on a queue configured at 2 (GPU quota 2): the quota binds, but the run waits
    for concurrency; neither passes as "the limit held"."""
    q = {"concurrency": 2, "quota": {"gpu": 2}, "max_per_user": None}
    expected = {"concurrency": 3}
    assert R.judge_expected("p", "q", q, expected) == R.Result(
        "expected-limits", "p", "fail", "queue q: concurrency 3 expected, 2 configured"
    )
    assert R.judge_expected("p", "q", q, {"concurrency": 2}).result == "pass"
    assert "max_per_user 1 expected, unlimited configured" in R.judge_expected("p", "q", q, {"max_per_user": 1}).detail
    limit, why = R.queue_limit(q, expected, 1)
    assert (limit, why) == (2, "gpu_quota 2 (configured)")
    reasons = R.limit_reasons(q, expected, 1)
    assert reasons == {"QueueQuota"}
    wrong = R.judge_limit("p", "q", limit, why, 2, "queued", "QueueConcurrency", reasons=reasons)
    assert wrong.result == "fail" and wrong.detail == (
        "queue q: the run over gpu_quota 2 (configured) waits for QueueConcurrency, so another limit binds first "
        "(expected QueueQuota)"
    )
    # Tied limits (the example's concurrency 2 and quota 2 GPUs): either reason is the limit.
    assert R.limit_reasons(q, {}, 1) == {"QueueConcurrency", "QueueQuota"}


def test_refusals_must_be_4xx_and_name_the_allowed_values() -> None:
    assert R.judge_refusal("access-queue", "p", "queue", "x", 403, "may use a, b", ["a", "b"]).result == "pass"
    assert R.judge_refusal("access-queue", "p", "queue", "x", 200, "", ["a"]).detail == (
        "queue x is not allowed in p, but a run on it was accepted"
    )
    assert (
        "without naming the allowed queues b"
        in R.judge_refusal("c", "p", "queue", "x", 403, "no: a", ["a", "b"]).detail
    )
    assert R.judge_refusal("c", "p", "queue", "x", 500, "", []).detail == "queue x: the refusal is HTTP 500, not a 4xx"
    assert R.disjoint({"r1": [0, 1], "r2": [1]}) == "GPU 1 is held by both r1 and r2"
    assert R.disjoint({"r1": [0], "r2": [1]}) is None


def test_expectations_are_checked_by_name() -> None:
    exp = R.Expectations.parse({"queues": {"q": {"concurrency": 2}}, "projects": {"p": {"queues": ["q"]}}})
    assert exp.queues == {"q": {"concurrency": 2}} and exp.projects == {"p": {"queues": ["q"]}}
    with pytest.raises(ValueError, match=r"unknown key.s. limits in the expectations file; allowed: queues, projects"):
        R.Expectations.parse({"limits": {}})
    with pytest.raises(ValueError, match=r"queue q: unknown limit.s. cuncurrency; allowed: concurrency"):
        R.Expectations.parse({"queues": {"q": {"cuncurrency": 2}}})
    with pytest.raises(ValueError, match="queue q: concurrency must be a whole number from 1 to 1000, not -1"):
        R.Expectations.parse({"queues": {"q": {"concurrency": -1}}})
    results = [R.Result("a", "p", "pass", "fine"), R.Result("b", "p", "fail", "broken")]
    assert R.exit_code(results) == 1 and R.as_json(results)["failures"] == ["FAIL b [p]: broken"]
    assert R.table(results).splitlines()[2] == "b      p        fail    broken"


# ---- a real server -------------------------------------------------------------------------
def test_the_example_platform_passes_through_the_cli(tmp_path: Path) -> None:
    srv = ServerProcess(tmp_path)
    srv.start()
    try:
        proc = srv.gpuplat(
            "--url", srv.url, "--token", "tok-ops", "rollout-check", "--all", "--as-outsider-token", "tok-mallory",
            "--timeout", "20", check=False,
        )  # fmt: skip
        assert proc.returncode == 0, (proc.stdout, proc.stderr)
        rows = [line.split()[:3] for line in proc.stdout.splitlines()[1:]]
        passed = {(c, p) for c, p, r in rows if r == "pass"}
        for check_ in ("queue-limit", "waiting", "placement", "training", "outputs", "batch", "notebook",
                       "access-queue", "outsider"):  # fmt: skip
            assert {(check_, "team-a"), (check_, "team-b")} <= passed, (check_, proc.stdout)
        assert ("multi-gpu", "team-a") in passed and ("access-preset", "team-b") in passed
        assert "UserLimit" in proc.stdout  # team-b-train's max_per_user 1 is what holds ops's second run
        assert not [r for r in rows if r[0].startswith("flavor:")]  # no queue has flavors: no flavor probe
        assert proc.stderr == ""
        no_run_left(srv)
    finally:
        srv.stop()


def test_a_limit_the_queue_does_not_enforce_and_a_queue_the_project_should_not_have(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Injected by config: the expectations say team-a-train runs at most 2 at once and team-a uses only
    team-a-train and interactive; the platform's config lifts team-a-train's limits (concurrency 10,
    quota 8 GPUs) and lets team-a use team-b-train too. The server itself is unchanged. Its presets
    name no `kind` (a job by default): the job checks still run on them."""

    def loosen(doc: dict[str, Any]) -> None:
        queue = next(q for q in doc["queues"] if q["name"] == "team-a-train")
        queue.update(concurrency=10, quota={"gpu": 8})
        doc["projects"][0]["allowed_queues"].append("team-b-train")
        for preset in doc["presets"]:
            if preset.get("kind") == "job":
                del preset["kind"]

    expect = tmp_path / "expect.yaml"
    expect.write_text(
        yaml.safe_dump(
            {
                "queues": {"team-a-train": {"concurrency": 2}},
                "projects": {"team-a": {"queues": ["team-a-train", "interactive"]}},
            }
        )
    )
    srv = ServerProcess(tmp_path, config_file=platform(tmp_path, loosen))
    srv.start()
    try:
        rc, report, err = check(srv, capsys, "--project", "team-a", "--expect", str(expect))
        assert rc == 1
        got = by_check(report)
        assert got["queue-limit"]["result"] == "fail"
        assert got["queue-limit"]["detail"] == (
            "queue team-a-train is not enforcing its limit: concurrency 2 (expected) allows 2 run(s) at once, "
            "but 3 ran and the extra one is running"
        )
        assert got["allowed-queues"]["detail"] == (
            "project team-a can use queue(s) team-b-train, which it should not "
            "(expected only team-a-train, interactive)"
        )
        assert got["access-queue"]["result"] == "skip"  # every queue is open to team-a now
        assert {"training", "outputs", "batch", "notebook", "outsider"} <= {
            c for c, r in got.items() if r["result"] == "pass"
        }
        assert err == ""  # --json: the failures are in the report
        assert got["expected-limits"]["detail"] == "queue team-a-train: concurrency 2 expected, 10 configured"
        assert report["failures"] == [
            f"FAIL expected-limits [team-a]: {got['expected-limits']['detail']}",
            f"FAIL queue-limit [team-a]: {got['queue-limit']['detail']}",
            f"FAIL allowed-queues [team-a]: {got['allowed-queues']['detail']}",
        ]
        no_run_left(srv)
    finally:
        srv.stop()


def test_bad_arguments_are_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "expect.yaml"
    bad.write_text("queues: {q: {concurrency: 0}}\n")
    assert rollout.main(["--all", "--expect", str(bad)]) == 2
    assert "queue q: concurrency must be a whole number from 1 to 1000, not 0" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        rollout.main(["--json"])  # --project or --all
    assert "one of the arguments --project --all is required" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        rollout.main(["--projcet", "team-a"])
    assert "unrecognized argument --projcet; did you mean --project?" in capsys.readouterr().err


def test_each_connection_must_reach_a_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """team-a may use a volume and a Secret that exist on this machine, and one whose file is gone."""
    (tmp_path / "datasets").mkdir()
    (tmp_path / "hf.env").write_text("token=hf-secret-value\n")

    def connect(doc: dict[str, Any]) -> None:
        doc["connections"] = [
            {"name": "datasets", "kind": "volume", "host_path": str(tmp_path / "datasets"), "mount_path": "/data",
             "projects": ["team-a"]},
            {"name": "hf-token", "kind": "secret", "secret": "hf", "env": {"HF_TOKEN": "token"},
             "local_file": str(tmp_path / "hf.env"), "projects": ["team-a"]},
            {"name": "gone", "kind": "secret", "secret": "gone", "env": {"GONE": "key"},
             "local_file": str(tmp_path / "gone.env"), "projects": ["team-a"]},
            {"name": "b-only", "kind": "volume", "host_path": str(tmp_path), "mount_path": "/b",
             "projects": ["team-b"]},
        ]  # fmt: skip

    srv = ServerProcess(tmp_path, config_file=platform(tmp_path, connect))
    srv.start()
    try:
        rc, report, _ = check(srv, capsys, "--project", "team-a")
        assert rc == 1
        got = by_check(report)
        assert got["connection:datasets"]["result"] == "pass", got["connection:datasets"]
        assert got["connection:hf-token"]["result"] == "pass", got["connection:hf-token"]
        assert "connection:b-only" not in got  # team-a may not use it: not probed for team-a
        gone = got["connection:gone"]
        assert gone["result"] == "fail" and "naming connection gone is failed" in gone["detail"]
        assert "gone.env" in gone["detail"]  # the launch's own reason: the file it could not read
        assert report["failures"] == [f"FAIL connection:gone [team-a]: {gone['detail']}"]
        assert "hf-secret-value" not in json.dumps(report)
        no_run_left(srv)
    finally:
        srv.stop()


def test_a_connection_that_does_not_provide_what_it_says_is_named() -> None:
    from jupyter_gpuplat.core.connections import ConnectionConfig

    conn = ConnectionConfig.model_validate({"name": "s3", "kind": "bucket", "endpoint": "https://s3", "secret": "c"})
    assert R.connection_probe(conn)["env"] == [
        "AWS_ENDPOINT_URL", "GPUPLAT_CONNECTION_S3", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
    ]  # fmt: skip
    said = "rollout connection missing: env AWS_SECRET_ACCESS_KEY\n"
    r = R.judge_connection("p", "s3", "r-1", "failed", said, "failed, Error: exit 1")
    assert (r.result, r.detail) == ("fail", "run r-1: connection s3 did not reach the run: env AWS_SECRET_ACCESS_KEY")
    r = R.judge_connection("p", "s3", "r-1", "dispatched", "", 'dispatched, ConfigError: secret "c" not found')
    assert r.detail == 'run r-1 naming connection s3 is dispatched: dispatched, ConfigError: secret "c" not found'
    assert R.judge_connection("p", "s3", "r-1", "succeeded", "rollout connection ok\n", "").result == "pass"


# ---- flavors ---------------------------------------------------------------------------------
def typed(quotas: dict[str, int]) -> Any:
    """Declared typed devices (h100: 0-1, a100: 2-5) and a queue `typed` of team-a offering `quotas` in order."""

    def change(doc: dict[str, Any]) -> None:
        add_flavors(doc, quotas, [doc["projects"][0]["name"]])

    return change


def probes(srv: ServerProcess) -> dict[str, dict[str, Any]]:
    """The flavor probes' records by the flavor they asked for."""
    runs = srv.ok("GET", "runs", "ops")["runs"]
    return {r["name"].removeprefix("rollout-flavor-"): r for r in runs if r["name"].startswith("rollout-flavor-")}


def test_one_probe_per_flavor_runs_on_that_flavor(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    srv = ServerProcess(tmp_path, gpus=6, config_file=platform(tmp_path, typed({"h100": 2, "a100": 4})))
    srv.start()
    try:
        rc, report, _ = check(srv, capsys, "--project", "team-a")
        got = by_check(report)
        assert rc == 0, report["failures"]
        h100, a100 = got["flavor:h100"], got["flavor:a100"]
        assert h100["result"] == a100["result"] == "pass", (h100, a100)
        assert h100["detail"].startswith("flavor h100 on queue typed: probe ") and h100["detail"].endswith(
            "ran on h100 (GPU(s) 0)"
        )
        assert a100["detail"].endswith("ran on a100 (GPU(s) 2)")  # asked for a100: not the free h100s
        records = probes(srv)
        assert {f: (r["flavor"], r["queue"]) for f, r in records.items()} == {
            "h100": ("h100", "typed"),
            "a100": ("a100", "typed"),
        }
        assert [r["check"] for r in report["results"] if r["check"].startswith("flavor:")] == [
            "flavor:h100",
            "flavor:a100",
        ]  # the queue's order
        no_run_left(srv)
    finally:
        srv.stop()


def test_a_flavor_the_project_cannot_start_on_fails_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """a100's quota in team-a's only flavored queue is 0: no probe can start on it; h100 still passes."""
    srv = ServerProcess(tmp_path, gpus=6, config_file=platform(tmp_path, typed({"h100": 2, "a100": 0})))
    srv.start()
    try:
        rc, report, _ = check(srv, capsys, "--project", "team-a")
        got = by_check(report)
        assert rc == 1
        assert got["flavor:h100"]["result"] == "pass", got["flavor:h100"]
        a100 = got["flavor:a100"]
        assert (a100["result"], a100["detail"]) == (
            "fail",
            "flavor a100 on queue typed: its quota there is 0 GPUs, so no run can start on it "
            "(no queue of team-a gives it any)",
        )
        assert report["failures"] == [f"FAIL flavor:a100 [team-a]: {a100['detail']}"]
        assert "a100" not in probes(srv)
        no_run_left(srv)
    finally:
        srv.stop()


def test_a_flavor_held_by_others_fails_with_its_own_wait(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """bob's two runs hold typed's h100 quota: the h100 probe waits and fails with explain's h100 entry,
    while the a100 probe (the same queue, free there) passes."""
    srv = ServerProcess(tmp_path, gpus=6, config_file=platform(tmp_path, typed({"h100": 2, "a100": 4})))
    srv.start()
    held = [
        srv.ok(
            "POST", "runs", "bob",
            {"project": "team-a", "queue": "typed", "command": "sleep 600", "resources": {"gpu": 1},
             "placement": {"gpu_type": "h100"}},
        )["id"]
        for _ in range(2)
    ]  # fmt: skip
    try:
        rc, report, _ = check(srv, capsys, "--project", "team-a")
        got = by_check(report)
        assert rc == 1
        assert got["flavor:a100"]["result"] == "pass", got["flavor:a100"]
        h100 = got["flavor:h100"]
        assert h100["result"] == "fail"
        assert h100["detail"].startswith("flavor h100 on queue typed: probe "), h100
        assert h100["detail"].endswith(
            " did not start (queued): QueueQuota: h100: 2/2 in use (1 more needed) (queue typed's h100 quota) "
            f"(held by {', '.join(held)})"
        ), h100
        assert {r["status"] for r in probes(srv).values()} == {"stopped"}  # the check stopped its own probes
    finally:
        srv.stop_all_runs()  # bob's
        srv.stop()


def test_flavor_probes_pick_a_queue_where_the_flavor_can_run() -> None:
    queues = {
        "a": {"flavors": [{"name": "h100", "quota": {"gpu": 0}}, {"name": "a100", "quota": {"gpu": 2}}]},
        "b": {"flavors": [{"name": "h100", "quota": {"gpu": 1}}, {"name": "l4", "quota": {"gpu": 1}}]},
        "c": {"paused": True, "flavors": [{"name": "t4", "quota": {"gpu": 1}}]},
        "plain": {"quota": {"gpu": 2}, "flavors": []},
    }
    P = R.FlavorProbe
    assert R.flavor_probes(["plain", "b", "a", "c"], "a", queues) == [
        P("h100", "b", 1),  # a's h100 is 0: b's, where the project may run it
        P("a100", "a", 2),
        P("l4", "b", 1),
        P("t4", "c", 1, paused=True),
    ]
    assert R.flavor_probes(["a"], None, queues)[0] == P("h100", "a", 0)
    assert R.flavor_probes(["plain"], "plain", queues) == []  # no flavors: no probe, no line
    assert R.judge_flavor_quota("p", P("h100", "a", 0)) == R.Result(
        "flavor:h100", "p", "fail", "flavor h100 on queue a: its quota there is 0 GPUs, so no run can start on it "
        "(no queue of p gives it any)"
    )  # fmt: skip


def test_a_probe_must_land_on_its_flavor() -> None:
    typed_devices = {0: "h100", 1: "h100", 2: "a100", 3: None}
    assert R.placed_on("h100", [1], typed_devices, None, None, {}) == (None, "GPU(s) 1")
    assert R.placed_on("h100", [1, 2, 3], typed_devices, None, None, {}) == (
        "GPU 2 is a100; GPU 3 is of no flavor",
        "GPU(s) 1, 2, 3",
    )
    want = {"nvidia.com/gpu.product": "H100"}
    assert R.placed_on("h100", [], {}, "n1", want, want) == (None, "node n1 (nvidia.com/gpu.product=H100)")
    assert R.placed_on("h100", [], {}, "n2", {"nvidia.com/gpu.product": "A100"}, want) == (
        "node n2 lacks flavor h100's label(s) nvidia.com/gpu.product=H100",
        "node n2",
    )
    assert R.placed_on("h100", [], {}, "n3", None, want) == (
        None,
        "node n3; its labels are not reported (the server cannot read nodes)",
    )  # the record's flavor alone is checked then, and the detail says so
    probe = R.FlavorProbe("h100", "q", 2)
    wrong = R.judge_flavor("p", probe, "r-1", "running", "a100", None, "GPU(s) 2", "")
    assert wrong.detail == "flavor h100 on queue q: probe r-1 was admitted on flavor a100"
    off = R.judge_flavor("p", probe, "r-1", "running", "h100", "GPU 2 is a100", "GPU(s) 2", "")
    assert (off.result, off.detail) == ("fail", "flavor h100 on queue q: probe r-1 did not land on h100: GPU 2 is a100")
    ex = {
        "reason": "QueueQuota",
        "message": "h100: 2/2 in use",
        "flavors": [
            {"name": "a100", "reason": "Admissible", "message": "fits"},
            {"name": "h100", "reason": "QueueQuota", "message": "h100: 2/2 in use",
             "blockers": [{"id": "r-7", "project": "p"}, {"id": None, "project": "q"}]},
        ],
    }  # fmt: skip
    assert R.flavor_wait(ex, "h100") == "QueueQuota: h100: 2/2 in use (held by r-7, a run of q)"
    assert R.flavor_wait({"reason": "InsufficientGPU", "message": "no room", "details": {"raw": "0/3"}}, "h100") == (
        "InsufficientGPU: no room (scheduler: 0/3)"
    )
