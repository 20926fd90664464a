"""Run outputs in JupyterLab, in a real browser: a notebook run's files open in main-area tabs
with JupyterLab's own viewers (text, CSV, image, and the executed notebook read-only with its
outputs and no kernel) through the read-only `gpuplat-runs` drive, and "Open run folder"
lists the run's files in a file browser on that drive, nothing copied."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import nbformat
import pytest
from playwright.sync_api import expect

from .conftest import Lab

MAIN = "#jp-main-dock-panel"
# A 2x2 red PNG.
PNG_B64 = "iVBORw0KGgoAAAANSUhEUgAAAAIAAAACCAIAAAD91JpzAAAAFklEQVR4nGP8z8DAwMDAxMDAwMDAAAANHQEDasKb6QAAAABJRU5ErkJggg=="
CELLS = [
    "import base64, pathlib\nfrom jupyter_gpuplat import tracking\nout = pathlib.Path(tracking.artifacts_dir())",
    "(out / 'summary.txt').write_text('accuracy 0.93\\nloss 0.21\\n')\n"
    "(out / 'scores.csv').write_text('epoch,acc\\n1,0.81\\n2,0.93\\n')\n"
    f"(out / 'plot.png').write_bytes(base64.b64decode('{PNG_B64}'))\n"
    "print('wrote the outputs')",
    "6 * 7",
]


def execute(page: Any, command: str, args: dict[str, Any]) -> None:
    page.evaluate(f"void window.jupyterapp.commands.execute({json.dumps(command)}, {json.dumps(args)})")


@pytest.fixture(scope="module")
def notebook_run(lab: Lab) -> dict[str, Any]:
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in CELLS])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
    nbformat.write(nb, lab.work / "report.ipynb")
    run = lab.ok("POST", "runs", body={"project": "team-a", "name": "report", "script": "report.ipynb"})
    run = lab.wait_status(run["id"], "succeeded", "failed", timeout=120)
    assert run["status"] == "succeeded", lab.ok("GET", f"runs/{run['id']}")
    files = {f["path"]: f for f in lab.ok("GET", f"runs/{run['id']}/outputs")["outputs"]}
    run["files"] = files
    return run


def path_of(run: dict[str, Any], name: str) -> str:
    found = [p for p in run["files"] if p.rsplit("/", 1)[-1] == name]
    assert len(found) == 1, (name, sorted(run["files"]))
    return found[0]


def close_all(page: Any) -> None:
    page.evaluate("window.jupyterapp.commands.execute('application:close-all')")
    expect(page.locator(f"{MAIN} .jp-Document, {MAIN} .jp-GpuPlat-runFolder")).to_have_count(0)


def test_text_csv_image_and_the_executed_notebook_open_in_tabs(
    lab: Lab, lab_page: Any, notebook_run: dict[str, Any], screenshots: Path
) -> None:
    page = lab_page
    rid = notebook_run["id"]

    execute(page, "gpuplat:open-output", {"id": rid, "path": path_of(notebook_run, "summary.txt")})
    text_tab = page.locator(f"{MAIN} .lm-TabBar-tab", has_text="summary.txt")
    expect(text_tab).to_have_count(1)
    editor = page.locator(f"{MAIN} .jp-FileEditor .cm-content")
    expect(editor).to_contain_text("accuracy 0.93")
    expect(editor).to_contain_text("loss 0.21")
    expect(page.locator(f"{MAIN} .jp-Toolbar", has_text="file is read-only").first).to_be_visible()

    execute(page, "gpuplat:open-output", {"id": rid, "path": path_of(notebook_run, "scores.csv")})
    expect(page.locator(f"{MAIN} .lm-TabBar-tab", has_text="scores.csv")).to_have_count(1)
    expect(page.locator(f"{MAIN} .jp-CSVViewer")).to_be_visible()

    execute(page, "gpuplat:open-output", {"id": rid, "path": path_of(notebook_run, "plot.png")})
    image = page.locator(f"{MAIN} .jp-ImageViewer img")
    expect(image).to_be_visible()
    assert page.evaluate("document.querySelector('#jp-main-dock-panel .jp-ImageViewer img').naturalWidth") == 2

    nb_path = "outputs/report.ipynb"  # the executed copy (code/report.ipynb is the one submitted)
    assert nb_path in notebook_run["files"]
    execute(page, "gpuplat:open-output", {"id": rid, "path": nb_path})
    panel = page.locator(f"{MAIN} .jp-NotebookPanel.jp-GpuPlat-runOutput")
    expect(panel).to_be_visible()
    # The run's own outputs, as it computed them.
    expect(panel.locator(".jp-OutputArea-output", has_text="wrote the outputs")).to_be_visible()
    expect(panel.locator(".jp-OutputArea-output", has_text="42")).to_be_visible()
    # Read-only, and nothing runs: no kernel is started for it.
    expect(panel.locator(".jp-Toolbar", has_text="notebook is read-only")).to_be_visible()
    expect(panel.locator(".jp-KernelName, .jp-Toolbar-kernelName").first).to_have_text(re.compile("No Kernel"))
    # Its cells cannot be edited, and opening it changed nothing (no "save your work?" on close).
    expect(panel.locator(".jp-Cell .cm-content").first).to_have_attribute("aria-readonly", "true")
    expect(page.locator(f"{MAIN} .lm-TabBar-tab.jp-mod-dirty")).to_have_count(0)
    sessions = page.evaluate(
        "t => fetch('/api/sessions', {headers: {Authorization: 'token ' + t}}).then(r => r.json())", lab.token
    )
    assert not [s for s in sessions if "gpuplat-runs" in s["path"]], sessions
    page.screenshot(path=screenshots / "output-notebook.png")

    # Opening it again reveals the same tab.
    execute(page, "gpuplat:open-output", {"id": rid, "path": nb_path})
    expect(page.locator(f"{MAIN} .jp-NotebookPanel.jp-GpuPlat-runOutput")).to_have_count(1)
    # Saving is refused, plainly.
    refused = page.evaluate(
        "p => window.jupyterapp.serviceManager.contents.save(p, {type: 'file', format: 'text', content: 'x'})"
        ".then(() => 'saved', e => e.message)",
        f"gpuplat-runs:{rid}/{nb_path}",
    )
    assert refused.startswith("Cannot save files: gpuplat-runs is read-only"), refused
    close_all(page)


def test_a_missing_output_says_so(lab: Lab, lab_page: Any, notebook_run: dict[str, Any]) -> None:
    page = lab_page
    execute(page, "gpuplat:open-output", {"id": notebook_run["id"], "path": "no/such.txt"})
    toast = page.locator(".Toastify__toast", has_text="no/such.txt is not an output of run")
    expect(toast).to_be_visible()
    expect(page.locator(f"{MAIN} .lm-TabBar-tab", has_text="such.txt")).to_have_count(0)  # no empty tab


def test_open_run_folder_lists_the_run_files(
    lab: Lab, lab_page: Any, notebook_run: dict[str, Any], screenshots: Path
) -> None:
    page = lab_page
    rid = notebook_run["id"]
    execute(page, "gpuplat:open-run-folder", {"id": rid})
    folder = page.locator(f'{MAIN} .jp-GpuPlat-runFolder[data-run-id="{rid}"]')
    expect(folder).to_be_visible()
    expect(page.locator(f"{MAIN} .lm-TabBar-tab", has_text=f"{rid} files")).to_have_count(1)
    items = folder.locator(".jp-DirListing-item")
    top = sorted({p.split("/", 1)[0] for p in notebook_run["files"]})
    expect(items).to_have_count(len(top))
    for name in top:
        expect(folder.locator(".jp-DirListing-item", has_text=name).first).to_be_visible()
    page.screenshot(path=screenshots / "run-folder.png")
    # A file opens from the listing (double-click) with JupyterLab's editor.
    summary = path_of(notebook_run, "summary.txt")
    folder.locator(".jp-DirListing-item", has_text="summary.txt").dblclick()
    expect(page.locator(f"{MAIN} .jp-FileEditor .cm-content")).to_contain_text("accuracy 0.93")
    # Into a folder: the executed notebook is there.
    page.locator(f"{MAIN} .lm-TabBar-tab", has_text=f"{rid} files").click()
    folder.locator(".jp-DirListing-item", has_text="outputs").dblclick()
    expect(folder.locator(".jp-DirListing-item", has_text="report.ipynb")).to_be_visible()
    expect(folder.locator(".jp-BreadCrumbs")).to_contain_text("outputs")
    # The drive refuses to change a run's files.
    refused = page.evaluate(
        "p => window.jupyterapp.serviceManager.contents.delete(p).then(() => 'deleted', e => e.message)",
        f"gpuplat-runs:{rid}/{summary}",
    )
    assert refused.startswith("Cannot delete files: gpuplat-runs is read-only"), refused
    assert (lab.root / "artifacts").exists()
    # Again: the same browser tab.
    execute(page, "gpuplat:open-run-folder", {"id": rid})
    expect(page.locator(f"{MAIN} .jp-GpuPlat-runFolder")).to_have_count(1)
    close_all(page)


def test_new_notebooks_go_to_the_main_file_browser_after_a_run_folder(
    lab: Lab, lab_page: Any, notebook_run: dict[str, Any]
) -> None:
    """A run folder the user last clicked in is not "the current file browser": File → New and
    the Launcher's tiles (whose folder is the root, '') create files in the main file browser's
    folder, not on the read-only drive (which refused every new notebook until a reload)."""
    page = lab_page
    rid = notebook_run["id"]
    execute(page, "gpuplat:open-run-folder", {"id": rid})
    folder = page.locator(f'{MAIN} .jp-GpuPlat-runFolder[data-run-id="{rid}"]')
    folder.locator(".jp-DirListing-item", has_text="summary.txt").click()
    expect(folder.locator(".jp-DirListing-item.jp-mod-selected")).to_have_count(1)
    created = []
    for args in ({}, {"cwd": ""}):  # File → New → Notebook; a Launcher tile
        path = page.evaluate(
            # A refused create shows an error dialog and never settles: race it with a deadline.
            "a => Promise.race([window.jupyterapp.commands"
            ".execute('notebook:create-new', { ...a, kernelName: 'python3' })"
            ".then(w => { const p = w.context.path; w.dispose(); return p; }, e => 'refused: ' + e.message),"
            " new Promise(r => setTimeout(() => r('refused: no notebook within 20 s'), 20000))])",
            args,
        )
        assert not path.startswith("refused") and ":" not in path, path
        assert (lab.work / path).is_file(), path
        created.append(path)
    assert len(set(created)) == 2, created
    close_all(page)
    for path in created:
        (lab.work / path).unlink()
