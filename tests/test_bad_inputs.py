"""Bad input never gets a 5xx: a refusal in the error shape naming what was wrong, and nothing changes.

First one named regression test per defect of issue 9 (items 3-9), then the table: bad bodies for
every writing endpoint and bad values for every query parameter of the reading ones.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from .conftest import wait_for

RUN = {"project": "team-a", "command": "true"}


class Http:
    """One request as a given user; the answer as (status, headers, body: JSON when it is JSON)."""

    def __init__(self, fetch: Any) -> None:
        self.fetch = fetch

    async def __call__(
        self,
        method: str,
        path: str,
        *,
        user: str = "alice",
        body: Any = None,
        raw: bytes | None = None,
        params: Any = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, Any, Any]:
        kw: dict[str, Any] = {"method": method, "raise_error": False, "params": params}
        if raw is not None:
            kw["body"] = raw
        elif body is not None:
            kw["body"] = json.dumps(body)
        elif method in ("POST", "PUT"):
            kw["body"] = b"{}"
        resp = await self.fetch(
            "gpuplat", "api", *path.split("/"), headers={"Authorization": f"token tok-{user}", **(headers or {})}, **kw
        )
        data: Any = resp.body
        if resp.body and "json" in resp.headers.get("Content-Type", ""):
            data = json.loads(resp.body)
        return resp.code, resp.headers, data


def assert_refused(code: int, body: Any, *words: str, status: int = 400) -> None:
    """A 4xx in the error shape whose message names every one of `words`."""
    assert code == status, (code, body)
    assert isinstance(body, dict) and set(body) == {"error"}, body
    err = body["error"]
    assert set(err) == {"code", "message", "hint"}, err
    for w in words:
        assert w in err["message"], (w, err["message"])


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
            assert_refused(code, data, "lr" if b"1e400" in raw else "finite")
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
        if not value.isascii() and not value.encode("latin-1", "ignore"):
            continue  # a header carries latin-1 only
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


async def test_nul_bytes_in_what_reaches_argv_env_or_paths_are_refused_at_submit(jp_fetch: Any) -> None:
    http = Http(jp_fetch)
    cases: list[tuple[dict[str, Any], str, str]] = [
        ({"env": [{"name": "A", "value": "x\x00y"}]}, "env[0].value", "NUL"),
        ({"env": {"A": "x\x00y"}}, "env[0].value", "NUL"),
        ({"command": "echo a\x00b"}, "command", "NUL"),
        ({"command": ["echo", "a\x00b"]}, "command", "NUL"),
        ({"command": None, "script": "t.py", "args": ["a\x00"]}, "args[0]", "NUL"),
        ({"working_dir": "a\x00b"}, "working_dir", "NUL"),
        ({"image": "busybox\x00"}, "image", "NUL"),
        ({"volumes": [{"name": "v", "mount_path": "/data\x00"}]}, "volumes[0].mount_path", "NUL"),
        ({"volumes": [{"name": "v", "host_path": "/tmp\x00"}]}, "volumes[0].host_path", "NUL"),
        ({"placement": {"node_selector": {"zone": "a\x00"}}}, "placement.node_selector.zone", "NUL"),
        ({"name": "a\x00b"}, "name", "control characters"),
    ]
    for extra, field, why in cases:
        body = {k: v for k, v in {**RUN, **extra}.items() if v is not None}
        code, _, data = await http("POST", "runs", body=body)
        assert_refused(code, data, field, why)
    code, _, data = await http("PUT", "presets/p1", user="ops", body={"name": "p1", "env": {"A": "\x00"}})
    assert_refused(code, data, "env[0].value", "NUL")
    assert await run_count(http) == 0
