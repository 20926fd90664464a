"""The lint gates are not tests: ruff, import-linter (the layers, no circles, the Kubernetes
emulator's one-way imports) and mypy run in `.ci/lint`. What stays here is that both ways in keep
them: the README's test command and CI (`.ci/run`) call `.ci/lint` before pytest, so a newcomer's
one command still checks everything it checked when the gates ran inside pytest.
"""

from __future__ import annotations

import ast
import inspect
import os
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _readme_test_command() -> str:
    readme = (ROOT / "README.md").read_text()
    found = re.search(r"\*\*Run the whole test suite\*\*.*?```bash\n(.+?)\n```", readme, re.S)
    assert found, "README.md: the 'Run the whole test suite' command block is missing"
    return found.group(1)


def test_the_readme_test_command_runs_the_lint_gates_then_pytest() -> None:
    command = _readme_test_command()
    assert re.search(r"&& \.ci/lint && python -m pytest\b", command), command


def test_ci_runs_the_lint_gates_then_pytest() -> None:
    steps = [line for line in (ROOT / ".ci" / "run").read_text().splitlines() if line and not line.startswith("#")]
    lint = steps.index(".ci/lint")
    assert steps[lint + 1].startswith("python -m pytest"), steps[lint:]


def test_the_lint_script_runs_every_gate() -> None:
    script = ROOT / ".ci" / "lint"
    assert os.access(script, os.X_OK), f"{script} is not executable"
    text = script.read_text()
    for gate in ('ruff" check', 'ruff" format --check', 'lint-imports" --no-cache', "cd emulator", 'mypy"'):
        assert gate in text, gate


def test_layers_name_rooms_not_files() -> None:
    """The layers contract names the package's rooms (at most 8), each a folder: a new module joins a room."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    layers = next(c for c in config["tool"]["importlinter"]["contracts"] if c["type"] == "layers")["layers"]
    names = [n.strip(" ()") for layer in layers for n in layer.split("|")]
    assert len(names) <= 8, names
    for name in names:
        assert (ROOT / name.replace(".", "/") / "__init__.py").is_file(), f"{name} is not a room (a package)"


def _engine_doors() -> set[str]:
    """What the service may touch on an Engine: its read door, its config writes, and its own methods."""
    from jupyter_gpuplat.engine.engine import Engine

    methods = {n for n, v in vars(Engine).items() if not n.startswith("_") and inspect.isfunction(v)}
    return {"reads", "admin", *methods}


def test_the_service_and_clients_use_the_engine_s_two_doors_only() -> None:
    """Handlers read through `engine.reads` and act through the engine's commands; none reaches the
    store, the snapshot, the executor, the bus or the sessions behind them (a standby could serve the reads)."""
    doors = _engine_doors()
    assert {"submit", "stop", "preview"} <= doors and "store" not in doors and "sessions" not in doors
    reached: list[str] = []
    for room in ("service", "cli", "notebook", "client"):
        for path in sorted((ROOT / "jupyter_gpuplat" / room).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if not (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute | ast.Name)):
                    continue
                owner = node.value.attr if isinstance(node.value, ast.Attribute) else node.value.id
                if owner == "engine" and node.attr not in doors:
                    reached.append(f"{path.relative_to(ROOT)}:{node.lineno}: engine.{node.attr}")
    assert not reached, "\n".join(reached)


# The HTTP client libraries, and who may import them: the client room's HTTP core, and the
# remote-mode forwarder (a proxy, not a client of the API). import-linter's contract sees the
# top-level packages; this sees `tornado.httpclient` too, which it cannot tell from tornado.
HTTP_LIBRARIES = ("requests", "urllib3", "httpx", "tornado.httpclient", "tornado.simple_httpclient", "aiohttp")
HTTP_IMPORTERS = ("jupyter_gpuplat/client/http/", "jupyter_gpuplat/service/remote/forward.py")


def _imported(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if isinstance(node, ast.ImportFrom) and node.module and not node.level:
        return [node.module] + [f"{node.module}.{a.name}" for a in node.names]
    return []


def test_only_the_http_core_and_the_forwarder_import_an_http_client() -> None:
    found: list[str] = []
    for path in sorted((ROOT / "jupyter_gpuplat").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith(HTTP_IMPORTERS):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            for name in _imported(node):
                if any(name == lib or name.startswith(lib + ".") for lib in HTTP_LIBRARIES):
                    found.append(f"{rel}:{node.lineno}: {name}")
    assert not found, "\n".join(found)
