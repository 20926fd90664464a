"""The OpenAPI document: what the server serves, what the sidebar's types are generated from,
and generated requests whose every answer must match the document's own schemas."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import jsonschema
import pytest
import requests
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jupyter_gpuplat.core.status import Phase
from jupyter_gpuplat.service.openapi import openapi_document
from jupyter_gpuplat.service.routes import ROUTES
from jupyter_gpuplat.service.schemas import models as m

from ..conftest import EXAMPLE
from ..server import ServerProcess

LABEXT = Path(__file__).resolve().parents[2] / "labextension"
CHECKED_IN = LABEXT / "openapi.json"
GENERATED_TS = LABEXT / "src" / "api" / "api.gen.ts"
METHODS = ("get", "post", "put", "delete")


def _without_servers(doc: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in doc.items() if k != "servers"}


async def test_served_document_is_the_checked_in_one(jp_fetch: Any, platform: Any) -> None:
    resp = await jp_fetch("gpuplat", "api", "openapi.json", headers={"Authorization": "token tok-alice"})
    served = json.loads(resp.body)
    assert served["servers"] == [{"url": "/a%40b"}]  # pytest-jupyter's base URL
    checked_in = json.loads(CHECKED_IN.read_text())
    assert _without_servers(served) == _without_servers(checked_in), (
        "labextension/openapi.json is stale: run `jlpm gen:api` in labextension/ (document, then types)"
    )


def test_generated_typescript_matches_the_document(tmp_path: Path) -> None:
    node = shutil.which("node")
    assert node, "node is needed to generate the sidebar's types"
    script = json.loads((LABEXT / "package.json").read_text())["scripts"]["gen:types"]
    argv = shlex.split(script)
    assert argv[0] == "openapi-typescript" and "-o" in argv, script
    out = tmp_path / "api.gen.ts"
    argv[argv.index("-o") + 1] = str(out)
    gen = subprocess.run(
        [str(LABEXT / "node_modules" / ".bin" / "openapi-typescript"), *argv[1:]],
        cwd=LABEXT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert gen.returncode == 0, gen.stdout + gen.stderr
    assert out.read_text() == GENERATED_TS.read_text(), (
        "src/api/api.gen.ts is stale: run `jlpm gen:types` in labextension/"
    )


def test_every_operation_documents_its_answers_and_parameters() -> None:
    doc = openapi_document("/", ROUTES)
    schemas = doc["components"]["schemas"]
    ops = [(p, meth, op) for p, item in doc["paths"].items() for meth, op in item.items()]
    assert len(ops) == 35
    for path, method, op in ops:
        ok = {c: r for c, r in op["responses"].items() if c.startswith("2")}
        assert len(ok) == 1, (path, method)
        (content,) = ok.values()
        assert content.get("content"), (path, method)
        for media, body in content["content"].items():
            assert "schema" in body, (path, method, media)
        if "application/json" in content["content"]:
            ref = content["content"]["application/json"]["schema"]["$ref"]
            assert ref.rsplit("/", 1)[1] in schemas
        assert op["responses"]["4XX"]["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/Error"}
        for name in re.findall(r"{(\w+)}", path):
            (param,) = [p for p in op["parameters"] if p["name"] == name and p["in"] == "path"]
            assert "pattern" in param["schema"] or "enum" in param["schema"], (path, name)
    params = {(p, meth): {q["name"]: q for q in op["parameters"]} for p, meth, op in ops}
    runs = params[("/gpuplat/api/runs", "get")]
    assert runs["limit"]["schema"] | {} == {"type": "integer", "minimum": 1, "maximum": 1000, "default": 100}
    assert set(runs["status"]["schema"]["items"]["enum"]) == {s.value for s in m.Status}
    assert set(runs["phase"]["schema"]["items"]["enum"]) == {p.value for p in Phase}
    assert set(runs) == {
        "project",
        "status",
        "phase",
        "queue",
        "user",
        "q",
        "kind",
        "parent",
        "notebook",
        "before",
        "limit",
    }
    assert set(params[("/gpuplat/api/runs/{run_id}/logs", "get")]) == {"run_id", "follow", "offset", "format"}
    assert set(params[("/gpuplat/api/events", "get")]) == {"since", "limit", "heartbeat"}
    assert set(params[("/gpuplat/api/compare", "get")]) == {"runs", "metrics", "max_points"}
    assert set(params[("/gpuplat/api/config", "put")]) == {"dry_run"}
    run_id = params[("/gpuplat/api/runs/{run_id}", "get")]["run_id"]["schema"]
    assert run_id["pattern"] == "^[A-Za-z0-9_-]{1,64}$"
    action = params[("/gpuplat/api/queues/{name}/{action}", "post")]
    assert action["action"]["schema"]["enum"] == ["pause", "resume"]
    assert action["name"]["schema"]["pattern"] == "^[^/]{1,200}$"
    events = doc["paths"]["/gpuplat/api/events"]["get"]["responses"]["200"]["content"]
    assert list(events) == ["text/event-stream"]
    assert doc["paths"]["/gpuplat/api/runs"]["post"]["responses"]["201"]


@pytest.fixture
def executor_class() -> str | None:
    return None


@pytest.fixture
def jp_server_config(jp_server_config: dict[str, Any], executor_class: str | None) -> dict[str, Any]:
    if executor_class:
        jp_server_config["GpuPlat"]["executor_class"] = executor_class
    return jp_server_config


@pytest.mark.parametrize("executor_class", ["jupyter_gpuplat.executors.fake.FakeClusterExecutor"])
async def test_a_count_the_executor_does_not_have_is_null(api: Any) -> None:
    """An executor that places work itself (Kubernetes) has no free-GPU number: null, never a sentinel."""
    cap = await api.ok("GET", "capacity")
    assert cap["executor"] == "fake-cluster" and cap["free_gpus"] is None
    for n in range(3):  # concurrency 2: the third waits
        await api.submit(command=["true"], name=f"n{n}")
    runs = (await api.ok("GET", "runs", limit=3))["runs"]
    waiting = next(r for r in runs if r["status"] == "queued")
    ex = await api.ok("GET", f"runs/{waiting['id']}/explain")
    assert ex["layer"] == "queue" and ex["queue_usage"]["free_gpus"] is None, ex
    assert "1073741824" not in json.dumps([cap, ex, await api.ok("GET", "queues")])


async def test_unknown_paths_under_the_api_are_json_404s(api: Any) -> None:
    for method, path in [("POST", "queues/x/bogus"), ("GET", "runs/a.b"), ("DELETE", "nothing/here"), ("GET", "")]:
        code, body = await api(method, path)
        assert code == 404, (method, path, code, body)
        assert set(body["error"]) == {"code", "message", "hint"} and "openapi.json" in body["error"]["hint"]
    code, body = await api("PATCH", "runs", raw=b"{}")
    assert code == 405 and body["error"]["code"]


# ---- generated requests against a real server --------------------------------------------------

EXAMPLES_PER_OPERATION = 12


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    root = tmp_path_factory.mktemp("openapi")
    cfg = yaml.safe_load(EXAMPLE.read_text())
    for q in cfg["queues"]:
        q["paused"] = True  # generated submissions wait; nothing generated ever runs
    config_file = root / "platform.yaml"
    config_file.write_text(yaml.safe_dump(cfg))
    srv = ServerProcess(root, config_file=config_file)
    srv.start()
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture(scope="module")
def known(server: ServerProcess) -> dict[str, list[str]]:
    """Names and ids that exist, so generated requests reach past the 404s."""
    runs = [server.ok("POST", "runs", "bob", {"project": "team-a", "command": ["true"]})["id"] for _ in range(2)]
    return {
        "run_id": runs,
        "name": ["team-a-train", "single-gpu", "team-a", "interactive"],
        "action": ["pause", "resume"],
        "path": ["output.log", "nothing.txt", "../x"],
    }


def _operations() -> list[tuple[str, str]]:
    doc = openapi_document("/", ROUTES)
    return [(path, method) for path, item in doc["paths"].items() for method in item]


def _validator(doc: dict[str, Any], schema: dict[str, Any]) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator({**schema, "components": doc["components"]})


def from_schema(schema: dict[str, Any], components: dict[str, Any], depth: int = 0) -> st.SearchStrategy[Any]:
    """Values a JSON Schema (the subset pydantic writes) allows."""
    if "$ref" in schema:
        target = components[schema["$ref"].rsplit("/", 1)[1]]
        return st.none() if depth > 4 else st.deferred(lambda: from_schema(target, components, depth + 1))
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    if "const" in schema:
        return st.just(schema["const"])
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return st.one_of([from_schema(s, components, depth) for s in schema[key]])
    kind = schema.get("type")
    if isinstance(kind, list):
        return st.one_of([from_schema({**schema, "type": k}, components, depth) for k in kind])
    if kind == "string":
        if "pattern" in schema:
            return st.from_regex(schema["pattern"], fullmatch=True)
        return st.text(min_size=schema.get("minLength", 0), max_size=min(schema.get("maxLength", 12), 12))
    if kind == "integer":
        return st.integers(schema.get("minimum"), schema.get("maximum"))
    if kind == "number":
        return st.floats(schema.get("minimum"), schema.get("maximum"), allow_nan=False, allow_infinity=False)
    if kind == "boolean":
        return st.booleans()
    if kind == "null":
        return st.none()
    if kind == "array":
        items = from_schema(schema.get("items", {}), components, depth + 1)
        return st.lists(items, min_size=schema.get("minItems", 0), max_size=max(schema.get("minItems", 0), 3))
    if kind == "object" or "properties" in schema:
        props = schema.get("properties", {})
        required = set(schema.get("required", []))
        fixed = {k: from_schema(v, components, depth + 1) for k, v in props.items() if k in required}
        optional = {k: from_schema(v, components, depth + 1) for k, v in props.items() if k not in required}
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict) and not props:
            values = from_schema(extra, components, depth + 1)
            return st.dictionaries(st.text(min_size=1, max_size=8), values, max_size=3)
        return st.fixed_dictionaries(fixed, optional=optional)
    return st.none() | st.booleans() | st.integers() | st.text(max_size=8)


def _value(v: Any) -> str:
    if isinstance(v, list):
        return ",".join(_value(x) for x in v)
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


@st.composite
def _request(draw: st.DrawFn, doc: dict[str, Any], path: str, method: str, known: dict[str, list[str]]) -> Any:
    op = doc["paths"][path][method]
    components = doc["components"]["schemas"]
    url_path, query = path, {}
    for p in op["parameters"]:
        if p["in"] == "path":
            raw = draw(st.sampled_from(known[p["name"]]) | from_schema(p["schema"], components))
            url_path = url_path.replace("{" + p["name"] + "}", quote(str(raw), safe=""))
        elif p.get("required") or draw(st.booleans()):
            # mostly what the document allows; sometimes anything, which must be a 4xx
            query[p["name"]] = _value(draw(from_schema(p["schema"], components) | st.text(max_size=6)))
    body: Any = None
    if "requestBody" in op:
        body = draw(from_schema(op["requestBody"]["content"]["application/json"]["schema"], components) | st.just({}))
    # reads and previews as a member and as a platform admin; writes as a member only (refused:
    # the queues stay paused, so nothing generated ever runs)
    reads = method == "get" or path.endswith("/preview")
    user = draw(st.sampled_from(["bob", "ops"])) if reads else "bob"
    return url_path, query, body, user


def _check(server: ServerProcess, doc: dict[str, Any], path: str, method: str, req: Any) -> None:
    url_path, query, body, user = req
    op = doc["paths"][path][method]
    streaming = "text/event-stream" in json.dumps(op["responses"]) or path.endswith("{path}")
    resp = requests.request(
        method.upper(),
        server.url.rstrip("/") + url_path,
        params=query,
        data=None if body is None else json.dumps(body),
        headers={"Authorization": f"token tok-{user}"},
        timeout=30,
        stream=streaming,
    )
    try:
        ctype = resp.headers.get("Content-Type", "")
        assert resp.status_code < 500, (method, url_path, query, body, resp.status_code, resp.text[:2000])
        if 400 <= resp.status_code < 500:
            assert ctype.startswith("application/json"), (method, url_path, resp.status_code, ctype)
            _validator(doc, {"$ref": "#/components/schemas/Error"}).validate(resp.json())
            return
        documented = op["responses"].get(str(resp.status_code))
        assert documented is not None, (method, url_path, resp.status_code)
        media = ctype.split(";")[0]
        assert media in documented["content"], (method, url_path, ctype)
        if media == "application/json":
            _validator(doc, documented["content"][media]["schema"]).validate(resp.json())
    finally:
        resp.close()


@pytest.mark.parametrize(("path", "method"), _operations())
def test_generated_requests_get_answers_their_schemas_allow(
    server: ServerProcess, known: dict[str, list[str]], path: str, method: str
) -> None:
    doc = server.ok("GET", "openapi.json")

    @settings(
        max_examples=EXAMPLES_PER_OPERATION,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(req=_request(doc, path, method, known))
    def check(req: Any) -> None:
        _check(server, doc, path, method, req)

    check()
