"""GPU sessions in a notebook: start a lease, watch it wait live, open its notebook when admitted.

    SessionLauncher(client)             # project and session preset pickers, Start
    SessionView(client.start_session("team-a"))  # one lease, live: position and why, devices, link

`SessionView` follows the shared event feed (live.EventFeed) as RunMonitor does: any status
event wakes its worker thread, which re-reads the lease and, while it waits, the explain
answer (another run leaving changes its place in line). No timer: nothing changes between
events. The "Open notebook" link is an output (`display_data` in an Output widget), so
JupyterLab resolves its relative href against the notebook showing it and opens the
target as a document.
"""

from __future__ import annotations

import logging
import os
import posixpath
from typing import Any

import ipywidgets as widgets
import traitlets

from ...client.rest import Client, GpuPlatAPIError
from . import _html as h
from .live import Follower, default_client

__all__ = ["SessionLauncher", "SessionView"]

log = logging.getLogger(__name__)

NEW_NOTEBOOK = "a new gpu-session-<time>.ipynb here"


class SessionView(Follower, widgets.VBox):
    """One GPU session, live: `SessionView(lease)` or `SessionView("r-123")`."""

    status = traitlets.Unicode("", help="The lease's status, as the view last saw it.")

    def __init__(self, run: dict[str, Any] | str, client: Client | None = None, **kwargs: Any) -> None:
        self._own(run, client)
        client, record = self.client, self.run
        self.explain: dict[str, Any] | None = None
        self.here = client.here()  # the directory of the notebook showing this (its kernel's cwd)
        self.state_text = ""  # what the view says about the lease, as text
        self.link_html = ""  # the "Open notebook" anchor, once admitted

        self.header = widgets.HTML()
        self.state = widgets.HTML()
        self.link = widgets.Output()
        self.stop_button = widgets.Button(description="Stop", icon="stop", tooltip="End the session; its GPUs return")
        self.keep_button = widgets.Button(
            description="Keep session", icon="clock", tooltip="Start the idle clock again"
        )
        self.message = widgets.HTML()
        controls = widgets.HBox([self.stop_button, self.keep_button, self.message])
        self._parts = [self.header, self.state, self.link, self.stop_button, self.keep_button, self.message, controls]
        super().__init__(children=[self.header, self.state, self.link, controls], **kwargs)
        self.add_class("gpuplat-session-view")
        self.stop_button.on_click(lambda _: self._act(self.client.stop))
        self.keep_button.on_click(lambda _: self._act(self.client.keepalive))
        self._apply(record)

        self._follow(client, record, f"gpuplat-session-{self.run_id}")

    # ---- event feed → worker ------------------------------------------------------------------
    def _on_event(self, ev: dict[str, Any]) -> None:
        if ev["run_id"] == self.run_id:
            self._inbox.put("refresh")
        elif self.status in h.WAITING and (ev.get("queue") == self.run.get("queue") or ev["status"] in h.FINAL):
            self._inbox.put("refresh")  # its place in line, or the capacity it waits for, may have changed

    def _done(self) -> bool:
        return self.status in h.FINAL

    def _refresh(self) -> None:
        c = self._streams.client
        run = c.get(self.run_id)
        explain = c.explain(self.run_id) if run["status"] in h.WAITING else None
        if self._closed.is_set():
            return
        self.explain = explain
        self._apply(run)

    # ---- rendering -----------------------------------------------------------------------------
    def _apply(self, run: dict[str, Any]) -> None:
        self.run = run
        status = run["status"]
        self.header.value = _header_html(run)
        self.state_text = session_state_text(run, self.explain)
        self.state.value = h.box(f'<div class="gpuplat-session-state">{h.esc(self.state_text)}</div>')
        notebook = (run.get("session") or {}).get("notebook")
        link = h.notebook_link(notebook, self.here) if notebook and run["devices"] and status not in h.FINAL else ""
        if link != self.link_html:
            self.link_html = link
            self.link.outputs = (
                ({"output_type": "display_data", "data": {"text/html": link, "text/plain": notebook}, "metadata": {}},)
                if link
                else ()
            )
        self.stop_button.disabled = status in h.FINAL or status == "stopping"
        self.keep_button.disabled = status != "running"
        if status != self.status:  # last: observers of `status` see the rest updated
            self.status = status

    def _act(self, call: Any) -> None:
        try:
            self.explain = None
            self._apply(call(self.run_id))
            self.message.value = ""
        except GpuPlatAPIError as exc:
            self.message.value = h.error_block(exc.message, exc.hint)


def session_state_text(run: dict[str, Any], explain: dict[str, Any] | None) -> str:
    """Where the lease is, in one line: its place in line and why, its kernel and GPUs, or how it ended."""
    status = run["status"]
    sess = run.get("session") or {}
    if status in h.FINAL:
        return f"ended: {status} — {run.get('message') or run.get('reason') or ''}"
    if status in h.WAITING and not run["devices"]:
        if explain is None:
            return f"waiting for a GPU: {run.get('message') or status}"
        return f"waiting for a GPU: {explain['wait_line']}"
    gpus = ", ".join(map(str, run["devices"])) or "none"
    text = f"{status}: kernel {sess.get('kernel', '?')} on GPU {gpus}"
    if sess.get("idle_deadline"):
        text += f" · ends if idle until {h.when(sess['idle_deadline'])}"
    elif sess.get("busy"):
        text += " · busy"
    if sess.get("idle_by", "kernel") != "kernel" and sess.get("idle_reason"):
        text += f" · {sess['idle_reason']}"  # the server's words: which signal judges it, or why GPUs are unseen
    if run.get("reason") == "IdleWarning":  # the last word before the cull: say it, Keep session answers it
        text += f" · {run.get('message') or ''}"
    return text


def _header_html(run: dict[str, Any]) -> str:
    presets = ", ".join(run.get("presets") or [])
    bits = [
        "<b>GPU session</b>",
        h.dim(h.esc(run["id"])),
        h.badge(run["status"]),
        h.dim(h.esc(f"{run['project']} · {presets} · {run['queue']}")),
    ]
    return h.box(" ".join(bits))


class SessionLauncher(widgets.VBox):
    """Start a GPU session: pick the project and session preset, Start, then watch it in a SessionView."""

    def __init__(
        self,
        client: Client | None = None,
        project: str | None = None,
        *,
        projects: list[dict[str, Any]] | None = None,
        **kwargs: Any,
    ) -> None:
        self._parts: list[widgets.Widget] = []
        self.view: SessionView | None = None  # the lease started last
        self.started: dict[str, Any] | None = None
        self.error_html = ""
        self.client = client or default_client()
        # A viewer may look but not start anything.
        self.projects = [p["name"] for p in projects or self.client.projects() if p.get("role") != "viewer"]
        self.project_picker = widgets.Dropdown(options=self.projects, description="project")
        self.preset_picker = widgets.Dropdown(description="preset")
        self.preset_help = widgets.HTML()
        self.notebook_field = widgets.Text(
            description="notebook", placeholder=NEW_NOTEBOOK, layout=widgets.Layout(width="520px")
        )
        self.start_button = widgets.Button(description="Start", icon="play", button_style="primary")
        self.error_box = widgets.HTML()
        self.view_box = widgets.VBox()
        actions = widgets.HBox([self.start_button, self.error_box])
        self._parts = [
            self.project_picker,
            self.preset_picker,
            self.preset_help,
            self.notebook_field,
            self.start_button,
            self.error_box,
            self.view_box,
            actions,
        ]
        super().__init__(
            children=[
                self.project_picker,
                self.preset_picker,
                self.preset_help,
                self.notebook_field,
                actions,
                self.view_box,
            ],
            **kwargs,
        )
        self.add_class("gpuplat-session-launcher")
        if project is not None and project in self.projects:
            self.project_picker.value = project
        self._project_changed()
        self.project_picker.observe(lambda _: self._project_changed(), "value")
        self.start_button.on_click(lambda _: self.start())

    def start(self) -> dict[str, Any] | None:
        """Lease a session with the form; returns the lease, or None with the reason in `error_html`."""
        if not self.preset_picker.value:
            self._show_error("no session preset to start", "pick a project that allows a preset of kind session")
            return None
        self.start_button.disabled = True
        try:
            notebook = self.notebook_field.value.strip() or None
            if notebook is not None and not os.path.isabs(notebook):
                # As typed in a notebook: beside it (the kernel's directory), not at the Jupyter root.
                notebook = posixpath.join(self.client.here(), notebook)
            run = self.client.start_session(self.project_picker.value, self.preset_picker.value, notebook)
        except GpuPlatAPIError as exc:
            self._show_error(exc.message, exc.hint)
            return None
        finally:
            self.start_button.disabled = not self.preset_picker.value
        self._show_error("")
        self.started = run
        if self.view is not None:
            self.view.close()
        self.view = SessionView(run, self.client)
        self.view_box.children = (self.view,)
        return run

    def close(self) -> None:
        if self.view is not None:
            self.view.close()
        for w in self._parts:
            w.close()
        super().close()

    def _project_changed(self) -> None:
        project = self.project_picker.value
        try:
            presets = [p for p in self.client.presets(project) if p.get("kind") == "session"] if project else []
        except GpuPlatAPIError as exc:
            presets = []
            self._show_error(exc.message, exc.hint)
        self.preset_picker.options = [p["name"] for p in presets]
        self.preset_picker.value = presets[0]["name"] if presets else None
        self.start_button.disabled = not presets
        rows = []
        for p in presets:
            res = ", ".join(f"{k} {v}" for k, v in (p.get("resources") or {}).items() if v is not None)
            about = f"— {p.get('description') or ''} ({res})"
            rows.append(f"<b>{h.esc(p['name'])}</b> {h.dim(h.esc(about))}")
        self.preset_help.value = h.box("<br>".join(rows) if rows else h.dim("no GPU session preset in this project"))

    def _show_error(self, message: str, hint: str = "") -> None:
        self.error_html = h.error_block(message, hint) if message else ""
        self.error_box.value = self.error_html
