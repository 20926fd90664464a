"""`core.insights.eta_calibration`: first start estimates against dispatch, as a table of cases."""

from __future__ import annotations

from typing import Any

import pytest

from jupyter_gpuplat.core.insights import eta_calibration


def _row(dispatched: float, p50: float, p90: float) -> dict[str, Any]:
    return {"queue": "q", "dispatched_at": dispatched, "p50_at": p50, "p90_at": p90, "computed_at": 0.0}


@pytest.mark.parametrize(
    ("rows", "want"),
    [
        ([], {"n": 0, "p90_hit_rate": None, "p50_abs_error_seconds": None, "p50_abs_error_median_seconds": None}),
        # Dispatched exactly at its p90 counts as by it; early and late both count as error.
        ([_row(100, 60, 100)], {"n": 1, "p90_hit_rate": 1.0, "p50_abs_error_seconds": 40.0,
                                "p50_abs_error_median_seconds": 40.0}),
        ([_row(100.5, 60, 100)], {"n": 1, "p90_hit_rate": 0.0, "p50_abs_error_seconds": 40.5,
                                  "p50_abs_error_median_seconds": 40.5}),
        # Errors 10, 20, 600: a far-off estimate moves the mean, not the (nearest-rank) median.
        ([_row(10, 20, 30), _row(50, 30, 40), _row(700, 100, 900)],
         {"n": 3, "p90_hit_rate": round(2 / 3, 6), "p50_abs_error_seconds": 210.0,
          "p50_abs_error_median_seconds": 20.0}),
        ([_row(0, 1, 2), _row(0, 3, 4)],
         {"n": 2, "p90_hit_rate": 1.0, "p50_abs_error_seconds": 2.0, "p50_abs_error_median_seconds": 1.0}),
    ],
)  # fmt: skip
def test_calibration(rows: list[dict[str, Any]], want: dict[str, Any]) -> None:
    assert eta_calibration(rows) == want
