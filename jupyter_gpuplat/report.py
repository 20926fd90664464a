"""`gpuplat report`: the insights of a period as a table, CSV or a self-contained HTML page.

    gpuplat report --since 7d [--until 1d] [--queue Q] [--project P] [--bucket 1d]
                   [--format table|csv|html] [--out FILE]

The HTML carries plotly.js inline (no network needed to open it) and the sidebar's charts:
wait percentiles, waits by reason, GPU-hours against quota over time, goodput.
"""

from __future__ import annotations

import argparse
import csv
import html
import io
import json
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from .client import Client
from .core.errors import GpuPlatError
from .suggest import SuggestingParser

CATEGORIES = ("quota", "concurrency", "max_per_user", "capacity", "placement", "other")
COLUMNS = (
    "queue",
    "runs",
    "qwait_p50",
    "qwait_p90",
    "qwait_p99",
    "swait_p50",
    "swait_p90",
    "swait_p99",
    *(f"wait_{c}" for c in CATEGORIES),
    "gpu_hours",
    "allowance_gpu_hours",
    "utilisation",
    "goodput",
    "failed",
)


def build_parser() -> argparse.ArgumentParser:
    p = SuggestingParser(prog="gpuplat report", description="Observed waits, GPU-hours and goodput of a period")
    p.add_argument("--url")
    p.add_argument("--token")
    p.add_argument("--json", action="store_true", help="print the service's answer as JSON")
    p.add_argument("--since", default="7d", help="how long ago (30m, 12h, 7d, 2w) or epoch seconds")
    p.add_argument("--until", default=None, help="like --since; default now")
    p.add_argument("--queue", default=None)
    p.add_argument("--project", default=None)
    p.add_argument("--bucket", default=None, help="series bucket (1h, 6h, 1d); default from the range")
    p.add_argument("--format", choices=("table", "csv", "html"), default="table")
    p.add_argument("--out", default=None, help="write here instead of stdout")
    return p


def rows(out: dict[str, Any]) -> list[list[Any]]:
    result = []
    for q in [*out["queues"], {"name": "(all)", **out["total"]}]:
        qw, sw, cats = q["queue_wait"], q["start_wait"], q["waits_by_category"]
        failed = sum(f["count"] for f in q["failures"])
        result.append(
            [
                q["name"],
                q["runs"],
                qw["p50"],
                qw["p90"],
                qw["p99"],
                sw["p50"],
                sw["p90"],
                sw["p99"],
                *(cats[c] for c in CATEGORIES),
                q["gpu_hours"],
                q["allowance_gpu_hours"],
                q["utilisation"],
                q["goodput"],
                failed,
            ]
        )
    return result


def _cell(v: Any) -> str:
    if v is None:
        return "-"
    return f"{v:.3f}".rstrip("0").rstrip(".") if isinstance(v, float) else str(v)


def _when(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d %H:%M UTC")


def render_table(out: dict[str, Any]) -> str:
    table = [list(COLUMNS), *([_cell(v) for v in r] for r in rows(out))]
    widths = [max(len(r[i]) for r in table) for i in range(len(COLUMNS))]
    lines = [f"insights {_when(out['since'])} .. {_when(out['until'])} (waits in seconds)"]
    lines += [
        "  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True)))
        for r in table
    ]
    if out["refusals"]:
        lines.append("refusals: " + ", ".join(f"{r['rule']} {r['count']}" for r in out["refusals"]))
    if out["top_users"]:
        lines.append(
            "top users: "
            + ", ".join(f"{u['user']} ({u['project']}) {u['gpu_hours']:.2f} GPU-h" for u in out["top_users"])
        )
    return "\n".join(lines)


def render_csv(out: dict[str, Any]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(COLUMNS)
    w.writerows([["" if v is None else v for v in r] for r in rows(out)])
    return buf.getvalue()


def figures(out: dict[str, Any]) -> list[Any]:
    import plotly.graph_objects as go  # only the HTML report needs plotly

    names = [q["name"] for q in out["queues"]]
    waits = go.Figure(
        [go.Bar(name=f"p{p}", x=names, y=[q["queue_wait"][f"p{p}"] for q in out["queues"]]) for p in (50, 90, 99)]
    )
    waits.update_layout(title="Queue wait percentiles (s)", barmode="group")
    reasons = go.Figure(
        [go.Bar(name=c, x=names, y=[q["waits_by_category"][c] for q in out["queues"]]) for c in CATEGORIES]
    )
    reasons.update_layout(title="Waits by reason (s)", barmode="stack")
    xs = [datetime.fromtimestamp(b["start"], UTC) for b in out["series"]]
    usage = go.Figure([go.Scatter(name="GPU-hours used", x=xs, y=[b["gpu_hours"] for b in out["series"]])])
    if any(b["allowance_gpu_hours"] is not None for b in out["series"]):
        usage.add_trace(go.Scatter(name="quota", x=xs, y=[b["allowance_gpu_hours"] for b in out["series"]]))
    if any(b["machine_gpu_hours"] is not None for b in out["series"]):
        usage.add_trace(go.Scatter(name="machine", x=xs, y=[b["machine_gpu_hours"] for b in out["series"]]))
    usage.update_layout(title="GPU-hours against quota")
    goodput = go.Figure([go.Bar(x=names, y=[q["goodput"] for q in out["queues"]])])
    goodput.update_layout(title="Goodput (running time / lifetime)", yaxis={"range": [0, 1]})
    return [waits, reasons, usage, goodput]


def render_html(out: dict[str, Any]) -> str:
    charts = [f.to_html(full_html=False, include_plotlyjs=(i == 0)) for i, f in enumerate(figures(out))]
    table = "".join(
        "<tr>" + "".join(f"<{t}>{html.escape(_cell(v))}</{t}>" for v in r) + "</tr>"
        for t, r in [("th", COLUMNS), *(("td", r) for r in rows(out))]
    )
    title = f"GPU platform report {_when(out['since'])} .. {_when(out['until'])}"
    style = (
        "body{font-family:sans-serif;margin:1em}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:2px 6px}"
    )
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title><style>{style}</style>"
        f"</head><body><h1>{html.escape(title)}</h1><table>{table}</table>"
        + "".join(f"<div class='chart'>{c}</div>" for c in charts)
        + "</body></html>"
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    params = {k: getattr(args, k) for k in ("since", "until", "queue", "project", "bucket")}
    try:
        out = Client(args.url, args.token).request("GET", "insights", **params)
    except GpuPlatError as exc:
        hint = f"\n  hint: {exc.hint}" if exc.hint else ""
        print(f"gpuplat report: {exc.message}{hint}", file=sys.stderr)
        return 1
    fmt = "json" if args.json else args.format
    text = {"json": lambda o: json.dumps(o, indent=2), "table": render_table, "csv": render_csv, "html": render_html}[
        fmt
    ](out)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(text)
    else:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
