"""`gpuplat rollout-check`: representative workloads through the normal API, before opening the platform.

    gpuplat rollout-check --all [--expect expect.yaml] [--as-outsider-token T] [--json] [--timeout 60]

Run as a platform admin. Per project it submits a GPU session, a single-GPU training run, a
multi-GPU run and a batch command on the project's presets, checks queue limits, access,
placement, waiting explanations and outputs, runs one single-GPU probe per flavor the project may use
(it must run on that flavor) and one per connection (its volume, Secret, bucket or repository must
reach the run), stops what it started, and prints one line per
check (core/rollout.py judges). Exit 1 on any failure. docs/rollout-check.md.
"""

from __future__ import annotations

import json
import re
import sys
import time
from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import Any

import yaml

from ..client.rest import FINAL, Client, GpuPlatAPIError
from ..client.suggest import SuggestingParser
from ..core import rollout as R
from ..core.connections import ConnectionConfig, allowed_connections
from ..core.rollout import FAIL, PASS, SKIP, Expectations, Result

HOLD = "sleep 600"  # a run that holds its slot until the check stops it
OUTPUT_NAME = "rollout-check/out.txt"
METRIC = "rollout_check"
TRAIN = f"""
import os
from jupyter_gpuplat import tracking
open("out.txt", "w").write("rollout " + os.environ["GPUPLAT_RUN_ID"])
tracking.log_output("out.txt", name={OUTPUT_NAME!r})
tracking.log_metrics(step=0, {METRIC}=1.0)
print("gpus", os.environ.get("CUDA_VISIBLE_DEVICES", ""))
"""
NODE = re.compile(r"Running on node (\S+)")
# A connection's run that waits for one of these will not start by itself: its backing object is missing.
STUCK = {"ConfigError", "VolumeNotBound", "VolumeMountFailed", "Unschedulable", "UntoleratedTaint"}
# Run inside a connection's run: checks that what the connection provides is there, naming only what is missing.
PROBE = """
import json, os, sys
want = json.loads(sys.argv[1])
missing = [f"env {v}" for v in want["env"] if not os.environ.get(v)]
missing += [f"directory {p}" for p in want["dirs"] if not os.path.isdir(os.environ.get(p, "") or "/nonexistent")]
where = os.environ.get(want["files_in"], "")
missing += [f"file {k}" for k in want["files"] if not os.path.isfile(os.path.join(where, k))]
print("rollout connection " + ("missing: " + ", ".join(missing) if missing else "ok"), flush=True)
sys.exit(1 if missing else 0)
"""


class Checker:
    def __init__(self, client: Client, expect: Expectations, outsider: Client | None, timeout: float) -> None:
        self.c, self.expect, self.outsider, self.timeout = client, expect, outsider, timeout
        self.started: list[str] = []
        self.results: list[Result] = []

    # ---- helpers --------------------------------------------------------------
    def add(self, check: str, project: str, result: str, detail: str) -> None:
        self.results.append(Result(check, project, result, detail))

    def submit(self, project: str, **kw: Any) -> dict[str, Any]:
        run = self.c.submit(project, name=kw.pop("name", "rollout-check"), **kw)
        self.started.append(run["id"])
        return run

    def until(self, what: Callable[[], Any]) -> Any:
        """Poll `what` until it is truthy or the check's timeout passes (then its last value)."""
        deadline = time.monotonic() + self.timeout
        while True:
            value = what()
            if value or time.monotonic() > deadline:
                return value
            time.sleep(0.2)  # polling the server's state with a deadline

    def wait(self, run_id: str, statuses: Collection[str], stuck: Collection[str] = ()) -> dict[str, Any]:
        """Until the run reaches one of `statuses`, or waits for a reason in `stuck` (it will not move alone)."""
        run: dict[str, Any] = self.until(
            lambda: ((r := self.c.get(run_id))["status"] in statuses or r.get("reason") in stuck) and r
        )
        return run or self.c.get(run_id)

    def why(self, run_id: str) -> str:
        try:
            ex = self.c.explain(run_id)
        except GpuPlatAPIError as exc:
            return f"explain failed: {exc}"
        raw = (ex.get("details") or {}).get("raw")
        return f"{ex['status']}, {ex['reason']}: {ex['message']}" + (f" (scheduler: {raw})" if raw else "")

    def cleanup(self) -> None:
        """Stop what this check started and wait until it ended: the next check starts on a quiet queue."""
        stopped = []
        for rid in self.started:
            try:
                if self.c.get(rid)["status"] not in FINAL:
                    self.c.stop(rid)
                    stopped.append(rid)
            except GpuPlatAPIError:
                pass
        self.started.clear()
        left = self.until(lambda: not [r for r in stopped if self.c.get(r)["status"] not in FINAL]) if stopped else True
        if not left:
            self.add("cleanup", "-", FAIL, f"run(s) {', '.join(stopped)} did not end after a stop")

    # ---- per project ------------------------------------------------------------
    def project(self, name: str) -> None:
        proj = next((p for p in self.c.projects() if p["name"] == name), None)
        if proj is None:
            self.add("project", name, FAIL, f"no project {name} (or this identity may not see it)")
            return
        presets = {p["name"]: p for p in self.c.presets(name)}
        queues = {q["name"]: q for q in self.c.queues()}
        try:
            self.limits_placement_waiting(proj, presets, queues)
        finally:
            self.cleanup()
        for step in (self.training, self.multi_gpu, self.batch, self.notebook):
            try:
                step(proj, presets)
            except GpuPlatAPIError as exc:
                self.add(step.__name__.replace("_", "-"), name, FAIL, f"refused: {exc}")
            finally:
                self.cleanup()
        try:
            self.flavors(proj, presets, queues)
        finally:
            self.cleanup()
        self.access(proj, presets, queues)
        self.cleanup()
        try:
            self.connections(name)
        finally:
            self.cleanup()

    def gpu_preset(self, presets: dict[str, Any], want: Callable[[int], bool]) -> str | None:
        jobs = [
            (int((p.get("resources") or {}).get("gpu") or 0), n)
            for n, p in presets.items()
            if p.get("kind") == "job"  # GET presets answers the resolved kind (a preset without one is a job)
        ]
        fit = sorted((g, n) for g, n in jobs if want(g))
        return fit[0][1] if fit else None

    def limits_placement_waiting(self, proj: dict[str, Any], presets: dict[str, Any], queues: dict[str, Any]) -> None:
        name = proj["name"]
        qname = proj.get("default_queue") or (proj["usable_queues"] or [None])[0]
        preset = self.gpu_preset(presets, lambda g: g == 1)
        if qname is None or preset is None:
            self.add("queue-limit", name, SKIP, "the project has no default queue or no single-GPU job preset")
            return
        expected = self.expect.queues.get(qname, {})
        if expected:
            self.results.append(R.judge_expected(name, qname, queues[qname], expected))
        limit, why = R.queue_limit(queues[qname], expected, 1)
        if limit is None:
            self.add("queue-limit", name, SKIP, f"queue {qname}: {why}")
            return
        runs = [
            self.submit(name, command=HOLD, presets=[preset], queue=qname, name=f"rollout-hold-{i}")
            for i in range(limit + 1)
        ]
        ids = [r["id"] for r in runs]
        self.until(lambda: sum(self.c.get(i)["status"] == "running" for i in ids) >= limit)
        time.sleep(1.0)  # a broken limit shows as one more start: give the dispatcher a moment to make it
        now = [self.c.get(i) for i in ids]
        running = [r for r in now if r["status"] == "running"]
        waiting = [r for r in now if r["status"] not in ("running", *FINAL)]
        extra = now[-1]  # submitted last: the one over the limit (the queue dispatches in order)
        ex = self.c.explain(extra["id"])
        stuck = self.why(waiting[0]["id"]) if waiting and len(running) < limit else ""
        reasons = R.limit_reasons(queues[qname], expected, 1)
        self.results.append(
            R.judge_limit(name, qname, limit, why, len(running), extra["status"], ex["reason"], stuck, reasons)
        )
        # Waiting states: every run not running has an answer.
        missing = [r["id"] for r in waiting if not self.c.explain(r["id"]).get("message")]
        if not waiting:
            self.add("waiting", name, SKIP, "no run was waiting")
        elif missing:
            self.add("waiting", name, FAIL, f"no explanation for waiting run(s) {', '.join(missing)}")
        else:
            self.add("waiting", name, PASS, f"{extra['id']}: {ex['reason']}: {ex['message']}")
        self.placement(name, preset, running, [r for r in now if r["status"] != "running"])

    def placement(self, name: str, preset: str, running: list[dict[str, Any]], others: list[dict[str, Any]]) -> None:
        if not running:
            self.add(
                "placement",
                name,
                FAIL,
                f"no run on preset {preset} started: {self.why(others[0]['id'])}" if others else "nothing ran",
            )
            return
        nodes = {r["id"]: m.group(1) for r in running if (m := NODE.search(r.get("message") or ""))}
        devices = {r["id"]: r.get("devices") or [] for r in running}
        clash = R.disjoint(devices)
        if clash:
            self.add("placement", name, FAIL, clash)
        elif nodes:
            self.add("placement", name, PASS, "on node(s) " + ", ".join(f"{k}: {v}" for k, v in nodes.items()))
        elif all(devices.values()):
            self.add("placement", name, PASS, "disjoint GPUs " + ", ".join(f"{k}: {v}" for k, v in devices.items()))
        else:
            self.add("placement", name, FAIL, f"running run(s) {', '.join(devices)} report neither devices nor a node")

    def training(self, proj: dict[str, Any], presets: dict[str, Any]) -> None:
        name = proj["name"]
        preset = self.gpu_preset(presets, lambda g: g == 1)
        if preset is None:
            self.add("training", name, SKIP, "no single-GPU job preset")
            return
        run = self.submit(name, command=["python", "-c", TRAIN], presets=[preset], name="rollout-train")
        done = self.wait(run["id"], FINAL)
        if done["status"] != "succeeded":
            self.add("training", name, FAIL, f"run {run['id']} on {preset} is {done['status']}: {self.why(run['id'])}")
            return
        self.add("training", name, PASS, f"run {run['id']} on {preset} succeeded")
        self.outputs(name, run["id"])

    def outputs(self, name: str, rid: str) -> None:
        want = f"outputs/{OUTPUT_NAME}"
        try:
            paths = [o["path"] for o in self.until(lambda: self.c.outputs(rid))]
            if want not in paths:
                raise GpuPlatAPIError(f"the output {want} is not listed (listed: {', '.join(paths) or 'none'})")
            body = self.c.download(rid, want)
            if not (isinstance(body, bytes) and body.decode(errors="replace") == f"rollout {rid}"):
                raise GpuPlatAPIError(f"the output {want} came back with other content: {body[:80]!r}")
            metrics = self.until(lambda: self.c.metrics(rid).get(METRIC))
            if not metrics or metrics.get("values") != [1.0]:
                raise GpuPlatAPIError(f"the metric {METRIC} did not come back (got {metrics!r})")
        except GpuPlatAPIError as exc:
            self.add("outputs", name, FAIL, f"run {rid}: output cannot be retrieved: {exc}")
            return
        self.add("outputs", name, PASS, f"run {rid}: {want} and metric {METRIC} came back")

    def multi_gpu(self, proj: dict[str, Any], presets: dict[str, Any]) -> None:
        name = proj["name"]
        preset = self.gpu_preset(presets, lambda g: g > 1)
        if preset is None:
            self.add("multi-gpu", name, SKIP, "the project has no multi-GPU job preset")
            return
        gpus = int(presets[preset]["resources"]["gpu"])
        run = self.submit(name, command="echo multi", presets=[preset], name="rollout-multi")
        done = self.wait(run["id"], FINAL)
        if done["status"] != "succeeded":
            self.add("multi-gpu", name, FAIL, f"run {run['id']} on {preset} is {done['status']}: {self.why(run['id'])}")
        elif done.get("devices") and len(done["devices"]) != gpus:
            self.add("multi-gpu", name, FAIL, f"run {run['id']} on {preset} got GPUs {done['devices']}, not {gpus}")
        else:
            self.add("multi-gpu", name, PASS, f"run {run['id']} on {preset} ({gpus} GPUs) succeeded")

    def batch(self, proj: dict[str, Any], presets: dict[str, Any]) -> None:
        name = proj["name"]
        run = self.submit(name, command="echo rollout batch ok", resources={"gpu": 0}, name="rollout-batch")
        done = self.wait(run["id"], FINAL)
        log = "".join(self.c.logs(run["id"], follow=False)) if done["status"] in FINAL else ""
        if done["status"] != "succeeded" or "rollout batch ok" not in log:
            self.add(
                "batch", name, FAIL, f"run {run['id']} is {done['status']} (log {log[:80]!r}): {self.why(run['id'])}"
            )
        else:
            self.add("batch", name, PASS, f"run {run['id']} succeeded and its log came back")

    def notebook(self, proj: dict[str, Any], presets: dict[str, Any]) -> None:
        name = proj["name"]
        session = next((n for n, p in presets.items() if p.get("kind") == "session"), None)
        if session is None:
            self.add("notebook", name, SKIP, "the project has no session preset")
            return
        nb = f"rollout-check-{name}-{int(time.time())}.ipynb"
        run = self.c.request("POST", "runs", {"project": name, "presets": [session], "notebook": nb})
        self.started.append(run["id"])
        got = self.wait(run["id"], ("running", *FINAL))
        if got["status"] != "running":
            self.add(
                "notebook", name, FAIL, f"session {run['id']} on {session} is {got['status']}: {self.why(run['id'])}"
            )
        else:
            node = NODE.search(got.get("message") or "")
            where = f"runs on node {node.group(1)}" if node else f"holds GPU(s) {got.get('devices')}"
            self.add("notebook", name, PASS, f"session {run['id']} on {session} {where}")

    def flavors(self, proj: dict[str, Any], presets: dict[str, Any], queues: dict[str, Any]) -> None:
        """One single-GPU probe per flavor the project may use, asking for it: it must run on that flavor."""
        name = proj["name"]
        probes = R.flavor_probes(proj["usable_queues"], proj.get("default_queue"), queues)
        if not probes:
            return  # no queue of the project splits its quota by flavor: nothing to probe
        preset = self.gpu_preset(presets, lambda g: g == 1)
        device_flavor = {d["index"]: d.get("flavor") for d in self.c.request("GET", "capacity")["devices"]}
        labels = self.flavor_labels()
        for probe in probes:
            try:
                self.flavor(name, probe, preset, device_flavor, labels.get(probe.flavor, {}))
            finally:
                self.cleanup()  # one at a time: a probe never waits behind the previous one

    def flavor_labels(self) -> dict[str, dict[str, str]]:
        """Each flavor's node labels (platform config; an admin reads it); empty where it is not readable."""
        try:
            cfg = self.c.request("GET", "config")["config"]
        except GpuPlatAPIError:
            return {}
        return {f["name"]: dict(f.get("node_labels") or {}) for f in cfg.get("flavors") or ()}

    def flavor(
        self,
        name: str,
        probe: R.FlavorProbe,
        preset: str | None,
        device_flavor: dict[int, str | None],
        want_labels: dict[str, str],
    ) -> None:
        check = f"flavor:{probe.flavor}"
        if probe.paused:
            self.add(check, name, SKIP, f"flavor {probe.flavor}: queue {probe.queue}, which offers it, is paused")
            return
        zero = R.judge_flavor_quota(name, probe)
        if zero is not None:
            self.results.append(zero)
            return
        # The project's single-GPU job preset where it has one (what its users submit), asking for the flavor.
        ask: dict[str, Any] = {"presets": [preset]} if preset else {"resources": {"gpu": 1}}
        try:
            run = self.submit(
                name, command=HOLD, queue=probe.queue, placement={"gpu_type": probe.flavor},
                name=f"rollout-flavor-{probe.flavor}", **ask,
            )  # fmt: skip
        except GpuPlatAPIError as exc:
            self.add(
                check, name, FAIL,
                f"flavor {probe.flavor} on queue {probe.queue}: a single-GPU probe was refused ({exc.status}): {exc}",
            )  # fmt: skip
            return
        got = self.wait(run["id"], ("running", *FINAL), stuck=STUCK)
        why = ""
        if got["status"] != "running":
            try:
                why = R.flavor_wait(self.c.explain(run["id"]), probe.flavor)
            except GpuPlatAPIError as exc:
                why = f"explain failed: {exc}"
        # Kubernetes: the running event names the node and its values of the labels the pod selects by.
        events: list[dict[str, Any]] = got.get("timeline") or []
        running: dict[str, Any] = next((e for e in reversed(events) if e["status"] == "running"), {})
        placed = running.get("details") or {}
        node = placed.get("node") or ((m := NODE.search(got.get("message") or "")) and m.group(1)) or None
        wrong, where = R.placed_on(
            probe.flavor, got.get("devices") or [], device_flavor, node, placed.get("node_labels"), want_labels
        )
        self.results.append(R.judge_flavor(name, probe, run["id"], got["status"], got.get("flavor"), wrong, where, why))

    def connections(self, name: str) -> None:
        """Each connection the project may use: a run naming it starts and finds what it provides."""
        try:
            cfg = self.c.request("GET", "config")["config"]
        except GpuPlatAPIError as exc:
            self.add("connections", name, SKIP, f"reading the platform config needs a platform admin ({exc.status})")
            return
        conns = [ConnectionConfig.model_validate(c) for c in cfg.get("connections") or ()]
        usable = allowed_connections(conns, name, bool(cfg.get("restrict_by_default")))
        if not usable:
            self.add("connections", name, SKIP, f"{name} may use no connection")
            return
        for conn in conns:
            if conn.name in usable:
                self.connection(name, conn)

    def connection(self, name: str, conn: ConnectionConfig) -> None:
        check, want = f"connection:{conn.name}", R.connection_probe(conn)
        try:
            run = self.submit(
                name, command=["python", "-c", PROBE, json.dumps(want)], resources={"gpu": 0},
                connections=[conn.name], name=f"rollout-connection-{conn.name}",
            )  # fmt: skip
        except GpuPlatAPIError as exc:
            self.add(check, name, FAIL, f"a run naming connection {conn.name} was refused: {exc}")
            return
        got = self.wait(run["id"], FINAL, stuck=STUCK)
        log = "".join(self.c.logs(run["id"], follow=False)) if got["status"] in FINAL else ""
        self.results.append(R.judge_connection(name, conn.name, run["id"], got["status"], log, self.why(run["id"])))

    def access(self, proj: dict[str, Any], presets: dict[str, Any], queues: dict[str, Any]) -> None:
        name, usable = proj["name"], proj["usable_queues"]
        self.results.append(R.judge_allowed_queues(name, usable, (self.expect.projects.get(name) or {}).get("queues")))
        for check, what, pool, allowed, field in (
            ("access-queue", "queue", queues, usable, "queue"),
            ("access-preset", "preset", self.all_presets(), proj["usable_presets"], "presets"),
        ):
            other = sorted(set(pool) - set(allowed))
            if not other:
                self.add(check, name, SKIP, f"every {what} is allowed in {name}")
                continue
            value: Any = [other[0]] if field == "presets" else other[0]
            try:
                self.submit(name, command="true", resources={"gpu": 0}, **{field: value})
                status, msg = 200, ""
            except GpuPlatAPIError as exc:
                status, msg = exc.status, f"{exc.message} {exc.hint}"
            self.results.append(R.judge_refusal(check, name, what, other[0], status, msg, allowed))
        self.outsider_check(name)

    def all_presets(self) -> list[str]:
        return [p["name"] for p in self.c.presets()]

    def outsider_check(self, name: str) -> None:
        if self.outsider is None:
            self.add("outsider", name, SKIP, "give --as-outsider-token TOKEN of a user in no project to check this")
            return
        run = self.submit(name, command=HOLD, resources={"gpu": 0}, name="rollout-visibility")
        seen = [r["id"] for r in self.outsider.list()]
        try:
            self.outsider.get(run["id"])
            direct = True
        except GpuPlatAPIError:
            direct = False
        if run["id"] in seen or direct:
            self.add(
                "outsider",
                name,
                FAIL,
                f"a non-member sees run {run['id']} of {name} ({'listed' if run['id'] in seen else 'by id'})",
            )
        else:
            self.add("outsider", name, PASS, f"a non-member sees no run of {name} (listed or by id)")


def build_parser() -> SuggestingParser:
    p = SuggestingParser(prog="gpuplat rollout-check", description=__doc__.split("\n")[0])
    p.add_argument("--url")
    p.add_argument("--token")
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    # Not required=True: argparse would refuse a missing --project before naming a mistyped --projcet.
    which = p.add_mutually_exclusive_group()
    which.add_argument("--project", action="append", help="a project to check (repeat)")
    which.add_argument("--all", action="store_true", help="every project")
    p.add_argument("--expect", type=Path, help="YAML: expected queue limits and each project's queues")
    p.add_argument("--as-outsider-token", help="token of a user in none of the projects (visibility check)")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for each step (default 60)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(list(sys.argv[1:] if argv is None else argv))
    if extra:
        parser.unrecognized(extra)
    if not (args.all or args.project):
        parser.error("one of the arguments --project --all is required")
    try:
        expect = Expectations.parse(yaml.safe_load(args.expect.read_text())) if args.expect else Expectations()
    except (OSError, ValueError, yaml.YAMLError) as exc:
        print(f"gpuplat rollout-check: --expect {args.expect}: {exc}", file=sys.stderr)
        return 2
    try:
        client = Client(args.url, args.token)
        outsider = Client(client.url, args.as_outsider_token) if args.as_outsider_token else None
        checker = Checker(client, expect, outsider, max(1.0, min(args.timeout, 3600.0)))
        projects = [p["name"] for p in client.projects()] if args.all else args.project
        for name in projects:
            try:
                checker.project(name)
            finally:
                checker.cleanup()
    except GpuPlatAPIError as exc:
        print(f"gpuplat rollout-check: {exc}", file=sys.stderr)
        return 2
    results = checker.results
    if args.json:
        print(json.dumps(R.as_json(results), indent=2))
    else:
        print(R.table(results))
        for r in results:
            if r.result == FAIL:
                print(r.line(), file=sys.stderr)
    return R.exit_code(results)
