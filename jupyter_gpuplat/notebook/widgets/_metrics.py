"""What the widgets know about metrics by name (shared by Compare and RunMonitor)."""

from __future__ import annotations

_LOWER_BETTER = ("loss", "err", "mse", "mae", "rmse", "nll", "perplexity", "ppl", "wer", "cer", "latency", "time")


def lower_is_better(metric: str) -> bool:
    """Direction of a metric, guessed from its name: losses and errors go down, the rest up."""
    name = metric.lower()
    return any(word in name for word in _LOWER_BETTER)
