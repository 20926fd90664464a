"""What the widget and notebook-client tests share: a module's server, alice's client, no thread left,
and cells run in a fresh kernel through nbclient (`run_cells`, `texts`).

Each test module still declares its own fixtures (their scope and names are the module's), as
one-line wrappers of these; `client` (alice's) is tests/client/conftest.py's.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest
import yaml
from nbclient import NotebookClient

from jupyter_gpuplat.client import Client

from .conftest import EXAMPLE
from .server import ServerProcess


def served(tmp_path_factory: pytest.TempPathFactory, name: str, **server: Any) -> Iterator[ServerProcess]:
    """A real server (in its own process) for one test module."""
    srv = ServerProcess(tmp_path_factory.mktemp(name), **server)
    srv.start()
    yield srv
    srv.stop()


def alice(server: ServerProcess) -> Iterator[Client]:
    c = Client(url=server.url, token="tok-alice")
    yield c
    c.session.close()


def threads_ended(prefix: str = "gpuplat-") -> None:
    """Every widget thread ends once its run ended or its widget was closed."""
    for t in threading.enumerate():
        if t.name.startswith(prefix):
            t.join(10)
            assert not t.is_alive(), f"thread {t.name} still running after the test"


def launcher_config(root: Path) -> Path:
    """The example platform plus a preset that locks its queue (`pinned`) and one that goes
    where team-a may not (`elsewhere`); team-a's default preset is single-gpu."""
    cfg = yaml.safe_load(EXAMPLE.read_text())
    cfg["presets"] += [
        {"name": "pinned", "kind": "job", "queue": "interactive", "resources": {"gpu": 1}, "locked": ["queue"]},
        {"name": "elsewhere", "kind": "job", "queue": "team-b-train"},
    ]
    team_a = next(p for p in cfg["projects"] if p["name"] == "team-a")
    team_a["allowed_presets"] += ["pinned", "elsewhere"]
    team_a["default_presets"] = ["single-gpu"]
    root.mkdir(parents=True, exist_ok=True)
    config = root / "platform.yaml"
    config.write_text(yaml.safe_dump(cfg))
    return config


def run_cells(
    server: ServerProcess, cells: list[str], cwd: Path | None = None, user: str = "alice"
) -> list[list[dict[str, Any]]]:
    """Execute cells in a fresh kernel in `cwd` (as a notebook there; the server's root by default) that
    reaches the server through GPUPLAT_URL/TOKEN as `user`; the outputs per cell."""
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    env = {**server.env, "GPUPLAT_URL": server.url, "GPUPLAT_TOKEN": f"tok-{user}"}
    path = str(cwd or server.root)
    client = NotebookClient(nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": path}})
    client.execute(env=env)
    return [c.get("outputs", []) for c in nb.cells]


def texts(outputs: list[dict[str, Any]]) -> str:
    """A cell's outputs as one text: streams, HTML or plain displays, "ERROR <name>" for errors."""
    out = []
    for o in outputs:
        if o["output_type"] == "stream":
            out.append(o["text"])
        elif o["output_type"] in ("display_data", "execute_result"):
            out.append(o["data"].get("text/html") or o["data"].get("text/plain", ""))
        elif o["output_type"] == "error":
            out.append("ERROR " + o["ename"])
    return "".join(out)
