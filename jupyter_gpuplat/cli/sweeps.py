"""`gpuplat sweeps …` and `gpuplat sessions …`."""

from __future__ import annotations

import argparse
import os
from typing import Any

from ..client.rest import Client
from ..client.sweeping import best_text, children_text, concurrency_text, done_count, params_text
from .base import CLIError, connect, emit
from .runs import record_lines, timeline_lines
from .tables import ago, duration, table


def add_sweeps(sub: Any, parents: list[argparse.ArgumentParser]) -> None:
    sw = sub.add_parser(
        "sweeps", parents=parents, help="list, show, change the concurrency of, pause, resume or stop sweeps"
    )
    sw.add_argument("action", choices=["list", "show", "update", "stop"], help="what to do: list, show, update, stop")
    sw.add_argument("run_id", nargs="?", help="the sweep (show, update, stop)")
    sw.add_argument("--project", help="list: sweeps of this project")
    sw.add_argument("--status", help="list: sweeps of this status; show: children of this status")
    sw.add_argument("--limit", type=int, default=50, help="list: sweeps; show: children (default 50)")
    sw.add_argument("--concurrency", type=int, help="update: at most N children dispatched at once")
    sw.add_argument("--pause", action="store_true", help="update: dispatch no more children")
    sw.add_argument("--resume", action="store_true", help="update: dispatch children again")


def add_sessions(sub: Any, parents: list[argparse.ArgumentParser]) -> None:
    se = sub.add_parser(
        "sessions",
        parents=parents,
        help="start, list, keep or stop your GPU sessions (notebook kernels on a GPU lease)",
    )
    se.add_argument("action", choices=["list", "start", "stop", "keep"], help="what to do: list, start, stop, keep")
    se.add_argument("run_id", nargs="?", help="the session (stop, keep)")
    se.add_argument("-p", "--project", help="start: project (default: GPUPLAT_PROJECT or your first project)")
    se.add_argument("--preset", help="start: session preset (default: the project's first of kind session)")
    se.add_argument(
        "--notebook",
        help="start: the notebook whose kernel runs in the lease (created when missing; "
        "default: a new gpu-session-<time>.ipynb here)",
    )


def cmd_sweeps(args: argparse.Namespace) -> int:
    c = connect(args)
    if args.action == "list":
        data = c.request("GET", "runs", kind="sweep", project=args.project, status=args.status, limit=args.limit)
        rows = [
            (
                r["id"],
                r["name"],
                r["project"],
                r["status"],
                f"{done_count(r)}/{(r.get('children') or {}).get('total', 0)}",
                r.get("concurrency"),
                "yes" if r.get("paused") else "",
                children_text(r).partition(": ")[2],
                ago(r["created_at"]),
            )
            for r in data["runs"]
        ]
        headers = ("ID", "NAME", "PROJECT", "STATUS", "DONE", "CONCURRENCY", "PAUSED", "CHILDREN", "AGE")
        emit(args, data, table(rows, headers))
        return 0
    if not args.run_id:
        raise CLIError(f"gpuplat sweeps {args.action} needs a sweep id (gpuplat sweeps list)")
    if args.action == "show":
        r = c.get(args.run_id)
        _must_be_sweep(r, "show")
        children = c.sweep_children(args.run_id, status=args.status, limit=args.limit)
        kids = [(k["id"], k["status"], params_text(k.get("params")), k["message"]) for k in children]
        cut = len(kids) == args.limit and r["children"]["total"] > len(kids)
        more = f" (the first {len(kids)}: --limit N for more)" if cut else ""
        human = [*sweep_lines(r), f"children{more}:", table(kids, ("ID", "STATUS", "PARAMS", "MESSAGE"), tail=True)]
        emit(args, r, "\n".join(human))  # --json: the record; its children with gpuplat runs list --parent
    elif args.action == "update":
        changes = [x for x in (args.concurrency is not None, args.pause, args.resume) if x]
        if len(changes) != 1:
            raise CLIError("gpuplat sweeps update takes one of --concurrency N, --pause or --resume")
        paused = True if args.pause else False if args.resume else None
        r = c.update_sweep(args.run_id, concurrency=args.concurrency, paused=paused)
        emit(args, r, f"{r['id']}  {r['status']}  {concurrency_text(r)}  {children_text(r)}")
    elif args.action == "stop":
        _must_be_sweep(c.get(args.run_id), "stop")
        r = c.stop(args.run_id)
        emit(args, r, f"{r['id']}  {r['status']}  {children_text(r)}")
    return 0


def _must_be_sweep(r: dict[str, Any], action: str) -> None:
    if r.get("kind") != "sweep":
        raise CLIError(f"{r['id']} is a {r.get('kind') or 'job'}, not a sweep; use gpuplat runs {action}")


def sweep_lines(r: dict[str, Any]) -> list[str]:
    """A sweep as `gpuplat sweeps show` prints it: where its children are, its best, its history."""
    matrix = r.get("matrix") or {}
    lines = record_lines(r)
    params = ", ".join(matrix.get("params") or {}) or f"{len(matrix.get('values') or [])} given param sets"
    lines.append(f"matrix: {matrix.get('kind')} over {params}")
    lines.append(children_text(r))  # "6 children: 4 succeeded, 2 running"
    lines.append(
        concurrency_text(r)
        + (f", max_failures {matrix['max_failures']}" if matrix.get("max_failures") is not None else "")
    )
    lines.append(best_text(r) or "best: none yet")
    lines.append("timeline:")
    lines += timeline_lines(r)
    return lines


def session_row(r: dict[str, Any]) -> tuple[Any, ...]:
    """One session as a table row: where it is, its kernel, its GPUs and its idle clock."""
    sess = r.get("session") or {}
    preset = ",".join(r.get("presets") or []) or "-"
    return (
        r["id"],
        r["project"],
        f"{preset}/{r['queue']}",
        f"{r['status']}/{sess.get('kernel', '-')}",
        ",".join(map(str, r["devices"])),
        sess.get("notebook") or "",
        idle_text(sess),
    )


def idle_text(sess: dict[str, Any]) -> str:
    """`busy`, or how long it has been idle of the preset's limit (`12m/60m`), naming a signal other than
    the kernel's (`12m/60m gpu`); the server's idle clock (`idle_for_seconds`), not recomputed here."""
    idle_for = sess.get("idle_for_seconds")
    if idle_for is None:
        return "busy" if sess.get("busy") else ""
    limit = sess.get("idle_seconds")
    idle = duration(idle_for) + (f"/{duration(limit)}" if limit else "")
    judged = sess.get("idle_judged_by") or "kernel"
    return idle if judged == "kernel" else f"{idle} {judged}"


def session_lines(c: Client, r: dict[str, Any]) -> list[str]:
    """A lease as `gpuplat sessions start` prints it: where it waits and why, or its devices."""
    sess = r.get("session") or {}
    lines = [f"{r['id']}  {r['status']}  queue {r['queue']}  notebook {sess.get('notebook') or '-'}"]
    if r["status"] in ("queued", "dispatched", "starting") and not r["devices"]:
        ex = c.explain(r["id"])
        if ex["status"] in ("queued", "dispatched", "starting"):
            lines.append(f"waiting: {ex['wait_line']}")
        else:  # admitted between the submit and this look
            r = c.get(r["id"])
            lines.append(f"{r['status']}: " + (("devices " + ",".join(map(str, r["devices"]))) if r["devices"] else ""))
    elif r["devices"]:
        lines.append("devices: " + ",".join(map(str, r["devices"])))
    lines.append("open the notebook in JupyterLab: its kernel runs in this lease")
    return lines


def cmd_sessions(args: argparse.Namespace) -> int:
    c = connect(args)
    if args.action == "list":
        sessions = c.sessions()
        headers = ("ID", "PROJECT", "PRESET/QUEUE", "STATUS/KERNEL", "DEVICES", "NOTEBOOK", "IDLE")
        emit(args, {"sessions": sessions}, table([session_row(r) for r in sessions], headers))
        return 0
    if args.action == "start":
        if args.run_id:
            raise CLIError("gpuplat sessions start takes no run id (use --notebook to name the notebook)")
        # A relative --notebook is where you are, as for any file argument; Jupyter's paths are the root's.
        notebook = os.path.abspath(args.notebook) if args.notebook else None
        r = c.start_session(args.project, args.preset, notebook)
        emit(args, r, "\n".join(session_lines(c, r)))
        return 0
    if not args.run_id:
        raise CLIError(f"gpuplat sessions {args.action} needs a session id (gpuplat sessions list)")
    r = c.get(args.run_id)
    if r.get("kind") != "session":
        raise CLIError(f"{args.run_id} is a {r.get('kind') or 'job'}, not a session; use gpuplat runs {args.action}")
    r = c.stop(args.run_id) if args.action == "stop" else c.keepalive(args.run_id)
    emit(args, r, f"{r['id']}  {r['status']}  {r['message']}")
    return 0
