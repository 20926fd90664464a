"""The rollout check's pure part: expectations, verdicts and the report (no I/O).

`gpuplat rollout-check` (jupyter_gpuplat.cli.rollout) does the submitting; what it saw is judged here,
so the verdicts can be tested without a server.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from .connections import ConnectionConfig, env_var, plain_env
from .reasons import Reason

PASS, FAIL, SKIP = "pass", "fail", "skip"

# The checks, in the order they run, and what each one covers.
CHECKS = {
    "notebook": "a GPU session on the project's session preset is admitted, then stopped",
    "training": "a single-GPU run writes an output file and a metric and succeeds",
    "multi-gpu": "a run on the project's largest GPU preset gets that many GPUs and succeeds",
    "batch": "a plain command (a batch script) runs and its log comes back",
    "expected-limits": "each queue limit in --expect is the one the queue is configured with",
    "queue-limit": "one run over the binding concurrency/quota/per-user limit waits, with that limit as its reason",
    "waiting": "every waiting run has an explanation (GET runs/{id}/explain)",
    "placement": "concurrent runs get disjoint GPUs (local) or a node (Kubernetes)",
    "outputs": "the run's output file and metric come back (GET runs/{id}/outputs, metrics)",
    "flavor:NAME": "a single-GPU run asking each flavor the project's queues offer runs on that flavor "
    "(its record's flavor; its devices locally, its node's labels on Kubernetes)",
    "access-queue": "a queue the project may not use is refused with the allowed ones",
    "access-preset": "a preset the project may not use is refused with the allowed ones",
    "allowed-queues": "the project may use no queue beyond the expected ones (--expect)",
    "outsider": "a non-member sees none of the project's runs (--as-outsider-token)",
    "connection:NAME": "a run naming each connection the project may use finds its volume, Secret or env",
}

# Queue-side reasons that mean "a limit of the queue holds this run".
LIMIT_REASONS = {Reason.QUEUE_CONCURRENCY, Reason.QUEUE_QUOTA, Reason.USER_LIMIT}
# The reason each limit of the expectations file waits with.
LIMIT_REASON = {
    "concurrency": Reason.QUEUE_CONCURRENCY,
    "gpu_quota": Reason.QUEUE_QUOTA,
    "max_per_user": Reason.USER_LIMIT,
}


@dataclass
class Result:
    check: str
    project: str
    result: str
    detail: str

    def line(self) -> str:
        return f"{self.result.upper()} {self.check} [{self.project}]: {self.detail}"


@dataclass
class Expectations:
    """What the platform team expects (`--expect FILE`): queue limits and each project's queues.

    queues: {name: {concurrency, gpu_quota, max_per_user}} — the limits the check must see enforced
    (a missing value: the queue's own configured limit). projects: {name: {queues: [...]}} — the only
    queues the project may use; any other usable queue fails `allowed-queues`.
    """

    queues: dict[str, dict[str, int]] = field(default_factory=dict)
    projects: dict[str, dict[str, list[str]]] = field(default_factory=dict)

    @classmethod
    def parse(cls, doc: Any) -> Expectations:
        if doc is None:
            return cls()
        if not isinstance(doc, Mapping):
            raise ValueError("the expectations file must be a mapping with `queues` and/or `projects`")
        unknown = set(doc) - {"queues", "projects"}
        if unknown:
            raise ValueError(
                f"unknown key(s) {', '.join(sorted(unknown))} in the expectations file; allowed: queues, projects"
            )
        queues: dict[str, dict[str, int]] = {}
        for name, limits in (doc.get("queues") or {}).items():
            bad = set(limits or {}) - {"concurrency", "gpu_quota", "max_per_user"}
            if bad:
                raise ValueError(
                    f"queue {name}: unknown limit(s) {', '.join(sorted(bad))}; "
                    "allowed: concurrency, gpu_quota, max_per_user"
                )
            for k, v in (limits or {}).items():
                if not isinstance(v, int) or isinstance(v, bool) or not 0 < v <= 1000:
                    raise ValueError(f"queue {name}: {k} must be a whole number from 1 to 1000, not {v!r}")
            queues[str(name)] = dict(limits or {})
        projects: dict[str, dict[str, list[str]]] = {}
        for name, exp in (doc.get("projects") or {}).items():
            qs = (exp or {}).get("queues")
            if not isinstance(qs, list) or not all(isinstance(q, str) for q in qs):
                raise ValueError(f"project {name}: `queues` must be a list of queue names")
            projects[str(name)] = {"queues": list(qs)}
        return cls(queues, projects)


def configured_limits(queue: Mapping[str, Any]) -> dict[str, int | None]:
    """The queue's limits as `GET queues` answers them, named as in the expectations file."""
    quota = (queue.get("quota") or {}).get("gpu")
    return {
        "concurrency": queue.get("concurrency"),
        "gpu_quota": int(quota) if quota is not None else None,
        "max_per_user": queue.get("max_per_user"),
    }


def _binding(queue: Mapping[str, Any], expected: Mapping[str, int], gpus_each: int) -> dict[str, int]:
    limits = {**{k: v for k, v in configured_limits(queue).items() if v is not None}, **expected}
    return {k: (v // gpus_each if k == "gpu_quota" and gpus_each else v) for k, v in limits.items() if v is not None}


def queue_limit(queue: Mapping[str, Any], expected: Mapping[str, int], gpus_each: int) -> tuple[int | None, str]:
    """How many `gpus_each`-GPU runs of one user the queue should run at once, and which limit says so."""
    runs = _binding(queue, expected, gpus_each)
    if not runs:
        return None, "the queue declares no concurrency, GPU quota or per-user limit"
    name = min(runs, key=lambda k: runs[k])
    limits = {**configured_limits(queue), **expected}
    source = "expected" if name in expected else "configured"
    return int(runs[name]), f"{name} {limits[name]} ({source})"


def limit_reasons(queue: Mapping[str, Any], expected: Mapping[str, int], gpus_each: int) -> set[str]:
    """The reasons the run over the binding limit may wait with: those of every limit tied at the lowest."""
    runs = _binding(queue, expected, gpus_each)
    low = min(runs.values(), default=None)
    return {str(LIMIT_REASON[k]) for k, v in runs.items() if v == low}


def judge_expected(project: str, name: str, queue: Mapping[str, Any], expected: Mapping[str, int]) -> Result:
    """An expectation is a claim about the config: one that differs from what the queue is configured with fails."""
    configured = configured_limits(queue)
    wrong = [
        f"{k} {v} expected, {configured[k] if configured[k] is not None else 'unlimited'} configured"
        for k, v in sorted(expected.items())
        if configured.get(k) != v
    ]
    if wrong:
        return Result("expected-limits", project, FAIL, f"queue {name}: " + "; ".join(wrong))
    shown = ", ".join(f"{k} {v}" for k, v in sorted(expected.items())) or "no limit"
    return Result("expected-limits", project, PASS, f"queue {name}: {shown} as configured")


def judge_limit(
    project: str,
    queue: str,
    limit: int,
    why: str,
    running: int,
    extra_status: str,
    extra_reason: str,
    stuck: str = "",
    reasons: Collection[str] = LIMIT_REASONS,
) -> Result:
    """`limit` runs should run and one more wait with the binding limit's reason (one of `reasons`);
    `stuck`: why a run did not start."""
    if running < limit:
        return Result(
            "queue-limit",
            project,
            FAIL,
            f"queue {queue}: only {running} of {limit} run(s) started, so its limit ({why}) could not be checked; "
            f"a waiting run says: {stuck}",
        )
    if running > limit or extra_status not in ("queued",):
        return Result(
            "queue-limit",
            project,
            FAIL,
            f"queue {queue} is not enforcing its limit: {why} allows {limit} run(s) at once, "
            f"but {running} ran and the extra one is {extra_status}",
        )
    if extra_reason not in LIMIT_REASONS:
        return Result(
            "queue-limit",
            project,
            FAIL,
            f"queue {queue}: the run over {why} waits for {extra_reason}, not for a queue limit "
            f"({', '.join(sorted(LIMIT_REASONS))})",
        )
    if extra_reason not in reasons:
        return Result(
            "queue-limit",
            project,
            FAIL,
            f"queue {queue}: the run over {why} waits for {extra_reason}, so another limit binds first "
            f"(expected {' or '.join(sorted(reasons))})",
        )
    return Result("queue-limit", project, PASS, f"queue {queue}: {limit} ran, the next waits ({extra_reason}; {why})")


def judge_refusal(
    check: str, project: str, what: str, name: str, status: int, message: str, allowed: Sequence[str]
) -> Result:
    """A disallowed queue/preset must be refused with 4xx and the allowed values named."""
    if status < 400:
        return Result(check, project, FAIL, f"{what} {name} is not allowed in {project}, but a run on it was accepted")
    if not 400 <= status < 500:
        return Result(check, project, FAIL, f"{what} {name}: the refusal is HTTP {status}, not a 4xx")
    missing = [a for a in allowed if a not in message]
    if missing:
        return Result(
            check,
            project,
            FAIL,
            f"{what} {name} was refused ({status}) without naming the allowed {what}s {', '.join(missing)}: {message}",
        )
    return Result(check, project, PASS, f"{what} {name} refused ({status}), allowed named: {', '.join(allowed)}")


def judge_allowed_queues(project: str, usable: Sequence[str], expected: Sequence[str] | None) -> Result:
    if expected is None:
        return Result("allowed-queues", project, SKIP, "no expectations for this project (give --expect FILE)")
    extra = sorted(set(usable) - set(expected))
    if extra:
        return Result(
            "allowed-queues",
            project,
            FAIL,
            f"project {project} can use queue(s) {', '.join(extra)}, which it should not "
            f"(expected only {', '.join(expected) or 'none'})",
        )
    return Result("allowed-queues", project, PASS, f"usable queues {', '.join(sorted(usable))} are all expected")


def disjoint(devices: Mapping[str, Sequence[int]]) -> str | None:
    """None when no device is held by two runs; else which one is."""
    seen: dict[int, str] = {}
    for run, devs in devices.items():
        for d in devs:
            if d in seen:
                return f"GPU {d} is held by both {seen[d]} and {run}"
            seen[d] = run
    return None


def exit_code(results: Sequence[Result]) -> int:
    return 1 if any(r.result == FAIL for r in results) else 0


def as_json(results: Sequence[Result]) -> dict[str, Any]:
    return {
        "ok": exit_code(results) == 0,
        "results": [asdict(r) for r in results],
        "failures": [r.line() for r in results if r.result == FAIL],
    }


def table(results: Sequence[Result]) -> str:
    headers = ("check", "project", "result", "detail")
    rows = [(r.check, r.project, r.result, r.detail) for r in results]
    widths = [max(len(h), *(len(row[i]) for row in rows)) if rows else len(h) for i, h in enumerate(headers[:3])]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers[:3], widths, strict=True)) + "  " + headers[3]]
    for row in rows:
        lines.append("  ".join(c.ljust(w) for c, w in zip(row[:3], widths, strict=True)) + "  " + row[3])
    return "\n".join(lines)


@dataclass(frozen=True)
class FlavorProbe:
    """One flavor a project may use and the queue its probe goes to (`quota`: its GPUs there)."""

    flavor: str
    queue: str
    quota: int
    paused: bool = False


def flavor_probes(
    usable: Sequence[str], default: str | None, queues: Mapping[str, Mapping[str, Any]]
) -> list[FlavorProbe]:
    """Each flavor the project's usable queues offer, once, in the order met (the default queue first).

    A flavor goes to the first queue where it has quota and the queue is not paused: the project may
    use it there. One with none such is still probed (on the first queue offering it), so it fails.
    """
    first = [default] if default is not None and default in usable else []
    order = [q for q in first + list(usable) if q in queues]
    found: dict[str, FlavorProbe] = {}
    for name in dict.fromkeys(order):
        q = queues[name]
        for f in q.get("flavors") or ():
            probe = FlavorProbe(
                str(f["name"]), name, int((f.get("quota") or {}).get("gpu") or 0), bool(q.get("paused"))
            )
            held = found.get(probe.flavor)
            if held is None or (not (held.quota and not held.paused) and probe.quota and not probe.paused):
                found[probe.flavor] = probe
    return list(found.values())


def flavor_wait(explain: Mapping[str, Any], flavor: str) -> str:
    """Why a probe does not start, from its explain answer: its flavor's own entry where the queue holds it."""
    entry = next((f for f in explain.get("flavors") or () if f.get("name") == flavor), None)
    if entry is not None:
        held = [b.get("id") or f"a run of {b.get('project')}" for b in entry.get("blockers") or ()]
        return f"{entry['reason']}: {entry['message']}" + (f" (held by {', '.join(held)})" if held else "")
    raw = (explain.get("details") or {}).get("raw")
    return f"{explain.get('reason')}: {explain.get('message')}" + (f" (scheduler: {raw})" if raw else "")


def placed_on(
    flavor: str,
    devices: Sequence[int],
    device_flavor: Mapping[int, str | None],
    node: str | None,
    node_labels: Mapping[str, str] | None,
    want_labels: Mapping[str, str],
) -> tuple[str | None, str]:
    """Whether a probe of `flavor` landed on it: (what is wrong or None, where it ran).

    Locally its devices must all be the flavor's (GET capacity); on Kubernetes its node must carry
    the flavor's labels (`node_labels`: the node's values for the labels its pod selects by, from
    its running event; None where the server cannot read nodes: then only the record says).
    """
    if devices:
        other = [
            f"GPU {d} is {device_flavor.get(d) or 'of no flavor'}" for d in devices if device_flavor.get(d) != flavor
        ]
        where = f"GPU(s) {', '.join(map(str, devices))}"
        return ("; ".join(other) or None), where
    if node is not None and node_labels is None:
        return None, f"node {node}; its labels are not reported (the server cannot read nodes)"
    if node is not None:
        labels = node_labels or {}
        missing = [f"{k}={v}" for k, v in sorted(want_labels.items()) if labels.get(k) != v]
        if missing:
            return f"node {node} lacks flavor {flavor}'s label(s) {', '.join(missing)}", f"node {node}"
        return None, f"node {node}" + (
            f" ({', '.join(f'{k}={v}' for k, v in sorted(want_labels.items()))})" if want_labels else ""
        )
    return None, "no device or node reported"


def judge_flavor_quota(project: str, probe: FlavorProbe) -> Result | None:
    """A flavor at quota 0 wherever the project may use it: no probe is needed to know it cannot start."""
    if probe.quota > 0:
        return None
    return Result(
        f"flavor:{probe.flavor}",
        project,
        FAIL,
        f"flavor {probe.flavor} on queue {probe.queue}: its quota there is 0 GPUs, so no run can start on it "
        f"(no queue of {project} gives it any)",
    )


def judge_flavor(
    project: str,
    probe: FlavorProbe,
    run_id: str,
    status: str,
    recorded: str | None,
    wrong: str | None,
    where: str,
    why: str,
) -> Result:
    """A flavor's probe must start, on that flavor (its record's `flavor`), and land on it (`wrong`: None)."""
    check, head = f"flavor:{probe.flavor}", f"flavor {probe.flavor} on queue {probe.queue}"
    if status not in ("running", "succeeded"):
        return Result(check, project, FAIL, f"{head}: probe {run_id} did not start ({status}): {why}")
    if recorded != probe.flavor:
        return Result(check, project, FAIL, f"{head}: probe {run_id} was admitted on flavor {recorded or 'none'}")
    if wrong:
        return Result(check, project, FAIL, f"{head}: probe {run_id} did not land on {probe.flavor}: {wrong}")
    return Result(check, project, PASS, f"{head}: probe {run_id} ran on {probe.flavor} ({where})")


def connection_probe(conn: ConnectionConfig) -> dict[str, Any]:
    """What a run naming `conn` must find: env vars set, directories (by the env var naming them), files."""
    var = env_var(conn.name)
    env = [*plain_env(conn.reference(), local=False), *conn.secret_env()]  # the names; values differ by executor
    want: dict[str, Any] = {"env": env, "dirs": [], "files": [], "files_in": var}
    if conn.kind == "volume" or conn.expose == "files":
        want["dirs"].append(var)
    if conn.kind == "secret" and conn.expose == "files":
        want["files"] = sorted(conn.env.values())
    return want


def judge_connection(project: str, conn: str, run_id: str, status: str, log: str, why: str) -> Result:
    check = f"connection:{conn}"
    said = next((ln for ln in log.splitlines() if ln.startswith("rollout connection ")), "")
    if status == "succeeded" and said == "rollout connection ok":
        return Result(check, project, PASS, f"run {run_id} found what connection {conn} provides")
    if said.startswith("rollout connection missing: "):
        missing = said.removeprefix("rollout connection missing: ")
        return Result(check, project, FAIL, f"run {run_id}: connection {conn} did not reach the run: {missing}")
    return Result(check, project, FAIL, f"run {run_id} naming connection {conn} is {status}: {why}")
