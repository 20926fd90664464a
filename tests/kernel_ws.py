"""Talk to a kernel of a real Jupyter server the way JupyterLab does: its websocket.

`execute(server, kernel_id, code)` sends one execute_request on /api/kernels/{id}/channels
(the JSON protocol) and returns the text the cell printed and its final status.
`a_cell_sent_at_once_is_not_culled` is the check every session setup passes (embedded,
remote, Kubernetes): a long cell sent the moment the kernel exists keeps its lease.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, ClassVar

import requests
import websocket  # websocket-client, a jupyter_server dependency

from .server import ServerProcess
from .waiting import until


def _msg(msg_type: str, content: dict[str, Any], session: str) -> dict[str, Any]:
    header = {
        "msg_id": uuid.uuid4().hex,
        "msg_type": msg_type,
        "username": "test",
        "session": session,
        "version": "5.3",
        "date": "",
    }
    return {
        "header": header,
        "parent_header": {},
        "metadata": {},
        "content": content,
        "channel": "shell",
        "buffers": [],
    }


class KernelSocket:
    # Open sockets, closed by conftest's `close_kernel_sockets` after each test: a test that fails
    # before its `close()` must not leave its socket to be collected (and warned about) in another.
    opened: ClassVar[set[KernelSocket]] = set()

    def __init__(self, server: ServerProcess, kernel_id: str, timeout: float = 60) -> None:
        url = server.url.replace("http://", "ws://") + f"api/kernels/{kernel_id}/channels?token={server.token}"
        self.ws = websocket.create_connection(url, timeout=timeout)
        self.session = uuid.uuid4().hex
        KernelSocket.opened.add(self)

    def _recv(self, deadline: float, what: str) -> dict[str, Any]:
        """The next message, or a failure at the deadline (the server's pings would keep a plain recv waiting)."""
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"timed out waiting for {what}")
            self.ws.settimeout(min(left, 5.0))
            try:
                return dict(json.loads(self.ws.recv()))
            except websocket.WebSocketTimeoutException:
                continue

    def execute(self, code: str, timeout: float = 120) -> tuple[str, str]:
        """(what the cell printed, its reply status: ok / error / aborted)."""
        msg = _msg("execute_request", {"code": code, "silent": False, "store_history": True}, self.session)
        self.ws.send(json.dumps(msg))
        out: list[str] = []
        status = None
        idle = False
        deadline = time.monotonic() + timeout
        while status is None or not idle:
            reply = self._recv(deadline, f"the reply to {code[:40]!r}")
            if reply.get("parent_header", {}).get("msg_id") != msg["header"]["msg_id"]:
                continue
            kind = reply["msg_type"]
            if kind == "stream":
                out.append(reply["content"]["text"])
            elif kind == "error":
                out.append(reply["content"]["ename"] + ": " + reply["content"]["evalue"])
            elif kind == "execute_reply":
                status = reply["content"]["status"]
            elif kind == "status" and reply["content"]["execution_state"] == "idle":
                idle = True
        return "".join(out), status

    def send_execute(self, code: str, stop_on_error: bool = True) -> str:
        """Start a cell without waiting for it; its msg_id. With `stop_on_error` (JupyterLab's way), a
        cell that errs makes the kernel abort requests that come in the moment after its reply."""
        content = {"code": code, "silent": False, "store_history": True, "stop_on_error": stop_on_error}
        msg = _msg("execute_request", content, self.session)
        self.ws.send(json.dumps(msg))
        return str(msg["header"]["msg_id"])

    def wait_reply(self, msg_id: str, timeout: float = 120) -> str:
        deadline = time.monotonic() + timeout
        while True:
            reply = self._recv(deadline, "the cell's reply")
            if reply.get("parent_header", {}).get("msg_id") == msg_id and reply["msg_type"] == "execute_reply":
                return str(reply["content"]["status"])

    def wait_output(self, msg_id: str, text: str, timeout: float = 60) -> None:
        """Until the cell has printed `text`: its code runs (not the kernel's own set-up before it)."""
        deadline, seen = time.monotonic() + timeout, ""
        while text not in seen:
            reply = self._recv(deadline, f"the cell to print {text!r}")
            if reply.get("parent_header", {}).get("msg_id") == msg_id and reply["msg_type"] == "stream":
                seen += reply["content"]["text"]

    def close(self) -> None:
        KernelSocket.opened.discard(self)
        self.ws.close()

    @classmethod
    def close_all(cls) -> None:
        for ks in list(cls.opened):
            ks.close()


def a_cell_sent_at_once_is_not_culled(
    kernels: ServerProcess, platform: ServerProcess, kernel_id: str, run_id: str, idle_seconds: float
) -> None:
    """A cell sent before the platform reports the kernel ready ("Run All", a headless client)
    that runs past the idle limit: the lease is busy throughout, not culled mid-cell, and idle
    is counted from the cell's end.

    `kernels` serves the kernel's websocket; `platform` holds the lease (the same server in
    embedded mode, the control plane in remote mode)."""
    # The cell runs until the test has seen the lease busy, then idle + 1 s more: it always outlasts
    # the idle limit, however long a loaded machine takes to start it and to report it busy.
    release = Path(tempfile.mkdtemp(prefix="gpuplat-cell-")) / "seen-busy"
    release.parent.chmod(0o755)  # the kernel may run as another Unix account
    ks = KernelSocket(kernels, kernel_id)
    try:
        msg = ks.send_execute(
            "import os, time\n"
            "cap = time.monotonic() + 120\n"
            f"while not os.path.exists({str(release)!r}) and time.monotonic() < cap:\n"
            "    time.sleep(0.05)\n"
            f"time.sleep({idle_seconds + 1})"
        )

        def lease() -> dict[str, Any]:
            return dict(platform.ok("GET", f"runs/{run_id}"))

        try:
            until(lambda: (lease().get("session") or {}).get("busy"), "the early cell seen busy", timeout=60)
        except AssertionError as exc:  # what the lease and the kernel's server saw
            seen = (kernels.root / "server.log").read_text(errors="replace")[-6000:]
            raise AssertionError(f"{exc}; lease: {lease()}; the kernels' server log: {seen}") from None
        release.touch()
        assert ks.wait_reply(msg) == "ok"
        ended_cell = time.time()
        now = lease()
        assert now["status"] == "running", (now["status"], now["reason"], now["message"])
        assert "IdleTimeout" not in [e["reason"] for e in now["timeline"]]
        ended = platform.wait_status(run_id, "stopped", timeout=30 + 2 * idle_seconds)
        assert ended["reason"] == "IdleTimeout"
        assert ended["finished_at"] >= ended_cell + idle_seconds - 0.5  # idle from the end of the cell
    finally:
        ks.close()
        shutil.rmtree(release.parent, ignore_errors=True)


# ---- GPU sessions the way JupyterLab starts them (POST /api/sessions) --------------------------

# The sessions platform (a `notebook` preset on the interactive queue, `quick` culled after 3 s).
SESSIONS = Path(__file__).parent / "fixtures" / "sessions.yaml"


def headers(srv: ServerProcess) -> dict[str, str]:
    return {"Authorization": f"token {srv.token}"}


def start_kernel(srv: ServerProcess, path: str, kernel: str = "gpuplat-notebook") -> requests.Response:
    body = {"path": path, "type": "notebook", "name": path, "kernel": {"name": kernel}}
    return requests.post(srv.url + "api/sessions", headers=headers(srv), json=body, timeout=90)


def kernel_ids(srv: ServerProcess) -> set[str]:
    return {k["id"] for k in requests.get(srv.url + "api/kernels", headers=headers(srv), timeout=30).json()}


def session_of(srv: ServerProcess, notebook: str) -> dict[str, Any]:
    found = srv.ok("GET", "sessions", notebook=notebook)["sessions"]
    assert len(found) == 1, found
    return found[0]


def add_kernelspec(srv: ServerProcess, name: str, **config: Any) -> None:
    """A kernelspec as a shared notebook might carry it (not one the platform offered)."""
    d = srv.root / "data" / "kernels" / name
    d.mkdir(parents=True, exist_ok=True)
    spec = {
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": name,
        "language": "python",
        "interrupt_mode": "message",
        "metadata": {"kernel_provisioner": {"provisioner_name": "gpuplat-session", "config": config}},
    }
    (d / "kernel.json").write_text(json.dumps(spec))


class HubKernelSocket(KernelSocket):
    """A kernel's websocket through the Hub's proxy, the token in a header (Hub tokens are not taken in URLs)."""

    def __init__(self, server_url: str, token: str, kernel_id: str, timeout: float = 60) -> None:
        url = server_url.replace("http://", "ws://") + f"api/kernels/{kernel_id}/channels"
        self.ws = websocket.create_connection(url, timeout=timeout, header=[f"Authorization: token {token}"])
        self.session = uuid.uuid4().hex
        KernelSocket.opened.add(self)
