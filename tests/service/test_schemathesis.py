"""Schemathesis against the served OpenAPI document: no 5xx, every answer as documented.

A real server subprocess (tests/server.py) with the example platform, one finished run that
wrote a log line, a metric and an output, and every queue paused afterwards, so nothing
generated ever runs. For every operation, as a platform admin and as a member, schemathesis
generates requests from the document the server serves (valid ones and, as often, invalid
ones) and checks: not a server error, a documented status code, a documented content type,
and a body its schema allows (errors included: `{"error": {code, message, hint}}`).

Every other example's path parameters are replaced by names that exist (a run, a queue, a
preset, a project, an output), each in turn, so requests reach past the 404s. Writes that could let a
generated run start are kept paused: `PUT config` is a dry run, `PUT queues/{name}` keeps
`paused: true`, and the admin only ever pauses. `benchmarks/fuzz_api.py` runs the same with
many more examples.

The pytest plugin's lazy loader (`schemathesis.pytest.from_fixture`) fails on pytest 9
(`'Function' object has no attribute '_nodeid'`, schemathesis 4.32.5), so the served document
is loaded in a fixture and each operation's strategy (`APIOperation.as_strategy`) driven by
hypothesis directly.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from jupyter_gpuplat.service.openapi import openapi_document
from jupyter_gpuplat.service.routes import ROUTES

from ..server import ServerProcess

EXAMPLES_PER_OPERATION = 12  # per user: 31 operations x 2 users x 12 ≈ 740 requests in CI
USERS = ("ops", "bob")
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]
STREAM_TIMEOUT_SECONDS = 10.0


@dataclass
class Target:
    """A seeded server and what exists on it."""

    server: ServerProcess
    known: dict[str, list[str]]
    document: dict[str, Any]
    schema: Any
    sent: int = 0
    turns: dict[str, int] = field(default_factory=dict)  # examples prepared per operation and user


def seed(root: Path) -> tuple[ServerProcess, dict[str, list[str]]]:
    """Start the server, leave a finished run with a log, a metric and an output, then pause every queue."""
    srv = ServerProcess(root)
    srv.start()
    code = (
        "import pathlib\nfrom jupyter_gpuplat import tracking\nprint('fuzz log line', flush=True)\n"
        "tracking.log_params(lr=0.1)\ntracking.log_metrics(step=0, loss=1.0)\n"
        "p = pathlib.Path('result.txt'); p.write_text('fuzz output')\ntracking.log_output(p)\n"
    )
    done = srv.ok(
        "POST", "runs", "bob", {"project": "team-a", "name": "fuzz-done", "command": [sys.executable, "-c", code]}
    )
    srv.wait_status(done["id"], "succeeded")
    for q in srv.ok("GET", "queues", "ops")["queues"]:
        srv.ok("POST", f"queues/{q['name']}/pause", "ops")
    waiting = srv.ok("POST", "runs", "bob", {"project": "team-a", "name": "fuzz-wait", "command": ["true"]})
    known = {
        "run_id": [done["id"], waiting["id"]],
        "name": ["team-a-train", "interactive", "single-gpu", "team-a", "team-b"],
        "action": ["pause"],
        "path": ["outputs/result.txt", "output.log", "outputs", "../x", ".gpuplat/exit.json"],
    }
    return srv, known


def load(srv: ServerProcess, known: dict[str, list[str]]) -> Target:
    url = f"{srv.url}gpuplat/api/openapi.json"
    schema = schemathesis.openapi.from_url(url, headers={"Authorization": "token tok-ops"}, timeout=30)
    document = requests.get(url, headers={"Authorization": "token tok-ops"}, timeout=30).json()
    return Target(srv, known, document, schema)


def operations() -> list[tuple[str, str]]:
    """(path, method) of every operation of the route table, as the served document lists them."""
    doc = openapi_document("/", ROUTES)
    return [(path, method.upper()) for path, item in doc["paths"].items() for method in item]


def strategy(t: Target, path: str, method: str) -> st.SearchStrategy[Any]:
    op = t.schema[path][method]
    return st.one_of(op.as_strategy(generation_mode=mode) for mode in GenerationMode)


def _pick(value: Any, choices: list[str], turn: int) -> Any:
    """Every other example's value becomes a name that exists, each in turn."""
    return choices[(turn // 2) % len(choices)] if turn % 2 == 0 else value


def prepare(t: Target, case: Any, user: str) -> None:
    """Steer a generated case at what exists, and keep generated runs from ever starting."""
    path, method = case.operation.path, case.method.upper()
    key = f"{method} {path} {user}"
    turn = t.turns[key] = t.turns.get(key, -1) + 1
    params = case.path_parameters or {}
    for name in list(params):
        if not (method == "DELETE" and user == "ops"):  # an admin's delete of a known name would empty the platform
            params[name] = _pick(params[name], t.known[name], turn)
    if user == "ops":
        if path.endswith("/{action}"):
            params["action"] = "pause"
        if method == "PUT" and path.endswith("/config"):
            case.query = {**(case.query or {}), "dry_run": "true"}
        if method == "PUT" and path.endswith("queues/{name}") and isinstance(case.body, dict):
            case.body["paused"] = True


def is_stream(path: str) -> bool:
    return path.endswith(("/events", "/logs"))


def check(t: Target, case: Any, user: str) -> None:
    """Send one generated request as `user`; raise AssertionError (or schemathesis' failure) if it is wrong."""
    prepare(t, case, user)
    headers = {"Authorization": f"token tok-{user}"}
    base = t.server.url.rstrip("/")
    t.sent += 1
    if is_stream(case.operation.path):
        check_stream(t, case, base, headers)
    else:
        case.call_and_validate(base_url=base, headers=headers, checks=CHECKS, timeout=30)


def check_stream(t: Target, case: Any, base: str, headers: dict[str, str]) -> None:
    """An event stream may never end: read the head (and a 4xx body), check them, close."""
    kw = case.as_transport_kwargs(base_url=base, headers=headers)
    resp = requests.request(**kw, stream=True, timeout=STREAM_TIMEOUT_SECONDS)
    try:
        what = f"{kw['method']} {resp.url} -> {resp.status_code}"
        assert resp.status_code < 500, f"{what}: {resp.text[:2000]}"
        op = t.document["paths"][case.operation.path][case.method.lower()]
        media = resp.headers.get("Content-Type", "").split(";")[0]
        if 400 <= resp.status_code < 500:
            assert media == "application/json", f"{what}: {media}"
            schema = {"$ref": "#/components/schemas/Error", "components": t.document["components"]}
            jsonschema.Draft202012Validator(schema).validate(resp.json())
            return
        documented = op["responses"].get(str(resp.status_code))
        assert documented is not None, f"{what}: undocumented status"
        assert media in documented["content"], f"{what}: undocumented content type {media}"
    finally:
        resp.close()


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    srv, known = seed(tmp_path_factory.mktemp("schemathesis"))
    try:
        t = load(srv, known)
        yield t
        print(f"\nschemathesis: {t.sent} requests sent over {len(operations())} operations x {len(USERS)} users")
    finally:
        srv.stop()


def fuzz(
    t: Target, path: str, method: str, user: str, examples: int, *, derandomize: bool = True
) -> Callable[[], None]:
    """One operation's property as `user`; CI sends the same examples every time (derandomize)."""

    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        derandomize=derandomize,
        suppress_health_check=list(HealthCheck),
    )
    @given(case=strategy(t, path, method))
    def run(case: Any) -> None:
        check(t, case, user)

    return run


def test_every_operation_is_fuzzed(target: Target) -> None:
    served = [(p, m.upper()) for p, item in target.document["paths"].items() for m in item]
    assert sorted(served) == sorted(operations()) and len(served) == 35


@pytest.mark.parametrize("user", USERS)
@pytest.mark.parametrize(("path", "method"), operations())
def test_generated_requests(target: Target, path: str, method: str, user: str) -> None:
    before = target.sent
    fuzz(target, path, method, user, EXAMPLES_PER_OPERATION)()
    assert target.sent > before  # requests were sent, not only generated
