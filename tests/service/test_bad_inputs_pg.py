"""On PostgreSQL a stored NUL breaks every later read (`unsupported Unicode escape sequence`): refused at the door."""

from __future__ import annotations

from typing import Any

import pytest

from ..conftest import Http, assert_refused

RUN = {"project": "team-a", "command": "true"}


@pytest.fixture
def jp_server_config(jp_server_config: dict[str, Any], pg_db_url: str) -> dict[str, Any]:
    """This module only: the Jupyter server's store lives in a fresh PostgreSQL database."""
    return {**jp_server_config, "GpuPlat": {**jp_server_config["GpuPlat"], "db_url": pg_db_url}}


async def test_nul_anywhere_in_a_body_is_refused_and_reads_keep_working_on_postgresql(
    jp_fetch: Any, platform: Any
) -> None:
    assert platform.store.engine.dialect.name == "postgresql"
    http = Http(jp_fetch)
    for method, path, body, where in (
        ("POST", "runs", {**RUN, "params": {"note": "x\x00"}}, "params.note"),
        ("POST", "runs", {**RUN, "placement": {"affinity": {"k": "x\x00"}}}, "placement.affinity.k"),
        ("PUT", "queues/q1", {"name": "q1", "description": "a\x00"}, "description"),
    ):
        code, _, data = await http(method, path, user="ops", body=body)
        assert_refused(code, data, where, "NUL")
    code, _, data = await http("GET", "runs", user="ops")
    assert code == 200 and data["runs"] == [], data
    code, _, data = await http("GET", "config", user="ops")
    assert code == 200 and [q["name"] for q in data["config"]["queues"]] == [
        "team-a-train",
        "team-b-train",
        "interactive",
    ]
