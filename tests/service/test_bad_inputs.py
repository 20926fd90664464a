"""Bad input never gets a 5xx: a refusal in the error shape naming what was wrong, and nothing changes.

First one named regression test per defect of issue 9 (items 3-9), then the table: bad bodies for
every writing endpoint and bad values for every query parameter of the reading ones.
"""

from __future__ import annotations

import math
import re
import sys
from dataclasses import dataclass, replace
from typing import Any

import pytest
from pydantic import ValidationError

from jupyter_gpuplat.core.request import RunRequest
from jupyter_gpuplat.service.openapi import API, openapi_document, openapi_path
from jupyter_gpuplat.service.routes import ROUTES

from ..conftest import Http, assert_refused
from ..waiting import wait_for

RUN = {"project": "team-a", "command": "true"}


async def run_count(http: Http) -> int:
    code, _, data = await http("GET", "runs", user="ops", params={"limit": "1000"})
    assert code == 200, data
    return len(data["runs"])


async def finished_run_with_log(http: Http, text: str = "hello") -> str:
    code, _, run = await http("POST", "runs", body={**RUN, "command": [sys.executable, "-c", f"print({text!r})"]})
    assert code == 201, run

    async def done() -> bool:
        _, _, r = await http("GET", f"runs/{run['id']}")
        return r["status"] == "succeeded"

    await wait_for(done, 20, "the run to succeed")
    return str(run["id"])


# ---- one regression test per defect (issue 9, items 3-9) --------------------------------------


async def test_non_finite_params_are_refused_and_the_run_list_keeps_working(jp_fetch: Any) -> None:
    http = Http(jp_fetch)
    for raw in (b'{"lr": NaN}', b'{"lr": Infinity}', b'{"lr": -Infinity}', b'{"lr": 1e400}'):
        body = b'{"project": "team-a", "command": "true", "params": ' + raw + b"}"
        for path in ("runs", "runs/preview"):
            code, _, data = await http("POST", path, raw=body)
            assert_refused(code, data, "params.lr", "finite")
    code, _, data = await http("GET", "runs")
    assert code == 200 and data["runs"] == [], data


async def test_oversized_quantities_are_refused_naming_the_field(jp_fetch: Any) -> None:
    http = Http(jp_fetch)
    for resources, field in (
        ({"cpu": 1e308}, "resources.cpu"),
        ({"cpu": "9" * 400}, "resources.cpu"),
        ({"memory": "9" * 400 + "Gi"}, "resources.memory"),
        ({"memory": 10**400}, "resources.memory"),
    ):
        for path in ("runs", "runs/preview"):
            code, _, data = await http("POST", path, body={**RUN, "resources": resources})
            assert_refused(code, data, field)
    code, _, data = await http("PUT", "queues/q1", user="ops", body={"name": "q1", "quota": {"cpu": 1e308}})
    assert_refused(code, data, "quota.cpu")
    code, _, data = await http("PUT", "presets/p1", user="ops", body={"name": "p1", "resources": {"memory": "9" * 400}})
    assert_refused(code, data, "resources.memory")
    code, _, data = await http("PUT", "config", user="ops", body={"queues": [{"name": "q1", "quota": {"cpu": 1e308}}]})
    assert_refused(code, data, "queues[0].quota.cpu")
    assert await run_count(http) == 0


async def test_deeply_nested_json_is_refused_naming_the_depth_limit(jp_fetch: Any) -> None:
    http = Http(jp_fetch)
    for path, method in (("runs", "POST"), ("runs/preview", "POST"), ("config", "PUT"), ("queues/q1", "PUT")):
        code, _, data = await http(method, path, user="ops", raw=b"[" * 100_000)
        assert_refused(code, data, "nested", "64")
    nested = (
        b'{"project": "team-a", "command": "true", "placement": {"affinity": ' + b'{"a": ' * 200 + b"1" + b"}" * 202
    )
    code, _, data = await http("POST", "runs", raw=nested)
    assert_refused(code, data, "nested", "64")
    assert await run_count(http) == 0


async def test_stream_resume_positions_must_be_ascii_decimals_within_64_bits(jp_fetch: Any) -> None:
    http = Http(jp_fetch)
    run_id = await finished_run_with_log(http)
    top = str(2**63 - 1)
    for value in ("\u00b2", str(2**64), str(2**63), "-1", "1_000", "0x10", "\u0663"):
        code, _, data = await http("GET", "events", params={"since": value, "limit": "1"})
        assert_refused(code, data, "since", top)
        code, _, data = await http("GET", f"runs/{run_id}/logs", params={"offset": value})
        assert_refused(code, data, "offset", top)
        if not value.encode("latin-1", "ignore"):
            continue  # a header carries latin-1 only: '²' can be sent, '٣' cannot
        code, _, data = await http("GET", "events", params={"limit": "1"}, headers={"Last-Event-ID": value})
        assert_refused(code, data, "Last-Event-ID", top)
        code, _, data = await http("GET", f"runs/{run_id}/logs", headers={"Last-Event-ID": value})
        assert_refused(code, data, "Last-Event-ID", top)


async def test_resuming_a_log_past_its_end_is_refused_before_the_stream_starts(jp_fetch: Any) -> None:
    http = Http(jp_fetch)
    run_id = await finished_run_with_log(http)
    code, _, log = await http("GET", f"runs/{run_id}/logs", params={"format": "text"})
    assert code == 200 and log == b"hello\n"
    for where in ({"params": {"offset": str(10**15)}}, {"headers": {"Last-Event-ID": str(2**62)}}):
        code, _, data = await http("GET", f"runs/{run_id}/logs", **where)  # type: ignore[arg-type]
        assert_refused(code, data, "past the end", "6 bytes", status=416)
    code, _, data = await http("GET", f"runs/{run_id}/logs", params={"format": "text", "offset": "7"})
    assert_refused(code, data, "past the end", "6 bytes", status=416)
    # At the end exactly is where a finished stream resumes: nothing more, then its end event.
    code, _, text = await http("GET", f"runs/{run_id}/logs", params={"offset": "6"})
    assert code == 200 and b"data:" in text and b"event: end" in text and b"hello" not in text
    code, _, text = await http("GET", f"runs/{run_id}/logs", params={"format": "text", "offset": "2"})
    assert code == 200 and text == b"llo\n"


async def test_nul_byte_in_a_script_path_is_refused(jp_fetch: Any) -> None:
    http = Http(jp_fetch)
    for path in ("runs/preview", "runs"):
        code, _, data = await http("POST", path, body={"project": "team-a", "script": "a\x00b.py"})
        assert_refused(code, data, "script", "NUL")
    assert await run_count(http) == 0


async def test_nul_bytes_are_refused_at_submit_not_at_start(jp_fetch: Any) -> None:
    http = Http(jp_fetch)
    cases: list[tuple[dict[str, Any], str, str]] = [
        ({"env": [{"name": "A", "value": "x\x00y"}]}, "env[0].value", "NUL"),
        ({"env": {"A": "x\x00y"}}, "env.A", "NUL"),
        ({"command": "echo a\x00b"}, "command", "NUL"),
        ({"command": ["echo", "a\x00b"]}, "command", "NUL"),
        ({"command": None, "script": "t.py", "args": ["a\x00"]}, "args[0]", "NUL"),
        ({"working_dir": "a\x00b"}, "working_dir", "NUL"),
        ({"image": "busybox\x00"}, "image", "NUL"),
        ({"volumes": [{"name": "v", "mount_path": "/data\x00"}]}, "volumes[0].mount_path", "NUL"),
        ({"volumes": [{"name": "v", "host_path": "/tmp\x00"}]}, "volumes[0].host_path", "NUL"),
        ({"placement": {"node_selector": {"zone": "a\x00"}}}, "placement.node_selector.zone", "NUL"),
        ({"name": "a\x00b"}, "name", "NUL"),
        ({"params": {"note": "a\x00"}}, "params.note", "NUL"),
        ({"placement": {"affinity": {"k": ["\x00"]}}}, "placement.affinity.k[0]", "NUL"),
        ({"params": {"a\x00": 1}}, "a key in params", "NUL"),
    ]
    for extra, field, why in cases:
        body = {k: v for k, v in {**RUN, **extra}.items() if v is not None}
        code, _, data = await http("POST", "runs", body=body)
        assert_refused(code, data, field, why)
    code, _, data = await http("PUT", "presets/p1", user="ops", body={"name": "p1", "env": {"A": "\x00"}})
    assert_refused(code, data, "env.A", "NUL")
    code, _, data = await http("PUT", "queues/q1", user="ops", body={"name": "q1", "description": "\x00"})
    assert_refused(code, data, "description", "NUL")
    assert await run_count(http) == 0


def test_params_schema_refuses_non_finite_numbers_without_the_http_layer() -> None:
    # The HTTP parser refuses them first; the schema holds for any other caller of RunRequest.
    for value, word in ((math.nan, "finite"), (math.inf, "finite"), (2**64, "64 bits")):
        with pytest.raises(ValidationError) as exc:
            RunRequest.model_validate({**RUN, "params": {"lr": value}})
        assert "'lr'" in str(exc.value) and word in str(exc.value)


async def test_json_depth_limit_is_exactly_64(jp_fetch: Any) -> None:
    http = Http(jp_fetch)

    def nested(levels: int) -> bytes:  # the object itself, placement and the affinity are 3 levels
        inner = levels - 3
        return (
            b'{"project": "team-a", "command": "true", "placement": {"affinity": '
            + b'{"a": ' * inner
            + b"{}"
            + b"}" * inner
            + b"}}"
        )

    code, _, data = await http("POST", "runs/preview", raw=nested(64))
    assert code == 200, data
    # brackets inside strings are text, not nesting
    code, _, data = await http(
        "POST", "runs/preview", body={**RUN, "name": "[" * 100, "args": [], "env": {"B": "{" * 999}}
    )
    assert code == 200, data
    code, _, data = await http("POST", "runs/preview", raw=nested(65))
    assert_refused(code, data, "nested more than 64 levels deep")
    assert "at most 64" in data["error"]["hint"]


# ---- the table --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Bad:
    """One bad request: what is sent, the 4xx expected, and words its message must contain."""

    id: str
    method: str
    path: str
    status: int
    words: tuple[str, ...]
    user: str = "alice"
    body: Any = None
    raw: bytes | None = None
    params: Any = None
    headers: dict[str, str] | None = None


def run_body(**fields: Any) -> dict[str, Any]:
    """RUN with `fields` over it; a field given as None is removed (to send a script instead of a command)."""
    return {k: v for k, v in {**RUN, **fields}.items() if v is not None}


def submit(id: str, status: int, words: tuple[str, ...], path: str = "runs", **fields: Any) -> Bad:
    return Bad(id, "POST", path, status, words, body=run_body(**fields))


def raw_submit(id: str, raw: bytes, words: tuple[str, ...], path: str = "runs") -> Bad:
    return Bad(id, "POST", path, 400, words, raw=raw)


def admin(id: str, method: str, path: str, status: int, words: tuple[str, ...], body: Any = None, **kw: Any) -> Bad:
    return Bad(id, method, path, status, words, user=kw.pop("user", "ops"), body=body, **kw)


def get(id: str, path: str, status: int, words: tuple[str, ...], **kw: Any) -> Bad:
    return Bad(id, "GET", path, status, words, **kw)


DEEP = b"[" * 100_000
TOP = str(2**63 - 1)

RUN_BODIES: list[Bad] = [
    # the body as a whole
    raw_submit("empty-body", b"", ("empty",)),
    raw_submit("blank-body", b"  \n", ("empty",)),
    raw_submit("truncated-json", b'{"project": ', ("malformed JSON",)),
    raw_submit("trailing-garbage", b'{"project": "team-a"} x', ("malformed JSON",)),
    raw_submit("array-body", b"[]", ("JSON object",)),
    raw_submit("string-body", b'"run"', ("JSON object",)),
    raw_submit("null-body", b"null", ("JSON object",)),
    raw_submit("not-utf8", b'{"project": "\xff"}', ("UTF-8",)),
    raw_submit("over-a-megabyte", b'{"name": "' + b"x" * 1_000_001 + b'"}', ("at most 1000000",)),
    raw_submit("deep-arrays", DEEP, ("nested more than 64",)),
    raw_submit("deep-objects", b'{"a": ' * 10_000, ("nested more than 64",)),
    raw_submit(
        "nan-param", b'{"project": "team-a", "command": "true", "params": {"lr": NaN}}', ("params.lr", "finite")
    ),
    raw_submit("inf-cpu", b'{"project": "team-a", "command": "true", "resources": {"cpu": Infinity}}', ("cpu",)),
    raw_submit("minus-inf-gpu", b'{"project": "team-a", "command": "true", "resources": {"gpu": -Infinity}}', ("gpu",)),
    raw_submit(
        "1e400-in-affinity",
        b'{"project": "team-a", "command": "true", "placement": {"affinity": {"w": [1, 1e400]}}}',
        ("placement.affinity.w[1]", "finite"),
    ),
    raw_submit(
        "huge-int-literal",
        b'{"project": "team-a", "command": "true", "params": {"n": ' + b"9" * 5000 + b"}}",
        ("malformed JSON",),
    ),
    raw_submit("lone-surrogate-name", b'{"project": "team-a", "command": "true", "name": "\\ud800"}', ("name",)),
    raw_submit("lone-surrogate-argv", b'{"project": "team-a", "command": ["echo", "\\udc00"]}', ("command",)),
    # what runs
    Bad("unknown-field", "POST", "runs", 400, ("foo", "unknown field"), body=run_body(foo=1)),
    Bad("missing-project", "POST", "runs", 400, ("project", "required"), body={"command": "true"}),
    submit("empty-project", 400, ("project", "empty"), project=""),
    submit("project-too-long", 400, ("project", "too long"), project="p" * 64),
    submit("nothing-to-run", 400, ("exactly one of",), command=None),
    submit("command-and-script", 400, ("exactly one of",), script="t.py"),
    submit("command-and-code", 400, ("exactly one of",), code="print(1)"),
    submit("empty-argv", 400, ("command", "empty"), command=[]),
    submit("blank-shell", 400, ("command", "empty"), command="   "),
    submit("argv-of-numbers", 400, ("command",), command=[1, 2]),
    submit("command-object", 400, ("command",), command={"argv": ["true"]}),
    submit("command-too-long", 400, ("command", "too long", "65536"), command=["x" * 70_000]),
    submit("nul-in-argv", 400, ("command", "NUL"), command=["echo", "a\x00"]),
    submit("nul-in-shell", 400, ("command", "NUL"), command="echo \x00"),
    submit("script-not-python", 400, ("script", ".py or .ipynb"), command=None, script="notes.txt"),
    submit("script-missing", 400, ("script", "not a file"), command=None, script="nope.py"),
    submit("script-outside-root", 400, ("script", "not a file"), command=None, script="../../../etc/x.py"),
    submit("script-nul", 400, ("script", "NUL"), command=None, script="a\x00.py"),
    submit("script-empty", 400, ("script",), command=None, script=""),
    submit("args-with-command", 400, ("args go with script or code",), args=["-v"]),
    submit("args-nul", 400, ("args[0]", "NUL"), command=None, code="print(1)", args=["\x00"]),
    submit("args-too-many", 400, ("args", "at most 256 items"), command=None, code="print(1)", args=["a"] * 257),
    submit("args-not-strings", 400, ("args[0]",), command=None, code="print(1)", args=[1]),
    submit("code-empty", 400, ("code", "empty"), command=None, code=""),
    submit("code-nul", 400, ("code", "NUL"), command=None, code="print(1)\x00"),
    submit("working-dir-outside", 400, ("working_dir", "outside"), working_dir="/etc"),
    submit("working-dir-missing", 400, ("working_dir", "not a directory"), working_dir="no/such/dir"),
    submit("working-dir-nul", 400, ("working_dir", "NUL"), working_dir="a\x00"),
    submit("name-empty", 400, ("name", "empty"), name=""),
    submit("name-too-long", 400, ("name", "at most 128"), name="n" * 129),
    submit("name-newline", 400, ("name", "control characters"), name="a\nb"),
    submit("name-number", 400, ("name",), name=5),
    # where and how it runs
    submit("kind-session", 400, ("a session runs a kernel, not command",), kind="session"),
    submit("kind-sweep", 422, ("kind", "run request with a `matrix`"), kind="sweep"),
    submit("notebook-on-a-job", 400, ("notebook", "job"), notebook="a.ipynb"),
    submit(
        "notebook-outside",
        400,
        ("notebook", "relative to the Jupyter root"),
        command=None,
        kind="session",
        notebook="../x.ipynb",
    ),
    submit("notebook-absolute", 400, ("notebook", "relative"), command=None, kind="session", notebook="/etc/x.ipynb"),
    submit("notebook-nul", 400, ("notebook", "NUL"), command=None, kind="session", notebook="a\x00.ipynb"),
    submit("kind-bogus", 400, ("kind", "must be one of"), kind="daemon"),
    submit("unknown-project", 404, ("nope",), project="nope"),
    submit("other-teams-project", 404, ("team-b",), project="team-b"),
    submit("unknown-queue", 422, ("nope",), queue="nope"),
    submit("disallowed-queue", 403, ("team-b-train",), queue="team-b-train"),
    submit("queue-nul", 400, ("queue", "NUL"), queue="q\x00"),
    submit("unknown-preset", 422, ("nope",), presets=["nope"]),
    submit("presets-too-many", 400, ("presets", "at most 16 items"), presets=["single-gpu"] * 17),
    submit("presets-not-a-list", 400, ("presets",), presets="single-gpu"),
    submit("gpu-negative", 400, ("resources.gpu", ">= 0"), resources={"gpu": -1}),
    submit("gpu-typo", 400, ("resources.gpu", "<= 1024"), resources={"gpu": 8000}),
    submit("gpu-fraction", 400, ("resources.gpu",), resources={"gpu": 1.5}),
    submit("gpu-word", 400, ("resources.gpu",), resources={"gpu": "two"}),
    submit("gpu-over-quota", 422, ("team-a-train", "quota"), resources={"gpu": 3}),
    submit("cpu-word", 400, ("resources.cpu", "invalid cpu quantity"), resources={"cpu": "lots"}),
    submit("cpu-negative", 400, ("resources.cpu", ">= 0"), resources={"cpu": -1}),
    submit("cpu-1e308", 400, ("resources.cpu", "100000 cores"), resources={"cpu": 1e308}),
    submit("cpu-400-digits", 400, ("resources.cpu", "at most 32"), resources={"cpu": "9" * 400}),
    submit("cpu-huge-int", 400, ("resources.cpu", "100000 cores"), resources={"cpu": 10**400}),
    submit("cpu-200000", 400, ("resources.cpu", "100000 cores"), resources={"cpu": "200000"}),
    submit("cpu-millicores-huge", 400, ("resources.cpu", "100000 cores"), resources={"cpu": "9" * 30 + "m"}),
    submit("cpu-bool", 400, ("resources.cpu",), resources={"cpu": True}),
    submit("cpu-exponent", 400, ("resources.cpu", "invalid cpu quantity"), resources={"cpu": "1e3"}),
    submit("memory-unit", 400, ("resources.memory", "invalid memory quantity"), resources={"memory": "16GB"}),
    submit("memory-huge-int", 400, ("resources.memory", "1Ei"), resources={"memory": 10**400}),
    submit("memory-40-chars", 400, ("resources.memory", "at most 32"), resources={"memory": "9" * 40 + "Gi"}),
    submit(
        "memory-exbibytes",
        400,
        ("resources.memory", "invalid memory quantity"),
        resources={"memory": "9999999999999Ei"},
    ),
    submit("memory-2048Pi", 400, ("resources.memory", "1Ei"), resources={"memory": "2048Pi"}),
    submit("memory-1e308", 400, ("resources.memory", "1Ei"), resources={"memory": 1e308}),
    submit("resources-tpu", 400, ("resources.tpu", "unknown field"), resources={"tpu": 1}),
    submit("resources-list", 400, ("resources",), resources=[1]),
    submit("env-bad-name", 400, ("env[0].name", "pattern"), env=[{"name": "1A", "value": "x"}]),
    submit("env-nul-value", 400, ("env[0].value", "NUL"), env=[{"name": "A", "value": "x\x00y"}]),
    submit("env-map-nul-value", 400, ("env.A", "NUL"), env={"A": "x\x00y"}),
    submit("params-nul", 400, ("params.s", "NUL"), params={"s": "\x00"}),
    submit("params-key-nul", 400, ("a key in params", "NUL"), params={"\x00": 1}),
    submit("env-value-too-long", 400, ("env[0].value", "too long"), env=[{"name": "A", "value": "v" * 65537}]),
    submit("env-string", 400, ("env",), env="A=1"),
    submit("env-unknown-field", 400, ("env[0].secret", "unknown field"), env=[{"name": "A", "secret": "s"}]),
    submit("volume-no-name", 400, ("volumes[0].name",), volumes=[{"mount_path": "/d"}]),
    submit("volume-nul-mount", 400, ("volumes[0].mount_path", "NUL"), volumes=[{"name": "v", "mount_path": "/d\x00"}]),
    submit("volume-nul-claim", 400, ("volumes[0].claim", "NUL"), volumes=[{"name": "v", "claim": "c\x00"}]),
    submit(
        "toleration-operator",
        400,
        ("placement.tolerations[0].operator",),
        placement={"tolerations": [{"operator": "Maybe"}]},
    ),
    submit(
        "toleration-negative",
        400,
        ("toleration_seconds", ">= 0"),
        placement={"tolerations": [{"toleration_seconds": -1}]},
    ),
    submit(
        "toleration-2-63",
        400,
        ("toleration_seconds", "<= " + TOP),
        placement={"tolerations": [{"toleration_seconds": 2**63}]},
    ),
    submit(
        "node-selector-nul", 400, ("placement.node_selector.zone", "NUL"), placement={"node_selector": {"zone": "\x00"}}
    ),
    submit("gpu-type-nul", 400, ("placement.gpu_type", "NUL"), placement={"gpu_type": "a100\x00"}),
    submit("timeout-zero", 400, ("termination.timeout_seconds", "> 0"), termination={"timeout_seconds": 0}),
    submit(
        "timeout-over-a-year",
        400,
        ("termination.timeout_seconds", "<= 31536000"),
        termination={"timeout_seconds": 31536001},
    ),
    submit("idle-seconds-zero", 400, ("termination.idle_seconds", "> 0"), termination={"idle_seconds": 0}),
    submit(
        "idle-seconds-over-a-year",
        400,
        ("termination.idle_seconds", "<= 31536000"),
        termination={"idle_seconds": 31536001},
    ),
    submit(
        "idle-by-unknown",
        400,
        ("termination.idle_by", "'kernel', 'gpu' or 'both'"),
        termination={"idle_by": "cpu"},
    ),
    submit(
        "gpu-idle-threshold-zero", 400, ("termination.gpu_idle_threshold", "> 0"), termination={"gpu_idle_threshold": 0}
    ),
    submit(
        "gpu-idle-threshold-over-100",
        400,
        ("termination.gpu_idle_threshold", "<= 100"),
        termination={"gpu_idle_threshold": 101},
    ),
    submit(
        "cull-busy-kernel-not-a-bool",
        400,
        ("termination.cull_busy_kernel", "true or false"),
        termination={"cull_busy_kernel": "sometimes"},
    ),
    submit("image-nul", 400, ("image", "NUL"), image="busybox\x00"),
    submit("image-too-long", 400, ("image", "at most 512"), image="i" * 513),
    submit("params-list-value", 400, ("params.lr",), params={"lr": [1, 2]}),
    submit("params-2-64", 400, ("params", "'n'", "64 bits"), params={"n": 2**64}),
    submit("params-not-a-map", 400, ("params",), params=[1]),
]

# The preview resolves the same body without creating anything: a sample of the cases, refused alike.
PREVIEW_IDS = (
    "empty-body",
    "deep-arrays",
    "nan-param",
    "1e400-in-affinity",
    "unknown-field",
    "nothing-to-run",
    "script-nul",
    "script-missing",
    "cpu-1e308",
    "cpu-400-digits",
    "memory-huge-int",
    "env-nul-value",
    "env-map-nul-value",
    "kind-session",
    "unknown-project",
    "toleration-2-63",
)
PREVIEW: list[Bad] = [replace(b, id="preview-" + b.id, path="runs/preview") for b in RUN_BODIES if b.id in PREVIEW_IDS]

QUEUE = {"name": "q1", "concurrency": 1}
PRESET = {"name": "p1", "resources": {"gpu": 1}}
PROJECT = {"name": "team-a", "members": {"alice": "admin"}, "default_queue": "team-a-train"}

ADMIN_WRITES: list[Bad] = [
    # queues
    admin("queue-as-member", "PUT", "queues/q1", 403, ("platform admin",), QUEUE, user="alice"),
    admin("queue-name-mismatch", "PUT", "queues/q2", 400, ("'q1'", "'q2'"), QUEUE),
    admin("queue-bad-name", "PUT", "queues/Q_1", 400, ("name", "invalid name"), {**QUEUE, "name": "Q_1"}),
    admin("queue-priority", "PUT", "queues/q1", 400, ("priority", "<= 1000"), {**QUEUE, "priority": 1001}),
    admin("queue-concurrency", "PUT", "queues/q1", 400, ("concurrency", ">= 0"), {**QUEUE, "concurrency": -1}),
    admin("queue-max-per-user", "PUT", "queues/q1", 400, ("max_per_user", ">= 1"), {**QUEUE, "max_per_user": 0}),
    admin("queue-ordering", "PUT", "queues/q1", 400, ("ordering", "must be one of"), {**QUEUE, "ordering": "lifo"}),
    admin(
        "queue-cpu-1e308", "PUT", "queues/q1", 400, ("quota.cpu", "100000 cores"), {**QUEUE, "quota": {"cpu": 1e308}}
    ),
    admin(
        "queue-cpu-digits", "PUT", "queues/q1", 400, ("quota.cpu", "at most 32"), {**QUEUE, "quota": {"cpu": "9" * 400}}
    ),
    admin(
        "queue-memory-huge", "PUT", "queues/q1", 400, ("quota.memory", "1Ei"), {**QUEUE, "quota": {"memory": 10**400}}
    ),
    admin("queue-gpu-word", "PUT", "queues/q1", 400, ("quota.gpu",), {**QUEUE, "quota": {"gpu": "all"}}),
    admin("queue-unknown-field", "PUT", "queues/q1", 400, ("weight", "unknown field"), {**QUEUE, "weight": 2}),
    admin("queue-description-nul", "PUT", "queues/q1", 400, ("description", "NUL"), {**QUEUE, "description": "\x00"}),
    admin("queue-empty-body", "PUT", "queues/q1", 400, ("empty",), raw=b""),
    admin("queue-deep", "PUT", "queues/q1", 400, ("nested",), raw=DEEP),
    admin("queue-nan", "PUT", "queues/q1", 400, ("priority", "finite"), raw=b'{"name": "q1", "priority": NaN}'),
    admin("queue-missing-name", "PUT", "queues/q1", 400, ("name", "required"), {"concurrency": 1}),
    admin("delete-queue-unknown", "DELETE", "queues/nope", 404, ("nope",)),
    admin("delete-queue-as-member", "DELETE", "queues/interactive", 403, ("platform admin",), user="alice"),
    admin("delete-queue-a-project-allows", "DELETE", "queues/team-a-train", 400, ("allowed_queues", "team-a-train")),
    admin("delete-queue-referenced", "DELETE", "queues/interactive", 400, ("interactive",)),
    admin("pause-unknown-queue", "POST", "queues/nope/pause", 404, ("nope",)),
    admin("resume-unknown-queue", "POST", "queues/nope/resume", 404, ("nope",)),
    admin("pause-as-member", "POST", "queues/interactive/pause", 403, ("platform admin",), user="alice"),
    admin("resume-as-viewer", "POST", "queues/team-a-train/resume", 403, ("platform admin",), user="carol"),
    admin("queue-bad-action", "POST", "queues/interactive/drain", 404, ("no endpoint",)),
    # presets
    admin("preset-as-member", "PUT", "presets/p1", 403, ("platform admin",), PRESET, user="alice"),
    admin("preset-name-mismatch", "PUT", "presets/p2", 400, ("'p1'", "'p2'"), PRESET),
    admin(
        "preset-cpu-1e308",
        "PUT",
        "presets/p1",
        400,
        ("resources.cpu", "100000 cores"),
        {**PRESET, "resources": {"cpu": 1e308}},
    ),
    admin(
        "preset-memory-digits",
        "PUT",
        "presets/p1",
        400,
        ("resources.memory", "at most 32"),
        {**PRESET, "resources": {"memory": "9" * 400}},
    ),
    admin("preset-env-nul", "PUT", "presets/p1", 400, ("env.A", "NUL"), {**PRESET, "env": {"A": "\x00"}}),
    admin(
        "preset-volume-nul",
        "PUT",
        "presets/p1",
        400,
        ("volumes[0].host_path", "NUL"),
        {**PRESET, "volumes": [{"name": "v", "host_path": "/\x00"}]},
    ),
    admin(
        "preset-locked-unknown",
        "PUT",
        "presets/p1",
        400,
        ("locked[0]", "unknown field"),
        {**PRESET, "locked": ["gpus"]},
    ),
    admin("preset-unknown-queue", "PUT", "presets/p1", 400, ("queue", "unknown queue"), {**PRESET, "queue": "nope"}),
    admin("preset-merge", "PUT", "presets/p1", 400, ("merge", "must be one of"), {**PRESET, "merge": "union"}),
    admin(
        "preset-idle-by",
        "PUT",
        "presets/p1",
        400,
        ("termination.idle_by", "'kernel', 'gpu' or 'both'"),
        {**PRESET, "kind": "session", "termination": {"idle_by": "always"}},
    ),
    admin(
        "preset-gpu-idle-threshold",
        "PUT",
        "presets/p1",
        400,
        ("termination.gpu_idle_threshold", "<= 100"),
        {**PRESET, "kind": "session", "termination": {"gpu_idle_threshold": 250}},
    ),
    admin(
        "preset-kind-sweep",
        "PUT",
        "presets/p1",
        422,
        ("kind", "run request with a `matrix`"),
        {**PRESET, "kind": "sweep"},
    ),
    admin(
        "preset-inf",
        "PUT",
        "presets/p1",
        400,
        ("resources.cpu", "finite"),
        raw=b'{"name": "p1", "resources": {"cpu": -Infinity}}',
    ),
    admin("delete-preset-unknown", "DELETE", "presets/nope", 404, ("nope",)),
    admin("delete-preset-as-member", "DELETE", "presets/single-gpu", 403, ("platform admin",), user="alice"),
    admin("delete-preset-in-use", "DELETE", "presets/single-gpu", 400, ("single-gpu",)),
    # projects
    admin("project-as-member", "PUT", "projects/team-a", 403, ("team-a",), PROJECT, user="bob"),
    admin(
        "project-of-other-team", "PUT", "projects/team-b", 404, ("team-b",), {**PROJECT, "name": "team-b"}, user="alice"
    ),
    admin("project-name-mismatch", "PUT", "projects/team-b", 400, ("'team-a'", "'team-b'"), PROJECT),
    admin(
        "project-bad-role",
        "PUT",
        "projects/team-a",
        400,
        ("members.alice", "must be one of"),
        {**PROJECT, "members": {"alice": "owner"}},
    ),
    admin(
        "project-unknown-queue",
        "PUT",
        "projects/team-a",
        400,
        ("allowed_queues[0]", "unknown queue"),
        {**PROJECT, "allowed_queues": ["nope"]},
    ),
    admin(
        "project-unknown-preset",
        "PUT",
        "projects/team-a",
        400,
        ("default_presets[0]", "unknown preset"),
        {**PROJECT, "default_presets": ["nope"]},
    ),
    admin(
        "project-max-cpu",
        "PUT",
        "projects/team-a",
        400,
        ("max_run_resources.cpu", "100000 cores"),
        {**PROJECT, "max_run_resources": {"cpu": 1e308}},
    ),
    admin(
        "project-max-memory",
        "PUT",
        "projects/team-a",
        400,
        ("max_run_resources.memory", "at most 32"),
        {**PROJECT, "max_run_resources": {"memory": "1" * 33}},
    ),
    admin(
        "project-member-nul",
        "PUT",
        "projects/team-a",
        400,
        ("a key in members", "NUL"),
        {**PROJECT, "members": {"al\x00": "admin"}},
    ),
    admin("project-deep", "PUT", "projects/team-a", 400, ("nested",), raw=DEEP),
    admin("delete-project-unknown", "DELETE", "projects/nope", 404, ("nope",)),
    admin("delete-project-as-its-admin", "DELETE", "projects/team-a", 403, ("platform admin",), user="alice"),
    # the whole config
    admin("config-as-member", "PUT", "config", 403, ("platform admin",), {"queues": []}, user="alice"),
    admin("config-queues-string", "PUT", "config", 400, ("queues",), {"queues": "all"}),
    admin("config-top-level-list", "PUT", "config", 400, ("top level", "mapping"), raw=b"[1]"),
    admin(
        "config-duplicate-queue",
        "PUT",
        "config",
        400,
        ("queues[1].name", "duplicate"),
        {"queues": [{"name": "a"}, {"name": "a"}]},
    ),
    admin(
        "config-unknown-queue-ref",
        "PUT",
        "config",
        400,
        ("defaults.queue", "unknown queue"),
        {"defaults": {"queue": "nope"}},
    ),
    admin("config-drops-busy-queue", "PUT", "config", 409, ("team-a-train",), {"queues": [{"name": "other"}]}),
    admin(
        "config-cpu-1e308",
        "PUT",
        "config",
        400,
        ("queues[0].quota.cpu", "100000 cores"),
        {"queues": [{"name": "q", "quota": {"cpu": 1e308}}]},
    ),
    admin(
        "config-memory-digits",
        "PUT",
        "config",
        400,
        ("defaults.resources.memory", "at most 32"),
        {"defaults": {"resources": {"memory": "9" * 400 + "Gi"}}},
    ),
    admin("config-env-nul", "PUT", "config", 400, ("defaults.env.A", "NUL"), {"defaults": {"env": {"A": "\x00"}}}),
    admin(
        "config-nan",
        "PUT",
        "config",
        400,
        ("queues[0].priority", "finite"),
        raw=b'{"queues": [{"name": "q", "priority": NaN}]}',
    ),
    admin("config-deep", "PUT", "config", 400, ("nested",), raw=DEEP),
    admin("config-admins-string", "PUT", "config", 400, ("admins",), {"admins": "ops"}),
    admin("config-malformed", "PUT", "config", 400, ("malformed JSON",), raw=b"{admins: [ops]}"),
    # `dry_run=yes` once applied the config for real: only true/false are accepted.
    admin(
        "config-dry-run-yes",
        "PUT",
        "config",
        400,
        ("dry_run", "true, false"),
        {"queues": []},
        params={"dry_run": "yes"},
    ),
    # one run
    admin("stop-unknown-run", "POST", "runs/r-nope/stop", 404, ("r-nope",), user="alice"),
    admin("patch-a-job", "PATCH", "runs/{queued}", 409, ("not a sweep",), {"concurrency": 2}, user="alice"),
    admin("patch-nothing", "PATCH", "runs/{queued}", 400, ("concurrency", "paused"), {}, user="alice"),
    admin("patch-concurrency-zero", "PATCH", "runs/{queued}", 400, ("concurrency",), {"concurrency": 0}, user="alice"),
    admin(
        "patch-concurrency-word", "PATCH", "runs/{queued}", 400, ("concurrency",), {"concurrency": "3"}, user="alice"
    ),
    admin("patch-paused-word", "PATCH", "runs/{queued}", 400, ("paused",), {"paused": "yes"}, user="alice"),
    admin("patch-unknown-field", "PATCH", "runs/{queued}", 400, ("status",), {"status": "stopped"}, user="alice"),
    admin("patch-other-teams-run", "PATCH", "runs/{queued}", 404, ("{queued}",), {"paused": True}, user="dave"),
    admin("keepalive-a-job", "POST", "runs/{queued}/keepalive", 409, ("not a running session",), user="alice"),
    admin("keepalive-unknown-run", "POST", "runs/r-nope/keepalive", 404, ("r-nope",), user="alice"),
    admin("keepalive-other-teams-run", "POST", "runs/{queued}/keepalive", 404, ("{queued}",), user="dave"),
    admin(
        "kernel-event-unknown",
        "POST",
        "runs/{queued}/kernel",
        400,
        ("event", "ready"),
        {"event": "exploded"},
        user="alice",
    ),
    admin(
        "kernel-event-a-job",
        "POST",
        "runs/{queued}/kernel",
        409,
        ("not a running session",),
        {"event": "idle"},
        user="alice",
    ),
    admin(
        "kernel-event-bad-id",
        "POST",
        "runs/{queued}/kernel",
        400,
        ("kernel_id",),
        {"event": "ready", "kernel_id": "../x"},
        user="alice",
    ),
    admin(
        "kernel-event-other-teams", "POST", "runs/{queued}/kernel", 404, ("{queued}",), {"event": "idle"}, user="dave"
    ),
    admin("stop-bad-run-id", "POST", "runs/r.nope/stop", 404, ("no endpoint",), user="alice"),
    admin("stop-as-viewer", "POST", "runs/{queued}/stop", 403, ("{queued}",), user="carol"),
    admin("stop-other-teams-run", "POST", "runs/{queued}/stop", 404, ("{queued}",), user="dave"),
]

QUERIES: list[Bad] = [
    get("sweep-compare-top-big", "runs/{queued}/compare", 400, ("top", "between 0 and 50"), params={"top": "51"}),
    get("sweep-compare-points-word", "runs/{queued}/compare", 400, ("max_points",), params={"max_points": "many"}),
    get("sweep-compare-a-job", "runs/{queued}/compare", 400, ("not a sweep",)),
    get("runs-kind-bogus", "runs", 400, ("kind must be one of", "job, session, sweep"), params={"kind": "daemon"}),
    get("runs-limit-zero", "runs", 400, ("limit", "between 1 and 1000"), params={"limit": "0"}),
    get("runs-limit-big", "runs", 400, ("limit", "between 1 and 1000"), params={"limit": "1001"}),
    get("runs-limit-word", "runs", 400, ("limit", "integer"), params={"limit": "all"}),
    get("runs-limit-superscript", "runs", 400, ("limit", "integer"), params={"limit": "\u00b2"}),
    get("runs-limit-float", "runs", 400, ("limit", "integer"), params={"limit": "1.5"}),
    get("runs-limit-underscore", "runs", 400, ("limit", "integer"), params={"limit": "1_0"}),
    get("runs-limit-arabic-digit", "runs", 400, ("limit", "integer"), params={"limit": "\u0663"}),
    get("runs-before-word", "runs", 400, ("before", "integer"), params={"before": "yesterday"}),
    get("runs-before-negative", "runs", 400, ("before", "between 0"), params={"before": "-1"}),
    get("runs-before-huge", "runs", 400, ("before", "between 0"), params={"before": str(2**64)}),
    get("runs-status-bogus", "runs", 400, ("status", "'done'"), params={"status": "done"}),
    get("runs-status-one-bad", "runs", 400, ("'sleeping'",), params={"status": "queued,sleeping"}),
    get("runs-phase-bogus", "runs", 400, ("phase", "'waiting'"), params={"phase": "waiting"}),
    get("runs-phase-one-bad", "runs", 400, ("'later'",), params={"phase": "run,later"}),
    get("runs-unknown-project", "runs", 404, ("nope",), params={"project": "nope"}),
    get("runs-other-teams-project", "runs", 404, ("team-b",), params={"project": "team-b"}),
    get("presets-unknown-project", "presets", 404, ("nope",), params={"project": "nope"}),
    Bad(
        "whatif-unknown-queue",
        "POST",
        "whatif",
        404,  # as insights answers it (one visibility rule, docs/insights.md)
        ("queue 'nope' not found",),
        user="ops",
        body={"since": "7d", "changes": {"nope": {"concurrency": 4}}},
    ),
    Bad("whatif-since-word", "POST", "whatif", 400, ("since",), user="ops", body={"since": "last week", "changes": {}}),
    get("insights-unknown-queue", "insights", 404, ("queue 'nope' not found",), params={"queue": "nope"}),
    get("insights-unknown-project", "insights", 404, ("nope",), params={"project": "nope"}),
    get("insights-other-teams-project", "insights", 404, ("team-b",), params={"project": "team-b"}),
    get("insights-since-word", "insights", 400, ("since must be", "7d"), params={"since": "last week"}),
    get("insights-until-word", "insights", 400, ("until must be", "epoch seconds"), params={"until": "soon"}),
    get("insights-since-after-until", "insights", 400, ("before until",), params={"since": "100", "until": "50"}),
    get("insights-range-too-long", "insights", 400, ("at most 400 days",), params={"since": "1000d"}),
    get("insights-bucket-word", "insights", 400, ("bucket must be a duration",), params={"bucket": "hourly"}),
    get("insights-bucket-tiny", "insights", 400, ("bucket must be between 1m and 400d",), params={"bucket": "5s"}),
    get("insights-too-many-buckets", "insights", 400, ("at most 2000",), params={"since": "30d", "bucket": "1m"}),
    get("run-unknown", "runs/r-nope", 404, ("r-nope",)),
    get("run-id-too-long", "runs/" + "r" * 65, 404, ("no endpoint",)),
    get("explain-unknown", "runs/r-nope/explain", 404, ("r-nope",)),
    get("explain-other-team", "runs/{done}/explain", 404, ("{done}",), user="dave"),
    get("logs-follow-maybe", "runs/{done}/logs", 400, ("follow", "true, false"), params={"follow": "maybe"}),
    get("logs-format-xml", "runs/{done}/logs", 400, ("format", "sse, text"), params={"format": "xml"}),
    get("logs-offset-word", "runs/{done}/logs", 400, ("offset", TOP), params={"offset": "start"}),
    get("logs-offset-negative", "runs/{done}/logs", 400, ("offset", TOP), params={"offset": "-5"}),
    get("logs-offset-superscript", "runs/{done}/logs", 400, ("offset", TOP), params={"offset": "\u00b2"}),
    get("logs-offset-2-64", "runs/{done}/logs", 400, ("offset", TOP), params={"offset": str(2**64)}),
    get("logs-offset-past-end", "runs/{done}/logs", 416, ("past the end", "6 bytes"), params={"offset": "7"}),
    get(
        "logs-text-past-end",
        "runs/{done}/logs",
        416,
        ("past the end",),
        params={"format": "text", "offset": str(10**12)},
    ),
    get(
        "logs-last-id-past-end",
        "runs/{done}/logs",
        416,
        ("Last-Event-ID", "past the end"),
        headers={"Last-Event-ID": str(2**62)},
    ),
    get(
        "logs-last-id-superscript", "runs/{done}/logs", 400, ("Last-Event-ID", TOP), headers={"Last-Event-ID": "\u00b2"}
    ),
    get("logs-last-id-2-64", "runs/{done}/logs", 400, ("Last-Event-ID", TOP), headers={"Last-Event-ID": str(2**64)}),
    get("logs-other-team", "runs/{done}/logs", 404, ("{done}",), user="dave"),
    get("events-since-word", "events", 400, ("since", TOP), params={"since": "now"}),
    get("events-since-superscript", "events", 400, ("since", TOP), params={"since": "\u00b2"}),
    get("events-since-arabic-digit", "events", 400, ("since", TOP), params={"since": "\u0663"}),
    get("events-since-2-64", "events", 400, ("since", TOP), params={"since": str(2**64)}),
    get("events-since-negative", "events", 400, ("since", TOP), params={"since": "-1"}),
    get("events-last-id-word", "events", 400, ("Last-Event-ID", TOP), headers={"Last-Event-ID": "abc"}),
    get("events-last-id-superscript", "events", 400, ("Last-Event-ID", TOP), headers={"Last-Event-ID": "\u00b2"}),
    get("events-limit-negative", "events", 400, ("limit", "between 0"), params={"limit": "-1"}),
    get("events-limit-big", "events", 400, ("limit", "between 0"), params={"limit": str(10**9 + 1)}),
    get("events-heartbeat-zero", "events", 400, ("heartbeat", "between 1 and 300"), params={"heartbeat": "0"}),
    get("events-heartbeat-big", "events", 400, ("heartbeat", "between 1 and 300"), params={"heartbeat": "301"}),
    get("events-heartbeat-word", "events", 400, ("heartbeat", "integer"), params={"heartbeat": "often"}),
    get(
        "metrics-max-points-small", "runs/{done}/metrics", 400, ("max_points", "between 4"), params={"max_points": "3"}
    ),
    get(
        "metrics-max-points-big",
        "runs/{done}/metrics",
        400,
        ("max_points", "1000000"),
        params={"max_points": "1000001"},
    ),
    get(
        "metrics-max-points-word", "runs/{done}/metrics", 400, ("max_points", "integer"), params={"max_points": "many"}
    ),
    get("metrics-unknown-run", "runs/r-nope/metrics", 404, ("r-nope",)),
    get("metrics-other-team", "runs/{done}/metrics", 404, ("{done}",), user="dave"),
    get("compare-no-runs", "compare", 400, ("runs",)),
    get("compare-unknown-run", "compare", 404, ("r-nope",), params={"runs": "{done},r-nope"}),
    get("compare-other-team", "compare", 404, ("{done}",), params={"runs": "{done}"}, user="dave"),
    get(
        "compare-max-points-small",
        "compare",
        400,
        ("max_points", "between 4"),
        params={"runs": "{done}", "max_points": "1"},
    ),
    get(
        "compare-max-points-word",
        "compare",
        400,
        ("max_points", "integer"),
        params={"runs": "{done}", "max_points": "x"},
    ),
    get("outputs-traversal", "runs/{done}/outputs/../../../etc/passwd", 400, ("leaves the directory",)),
    get("outputs-nul", "runs/{done}/outputs/a\x00b", 400, ("NUL",)),
    get("outputs-missing", "runs/{done}/outputs/nope.txt", 404, ("nope.txt",)),
    get("outputs-internal", "runs/{done}/outputs/.gpuplat/exit.json", 404, (".gpuplat/exit.json",)),
    get("outputs-unknown-run", "runs/r-nope/outputs", 404, ("r-nope",)),
    get("outputs-name-too-long", "runs/{done}/outputs/" + "a" * 256, 400, ("too long",)),
    get("outputs-path-too-long", "runs/{done}/outputs/" + "a/" * 2049, 400, ("too long",)),
    get("compare-run-id-too-long", "compare", 404, ("not found",), params={"runs": "a" * 5000}),
    get("compare-too-many-runs", "compare", 400, ("at most 500",), params={"runs": ",".join(["r-x"] * 501)}),
    get("outputs-other-team", "runs/{done}/outputs", 404, ("{done}",), user="dave"),
    get("unknown-endpoint", "nothing-here", 404, ("no endpoint",)),
]


async def setup_runs(http: Http) -> dict[str, str]:
    """A finished run with a 6-byte log, and a run held queued by a paused queue (the config's new baseline)."""
    done = await finished_run_with_log(http)
    code, _, data = await http("POST", "queues/team-a-train/pause", user="ops")
    assert code == 200, data
    code, _, queued = await http("POST", "runs", body=RUN)
    assert code == 201 and queued["status"] == "queued", queued
    return {"done": done, "queued": str(queued["id"])}


async def state(http: Http) -> Any:
    """What a bad request must not change: every run and its status, and the platform config."""
    code, _, runs = await http("GET", "runs", user="ops", params={"limit": "1000"})
    assert code == 200, runs
    code, _, config = await http("GET", "config", user="ops")
    assert code == 200, config
    return sorted((r["id"], r["status"]) for r in runs["runs"]), config


async def check_table(http: Http, table: list[Bad]) -> None:
    ids = await setup_runs(http)
    before = await state(http)
    failures = []
    for case in table:
        fill = {k: v.format(**ids) if isinstance(v, str) else v for k, v in (case.params or {}).items()}
        code, _, data = await http(
            case.method,
            case.path.format(**ids),
            user=case.user,
            body=case.body,
            raw=case.raw,
            params=fill or None,
            headers=case.headers,
        )
        try:
            assert_refused(code, data, *(w.format(**ids) for w in case.words), status=case.status)
        except AssertionError as exc:
            failures.append(f"{case.id}: {exc}")
        after = await state(http)
        if after != before:
            failures.append(f"{case.id}: changed what exists: {before} -> {after}")
            before = after
    assert not failures, f"{len(failures)} of {len(table)} cases:\n" + "\n".join(failures)


# Query parameters with no bad value: any string is a filter (that may match nothing).
FREE_TEXT = {
    ("runs", "queue"),
    ("runs", "user"),
    ("runs", "q"),
    ("sessions", "notebook"),
    ("runs", "notebook"),
    ("runs", "parent"),
    ("runs/{run_id}/compare", "metric"),
    ("runs/{run_id}/metrics", "names"),
    ("compare", "metrics"),
}
TABLE = RUN_BODIES + PREVIEW + ADMIN_WRITES + QUERIES


def route_of(case: Bad) -> str:
    """The OpenAPI path (`runs/{run_id}/stop`) a case's request is routed to."""
    path = case.path.format(done="r-done", queued="r-queued")
    for pattern, _, _ in ROUTES:
        if re.fullmatch(pattern, path):
            return openapi_path(pattern)
    return "(unknown endpoint)"


def test_the_table_covers_every_writing_endpoint_and_every_query_parameter() -> None:
    doc = openapi_document("/", ROUTES)
    covered = {(route_of(c), c.method.lower()) for c in TABLE}
    asked = {(route_of(c), name) for c in TABLE for name in [*(c.params or {}), *(c.headers or {})]}
    writes, params = set(), set()
    for full, ops in doc["paths"].items():
        path = full.removeprefix(f"/{API}/")
        writes |= {(path, m) for m in ops if m in ("post", "put", "patch", "delete")}
        params |= {(path, p["name"]) for op in ops.values() for p in op["parameters"] if p["in"] == "query"}
    assert writes - covered == set(), "writing endpoints without a bad input in the table"
    assert params - asked - FREE_TEXT == set(), "query parameters without a bad value in the table"
    ids = [c.id for c in TABLE]
    assert len(ids) == len(set(ids)) and len(ids) >= 100, len(ids)
    assert all(400 <= c.status < 500 for c in TABLE)


async def test_bad_run_bodies(jp_fetch: Any) -> None:
    await check_table(Http(jp_fetch), RUN_BODIES + PREVIEW)


async def test_bad_admin_writes(jp_fetch: Any) -> None:
    await check_table(Http(jp_fetch), ADMIN_WRITES)


async def test_bad_query_parameters(jp_fetch: Any) -> None:
    await check_table(Http(jp_fetch), QUERIES)
