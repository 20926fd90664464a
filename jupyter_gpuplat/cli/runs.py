"""`gpuplat submit` and `gpuplat runs …` (list, show, explain, logs, stop, resubmit)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

from ..client.explaining import explanation_text, start_cell, start_text
from ..client.rest import Client
from ..client.runedits import parse_params
from ..client.sweeping import children_text, concurrency_text, make_matrix
from ..core.reasons import Reason
from .base import CLIError, cli_words, connect, emit
from .tables import ago, spec_rows, table

PROJECT_HELP = "project (default: GPUPLAT_PROJECT, else your first project where you may submit, as in the magics)"


def add_submit(sub: Any, parents: list[argparse.ArgumentParser]) -> None:
    s = sub.add_parser(
        "submit",
        parents=parents,
        help="submit a run (options first, then the command: gpuplat submit --preset single-gpu -- python train.py)",
    )
    s.add_argument("-p", "--project", help=PROJECT_HELP)
    s.add_argument("--preset", action="append", help="preset to apply (repeat for several, applied in order)")
    s.add_argument("-q", "--queue", help="queue (default: from the presets, else the project's default queue)")
    # `--gpu` spelled out: once --gpu-type came, argparse found the abbreviation ambiguous
    s.add_argument("--gpus", "--gpu", type=int, help="number of GPUs (overrides the presets' resources.gpu)")
    s.add_argument(
        "--gpu-type",
        help="the flavor (kind of GPU) to wait for, where the queue offers flavors, or 'any' (placement.gpu_type)",
    )
    s.add_argument("-n", "--name", help="the run's name (shown in lists and Compare legends)")
    s.add_argument(
        "--param",
        action="append",
        metavar="KEY=VALUE",
        help="a param the run reads with tracking.params() (repeat); VALUE as JSON if it parses (1, 0.1, true), "
        "else text",
    )
    s.add_argument("-e", "--env", action="append", metavar="KEY=VALUE", help="an environment variable (repeat)")
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
    s.add_argument(
        "command",
        nargs=argparse.REMAINDER,
        help="what to run, after the options (and after --): an argv, or one shell string",
    )


def params_of(words: list[str] | None) -> dict[str, Any]:
    try:
        return parse_params(words)
    except ValueError as exc:
        raise CLIError(f"{exc} (e.g. --param lr=0.1)") from None


def env_of(words: list[str]) -> dict[str, str]:
    bad = [w for w in words if "=" not in w or w.startswith("=")]
    if bad:
        raise CLIError(f"--env expects KEY=VALUE, got {bad[0]!r}")
    return dict(w.split("=", 1) for w in words)


def cmd_submit(args: argparse.Namespace) -> int:
    c = connect(args)
    from . import polyaxon  # -f FILE.yaml is a polyaxonfile, -f alone follows: docs/polyaxon.md

    polyaxonfile, args.follow, command = polyaxon.split_follow(args.follow, list(args.command))
    if command and command[0] == "--":
        command = command[1:]
    params = params_of(args.param)
    if polyaxonfile:
        sweep_opts = (args.num_runs, args.seed, args.concurrency, args.max_failures, args.objective)
        if command:
            raise CLIError(f"options go before -f {polyaxonfile}, and no command with it: {' '.join(command)}")
        if args.grid or args.random or args.mapping or any(v is not None for v in sweep_opts):
            raise CLIError(f"-f {polyaxonfile} says what to run: give no sweep options with it")
        body, notes = polyaxon.submit_body(polyaxonfile, args.project or c.default_project())
        print(polyaxon.report_text(notes), file=sys.stderr)  # the per-field report; stdout stays the run
        args.follow = False
    elif not command:
        raise CLIError("give the command to run, e.g. gpuplat submit --preset single-gpu -- python train.py")
    else:
        body = {"command": command[0] if len(command) == 1 else command}
    if args.name:
        body["name"] = args.name
    if args.preset:
        body["presets"] = [*body.get("presets", []), *args.preset]
    if args.queue:
        body["queue"] = args.queue
    if args.gpus is not None:
        body["resources"] = {**body.get("resources", {}), "gpu": args.gpus}
    if args.gpu_type:
        body["placement"] = {**body.get("placement", {}), "gpu_type": args.gpu_type}
    if params:
        body["params"] = {**body.get("params", {}), **params}
    if args.env:
        env = {e["name"]: e["value"] for e in body.get("env", [])}
        body["env"] = env | env_of(args.env)
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
    # Last, after every local check: the default project may need a request (GET whoami).
    body["project"] = body.get("project") or args.project or c.default_project()
    return post_run(c, args, body)


def post_run(c: Client, args: argparse.Namespace, body: dict[str, Any]) -> int:
    """Preview or submit `body`, print the verdict or the new run, and follow it with -f."""
    if args.preview:
        p = c.request("POST", "runs/preview", body)
        emit(args, p, preview_text(p))
        return 0 if p["verdict"]["allowed"] else 1
    run = c.request("POST", "runs", body)
    if run.get("kind") == "sweep":
        emit(args, run, f"{run['id']}  {run['status']}  sweep of {children_text(run)}  {concurrency_text(run)}")
        return 0
    emit(args, run, f"{run['id']}  {run['status']}  queue {run['queue']}{waits_text(c, run)}")
    if args.follow:
        return follow_logs(c, run["id"])
    return 0


def preview_text(p: dict[str, Any]) -> str:
    """A preview as the submit dialog shows it: the resolved spec as Field / Value / Set by, then the verdict."""
    v = p["verdict"]
    lines = [table(spec_rows(p["resolved"], p["provenance"]), ("FIELD", "VALUE", "SET BY")), ""]
    lines.append("verdict: " + ("allowed" if v["allowed"] else "refused"))
    lines += [
        f"  {x['code']}: {x['message']}" + (f" (hint: {cli_words(x['hint'])})" if x.get("hint") else "")
        for x in v["violations"]
    ]
    # What the dialog shows under its verdict, from the same answer: cautions, the wait, the start folder.
    lines += [f"  note: {n}" for n in p.get("notes") or []]
    if w := p.get("waits"):
        lines.append(
            f"  will wait: {w['message']} [{w['reason']}]"
            + (f", position {w['position']}" if w.get("position") else "")
        )
    if p.get("flavor"):  # the flavor admission would choose if it were sent now
        lines.append(f"  starts now on flavor: {p['flavor']}")
    lines += start_lines(p)
    if v["allowed"]:
        lines.append(f"  runs in: {p.get('working_dir') or 'the run’s own artifact directory'}")
    return "\n".join(lines)


def start_lines(p: dict[str, Any]) -> list[str]:
    """When the previewed run would start and the ways to start sooner; a refused run: when each variant the
    policy would accept would start. Each estimate as the service words it."""
    lines = [f"  start: {start}"] if (start := start_text(p)) else []
    head = "to start sooner" if p["verdict"]["allowed"] else "the policy would accept"
    alternatives = [a for a in p.get("alternatives") or [] if start_text(a)]
    if alternatives:
        lines.append(f"  {head}:")
        lines += [f"    {cli_words(a['hint'])}: {start_text(a)}" for a in alternatives]
    return lines


def waits_text(c: Client, run: dict[str, Any]) -> str:
    """What a new run waits for, as the service says it ("  waits: queue … 2/2 runs dispatched, position 1")."""
    waiting = run.get("waiting")
    # Admissible: nothing holds it (the next dispatch cycle starts it), so it waits for nothing.
    if not waiting or run.get("status") != "queued" or waiting.get("reason") == Reason.ADMISSIBLE:
        return ""
    ex = c.explain(run["id"])  # its place in the queue; admitted meanwhile, it has none
    pos = f", position {ex['position']}" if ex.get("position") and ex.get("status") == "queued" else ""
    return f"  waits: {waiting['message']} [{waiting['reason']}]{pos}"


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


def timeline_lines(r: dict[str, Any]) -> list[str]:
    return [
        f"  {time.strftime('%H:%M:%S', time.localtime(e['at']))}  {e['status']:<10} {e['reason']:<18} {e['message']}"
        for e in r.get("timeline") or []
    ]


RUN_ACTIONS = ["list", "show", "explain", "logs", "stop", "resubmit"]
# Options of `runs resubmit` only; given with another action they are refused rather than ignored.
RESUBMIT_ONLY = ("param", "preset", "gpus", "name", "env", "preview")


def add_runs(sub: Any, parents: list[argparse.ArgumentParser]) -> None:
    r = sub.add_parser(
        "runs", parents=parents, help="list, show, explain, follow logs of, stop or submit again (resubmit) runs"
    )
    r.add_argument("action", choices=RUN_ACTIONS, help="what to do: " + ", ".join(RUN_ACTIONS))
    r.add_argument("run_id", nargs="?", help="the run (show, explain, logs, stop, resubmit)")
    r.add_argument("--project", help="list: runs of this project; resubmit: submit to this project instead")
    r.add_argument("--status", help="list: runs of this status (comma-separated for several)")
    r.add_argument("--queue", help="list: runs of this queue; resubmit: submit to this queue instead")
    r.add_argument("--parent", help="list: the children of this sweep")
    r.add_argument("--limit", type=int, default=50, help="list: at most this many runs, newest first (default 50)")
    r.add_argument("-f", "--follow", action="store_true", help="logs, resubmit: follow the logs until the run ends")
    e = r.add_argument_group("resubmit", "submit the run again as it was requested, with these changes")
    e.add_argument(
        "--param", action="append", metavar="KEY=VALUE", help="set this param (repeat); the run's others are kept"
    )
    e.add_argument("--preset", action="append", help="use these presets instead of the run's (repeat, in order)")
    e.add_argument("--gpus", type=int, help="number of GPUs")
    e.add_argument("-n", "--name", help="the new run's name (default: the run's)")
    e.add_argument("-e", "--env", action="append", metavar="KEY=VALUE", help="set this environment variable (repeat)")
    e.add_argument("--preview", action="store_true", help="show the resolved spec and verdict; submit nothing")


def cmd_runs(args: argparse.Namespace) -> int:
    c = connect(args)
    action = args.action
    if action != "resubmit":
        given = [f"--{k}" for k in RESUBMIT_ONLY if getattr(args, k) not in (None, False)]
        if given:
            verb = "goes" if len(given) == 1 else "go"
            raise CLIError(f"{', '.join(given)} {verb} with gpuplat runs resubmit ID, not runs {action}")
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
                gpus_text(r),
                ago(r["created_at"]),
                start_cell(r),  # when a waiting run is expected to start (the server's estimate)
                (r.get("waiting") or {}).get("message") or r["message"],  # why it waits, as the sidebar says
            )
            for r in data["runs"]
        ]
        headers = ("ID", "NAME", "PROJECT", "USER", "QUEUE", "STATUS", "GPUS", "AGE", "START", "MESSAGE")
        emit(args, data, table(rows, headers, tail=True))
        return 0
    if not args.run_id:
        raise CLIError(f"gpuplat runs {action} needs a run id (gpuplat runs list)")
    if action == "show":
        r = c.request("GET", f"runs/{args.run_id}")
        lines = record_lines(r)
        lines.append("gpus: " + gpus_text(r))
        if r.get("gpu_usage"):  # what it did with them, as the server words it
            lines.append(f"gpu: {r['gpu_usage']['text']}")
        lines.append("presets: " + (", ".join(r.get("presets_applied") or r.get("presets") or []) or "none"))
        if r.get("waiting"):
            lines.append(f"waiting: {r['waiting']['message']} [{r['waiting']['reason']}]")
        if start := start_text(r):
            lines.append(f"start: {start}")
        # The service's three clocks as it computed them (`ticking` says which goes on; printed once, none moves).
        lines.append("clocks: " + ", ".join(f"{k} {v}" for k, v in r["clocks"].items() if k != "ticking"))
        lines += code_lines(r)
        lines.append("timeline:")
        lines += timeline_lines(r)
        emit(args, r, "\n".join(lines))
    elif action == "explain":
        e = c.request("GET", f"runs/{args.run_id}/explain")
        emit(args, e, explanation_text(e))
    elif action == "logs":
        return follow_logs(c, args.run_id, args.follow)
    elif action == "stop":
        r = c.request("POST", f"runs/{args.run_id}/stop")
        emit(args, r, f"{r['id']}  {r['status']}")
    elif action == "resubmit":
        return post_run(c, args, c.resubmit_body(args.run_id, **resubmit_edits(args)))
    return 0


def gpus_text(r: dict[str, Any]) -> str:
    """How many GPUs, and which once it has them: "2 on 0,1", with its flavor where it has one: "2 h100 on 0,1"."""
    devices = ",".join(map(str, r.get("devices") or []))
    n = f"{r['resources']['gpu']} {r['flavor']}" if r.get("flavor") else str(r["resources"]["gpu"])
    return f"{n} on {devices}" if devices else n


def resubmit_edits(args: argparse.Namespace) -> dict[str, Any]:
    """The changes `runs resubmit` asks for, as Client.resubmit takes them."""
    edits: dict[str, Any] = {}
    params = params_of(args.param)
    if params:
        edits["params"] = params
    if args.env:
        edits["env"] = env_of(args.env)
    for key in ("project", "queue", "name", "gpus"):
        if getattr(args, key) is not None:
            edits[key] = getattr(args, key)
    if args.preset:
        edits["presets"] = args.preset
    return edits
