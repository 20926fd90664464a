"""`gpuplat whatif`: replay a period under changed queue limits (POST whatif), observed beside predicted.

    gpuplat whatif --queue team-a-train --set concurrency=4 --since 7d [--until 1d] [--runs] [--json]

`--set KEY=VALUE` changes every `--queue` given (or `QUEUE:KEY=VALUE` one queue); keys are the
queue settings: priority, concurrency, max_per_user, ordering, paused, quota.gpu/cpu/memory, and a
flavor's quota in the queue, flavors.NAME.gpu/cpu/memory (`team-a:flavors.h100.gpu=4`);
`none` lifts a limit.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from ..client.rest import Client
from ..client.suggest import SuggestingParser
from ..core.errors import GpuPlatError
from .report import percent

KEYS = ("priority", "concurrency", "max_per_user", "ordering", "paused", "quota.gpu", "quota.cpu", "quota.memory")
_INTS = {"priority", "concurrency", "max_per_user", "quota.gpu"}
_FLAVOR_KEYS = ("gpu", "cpu", "memory")


class UsageError(Exception):
    pass


def build_parser() -> argparse.ArgumentParser:
    p = SuggestingParser(prog="gpuplat whatif", description="Replay a period's arrivals under changed limits")
    p.add_argument("--url")
    p.add_argument("--token")
    p.add_argument("--json", action="store_true", help="print the service's answer as JSON")
    p.add_argument("--queue", action="append", default=[], help="a queue to replay (repeatable)")
    p.add_argument("--set", action="append", default=[], dest="sets", metavar="[QUEUE:]KEY=VALUE")
    p.add_argument("--since", default="7d", help="how long ago (30m, 12h, 7d, 2w), epoch seconds or an ISO date")
    p.add_argument("--until", default=None, help="like --since; default now")
    p.add_argument("--runs", action="store_true", help="also list each run's observed and predicted wait")
    return p


def instant(raw: str | None) -> float | str | None:
    """A duration back from now goes to the service as is (its clock); a date or number as epoch seconds."""
    if raw is None or (raw[-1:] in ("s", "m", "h", "d", "w") and raw[:-1].isdigit()):
        return raw
    try:
        return float(raw)
    except ValueError:
        pass
    try:
        return datetime.fromisoformat(raw).timestamp()
    except ValueError:
        raise UsageError(f"{raw!r} is not a time: give 7d, 12h, epoch seconds or a date like 2026-11-25") from None


def value(key: str, raw: str) -> Any:
    if raw.lower() in ("none", "null", "unlimited"):
        return None
    if key in _INTS or (key.startswith("flavors.") and key.endswith(".gpu")):
        try:
            return int(raw)
        except ValueError:
            raise UsageError(f"{key} must be a whole number or none, not {raw!r}") from None
    if key == "paused":
        if raw.lower() not in ("true", "false"):
            raise UsageError(f"paused must be true or false, not {raw!r}")
        return raw.lower() == "true"
    return raw


def changes(queues: list[str], sets: list[str]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {q: {} for q in queues}
    for item in sets:
        target, _, assignment = item.partition(":") if ":" in item.split("=", 1)[0] else ("", "", item)
        key, eq, raw = assignment.partition("=")
        if not eq:
            raise UsageError(f"--set {item!r}: give KEY=VALUE, e.g. concurrency=4")
        flavor, _, resource = key[8:].rpartition(".") if key.startswith("flavors.") else ("", "", "")
        if key.startswith("flavors.") and (not flavor or resource not in _FLAVOR_KEYS):
            raise UsageError(f"--set {item!r}: give flavors.NAME.gpu (or .cpu, .memory), e.g. flavors.h100.gpu=4")
        if key not in KEYS and not flavor:
            known = ", ".join((*KEYS, "flavors.NAME.gpu/cpu/memory"))
            raise UsageError(f"--set {item!r}: unknown setting {key!r}; known: {known}")
        names = [target] if target else queues
        if not names:
            raise UsageError("--set needs a --queue (or QUEUE:KEY=VALUE)")
        for q in names:
            change = out.setdefault(q, {})
            if flavor:
                change.setdefault("flavors", {}).setdefault(flavor, {})[resource] = value(key, raw)
            elif key.startswith("quota."):
                change.setdefault("quota", {})[key[6:]] = value(key, raw)
            else:
                change[key] = value(key, raw)
    return {q: c for q, c in out.items() if c}


def _fmt(v: Any, pct: bool = False) -> str:
    if v is None:
        return "-"
    if pct:
        return percent(v)
    if isinstance(v, float):
        return f"{v:.0f}" if abs(v) >= 100 or v == int(v) else f"{v:.2f}"
    return str(v)


_FLAVOR_ROWS = (("runs", "runs", False), ("GPU-hours", "gpu_hours", False), ("utilisation", "utilisation", True))


def _quota(q: dict[str, Any] | None) -> str:
    if not q:
        return "-"
    return str(q["gpu"]) if set(q) == {"gpu"} else ", ".join(f"{k}={v}" for k, v in q.items())


def render(out: dict[str, Any], with_runs: bool) -> str:
    lines = []
    for q in out["queues"]:
        lines.append(f"queue {q['name']}: {q['runs']} runs")
        before = q["observed_settings"]
        diff = {k: (before[k], v) for k, v in q["settings"].items() if k != "flavors" and before[k] != v}
        for k, (old, new) in diff.items():
            lines.append(f"  {k}: {_fmt(old)} -> {_fmt(new)}")
        was = {f["name"]: f["quota"] for f in before.get("flavors", [])}
        for f in q["settings"].get("flavors", []):
            if was.get(f["name"]) != f["quota"]:
                lines.append(f"  {f['name']}: quota {_quota(was.get(f['name']))} -> {_quota(f['quota'])}")
        rows = [
            ("wait p50 (s)", "wait_p50_seconds", False),
            ("wait p90 (s)", "wait_p90_seconds", False),
            ("wait p99 (s)", "wait_p99_seconds", False),
            ("wait mean (s)", "wait_mean_seconds", False),
            ("GPU-hours", "gpu_hours", False),
            ("utilisation", "utilisation", True),
            ("waiting at end", "waiting_at_end", False),
        ]
        lines.append(f"  {'':16}{'observed':>12}{'predicted':>12}")
        for label, key, pct in rows:
            lines.append(f"  {label:16}{_fmt(q['observed'][key], pct):>12}{_fmt(q['predicted'][key], pct):>12}")
        for f in q.get("flavors", []):
            lines.append(f"  flavor {f['name']} (quota {_fmt(f['observed_quota_gpu'])} -> {_fmt(f['quota_gpu'])} GPUs)")
            for label, key, pct in _FLAVOR_ROWS:
                lines.append(f"    {label:14}{_fmt(f['observed'][key], pct):>12}{_fmt(f['predicted'][key], pct):>12}")
        if q.get("predicted_binding_text"):
            lines.append(f"  binds: {q['predicted_binding_text']}")
        lines.extend(f"  note: {n}" for n in q.get("notes", []))
    if with_runs:
        lines.append("")
        lines.append(f"{'run':14}{'queue':18}{'user':12}{'observed wait':>15}{'predicted wait':>16}")
        for r in out["runs"]:
            ow, pw = _fmt(r["observed_wait_seconds"]), _fmt(r["predicted_wait_seconds"])
            lines.append(f"{r['id']:14}{r['queue']:18}{r['user']:12}{ow:>15}{pw:>16}")
        if out["hidden_runs"]:
            lines.append(f"(+{out['hidden_runs']} runs of other projects, counted above, not listed)")
    lines.append("")
    lines.append("assumptions:")
    lines.extend(f"  - {a}" for a in out["assumptions"])
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    try:
        body: dict[str, Any] = {"since": instant(args.since), "changes": changes(args.queue, args.sets)}
        if args.until is not None:
            body["until"] = instant(args.until)
        if args.queue:
            body["queues"] = args.queue
        out = Client(args.url, args.token).request("POST", "whatif", body)
    except UsageError as exc:
        print(f"gpuplat whatif: {exc}", file=sys.stderr)
        return 2
    except GpuPlatError as exc:
        hint = f"\n  hint: {exc.hint}" if exc.hint else ""
        print(f"gpuplat whatif: {exc.message}{hint}", file=sys.stderr)
        return 1
    print(json.dumps(out, indent=2) if args.json else render(out, args.runs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
