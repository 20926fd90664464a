"""Compare: runs side by side — params, resolved-config differences, metrics, overlaid curves.

One `Client.compare` call answers everything the widget shows. A baseline run is
pinned (the table shows every other run's deltas against it); a metric selector
chooses the curves overlaid in one plotly FigureWidget (one trace per run and
metric); "Open" shows one run's full record as a RunMonitor. While any compared
run is still active the widget re-reads the comparison when that run changes
status (from the shared event feed), and stops when all have ended or on close().
Each run's column head shows its clock live ("running for 12s", "waiting 4s", "ran 3.2s"):
its record's clocks, ticking between reads (clocks.LiveClocks) until it is final. Runs are
labelled by their name and the params that differ between the runs shown (naming.label_runs).

Given one sweep's id (`Compare("r-sweep")`) it compares the sweep: a SweepPanel (every child's
params against the objective: sortable table, parallel coordinates, param-vs-metric scatter)
above the side-by-side view of its `top` best children, the best as the baseline and the
objective's curves overlaid; it follows the sweep until it ends.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from typing import Any

import ipywidgets as widgets
import traitlets

from ...client.rest import Client, GpuPlatAPIError
from ...client.runnames import label_runs
from . import _html as h
from ._metrics import lower_is_better
from .clocks import QUEUE_WAIT, RUN, START_WAIT, LiveClocks, duration
from .comparetable import table_html as _table_html
from .live import EventFeed, Subscription, default_client
from .sweepcompare import SweepPanel, read_sweep

__all__ = ["Compare", "lower_is_better"]

log = logging.getLogger(__name__)

_DASHES = ("solid", "dash", "dot", "dashdot", "longdash", "longdashdot")


def run_ids(runs: Sequence[str] | str) -> list[str]:
    """A list of run ids, or a string: one id or a comma-separated list."""
    items = runs.split(",") if isinstance(runs, str) else list(runs)
    ids = [r.strip() for r in items if r and r.strip()]
    if not ids:
        raise ValueError("give the runs to compare: Compare(['r-1', 'r-2']) or Compare('r-1,r-2')")
    return list(dict.fromkeys(ids))


class Compare(widgets.VBox):
    """Compare runs: `Compare(["r-1", "r-2"])`, `Compare("r-1,r-2", metrics=["loss"])`, or a sweep:
    `Compare("r-sweep", top=5)` (`metrics=["acc"]` judges it by another metric than its objective)."""

    baseline = traitlets.Unicode(help="The run every other run is compared against.")

    tick_seconds = 1.0

    def __init__(
        self,
        runs: Sequence[str] | str,
        client: Client | None = None,
        metrics: list[str] | None = None,
        *,
        max_points: int = 500,
        top: int = 5,
        **kwargs: Any,
    ) -> None:
        self._closed = threading.Event()  # first: close() runs from __del__ even if __init__ failed
        self._sub: Subscription | None = None
        self._thread: threading.Thread | None = None
        self._parts: list[widgets.Widget] = []
        self.opened: Any = None  # the RunMonitor shown by "Open record"
        self.client = client or default_client()
        self.requested_metrics = list(metrics) if metrics else None
        self.max_points = max_points
        self.top = top
        self.sweep: dict[str, Any] | None = self._sweep_of(run_ids(runs))
        self.sweep_panel: SweepPanel | None = None
        self.child_ids: set[str] = set()
        if self.sweep is not None:
            self.sweep_panel = SweepPanel(self._read_sweep())
        self.run_ids = self._sweep_run_ids() if self.sweep is not None else run_ids(runs)
        self.data: dict[str, Any] = self.client.compare(
            self.run_ids, metrics=self.requested_metrics, max_points=max_points
        )
        self.table_html = ""
        self.live: dict[str, LiveClocks] = {}  # each run's clocks from its record, ticking until it is final
        self._read_clocks()

        labels = self._labels()
        self.title = widgets.HTML()
        self.baseline_selector = widgets.Dropdown(options=labels, description="baseline")
        self.metric_selector = widgets.SelectMultiple(
            options=self.data["metrics"], description="curves", rows=min(6, max(2, len(self.data["metrics"])))
        )
        self.table = widgets.HTML()
        self.figure = _figure()
        self.open_selector = widgets.Dropdown(options=labels, description="run")
        self.open_button = widgets.Button(description="Open record", icon="external-link")
        self.record = widgets.VBox()
        self.message = widgets.HTML()
        self._parts = [
            self.title,
            self.baseline_selector,
            self.metric_selector,
            self.table,
            self.figure,
            self.open_selector,
            self.open_button,
            self.record,
            self.message,
        ]
        controls = widgets.HBox([self.baseline_selector, self.metric_selector])
        opener = widgets.HBox([self.open_selector, self.open_button])
        self._parts += [controls, opener]
        head = [self.sweep_panel] if self.sweep_panel is not None else []
        super().__init__(
            children=[*head, self.title, controls, self.table, self.figure, opener, self.message, self.record],
            **kwargs,
        )
        self.add_class("gpuplat-compare")
        traitlets.link((self.baseline_selector, "value"), (self, "baseline"))
        self.baseline = self.run_ids[0]  # in a sweep: its best child, the top of the ranking
        self.metric_selector.value = tuple(self._default_metrics())
        self.observe(lambda _: self._render(), "baseline")
        self.metric_selector.observe(lambda _: self._plot(), "value")
        self.open_button.on_click(lambda _: self.open_run(self.open_selector.value))
        self._render()

        self._wake = threading.Event()
        if self._active():
            self._sub = EventFeed.of(self.client).subscribe(self._on_event, on_connect=self._wake.set)
            self._thread = threading.Thread(target=self._follow_loop, name="gpuplat-compare", daemon=True)
            self._thread.start()

    # ---- public --------------------------------------------------------------------------------
    @property
    def runs(self) -> list[dict[str, Any]]:
        return list(self.data["runs"])

    @property
    def thread(self) -> threading.Thread | None:
        """The thread re-reading the comparison while some run is active (None when all ended)."""
        return self._thread

    @property
    def best(self) -> str | None:
        """A sweep's best child by its objective (None for runs, or before any child logged it)."""
        return self.sweep_panel.data["best"] if self.sweep_panel is not None else None

    def refresh(self) -> None:
        """Read the comparison again and re-render."""
        if self.sweep is not None and self.sweep_panel is not None:
            self.sweep = self.client.get(self.sweep["id"])
            sweep_data = self._read_sweep()
            if self._closed.is_set():
                return
            self.sweep_panel.update(sweep_data)
            self.run_ids = self._sweep_run_ids()
        data = self.client.compare(self.run_ids, metrics=self.requested_metrics, max_points=self.max_points)
        if self._closed.is_set():
            return
        self.data = data
        self._read_clocks()
        labels = self._labels()
        if labels != list(self.baseline_selector.options):
            self.baseline_selector.options = labels
            self.open_selector.options = labels
            self.baseline = self.run_ids[0]
        names = tuple(data["metrics"])
        if names != tuple(self.metric_selector.options):
            keep = [m for m in self.metric_selector.value if m in names]
            self.metric_selector.options = names
            self.metric_selector.value = tuple(keep or self._default_metrics())
        self._render()

    def open_run(self, run_id: str) -> Any:
        """Show one run's full record (a RunMonitor) below the comparison."""
        from .monitor import RunMonitor

        if self.opened is not None:
            self.opened.close()
        try:
            self.opened = RunMonitor(run_id, self.client)
        except GpuPlatAPIError as exc:
            self.opened = None
            self.message.value = h.error_block(exc.message, exc.hint)
            return None
        self.message.value = ""
        self.record.children = (self.opened,)
        return self.opened

    def close(self) -> None:
        if not self._closed.is_set():
            self._closed.set()
            if self._sub is not None:
                self._sub.close()
            if self._thread is not None:
                self._wake.set()
            if self.opened is not None:
                self.opened.close()
            if self.sweep_panel is not None:
                self.sweep_panel.close()
            for w in self._parts:
                w.close()
        super().close()

    # ---- live ---------------------------------------------------------------------------------
    def _active(self) -> bool:
        if self.sweep is not None:
            return self.sweep["status"] not in h.FINAL
        return any(r["status"] not in h.FINAL for r in self.data["runs"])

    def _on_event(self, ev: dict[str, Any]) -> None:
        if ev["run_id"] in self.run_ids or ev["run_id"] in self.child_ids:
            self._wake.set()

    # ---- a sweep -------------------------------------------------------------------------------
    def _sweep_of(self, ids: list[str]) -> dict[str, Any] | None:
        """The sweep's record when one sweep's id was given (one GET; a list of runs costs none)."""
        if len(ids) != 1:
            return None
        record = self.client.get(ids[0])
        return record if record.get("kind") == "sweep" else None

    def _read_sweep(self) -> dict[str, Any]:
        assert self.sweep is not None
        metric = self.requested_metrics[0] if self.requested_metrics else None
        data = read_sweep(self.client, self.sweep, metric, self.top)
        self.child_ids = {self.sweep["id"], *(c["id"] for c in data["children"])}
        return data

    def _sweep_run_ids(self) -> list[str]:
        """The top children (best first); before any has a value, the first `top` children."""
        assert self.sweep_panel is not None
        data = self.sweep_panel.data
        ids = data["top"] or [c["id"] for c in data["children"][: max(1, self.top)]]
        if not ids:
            raise ValueError(f"sweep {self.sweep and self.sweep['id']} has no children to compare")
        return list(ids)

    def _read_clocks(self) -> None:
        """Re-read the record of every run not known final (the comparison carries no clocks)."""
        for r in self.data["runs"]:
            known = self.live.get(r["id"])
            if known is None or not known.final or r["status"] not in h.FINAL:
                try:
                    self.live[r["id"]] = LiveClocks.of(self.client.get(r["id"]))
                except GpuPlatAPIError:
                    self.live.pop(r["id"], None)

    def clock_text(self, run_id: str) -> str:
        """`running for 12s`, `waiting 4s`, `ran 3.2s` (as the column head shows it now)."""
        live = self.live.get(run_id)
        if live is None:
            return ""
        c = live.at()
        if live.ticking == RUN:
            return f"running for {duration(c.get(RUN))}"
        if live.ticking is not None:
            return f"waiting {duration((c.get(QUEUE_WAIT) or 0) + (c.get(START_WAIT) or 0))}"
        if c.get(RUN) is not None:
            return f"ran {duration(c.get(RUN))}"
        return f"waited {duration(c.get(QUEUE_WAIT))}" if c.get(QUEUE_WAIT) is not None else ""

    def _render_clocks(self) -> None:
        if self._closed.is_set() or self.baseline not in self.run_ids:
            return
        html = _table_html(self.data, self.baseline, self._run_labels(), self.clock_text)
        if html != self.table_html:
            self.table_html = html
            self.table.value = html

    def _follow_loop(self) -> None:
        while not self._closed.is_set():
            ticking = any(not c.final for c in self.live.values())
            if not self._wake.wait(timeout=self.tick_seconds if ticking else None):
                self._render_clocks()  # no event: only the clocks moved
                continue
            self._wake.clear()
            if self._closed.is_set():
                return
            try:
                self.refresh()
            except GpuPlatAPIError as exc:
                self.message.value = h.error_block(str(exc))
            except Exception as exc:
                log.exception("Compare refresh failed")
                self.message.value = h.error_block(f"refresh failed: {exc!r}")
            if not self._active():
                if self._sub is not None:
                    self._sub.close()
                return

    # ---- rendering -----------------------------------------------------------------------------
    def _run_labels(self) -> dict[str, str]:
        """Each run's name and the params that differ between the runs shown."""
        return label_runs(self.data["runs"], self.data["params"]["differ"])

    def _labels(self) -> list[tuple[str, str]]:
        labels = self._run_labels()
        return [
            (labels[r["id"]] if labels[r["id"]].endswith(r["id"]) else f"{labels[r['id']]} · {r['id']}", r["id"])
            for r in self.data["runs"]
        ]

    def _default_metrics(self) -> list[str]:
        names = self.data["metrics"]
        objective = self.sweep_panel.objective if self.sweep_panel is not None else None
        if objective is not None and objective.metric in names:
            return [objective.metric]
        if self.requested_metrics:
            return [m for m in self.requested_metrics if m in names]
        # the server's choice: the metric most runs logged, not the first name (one run's only metric)
        default = self.data.get("default_metric")
        return [str(default)] if default in names else names[:1]

    def _render(self) -> None:
        if self.baseline not in self.run_ids:
            return
        runs = self.data["runs"]
        self.title.value = h.box(
            f"<b>{len(runs)} runs</b> "
            + h.dim(h.esc(f"baseline {self.baseline}; highlighted rows differ; Δ is against the baseline"))
        )
        self.table_html = _table_html(self.data, self.baseline, self._run_labels(), self.clock_text)
        self.table.value = self.table_html
        self._plot()

    def _plot(self) -> None:
        chosen = list(self.metric_selector.value)
        labels = self._run_labels()
        traces = []
        for mi, metric in enumerate(chosen):
            for r in self.data["runs"]:
                curve = self.data["curves"].get(r["id"], {}).get(metric)
                if not curve:
                    continue
                base = r["id"] == self.baseline
                label = labels[r["id"]]
                traces.append(
                    {
                        "type": "scatter",
                        "mode": "lines",
                        "x": curve["steps"],
                        "y": curve["values"],
                        "name": f"{label} · {metric}" if len(chosen) > 1 else label,
                        "legendgroup": r["id"],
                        "line": {"width": 3 if base else 1.5, "dash": _DASHES[mi % len(_DASHES)]},
                        "meta": {"run_id": r["id"], "metric": metric},
                        "hovertemplate": f"{h.esc(label)} ({h.esc(r['id'])})<br>{h.esc(metric)}"
                        " %{y:.6g} at step %{x}<extra></extra>",
                    }
                )
        with self.figure.batch_update():
            self.figure.data = ()
            for t in traces:
                self.figure.add_trace(t)
            self.figure.layout.yaxis.title.text = ", ".join(chosen)
        h.keep_figure_state(self.figure)


def _figure() -> Any:
    import plotly.graph_objects as go

    return go.FigureWidget(
        layout={
            **h.PLOT_LAYOUT,
            "height": 320,
            "margin": {"l": 50, "r": 10, "t": 20, "b": 40},
            "xaxis": {**h.PLOT_LAYOUT["xaxis"], "title": {"text": "step"}},
            "legend": {"orientation": "h", "y": -0.2},
            "hovermode": "x unified",
        }
    )
