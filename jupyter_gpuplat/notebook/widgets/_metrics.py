"""What the widgets know about metrics by name (shared by Compare and RunMonitor)."""

from __future__ import annotations

from ...core.compare import direction


def lower_is_better(metric: str) -> bool:
    """Direction of a metric (core.compare.direction, as compare answers carry it): losses and errors go down."""
    return direction(metric) == "min"
