"""`gpuplat queues`, `presets`, `config`, `cluster` and `lab`: the platform around the runs."""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path
from typing import Any

from ..client.explaining import start_cell
from .base import CLIError, connect, emit
from .tables import resources_text, table

EXAMPLE_CONFIG = Path(__file__).parent.parent / "platform.example.yaml"


def add_lab(sub: Any, parents: list[argparse.ArgumentParser]) -> None:
    lab = sub.add_parser(
        "lab", parents=parents, help="start JupyterLab with the platform (extra args go to jupyter lab)"
    )
    lab.add_argument("--config", help="platform config (default: the bundled example)")
    lab.add_argument("--gpus", type=int, help="declare N GPUs instead of asking nvidia-smi")
    lab.add_argument("--user", default="alice", help="platform user of the server's owner (default: alice)")


def add_platform(sub: Any, parents: list[argparse.ArgumentParser]) -> None:
    sub.add_parser("queues", parents=parents, help="queues with live usage and what each queue's head waits for")
    pr = sub.add_parser("presets", parents=parents, help="presets you may use, with their resources")
    pr.add_argument("--project", help="only the presets this project may use")

    k = sub.add_parser(
        "cluster",
        parents=parents,
        help="check that a Kubernetes cluster can run the platform's GPU Jobs (--local: what this machine enforces)",
    )
    k.add_argument(
        "action",
        choices=["check"],
        help="check: report what the cluster lacks, the runs' namespace's isolation included (exit 1 if unfit)",
    )
    k.add_argument("--kubeconfig", help="kubeconfig file (default: in-cluster config, else ~/.kube/config)")
    k.add_argument("--context", help="kubeconfig context (default: the current one)")
    k.add_argument(
        "-n", "--namespace", help="the runs' namespace, KubernetesExecutor.namespace (default: gpuplat-runs)"
    )
    k.add_argument("--artifacts-claim", help="the artifact PersistentVolumeClaim to check (e.g. gpuplat-artifacts)")
    k.add_argument("--config", help="platform config whose connections' PVCs and Secrets to check")
    k.add_argument("--gpu-resource", help="the GPU extended resource (default: nvidia.com/gpu)")
    k.add_argument("--gpu-type-label", help="node label naming the GPU type (default: nvidia.com/gpu.product)")
    k.add_argument(
        "--local",
        action="store_true",
        help="check this machine for the local executor instead: users, environment, cgroups, GPU device nodes",
    )
    k.add_argument(
        "--run-as",
        choices=["server", "user"],
        default="user",
        help="--local: the LocalExecutor.run_as to check (default: user, runs as their users' accounts)",
    )
    k.add_argument("--python", help="--local: LocalExecutor.python, the runs' interpreter (default: this one)")

    c = sub.add_parser("config", parents=parents, help="validate, plan or apply a platform config")
    c.add_argument(
        "action",
        choices=["validate", "plan", "apply"],
        help="validate: check the file here; plan: what applying it would change, and the runs it affects "
        "(on the server, nothing applied); apply: send it, and print what changed",
    )
    c.add_argument("file", nargs="?", help="the platform config (YAML)")
    c.add_argument("-f", "--file", dest="file_opt", help="the platform config (YAML), as an option")
    c.add_argument("--dry-run", action="store_true", help="apply: print the plan (as `config plan`), apply nothing")


def cmd_queues(args: argparse.Namespace) -> int:
    c = connect(args)
    data = c.request("GET", "queues")
    rows = []
    for q in data["queues"]:
        conc = f"{q['usage']['runs']}/{q['concurrency'] if q['concurrency'] is not None else '-'}"
        gpu = f"{q['usage']['gpu']}/{q['quota']['gpu'] if q['quota']['gpu'] is not None else '-'}"
        if q.get("flavors"):  # per flavor, in the order tried: "h100 2/2, a100 1/4"
            gpu = ", ".join(f"{f['name']} {f['usage']['gpu']}/{f['quota']['gpu']}" for f in q["flavors"])
        wait = (q["head_wait"] or {}).get("message", "")
        pending = q["pending"] if isinstance(q["pending"], int) else len(q["pending"] or [])
        rows.append((q["name"], q["priority"], conc, gpu, pending, "yes" if q["paused"] else "", wait))
    headers = ("QUEUE", "PRIORITY", "RUNS", "GPUS", "PENDING", "PAUSED", "HEAD WAITS FOR")
    emit(args, data, "\n".join([table(rows, headers, tail=True), *pending_lines(data["queues"])]))
    return 0


def pending_lines(queues: list[dict[str, Any]]) -> list[str]:
    """Your runs waiting in each queue, in their order; other projects' only counted."""
    lines: list[str] = []
    for q in queues:
        mine = q.get("pending_runs") or []
        hidden = q.get("pending_hidden") or 0
        if not (mine or hidden):
            continue
        limit = f"max_per_user {q['max_per_user']}" if q.get("max_per_user") else None
        order = ", ".join(x for x in (q.get("ordering"), limit) if x)
        lines.append(f"\npending in {q['name']}" + (f" ({order})" if order else "") + ":")
        rows = [(p["position"], p["id"], p.get("name") or "", p["project"], p["user"], start_cell(p)) for p in mine]
        if rows:
            lines.append(table(rows, ("POSITION", "ID", "NAME", "PROJECT", "USER", "START"), keep=(1,), tail=True))
        if hidden:
            lines.append(f"and {hidden} of other projects")
    return lines


def cmd_presets(args: argparse.Namespace) -> int:
    c = connect(args)
    data = c.request("GET", "presets", project=args.project)
    rows = [
        (p["name"], p["kind"] or "", p["queue"] or "", resources_text(p.get("resources")), p["description"])
        for p in data["presets"]
    ]
    emit(args, data, table(rows, ("PRESET", "KIND", "QUEUE", "RESOURCES", "DESCRIPTION"), tail=True))
    return 0


def cmd_config(args: argparse.Namespace) -> int:
    import yaml

    from ..core.config import load_config_text, named_paths
    from ..core.config_plan import plan_text
    from ..core.errors import ConfigErrors

    try:
        text = Path(args.file).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        print(f"gpuplat config: {args.file}: cannot read it ({getattr(exc, 'strerror', None) or exc})", file=sys.stderr)
        return 2
    try:
        cfg = load_config_text(text)
    except ConfigErrors as exc:
        print(f"{args.file}: refused, nothing applied ({len(exc.errors)} error(s))", file=sys.stderr)
        try:
            doc = yaml.safe_load(text)
        except yaml.YAMLError:
            doc = None
        for e in named_paths(exc.errors, doc):
            print(f"  {e}", file=sys.stderr)
        return 2
    if args.action == "validate":
        counts = {"queues": len(cfg.queues), "presets": len(cfg.presets), "projects": len(cfg.projects)}
        human = f"{args.file}: valid ({', '.join(f'{n} {k}' for k, n in counts.items())})"
        emit(args, {"file": args.file, "valid": True, **counts}, human)
        return 0
    c = connect(args)
    dry = args.dry_run or args.action == "plan"
    r = c.request("PUT", "config", {"config": yaml.safe_load(text)}, dry_run="true" if dry else None)
    plan = r.get("plan") or {}
    if dry:
        head = f"{args.file}: plan against config version {r['version']} (nothing applied)"
    else:
        head = f"{args.file}: applied as config version {r['version']}"
    emit(args, r, "\n".join([head, *(f"  {line}" for line in plan_text(plan))]))
    return 0


def cmd_lab(args: argparse.Namespace, extra: list[str]) -> int:
    """Start JupyterLab with the platform: example config, declared GPUs if none are found."""
    from ..executors.local.gpus import detect_gpus

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
    from ..core.config import load_config_text
    from ..core.errors import ConfigErrors

    try:
        cfg = load_config_text(Path(path).read_text(encoding="utf-8"))
    except (OSError, ConfigErrors) as exc:
        raise CLIError(f"{path}: {exc}") from None
    return [c.reference() for c in cfg.connections]


def cmd_cluster(args: argparse.Namespace) -> int:
    """Check a Kubernetes cluster directly (not through the server): exit 1 when it is not fit."""
    if args.local:
        from ..executors.local.check import check_local, to_text

        local = check_local(args.run_as, args.python)
        emit(args, local, to_text(local))
        return 0 if local["fit"] else 1
    try:
        from ..executors.kubernetes.check import check_cluster
        from ..executors.kubernetes.executor import KubernetesExecutor, api_client
    except ImportError as exc:
        raise CLIError(
            f"the Kubernetes client is not installed: pip install 'jupyter-gpuplat[kubernetes]' ({exc})"
        ) from None
    from ..executors.base import ExecutorError

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
