"""`gpuplat report`: the insights of a period as a table, CSV or a self-contained HTML page.

    gpuplat report --since 7d [--until 1d] [--queue Q] [--project P] [--bucket 1d]
                   [--format table|csv|html] [--out FILE]

The HTML carries plotly.js inline (no network needed to open it) and the sidebar's charts:
wait percentiles, waits by reason, GPU-hours against quota over time, goodput. Where the
platform has flavors, a second table (and chart) gives each flavor's GPU-hours and utilisation.
How right the start estimates were (each run's first estimate against its dispatch) follows, per
queue and for all: a sentence each in the table format, a table in HTML, columns in CSV.
"""

from __future__ import annotations

import argparse
import csv
import html
import io
import json
import sys
import textwrap
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from ..client.rest import Client
from ..client.suggest import SuggestingParser
from ..core.errors import GpuPlatError
from .tables import table, terminal_width

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
    "eta_runs",  # the start estimates' calibration (the flavors' rows: empty)
    "eta_p90_hit_rate",
    "eta_p50_abs_error_seconds",
    "eta_p50_abs_error_median_seconds",
    "flavor",  # empty on a queue's row; a flavor's rows name it (queue "(all)": every selected queue)
)
# What people read (the table and the HTML page): a column per figure, waits as p50 / p90 / p99.
HEADERS = (
    "queue",
    "runs",
    "queue wait p50 / p90 / p99",
    "start wait p50 / p90 / p99",
    "held by (total wait)",
    "GPU-hours",
    "quota GPU-hours",
    "utilisation",
    "goodput",
    "failed",
)
# The flavors' table (where the platform has flavors): each flavor in all, then in each queue offering it.
FLAVOR_HEADERS = (
    "flavor",
    "queue",
    "runs",
    "queue wait p50 / p90 / p99",
    "GPU-hours",
    "quota GPU-hours",
    "utilisation",
    "machine GPU-hours",
    "machine utilisation",
)
FLAVORS_TITLE = "GPU-hours per flavor"
CALIBRATION_TITLE = "Start estimates (each run's first one, against its dispatch)"
CALIBRATION_HEADERS = ("queue", "runs with an estimate", "started by their p90", "p50 off by (mean)", "(median)")


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


def flavor_figures(out: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    """(flavor, queue, figures): each flavor over every selected queue ("(all)"), then in each queue offering it."""
    result = []
    for f in out.get("flavors") or []:  # an older server's answer has none
        result.append((f["name"], "(all)", f))
        for q in out["queues"]:
            result += [(f["name"], q["name"], qf) for qf in q.get("flavors") or [] if qf["name"] == f["name"]]
    return result


def calibrations(out: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(queue, eta_calibration) per queue and for all ("(all)"); none from an older server's answer."""
    named = [(q["name"], q.get("eta_calibration")) for q in out["queues"]]
    named.append(("(all)", out["total"].get("eta_calibration")))
    return [(name, c) for name, c in named if c is not None]


def calibration_text(c: dict[str, Any]) -> str:
    """'42 runs, 88% started by their p90, p50 off by 3m 06s on average (median 1m 10s)'."""
    if not c["n"]:
        return "no run with an estimate was dispatched"
    runs = "1 run" if c["n"] == 1 else f"{c['n']} runs"
    median = c.get("p50_abs_error_median_seconds")
    text = f"{runs}, {percent(c['p90_hit_rate'])} started by their p90, p50 off by "
    text += f"{wait_text(c['p50_abs_error_seconds'])} on average"
    return text + ("" if median is None else f" (median {wait_text(median)})")


def calibration_cells(named: list[tuple[str, dict[str, Any]]]) -> list[list[str]]:
    """One row per queue and for all, as CALIBRATION_HEADERS."""
    return [
        [
            name,
            str(c["n"]),
            percent(c["p90_hit_rate"]),
            wait_text(c["p50_abs_error_seconds"]),
            wait_text(c.get("p50_abs_error_median_seconds")),
        ]
        for name, c in named
    ]


def calibration_values(c: dict[str, Any] | None) -> tuple[Any, ...]:
    """The CSV's eta_* columns (all None where there is no calibration)."""
    if c is None:
        return (None,) * 4
    return c["n"], c["p90_hit_rate"], c["p50_abs_error_seconds"], c.get("p50_abs_error_median_seconds")


def rows(out: dict[str, Any]) -> list[list[Any]]:
    result = []
    named = [(q["name"], "", q) for q in [*out["queues"], {"name": "(all)", **out["total"]}]]
    for name, flavor, q in named + [(queue, flavor, f) for flavor, queue, f in flavor_figures(out)]:
        qw, sw, cats = q["queue_wait"], q["start_wait"], q["waits_by_category"]
        failed = sum(f["count"] for f in q["failures"])
        # A flavor's figures carry no calibration (estimates are per run and queue, not per flavor).
        cal = q.get("eta_calibration") if not flavor else None
        result.append(
            [
                name,
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
                *calibration_values(cal),
                flavor,
            ]
        )
    return result


def percent(v: float | None) -> str:
    """A share as a percentage that keeps a small non-zero figure visible: 0.083%, <0.001%, never 0.0%."""
    if v is None:
        return "-"
    x = 100 * v
    if x == 0:
        return "0%"
    if x >= 10:
        return f"{x:.0f}%"
    if x >= 0.1:
        return f"{x:.1f}%"
    return f"{x:.2g}%" if x >= 0.001 else "<0.001%"


def wait_text(seconds: float | None) -> str:
    """A wait as people read it: 45s, 1m 05s, 2h 03m, 3d 04h (under a second: <1s)."""
    if seconds is None:
        return "-"
    s = max(0.0, seconds)
    if s == 0:
        return "0s"
    if s < 1:
        return "<1s"
    n = round(s)
    if n < 60:
        return f"{n}s"
    if n < 3600:
        return f"{n // 60}m {n % 60:02d}s"
    if n < 86400:
        return f"{n // 3600}h {n % 3600 // 60:02d}m"
    return f"{n // 86400}d {n % 86400 // 3600:02d}h"


def _hours(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}" if v >= 0.01 or v == 0 else f"{v:.2g}"


def human_rows(out: dict[str, Any]) -> list[list[str]]:
    """One row per queue and one for all, as HEADERS: waits humanized, shares as percentages."""
    result = []
    for q in [*out["queues"], {"name": "(all)", **out["total"]}]:
        qw, sw, cats = q["queue_wait"], q["start_wait"], q["waits_by_category"]
        held = ", ".join(f"{c} {wait_text(cats[c])}" for c in CATEGORIES if cats[c]) or "-"
        result.append(
            [
                q["name"],
                str(q["runs"]),
                " / ".join(wait_text(qw[f"p{p}"]) for p in (50, 90, 99)),
                " / ".join(wait_text(sw[f"p{p}"]) for p in (50, 90, 99)),
                held,
                _hours(q["gpu_hours"]),
                _hours(q["allowance_gpu_hours"]),
                percent(q["utilisation"]),
                percent(q["goodput"]),
                str(sum(f["count"] for f in q["failures"])),
            ]
        )
    return result


def flavor_rows(out: dict[str, Any]) -> list[list[str]]:
    """One row per flavor in all and per queue, as FLAVOR_HEADERS; none where the platform has no flavors."""
    result = []
    for flavor, queue, f in flavor_figures(out):
        qw = f["queue_wait"]
        result.append(
            [
                flavor,
                queue,
                str(f["runs"]),
                " / ".join(wait_text(qw[f"p{p}"]) for p in (50, 90, 99)),
                _hours(f["gpu_hours"]),
                _hours(f["allowance_gpu_hours"]),
                percent(f["utilisation"]),
                _hours(f.get("machine_gpu_hours")),
                percent(f.get("machine_utilisation")),
            ]
        )
    return result


def warnings(out: dict[str, Any]) -> list[str]:
    """What the figures would not say on their own: quotas that add up to more than the machine."""
    machine = out.get("machine_gpus")
    quotas = [(q["name"], q["quota_gpu"]) for q in out["queues"] if q.get("quota_gpu")]
    total = sum(g for _, g in quotas)
    if machine is None or total <= machine:
        return []
    each = ", ".join(f"{n} {g}" for n, g in quotas)
    article = "an" if str(machine).startswith("8") or machine in (11, 18) else "a"
    return [
        f"quotas sum to {total} GPUs on {article} {machine}-GPU machine ({each}): "
        "a queue may not reach its quota while the others use theirs"
    ]


def busy_text(v: dict[str, Any]) -> str:
    """Held against busy, as the server counted them: busy is null where nothing was measured."""
    held = f"{_hours(v['gpu_hours'])} held"
    if v.get("gpu_hours_busy") is None:
        return f"{held}, not measured"
    measured, busy = _hours(v["gpu_hours_measured"]), _hours(v["gpu_hours_busy"])
    return f"{held}, {measured} measured, {busy} busy ({percent(v['busy_fraction'])})"


def gpu_busy_lines(out: dict[str, Any]) -> list[str]:
    """GPU-hours held against busy per queue and in all, and who held the most idle GPU time (issue 27)."""
    if "gpu_hours_measured" not in out["total"] or out.get("busy_percent") is None:  # an older server's answer
        return []
    lines = [f"GPU-hours held against busy (util ≥ {out['busy_percent']:g}%):"]
    lines += [f"  {q['name']}: {busy_text(q)}" for q in [*out["queues"], {"name": "(all)", **out["total"]}]]
    if out.get("idle_holders"):
        lines.append("idle holders (GPU-hours measured, not busy):")
    for h in out.get("idle_holders", []):
        worst = ", ".join(
            f"{r['id']} ({r['queue']}, {_hours(r['gpu_hours'])} GPU-h held, busy {percent(r['busy_fraction'])})"
            for r in h["worst_runs"]
        )
        lines.append(
            f"  {h['user']} ({h['project']}): {_hours(h['gpu_hours_idle'])} GPU-hours idle of "
            f"{_hours(h['gpu_hours_measured'])} measured (busy {percent(h['busy_fraction'])}); worst: {worst}"
        )
    return lines


def _when(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d %H:%M UTC")


def render_table(out: dict[str, Any], width: int | None = None) -> str:
    """The figures as the CLI's tables are: wrapped to the terminal's width (`width`, default $COLUMNS/tty)."""
    lines = [f"insights {_when(out['since'])} .. {_when(out['until'])}"]
    width = terminal_width() if width is None else width
    lines.append(table(human_rows(out), HEADERS, width))
    per_flavor = flavor_rows(out)
    if per_flavor:
        lines += [FLAVORS_TITLE, table(per_flavor, FLAVOR_HEADERS, width)]
    cal = calibrations(out)
    for text in [f"{CALIBRATION_TITLE}:"] * bool(cal) + [f"  {n}: {calibration_text(c)}" for n, c in cal]:
        lines += textwrap.wrap(text, width, subsequent_indent="    ") if width else [text]
    for text in gpu_busy_lines(out):
        lines += textwrap.wrap(text, width, subsequent_indent="    ") if width else [text]
    after = [f"note: {w}" for w in warnings(out)]
    if out["refusals"]:
        after.append("refusals: " + ", ".join(f"{r['rule']} {r['count']}" for r in out["refusals"]))
    if out["top_users"]:
        after.append(
            "top users: "
            + ", ".join(f"{u['user']} ({u['project']}) {u['gpu_hours']:.2f} GPU-h" for u in out["top_users"])
        )
    for text in after:
        lines += textwrap.wrap(text, width, subsequent_indent="  ") if width else [text]
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
    charts = [waits, reasons, usage, goodput]
    if out.get("flavors"):
        fs = out["flavors"]
        names = [f["name"] for f in fs]
        per_flavor = go.Figure([go.Bar(name="GPU-hours used", x=names, y=[f["gpu_hours"] for f in fs])])
        per_flavor.add_trace(go.Bar(name="quota", x=names, y=[f["allowance_gpu_hours"] for f in fs]))
        if any(f["machine_gpu_hours"] is not None for f in fs):
            per_flavor.add_trace(go.Bar(name="machine", x=names, y=[f["machine_gpu_hours"] for f in fs]))
        per_flavor.update_layout(title=f"{FLAVORS_TITLE} against quota", barmode="group")
        charts.append(per_flavor)
    return charts


def render_html(out: dict[str, Any]) -> str:
    charts = [f.to_html(full_html=False, include_plotlyjs=(i == 0)) for i, f in enumerate(figures(out))]

    def html_table(headers: Sequence[str], cells: list[list[str]]) -> str:
        return (
            "<table>"
            + "".join(
                "<tr>" + "".join(f"<{t}>{html.escape(v)}</{t}>" for v in r) + "</tr>"
                for t, r in [("th", headers), *(("td", r) for r in cells)]
            )
            + "</table>"
        )

    body = html_table(HEADERS, human_rows(out))
    per_flavor = flavor_rows(out)
    if per_flavor:
        body += f"<h2>{FLAVORS_TITLE}</h2>" + html_table(FLAVOR_HEADERS, per_flavor)
    cal = calibrations(out)
    if cal:
        body += f"<h2>{html.escape(CALIBRATION_TITLE)}</h2>" + html_table(CALIBRATION_HEADERS, calibration_cells(cal))
    notes = "".join(f"<p class='note'>{html.escape(w)}</p>" for w in warnings(out))
    title = f"GPU platform report {_when(out['since'])} .. {_when(out['until'])}"
    # Within 1280 px: the table takes the page's width at most and its cells wrap (headers between words).
    style = (
        "body{font-family:sans-serif;margin:1em;max-width:1248px}"
        "table{border-collapse:collapse;width:100%;max-width:1248px;table-layout:fixed;font-size:13px}"
        "td,th{border:1px solid #ccc;padding:2px 6px;overflow-wrap:anywhere;vertical-align:top}"
        "th{text-align:left}.note{color:#a40}.chart{max-width:1248px}"
    )
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title><style>{style}</style>"
        f"</head><body><h1>{html.escape(title)}</h1>{notes}{body}"
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
