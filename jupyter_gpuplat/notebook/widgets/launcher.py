"""Launcher: a form to submit a run, limited to what policy allows, with a live preview.

Project, presets (an ordered pick: later presets override earlier ones), queue and
GPU pickers offer what `Client.projects()` says the project may use
(`usable_queues`, `usable_presets`, `max_run_resources`). Every change schedules a
debounced `Client.preview`: the resolved spec with the layer that set each field,
and the policy verdict. Submit shows a refusal inline (message and hint) or, on
success, a RunMonitor for the new run.

It starts from the project's `default_presets` (applied first by the service; the preset help
names them) and from the project and presets last submitted from a Launcher (remembered in
the Jupyter data dir, launchview.save_last). While the preview refuses, Submit is disabled
with the reason beside it; a field the preview's `locks` name shows as locked (`interactive — locked,
set by preset notebook`) and cannot be changed (once the first preview answers); 0 GPUs is said
plainly (launchview.preview_html).

Checking "sweep" (sweepform.SweepForm) makes Submit submit a sweep instead: params as rows (name and
compact domain), grid or random, num runs, concurrency, with a preview of how many children and
their first params computed here; the sweep is then followed in a SweepView.

A second tab, "GPU session", starts a GPU session instead (session.SessionLauncher): the
project's session presets, Start, and the lease live until it is admitted and its notebook
can be opened.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

import ipywidgets as widgets

from ...client.rest import Client, GpuPlatAPIError
from ...core.errors import GpuPlatError
from . import _html as h
from .launchview import (
    alternative_tooltip,
    default_label,
    load_last,
    lock_label,
    preview_html,
    refusal_reason,
    save_last,
    validation_message,
)
from .live import default_client
from .session import SessionLauncher
from .sweepform import SweepForm

__all__ = ["Launcher"]

log = logging.getLogger(__name__)

DEFAULT = ""  # the "leave it to the project and presets" choice of the queue and GPU pickers
MODES = (("Shell command", "command"), ("Script (.py/.ipynb)", "script"), ("Python code", "code"))
PLACEHOLDER = {
    "command": "python train.py --epochs 3",
    "script": "experiments/train.py (relative to the Jupyter root)",
    "code": "from jupyter_gpuplat import tracking\n...",
}
# The preview needs something to run; this stands in until the user types it.
PREVIEW_PLACEHOLDER = "true"


class Launcher(widgets.VBox):
    """Submit a run: `Launcher(project="team-a")`, `Launcher(project="team-a", presets=["single-gpu"])`."""

    debounce_seconds = 0.3

    def __init__(
        self,
        client: Client | None = None,
        project: str | None = None,
        presets: list[str] | None = None,
        **kwargs: Any,
    ) -> None:
        self._lock = threading.Lock()  # first: close() runs from __del__ even if __init__ failed
        self._closed = False
        self._timer: threading.Timer | None = None
        self._parts: list[widgets.Widget] = []
        self.monitor: Any = None  # the RunMonitor (SweepView) of the last submitted run (sweep)
        self.client = client or default_client()
        projects = self.client.projects()
        self.projects: dict[str, dict[str, Any]] = {p["name"]: p for p in projects}
        if not self.projects:
            raise GpuPlatAPIError("you belong to no project", "ask a platform admin to add you to one")
        if project is not None and project not in self.projects:
            raise GpuPlatAPIError(f"project {project!r} not found", f"your projects: {', '.join(self.projects)}")
        self.preview: dict[str, Any] | None = None  # the latest preview answer
        self.preview_request: dict[str, Any] | None = None  # the request it answered
        self.shown_request: dict[str, Any] | None = None  # ... once Submit, locks and alternatives follow it
        self.preview_error = ""  # why the last preview could not be made
        self.error_html = ""  # the inline error under Submit
        self.submitted: dict[str, Any] | None = None  # the run created by the last Submit
        self._presets_info: dict[str, dict[str, Any]] = {}
        self._generation = 0

        wide = widgets.Layout(width="520px")
        self.project_picker = widgets.Dropdown(options=list(self.projects), description="project")
        self.preset_picker = widgets.TagsInput(allowed_tags=[], value=[], allow_duplicates=False, layout=wide)
        self.preset_help = widgets.HTML()
        self.queue_picker = widgets.Dropdown(description="queue")
        self.gpu_picker = widgets.Dropdown(description="GPUs")
        self.name_field = widgets.Text(description="name", placeholder="optional", layout=wide)
        self.mode_picker = widgets.ToggleButtons(options=MODES, value="command", description="run")
        self.command_field = widgets.Textarea(layout=widgets.Layout(width="520px", height="5em"))
        self.sweep_form = SweepForm()
        self.preview_box = widgets.HTML()
        self.alternatives_box = widgets.HBox()  # "use this" buttons: what the policy would accept instead
        self.submit_button = widgets.Button(description="Submit", icon="play", button_style="primary")
        self.submit_reason = widgets.HTML()  # why Submit is disabled (the preview's refusal)
        self.error_box = widgets.HTML()
        self.monitor_box = widgets.VBox()
        presets_label = widgets.HTML(h.box(h.dim("presets, in order (later ones override earlier ones)")))
        presets_row = widgets.VBox([presets_label, self.preset_picker])
        pickers = widgets.HBox([self.queue_picker, self.gpu_picker])
        actions = widgets.HBox([self.submit_button, self.submit_reason, self.error_box])
        self._parts = [
            self.project_picker,
            self.preset_picker,
            self.preset_help,
            self.queue_picker,
            self.gpu_picker,
            self.name_field,
            self.mode_picker,
            self.command_field,
            self.sweep_form,
            self.preview_box,
            self.alternatives_box,
            self.submit_button,
            self.submit_reason,
            self.error_box,
            self.monitor_box,
            presets_label,
            presets_row,
            pickers,
            actions,
        ]
        self.run_form = widgets.VBox(
            [
                self.project_picker,
                presets_row,
                self.preset_help,
                pickers,
                self.name_field,
                self.mode_picker,
                self.command_field,
                self.sweep_form,
                self.preview_box,
                self.alternatives_box,
                actions,
                self.monitor_box,
            ]
        )
        self.session_tab = SessionLauncher(self.client, project, projects=projects)
        self.tabs = widgets.Tab(children=[self.run_form, self.session_tab], titles=("Run", "GPU session"))
        self._parts += [self.run_form, self.session_tab, self.tabs]
        super().__init__(children=[self.tabs], **kwargs)
        self.add_class("gpuplat-launcher")
        self.last = load_last()  # what was submitted from a Launcher last
        self._start_presets = list(presets) if presets is not None else None
        last_project = self.last.get("project")
        self.project_picker.value = (
            project or (last_project if last_project in self.projects else None) or next(iter(self.projects))
        )
        self._project_changed(restore=True)
        self._mode_changed()
        self.project_picker.observe(lambda _: self._project_changed(), "value")
        self.mode_picker.observe(lambda _: self._mode_changed(), "value")
        for w in (self.preset_picker, self.queue_picker, self.gpu_picker, self.name_field, self.command_field):
            w.observe(lambda _: self.schedule_preview(), "value")
        self.preset_picker.observe(lambda _: self._render_preset_help(), "value")
        self.sweep_form.observe(lambda _: self.schedule_preview(), "preview_text")
        self.submit_button.on_click(lambda _: self.submit())
        self.schedule_preview()

    # ---- public --------------------------------------------------------------------------------
    @property
    def preview_html(self) -> str:
        return str(self.preview_box.value)

    def request(self, *, for_preview: bool = False) -> dict[str, Any]:
        """The form as keyword arguments of `Client.submit`."""
        text = self.command_field.value.strip()
        mode = self.mode_picker.value
        body: dict[str, Any] = {"project": self.project_picker.value}
        if text:
            body[mode] = text
        elif for_preview:
            body["command"] = PREVIEW_PLACEHOLDER
        if self.preset_picker.value:
            body["presets"] = list(self.preset_picker.value)
        if self.queue_picker.value != DEFAULT:
            body["queue"] = self.queue_picker.value
        if self.gpu_picker.value != DEFAULT:
            body["gpus"] = self.gpu_picker.value
        if self.name_field.value.strip():
            body["name"] = self.name_field.value.strip()
        if for_preview and self.sweep_form.enabled.value and self.sweep_form.first_params:
            body["params"] = self.sweep_form.first_params[0]  # the verdict of a sweep is its children's
        return body

    def schedule_preview(self) -> None:
        """Preview after the form has been still for `debounce_seconds`."""
        with self._lock:
            if self._closed:
                return
            self._generation += 1
            if self._timer is not None:
                self._timer.cancel()
            self._timer = threading.Timer(self.debounce_seconds, self._preview_later, args=(self._generation,))
            self._timer.daemon = True
            self._timer.start()

    def refresh_preview(self) -> dict[str, Any] | None:
        """Preview now (in this thread) and render it."""
        with self._lock:
            self._generation += 1
            generation = self._generation
        self._do_preview(generation)
        return self.preview

    def submit(self) -> dict[str, Any] | None:
        """Submit the form (a sweep when "sweep" is checked); returns the run, or None with why in `error_html`."""
        from .monitor import RunMonitor
        from .sweep import SweepView

        if not self.command_field.value.strip():
            self._show_error("nothing to run", f"enter a {self.mode_picker.label.lower()} first")
            return None
        self.submit_button.disabled = True
        try:
            body = self.request()
            if self.sweep_form.enabled.value:
                body["matrix"] = self.sweep_form.matrix()
            run = self.client.submit(**body)
        except GpuPlatError as exc:  # the service's refusal, or the sweep form's params
            self._show_error(exc.message, exc.hint)
            return None
        except ValueError as exc:  # the client checks the request against the service's schema first
            self._show_error(validation_message(exc), "fix the form and submit again")
            return None
        finally:
            self._sync_submit()
        self._show_error("")
        self.submitted = run
        save_last(body["project"], list(body.get("presets") or []))
        if self.monitor is not None:
            self.monitor.close()
        self.monitor = SweepView(run, self.client) if run.get("kind") == "sweep" else RunMonitor(run, self.client)
        self.monitor_box.children = (self.monitor,)
        return run

    def close(self) -> None:
        with self._lock:
            self._closed = True
            if self._timer is not None:
                self._timer.cancel()
        if self.monitor is not None:
            self.monitor.close()
        for w in self._parts:
            w.close()
        super().close()

    # ---- form ----------------------------------------------------------------------------------
    @property
    def default_presets(self) -> list[str]:
        """The project's default presets: the service applies them first, before the picked ones."""
        return list(self.projects[self.project_picker.value].get("default_presets") or [])

    @property
    def locked(self) -> dict[str, str]:
        """Each locked path (queue, resources…) and the layer that locked it (`preset:pinned`), as the
        last preview answered (its `locks`): the service resolves the presets, this widget derives none.
        Empty until the first preview (asked for as the Launcher opens)."""
        return dict((self.preview or {}).get("locks") or {})

    def _project_changed(self, restore: bool = False) -> None:
        p = self.projects[self.project_picker.value]
        try:
            self._presets_info = {x["name"]: x for x in self.client.presets(p["name"])}
        except GpuPlatAPIError:
            self._presets_info = {}
        usable_presets = list(p.get("usable_presets") or [])
        if restore and self._start_presets is not None:
            bad = [x for x in self._start_presets if x not in usable_presets]
            if bad:
                raise GpuPlatAPIError(
                    f"preset {bad[0]!r} is not allowed in project {p['name']}",
                    f"allowed presets: {', '.join(usable_presets) or 'none'}",
                )
            self.last = {**self.last, "presets": {p["name"]: self._start_presets}}  # given: they win over memory
        remembered = (
            (self.last.get("presets") or {}).get(p["name"]) if restore or not self.preset_picker.value else None
        )
        start = remembered if isinstance(remembered, list) else self.preset_picker.value
        self.preset_picker.allowed_tags = usable_presets
        self.preset_picker.value = [x for x in start if x in usable_presets and x not in self.default_presets]
        self.preset_picker.placeholder = "pick: " + ", ".join(usable_presets) if usable_presets else "none allowed"
        default_q = p.get("default_queue")
        queues = [(f"default ({default_q or 'from presets'})", DEFAULT)]
        queues += [(q, q) for q in p.get("usable_queues") or []]
        self._queue_options = queues
        max_gpu = ((p.get("max_run_resources") or {}).get("gpu")) or 8
        self._gpu_options = [("from presets", DEFAULT), *[(str(n), n) for n in range(max_gpu + 1)]]
        for picker, options in ((self.queue_picker, queues), (self.gpu_picker, self._gpu_options)):
            picker.disabled = False
            picker.options = options
            picker.value = DEFAULT
        self._render_preset_help()
        self._apply_locks()

    def _apply_locks(self) -> None:
        """A locked queue or GPU count shows its value, the lock and the preset, and cannot be picked; an
        unlocked one's "default" says what the project and presets make it (from a current preview)."""
        locked = self.locked
        current = self.preview if self.preview_request == self.request(for_preview=True) else None
        resolved = (current or {}).get("resolved") or {}
        provenance = (current or {}).get("provenance") or {}
        # a locked value is the last preview's: no choice here changes it
        fixed = (self.preview or {}).get("resolved") or {}
        gpu_lock = locked.get("resources.gpu") or locked.get("resources")
        for picker, options, lock, path in (
            (self.queue_picker, self._queue_options, locked.get("queue"), "queue"),
            (self.gpu_picker, self._gpu_options, gpu_lock, "resources.gpu"),
        ):
            value = resolved.get("queue") if path == "queue" else (resolved.get("resources") or {}).get("gpu")
            if lock is not None:
                own = fixed.get("queue") if path == "queue" else (fixed.get("resources") or {}).get("gpu")
                options = [(lock_label(own, lock), DEFAULT)]
            elif value is not None and path in provenance:
                options = [(default_label(value, provenance[path]), DEFAULT), *options[1:]]
            relabel_only = lock is None and not picker.disabled
            if relabel_only and picker.value != DEFAULT:
                # Setting options resets a Dropdown to its first entry for a moment; this runs in the
                # preview's thread, and a choice the user makes in that moment would be lost. The
                # "default (…)" label waits until the default is what is picked.
                continue
            if list(picker.options) != list(options):
                keep = picker.value
                picker.options = options
                picker.value = keep if keep in [v for _, v in options] else DEFAULT
            picker.disabled = lock is not None

    def _mode_changed(self) -> None:
        self.command_field.placeholder = PLACEHOLDER[self.mode_picker.value]

    def _render_preset_help(self) -> None:
        rows = []
        if self.default_presets:
            names = ", ".join(self.default_presets)
            rows.append(
                f'<span class="gpuplat-default-presets">project defaults, applied first: <b>{h.esc(names)}</b></span>'
            )
        for name in self.preset_picker.allowed_tags:
            info = self._presets_info.get(name, {})
            res = info.get("resources") or {}
            shape = ", ".join(f"{k} {v}" for k, v in res.items() if v is not None)
            picked = name in self.preset_picker.value
            label = f"<b>{h.esc(name)}</b>" if picked else h.esc(name)
            locked = f" · locks {', '.join(info['locked'])}" if info.get("locked") else ""
            about = f"— {info.get('description') or ''} ({shape}){locked}"
            rows.append(f"{label} {h.dim(h.esc(about))}")
        self.preset_help.value = h.box("<br>".join(rows)) if rows else h.box(h.dim("no presets allowed here"))

    def _show_error(self, message: str, hint: str = "") -> None:
        self.error_html = h.error_block(message, hint) if message else ""
        self.error_box.value = self.error_html

    # ---- preview -------------------------------------------------------------------------------
    def _preview_later(self, generation: int) -> None:
        try:
            self._do_preview(generation)
        except Exception:  # a timer thread has no one to raise to
            log.exception("Launcher preview failed")

    def _do_preview(self, generation: int) -> None:
        req = self.request(for_preview=True)
        preview: dict[str, Any] | None = None
        error = ""
        try:
            preview = self.client.preview(**req)
        except GpuPlatAPIError as exc:
            error = h.error_block(exc.message, exc.hint)
        except ValueError as exc:
            error = h.error_block(validation_message(exc))
        placeholder = not self.command_field.value.strip()
        rendered = error or preview_html(preview or {}, placeholder)
        with self._lock:
            if generation != self._generation or self._closed:
                return  # the form changed meanwhile: a newer preview is on its way
            self.preview_box.value = rendered
            self.preview, self.preview_request, self.preview_error = preview, req, error
        self._sync_submit()
        self._apply_locks()
        self._show_alternatives()
        with self._lock:
            if generation == self._generation:
                self.shown_request = req

    def apply_alternative(self, changes: dict[str, Any]) -> None:
        """Put one of the verdict's alternatives into the form (queue, presets, GPUs), as the service gave it."""
        if "presets" in changes:
            self.preset_picker.value = [p for p in changes["presets"] if p not in self.default_presets]
        if "queue" in changes and changes["queue"] in [v for _, v in self.queue_picker.options]:
            self.queue_picker.value = changes["queue"]
        gpu = (changes.get("resources") or {}).get("gpu")
        if gpu is not None and gpu in [v for _, v in self.gpu_picker.options]:
            self.gpu_picker.value = gpu

    def _show_alternatives(self) -> None:
        p = self.preview or {}
        verdict = p.get("verdict") or {}
        # refused: the verdict's alternatives, each with its start estimate beside it (the preview's `alternatives`)
        alternatives = (
            (p.get("alternatives") or verdict.get("alternatives") or []) if not verdict.get("allowed") else []
        )
        for old in self.alternatives_box.children:
            old.close()
        buttons = []
        for alt in alternatives[:3]:
            button = widgets.Button(
                description=_short(alt.get("hint") or "use this"), tooltip=alternative_tooltip(alt), icon="magic"
            )
            button.add_class("gpuplat-alternative")
            changes = dict(alt.get("changes") or {})
            button.on_click(lambda _, changes=changes: self.apply_alternative(changes))
            buttons.append(button)
        self.alternatives_box.children = tuple(buttons)

    def _sync_submit(self) -> None:
        """Submit is off while the latest preview refuses, with the reason beside it."""
        reason = refusal_reason(self.preview) if not self.preview_error else ""
        self.submit_button.disabled = bool(reason)
        self.submit_button.tooltip = reason or "Submit this run"
        self.submit_reason.value = (
            f'<span class="gpuplat-submit-reason" style="color:{h.BAD}">{h.esc(reason)}</span>' if reason else ""
        )


def _short(text: str, n: int = 60) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"
