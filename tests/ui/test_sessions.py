"""GPU sessions in a real browser: the sidebar's "Start GPU session" opens a notebook on the
session kernel; while its lease waits (alice already holds the one interactive session she
may) the notebook says where it is in line and why, live; its kernel start gives up waiting
(a short launch wait here) and the notebook starts it again by itself once the first session
is stopped, on the lease's GPU. An idle session (3 s) warns with what judged it (the server's
words: no kernel activity, or GPU use not measured here), then the notebook says it ended and why."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import nbformat
import pytest
from playwright.sync_api import expect

from ..waiting import until
from .conftest import Lab, goto_reset
from .sidebar_helpers import BAR, SIDEBAR, sessions, stop_all


@pytest.fixture
def page(session_page: Any) -> Any:
    """JupyterLab on the session server, ?reset (ui/conftest.py `session_page`)."""
    return session_page


def run_cell(page: Any, code: str) -> None:
    editor = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Cell .jp-InputArea-editor").first
    editor.click()
    page.keyboard.type(code)
    page.keyboard.press("Shift+Enter")


def test_a_queued_session_shows_why_then_connects_by_itself_on_its_gpu(
    session_lab: Lab, page: Any, screenshots: Path
) -> None:
    lab = session_lab
    stop_all(lab)
    first = lab.ok("POST", "runs", body={"project": "team-a", "presets": ["notebook"]})
    assert first["kind"] == "session"
    lab.wait_status(first["id"], "running")

    # The sidebar's Start GPU session: a new notebook on "Python 3 (GPU · notebook)".
    page.locator(f'{SIDEBAR} .jp-GpuPlat-tab[data-tab="presets"]').click()
    card = page.locator(f'{SIDEBAR} .jp-GpuPlat-preset[data-preset="notebook"]')
    start = card.get_by_role("button", name="Start GPU session")
    expect(start).to_be_enabled()
    start.click()

    bar = page.locator(BAR)
    expect(bar).to_contain_text("queued — position 1", timeout=30_000)
    expect(bar).to_contain_text("UserLimit 1/1")
    expect(bar).to_contain_text("alice has 1/1 runs dispatched in queue interactive")
    second = until(lambda: [s for s in sessions(lab) if s["id"] != first["id"]], "the notebook's lease")[0]
    assert second["status"] == "queued" and second["session"]["notebook"].endswith(".ipynb"), second
    # The in-progress notification says the same, with Cancel.
    toast = page.get_by_role("alert").filter(has_text="queued — position 1")
    expect(toast).to_be_visible()
    expect(toast.get_by_role("button", name="Cancel")).to_be_visible()
    # The kernel start gave up waiting (the short launch wait): no kernel, and no modal
    # error or kernel picker over the page; the toolbar still says where the lease is.
    expect(page.get_by_role("button", name=re.compile(r"^No Kernel \|"))).to_be_visible(timeout=30_000)
    expect(page.locator(".jp-Dialog")).to_have_count(0)
    expect(bar).to_contain_text("queued — position 1")
    page.screenshot(path=screenshots / "session-queued.png")

    # Why? opens the lease in the sidebar.
    bar.get_by_role("button", name="Why?").click()
    header = page.locator(f"{SIDEBAR} .jp-GpuPlat-detailHeader")
    expect(header).to_contain_text(second["name"])
    expect(header).to_contain_text("queued")

    # The first session stops: the lease is admitted and the notebook connects by itself.
    lab.ok("POST", f"runs/{first['id']}/stop")
    expect(page.get_by_role("button", name="Python 3 (GPU · notebook) | Idle")).to_be_visible(timeout=60_000)
    lease = lab.ok("GET", f"runs/{second['id']}")
    assert lease["status"] == "running" and len(lease["devices"]) == 1, lease
    gpu = str(lease["devices"][0])
    expect(bar).to_contain_text(f"GPU {gpu} · notebook")
    run_cell(page, 'import os; print(os.environ["CUDA_VISIBLE_DEVICES"])')
    output = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-OutputArea-output").first
    expect(output).to_have_text(gpu, timeout=30_000)
    # Still the same lease: the restart attached to it, it did not queue a new one.
    assert [s["id"] for s in sessions(lab)] == [second["id"]]
    stop_all(lab)
    expect(bar).to_contain_text("GPU session ended (Stopped)", timeout=30_000)


def test_an_idle_session_warns_then_the_notebook_says_it_ended_and_why(
    session_lab: Lab, page: Any, screenshots: Path
) -> None:
    lab = session_lab
    stop_all(lab)
    nb = nbformat.v4.new_notebook()
    nb.cells.append(nbformat.v4.new_code_cell(""))
    nb.metadata["kernelspec"] = {
        "name": "gpuplat-quick",
        "display_name": "Python 3 (GPU · quick)",
        "language": "python",
    }
    nbformat.write(nb, lab.work / "idle.ipynb")
    goto_reset(page, f"{lab.url}lab/tree/idle.ipynb?reset&token={lab.token}")

    bar = page.locator(BAR)
    # `quick` ends after 3 s without kernel activity; the warning comes 0.3 s before and says so.
    warning = page.get_by_role("alert").filter(has_text="GPU session for idle.ipynb ends in")
    expect(warning).to_be_visible(timeout=60_000)
    expect(warning).to_contain_text(re.compile(r"ends in \d s unless kept: no kernel activity for \d s"))
    expect(bar).to_contain_text("GPU session ended (IdleTimeout): no kernel activity for 3 s; GPU", timeout=30_000)
    ended = page.get_by_role("alert").filter(has_text="GPU session ended (IdleTimeout)")
    expect(ended).to_be_visible()
    runs = lab.ok("GET", "runs", kind="session")["runs"]
    [lease] = [r for r in runs if r["reason"] == "IdleTimeout"]
    expect(bar).to_contain_text(f"GPU {lease['devices'][0]} returned")
    expect(ended).to_be_in_viewport(ratio=1)  # the toast has slid in
    page.screenshot(path=screenshots / "session-ended.png")


def test_renaming_the_notebook_moves_its_lease_and_its_name(session_lab: Lab, page: Any) -> None:
    """A new GPU session is Untitled.ipynb; renamed in JupyterLab, its lease and its default name
    follow (the sidebar shows the new name; a reload finds the lease at the new path)."""
    lab = session_lab
    stop_all(lab)
    page.locator(f'{SIDEBAR} .jp-GpuPlat-tab[data-tab="presets"]').click()
    card = page.locator(f'{SIDEBAR} .jp-GpuPlat-preset[data-preset="notebook"]')
    card.get_by_role("button", name="Start GPU session").click()
    expect(page.get_by_role("button", name="Python 3 (GPU · notebook) | Idle")).to_be_visible(timeout=60_000)
    lease = until(lambda: sessions(lab), "the notebook's lease")[0]
    old = lease["session"]["notebook"]
    assert old.startswith("Untitled") and lease["name"] == old, lease
    new = "resnet-probe.ipynb"
    page.evaluate("([a, b]) => window.jupyterapp.serviceManager.contents.rename(a, b)", [old, new])
    moved = until(
        lambda: (r := lab.ok("GET", f"runs/{lease['id']}"))["session"]["notebook"] == new and r, "the lease followed"
    )
    assert moved["name"] == new and moved["status"] == "running", moved
    assert [s["id"] for s in lab.ok("GET", "sessions", notebook=new)["sessions"]] == [lease["id"]]
    page.locator(f'{SIDEBAR} .jp-GpuPlat-tab[data-tab="runs"]').click()
    expect(page.locator(f'{SIDEBAR} .jp-GpuPlat-runRow[data-run-id="{lease["id"]}"] .jp-GpuPlat-runName')).to_have_text(
        new, timeout=30_000
    )
    stop_all(lab)
    (lab.work / new).unlink()


def test_a_session_judged_by_gpu_use_that_is_not_measured_warns_in_the_servers_words(
    session_lab: Lab, page: Any
) -> None:
    """`termination.idle_by: gpu` on this server's declared GPUs, which NVML cannot read: the idle
    notice says, after the countdown, that GPU use is not measured here (the lease's
    `session.idle_reason`; its kernel judges it, and ends it). The lease is made with the override
    first; the notebook's kernel attaches to it."""
    lab = session_lab
    stop_all(lab)
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "gpuplat-quick",
        "display_name": "Python 3 (GPU · quick)",
        "language": "python",
    }
    nbformat.write(nb, lab.work / "gpu-judged.ipynb")
    termination = {"idle_by": "gpu", "idle_seconds": 8}  # warned 0.8 s before its end
    body = {"project": "team-a", "presets": ["quick"], "notebook": "gpu-judged.ipynb", "termination": termination}
    lease = lab.ok("POST", "runs", body=body)
    page.evaluate(
        "p => window.jupyterapp.commands.execute('docmanager:open', {path: p}).then(() => null)", "gpu-judged.ipynb"
    )

    warning = page.get_by_role("alert").filter(has_text="GPU session for gpu-judged.ipynb ends in")
    expect(warning).to_be_visible(timeout=30_000)
    # JupyterLab shows a notice's first 140 characters: the countdown leads, then the reason as far as it fits.
    expect(warning).to_contain_text(re.compile(r"ends in \d s unless kept: GPU use is not measured here \("))
    expect(warning.get_by_role("button", name="Keep session")).to_be_visible()
    ended = lab.wait_status(lease["id"], "stopped")
    assert ended["reason"] == "IdleTimeout" and "GPU use is not measured here" in ended["message"], ended
    assert [s["id"] for s in lab.ok("GET", "runs", kind="session", notebook="gpu-judged.ipynb")["runs"]] == [
        lease["id"]
    ]
