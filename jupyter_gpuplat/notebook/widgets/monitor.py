"""RunMonitor: one run, live — status, timeline and clocks, why it waits, GPU use, log tail, metrics, stop.

Updates come from the shared event feed (live.EventFeed): each status event of
the run wakes the monitor's worker thread, which re-reads the record and the
explain answer. A second thread follows the log. Between reads the clock of the
phase the run is in ticks (every `tick_seconds`, from the last record: clocks.LiveClocks,
no request); the metric sparkline and the output sizes of a running run are re-read
every `metrics_refresh_seconds` (≥ 3 s) — with the record of a run holding GPUs, whose
`gpu_usage` (the server's words for its GPU samples) moves as it runs — and once more when it ends, when the clocks
stop at the record's final values. Once the run ends the threads finish by themselves;
`close()` ends them at once.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections import deque
from typing import Any

import ipywidgets as widgets
import traitlets

from ...client.explaining import explanation_lines
from ...client.rest import Client, GpuPlatAPIError
from ...core.reasons import LAYER_TEXT
from . import _html as h
from ._metrics import lower_is_better
from .clocks import LiveClocks, duration
from .live import EventFeed, Streams, Subscription, default_client, stop_following

__all__ = ["RunMonitor"]

log = logging.getLogger(__name__)

_STOP = object()
# The strip's three steps, by the `phase` the service gives each status (running is the executor's too).
PHASES = (
    ("dispatch", "Dispatch — our queue", frozenset({"dispatch"})),
    ("execution", "Execution — the executor", frozenset({"execution", "run"})),
    ("end", "End", frozenset({"end"})),
)
LAYERS = LAYER_TEXT  # what each layer means: the reason registry's words


class RunMonitor(widgets.VBox):
    """A live view of one run. `RunMonitor("r-123")` or `RunMonitor(client.submit(...))`."""

    status = traitlets.Unicode("", help="The run's current status, as the monitor last saw it.")

    metrics_refresh_seconds = 3.0
    tick_seconds = 1.0
    metric_points = 300
    timeline_rows = 40

    def __init__(
        self, run: dict[str, Any] | str, client: Client | None = None, *, log_tail: int = 200, **kwargs: Any
    ) -> None:
        self._closed = threading.Event()  # first: close() runs from __del__ even if __init__ failed
        self._inbox: queue.Queue[Any] = queue.Queue()
        self._logs_dirty = threading.Event()
        self._sub: Subscription | None = None
        self._parts: list[widgets.Widget] = []
        client = client or default_client()
        record = client.get(run) if isinstance(run, str) else dict(run)
        self.client = client
        self.run_id: str = record["id"]
        self.run: dict[str, Any] = record  # the latest record
        self.explain: dict[str, Any] | None = None
        self.explain_text = ""
        self.metrics: dict[str, Any] = {}
        self.outputs: list[dict[str, Any]] = []  # the run's output files with their sizes, as last read
        self._live = LiveClocks.of(record)
        self.log_count = 0  # lines seen in all
        self.log_error = ""
        self._tail: deque[str] = deque(maxlen=log_tail)
        self._seen_event = 0

        self.header = widgets.HTML()
        self.timeline = widgets.HTML()
        self.explain_html = widgets.HTML()
        self.gpu_html = widgets.HTML(layout=widgets.Layout(display="none"))  # shown for a run that holds GPUs
        self.metric_selector = widgets.Dropdown(description="metric", layout=widgets.Layout(width="280px"))
        self.figure = _sparkline()
        self.metrics_box = widgets.VBox([self.metric_selector, self.figure], layout=widgets.Layout(display="none"))
        self.log_html = widgets.HTML()
        self.stop_button = widgets.Button(description="Stop", icon="stop", tooltip="Stop this run")
        self.message = widgets.HTML()
        self._parts = [
            self.header,
            self.timeline,
            self.explain_html,
            self.gpu_html,
            self.metric_selector,
            self.figure,
            self.metrics_box,
            self.log_html,
            self.stop_button,
            self.message,
        ]
        controls = widgets.HBox([self.stop_button, self.message])
        self._parts.append(controls)
        super().__init__(
            children=[
                self.header,
                self.timeline,
                self.explain_html,
                self.gpu_html,
                self.metrics_box,
                self.log_html,
                controls,
            ],
            **kwargs,
        )
        self.add_class("gpuplat-run-monitor")
        self.stop_button.on_click(self._stop_clicked)
        self.metric_selector.observe(lambda _: self._render_metrics(), "value")
        self._apply_record(record)
        self._render_logs()

        # A private copy of the client: close() cuts its streams and in-flight calls at once.
        self._streams = Streams(client)
        if record["status"] not in h.FINAL:
            # Every run's events: while this one waits, others moving changes its place in line.
            self._sub = EventFeed.of(client).subscribe(self._on_event, on_connect=lambda: self._inbox.put("refresh"))
        self._inbox.put("refresh")
        self._worker = threading.Thread(target=self._work_loop, name=f"gpuplat-monitor-{self.run_id}", daemon=True)
        self._log_thread = threading.Thread(target=self._log_loop, name=f"gpuplat-logs-{self.run_id}", daemon=True)
        self._worker.start()
        self._log_thread.start()

    # ---- public --------------------------------------------------------------------------------
    @property
    def log_lines(self) -> list[str]:
        """The last lines of the log (at most `log_tail`)."""
        return list(self._tail)

    @property
    def clocks(self) -> dict[str, float | None]:
        """The clocks as shown now: the last record's, with the current phase's ticking since."""
        return self._live.at()

    @property
    def threads(self) -> list[threading.Thread]:
        """The monitor's own threads (the worker and the log follower)."""
        return [self._worker, self._log_thread]

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    def close(self) -> None:
        """Stop following the run: unsubscribe, end both threads, close the widgets."""
        if not self._closed.is_set():
            stop_following(self, _STOP)
        super().close()

    # ---- event feed → worker ------------------------------------------------------------------
    def _on_event(self, ev: dict[str, Any]) -> None:
        if ev["run_id"] == self.run_id:
            self._inbox.put(ev)
        elif self.status in h.WAITING and (ev["queue"] == self.run.get("queue") or ev["status"] in h.FINAL):
            self._inbox.put("explain")  # its position, blockers or the free capacity may have changed

    def _work_loop(self) -> None:
        next_metrics = time.monotonic() + self.metrics_refresh_seconds
        try:
            while not self._closed.is_set():
                try:
                    item = self._inbox.get(timeout=None if self.status in h.FINAL else self.tick_seconds)
                except queue.Empty:
                    item = "tick"
                items = [item]
                while True:
                    try:
                        items.append(self._inbox.get_nowait())
                    except queue.Empty:
                        break
                if _STOP in items or self._closed.is_set():
                    return
                if self.status in ("running", "stopping") and time.monotonic() >= next_metrics:
                    items.append("metrics")
                    next_metrics = time.monotonic() + self.metrics_refresh_seconds
                self._handle(items)
                if self.status in h.FINAL:
                    self._finish()
                    return
        finally:
            if not self._log_thread.is_alive():
                self._streams.close()

    def _handle(self, items: list[Any]) -> None:
        try:
            events = [x for x in items if isinstance(x, dict)]
            for ev in events:  # in order: every status the run passed through shows
                if ev["id"] > self._seen_event:
                    self._seen_event = ev["id"]
                    self._set_status(ev["status"])
            if events or "refresh" in items:
                self._refresh()
            elif "explain" in items:
                self._refresh_explain()
            elif "metrics" in items:
                if self.run.get("devices"):  # its GPU use moves with its samples: the record says it anew
                    self._apply_record(self._streams.client.get(self.run_id))
                self._refresh_metrics()
                self._refresh_outputs()
            elif "tick" in items:
                self._render_clocks()
            if "logs" in items:
                self._render_logs()
        except GpuPlatAPIError as exc:
            if not self._closed.is_set():
                self.message.value = h.error_block(str(exc))
        except Exception as exc:  # keep following: one bad answer must not end the monitor
            log.exception("RunMonitor %s update failed", self.run_id)
            if not self._closed.is_set():
                self.message.value = h.error_block(f"update failed: {exc!r}")

    def _refresh(self) -> None:
        c = self._streams.client
        run = c.get(self.run_id)
        explain = c.explain(self.run_id)
        if self._closed.is_set():
            return
        self.explain = explain
        self._apply_record(run)
        if run["status"] in ("running", "stopping") or run["status"] in h.FINAL:
            self._refresh_metrics()
            self._refresh_outputs()

    def _refresh_explain(self) -> None:
        explain = self._streams.client.explain(self.run_id)
        if self._closed.is_set():
            return
        self.explain = explain
        self._show_explain()

    def _refresh_metrics(self) -> None:
        metrics = self._streams.client.metrics(self.run_id, max_points=self.metric_points)
        if self._closed.is_set():
            return
        self.metrics = metrics
        names = sorted(metrics)
        if names and tuple(names) != tuple(self.metric_selector.options):
            keep = self.metric_selector.value
            self.metric_selector.options = names
            # a loss first: it is the curve people watch while a run trains
            self.metric_selector.value = (
                keep if keep in names else next((n for n in names if lower_is_better(n)), names[0])
            )
        self.metrics_box.layout.display = "" if names else "none"
        self._render_metrics()

    def _refresh_outputs(self) -> None:
        outputs = self._streams.client.outputs(self.run_id)
        if self._closed.is_set():
            return
        if outputs != self.outputs:
            self.outputs = outputs
            self._render_logs()

    def _finish(self) -> None:
        """The run ended: the log stream ends by itself; render what it brought, then stop."""
        if self._sub is not None:
            self._sub.close()
        if self.run["status"] not in h.FINAL:  # the status came from an event; the record read failed
            self._handle(["refresh"])
        self._log_thread.join(timeout=30)
        self._render_logs()

    # ---- log follower ------------------------------------------------------------------------
    def _log_loop(self) -> None:
        attempts = 0
        try:
            while not self._closed.is_set():
                skip = self.log_count  # after a dropped stream, lines already shown come again
                try:
                    for line in self._streams.client.logs(self.run_id, follow=True):
                        if self._closed.is_set():
                            return
                        if skip:
                            skip -= 1
                            continue
                        self._tail.append(line)
                        self.log_count += 1
                        if not self._logs_dirty.is_set():
                            self._logs_dirty.set()
                            self._inbox.put("logs")
                    return  # the server ended the stream: the run is over
                except GpuPlatAPIError as exc:
                    attempts += 1
                    if self._closed.is_set() or attempts > 5:
                        self.log_error = str(exc)
                        return
                    self._closed.wait(min(0.2 * 2**attempts, 5.0))
        except Exception as exc:
            log.exception("RunMonitor %s log follower failed", self.run_id)
            self.log_error = repr(exc)
        finally:
            if not self._closed.is_set():
                self._render_logs()

    # ---- rendering -----------------------------------------------------------------------------
    def _set_status(self, status: str) -> None:
        if self._closed.is_set():
            return
        self.stop_button.disabled = status in h.FINAL or status == "stopping"
        self.stop_button.description = "Stopping…" if status == "stopping" else "Stop"
        if status != self.status:  # last: observers of `status` see the rest updated
            self.status = status

    def _apply_record(self, run: dict[str, Any]) -> None:
        self.run = run
        self._live = LiveClocks.of(run)
        timeline = run.get("timeline") or []
        if timeline:
            self._seen_event = max(self._seen_event, max(e["id"] for e in timeline))
        self.header.value = _header_html(run)
        self.timeline.value = _timeline_html(run, self.timeline_rows, self._live.at())
        self._show_explain()
        self._show_gpu(run.get("gpu_usage"))
        self._set_status(run["status"])

    def _render_clocks(self) -> None:
        if self._closed.is_set():
            return
        html = _timeline_html(self.run, self.timeline_rows, self._live.at())
        if html != self.timeline.value:
            self.timeline.value = html
        self._show_explain()

    def _show_explain(self) -> None:
        """The explain answer; a running run's "running for" from the ticking clock, not the answer's time."""
        ex = self.explain
        if ex and ex.get("reason") == "Running" and self.run["status"] in ("running", "stopping"):
            devices = self.run.get("devices") or []
            on = f" on GPU {','.join(map(str, devices))}" if devices else ""
            ex = {**ex, "message": f"running for {duration(self._live.at().get('run_seconds'))}{on}"}
        text, html = _explain_text(ex, self.run), _explain_html(ex, self.run)
        if text != self.explain_text or html != self.explain_html.value:
            self.explain_text, self.explain_html.value = text, html

    @property
    def gpu_text(self) -> str:
        """The run's GPU use as the server worded it ("" for a run that holds no GPU)."""
        return (self.run.get("gpu_usage") or {}).get("text") or ""

    def _show_gpu(self, usage: dict[str, Any] | None) -> None:
        """The server's `gpu_usage.text` as it is; nothing recomputed here."""
        if self._closed.is_set():
            return
        html = "" if not usage else h.box(f'<div class="gpuplat-gpu">{h.dim("gpu:")} {h.esc(usage["text"])}</div>')
        if html != self.gpu_html.value:
            self.gpu_html.value = html
        self.gpu_html.layout.display = "" if usage else "none"

    def _render_logs(self) -> None:
        self._logs_dirty.clear()
        lines = list(self._tail)
        shown = len(lines)
        note = f"log — {self.log_count} line(s)" + (f", last {shown} shown" if shown < self.log_count else "")
        if self.log_error:
            note += f" — stream lost: {self.log_error}"
        body = h.esc("\n".join(lines)) if lines else h.dim("(no output yet)")
        self.log_html.value = (
            f'<div style="color:{h.FG_DIM};font-size:var(--jp-ui-font-size0)">{h.esc(note)}</div>'
            f'<pre class="gpuplat-log" style="color:{h.FG};background:{h.BG_MARK};font-family:{h.MONO};'
            f'max-height:16em;overflow:auto;margin:2px 0;padding:4px 6px;white-space:pre-wrap">{body}</pre>'
            + _outputs_html(self.outputs)
        )

    def _render_metrics(self) -> None:
        name = self.metric_selector.value
        series = self.metrics.get(name) if name else None
        if not series:
            return
        last = next((v for v in reversed(series["values"]) if v is not None), None)
        title = f"{name}: {h.value(last)} at step {series['steps'][-1]} ({series['count']} points)"
        with self.figure.batch_update():
            tr = self.figure.data[0]
            tr.x, tr.y, tr.name = series["steps"], series["values"], name
            self.figure.layout.title.text = title
        h.keep_figure_state(self.figure)

    def _stop_clicked(self, _: Any = None) -> None:
        self.stop_button.disabled = True
        try:
            self._apply_record(self.client.stop(self.run_id))
            self.message.value = ""
        except GpuPlatAPIError as exc:
            self.message.value = h.error_block(exc.message, exc.hint)
            self.stop_button.disabled = self.status in h.FINAL


def _sparkline() -> Any:
    import plotly.graph_objects as go

    fig = go.FigureWidget(
        layout={
            **h.PLOT_LAYOUT,
            "height": 170,
            "margin": {"l": 40, "r": 10, "t": 28, "b": 24},
            "showlegend": False,
            "title": {"text": "", "font": {"size": 12}},
        }
    )
    fig.add_scatter(x=[], y=[], mode="lines", line={"width": 1.5})
    return fig


def _header_html(run: dict[str, Any]) -> str:
    res = run.get("resources") or {}
    bits = [
        f"<b>{h.esc(run.get('name') or run['id'])}</b>",
        h.dim(h.esc(run["id"])),
        h.badge(run["status"]),
        h.dim(
            h.esc(
                f"{run['project']} · {run['queue']} · {run['user']} · {res.get('gpu', 0)} GPU"
                + (f" (devices {','.join(map(str, run['devices']))})" if run.get("devices") else "")
            )
        ),
    ]
    if run.get("status") in h.FINAL and run.get("exit_code") is not None:
        bits.append(h.dim(f"exit code {h.esc(run['exit_code'])}"))
    return h.box(" ".join(bits))


def _step_of(phase: str) -> str:
    return next(key for key, _, members in PHASES if phase in members)


def _outputs_html(outputs: list[dict[str, Any]]) -> str:
    """The run's output files and their sizes (re-read while it runs: a log that grows shows it)."""
    if not outputs:
        return ""
    items = ", ".join(
        f'<span class="gpuplat-output" data-path="{h.esc(o["path"])}">{h.esc(o["path"])} '
        f"{h.dim(h.esc(h.size(o.get('size') or 0)))}</span>"
        for o in outputs
    )
    return h.box(f'<div class="gpuplat-outputs">{h.dim("outputs:")} {items}</div>')


def _timeline_html(run: dict[str, Any], max_rows: int, clocks: dict[str, float | None] | None = None) -> str:
    events = run.get("timeline") or []
    current = _step_of(run["phase"])
    strip = []
    for key, label, _ in PHASES:
        on = key == current
        color = h.STATUS_COLOR.get(run["status"], h.FG) if on else h.FG_DIM
        weight = "600" if on else "400"
        strip.append(f'<span style="color:{color};font-weight:{weight}">{h.esc(label)}</span>')
    rows = []
    hidden = max(0, len(events) - max_rows)
    for _, label, members in PHASES:
        phase_events = [e for e in events[hidden:] if e["phase"] in members]
        for i, e in enumerate(phase_events):
            rows.append(
                "<tr>"
                + h.td(h.esc(label) if i == 0 else "", extra=f"color:{h.FG_DIM}")
                + h.td(h.esc(h.when(e["at"])), extra=f"font-family:{h.MONO}")
                + h.td(h.badge(e["status"]))
                + h.td(h.esc(e.get("reason") or ""))
                + h.td(h.esc(e.get("message") or ""))
                + "</tr>"
            )
    c = clocks if clocks is not None else run.get("clocks") or {}
    clocks_line = (
        f"queue wait <b>{h.seconds(c.get('queue_wait_seconds'))}</b> · "
        f"start wait <b>{h.seconds(c.get('start_wait_seconds'))}</b> · "
        f"run time <b>{h.seconds(c.get('run_seconds'))}</b>"
    )
    more = h.dim(f"({hidden} earlier event(s) not shown)") if hidden else ""
    return h.box(
        f'<div class="gpuplat-phases">{" ▸ ".join(strip)}</div>'
        f'<div class="gpuplat-clocks">{clocks_line}</div>{more}'
        f'<div class="gpuplat-timeline">{h.table(rows)}</div>'
    )


def _explain_lines(ex: dict[str, Any] | None, run: dict[str, Any]) -> list[tuple[str, str]]:
    """The explain answer as (label, text) lines: the one renderer shared with the CLI and the magics."""
    return explanation_lines(ex, run)


def _explain_text(ex: dict[str, Any] | None, run: dict[str, Any]) -> str:
    return "\n".join(f"{label}: {text}" for label, text in _explain_lines(ex, run))


def _explain_html(ex: dict[str, Any] | None, run: dict[str, Any]) -> str:
    rows = [
        "<tr>" + h.td(h.esc(label), extra=f"color:{h.FG_DIM}") + h.td(h.esc(text)) + "</tr>"
        for label, text in _explain_lines(ex, run)
    ]
    details = (ex or {}).get("details")
    raw = ""
    if details and run["status"] not in h.FINAL:
        raw = f"<details><summary>{h.dim('executor details')}</summary><pre>{h.esc(h.value(details))}</pre></details>"
    title = h.dim("why is it here?") if run["status"] not in h.FINAL else ""
    return h.box(f'{title}<div class="gpuplat-explain">{h.table(rows)}</div>{raw}')
