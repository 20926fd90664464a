"""One sweep, live: its children counted by status, a progress bar, its best child, and its controls.

    SweepView(client.submit("team-a", "python train.py", matrix={...}))
    SweepView("r-123")

It follows the shared event feed (live.EventFeed) as SessionView does: an event of the sweep
or of a run of its project (its children are runs of its project) wakes the worker thread,
which re-reads the parent record (its `children.by_status` counts, `best`, `concurrency`,
`paused`); a burst of events is one read. No timer: nothing changes between events.
Concurrency (Set), Pause/Resume and Stop act on the sweep (`Client.update_sweep`, `stop`).
"""

from __future__ import annotations

import logging
from typing import Any

import ipywidgets as widgets
import traitlets

from ...client.rest import Client, GpuPlatAPIError
from ...client.sweeping import best_text, children_text, concurrency_text, done_count
from . import _html as h
from .live import Follower

__all__ = ["SweepView"]

log = logging.getLogger(__name__)


class SweepView(Follower, widgets.VBox):
    """A sweep's children by status, live: `SweepView(sweep)` or `SweepView("r-123")`."""

    status = traitlets.Unicode("", help="The sweep's status, as the view last saw it.")
    counts_text = traitlets.Unicode("", help="Its children by status, as the view last saw them.")

    def __init__(self, run: dict[str, Any] | str, client: Client | None = None, **kwargs: Any) -> None:
        self._own(run, client)
        client, record = self.client, self.run

        self.header = widgets.HTML()
        self.progress = widgets.IntProgress(min=0, max=1, value=0, layout=widgets.Layout(width="320px"))
        self.counts = widgets.HTML()
        self.best = widgets.HTML()
        self.concurrency_field = widgets.BoundedIntText(
            min=1, max=10000, description="concurrency", layout=widgets.Layout(width="180px")
        )
        self.set_button = widgets.Button(description="Set", tooltip="Dispatch at most this many children at once")
        self.pause_button = widgets.Button(description="Pause", icon="pause", tooltip="Dispatch no more children")
        self.stop_button = widgets.Button(description="Stop", icon="stop", tooltip="Stop the sweep and its children")
        self.message = widgets.HTML()
        controls = widgets.HBox([self.concurrency_field, self.set_button, self.pause_button, self.stop_button])
        line = widgets.HBox([self.progress, self.counts])
        self._parts = [
            self.header,
            self.progress,
            self.counts,
            self.best,
            self.concurrency_field,
            self.set_button,
            self.pause_button,
            self.stop_button,
            self.message,
            controls,
            line,
        ]
        super().__init__(children=[self.header, line, self.best, controls, self.message], **kwargs)
        self.add_class("gpuplat-sweep-view")
        self.set_button.on_click(lambda _: self._act(lambda i: client.update_sweep(i, self.concurrency_field.value)))
        self.pause_button.on_click(lambda _: self._act(lambda i: client.update_sweep(i, paused=not self.paused)))
        self.stop_button.on_click(lambda _: self._act(client.stop))
        self._apply(record)

        self._follow(client, record, f"gpuplat-sweep-{self.run_id}")

    @property
    def paused(self) -> bool:
        return bool(self.run.get("paused"))

    # ---- event feed → worker ------------------------------------------------------------------
    def _on_event(self, ev: dict[str, Any]) -> None:
        # Events name a run and its project: a child's are its project's, so those wake the view.
        if ev["run_id"] == self.run_id or ev.get("parent") == self.run_id or ev.get("project") == self.run["project"]:
            self._inbox.put("refresh")

    def _done(self) -> bool:
        return self.status in h.FINAL and not self._unfinished_children()

    def _unfinished_children(self) -> bool:
        return done_count(self.run) < int((self.run.get("children") or {}).get("total") or 0)

    def _refresh(self) -> None:
        run = self._streams.client.get(self.run_id)
        if not self._closed.is_set():
            self._apply(run)

    # ---- rendering -----------------------------------------------------------------------------
    def _apply(self, run: dict[str, Any]) -> None:
        self.run = run
        status = run["status"]
        total = int((run.get("children") or {}).get("total") or 0)
        self.header.value = _header_html(run)
        self.progress.max = max(total, 1)
        self.progress.value = done_count(run)
        text = children_text(run)
        self.counts.value = h.box(f'<span class="gpuplat-sweep-counts">{h.esc(text)}</span>')
        self.best.value = h.box(h.dim(h.esc(" · ".join(x for x in (concurrency_text(run), best_text(run)) if x))))
        ended = status in h.FINAL or status == "stopping"
        for w in (self.set_button, self.pause_button, self.stop_button, self.concurrency_field):
            w.disabled = ended
        if not self.set_button.disabled and run.get("concurrency") is not None:
            self.concurrency_field.value = int(run["concurrency"])
        self.pause_button.description = "Resume" if run.get("paused") else "Pause"
        self.pause_button.icon = "play" if run.get("paused") else "pause"
        if text != self.counts_text:
            self.counts_text = text
        if status != self.status:  # last: observers of `status` see the rest updated
            self.status = status

    def _act(self, call: Any) -> None:
        try:
            self._apply(call(self.run_id))
            self.message.value = ""
        except GpuPlatAPIError as exc:
            self.message.value = h.error_block(exc.message, exc.hint)


def _header_html(run: dict[str, Any]) -> str:
    kind = (run.get("matrix") or {}).get("kind", "")
    bits = [
        f"<b>Sweep</b> {h.dim(h.esc(kind))}",
        h.dim(h.esc(run["id"])),
        h.badge(run["status"]),
        h.dim(h.esc(f"{run['project']} · {run.get('name') or ''} · {run['queue']}")),
    ]
    return h.box(" ".join(bits))
