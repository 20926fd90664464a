"""The JupyterLab sidebar in a real browser: queues and presets, submitting a file from
the file browser through queued (with its explain) → running (logs streaming) →
succeeded, a refused submission, keyboard use and the dark theme."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import requests
from playwright.sync_api import expect

from ..waiting import until
from .conftest import Lab, submit_dialog, widen_left_sidebar

SIDEBAR = "#jupyter-gpuplat-sidebar"
# Text checked for contrast against the panel in both themes.
LEGIBLE = [
    f"{SIDEBAR} .jp-GpuPlat-detailName",
    f"{SIDEBAR} .jp-GpuPlat-detailHeader .jp-GpuPlat-status",
    f"{SIDEBAR} .jp-GpuPlat-explainMessage",
    f"{SIDEBAR} .jp-GpuPlat-eventMessage",
    f"{SIDEBAR} .jp-GpuPlat-logLine",
    f"{SIDEBAR} .jp-GpuPlat-side",
]


def show_tab(page: Any, name: str) -> None:
    page.locator(f'{SIDEBAR} .jp-GpuPlat-tab[data-tab="{name}"]').click()


def back_to_runs(page: Any) -> None:
    show_tab(page, "runs")
    back = page.locator(f"{SIDEBAR} .jp-GpuPlat-back")
    if back.is_visible():
        back.click()
    expect(page.locator(f"{SIDEBAR} .jp-GpuPlat-runList")).to_be_visible()


def test_sidebar_shows_the_example_queues_and_presets(lab_page: Any, screenshots: Path) -> None:
    page = lab_page
    show_tab(page, "queues")
    queues = page.locator(f"{SIDEBAR} .jp-GpuPlat-queue")
    # alice (team-a) sees the queues her project may use, in dispatch order
    expect(queues).to_have_count(2)
    expect(queues.nth(0)).to_have_attribute("data-queue", "interactive")
    train = page.locator(f'{SIDEBAR} .jp-GpuPlat-queue[data-queue="team-a-train"]')
    expect(train).to_contain_text("0/2 GPUs")
    expect(train).to_contain_text("0/2 runs dispatched")
    expect(train).to_contain_text("0 pending")
    expect(train.locator(".jp-GpuPlat-queueAction")).to_have_count(0)  # alice is not a platform admin
    page.screenshot(path=screenshots / "queues.png")

    show_tab(page, "presets")
    cards = page.locator(f"{SIDEBAR} .jp-GpuPlat-preset")
    expect(cards).to_have_count(3)
    single = page.locator(f'{SIDEBAR} .jp-GpuPlat-preset[data-preset="single-gpu"]')
    expect(single).to_contain_text("1 GPU · 4 CPU · 16Gi memory")
    expect(single).to_contain_text("GPU type any")
    notebook = page.locator(f'{SIDEBAR} .jp-GpuPlat-preset[data-preset="notebook"]')
    expect(notebook).to_contain_text("queue interactive")
    session = notebook.get_by_role("button", name="Start GPU session")
    expect(session).to_be_enabled()
    expect(session).to_have_attribute("title", re.compile("GPU session kernel of preset notebook"))
    expect(single.get_by_role("button", name="Submit a file…")).to_be_enabled()
    page.screenshot(path=screenshots / "presets.png")
    back_to_runs(page)


def test_settings_are_in_the_settings_editor(lab: Lab, lab_page: Any, screenshots: Path) -> None:
    page = lab_page
    schema = requests.get(
        f"{lab.url}lab/api/settings/jupyter-gpuplat:plugin", headers={"Authorization": f"token {lab.token}"}, timeout=30
    ).json()["schema"]
    assert set(schema["properties"]) == {"defaultProject", "notifications"}
    page.evaluate("window.jupyterapp.commands.execute('settingeditor:open', {query: 'GPU platform'})")
    editor = page.locator(".jp-SettingsPanel")
    expect(editor.get_by_text("Default project").first).to_be_visible()
    expect(editor.get_by_text("Run waited unusually long").first).to_be_visible()
    page.screenshot(path=screenshots / "settings.png")
    page.evaluate("window.jupyterapp.shell.currentWidget.close()")


def test_submit_from_the_file_browser_queued_running_succeeded(lab: Lab, lab_page: Any, screenshots: Path) -> None:
    page = lab_page
    # Pause the queue first (as a platform admin) so the run has to wait.
    lab.ok("POST", "queues/team-a-train/pause", user="ops")
    back_to_runs(page)

    page.locator('li[data-id="filebrowser"]').click()
    item = page.locator(".jp-DirListing-item", has_text="train.py")
    expect(item).to_be_visible()
    item.click(button="right")
    page.get_by_role("menuitem", name="Submit to GPU queue…").click()

    dialog = submit_dialog(page)
    expect(dialog.locator('input[name="script"]')).to_have_value("train.py")
    dialog.locator('input[name="args"]').fill("gate-1")
    dialog.locator('select[name="preset-add"]').select_option("single-gpu")
    preview = dialog.locator(".jp-GpuPlat-preview")
    expect(preview).to_have_attribute("data-verdict", "allowed")
    expect(preview.locator('tr[data-path="resources.gpu"]')).to_contain_text("preset:single-gpu")
    expect(preview.locator('tr[data-path="queue"]')).to_contain_text("project:team-a")
    dialog.locator(".jp-Dialog-content").screenshot(path=screenshots / "submit-dialog.png")
    dialog.get_by_role("button", name="Submit").click()
    expect(dialog).to_have_count(0)

    detail = page.locator(f"{SIDEBAR} .jp-GpuPlat-detail")
    expect(detail).to_be_visible()
    run_id = detail.get_attribute("data-run-id")
    assert run_id
    expect(detail.locator(".jp-GpuPlat-detailHeader .jp-GpuPlat-status")).to_have_text("queued")
    explain = detail.locator(".jp-GpuPlat-explain")
    # the service's words (explain's layer_text and number_lines), as the CLI prints them
    expect(explain).to_contain_text("held by our queue (dispatch)")
    expect(explain).to_contain_text("queue team-a-train is paused")
    expect(explain).to_contain_text("position: 1 of 1 waiting in queue team-a-train")
    expect(explain).to_contain_text("ops can resume queue team-a-train")
    expect(detail.locator('[data-clock="queue_wait"]')).to_have_class(re.compile("jp-mod-live"))
    page.screenshot(path=screenshots / "run-queued.png")
    show_tab(page, "queues")  # the queue shows its pending run and why nothing moves
    queue = page.locator(f'{SIDEBAR} .jp-GpuPlat-queue[data-queue="team-a-train"]')
    expect(queue).to_contain_text("1 pending · longest wait")
    expect(queue.locator(".jp-GpuPlat-queueWait")).to_have_text("paused: nothing is dispatched")
    page.screenshot(path=screenshots / "queues-waiting.png")
    show_tab(page, "runs")
    expect(detail).to_be_visible()

    lab.ok("POST", "queues/team-a-train/resume", user="ops")
    expect(detail.locator(".jp-GpuPlat-detailHeader .jp-GpuPlat-status")).to_have_text("running")
    logs = detail.locator(".jp-GpuPlat-logBody")
    expect(logs).to_contain_text("step 2 loss=0.333")
    # The lines arrived while the run runs: it waits for its gate file until we create it.
    assert lab.ok("GET", f"runs/{run_id}")["status"] == "running"
    expect(explain).to_contain_text("Running")
    expect(detail.locator(".jp-GpuPlat-logs")).to_have_attribute("data-state", "live")
    page.screenshot(path=screenshots / "run-running.png")

    (lab.work / "gate-1").touch()
    expect(detail.locator(".jp-GpuPlat-detailHeader .jp-GpuPlat-status")).to_have_text("succeeded")
    expect(logs).to_contain_text("finished")
    phases = detail.locator(".jp-GpuPlat-phase")
    expect(phases).to_have_count(4)
    expect(phases.nth(0)).to_contain_text("Dispatch: waiting in our queue")
    expect(phases.nth(0)).to_contain_text("QueuePaused")
    expect(phases.nth(1)).to_contain_text("Execution")
    expect(detail.locator(".jp-GpuPlat-outputSection")).to_contain_text("result.txt")
    # It ran in the file's directory, and the run keeps the code it ran.
    code = detail.locator(".jp-GpuPlat-codeSection")
    expect(code).to_contain_text(str(lab.work.resolve()))
    expect(code).to_contain_text("code/train.py")
    expect(detail.locator(".jp-GpuPlat-outputSection")).to_contain_text("code/train.py")
    expect(detail.locator('.jp-GpuPlat-metric[data-metric="loss"]')).to_be_visible()
    expect(detail.locator('.jp-GpuPlat-configTable tr[data-path="env[HF_HOME]"]')).to_contain_text("org")
    toast = page.locator(".Toastify__toast", has_text="succeeded")
    expect(toast).to_be_visible()
    detail.locator(".jp-GpuPlat-explainSection").scroll_into_view_if_needed()
    page.screenshot(path=screenshots / "run-succeeded.png")
    for sel in LEGIBLE:
        assert contrast(page, sel) >= 4.5, sel  # WCAG AA in the light theme
    detail.locator(".jp-GpuPlat-configSection").scroll_into_view_if_needed()
    page.screenshot(path=screenshots / "run-outputs-metrics-config.png")

    # Keyboard: Escape back to the list, arrows and Enter open the run again.
    detail.press("Escape")
    run_list = page.locator(f"{SIDEBAR} .jp-GpuPlat-runList")
    row = run_list.locator(f'.jp-GpuPlat-runRow[data-run-id="{run_id}"]')
    expect(row).to_contain_text("succeeded")
    expect(row).to_contain_text("team-a-train · single-gpu · 1 GPU")
    run_list.focus()
    page.keyboard.press("ArrowDown")
    page.keyboard.press("Enter")
    expect(page.locator(f'{SIDEBAR} .jp-GpuPlat-detail[data-run-id="{run_id}"]')).to_be_visible()
    back_to_runs(page)
    page.screenshot(path=screenshots / "runs-list.png")


def test_a_refused_preview_disables_submit_with_the_reason(lab_page: Any, screenshots: Path) -> None:
    page = lab_page
    page.keyboard.press("Control+Shift+c")
    palette = page.locator("#command-palette")
    palette.locator("input").fill("Submit to GPU queue")
    palette.locator(".lm-CommandPalette-item", has_text="Submit to GPU queue…").first.click()
    dialog = submit_dialog(page)
    dialog.locator('input[name="script"]').fill("train.py")
    dialog.locator('input[name="gpu"]').fill("3")
    preview = dialog.locator(".jp-GpuPlat-preview")
    expect(preview).to_have_attribute("data-verdict", "refused")
    expect(preview).to_contain_text("project team-a allows at most 2 gpu per run")
    submit = dialog.get_by_role("button", name="Submit")
    expect(submit).to_be_disabled()  # no sending a run the policy refuses
    first = preview.locator(".jp-GpuPlat-violation .jp-GpuPlat-errorMessage").first
    # the first rule the policy checks: the queue's quota, with the numbers and a hint
    expect(first).to_have_text(
        "requests 3 gpu but queue team-a-train has a quota of 2 gpu: it could never be dispatched"
    )
    expect(preview.locator(".jp-GpuPlat-errorHint").first).to_contain_text("ask for at most 2 gpu")
    expect(dialog.locator(".jp-GpuPlat-submitReason")).to_have_text("Refused: " + first.inner_text())
    expect(dialog).to_be_visible()  # still open: the user can fix the request
    dialog.locator(".jp-Dialog-content").screenshot(path=screenshots / "submit-refused.png")
    dialog.get_by_role("button", name="Cancel").click()
    expect(dialog).to_have_count(0)


def contrast(page: Any, selector: str) -> float:
    """WCAG contrast ratio of an element's text colour (alpha blended) against the panel background."""
    return float(
        page.evaluate(
            """([sel, panel]) => {
              const rgba = c => { const v = c.match(/[\\d.]+/g).map(Number); return [v[0], v[1], v[2], v[3] ?? 1]; };
              const lum = ([r, g, b]) => {
                const f = v => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
                return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b);
              };
              const bg = rgba(getComputedStyle(document.querySelector(panel)).backgroundColor);
              const fg = rgba(getComputedStyle(document.querySelector(sel)).color);
              const mixed = [0, 1, 2].map(i => fg[3] * fg[i] + (1 - fg[3]) * bg[i]);
              const a = lum(mixed), b = lum(bg);
              return (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
            }""",
            [selector, SIDEBAR],
        )
    )


def test_dark_theme_renders_legibly(lab_page: Any, screenshots: Path) -> None:
    page = lab_page
    back_to_runs(page)
    page.evaluate("window.jupyterapp.commands.execute('apputils:change-theme', {theme: 'JupyterLab Dark'})")
    expect(page.locator("body")).to_have_attribute("data-jp-theme-light", "false")
    row = page.locator(f"{SIDEBAR} .jp-GpuPlat-runRow:visible", has_text="train.py").first
    expect(row).to_be_visible()
    row.click()
    detail = page.locator(f"{SIDEBAR} .jp-GpuPlat-detail")
    expect(detail.locator(".jp-GpuPlat-logBody")).to_contain_text("finished")
    expect(detail.locator(".jp-GpuPlat-explainMessage")).to_be_visible()
    expect(detail.locator(".jp-GpuPlat-eventMessage").first).to_be_visible()
    bg = page.evaluate(f"getComputedStyle(document.querySelector('{SIDEBAR}')).backgroundColor")
    assert bg == "rgb(33, 33, 33)", bg
    for sel in LEGIBLE:
        assert contrast(page, sel) >= 4.5, sel  # WCAG AA in the dark theme too
    page.screenshot(path=screenshots / "dark-run.png")
    show_tab(page, "queues")
    expect(page.locator(f"{SIDEBAR} .jp-GpuPlat-queue")).to_have_count(2)
    page.screenshot(path=screenshots / "dark-queues.png")
    page.evaluate("window.jupyterapp.commands.execute('apputils:change-theme', {theme: 'JupyterLab Light'})")
    expect(page.locator("body")).to_have_attribute("data-jp-theme-light", "true")
    back_to_runs(page)


def test_stop_asks_first_then_stops_the_run(lab: Lab, lab_page: Any) -> None:
    page = lab_page
    run = lab.ok(
        "POST",
        "runs",
        body={"project": "team-a", "name": "long", "command": [sys.executable, "-c", "import time; time.sleep(60)"]},
    )
    page.evaluate(f"window.jupyterapp.commands.execute('gpuplat:open-run', {{id: '{run['id']}'}}).then(() => null)")
    detail = page.locator(f'{SIDEBAR} .jp-GpuPlat-detail[data-run-id="{run["id"]}"]')
    expect(detail).to_have_attribute("data-status", "running")
    detail.get_by_role("button", name="Stop…").click()
    confirm = page.locator(".jp-Dialog-content", has_text="Stop this run?")
    confirm.get_by_role("button", name="Keep running").click()
    expect(confirm).to_have_count(0)
    assert lab.ok("GET", f"runs/{run['id']}")["status"] == "running"
    detail.get_by_role("button", name="Stop…").click()
    confirm.get_by_role("button", name="Stop run").click()
    expect(detail.locator(".jp-GpuPlat-detailHeader .jp-GpuPlat-status")).to_have_text("stopped")
    expect(detail.locator(".jp-GpuPlat-explain")).to_contain_text("stopped by alice")
    back_to_runs(page)


def saved_panel_state(lab: Lab) -> dict[str, Any]:
    """What JupyterLab saved of the sidebar in the workspace (it saves shortly after a change)."""
    ws = requests.get(
        f"{lab.url}lab/api/workspaces/default", headers={"Authorization": f"token {lab.token}"}, timeout=30
    ).json()
    return dict(ws.get("data", {}).get("jupyter-gpuplat:panel") or {})


def test_filters_search_and_restore_after_reload(lab: Lab, lab_page: Any) -> None:
    page = lab_page
    back_to_runs(page)
    search = page.locator(f"{SIDEBAR} .jp-GpuPlat-search")
    rows = page.locator(f"{SIDEBAR} .jp-GpuPlat-runRow:visible")
    search.fill("train")
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text("train.py")
    search.fill("no-such-run")
    expect(page.locator(f"{SIDEBAR} .jp-GpuPlat-empty")).to_have_text("No runs match.")
    search.fill("")
    page.locator(f'{SIDEBAR} select[aria-label="Filter by status"]').select_option("stopped")
    # other tests of this server may have stopped runs too (test_estimates stops its own): only stopped ones show
    expect(rows.filter(has_text="long")).to_have_count(1)
    expect(rows.filter(has_text="train.py")).to_have_count(0)
    expect(rows.locator(".jp-GpuPlat-status")).to_have_text(["stopped"] * rows.count())
    page.locator(f'{SIDEBAR} select[aria-label="Filter by status"]').select_option("")
    # other tests of this server may have runs too: ours are both listed again
    expect(rows.filter(has_text="long")).to_have_count(1)
    expect(rows.filter(has_text="train.py")).to_have_count(1)
    # The open run and the sidebar come back after a reload.
    rows.first.click()
    run_id = page.locator(f"{SIDEBAR} .jp-GpuPlat-detail").get_attribute("data-run-id")
    until(lambda: saved_panel_state(lab).get("runId") == run_id, "the workspace to record the open run")
    page.reload()
    expect(page.locator(f'{SIDEBAR} .jp-GpuPlat-detail[data-run-id="{run_id}"]')).to_be_visible(timeout=60_000)
    back_to_runs(page)


def test_admins_pause_and_resume_queues(lab: Lab, browser_context: Any, screenshots: Path) -> None:
    page = browser_context.new_page()
    try:
        page.goto(f"{lab.url}lab/workspaces/ops?token=tok-ops")  # ops: a platform admin
        page.locator('li[data-id="jupyter-gpuplat-sidebar"]').click()
        widen_left_sidebar(page, 460)
        show_tab(page, "queues")
        queue = page.locator(f'{SIDEBAR} .jp-GpuPlat-queue[data-queue="team-b-train"]')  # admins see every queue
        expect(page.locator(f"{SIDEBAR} .jp-GpuPlat-queue")).to_have_count(3)
        queue.get_by_role("button", name="Pause").click()
        expect(queue.locator(".jp-GpuPlat-chip")).to_have_text("paused")
        assert next(q for q in lab.ok("GET", "queues", user="ops")["queues"] if q["name"] == "team-b-train")["paused"]
        page.screenshot(path=screenshots / "queues-admin.png")
        queue.get_by_role("button", name="Resume").click()
        expect(queue.locator(".jp-GpuPlat-chip")).to_have_count(0)
        assert not next(q for q in lab.ok("GET", "queues", user="ops")["queues"] if q["name"] == "team-b-train")[
            "paused"
        ]
    finally:
        page.close()
