"""The Launcher's sweep mode: params as rows (a name and a compact domain), grid or random, how many
children and how many at once, and a preview of the children computed here.

A row is `lr` + `1e-3,3e-4` (values), `loguniform:1e-5:1e-2`, `range:1:10:2`, `choice:adam,sgd`…, read by
`core.matrix.parse_param` as the CLI and `%%gpu_sweep` read `--grid lr=…`. The preview is
`core.matrix.count` and the first params of `core.matrix.expand`: the same pure functions the
service expands the sweep with, so it shows the children the sweep will have. A random sweep
always sends its seed (shown in the form), so the preview's draws are the children's.
"""

from __future__ import annotations

from typing import Any

import ipywidgets as widgets
import traitlets

from ...client.sweeping import params_text
from ...core.errors import GpuPlatError
from . import _html as h

__all__ = ["SweepForm"]

PREVIEW_ROWS = 5  # first children shown in the preview


class ParamRow(widgets.HBox):
    """One param: its name and its domain in the compact form."""

    def __init__(self, on_change: Any, on_remove: Any, name: str = "", domain: str = "") -> None:
        self.name_field = widgets.Text(value=name, placeholder="name, e.g. lr", layout=widgets.Layout(width="140px"))
        self.domain_field = widgets.Text(
            value=domain,
            placeholder="1e-3,3e-4 · loguniform:1e-5:1e-2 · range:1:10:2 · choice:adam,sgd",
            layout=widgets.Layout(width="380px"),
        )
        self.remove_button = widgets.Button(icon="trash", tooltip="remove this param", layout={"width": "36px"})
        super().__init__([self.name_field, self.domain_field, self.remove_button])
        for w in (self.name_field, self.domain_field):
            w.observe(lambda _: on_change(), "value")
        self.remove_button.on_click(lambda _: on_remove(self))

    @property
    def text(self) -> str:
        return f"{self.name_field.value.strip()}={self.domain_field.value.strip()}"

    @property
    def blank(self) -> bool:
        return not self.name_field.value.strip() and not self.domain_field.value.strip()

    def close(self) -> None:
        for w in (self.name_field, self.domain_field, self.remove_button):
            w.close()
        super().close()


class SweepForm(widgets.VBox):
    """Sweep options of the Launcher's Run tab; `matrix()` is what `Client.submit(matrix=…)` takes."""

    preview_text = traitlets.Unicode("", help='The preview as text: "4 children, 2 at once: lr=0.001; …".')

    def __init__(self, **kwargs: Any) -> None:
        self.enabled = widgets.Checkbox(value=False, description="sweep: run it once per params", indent=False)
        self.kind_picker = widgets.ToggleButtons(options=[("grid", "grid"), ("random", "random")], description="kind")
        self.rows_box = widgets.VBox()
        self.add_button = widgets.Button(description="param", icon="plus", tooltip="add a param")
        self.num_runs = widgets.BoundedIntText(value=10, min=1, max=10000, description="num runs")
        self.seed = widgets.BoundedIntText(value=0, min=0, max=2**31 - 1, description="seed")
        self.concurrency = widgets.BoundedIntText(value=1, min=1, max=10000, description="concurrency")
        self.preview_box = widgets.HTML()
        self.count: int | None = None  # children the sweep will have; None while the form makes no sweep
        self.first_params: list[dict[str, Any]] = []
        self.error = ""  # why the form makes no sweep
        self.options_box = widgets.VBox(
            [
                self.kind_picker,
                self.rows_box,
                self.add_button,
                widgets.HBox([self.num_runs, self.seed]),
                self.concurrency,
                self.preview_box,
            ]
        )
        super().__init__([self.enabled], **kwargs)
        self.add_class("gpuplat-sweep-form")
        self.add_row()
        self.enabled.observe(lambda _: self._toggle(), "value")
        for w in (self.kind_picker, self.num_runs, self.seed, self.concurrency):
            w.observe(lambda _: self.render(), "value")
        self.add_button.on_click(lambda _: self.add_row())
        self.render()

    @property
    def rows(self) -> list[ParamRow]:
        return list(self.rows_box.children)

    def add_row(self, name: str = "", domain: str = "") -> ParamRow:
        row = ParamRow(self.render, self._remove, name, domain)
        self.rows_box.children = (*self.rows_box.children, row)
        self.render()
        return row

    def matrix(self) -> dict[str, Any]:
        """The matrix of the form (`POST runs`' JSON); GpuPlatError or ValueError naming what is wrong."""
        from ...core.matrix import Matrix, parse_param

        kind = self.kind_picker.value
        params: dict[str, Any] = {}
        for row in self.rows:
            if row.blank:
                continue
            name, domain = parse_param(row.text)
            if name in params:
                raise ValueError(f"param {name} is given twice")
            params[name] = domain.model_dump(mode="json", exclude_none=True)
        if not params:
            raise ValueError("a sweep needs a param: a name and its values or domain")
        matrix: dict[str, Any] = {"kind": kind, "params": params, "concurrency": self.concurrency.value}
        if kind == "random":
            matrix.update(num_runs=self.num_runs.value, seed=self.seed.value)
        Matrix.model_validate(matrix)  # as a whole (a grid of a continuous domain, too many children)
        return matrix

    def render(self) -> None:
        """The preview: how many children and the first params, or why the form makes no sweep."""
        is_random = self.kind_picker.value == "random"
        self.num_runs.disabled = self.seed.disabled = not is_random
        self.count, self.first_params, self.error = None, [], ""
        try:
            from ...core.matrix import Matrix, count, expand

            matrix = Matrix.model_validate(self.matrix())
            self.count = count(matrix)
            self.first_params = expand(matrix)[:PREVIEW_ROWS]
        except GpuPlatError as exc:
            self.error = exc.message + (f" ({exc.hint})" if exc.hint else "")
        except ValueError as exc:  # pydantic's ValidationError is a ValueError
            self.error = _first_line(exc)
        if self.error:
            self.preview_text = self.error
            self.preview_box.value = h.error_block(self.error)
            return
        first = "; ".join(params_text(p) for p in self.first_params)
        more = "; …" if (self.count or 0) > len(self.first_params) else ""
        self.preview_text = f"{self.count} children, {self.concurrency.value} at once: {first}{more}"
        rows = [f"<tr>{h.td('#', header=True)}{h.td('params', header=True)}</tr>"]
        mono = f"font-family:{h.MONO}"
        rows += [
            f'<tr class="gpuplat-sweep-child">{h.td(str(i + 1))}{h.td(h.esc(params_text(p)), extra=mono)}</tr>'
            for i, p in enumerate(self.first_params)
        ]
        head = f"<b>{self.count} children</b>, at most {self.concurrency.value} at once" + (
            h.dim(f" · the first {len(self.first_params)}") if more else ""
        )
        self.preview_box.value = h.box(f'<div class="gpuplat-sweep-preview">{head}</div>{h.table(rows)}')

    def close(self) -> None:
        for row in self.rows:
            row.close()
        for w in (
            self.enabled,
            self.kind_picker,
            self.rows_box,
            self.add_button,
            self.num_runs,
            self.seed,
            self.concurrency,
            self.preview_box,
            self.options_box,
        ):
            w.close()
        super().close()

    def _toggle(self) -> None:
        self.children = (self.enabled, self.options_box) if self.enabled.value else (self.enabled,)
        self.render()

    def _remove(self, row: ParamRow) -> None:
        self.rows_box.children = tuple(r for r in self.rows_box.children if r is not row)
        row.close()
        self.render()


def _first_line(exc: ValueError) -> str:
    errors = getattr(exc, "errors", None)
    if callable(errors):
        try:
            return "; ".join(f"{'.'.join(map(str, e.get('loc', ()))) or 'matrix'}: {e['msg']}" for e in errors())
        except (TypeError, KeyError):
            pass
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
