"""The magics in a real kernel started by the server for a notebook (as JupyterLab starts it).

Run names after the notebook and the cell (the cell found by the `cellId` JupyterLab sends in
the execute request's metadata, in the saved notebook; else `In [n]`), `--name` over it; the
status line updated in place (update_display_data on the same display id) until the run's
final state, after the cell has finished; an unknown option answered with "did you mean".
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest
import requests
from jupyter_client import BlockingKernelClient

from ..server import ServerProcess
from ..waiting import until


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    srv = ServerProcess(tmp_path_factory.mktemp("magics"))
    srv.start()
    yield srv
    srv.stop()


class Kernel:
    """A notebook's kernel through the server's sessions API, spoken to with a kernel client."""

    def __init__(self, server: ServerProcess, path: str) -> None:
        self.server = server
        self.headers = {"Authorization": f"token {server.token}"}
        body = {"path": path, "name": Path(path).name, "type": "notebook", "kernel": {"name": "python3"}}
        r = requests.post(f"{server.url}api/sessions", json=body, headers=self.headers, timeout=90)
        r.raise_for_status()
        self.session_id = r.json()["id"]
        kernel_id = r.json()["kernel"]["id"]
        self.kc = BlockingKernelClient(
            connection_file=str(Path(server.env["JUPYTER_RUNTIME_DIR"]) / f"kernel-{kernel_id}.json")
        )
        self.kc.load_connection_file()
        self.kc.start_channels()
        self.kc.wait_for_ready(timeout=60)
        self.seen: list[dict[str, Any]] = []  # every iopub message, whichever request it belongs to

    def execute(self, code: str, cell_id: str | None = None) -> list[dict[str, Any]]:
        """Run a cell as JupyterLab does (its id in the metadata); the messages it caused until idle."""
        content = {"code": code, "silent": False, "store_history": True, "user_expressions": {}, "allow_stdin": False}
        msg = self.kc.session.msg("execute_request", content, metadata={"cellId": cell_id} if cell_id else {})
        self.kc.shell_channel.send(msg)
        mine: list[dict[str, Any]] = []
        while True:
            m = self.read()
            if m["parent_header"].get("msg_id") != msg["header"]["msg_id"]:
                continue
            mine.append(m)
            if m["msg_type"] == "status" and m["content"]["execution_state"] == "idle":
                return mine

    def read(self) -> dict[str, Any]:
        m: dict[str, Any] = self.kc.get_iopub_msg(timeout=60)
        self.seen.append(m)
        return m

    def close(self) -> None:
        self.kc.stop_channels()
        requests.delete(f"{self.server.url}api/sessions/{self.session_id}", headers=self.headers, timeout=60)


@pytest.fixture
def notebook(server: ServerProcess) -> Iterator[tuple[Kernel, nbformat.NotebookNode]]:
    (server.root / "exp").mkdir(exist_ok=True)
    cells = [nbformat.v4.new_markdown_cell("# train"), *(nbformat.v4.new_code_cell(f"# {i}") for i in range(3))]
    nb = nbformat.v4.new_notebook(cells=cells)
    nbformat.write(nb, server.root / "exp" / "train.ipynb")
    kernel = Kernel(server, "exp/train.ipynb")
    try:
        assert "ok" in text(kernel.execute("%load_ext jupyter_gpuplat\nprint('ok')"))
        yield kernel, nb
    finally:
        kernel.close()


def text(msgs: list[dict[str, Any]]) -> str:
    out = []
    for m in msgs:
        c = m["content"]
        if m["msg_type"] == "stream":
            out.append(c["text"])
        elif m["msg_type"] in ("display_data", "execute_result", "update_display_data"):
            out.append(c["data"].get("text/html") or c["data"].get("text/plain", ""))
        elif m["msg_type"] == "error":
            out.append(f"ERROR {c['ename']}: {c['evalue']}")
    return "".join(out)


def last_run(kernel: Kernel) -> dict[str, Any]:
    got = text(kernel.execute("import json\nprint(json.dumps(gpu_last_run))"))
    return dict(json.loads(got.strip().splitlines()[-1]))


def test_a_cell_run_is_named_after_its_notebook_cell_and_params(notebook: tuple[Kernel, Any]) -> None:
    kernel, nb = notebook
    out = text(kernel.execute("%%gpu_submit --param lr=0.03 --param epochs=3 --wait\nprint('hi')", nb.cells[2].id))
    assert "succeeded in queue team-a-train" in out and "ERROR" not in out
    assert last_run(kernel)["name"] == "train.ipynb · cell 3 · lr=0.03, epochs=3"
    # A cell the saved notebook does not have yet: its execution count.
    kernel.execute("%%gpu_submit --wait\nprint('new')", "a-cell-saved-later")
    run = last_run(kernel)
    assert re.fullmatch(r"train\.ipynb · In \[\d+\]", run["name"]), run["name"]
    kernel.execute("%%gpu_submit --name mine --param lr=1 --wait\npass", nb.cells[1].id)
    assert last_run(kernel)["name"] == "mine"


def test_the_status_line_is_updated_in_place_until_the_final_state(
    notebook: tuple[Kernel, Any], tmp_path: Path
) -> None:
    kernel, nb = notebook
    gate = tmp_path / "gate"
    code = f"import pathlib, time\nwhile not pathlib.Path({str(gate)!r}).exists():\n    time.sleep(0.02)\nprint('done')"
    try:
        msgs = kernel.execute(f"%%gpu_submit --param lr=0.1\n{code}", nb.cells[3].id)
        (shown,) = [m for m in msgs if m["msg_type"] == "display_data" and "gpuplat-summary" in text([m])]
        display_id = shown["content"]["transient"]["display_id"]
        run_id = re.search(r"(r-[0-9a-f]+) ", text([shown])).group(1)  # type: ignore[union-attr]

        def updates() -> list[str]:
            return [
                text([m])
                for m in kernel.seen
                if m["msg_type"] == "update_display_data" and m["content"]["transient"]["display_id"] == display_id
            ]

        def read_until(cond: Any, what: str) -> None:
            until(lambda: cond() or (kernel.read() and cond()), what, timeout=60)

        # The cell has finished; its line goes on: running, then the clock advancing.
        read_until(lambda: any(re.search(r"running for [1-9]\d*s", u) for u in updates()), "the clock to tick")
        gate.touch()
        read_until(lambda: any("succeeded in queue" in u for u in updates()), "the final state")
        final = updates()[-1]
        assert f"{run_id} succeeded in queue team-a-train — exited with code 0 · ran " in final
        assert "running for" not in final and "queued" not in final
        # Every update belongs to the submitting cell (its parent), not to whatever runs at the time.
        parents = {
            m["parent_header"]["msg_id"]
            for m in kernel.seen
            if m["msg_type"] == "update_display_data" and m["content"]["transient"]["display_id"] == display_id
        }
        assert parents == {shown["parent_header"]["msg_id"]}
    finally:
        gate.touch()


def test_an_unknown_option_says_which_was_meant(notebook: tuple[Kernel, Any]) -> None:
    kernel, _ = notebook
    out = text(kernel.execute("%gpu_submit --parm lr=1 train.py"))
    assert "unknown option --parm: did you mean --param?" in out
    assert "--param" in out and "usage: %gpu_submit" in out and "ERROR" not in out
    out = text(kernel.execute("%%gpu_submit --presets single-gpu\npass"))
    assert "unknown option --presets: did you mean --preset?" in out
    out = text(kernel.execute("%%gpu_sweep --gird lr=1,2\npass"))
    assert "unknown option --gird: did you mean --grid?" in out and "usage: %%gpu_sweep" in out
    out = text(kernel.execute("%gpu_session start --prest notebook"))
    assert "unknown option --prest: did you mean --preset?" in out
    out = text(kernel.execute("%gpu_submit --frobnicate x.py"))
    assert "unknown option --frobnicate (options of %gpu_submit: " in out and "did you mean" not in out


def test_a_sweeps_status_line_ends_with_its_children_counted(notebook: tuple[Kernel, Any]) -> None:
    kernel, nb = notebook
    msgs = kernel.execute("%%gpu_sweep --grid x=1,2 --concurrency 2\nprint('x')", nb.cells[1].id)
    (shown,) = [m for m in msgs if m["msg_type"] == "display_data" and "gpuplat-summary" in text([m])]
    display_id = shown["content"]["transient"]["display_id"]
    assert " — sweep of 2 children" in text([shown])

    def final() -> str | None:
        for m in kernel.seen:
            if m["msg_type"] == "update_display_data" and m["content"]["transient"]["display_id"] == display_id:
                if "succeeded — sweep of 2 children: 2 succeeded · concurrency 2" in text([m]):
                    return text([m])
        return None

    until(lambda: final() or (kernel.read() and final()), "the sweep's final line", timeout=60)


def test_a_sessions_line_follows_the_lease_until_it_ends(notebook: tuple[Kernel, Any]) -> None:
    kernel, nb = notebook
    msgs = kernel.execute("%gpu_session start --notebook live-session.ipynb", nb.cells[1].id)
    try:
        (shown,) = [m for m in msgs if m["msg_type"] == "display_data" and "gpuplat-session" in text([m])]
        display_id = shown["content"]["transient"]["display_id"]
        assert 'href="live-session.ipynb"' in text([shown])  # the link to its notebook

        def updated(pattern: str) -> str | None:
            for m in kernel.seen:
                if m["msg_type"] == "update_display_data" and m["content"]["transient"]["display_id"] == display_id:
                    if re.search(pattern, text([m])):
                        return text([m])
            return None

        def seen(pattern: str) -> str | None:
            return updated(pattern) or (kernel.read() and updated(pattern))

        # Admitted: its GPU and a clock that counts on, the notebook's link kept in every update.
        running = until(
            lambda: seen(r"running in queue interactive on GPU \d+ — running for [1-9]"), "a running line", 60
        )
        assert 'href="live-session.ipynb"' in running
        out = text(kernel.execute("%gpu_session stop"))
        assert "stopped" in out or "stopping" in out, out
        until(lambda: seen(r"stopped in queue interactive — stopped by alice"), "the lease's final line", 60)
    finally:  # its kernel outlives the server otherwise
        kernel.execute("%gpu_session stop")


def test_a_cell_run_on_no_gpu_prints_the_services_cpu_only_note(notebook: tuple[Kernel, Any]) -> None:
    # The note the submit dialog shows, from the service's answer to POST runs (issue 23).
    kernel, nb = notebook
    out = text(kernel.execute("%%gpu_submit --wait\nprint('cpu')", nb.cells[1].id))
    assert "This run gets no GPU (0 GPUs): it runs on CPU only." in out and "ERROR" not in out
    gpu = text(kernel.execute("%%gpu_submit --preset single-gpu --wait\nprint('gpu')", nb.cells[2].id))
    assert "succeeded" in gpu and "runs on CPU only" not in gpu
