"""A real Jupyter server with the extension, as a subprocess (for restart and CLI tests)."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import requests

from .conftest import EXAMPLE, TOKENS
from .waiting import until


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ServerProcess:
    """Same data dir, db and artifacts across restarts; a new process each start()."""

    def __init__(
        self, root: Path, gpus: int = 4, config_file: Path = EXAMPLE, extra_config: dict[str, Any] | None = None
    ) -> None:
        self.root = root
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/"
        self.token = "server-token"
        self.proc: subprocess.Popen[bytes] | None = None
        self._log: Any = None
        conf_dir = root / "jupyter-config"
        conf_dir.mkdir(parents=True, exist_ok=True)
        config: dict[str, Any] = {
            "ServerApp": {
                "jpserver_extensions": {"jupyter_gpuplat": True},
                "identity_provider_class": "jupyter_gpuplat.auth.TokenMapIdentityProvider",
                "root_dir": str(root),
                "open_browser": False,
                "port_retries": 0,
            },
            "IdentityProvider": {"token": self.token},
            "TokenMapIdentityProvider": {"tokens": TOKENS, "token": self.token},
            "GpuPlat": {
                "config_file": str(config_file),
                "db_url": f"sqlite:///{root / 'gpuplat.db'}",
                "artifacts_root": str(root / "artifacts"),
                "default_user": "alice",
            },
            "LocalExecutor": {"gpus": gpus, "stop_grace_seconds": 2.0},
        }
        for section, values in (extra_config or {}).items():  # e.g. another executor_class and its settings
            config.setdefault(section, {}).update(values)
        (conf_dir / "jupyter_server_config.json").write_text(json.dumps(config))
        self.env = {
            **os.environ,
            "JUPYTER_CONFIG_DIR": str(conf_dir),
            "JUPYTER_RUNTIME_DIR": str(root / "runtime"),
            "JUPYTER_DATA_DIR": str(root / "data"),
            "JUPYTER_PLATFORM_DIRS": "1",
        }
        self.env.pop("GPUPLAT_URL", None)
        self.env.pop("COLUMNS", None)  # CLI tables wrap to it; tests read them at their natural width
        self.env.pop("GPUPLAT_TOKEN", None)

    def start(self, timeout: float = 60, ready_status: int = 200) -> None:
        """Start and wait until GET whoami answers `ready_status` (a server refusing the platform answers 409)."""
        self._close_log()
        self._log = log = open(self.root / "server.log", "ab")  # closed in stop()/kill()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "jupyter_server", "--allow-root", "--ip=127.0.0.1", f"--port={self.port}"],
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=self.root,
        )
        proc = self.proc

        def answering() -> bool:
            if proc.poll() is not None:
                raise RuntimeError(f"server exited: {(self.root / 'server.log').read_text()[-3000:]}")
            with socket.socket() as probe:
                listening = probe.connect_ex(("127.0.0.1", self.port)) == 0
            return listening and self.call("GET", "whoami")[0] == ready_status

        until(answering, "the server to answer", timeout)

    def kill(self) -> None:
        """SIGKILL: no shutdown hooks run, as in a crash."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)
        self._close_log()

    def _close_log(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(30)
        self._close_log()

    def gpuplat(self, *args: str, cwd: Path | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
        """The real `gpuplat` CLI against this server; from `cwd` (default: the Jupyter root), as a user's shell."""
        proc = subprocess.run(
            [sys.executable, "-m", "jupyter_gpuplat.cli", *args],
            env=self.env,
            cwd=cwd or self.root,  # submit sends the current directory: it must lie under the Jupyter root
            capture_output=True,
            text=True,
            timeout=60,
        )
        if check:
            assert proc.returncode == 0, (proc.returncode, proc.stdout, proc.stderr)
        return proc

    def call(self, method: str, path: str, user: str = "alice", body: Any = None, **params: Any) -> tuple[int, Any]:
        r = requests.request(
            method,
            f"{self.url}gpuplat/api/{path}",
            json=body,
            params=params,
            headers={"Authorization": f"token tok-{user}"},
            timeout=30,
        )
        return r.status_code, (r.json() if "json" in r.headers.get("Content-Type", "") else r.content)

    def ok(self, method: str, path: str, user: str = "alice", body: Any = None, **params: Any) -> Any:
        code, data = self.call(method, path, user, body, **params)
        assert code < 300, (code, data)
        return data

    def stop_all_runs(self, timeout: float = 60) -> None:
        """Stop every run not yet final (as the platform admin `ops`) and wait until none is left:
        a run's processes (a session's kernel) outlive the server otherwise."""
        active = "created,queued,dispatched,starting,running,stopping"
        for r in self.ok("GET", "runs", user="ops", status=active, limit=1000)["runs"]:
            self.call("POST", f"runs/{r['id']}/stop", user="ops")
        until(
            lambda: not self.ok("GET", "runs", user="ops", status=active, limit=1000)["runs"],
            "no run left active after they were stopped",
            timeout,
        )

    def wait_status(self, run_id: str, *statuses: str, timeout: float = 30) -> dict[str, Any]:
        last: dict[str, Any] = {}

        def reached() -> dict[str, Any] | None:
            last.update(self.ok("GET", f"runs/{run_id}"))
            return dict(last) if last["status"] in statuses else None

        try:
            return until(reached, f"run {run_id} to reach {statuses}", timeout)
        except AssertionError as e:
            raise AssertionError(f"run {run_id} is {last.get('status')}, not {statuses}, after {timeout}s") from e


def parse_sse(text: str) -> list[dict[str, str]]:
    """A text/event-stream body read back: one dict per event (its fields; `data` lines joined)."""
    events = []
    for block in text.split("\n\n"):
        ev: dict[str, str] = {}
        for line in block.split("\n"):
            if line.startswith(":") or not line:
                continue
            key, _, value = line.partition(": ")
            ev[key] = ev[key] + "\n" + value if key in ev else value
        if ev:
            events.append(ev)
    return events


def cells_of(text: str, ncols: int) -> list[list[str]]:
    """A printed table read back: each row's cells, their wrapped pieces joined by spaces.

    A last column printed under its row (table(tail=True) when narrow) is read back as the last cell."""
    lines = text.splitlines()
    tail = len(lines) > 1 and re.match(r"    \S", lines[1]) is not None
    starts = [m.start() for m in re.finditer(r"\S+(?: \S+)*", lines[0])]
    assert len(starts) == ncols - tail, lines[0]
    rows: list[list[list[str]]] = []
    for line in lines:
        if tail and re.match(r"    \S", line):
            rows[-1][-1].append(line.strip())
            continue
        pieces = [line[a:b].strip() for a, b in zip(starts, [*starts[1:], None], strict=True)]
        if pieces[0] or not rows:
            rows.append([[] for _ in range(ncols)])
        for i, piece in enumerate(pieces):
            if piece:
                rows[-1][i].append(piece)
    return [[" ".join(c) for c in row] for row in rows]
