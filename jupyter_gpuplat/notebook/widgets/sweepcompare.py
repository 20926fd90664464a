"""A sweep's children against its objective: a sortable table, parallel coordinates, param-vs-metric
scatter, the best child marked. Compare(sweep_id) shows this panel above its side-by-side view of
the top N children (their overlaid curves, the best as the baseline).

read_sweep asks the service (`GET runs/{id}/compare`, one call) when the sweep is judged by its own
objective; by another metric it builds the comparison from `GET runs?parent=` (every child and its
params, 1,000 a page) and `GET compare` on that metric (500 runs a call, curves cut to 4 points).
Ranking and axes are the pure core.sweep_compare, the same the service's read model uses.
"""

from __future__ import annotations

from typing import Any

import ipywidgets as widgets

from ...client.rest import Client
from ...core.sweep_compare import Objective, is_number, param_keys, parcoords_axes, ranked, top
from . import _html as h
from ._metrics import lower_is_better

__all__ = ["SweepPanel", "read_sweep"]

COMPARE_CHUNK = 500  # the service's compare takes at most 500 runs at once


def objective_of(sweep: dict[str, Any], metric: str | None) -> Objective | None:
    """The sweep's objective; a metric asked for replaces it (direction guessed from its name)."""
    own = Objective.of((sweep.get("matrix") or {}).get("objective"))
    if metric and (own is None or own.metric != metric):
        return Objective(metric, not lower_is_better(metric))
    return own


def read_sweep(client: Client, sweep: dict[str, Any], metric: str | None, n_top: int) -> dict[str, Any]:
    """Every child with its params, status and objective value, best first; the best and the top n."""
    own = Objective.of((sweep.get("matrix") or {}).get("objective"))
    if metric is None or (own is not None and own.metric == metric):
        # The service ranks by the sweep's own objective in one call (only running children re-indexed).
        data = client.compare_sweep(sweep["id"], top=n_top, max_points=4)
        return {**data, "objective": Objective.of(data["objective"])}
    children = client.sweep_children(sweep["id"])
    children.reverse()  # pages are newest first: submission order, a grid's first child first
    ids = [c["id"] for c in children]
    objective = objective_of(sweep, metric)
    summaries: dict[str, dict[str, Any]] = {}
    names: set[str] = set()
    for i in range(0, len(ids), COMPARE_CHUNK):
        part = client.compare(
            ids[i : i + COMPARE_CHUNK], metrics=[objective.metric] if objective else None, max_points=4
        )
        names.update(part["metrics"])
        summaries.update({r["id"]: r["metrics"] for r in part["runs"]})
    if objective is None and names:
        first = sorted(names)[0]
        objective = Objective(first, not lower_is_better(first))
    values = {rid: objective.value(summaries.get(rid, {}).get(objective.metric)) for rid in ids} if objective else {}
    by_id = {c["id"]: c for c in children}
    order = ranked(ids, values, objective) if objective else ids
    leaders = top(ids, values, objective, n_top) if objective else []
    return {
        "sweep": sweep["id"],
        "objective": objective,
        "children": [
            {
                "id": rid,
                "name": by_id[rid]["name"],
                "status": by_id[rid]["status"],
                "params": by_id[rid].get("params") or {},
                "value": values.get(rid),
            }
            for rid in order
        ],
        "best": leaders[0] if leaders else None,
        "top": leaders,
    }


class SweepPanel(widgets.VBox):
    """The children of one sweep against its objective (data from read_sweep)."""

    def __init__(self, data: dict[str, Any], **kwargs: Any) -> None:
        self.data = data
        self.table_html = ""
        self.summary = widgets.HTML()
        self.sort_by = widgets.Dropdown(description="sort by")
        self.descending = widgets.Checkbox(description="descending", indent=False)
        self.table = widgets.HTML(layout=widgets.Layout(max_height="360px", overflow="auto"))
        self.parcoords = _figure(340)
        self.scatter = _figure(280)
        self._parts: list[widgets.Widget] = [self.summary, self.sort_by, self.descending, self.table]
        self._parts += [self.parcoords, self.scatter]
        super().__init__(
            children=[self.summary, widgets.HBox([self.sort_by, self.descending]), self.table, self.parcoords,
                      self.scatter],
            **kwargs,
        )  # fmt: skip
        self.add_class("gpuplat-sweep-compare")
        self.sort_by.observe(lambda _: self._render_table(), "value")
        self.descending.observe(lambda _: self._render_table(), "value")
        self.update(data)

    @property
    def objective(self) -> Objective | None:
        o = self.data["objective"]
        return o if isinstance(o, Objective) else None

    def update(self, data: dict[str, Any]) -> None:
        self.data = data
        keys = param_keys([c["params"] for c in data["children"]])
        metric = self.objective.metric if self.objective else None
        options = [(f"{metric} (best first)", "")] if metric else [("(no metric yet)", "")]
        options += [(k, k) for k in keys]
        if [v for _, v in options] != [v for _, v in self.sort_by.options]:
            keep = self.sort_by.value if self.sort_by.value in keys else ""
            self.sort_by.options = options
            self.sort_by.value = keep
        n, best = len(data["children"]), data["best"]
        line = f"<b>sweep {h.esc(data['sweep'])}</b>: {n} children"
        if self.objective:
            line += h.dim(h.esc(f"; objective {metric} ({self.objective.optimization})"))
        if best:
            value = next(c["value"] for c in data["children"] if c["id"] == best)
            line += f"; best <b>{h.esc(best)}</b> {h.esc(metric)}={h.esc(h.value(value))}"
        self.summary.value = h.box(line)
        self._render_table()
        self._plot()

    def sorted_children(self) -> list[dict[str, Any]]:
        """The table's rows: objective order (best first), or by a param (absent values last)."""
        rows = list(self.data["children"])
        key = self.sort_by.value
        if key:
            have = [c for c in rows if key in c["params"]]
            have.sort(key=lambda c: _sort_key(c["params"][key]), reverse=self.descending.value)
            rows = have + [c for c in rows if key not in c["params"]]
        elif self.descending.value:
            rows.reverse()
        return rows

    def close(self) -> None:
        for w in self._parts:
            w.close()
        super().close()

    # ---- rendering -----------------------------------------------------------------------------
    def _render_table(self) -> None:
        children = self.sorted_children()
        keys = param_keys([c["params"] for c in self.data["children"]])
        metric = self.objective.metric if self.objective else "value"
        head = "<tr>" + "".join(h.td(h.esc(t), header=True) for t in ["#", "child", "status", *keys, metric]) + "</tr>"
        rank = {c["id"]: i + 1 for i, c in enumerate(self.data["children"])}
        rows = []
        for c in children:
            best = c["id"] == self.data["best"]
            cells = [
                str(rank[c["id"]]) if c["value"] is not None else "—",
                h.esc(c["id"]) + (" ★ best" if best else ""),
            ]
            cells.append(h.badge(c["status"]))
            cells += [h.esc(h.value(c["params"].get(k))) if k in c["params"] else h.dim("—") for k in keys]
            cells.append(h.esc(h.value(c["value"])) if c["value"] is not None else h.dim("—"))
            cls = ' class="gpuplat-best"' if best else ""
            style = f' style="border-left:3px solid {h.GOOD}"' if best else ""
            rows.append(f"<tr{cls}{style}>" + "".join(h.td(x, mark=best) for x in cells) + "</tr>")
        self.table_html = h.box(f'<div class="gpuplat-sweep-table">{h.table(rows, head)}</div>')
        self.table.value = self.table_html

    def _plot(self) -> None:
        import plotly.graph_objects as go

        children = self.data["children"]
        objective = self.objective
        values = [c["value"] for c in children]
        traces: list[Any] = []
        if objective is not None:
            axes = parcoords_axes([c["params"] for c in children], values, objective)
            present = [v for v in values if v is not None]
            line: dict[str, Any] = {"showscale": True, "colorbar": {"title": {"text": objective.metric}}}
            if present:
                # the best end of the scale is the bright one whichever way the objective goes
                line.update(color=[v if v is not None else float("nan") for v in values], colorscale="Viridis",
                            reversescale=not objective.maximize, cmin=min(present), cmax=max(present))  # fmt: skip
            traces.append(go.Parcoords(dimensions=[a.dimension() for a in axes], line=line, meta={"sweep": True}))
        with self.parcoords.batch_update():
            self.parcoords.data = ()
            for t in traces:
                self.parcoords.add_trace(t)
        h.keep_figure_state(self.parcoords)
        self._plot_scatter()
        h.keep_figure_state(self.scatter)

    def _plot_scatter(self) -> None:
        children = self.data["children"]
        objective = self.objective
        keys = param_keys([c["params"] for c in children])
        with self.scatter.batch_update():
            self.scatter.data = ()
            if objective is None or not keys:
                return
            layout: dict[str, Any] = {}
            width = 1 / len(keys)
            for i, k in enumerate(keys):
                axis = "" if i == 0 else str(i + 1)
                have = [c for c in children if k in c["params"] and c["value"] is not None]
                xs = [c["params"][k] for c in have]
                numeric = all(is_number(x) for x in xs)
                self.scatter.add_scatter(
                    x=xs if numeric else [h.value(x) for x in xs],
                    y=[c["value"] for c in have],
                    mode="markers",
                    name=k,
                    xaxis=f"x{axis}",
                    yaxis="y",
                    text=[c["id"] for c in have],
                    marker={
                        "size": [14 if c["id"] == self.data["best"] else 7 for c in have],
                        "symbol": ["star" if c["id"] == self.data["best"] else "circle" for c in have],
                    },
                    hovertemplate=f"%{{text}}<br>{h.esc(k)} %{{x}}<br>{h.esc(objective.metric)} %{{y:.6g}}"
                    "<extra></extra>",
                )
                layout[f"xaxis{axis}"] = {
                    "domain": [i * width + 0.02, (i + 1) * width - 0.02],
                    "title": {"text": k},
                    "type": "linear" if numeric else "category",
                    "anchor": "y",
                }
            layout["yaxis"] = {"title": {"text": objective.metric}}
            layout["showlegend"] = False
            self.scatter.update_layout(layout)


def _sort_key(v: Any) -> tuple[int, Any]:
    if is_number(v):
        return (0, float(v))
    return (1, h.value(v))


def _figure(height: int) -> Any:
    import plotly.graph_objects as go

    return go.FigureWidget(layout={**h.PLOT_LAYOUT, "height": height, "margin": {"l": 60, "r": 20, "t": 40, "b": 40}})
