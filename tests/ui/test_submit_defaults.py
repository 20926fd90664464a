"""The submit dialog starts from the project's default presets and remembers the last project and
presets (JupyterLab's state database, saved with the workspace, so a reload keeps them), in a
real browser against a platform whose team-a applies `single-gpu` to every run."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml
from playwright.sync_api import expect

from ..server import EXAMPLE
from ..waiting import until
from .conftest import Lab, submit_dialog

SIDEBAR = "#jupyter-gpuplat-sidebar"


@pytest.fixture(scope="module")
def defaults_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    cfg = yaml.safe_load(EXAMPLE.read_text())
    for project in cfg["projects"]:
        if project["name"] == "team-a":
            project["default_presets"] = ["single-gpu"]
        if project["name"] == "team-b":
            project["members"]["alice"] = "member"
    root = tmp_path_factory.mktemp("defaults-lab")
    config = root / "platform.yaml"
    config.write_text(yaml.safe_dump(cfg))
    server = Lab(root / "server", config_file=config)
    (server.work / "go").touch()  # train.py ends at once
    server.start(timeout=90)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def page(defaults_lab: Lab, browser_context: Any) -> Iterator[Any]:
    page = browser_context.new_page()
    page.set_default_timeout(30_000)
    page.goto(defaults_lab.lab_url)
    expect(page.locator('li[data-id="jupyter-gpuplat-sidebar"]')).to_be_visible(timeout=60_000)
    yield page
    page.close()


def open_dialog(page: Any) -> Any:
    page.evaluate("void window.jupyterapp.commands.execute('gpuplat:submit', {path: 'train.py'})")
    dialog = submit_dialog(page)
    return dialog


def submit(dialog: Any) -> None:
    expect(dialog.locator(".jp-GpuPlat-preview")).to_have_attribute("data-verdict", "allowed")
    dialog.get_by_role("button", name="Submit").click()
    expect(dialog).to_have_count(0)


def saved_submit_state(lab: Lab) -> dict[str, Any]:
    ws = requests.get(
        f"{lab.url}lab/api/workspaces/default", headers={"Authorization": f"token {lab.token}"}, timeout=30
    ).json()
    return dict(ws.get("data", {}).get("jupyter-gpuplat:submit") or {})


def test_the_project_default_presets_come_first(defaults_lab: Lab, page: Any, screenshots: Path) -> None:
    dialog = open_dialog(page)
    expect(dialog.locator('select[name="project"]')).to_have_value("team-a")
    default = dialog.locator('.jp-GpuPlat-presetChosen[data-preset="single-gpu"]')
    expect(default).to_have_attribute("data-default", "true")
    expect(default).to_contain_text("project default")
    # the lock is JupyterLab's SVG icon, not an emoji (an empty box without an emoji font)
    expect(default.locator(".jp-GpuPlat-lockIcon svg")).to_have_count(1)
    assert "🔒" not in default.inner_text()
    expect(default.locator("button")).to_have_count(0)  # applied to every run: not removable
    expect(dialog.locator('select[name="preset-add"] option[value="single-gpu"]')).to_have_count(0)
    preview = dialog.locator(".jp-GpuPlat-preview")
    expect(preview).to_have_attribute("data-verdict", "allowed")
    gpu = preview.locator('tr[data-path="resources.gpu"]')
    expect(gpu).to_contain_text("1")
    expect(gpu).to_contain_text("project:team-a/preset:single-gpu")
    expect(preview.locator(".jp-GpuPlat-noGpu")).to_have_count(0)  # the default gives a GPU
    dialog.locator(".jp-Dialog-content").screenshot(path=screenshots / "submit-defaults.png")
    submit(dialog)
    detail = page.locator(f"{SIDEBAR} .jp-GpuPlat-detail")
    expect(detail).to_be_visible()
    run_id = detail.get_attribute("data-run-id")
    record = defaults_lab.ok("GET", f"runs/{run_id}")
    assert record["resolved"]["resources"]["gpu"] == 1
    assert record["provenance"]["resources.gpu"] == "project:team-a/preset:single-gpu"


def test_the_last_project_and_presets_are_remembered(defaults_lab: Lab, page: Any) -> None:
    dialog = open_dialog(page)
    dialog.locator('select[name="project"]').select_option("team-b")
    expect(dialog.locator('.jp-GpuPlat-presetChosen[data-default="true"]')).to_have_count(0)  # team-b has none
    dialog.locator('select[name="preset-add"]').select_option("single-gpu")
    submit(dialog)
    until(lambda: saved_submit_state(defaults_lab).get("project") == "team-b", "the dialog's memory saved")

    # Reopened (even after a reload): team-b with single-gpu again.
    for reload in (False, True):
        if reload:
            page.reload()
            expect(page.locator('li[data-id="jupyter-gpuplat-sidebar"]')).to_be_visible(timeout=60_000)
        dialog = open_dialog(page)
        expect(dialog.locator('select[name="project"]')).to_have_value("team-b")
        chosen = dialog.locator('.jp-GpuPlat-presetChosen:not([data-default="true"])')
        expect(chosen).to_have_count(1)
        expect(chosen).to_have_attribute("data-preset", "single-gpu")
        dialog.get_by_role("button", name="Cancel").click()
        expect(dialog).to_have_count(0)
    assert saved_submit_state(defaults_lab)["presets"] == {"team-a": [], "team-b": ["single-gpu"]}
