"""`gpuplat`: the command line for people (tables) and scripts (`--json`).

It talks to a running Jupyter server with the extension: `--url/--token`, else
GPUPLAT_URL/GPUPLAT_TOKEN, else the servers listed in Jupyter's runtime files.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import shutil
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .client import Client
from .core.errors import GpuPlatError
from .explaining import explanation_text
from .sweeping import best_text, children_text, concurrency_text, done_count, make_matrix, params_text

EXAMPLE_CONFIG = Path(__file__).with_name("platform.example.yaml")


class CLIError(Exception):
    pass


# ---- connection -------------------------------------------------------------
def find_server(url: str | None, token: str | None) -> Client:
    return Client(url, token)


# ---- output -----------------------------------------------------------------
def table(rows: Sequence[Sequence[Any]], headers: Sequence[str]) -> str:
    cells = [[("" if c is None else str(c)) for c in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h) for i, h in enumerate(headers)]
    line = lambda r: "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=False)).rstrip()  # noqa: E731
    return "\n".join([line(list(headers)), *(line(r) for r in cells)])


def ago(ts: float | None) -> str:
    if ts is None:
        return ""
    return duration(time.time() - ts)


def duration(seconds: float) -> str:
    s = max(0.0, seconds)
    return f"{s:.0f}s" if s < 120 else f"{s / 60:.0f}m" if s < 7200 else f"{s / 3600:.1f}h"


def emit(args: argparse.Namespace, data: Any, human: str) -> None:
    print(json.dumps(data, indent=2, default=str) if args.json else human)


# ---- commands ---------------------------------------------------------------
def cmd_submit(args: argparse.Namespace) -> int:
    c = find_server(args.url, args.token)
    from . import polyaxon  # -f FILE.yaml is a polyaxonfile, -f alone follows: docs/polyaxon.md

    polyaxonfile, args.follow, command = polyaxon.split_follow(args.follow, list(args.command))
    if command and command[0] == "--":
        command = command[1:]
    if polyaxonfile:
        sweep_opts = (args.num_runs, args.seed, args.concurrency, args.max_failures, args.objective)
        if command:
            raise CLIError(f"options go before -f {polyaxonfile}, and no command with it: {' '.join(command)}")
        if args.grid or args.random or args.mapping or any(v is not None for v in sweep_opts):
            raise CLIError(f"-f {polyaxonfile} says what to run: give no sweep options with it")
        body, notes = polyaxon.submit_body(polyaxonfile, args.project)
        print(polyaxon.report_text(notes), file=sys.stderr)  # the per-field report; stdout stays the run
        args.follow = False
    elif not command:
        raise CLIError("give the command to run, e.g. gpuplat submit -p team-a -- python train.py")
    else:
        body = {"project": args.project, "command": command[0] if len(command) == 1 else command}
    if args.name:
        body["name"] = args.name
    if args.preset:
        body["presets"] = [*body.get("presets", []), *args.preset]
    if args.queue:
        body["queue"] = args.queue
    if args.gpus is not None:
        body["resources"] = {**body.get("resources", {}), "gpu": args.gpus}
    if args.env:
        env = {e["name"]: e["value"] for e in body.get("env", [])}
        body["env"] = env | dict(kv.split("=", 1) for kv in args.env)
    sweep_options = (args.num_runs, args.seed, args.concurrency, args.max_failures, args.objective)
    if args.grid or args.random or args.mapping or any(v is not None for v in sweep_options):
        body["matrix"] = make_matrix(  # a malformed option is refused here, with what is allowed
            grid=args.grid or (),
            random=args.random or (),
            mapping=args.mapping,
            num_runs=args.num_runs,
            seed=args.seed,
            concurrency=args.concurrency,
            max_failures=args.max_failures,
            objective=args.objective,
        )
        if args.follow:
            raise CLIError("--follow follows one run; follow a sweep with gpuplat sweeps show ID")
    if args.working_dir or not (args.no_working_dir or "working_dir" in body):  # -C beats a polyaxonfile's
        # The run starts where you are, so relative paths (train.py, data.txt) work; it must be under the
        # Jupyter root. Its outputs still go to the run's artifact directory.
        body["working_dir"] = os.path.abspath(args.working_dir or os.getcwd())
    if args.preview:
        p = c.request("POST", "runs/preview", body)
        human = (
            json.dumps(p["resolved"], indent=2)
            + "\n\nset by:\n"
            + "\n".join(f"  {k}: {v}" for k, v in p["provenance"].items())
        )
        v = p["verdict"]
        human += "\n\nverdict: " + ("allowed" if v["allowed"] else "refused")
        human += "".join(f"\n  {x['code']}: {x['message']} ({x['hint']})" for x in v["violations"])
        emit(args, p, human)
        return 0 if v["allowed"] else 1
    run = c.request("POST", "runs", body)
    if run.get("kind") == "sweep":
        emit(args, run, f"{run['id']}  {run['status']}  sweep of {children_text(run)}  {concurrency_text(run)}")
        return 0
    emit(args, run, f"{run['id']}  {run['status']}  queue {run['queue']}")
    if args.follow:
        return follow_logs(c, run["id"])
    return 0


def follow_logs(c: Client, run_id: str, follow: bool = True) -> int:
    status = ""
    for event, data, _ in c.stream(f"runs/{run_id}/logs", follow="true" if follow else "false"):
        if event == "end":
            status = json.loads(data)["status"]
        elif event != "keep-alive":
            print(data, flush=True)
    return 0 if status in ("succeeded", "") or not follow else 1


def record_lines(r: dict[str, Any]) -> list[str]:
    """The head of `runs show` and `sweeps show`: who, where, and where it stands."""
    keys = ("id", "name", "project", "user", "queue", "status", "reason", "message")
    return [f"{k}: {'-' if r.get(k) is None else r[k]}" for k in keys]


def cmd_runs(args: argparse.Namespace) -> int:
    c = find_server(args.url, args.token)
    action = args.action
    if action == "list":
        data = c.request(
            "GET",
            "runs",
            project=args.project,
            status=args.status,
            queue=args.queue,
            parent=args.parent,
            limit=args.limit,
        )
        rows = [
            (
                r["id"],
                r["name"],
                r["project"],
                r["user"],
                r["queue"],
                r["status"],
                r["resources"]["gpu"],
                ",".join(map(str, r["devices"])),
                ago(r["created_at"]),
                r["message"][:60],
            )
            for r in data["runs"]
        ]
        headers = ("ID", "NAME", "PROJECT", "USER", "QUEUE", "STATUS", "GPU", "DEVICES", "AGE", "MESSAGE")
        emit(args, data, table(rows, headers))
        return 0
    if not args.run_id:
        raise CLIError(f"gpuplat runs {action} needs a run id")
    if action == "show":
        r = c.request("GET", f"runs/{args.run_id}")
        lines = record_lines(r)
        lines.append("clocks: " + ", ".join(f"{k} {v}" for k, v in r["clocks"].items()))
        lines += code_lines(r)
        lines.append("timeline:")
        lines += [
            f"  {time.strftime('%H:%M:%S', time.localtime(e['at']))}  {e['status']:<10} "
            f"{e['reason']:<18} {e['message']}"
            for e in r["timeline"]
        ]
        emit(args, r, "\n".join(lines))
    elif action == "explain":
        e = c.request("GET", f"runs/{args.run_id}/explain")
        emit(args, e, explanation_text(e))
    elif action == "logs":
        return follow_logs(c, args.run_id, args.follow)
    elif action == "stop":
        r = c.request("POST", f"runs/{args.run_id}/stop")
        emit(args, r, f"{r['id']}  {r['status']}")
    return 0


def cmd_sweeps(args: argparse.Namespace) -> int:
    c = find_server(args.url, args.token)
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
        kids = [(k["id"], k["status"], params_text(k.get("params")), k["message"][:60]) for k in children]
        cut = len(kids) == args.limit and r["children"]["total"] > len(kids)
        more = f" (the first {len(kids)}: --limit N for more)" if cut else ""
        human = [*sweep_lines(r), f"children{more}:", table(kids, ("ID", "STATUS", "PARAMS", "MESSAGE"))]
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
    lines.append(f"children: {children_text(r)}")
    lines.append(
        concurrency_text(r)
        + (f", max_failures {matrix['max_failures']}" if matrix.get("max_failures") is not None else "")
    )
    lines.append(best_text(r) or "best: none yet")
    lines.append("timeline:")
    lines += [
        f"  {time.strftime('%H:%M:%S', time.localtime(e['at']))}  {e['status']:<10} {e['reason']:<18} {e['message']}"
        for e in r.get("timeline") or []
    ]
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
    """`busy`, or how long the kernel has been idle of the preset's limit (`12m/60m`)."""
    if sess.get("busy"):
        return "busy"
    limit = sess.get("idle_seconds")
    if sess.get("last_activity") is None:
        return ""
    idle = ago(sess["last_activity"])
    return f"{idle}/{duration(limit)}" if limit else idle


def session_lines(c: Client, r: dict[str, Any]) -> list[str]:
    """A lease as `gpuplat sessions start` prints it: where it waits and why, or its devices."""
    sess = r.get("session") or {}
    lines = [f"{r['id']}  {r['status']}  queue {r['queue']}  notebook {sess.get('notebook') or '-'}"]
    if r["status"] in ("queued", "dispatched", "starting") and not r["devices"]:
        ex = c.explain(r["id"])
        if ex["status"] in ("queued", "dispatched", "starting"):
            pos = f"position {ex['position']} in {ex['queue']}: " if ex.get("position") else ""
            lines.append(f"waiting: {pos}{ex['message']} [{ex['reason']}]")
        else:  # admitted between the submit and this look
            r = c.get(r["id"])
            lines.append(f"{r['status']}: " + (("devices " + ",".join(map(str, r["devices"]))) if r["devices"] else ""))
    elif r["devices"]:
        lines.append("devices: " + ",".join(map(str, r["devices"])))
    lines.append("open the notebook in JupyterLab: its kernel runs in this lease")
    return lines


def cmd_sessions(args: argparse.Namespace) -> int:
    c = find_server(args.url, args.token)
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


def cmd_queues(args: argparse.Namespace) -> int:
    c = find_server(args.url, args.token)
    data = c.request("GET", "queues")
    rows = []
    for q in data["queues"]:
        conc = f"{q['usage']['runs']}/{q['concurrency'] if q['concurrency'] is not None else '-'}"
        gpu = f"{q['usage']['gpu']}/{q['quota']['gpu'] if q['quota']['gpu'] is not None else '-'}"
        wait = (q["head_wait"] or {}).get("message", "")
        rows.append((q["name"], q["priority"], conc, gpu, q["pending"], "yes" if q["paused"] else "", wait[:70]))
    emit(args, data, table(rows, ("QUEUE", "PRIORITY", "RUNS", "GPUS", "PENDING", "PAUSED", "HEAD WAITS FOR")))
    return 0


def cmd_presets(args: argparse.Namespace) -> int:
    c = find_server(args.url, args.token)
    data = c.request("GET", "presets", project=args.project)
    rows = [
        (p["name"], p["kind"] or "", p["queue"] or "", json.dumps(p.get("resources") or {}), p["description"])
        for p in data["presets"]
    ]
    emit(args, data, table(rows, ("PRESET", "KIND", "QUEUE", "RESOURCES", "DESCRIPTION")))
    return 0


def cmd_config(args: argparse.Namespace) -> int:
    from .core.config import load_config_text
    from .core.errors import ConfigErrors

    text = Path(args.file).read_text()
    try:
        cfg = load_config_text(text)
    except ConfigErrors as exc:
        print(f"{args.file}: refused, nothing applied", file=sys.stderr)
        for e in exc.errors:
            print(f"  {e}", file=sys.stderr)
        return 2
    if args.action == "validate":
        print(
            f"{args.file}: valid ({len(cfg.queues)} queues, {len(cfg.presets)} presets, {len(cfg.projects)} projects)"
        )
        return 0
    c = find_server(args.url, args.token)
    import yaml

    r = c.request("PUT", "config", {"config": yaml.safe_load(text)}, dry_run="true" if args.dry_run else None)
    verb = "would apply" if args.dry_run else "applied"
    emit(args, r, f"{args.file}: {verb} as config version {r['version']}")
    return 0


def code_lines(run: dict[str, Any]) -> list[str]:
    """Where the run ran and what code: the snapshot kept with it, the git commit."""
    lines = [f"working_dir: {run.get('working_dir') or '(the run artifact directory)'}"]
    code = run.get("code") or {}
    if code.get("snapshot"):
        lines.append(f"code: {code['snapshot']} (an output of the run)")
    git = code.get("git") or {}
    if git.get("commit"):
        dirty = f" + uncommitted changes ({git['diff_path']})" if git.get("dirty") else ""
        lines.append(f"git: {git['commit']}{dirty}")
    return lines


def cmd_lab(args: argparse.Namespace, extra: list[str]) -> int:
    """Start JupyterLab with the platform: example config, declared GPUs if none are found."""
    from .executors.gpus import detect_gpus

    config = args.config or str(EXAMPLE_CONFIG)
    argv = ["jupyter", "lab", f"--GpuPlat.config_file={config}", f"--GpuPlat.default_user={args.user}"]
    gpus = args.gpus
    if gpus is None and not detect_gpus():
        gpus = 4
        print("gpuplat: no GPUs found by nvidia-smi; declaring 4 GPUs (labelled declared)", file=sys.stderr)
    if gpus is not None:
        argv.append(f"--LocalExecutor.gpus={gpus}")
    if os.geteuid() == 0 and "--allow-root" not in extra:
        argv.append("--allow-root")
    exe = shutil.which("jupyter")
    if exe is None:
        raise CLIError("jupyter is not on PATH; install with pip install jupyter-gpuplat")
    print("gpuplat: " + " ".join(argv + extra), file=sys.stderr)
    os.execv(exe, argv + extra)
    return 0  # pragma: no cover


def _connections_of(path: str | None) -> list[dict[str, Any]]:
    """The connections of a platform config file, as references (what the cluster check verifies)."""
    if not path:
        return []
    from .core.config import load_config_text
    from .core.errors import ConfigErrors

    try:
        cfg = load_config_text(Path(path).read_text(encoding="utf-8"))
    except (OSError, ConfigErrors) as exc:
        raise CLIError(f"{path}: {exc}") from None
    return [c.reference() for c in cfg.connections]


def cmd_cluster(args: argparse.Namespace) -> int:
    """Check a Kubernetes cluster directly (not through the server): exit 1 when it is not fit."""
    try:
        from .executors.kubernetes.check import check_cluster
        from .executors.kubernetes.executor import KubernetesExecutor, api_client
    except ImportError as exc:
        raise CLIError(
            f"the Kubernetes client is not installed: pip install 'jupyter-gpuplat[kubernetes]' ({exc})"
        ) from None
    from .executors.base import ExecutorError

    defaults = KubernetesExecutor.class_traits()
    namespace = args.namespace or defaults["namespace"].default_value
    try:
        api = api_client(args.kubeconfig or "", args.context or "", pool_size=4)
    except ExecutorError as exc:
        raise CLIError(str(exc)) from None
    try:
        report = check_cluster(
            api,
            namespace,
            artifacts_claim=args.artifacts_claim or "",
            gpu_resource=args.gpu_resource or defaults["gpu_resource"].default_value,
            gpu_type_label=args.gpu_type_label or defaults["gpu_type_label"].default_value,
            connections=_connections_of(args.config),
        )
    finally:
        api.close()
    emit(args, report.to_dict(), report.to_text())
    return 0 if report.fit else 1


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="gpuplat", description="Shared GPU queues from the command line.")
    p.add_argument("--url", help="Jupyter server URL (default: GPUPLAT_URL or the running server)")
    p.add_argument("--token", help="API token (default: GPUPLAT_TOKEN or the server's own)")
    p.add_argument("--json", action="store_true", help="print JSON for scripts")
    sub = p.add_subparsers(dest="cmd", required=True)
    for name, (_, about) in HANDED_OVER.items():
        sub.add_parser(name, help=about)

    lab = sub.add_parser("lab", help="start JupyterLab with the platform (extra args go to jupyter lab)")
    lab.add_argument("--config", help="platform config (default: the bundled example)")
    lab.add_argument("--gpus", type=int, help="declare N GPUs instead of asking nvidia-smi")
    lab.add_argument("--user", default="alice", help="platform user of the server's owner (default: alice)")

    s = sub.add_parser("submit", help="submit a run")
    s.add_argument("-p", "--project", required=True)
    s.add_argument("--preset", action="append", help="preset to apply (repeat, in order)")
    s.add_argument("-q", "--queue")
    s.add_argument("--gpus", type=int)
    s.add_argument("-n", "--name")
    s.add_argument("-e", "--env", action="append", help="KEY=VALUE")
    s.add_argument(
        "-f",
        "--follow",
        action="store_true",
        help="follow the logs until the run ends; -f FILE.yaml|.yml (an existing file; other options before it): "
        "submit that Polyaxon operation/component instead (docs/polyaxon.md)",
    )
    s.add_argument("--preview", action="store_true", help="show the resolved spec and verdict; submit nothing")
    s.add_argument(
        "-C",
        "--working-dir",
        help="directory the run starts in (default: the current directory); it must be under the Jupyter root",
    )
    s.add_argument(
        "--no-working-dir",
        action="store_true",
        help="start the run in its artifact directory instead of the current directory",
    )
    sg = s.add_argument_group("sweep", "submit a sweep: the command once per params (tracking.params())")
    sg.add_argument("--grid", action="append", metavar="PARAM", help="grid param, e.g. lr=1e-3,3e-4 (repeat per param)")
    sg.add_argument(
        "--random", action="append", metavar="PARAM", help="random param, e.g. lr=loguniform:1e-5:1e-2 (repeat)"
    )
    sg.add_argument("--mapping", metavar="FILE.json", help="a JSON list of param objects, one child each")
    sg.add_argument("--num-runs", type=int, help="random: how many children (grid: at most this many)")
    sg.add_argument("--seed", type=int, help="random: the seed of the draws")
    sg.add_argument("--concurrency", type=int, help="at most this many children dispatched at once (default 1)")
    sg.add_argument("--max-failures", type=int, help="fail the sweep when more children than this fail")
    sg.add_argument("--objective", metavar="METRIC[:maximize]", help="the metric the best child is chosen on")
    s.add_argument("command", nargs=argparse.REMAINDER)

    r = sub.add_parser("runs", help="list, show, explain, follow logs of, or stop runs")
    r.add_argument("action", choices=["list", "show", "explain", "logs", "stop"])
    r.add_argument("run_id", nargs="?")
    r.add_argument("--project")
    r.add_argument("--status")
    r.add_argument("--queue")
    r.add_argument("--parent", help="list: the children of this sweep")
    r.add_argument("--limit", type=int, default=50)
    r.add_argument("-f", "--follow", action="store_true")

    se = sub.add_parser(
        "sessions", help="start, list, keep or stop your GPU sessions (notebook kernels on a GPU lease)"
    )
    se.add_argument("action", choices=["list", "start", "stop", "keep"])
    se.add_argument("run_id", nargs="?", help="the session (stop, keep)")
    se.add_argument("-p", "--project", help="start: project (default: GPUPLAT_PROJECT or your first project)")
    se.add_argument("--preset", help="start: session preset (default: the project's first of kind session)")
    se.add_argument(
        "--notebook",
        help="start: the notebook whose kernel runs in the lease (created when missing; "
        "default: a new gpu-session-<time>.ipynb here)",
    )

    sw = sub.add_parser("sweeps", help="list, show, change the concurrency of, pause, resume or stop sweeps")
    sw.add_argument("action", choices=["list", "show", "update", "stop"])
    sw.add_argument("run_id", nargs="?", help="the sweep (show, update, stop)")
    sw.add_argument("--project")
    sw.add_argument("--status", help="list: sweeps of this status; show: children of this status")
    sw.add_argument("--limit", type=int, default=50, help="list: sweeps; show: children (default 50)")
    sw.add_argument("--concurrency", type=int, help="update: at most N children dispatched at once")
    sw.add_argument("--pause", action="store_true", help="update: dispatch no more children")
    sw.add_argument("--resume", action="store_true", help="update: dispatch children again")

    sub.add_parser("queues", help="queues with live usage")
    pr = sub.add_parser("presets", help="presets you may use")
    pr.add_argument("--project")

    k = sub.add_parser("cluster", help="check that a Kubernetes cluster can run the platform's GPU Jobs")
    k.add_argument("action", choices=["check"])
    k.add_argument("--kubeconfig", help="kubeconfig file (default: in-cluster config, else ~/.kube/config)")
    k.add_argument("--context", help="kubeconfig context (default: the current one)")
    k.add_argument("-n", "--namespace", help="the platform's namespace (default: gpuplat)")
    k.add_argument("--artifacts-claim", help="the artifact PersistentVolumeClaim to check (e.g. gpuplat-artifacts)")
    k.add_argument("--config", help="platform config whose connections' PVCs and Secrets to check")
    k.add_argument("--gpu-resource", help="the GPU extended resource (default: nvidia.com/gpu)")
    k.add_argument("--gpu-type-label", help="node label naming the GPU type (default: nvidia.com/gpu.product)")

    c = sub.add_parser("config", help="validate or apply a platform config")
    c.add_argument("action", choices=["validate", "apply"])
    c.add_argument("file", nargs="?")
    c.add_argument("-f", "--file", dest="file_opt")
    c.add_argument("--dry-run", action="store_true")
    return p


# Commands with parsers of their own, in their own modules: `gpuplat <cmd> --help` is theirs.
HANDED_OVER = {
    "server": ("jupyter_gpuplat.service.server", "run the team-mode control plane (PostgreSQL; --help-all)"),
    "db": ("jupyter_gpuplat.store.dbcli", "the database: upgrade (under a lock), copy (SQLite to PostgreSQL)"),
    "report": ("jupyter_gpuplat.report", "observed queue waits, utilisation, goodput, refusals (table, csv, html)"),
    "whatif": ("jupyter_gpuplat.whatif_cli", "replay a period's arrivals under changed queue limits"),
    "rollout-check": ("jupyter_gpuplat.rollout", "submit representative workloads and check limits, access, outputs"),
    "import": ("jupyter_gpuplat.polyaxon", "import Polyaxon presets (gpuplat import polyaxon FILE...)"),
}


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # `gpuplat [--url U] [--token T] [--json] <cmd> ...`: the global options go along, after the command.
    at = 0
    while at < len(argv) and argv[at] in ("--url", "--token", "--json"):
        at += 1 if argv[at] == "--json" else 2
    if at < len(argv) and argv[at] in HANDED_OVER:
        module = importlib.import_module(HANDED_OVER[argv[at]][0])
        return int(module.main(argv[:at] + argv[at + 1 :]) or 0)
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    try:
        if args.cmd == "lab":
            return cmd_lab(args, extra)
        if extra:
            parser.error(f"unrecognized arguments: {' '.join(extra)}")
        if args.cmd == "config":
            args.file = args.file_opt or args.file
            if not args.file:
                parser.error("config needs a file: gpuplat config validate FILE / gpuplat config apply -f FILE")
        handler = {
            "submit": cmd_submit,
            "runs": cmd_runs,
            "sessions": cmd_sessions,
            "sweeps": cmd_sweeps,
            "queues": cmd_queues,
            "presets": cmd_presets,
            "config": cmd_config,
            "cluster": cmd_cluster,
        }[args.cmd]
        return handler(args)
    except CLIError as exc:
        print(f"gpuplat: {exc}", file=sys.stderr)
        return 1
    except GpuPlatError as exc:  # the service's refusals (GpuPlatAPIError) and the options' own
        hint = f"\n  hint: {exc.hint}" if exc.hint else ""
        print(f"gpuplat: {exc.message}{hint}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
