"""Browser tests: Python Playwright driving Debian's Chromium against a real JupyterLab.

One `jupyter server` subprocess (JupyterLab is its server extension, so it serves /lab)
with the platform extension, the example platform, 4 declared GPUs and isolated
JUPYTER_* directories; one browser for these tests. Both are package-scoped: Playwright's
sync API holds an event loop while it lives, which pytest-jupyter's loop fixtures in the
tests after this package must not meet. Screenshots go to
GPUPLAT_SCREENSHOT_DIR (docs/screenshots/ to refresh the committed ones), else to a
temporary directory. GPUPLAT_UI_LABEXTENSIONS names a folder holding `jupyter-gpuplat/` (a link
to a built jupyter_gpuplat/labextension: this tree's after `jlpm build`, or an old worktree's)
to serve instead of the installed one.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from ..server import ServerProcess

CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

# A training script that prints, logs a metric and an output, then waits for a gate
# file named by its first argument, so tests can see it running before it ends.
TRAIN_PY = """\
import pathlib, sys, time
from jupyter_gpuplat import tracking
gate = pathlib.Path(__file__).with_name(sys.argv[1] if len(sys.argv) > 1 else "go")
for i in range(3):
    print(f"step {i} loss={1 / (i + 1):.3f}", flush=True)
    tracking.log_metrics(step=i, loss=1 / (i + 1))
pathlib.Path(tracking.artifacts_dir(), "result.txt").write_text("accuracy 0.93\\n")  # outputs go to the run
while not gate.exists():
    time.sleep(0.05)
print("finished", flush=True)
"""


@pytest.fixture(autouse=True)
def jp_asyncio_loop() -> Iterator[None]:
    """Neutralise pytest-jupyter's autouse loop: Playwright's sync API runs its own."""
    yield None


@pytest.fixture(autouse=True)
def jp_server_cleanup() -> Iterator[None]:
    yield


class Lab(ServerProcess):
    """The platform's server with JupyterLab's front end configured for tests."""

    def __init__(self, root: Path, **server: Any) -> None:
        super().__init__(root, **server)
        self.work = root / "work"  # the file browser's root
        self.work.mkdir()
        (self.work / "train.py").write_text(TRAIN_PY)
        settings = root / "lab-settings"
        notif = settings / "@jupyterlab" / "apputils-extension"
        notif.mkdir(parents=True)
        # No "fetch Jupyter news?" toast over the screenshots.
        (notif / "notification.jupyterlab-settings").write_text(json.dumps({"fetchNews": "false"}))
        conf_file = root / "jupyter-config" / "jupyter_server_config.json"
        conf = json.loads(conf_file.read_text())
        conf["ServerApp"]["root_dir"] = str(self.work)
        conf["LabApp"] = {
            "user_settings_dir": str(settings),
            "workspaces_dir": str(root / "workspaces"),
            "expose_app_in_browser": True,
        }
        # A folder holding jupyter-gpuplat/ (a built labextension: this tree's, or an old worktree's
        # to see a test fail on the old frontend), served before the installed one.
        if os.environ.get("GPUPLAT_UI_LABEXTENSIONS"):
            conf["LabApp"]["extra_labextensions_path"] = [os.environ["GPUPLAT_UI_LABEXTENSIONS"]]
        conf_file.write_text(json.dumps(conf))

    @property
    def lab_url(self) -> str:
        return f"{self.url}lab?token={self.token}"


@pytest.fixture(scope="package")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    server = Lab(tmp_path_factory.mktemp("lab"))
    server.start(timeout=90)
    yield server
    try:
        quiet(server)  # runs hold processes (a session's kernel) that outlive the server
    finally:
        server.stop()


SESSIONS = Path(__file__).parents[1] / "fixtures" / "sessions.yaml"
# A kernel start gives up waiting for its lease after this long (the default is 45 s), so the
# browser tests see the notebook start its kernel again by itself once the lease is admitted.
SESSION_LAUNCH_WAIT_SECONDS = 2.0


@pytest.fixture(scope="module")
def session_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    """A second server for GPU sessions: tests/fixtures/sessions.yaml (`notebook` on the interactive
    queue, one per user; `quick` idle-culled after 3 s) and a short kernel launch wait."""
    extra = {"GpuSessionProvisioner": {"launch_wait_seconds": SESSION_LAUNCH_WAIT_SECONDS}}
    server = Lab(tmp_path_factory.mktemp("session-lab"), config_file=SESSIONS, extra_config=extra)
    server.start(timeout=90)
    yield server
    try:
        quiet(server)  # runs hold processes (a session's kernel) that outlive the server
    finally:
        server.stop()


@pytest.fixture(scope="package")
def screenshots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = os.environ.get("GPUPLAT_SCREENSHOT_DIR")
    path = Path(target) if target else tmp_path_factory.mktemp("screenshots")
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture(scope="package")
def browser_context(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    with sync_playwright() as p:
        ctx = p.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("chromium-profile")),
            executable_path=chromium,
            headless=True,
            args=CHROMIUM_FLAGS,
            viewport={"width": 1400, "height": 900},
        )
        yield ctx
        ctx.close()


def goto_reset(page: Any, url: str) -> None:
    """Open JupyterLab at `url` (with `?reset`) and wait until the reset is done.

    JupyterLab drops `reset` from the address once it has cleared the workspace; when its state
    database had resolved first (seen under load) it reloads the page to do so, which undid a
    sidebar shown or a tab opened before that reload."""
    page.goto(url)
    page.wait_for_url(lambda address: "reset" not in address, timeout=60_000)


# After the layout's restore: activated before it, a workspace's saved layout could hide it again (seen once).
SHOW_SIDEBAR = "window.jupyterapp.restored.then(() => window.jupyterapp.shell.activateById('jupyter-gpuplat-sidebar'))"


def submit_dialog(page: Any) -> Any:
    """The open submit dialog, once it has focused its first field.

    JupyterLab's Dialog moves the focus a frame after it opens: a field filled before
    that loses the focus midway and the text lands in the command field (seen under CI
    load)."""
    dialog = page.locator(".jp-GpuPlat-submitDialog")
    expect(dialog).to_be_visible()
    expect(dialog.locator('input[name="script"], input[name="command"]').first).to_be_focused()
    return dialog


def widen_left_sidebar(page: Any, width: int) -> None:
    """Drag the handle between the left sidebar and the main area (as a user would)."""
    handle = page.locator("#jp-main-split-panel > .lm-SplitPanel-handle").first
    box = handle.bounding_box()
    assert box is not None
    y = box["y"] + box["height"] / 2
    page.mouse.move(box["x"] + box["width"] / 2, y)
    page.mouse.down()
    page.mouse.move(width, y, steps=4)
    page.mouse.up()


def quiet(lab: Lab) -> None:
    """What a test file left running stops and paused queues resume: the next file starts on free GPUs."""
    for q in lab.ok("GET", "queues", user="ops")["queues"]:
        if q.get("paused"):
            lab.call("POST", f"queues/{q['name']}/resume", user="ops")
    lab.stop_all_runs()


@pytest.fixture(scope="module")
def lab_page(lab: Lab, browser_context: Any) -> Iterator[Any]:
    """JupyterLab loaded once per test file, with the GPU platform sidebar open.

    Per file, not per package: a dialog or tab one file leaves open, or the submit dialog's
    remembered choices, must not change what the next file sees.
    """
    from playwright.sync_api import expect

    page = browser_context.new_page()
    page.set_default_timeout(30_000)
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    # The server's token (alice), not the login cookie a page as another user left (ops, bob).
    browser_context.clear_cookies()
    # `reset`: not the workspace an earlier page left (e.g. a notebook a widget test ran, unsaved).
    goto_reset(page, f"{lab.url}lab?reset&token={lab.token}")
    tab = page.locator('li[data-id="jupyter-gpuplat-sidebar"]')
    expect(tab).to_be_visible(timeout=60_000)
    # Not a click: a restored layout may show it already (or a moment later), and a click would close it.
    page.evaluate(SHOW_SIDEBAR)
    expect(page.locator("#jupyter-gpuplat-sidebar")).to_be_visible()
    widen_left_sidebar(page, 460)
    page.errors = errors
    yield page
    page.close()
    quiet(lab)


@pytest.fixture
def session_page(session_lab: Lab, browser_context: Any) -> Iterator[Any]:
    """JupyterLab on the session server, ?reset: a clean layout, the sidebar shown and widened."""
    page = browser_context.new_page()
    page.set_default_timeout(30_000)
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(f"{e}\n{e.stack}"))
    # ?reset: a clean layout, so no notebook of an earlier test opens (and starts a session) again
    goto_reset(page, f"{session_lab.url}lab?reset&token={session_lab.token}")
    tab = page.locator('li[data-id="jupyter-gpuplat-sidebar"]')
    expect(tab).to_be_visible(timeout=60_000)
    # Not a click: the restored layout may show it already, and a click would close it.
    page.evaluate(SHOW_SIDEBAR)
    expect(page.locator("#jupyter-gpuplat-sidebar")).to_be_visible()
    widen_left_sidebar(page, 420)
    yield page
    # ipywidgets' manager reads `session.kernel` on every kernel change, also the one to no
    # kernel after a failed start (each "Waiting for a GPU"): its error, not ours.
    ours = [e for e in errors if "jupyterlab-manager" not in e]
    assert ours == []
    page.close()
