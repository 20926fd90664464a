"""`gpuplat report` and the what-if CLI as people read them: over an answer shaped like GET insights'.

Small shares stay visible (0.08%, not 0.0%), the table wraps to the terminal like `runs list`,
waits are humanized (1m 05s), the HTML has human headers within 1280 px, and quotas adding up to
more than the machine are said.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from jupyter_gpuplat.cli import report
from jupyter_gpuplat.cli import whatif as whatif_cli
from jupyter_gpuplat.service.schemas.insights import Insights

WEEK = 7 * 86400.0


def _figures(name: str | None, quota: int | None, wait: float, gpu_hours: float) -> dict[str, Any]:
    allowance = quota * WEEK / 3600 if quota else None
    out: dict[str, Any] = {
        "runs": 3,
        "queue_wait": {"n": 3, "p50": wait, "p90": wait * 2, "p99": wait * 3, "max": wait * 3, "mean": wait},
        "start_wait": {"n": 3, "p50": 1.25, "p90": 2.5, "p99": 4.0, "max": 4.0, "mean": 2.0},
        "waits_by_reason": [],
        "waits_by_category": {
            "quota": 3 * wait, "concurrency": 0.0, "max_per_user": 0.0, "capacity": 12.5, "placement": 0.0, "other": 0.0
        },
        "gpu_hours": gpu_hours,
        "allowance_gpu_hours": allowance,
        "utilisation": gpu_hours / allowance if allowance else None,
        "goodput": 0.97,
        "ended_runs": 3,
        "failures": [],
        "gpu_hours_measured": 0.0, "gpu_hours_busy": None, "busy_fraction": None,
    }  # fmt: skip
    if name is not None:
        out |= {"name": name, "quota_gpu": quota}
    return out


def answer() -> dict[str, Any]:
    """A week: team-a-train (8-GPU quota, 0.14 GPU-h used), team-b-train (4-GPU quota) on an 8-GPU machine."""
    total = _figures(None, None, 65.0, 0.2) | {"machine_gpu_hours": 8 * WEEK / 3600}
    total["machine_utilisation"] = 0.2 / total["machine_gpu_hours"]
    out = {
        "since": 1_790_000_000.0, "until": 1_790_000_000.0 + WEEK, "bucket_seconds": 86400.0, "now": 1_790_604_800.0,
        "queue": None, "project": None, "platform_admin": True, "machine_gpus": 8,
        "total": total,
        "queues": [_figures("team-a-train", 8, 65.0, 0.14), _figures("team-b-train", 4, 3725.0, 0.06)],
        "series": [], "top_users": [], "refusals": [],
    }  # fmt: skip
    Insights.model_validate(out)
    return out


def test_small_shares_stay_visible() -> None:
    assert report.percent(0.14 / (8 * WEEK / 3600)) == "0.01%"
    assert report.percent(0.0008) == "0.08%"
    assert report.percent(0.0000001) == "<0.001%"
    assert [report.percent(v) for v in (0, None, 0.034, 0.5)] == ["0%", "-", "3.4%", "50%"]
    text = report.render_table(answer(), width=200)
    assert "0.01%" in text and "0.0%" not in text
    assert "0.01%" in report.render_html(answer())
    wi = {
        "queues": [{
            "name": "q", "runs": 1, "settings": {"concurrency": 4}, "observed_settings": {"concurrency": 2},
            "observed": {"wait_p50_seconds": 1.0, "wait_p90_seconds": 1.0, "wait_p99_seconds": 1.0,
                         "wait_mean_seconds": 1.0, "gpu_hours": 0.14, "utilisation": 0.0008, "waiting_at_end": 0},
            "predicted": {"wait_p50_seconds": 0.0, "wait_p90_seconds": 0.0, "wait_p99_seconds": 0.0,
                          "wait_mean_seconds": 0.0, "gpu_hours": 0.14, "utilisation": 0.0008, "waiting_at_end": 0},
            "notes": ["concurrency does not bind: quota does"],
        }],
        "runs": [], "hidden_runs": 0, "assumptions": [],
    }  # fmt: skip
    rendered = whatif_cli.render(wi, False)
    assert "0.08%" in rendered and "0.1%" not in rendered and "note: concurrency does not bind" in rendered


def test_the_table_wraps_to_the_terminal_with_humanized_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    text = report.render_table(answer())
    assert max(len(line) for line in text.splitlines()) <= 80, text
    wide = report.render_table(answer(), width=400)
    assert "1m 05s / 2m 10s / 3m 15s" in wide and "1h 02m / 2h 04m / 3h 06m" in wide
    assert "65.000" not in wide and "qwait_p50" not in wide and "queue wait p50" in wide
    assert "quotas sum to 12 GPUs on an 8-GPU machine" in " ".join(text.split())


def test_the_html_table_has_human_headers_and_fits_1280_px() -> None:
    page = report.render_html(answer())
    table = page[page.index("<table>") : page.index("</table>")]
    headers = re.findall(r"<th>(.*?)</th>", table)
    assert headers and not any("_" in h for h in headers), headers
    assert "1m 05s" in table
    style = page[page.index("<style>") : page.index("</style>")]
    widths = [int(w) for w in re.findall(r"max-width:(\d+)px", style)]
    assert widths and max(widths) <= 1280 and "table-layout:fixed" in style
    assert "quotas sum to 12 GPUs on an 8-GPU machine" in page


def test_quotas_within_the_machine_are_not_flagged() -> None:
    out = answer()
    out["queues"][1]["quota_gpu"] = None
    assert report.warnings(out) == []
    out["machine_gpus"] = None  # a cluster: no machine to compare with
    assert report.warnings(answer() | {"machine_gpus": None}) == []


def _calibrated() -> dict[str, Any]:
    """answer() with start-estimate calibration: team-a-train 42 runs, team-b-train none dispatched."""
    out = answer()
    seen = {"n": 42, "p90_hit_rate": 0.88, "p50_abs_error_seconds": 186.0, "p50_abs_error_median_seconds": 70.0}
    none = {"n": 0, "p90_hit_rate": None, "p50_abs_error_seconds": None, "p50_abs_error_median_seconds": None}
    out["queues"][0]["eta_calibration"], out["queues"][1]["eta_calibration"] = seen, none
    out["total"]["eta_calibration"] = seen
    Insights.model_validate(out)
    return out


def test_the_start_estimates_calibration_per_queue_and_overall() -> None:
    out = _calibrated()
    text = report.render_table(out, width=200)
    assert report.CALIBRATION_TITLE in text
    lines = [line.strip() for line in text.splitlines()]
    said = "42 runs, 88% started by their p90, p50 off by 3m 06s on average (median 1m 10s)"
    assert f"team-a-train: {said}" in lines and f"(all): {said}" in lines
    assert "team-b-train: no run with an estimate was dispatched" in lines
    narrow = report.render_table(out, width=60)
    assert max(len(line) for line in narrow.splitlines()) <= 60
    page = report.render_html(out)
    section = page[page.index(report.CALIBRATION_TITLE.replace("'", "&#x27;")) :]
    cells = re.findall(r"<td>(.*?)</td>", section[: section.index("</table>")])
    assert cells == ["team-a-train", "42", "88%", "3m 06s", "1m 10s", "team-b-train", "0", "-", "-", "-",
                     "(all)", "42", "88%", "3m 06s", "1m 10s"]  # fmt: skip
    csv_lines = report.render_csv(out).splitlines()
    cols = csv_lines[0].split(",")
    rows = {r[0]: dict(zip(cols, r, strict=True)) for r in (line.split(",") for line in csv_lines[1:])}
    assert rows["team-a-train"]["eta_runs"] == "42" and rows["team-a-train"]["eta_p90_hit_rate"] == "0.88"
    assert rows["(all)"]["eta_p50_abs_error_seconds"] == "186.0" and rows["team-b-train"]["eta_p90_hit_rate"] == ""
    # An older server's answer has no calibration: no section, empty columns.
    assert report.CALIBRATION_TITLE not in report.render_table(answer(), width=200)
    assert report.CALIBRATION_TITLE.split(" (")[0] not in report.render_html(answer())
