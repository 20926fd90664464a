"""The Launcher's honest defaults (issue 14, item 2) and run names (item 4), against a real server.

A platform where team-a has a default preset (`single-gpu`), a preset that locks the queue
(`pinned`, queue interactive) and one that sends runs to a queue team-a may not use
(`elsewhere`). The Launcher starts from the defaults and the last submitted choices (kept in
the Jupyter data dir, here a temporary one), says nothing is "allowed" before there is a
command, says 0 GPUs plainly, disables Submit while the preview refuses, and shows the
locked queue as locked.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest

from jupyter_gpuplat.client import Client
from jupyter_gpuplat.notebook.widgets import Launcher, RunMonitor
from jupyter_gpuplat.notebook.widgets.launchview import state_path
from jupyter_gpuplat.notebook.widgets.naming import cell_label, label_runs, run_name

from ..server import ServerProcess
from ..waiting import until
from ..widget_env import launcher_config, threads_ended


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    root = tmp_path_factory.mktemp("launcher")
    srv = ServerProcess(root, config_file=launcher_config(root))
    srv.start()
    yield srv
    srv.stop()


@pytest.fixture(autouse=True)
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The user's Jupyter data dir, where the Launcher remembers the last choices: a fresh one."""
    path = tmp_path / "jupyter-data"
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(path))
    yield path
    threads_ended()


def preview_of(launcher: Launcher, **expect: object) -> dict[str, Any]:
    """The first preview whose request has every `expect`ed field, shown whole (Submit, locks, alternatives)."""

    def answered() -> dict[str, Any] | None:
        req = launcher.shown_request
        if req is not None and all(req.get(k) == v for k, v in expect.items()):
            return launcher.preview
        return None

    found = until(answered, f"a preview of {expect}")
    assert found is not None
    return found


def test_launcher_starts_from_the_default_presets_and_says_nothing_is_allowed_before_a_command(
    client: Client,
) -> None:
    launcher = Launcher(client, project="team-a")
    try:
        assert launcher.default_presets == ["single-gpu"] and launcher.preset_picker.value == []
        assert "project defaults, applied first: <b>single-gpu</b>" in launcher.preset_help.value
        p = preview_of(launcher)
        assert p["provenance"]["resources.gpu"] == "project:team-a/preset:single-gpu"
        html = launcher.preview_html
        assert "Enter what to run" in html and "✓ allowed" not in html and "✗ refused" not in html
        assert "asks for 0 GPUs" not in html  # the default preset gives it one
        assert not launcher.submit_button.disabled

        launcher.gpu_picker.value = 0  # an explicit 0 wins over the preset: said plainly
        preview_of(launcher, gpus=0)
        assert "This run gets no GPU (0 GPUs): it runs on CPU only." in launcher.preview_html  # the service's note
        launcher.gpu_picker.value = ""
        launcher.command_field.value = "echo hi"
        preview_of(launcher, command="echo hi")
        assert "✓ allowed — queue team-a-train, 1 GPU" in launcher.preview_html, launcher.preview_html
    finally:
        launcher.close()


def test_a_refused_preview_disables_submit_with_the_reason_beside_it(client: Client) -> None:
    launcher = Launcher(client, project="team-a")
    try:
        launcher.command_field.value = "echo hi"
        preview_of(launcher, command="echo hi")
        assert not launcher.submit_button.disabled and launcher.submit_reason.value == ""
        launcher.preset_picker.value = ["elsewhere"]  # team-b-train is not team-a's
        p = preview_of(launcher, presets=["elsewhere"])
        assert not p["verdict"]["allowed"]
        assert "✗ refused by policy" in launcher.preview_html
        assert launcher.submit_button.disabled
        reason = launcher.submit_reason.value
        assert "Policy would refuse: queue &#x27;team-b-train&#x27; is not allowed in project team-a" in reason
        assert launcher.submit_button.tooltip.startswith("Policy would refuse: ")
        # The refusing rule once, and what the policy would accept as buttons that apply it.
        assert 'class="gpuplat-rules"' in launcher.preview_html
        hints = [b.description for b in launcher.alternatives_box.children]
        assert hints == ["use queue team-a-train", "use queue interactive"]
        launcher.alternatives_box.children[1].click()
        assert launcher.queue_picker.value == "interactive"
        p = preview_of(launcher, presets=["elsewhere"], queue="interactive")
        assert p["verdict"]["allowed"] and not launcher.submit_button.disabled
        assert launcher.alternatives_box.children == () and launcher.submit_reason.value == ""
        launcher.queue_picker.value = ""
        preview_of(launcher, presets=["elsewhere"], queue=None)
        assert launcher.submit_button.disabled
        launcher.preset_picker.value = []
        preview_of(launcher, command="echo hi", presets=None)
        assert not launcher.submit_button.disabled and launcher.submit_reason.value == ""
    finally:
        launcher.close()


def test_a_locked_queue_shows_as_locked_and_the_last_choices_are_remembered(client: Client, data_dir: Path) -> None:
    launcher = Launcher(client, project="team-a")
    try:
        preview_of(launcher)
        # "default" says what the project and presets make it.
        until(lambda: launcher.queue_picker.label == "default: team-a-train (project team-a)", "the queue's default")
        assert launcher.gpu_picker.label == "default: 1 (project default preset single-gpu)"
        assert not launcher.queue_picker.disabled
        launcher.preset_picker.value = ["pinned"]
        p = preview_of(launcher, presets=["pinned"])
        assert p["resolved"]["queue"] == "interactive"
        # the locks are the preview's (the service resolved the presets), not derived here
        assert p["locks"] == {"queue": "preset:pinned"}
        until(lambda: launcher.queue_picker.disabled, "the preview's lock on the queue")
        assert launcher.locked == {"queue": "preset:pinned"}
        assert launcher.queue_picker.options == (("interactive — locked, set by preset pinned", ""),)
        assert launcher.queue_picker.label == "interactive — locked, set by preset pinned"
        launcher.mode_picker.value = "code"
        launcher.command_field.value = "print('pinned')"
        run = launcher.submit()
        assert run is not None and run["queue"] == "interactive" and launcher.error_html == ""
        mon = launcher.monitor
        assert isinstance(mon, RunMonitor)
        until(lambda: mon.status == "succeeded", "the run to end")
        launcher.preset_picker.value = []  # unpicked: the queue can be chosen again once the preview says so
        preview_of(launcher, presets=None)
        until(lambda: not launcher.queue_picker.disabled, "the queue unlocked by the preview")
        assert launcher.queue_picker.value == "" and launcher.locked == {}
    finally:
        launcher.close()
    assert json.loads(state_path().read_text()) == {"project": "team-a", "presets": {"team-a": ["pinned"]}}
    assert state_path().is_relative_to(data_dir)
    again = Launcher(client)  # no project given: the last one, with its presets
    try:
        assert again.project_picker.value == "team-a" and again.preset_picker.value == ["pinned"]
        until(lambda: again.queue_picker.disabled, "the first preview's lock on the queue")
    finally:
        again.close()


# ---- names -----------------------------------------------------------------------------------------
def test_cell_labels_from_the_saved_notebook_else_the_execution_count(tmp_path: Path) -> None:
    cells = [nbformat.v4.new_markdown_cell("# t"), nbformat.v4.new_code_cell("1"), nbformat.v4.new_code_cell("2")]
    nb = nbformat.v4.new_notebook(cells=cells)
    path = tmp_path / "train.ipynb"
    nbformat.write(nb, path)
    assert cell_label(str(path), cells[2].id, 9) == "train.ipynb · cell 3"
    assert cell_label(str(path), "not-saved-yet", 9) == "train.ipynb · In [9]"
    assert cell_label(str(path), None, 4) == "train.ipynb · In [4]"
    assert cell_label(str(tmp_path / "gone.ipynb"), cells[2].id, 2) == "gone.ipynb · In [2]"
    assert cell_label(None, None, 5) == "In [5]"
    assert run_name("train.ipynb · cell 3", {"lr": 0.03, "layers": [64, 64]}) == (
        "train.ipynb · cell 3 · lr=0.03, layers=[64,64]"
    )
    assert run_name("train.ipynb · cell 3", None) == "train.ipynb · cell 3"
    assert len(run_name("x", {"p": "v" * 300})) == 128


def test_labels_show_only_the_params_that_differ() -> None:
    runs = [
        {"id": "r-1", "name": "train.ipynb · cell 3 · lr=0.1, epochs=3", "params": {"lr": 0.1, "epochs": 3}},
        {"id": "r-2", "name": "train.ipynb · cell 3 · lr=0.03, epochs=3", "params": {"lr": 0.03, "epochs": 3}},
        {"id": "r-3", "name": "baseline", "params": {"lr": 0.1, "epochs": 3}},
    ]
    assert label_runs(runs) == {
        "r-1": "train.ipynb · cell 3 · lr=0.1",
        "r-2": "train.ipynb · cell 3 · lr=0.03",
        "r-3": "baseline · lr=0.1",
    }
    same = [{"id": "r-1", "name": "cell", "params": {}}, {"id": "r-2", "name": "cell", "params": {}}]
    assert label_runs(same) == {"r-1": "cell · r-1", "r-2": "cell · r-2"}  # nothing differs: the ids do
    assert label_runs([{"id": "r-9", "name": None, "params": {"k": 1}}]) == {"r-9": "r-9"}
