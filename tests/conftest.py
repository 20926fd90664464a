"""Shared fixtures: a real Jupyter server with the extension, real SQLite, real subprocesses."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

# Real PostgreSQL for the store tests (session server, one fresh database per test).
from .pg import pg_db_url, pg_url  # noqa: F401

pytest_plugins = ("pytest_jupyter.jupyter_server",)

EXAMPLE = Path(__file__).resolve().parents[1] / "jupyter_gpuplat" / "platform.example.yaml"
TOKENS = {f"tok-{u}": u for u in ("ops", "alice", "bob", "carol", "dave", "erin", "frank", "mallory")}


@pytest.fixture(scope="session", autouse=True)
def own_jupyter_data_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Not the developer's Jupyter data dir: the Launcher remembers choices there (gpuplat/launcher.json)."""
    path = tmp_path_factory.mktemp("jupyter-data")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("JUPYTER_DATA_DIR", str(path))
        yield path


@pytest.fixture
def platform_config_file() -> Path:
    return EXAMPLE


@pytest.fixture
def jp_server_config(tmp_path: Path, platform_config_file: Path) -> dict[str, Any]:
    return {
        "ServerApp": {
            "jpserver_extensions": {"jupyter_gpuplat": True},
            "allow_unauthenticated_access": False,
            "identity_provider_class": "jupyter_gpuplat.auth.TokenMapIdentityProvider",
        },
        "TokenMapIdentityProvider": {"tokens": TOKENS},
        "GpuPlat": {
            "config_file": str(platform_config_file),
            "db_url": f"sqlite:///{tmp_path / 'gpuplat.db'}",
            "artifacts_root": str(tmp_path / "artifacts"),
            "default_user": "ops",
        },
        "LocalExecutor": {"gpus": 4, "stop_grace_seconds": 2.0},
    }


class Api:
    """Calls the REST API as a given user; returns (status, json) and never raises on 4xx."""

    def __init__(self, fetch: Callable[..., Awaitable[Any]]) -> None:
        self._fetch = fetch

    async def __call__(
        self, method: str, path: str, user: str = "alice", body: Any = None, raw: bytes | None = None, **params: Any
    ) -> tuple[int, Any]:
        kw: dict[str, Any] = {"method": method, "raise_error": False, "params": params or None}
        if raw is not None:
            kw["body"] = raw
        elif body is not None:
            kw["body"] = json.dumps(body)
        elif method in ("POST", "PUT"):
            kw["body"] = b"{}"
        resp = await self._fetch(
            "gpuplat", "api", *path.split("/"), headers={"Authorization": f"token tok-{user}"}, **kw
        )
        ctype = resp.headers.get("Content-Type", "")
        data = json.loads(resp.body) if resp.body and "json" in ctype else resp.body
        return resp.code, data

    async def ok(self, method: str, path: str, user: str = "alice", body: Any = None, **params: Any) -> Any:
        code, data = await self(method, path, user, body, **params)
        assert code < 300, (code, data)
        return data

    async def submit(self, user: str = "alice", **body: Any) -> dict[str, Any]:
        body.setdefault("project", "team-a")
        return await self.ok("POST", "runs", user, body)

    async def run(self, run_id: str, user: str = "alice") -> dict[str, Any]:
        return await self.ok("GET", f"runs/{run_id}", user)

    async def wait_status(
        self, run_id: str, *statuses: str, user: str = "alice", timeout: float = 20
    ) -> dict[str, Any]:
        async def cond() -> dict[str, Any] | None:
            r = await self.run(run_id, user)
            return r if r["status"] in statuses else None

        return await wait_for(cond, timeout, f"run {run_id} to reach {statuses}")

    async def wait_log(self, run_id: str, text: str, user: str = "alice", timeout: float = 20) -> bytes:
        async def cond() -> bytes | None:
            log = await self.ok("GET", f"runs/{run_id}/logs", user, format="text")
            return log if text.encode() in log else None

        return await wait_for(cond, timeout, f"{text!r} in the log of {run_id}")


async def wait_for(cond: Callable[[], Awaitable[Any]], timeout: float = 20, what: str = "condition") -> Any:
    """Poll an async condition until it returns something truthy, or fail at the deadline."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        value = await cond()
        if value:
            return value
        if loop.time() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0.02)


@pytest.fixture
def api(jp_fetch: Any, jp_serverapp: Any) -> Any:
    yield Api(jp_fetch)
    # Runs outlive the server by design (restart re-attaches); tests must not leak them.
    platform = jp_serverapp.web_app.settings.get("gpuplat")
    if platform is not None:
        for a in list(platform.engine.active.values()):
            pid = (a.handle or {}).get("pid")
            if pid:
                try:
                    os.killpg(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass


@pytest.fixture
def platform(jp_serverapp: Any) -> Any:
    return jp_serverapp.web_app.settings["gpuplat"]
