"""Shared fixtures: a real Jupyter server with the extension, real SQLite, real subprocesses.

Fixtures (here unless named):
- `own_jupyter_data_dir` (session, autouse): JUPYTER_DATA_DIR in a temp dir, not the developer's.
- `close_kernel_sockets` (autouse): closes the kernel websockets (kernel_ws.py) a failed test left open.
- `platform_config_file`: the platform file the server loads (the example); override per module.
- `jp_server_config`: pytest-jupyter's server config with the extension, the token-map identity
  (`TOKENS`: `tok-<user>`), a fresh SQLite store and artifacts root under `tmp_path`, 4 GPUs.
- `api`: `Api`, REST calls as a user (`await api("GET", "runs", user="bob")` → (status, json);
  `ok`, `submit`, `run`, `wait_status`, `wait_log`); kills runs the test left behind.
- `platform`: the running server's platform object (engine, store, executor).
- `pg_url` (session), `pg_db_url` (pg.py): a throw-away PostgreSQL server, a fresh database per test.
- `hub`, `hub_platform_config` (module, hubenv.py; a module imports them): a real JupyterHub with
  the control plane as its service.
- `lab`, `session_lab`, `browser_context`, `lab_page`, `session_page`, `screenshots` (ui/conftest.py): a
  JupyterLab server subprocess and Chromium driven by Playwright, package-scoped.
- `accounts`, `reachable`, `machine`, `user_mode_config` (security/conftest.py): real Unix accounts
  and a user-mode server's settings (its helpers `submit`, `wait_final`, `log_of` drive one).
Helpers: waiting.py `until` (sync) and `wait_for` (async), the one way tests wait on a condition;
`Api` and `Http` (in-process REST calls), `assert_refused` (a 4xx in the error shape),
server.py `ServerProcess`, k8s.py (an emulated cluster laid out like deploy/kubernetes/),
fake_engine.py `Harness` (the engine over the fake executor).

Markers, set here at collection (`pytest_collection_modifyitems`; registered in pyproject.toml)
so that a developer can leave an area out: `python -m pytest -m "not browser and not hub and
not slow"`.
- `browser`: tests/ui and any test marked so (Chromium through Playwright).
- `postgres`: uses `pg_url` (so `pg_db_url` and `hub` too) or a `postgresql` parameter, or is marked so.
- `kubernetes`: tests/executors/kubernetes, and any file that imports the Kubernetes emulator
  (kube_emulator) or k8s.py.
- `hub`: uses the `hub` fixture (a real JupyterHub).
- `slow`: named in `SLOW` below (measured over 20 s).
Markers only select; they never reorder, so ui/'s package-scoped Playwright loop still comes last.
"""

from __future__ import annotations

import ast
import functools
import json
import os
import signal
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

# Real PostgreSQL for the store tests (session server, one fresh database per test).
from .pg import pg_db_url, pg_url  # noqa: F401
from .waiting import wait_for

pytest_plugins = ("pytest_jupyter.jupyter_server",)

TESTS = Path(__file__).resolve().parent
EXAMPLE = TESTS.parent / "jupyter_gpuplat" / "platform.example.yaml"
TOKENS = {f"tok-{u}": u for u in ("ops", "alice", "bob", "carol", "dave", "erin", "frank", "mallory")}


@pytest.fixture(autouse=True)
def close_kernel_sockets() -> Iterator[None]:
    """Kernel websockets a test left open (it failed before closing them) are closed with it."""
    yield
    from .kernel_ws import KernelSocket  # here: kernel_ws → server → conftest

    KernelSocket.close_all()


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
        elif method in ("POST", "PUT", "PATCH"):
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
    # a refused run request also lists every refusing rule and what the policy would accept
    assert {"code", "message", "hint"} <= set(err) <= {"code", "message", "hint", "rules", "alternatives"}, err
    if "rules" in err:
        assert err["rules"] and all(set(r) == {"rule", "limit", "message"} for r in err["rules"]), err
        assert err["rules"][0]["rule"] == err["code"] and isinstance(err["alternatives"], list), err
    for w in words:
        assert w in err["message"], (w, err["message"])


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


# ---- markers by area -------------------------------------------------------------------------

# Tests over 20 s (setup + call + teardown, `--durations` on the shared 2-core dev machine):
# a module's path, a test (all its parameters) or one parametrized case, relative to tests/.
# Only the modules measured so far; add one when a run shows it over 20 s.
SLOW: frozenset[str] = frozenset(
    {
        "service/test_crash_loop.py::test_sigkill_loop_loses_and_doubles_nothing",
        "service/test_failover.py::test_the_standby_takes_over_and_every_run_is_dispatched_once_and_finishes",
        "executors/kubernetes/test_kubernetes_restart.py::test_restart_reattaches_to_running_jobs_and_finishes_their_records",
        "executors/kubernetes/test_kubernetes_sessions.py::test_a_pod_kernel_s_cell_sent_before_ready_keeps_the_lease_busy",
        "executors/kubernetes/test_rollout_kubernetes.py::test_presets_without_the_gpu_toleration_fail_with_the_schedulers_message",
        "service/test_sessions.py::test_a_server_killed_with_a_running_session_keeps_its_record_and_re_adopts_the_kernel",
    }
)


@functools.cache
def _imported(path: Path) -> frozenset[str]:
    """Every module a test file imports, at any depth (`.k8s` as `tests.k8s`), read from its source."""
    names: set[str] = set()
    package = ".".join(path.relative_to(TESTS.parent).parent.parts)
    for node in ast.walk(ast.parse(path.read_bytes())):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
            names.add(f"{base}.{node.module}" if node.level and node.module else node.module or base)
    return frozenset(names)


def _area_markers(item: pytest.Item) -> set[str]:
    marks: set[str] = set()
    path = item.path.relative_to(TESTS) if item.path.is_relative_to(TESTS) else item.path
    if path.parts[:1] == ("ui",):
        marks.add("browser")
    if path.parts[:2] == ("executors", "kubernetes"):
        marks.add("kubernetes")
    names = set(getattr(item, "fixturenames", ()))
    params = getattr(getattr(item, "callspec", None), "params", {})
    # pg_url, or a store fixture parametrized over backends that asks for pg_db_url when it runs
    if "pg_url" in names or "postgresql" in params.values():
        marks.add("postgres")
    if "hub" in names:
        marks.add("hub")
    if item.path.suffix == ".py" and any(
        m == "kube_emulator" or m.startswith("kube_emulator.") or m == "tests.k8s" for m in _imported(item.path)
    ):
        marks.add("kubernetes")
    test = item.nodeid.removeprefix("tests/")
    if {path.as_posix(), test, test.partition("[")[0]} & SLOW:
        marks.add("slow")
    return marks


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # Adds markers only: the order of `items` is left as collected.
    for item in items:
        for name in sorted(_area_markers(item) - {m.name for m in item.iter_markers()}):
            item.add_marker(name)
