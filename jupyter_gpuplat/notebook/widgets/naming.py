"""Run names and labels (jupyter_gpuplat.client.runnames, where they live so runedits can share them)."""

from __future__ import annotations

from ...client.runnames import SEP, cell_index, cell_label, label_runs, params_text, run_name

__all__ = ["SEP", "cell_index", "cell_label", "label_runs", "params_text", "run_name"]
