"""The access matrix, generated from the route table: every operation × caller × project.

Each operation of the OpenAPI document (built from `service/routes.py`) is called by a platform
admin, each team's admin, member and viewer, a user of no project and an unauthenticated
client, against the caller's own team and another team's. What each answer must be comes from
the documented policy (docs/platform-config.md "Projects, roles, restrictions"; core/policy.py),
restated here from the roles in the config, not computed by the policy module:

- a run or project the caller may not see answers 404, as if it did not exist (no names leak);
- a visible one the caller may not change answers 403 (viewers submit nothing; members stop
  only their own runs; project admins any run of their project and their project's members);
- admin writes (queues, presets, the whole config, pause/resume, project delete) are platform
  admins' alone: 403 for everyone else;
- an unauthenticated request is refused (403) everywhere.

No answer to a caller who may not see a project holds that project's run ids, run names, users,
log lines, metric names, params or outputs (the caller's own input echoed back aside), in
explanation blockers, comparisons, queue views and both event streams included.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
import yaml

from jupyter_gpuplat.service.openapi import openapi_document
from jupyter_gpuplat.service.routes import ROUTES

from ..conftest import EXAMPLE
from ..waiting import wait_for

PROJECTS = ("team-a", "team-b")
CALLERS = ("ops", "alice", "bob", "carol", "dave", "erin", "frank", "mallory", None)  # None: unauthenticated
RANK = {"viewer": 0, "member": 1, "admin": 2}
STREAM_SECONDS = 10.0  # the deadline of one event-stream read
MIN_CELLS = 850  # what the generator below produces for the 35 operations (864): a shrinking matrix fails

# The example platform plus one paused queue both teams may use: what the matrix submits waits
# there, so the runs set up below keep their places (and their explanations) to the end.
PARKED = {"name": "parked", "description": "access matrix submissions", "concurrency": 1, "paused": True}
# A strict FIFO queue both teams use: a run behind another team's head must not learn who or what that is.
SHARED_STRICT = {
    "name": "shared-strict",
    "ordering": "strict_fifo",
    "concurrency": 2,
    "max_per_user": 1,
    "quota": {"gpu": 1},
}


@pytest.fixture
def platform_config_file(tmp_path: Path) -> Path:
    cfg = yaml.safe_load(EXAMPLE.read_text())
    cfg["queues"].append({**PARKED, "quota": {"gpu": 1}})
    cfg["queues"].append(SHARED_STRICT)
    for p in cfg["projects"]:
        p["allowed_queues"] += ["parked", SHARED_STRICT["name"]]
    path = tmp_path / "platform.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


# A job on the shared interactive queue (the example's `notebook` preset there is a GPU session).
INTERACTIVE_JOB = {"queue": "interactive", "resources": {"gpu": 1}}

# Who submits each team's waiting job in the world below.
WAIT_OWNER = {"team-a": "bob", "team-b": "dave"}

# ---- the policy, as documented ---------------------------------------------------------------
_CFG = yaml.safe_load(EXAMPLE.read_text())
ADMINS = set(_CFG["admins"])
MEMBERS: dict[str, dict[str, str]] = {p["name"]: dict(p["members"]) for p in _CFG["projects"]}
MEMBER_OF = {p: next(u for u, r in m.items() if r == "member") for p, m in MEMBERS.items()}
ADMIN_OF = {p: next(u for u, r in m.items() if r == "admin") for p, m in MEMBERS.items()}


def role(caller: str | None, project: str) -> str | None:
    if caller is None:
        return None
    if caller in ADMINS:
        return "admin"
    return MEMBERS[project].get(caller)


def has(caller: str | None, project: str, need: str) -> bool:
    r = role(caller, project)
    return r is not None and RANK[r] >= RANK[need]


def sees(caller: str | None, project: str) -> bool:
    return has(caller, project, "viewer")


def visible_or_404(caller: str | None, project: str, ok: int = 200) -> int:
    """Reads of a project's runs: viewers and more; invisible is 404."""
    if caller is None:
        return 403
    return ok if sees(caller, project) else 404


def needs_role(caller: str | None, project: str, need: str, ok: int = 200) -> int:
    """A project write that needs `need`: 404 when the project is invisible, 403 when the role is too low."""
    if caller is None:
        return 403
    if not sees(caller, project):
        return 404
    return ok if has(caller, project, need) else 403


def platform_admin_only(caller: str | None) -> int:
    return 200 if caller in ADMINS else 403


def anyone(caller: str | None) -> int:
    return 403 if caller is None else 200


def may_stop(caller: str | None, project: str, owner: str) -> int:
    """Stop: the owner (a member or more), project admins, platform admins; 404 if invisible."""
    if caller is None:
        return 403
    if not sees(caller, project):
        return 404
    return 200 if (caller == owner and has(caller, project, "member")) or has(caller, project, "admin") else 403


# ---- the world the matrix runs against -----------------------------------------------------------
@dataclass
class World:
    tag: str
    runs: dict[str, dict[str, str]] = field(default_factory=dict)  # project -> role of the run -> id
    secrets: dict[str, set[str]] = field(default_factory=lambda: {p: set() for p in PROJECTS})
    content: dict[str, dict[str, str]] = field(default_factory=dict)  # project -> what its done run wrote
    config: dict[str, Any] = field(default_factory=dict)

    def keep(self, project: str, *values: str) -> None:
        self.secrets[project].update(values)


@dataclass
class Req:
    method: str
    path: str
    params: dict[str, str] = field(default_factory=dict)
    body: Any = None
    stream_until: bytes | None = None  # an event stream: read until this, with a deadline
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Cell:
    op: str
    variant: str
    caller: str | None
    project: str | None  # the team the request is about (None: the platform)
    req: Req
    expect: int
    before: Callable[[], Awaitable[None]] | None = None
    after: Callable[[], Awaitable[None]] | None = None
    check: Callable[[int, str], str | None] | None = None  # more for a 2xx answer: a problem, or None

    def label(self) -> str:
        return f"{self.op} [{self.variant}] as {self.caller or 'anonymous'} on {self.project or '-'}"


def done_code(w: World, project: str) -> str:
    c = w.content[project]
    return (
        "import pathlib\n"
        "from jupyter_gpuplat import tracking\n"
        f"print({c['log']!r}, flush=True)\n"
        f"tracking.log_params(**{{{c['param']!r}: {c['param_value']!r}}})\n"
        f"tracking.log_metrics(step=0, **{{{c['metric']!r}: 1.5}})\n"
        f"tracking.log_metrics(step=1, **{{{c['metric']!r}: 0.5}})\n"
        f"p = pathlib.Path({c['output']!r}); p.write_text({c['output_text']!r})\n"
        "tracking.log_output(p)\n"
    )


def hold_code(marker: str) -> str:
    # The run's own workload: it holds its GPU until the test's teardown kills it.
    return f"import time\nprint({marker!r}, flush=True)\ntime.sleep(600)\n"


async def build_world(api: Any) -> World:
    w = World(tag=uuid.uuid4().hex[:8])
    for p in PROJECTS:
        key = p.replace("-", "")
        w.content[p] = {
            "log": f"LOG-{p}-{w.tag}",
            "param": f"param_{key}_{w.tag}",
            "param_value": f"PARAM-{p}-{w.tag}",
            "metric": f"metric_{key}_{w.tag}",
            "output": f"out-{p}-{w.tag}.txt",
            "output_text": f"OUTPUT-{p}-{w.tag}",
        }
        w.keep(p, *w.content[p].values())
        w.runs[p] = {}

    async def submit(project: str, what: str, user: str, code: str, **body: Any) -> str:
        name = f"{project}-{what}-{w.tag}"
        run = await api.submit(user, project=project, name=name, command=[sys.executable, "-c", code], **body)
        w.runs[project][what] = run["id"]
        w.keep(project, run["id"], name)
        return str(run["id"])

    # Finished runs that wrote a log line, params, a metric and an output.
    for p in PROJECTS:
        rid = await submit(p, "done", MEMBER_OF[p], done_code(w, p))
        await api.wait_status(rid, "succeeded", user=MEMBER_OF[p], timeout=30)
    # All four GPUs held: one by team-a, three by team-b (one in the shared interactive queue).
    holders = [
        ("team-a", "hold", "alice", {"presets": ["single-gpu"]}),
        ("team-b", "hold", "dave", {"presets": ["single-gpu"]}),
        ("team-b", "hold2", "erin", {"presets": ["single-gpu"]}),
        ("team-b", "hold-nb", "erin", INTERACTIVE_JOB),
    ]
    for p, what, user, body in holders:
        marker = f"HOLD-{p}-{what}-{w.tag}"
        w.keep(p, marker)
        rid = await submit(p, what, user, hold_code(marker), **body)
        await api.wait_log(rid, marker, user=user, timeout=30)
    # Waiting runs: on the other team's GPUs (explain names them only to those who may see them),
    # and erin's second interactive run at the head of the shared queue, held by her per-user limit.
    waiters = [
        ("team-a", "wait", "bob", {"presets": ["single-gpu"]}, "NoCapacity"),
        ("team-b", "wait-user", "erin", INTERACTIVE_JOB, "UserLimit"),
        ("team-b", "wait", "dave", INTERACTIVE_JOB, "NoCapacity"),
        # a platform admin's runs: explain must filter blockers by the caller's projects, not the owner's
        ("team-a", "wait-ops", "ops", {"presets": ["single-gpu"]}, "NoCapacity"),
        ("team-b", "wait-ops", "ops", INTERACTIVE_JOB, "NoCapacity"),
    ]
    for p, what, user, body, reason in waiters:
        rid = await submit(p, what, user, hold_code(f"never-{what}"), **body)

        async def waiting(rid: str = rid, user: str = user, reason: str = reason) -> bool:
            r = await api.run(rid, user)
            return bool(r["status"] == "queued" and r["reason"] == reason)

        await wait_for(waiting, 20, f"{rid} waiting with {reason}")
    w.config = (await api.ok("GET", "config", "ops"))["config"]
    return w


# ---- the generator: one entry per operation of the route table ------------------------------------
Gen = Callable[[World, Any], list[Cell]]
# a finished run, one holding GPUs, one waiting on the other team's GPUs, one such of a platform admin
RUN_KINDS = ("done", "hold", "wait", "wait-ops")


def _each(
    op: str, make: Callable[[str | None, str | None], tuple[str, Req, int]], projects: tuple[str | None, ...] = PROJECTS
) -> list[Cell]:
    cells = []
    for project in projects:
        for caller in CALLERS:
            variant, req, expect = make(caller, project)
            cells.append(Cell(op, variant, caller, project, req, expect))
    return cells


def _run_reads(op: str, suffix: str, **params: str) -> Gen:
    def gen(w: World, api: Any) -> list[Cell]:
        cells = []
        for kind in RUN_KINDS:
            for p in PROJECTS:
                rid = w.runs[p][kind]
                for c in CALLERS:
                    req = Req("GET", f"runs/{rid}{suffix}", dict(params))
                    cells.append(Cell(op, kind, c, p, req, visible_or_404(c, p)))
        return cells

    return gen


def gen_explain(w: World, api: Any) -> list[Cell]:
    cells = _run_reads("GET runs/{run_id}/explain", "/explain")(w, api)
    for cell in cells:
        if cell.variant.startswith("wait") and cell.expect == 200:
            assert cell.project is not None
            cell.check = _blockers_check(cell.caller, cell.project)
    return cells


def _blockers_check(caller: str | None, project: str) -> Callable[[int, str], str | None]:
    other = next(p for p in PROJECTS if p != project)

    def check(code: int, body: str) -> str | None:
        ex = json.loads(body)
        theirs = [b for b in ex["blockers"] if b["project"] == other]
        if ex["reason"] != "NoCapacity" or not theirs:
            return f"expected NoCapacity with {other}'s runs among the blockers: {ex}"
        named = [b for b in theirs if b["id"] or b["name"] or b["user"]]
        if sees(caller, other) != (len(named) == len(theirs)):
            return f"{other}'s blockers named {len(named)}/{len(theirs)} times to {caller}: {theirs}"
        return None

    return check


def gen_logs(w: World, api: Any) -> list[Cell]:
    cells = []
    for p in PROJECTS:
        c = w.content[p]
        for caller in CALLERS:
            expect = visible_or_404(caller, p)
            done, hold = w.runs[p]["done"], w.runs[p]["hold"]
            marker = f"HOLD-{p}-hold-{w.tag}"
            variants = [
                ("text", Req("GET", f"runs/{done}/logs", {"format": "text"}), c["log"]),
                ("sse-done", Req("GET", f"runs/{done}/logs", stream_until=b"event: end"), c["log"]),
                ("sse-follow", Req("GET", f"runs/{hold}/logs", stream_until=marker.encode()), marker),
                ("sse-resume", Req("GET", f"runs/{done}/logs", headers={"Last-Event-ID": "0"}), c["log"]),
            ]
            for variant, req, wanted in variants:
                if variant == "sse-resume":
                    req.stream_until = b"event: end"
                cells.append(Cell("GET runs/{run_id}/logs", variant, caller, p, req, expect, check=_contains(wanted)))
    return cells


def _contains(*wanted: str) -> Callable[[int, str], str | None]:
    def check(code: int, body: str) -> str | None:
        missing = [x for x in wanted if x not in body]
        return f"missing {missing}" if missing else None

    return check


def gen_outputs(w: World, api: Any) -> list[Cell]:
    cells = []
    for p in PROJECTS:
        rid = w.runs[p]["done"]
        for caller in CALLERS:
            req = Req("GET", f"runs/{rid}/outputs")
            check = _contains(w.content[p]["output"])
            expect = visible_or_404(caller, p)
            cells.append(Cell("GET runs/{run_id}/outputs", "list", caller, p, req, expect, check=check))
    return cells


def gen_output_file(w: World, api: Any) -> list[Cell]:
    cells = []
    for p in PROJECTS:
        rid = w.runs[p]["done"]
        for caller in CALLERS:
            for variant, path in (("outputs/", f"outputs/{w.content[p]['output']}"), ("log", "output.log")):
                req = Req("GET", f"runs/{rid}/outputs/{path}")
                want = w.content[p]["output_text"] if variant == "outputs/" else w.content[p]["log"]
                cells.append(
                    Cell(
                        "GET runs/{run_id}/outputs/{path}",
                        variant,
                        caller,
                        p,
                        req,
                        visible_or_404(caller, p),
                        check=_contains(want),
                    )
                )
    return cells


def gen_metrics(w: World, api: Any) -> list[Cell]:
    cells = _run_reads("GET runs/{run_id}/metrics", "/metrics")(w, api)
    for cell in cells:
        if cell.variant == "done" and cell.project:
            cell.check = _contains(w.content[cell.project]["metric"])
    return cells


def gen_compare(w: World, api: Any) -> list[Cell]:
    cells = []
    a, b = (w.runs[p]["done"] for p in PROJECTS)
    for caller in CALLERS:
        for p in PROJECTS:
            rid = w.runs[p]["done"]
            req = Req("GET", "compare", {"runs": f"{rid},{w.runs[p]['wait']}"})
            c = w.content[p]
            check = _contains(c["param"], c["metric"])
            cells.append(Cell("GET compare", "one team", caller, p, req, visible_or_404(caller, p), check=check))
        both = 200 if all(sees(caller, p) for p in PROJECTS) else (403 if caller is None else 404)
        cells.append(Cell("GET compare", "both teams", caller, None, Req("GET", "compare", {"runs": f"{a},{b}"}), both))
    return cells


def gen_get_run(w: World, api: Any) -> list[Cell]:
    return _run_reads("GET runs/{run_id}", "")(w, api)


def gen_list_runs(w: World, api: Any) -> list[Cell]:
    cells = _each("GET runs", lambda c, p: ("?project", Req("GET", "runs", {"project": str(p)}), visible_or_404(c, p)))
    for cell in cells:
        if cell.expect == 200 and cell.project:
            cell.check = _contains(w.runs[cell.project]["done"], w.runs[cell.project]["wait"])
    cells += _each("GET runs", lambda c, p: ("all", Req("GET", "runs"), anyone(c)), (None,))
    return cells


def gen_submit(w: World, api: Any) -> list[Cell]:
    def make(c: str | None, p: str | None) -> tuple[str, Req, int]:
        assert p is not None
        name = f"{p}-submitted-{c}-{w.tag}"
        w.keep(p, name)
        body = {"project": p, "name": name, "queue": "parked", "command": ["true"]}
        return "parked", Req("POST", "runs", body=body), needs_role(c, p, "member", 201)

    cells = _each("POST runs", make)
    for cell in cells:
        cell.check = _remember(w, cell)
    return cells


def _remember(w: World, cell: Cell) -> Callable[[int, str], str | None]:
    def check(code: int, body: str) -> str | None:
        assert cell.project is not None
        w.keep(cell.project, json.loads(body)["id"])  # later answers must not name it to other teams
        return None

    return check


def gen_preview(w: World, api: Any) -> list[Cell]:
    return _each(
        "POST runs/preview",
        lambda c, p: (
            "parked",
            Req("POST", "runs/preview", body={"project": p, "queue": "parked", "command": ["true"]}),
            needs_role(c, p, "member"),
        ),
    )


def gen_stop(w: World, api: Any) -> list[Cell]:
    """A fresh parked run per cell (a stop ends it), owned by the team's member or its admin."""
    cells = []
    for p in PROJECTS:
        for variant, owner in (("member's run", MEMBER_OF[p]), ("admin's run", ADMIN_OF[p])):
            for caller in CALLERS:
                req = Req("POST", "runs/{run_id}/stop")
                cell = Cell("POST runs/{run_id}/stop", variant, caller, p, req, may_stop(caller, p, owner))
                cell.before = _parked_run(w, api, cell, owner)
                cells.append(cell)
    return cells


def _on_waiting_jobs(op: str, suffix: str, expect: Callable[[str | None, str, str], int], body: Any = None) -> Gen:
    """A session operation on each team's waiting job (owned by `owner`): it is no session, so 409 to
    those allowed; the access answers (404 invisible, 403 not allowed) come first."""
    method, _ = op.split(" ", 1)

    def gen(w: World, api: Any) -> list[Cell]:
        cells = []
        for p in PROJECTS:
            rid, owner = w.runs[p]["wait"], WAIT_OWNER[p]
            for c in CALLERS:
                cells.append(
                    Cell(op, "a waiting job", c, p, Req(method, f"runs/{rid}{suffix}", body=body), expect(c, p, owner))
                )
        return cells

    return gen


def owner_only(caller: str | None, project: str, owner: str, ok: int = 409) -> int:
    """A session's kernel is its owner's alone: 404 invisible, 403 for anyone else who sees it."""
    if caller is None:
        return 403
    if not sees(caller, project):
        return 404
    return ok if caller == owner else 403


def keep_expect(caller: str | None, project: str, owner: str) -> int:
    code = may_stop(caller, project, owner)
    return 409 if code == 200 else code


def gen_sessions(w: World, api: Any) -> list[Cell]:
    return [Cell("GET sessions", "-", c, None, Req("GET", "sessions"), anyone(c)) for c in CALLERS]


def _parked_run(w: World, api: Any, cell: Cell, owner: str) -> Callable[[], Awaitable[None]]:
    async def before() -> None:
        assert cell.project is not None
        name = f"{cell.project}-stop-{owner}-{uuid.uuid4().hex[:6]}"
        run = await api.submit(owner, project=cell.project, name=name, queue="parked", command=["true"])
        w.keep(cell.project, run["id"], name)
        cell.req.path = f"runs/{run['id']}/stop"

    return before


def gen_put_project(w: World, api: Any) -> list[Cell]:
    def make(c: str | None, p: str | None) -> tuple[str, Req, int]:
        body = next(x for x in w.config["projects"] if x["name"] == p)
        return "unchanged", Req("PUT", f"projects/{p}", body=body), needs_role(c, str(p), "admin")

    return _each("PUT projects/{name}", make)


def _scratch(w: World, api: Any, section: str, name: str, item: dict[str, Any]) -> Callable[[], Awaitable[None]]:
    async def before() -> None:
        code, _ = await api("PUT", f"{section}/{name}", "ops", item)
        assert code == 200, (section, name, code)

    return before


def gen_delete(section: str) -> Gen:
    """Deletes are platform admins': each cell deletes a scratch copy made just before."""

    def gen(w: World, api: Any) -> list[Cell]:
        cells = []
        for p in PROJECTS:
            if section == "projects":
                base = next(x for x in w.config["projects"] if x["name"] == p)
            elif section == "queues":
                base = next(x for x in w.config["queues"] if x["name"] == f"{p}-train")
            else:
                base = next(x for x in w.config["presets"] if x["name"] == "single-gpu")
            for caller in CALLERS:
                name = f"scratch-{p}-{w.tag}"
                req = Req("DELETE", f"{section}/{name}")
                cell = Cell(f"DELETE {section}/{{name}}", "scratch copy", caller, p, req, platform_admin_only(caller))
                cell.before = _scratch(w, api, section, name, {**base, "name": name})
                cells.append(cell)
        return cells

    return gen


def gen_put_item(section: str) -> Gen:
    """Replace a queue or preset by itself: platform admins only."""

    def gen(w: World, api: Any) -> list[Cell]:
        names = [f"{p}-train" for p in PROJECTS] if section == "queues" else ["single-gpu", "notebook"]
        cells = []
        for project, name in zip(PROJECTS, names, strict=True):
            body = next(x for x in w.config[section] if x["name"] == name)
            for caller in CALLERS:
                req = Req("PUT", f"{section}/{name}", body=body)
                cells.append(Cell(f"PUT {section}/{{name}}", name, caller, project, req, platform_admin_only(caller)))
        return cells

    return gen


def gen_pause(w: World, api: Any) -> list[Cell]:
    cells = []
    for p in PROJECTS:
        for action in ("pause", "resume"):
            for caller in CALLERS:
                req = Req("POST", f"queues/{p}-train/{action}")
                cell = Cell("POST queues/{name}/{action}", action, caller, p, req, platform_admin_only(caller))
                if action == "pause":
                    cell.after = _resume(api, f"{p}-train")
                cells.append(cell)
    return cells


def _resume(api: Any, queue: str) -> Callable[[], Awaitable[None]]:
    async def after() -> None:
        await api.ok("POST", f"queues/{queue}/resume", "ops")

    return after


def gen_put_config(w: World, api: Any) -> list[Cell]:
    cells = []
    for dry in ("true", "false"):
        for caller in CALLERS:
            req = Req("PUT", "config", {"dry_run": dry}, body={"config": w.config})
            cells.append(Cell("PUT config", f"dry_run={dry}", caller, None, req, platform_admin_only(caller)))
    return cells


def gen_presets(w: World, api: Any) -> list[Cell]:
    cells = _each(
        "GET presets", lambda c, p: ("?project", Req("GET", "presets", {"project": str(p)}), visible_or_404(c, p))
    )
    return cells + _each("GET presets", lambda c, p: ("all", Req("GET", "presets"), anyone(c)), (None,))


def gen_events(w: World, api: Any) -> list[Cell]:
    """The backlog from the first event, read until `ready`: only visible projects' runs."""
    cells = []
    for caller in CALLERS:
        req = Req("GET", "events", {"since": "0"}, stream_until=b"event: ready")
        cell = Cell("GET events", "since=0", caller, None, req, anyone(caller))
        visible = [p for p in PROJECTS if sees(caller, p)]
        cell.check = _contains(*(w.runs[p]["done"] for p in visible))
        cells.append(cell)
    return cells


def _platform(op: str, expect: Callable[[str | None], int], method: str = "GET") -> Gen:
    path = op.split(" ", 1)[1]

    def gen(w: World, api: Any) -> list[Cell]:
        return [Cell(op, "-", c, None, Req(method, path), expect(c)) for c in CALLERS]

    return gen


def gen_queues(w: World, api: Any) -> list[Cell]:
    cells = _platform("GET queues", anyone)(w, api)
    for cell in cells:
        if cell.caller and any(sees(cell.caller, p) for p in PROJECTS):
            cell.check = _contains("interactive")
    return cells


def gen_insights(w: World, api: Any) -> list[Cell]:
    """Everyone gets the figures of what they may see; a project they may not see is 404, its name never sent."""
    cells = _platform("GET insights", anyone)(w, api)
    for caller in CALLERS:
        for p in PROJECTS:
            req = Req("GET", "insights", {"project": p, "since": "1d"})
            cells.append(Cell("GET insights", "one team", caller, p, req, visible_or_404(caller, p)))
    return cells


def gen_whatif(w: World, api: Any) -> list[Cell]:
    """A replay of a queue both teams use: anyone in a project (or a platform admin); for others the
    queue is one they may not see: 404, as insights answers (docs/insights.md "Who sees what")."""
    req = Req("POST", "whatif", body={"since": "1d", "changes": {"parked": {"concurrency": 2}}})
    ok = [c for c in CALLERS if any(sees(c, p) for p in PROJECTS)]
    return [Cell("POST whatif", "-", c, None, req, 200 if c in ok else 403 if c is None else 404) for c in CALLERS]


GENERATORS: dict[str, Gen] = {
    "POST whatif": gen_whatif,
    "GET insights": gen_insights,
    "GET whoami": _platform("GET whoami", anyone),
    "GET capacity": _platform("GET capacity", anyone),
    "GET queues": gen_queues,
    "POST queues/{name}/{action}": gen_pause,
    "PUT queues/{name}": gen_put_item("queues"),
    "DELETE queues/{name}": gen_delete("queues"),
    "GET projects": _platform("GET projects", anyone),
    "PUT projects/{name}": gen_put_project,
    "DELETE projects/{name}": gen_delete("projects"),
    "GET presets": gen_presets,
    "PUT presets/{name}": gen_put_item("presets"),
    "DELETE presets/{name}": gen_delete("presets"),
    "GET config": _platform("GET config", platform_admin_only),
    "PUT config": gen_put_config,
    "POST runs/preview": gen_preview,
    "POST runs": gen_submit,
    "GET runs": gen_list_runs,
    "GET runs/{run_id}": gen_get_run,
    "GET runs/{run_id}/explain": gen_explain,
    "POST runs/{run_id}/stop": gen_stop,
    "GET runs/{run_id}/logs": gen_logs,
    "GET runs/{run_id}/outputs": gen_outputs,
    "GET runs/{run_id}/outputs/{path}": gen_output_file,
    "GET runs/{run_id}/metrics": gen_metrics,
    "GET compare": gen_compare,
    "GET events": gen_events,
    "GET openapi.json": _platform("GET openapi.json", anyone),
    "POST runs/{run_id}/keepalive": _on_waiting_jobs("POST runs/{run_id}/keepalive", "/keepalive", keep_expect),
    "GET runs/{run_id}/kernel": _on_waiting_jobs("GET runs/{run_id}/kernel", "/kernel", owner_only),
    "POST runs/{run_id}/kernel": _on_waiting_jobs(
        "POST runs/{run_id}/kernel", "/kernel", owner_only, body={"event": "idle"}
    ),
    "GET sessions": gen_sessions,
    # A waiting job is no sweep: 400 to whoever may see it (reads need only the viewer role).
    "GET runs/{run_id}/compare": _on_waiting_jobs(
        "GET runs/{run_id}/compare", "/compare", lambda c, p, _owner: visible_or_404(c, p, 400)
    ),
    # A waiting job is no sweep: 409 for whoever may change it, after the access answers.
    "PATCH runs/{run_id}": _on_waiting_jobs("PATCH runs/{run_id}", "", keep_expect, body={"concurrency": 2}),
}


def operations() -> list[str]:
    """Every (method, path) of the route table, as the OpenAPI document lists them."""
    doc = openapi_document("/", ROUTES)
    prefix = "/gpuplat/api/"
    return [f"{m.upper()} {path.removeprefix(prefix)}" for path, item in doc["paths"].items() for m in item]


def test_every_operation_of_the_route_table_has_a_generator() -> None:
    assert sorted(operations()) == sorted(GENERATORS), "a route without access cells (or a stale generator)"


# ---- calling and checking -----------------------------------------------------------------------
def _auth(caller: str | None) -> dict[str, str]:
    return {"Authorization": f"token tok-{caller}" if caller else "token not-a-token"}


async def call(jp_fetch: Any, port: int, base: str, caller: str | None, req: Req) -> tuple[int, str]:
    headers = {**_auth(caller), **req.headers}
    if req.stream_until is not None:
        return await read_stream(port, f"{base}gpuplat/api/{req.path}", req.params, headers, req.stream_until)
    kw: dict[str, Any] = {"method": req.method, "raise_error": False, "headers": headers, "params": req.params}
    if req.method in ("POST", "PUT", "PATCH"):
        kw["body"] = json.dumps(req.body if req.body is not None else {})
    resp = await jp_fetch("gpuplat", "api", *req.path.split("/"), **kw)
    return resp.code, resp.body.decode("utf-8", "replace")


async def read_stream(
    port: int, path: str, params: dict[str, str], headers: dict[str, str], until: bytes
) -> tuple[int, str]:
    """GET an event stream over a plain socket; read until `until` (or the end, or the deadline), then close."""
    reader, writer = await asyncio.open_connection("localhost", port)
    try:
        target = f"{path}?{urlencode(params)}" if params else path
        head = [f"GET {target} HTTP/1.1", f"Host: localhost:{port}", "Connection: close"]
        head += [f"{k}: {v}" for k, v in headers.items()]
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode())
        await writer.drain()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + STREAM_SECONDS
        raw = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), STREAM_SECONDS)
        status = int(raw.split(b" ", 2)[1])
        chunked = b"transfer-encoding: chunked" in raw.lower()
        data = b""
        while until not in _dechunk(data, chunked):
            left = deadline - loop.time()
            if left <= 0:
                break
            try:
                more = await asyncio.wait_for(reader.read(1 << 16), left)
            except TimeoutError:
                break
            if not more:
                break
            data += more
        return status, _dechunk(data, chunked).decode("utf-8", "replace")
    finally:
        writer.close()


def _dechunk(data: bytes, chunked: bool) -> bytes:
    if not chunked:
        return data
    out, i = b"", 0
    while True:
        eol = data.find(b"\r\n", i)
        if eol < 0:
            return out
        size = int(data[i:eol].split(b";")[0] or b"0", 16)
        if size == 0 or len(data) < eol + 2 + size:
            return out + data[eol + 2 : eol + 2 + size]
        out += data[eol + 2 : eol + 2 + size]
        i = eol + 4 + size


def leaks(w: World, caller: str | None, body: str, sent: str) -> list[str]:
    """What of the teams the caller may not see is in the answer (the caller's own input aside)."""
    found = []
    known_users = {caller, *ADMINS} | {u for p in PROJECTS if sees(caller, p) for u in MEMBERS[p]}
    for p in PROJECTS:
        if sees(caller, p):
            continue
        found += [s for s in w.secrets[p] if s in body and s not in sent]
        for u in MEMBERS[p]:
            if u not in known_users and re.search(rf"\b{u}\b", body) and not re.search(rf"\b{u}\b", sent):
                found.append(f"user {u}")
    return found


async def test_access_matrix(api: Any, jp_fetch: Any, jp_http_port: int, jp_base_url: str) -> None:
    w = await build_world(api)
    cells = [cell for op in operations() for cell in GENERATORS[op](w, api)]
    problems: list[str] = []
    per_op: dict[str, int] = {}
    for cell in cells:
        per_op[cell.op] = per_op.get(cell.op, 0) + 1
        if cell.before is not None:
            await cell.before()
        code, body = await call(jp_fetch, jp_http_port, jp_base_url, cell.caller, cell.req)
        if cell.after is not None:
            await cell.after()
        sent = cell.req.path + json.dumps(cell.req.params) + json.dumps(cell.req.body)
        expected = cell.expect
        if (code // 100 == 2) != (expected // 100 == 2) or (code != expected and expected // 100 != 2):
            problems.append(f"{cell.label()}: {code}, expected {expected}: {body[:300]}")
            continue
        if code // 100 != 2 and '"error"' not in body:
            problems.append(f"{cell.label()}: {code} without the error shape: {body[:300]}")
        if found := leaks(w, cell.caller, body, sent):
            problems.append(f"{cell.label()}: {code} leaks {sorted(set(found))}: {body[:600]}")
        if code // 100 == 2 and cell.check is not None and (why := cell.check(code, body)):
            problems.append(f"{cell.label()}: {why}")
    live = await live_event_cells(w, api, jp_http_port, jp_base_url)
    problems += live
    cells += [Cell("GET events", "live", c, None, Req("GET", "events"), anyone(c)) for c in CALLERS]
    per_op["GET events"] += len(CALLERS)
    print(f"\naccess matrix: {len(cells)} cells over {len(per_op)} operations; {len(problems)} problems")
    for op, n in per_op.items():
        print(f"  {n:4d}  {op}")
    assert not problems, f"{len(problems)} of {len(cells)} cells wrong:\n" + "\n".join(problems)
    assert set(per_op) == set(GENERATORS)
    assert len(cells) >= MIN_CELLS, len(cells)


class LiveStream:
    """One caller's events stream, read in the background until closed."""

    def __init__(self, port: int, path: str, caller: str | None) -> None:
        self.port, self.path, self.caller = port, path, caller
        self.data = b""
        self.status = 0
        self.task: asyncio.Task[None] | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def open(self) -> None:
        reader, self.writer = await asyncio.open_connection("localhost", self.port)
        head = [f"GET {self.path} HTTP/1.1", f"Host: localhost:{self.port}", "Connection: close"]
        head += [f"{k}: {v}" for k, v in _auth(self.caller).items()]
        self.writer.write(("\r\n".join(head) + "\r\n\r\n").encode())
        await self.writer.drain()
        raw = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), STREAM_SECONDS)
        self.status = int(raw.split(b" ", 2)[1])
        self.chunked = b"transfer-encoding: chunked" in raw.lower()
        self.task = asyncio.ensure_future(self._read(reader))

    async def _read(self, reader: asyncio.StreamReader) -> None:
        while more := await reader.read(1 << 16):
            self.data += more

    @property
    def text(self) -> str:
        return _dechunk(self.data, self.chunked).decode("utf-8", "replace")

    def close(self) -> None:
        if self.task is not None:
            self.task.cancel()
        if self.writer is not None:
            self.writer.close()


async def live_event_cells(w: World, api: Any, port: int, base: str) -> list[str]:
    """Every caller follows the events stream while both teams' runs change: each sees its own teams' only.

    A stream is read until a keep-alive comment arrives after the last change (heartbeat=1: a
    second without events), so every event published by then was either sent or filtered out."""
    streams = [LiveStream(port, f"{base}gpuplat/api/events?heartbeat=1", c) for c in CALLERS]
    problems: list[str] = []
    try:
        for s in streams:
            await s.open()
        authed = [s for s in streams if s.status == 200]

        async def all_ready() -> bool:
            return all("event: ready" in s.text for s in authed)

        await wait_for(all_ready, STREAM_SECONDS, "every events stream to be ready")
        marks = {}
        for p in PROJECTS:  # one run per team, submitted and stopped while the streams follow
            name = f"{p}-live-{w.tag}"
            run = await api.submit(MEMBER_OF[p], project=p, name=name, queue="parked", command=["true"])
            w.keep(p, run["id"], name)
            await api.ok("POST", f"runs/{run['id']}/stop", "ops")
            marks[p] = run["id"]
        seen = {id(s): len(s.text) for s in streams}

        async def quiet_after_changes() -> bool:
            return all(": keep-alive" in s.text[seen[id(s)] :] for s in authed)

        await wait_for(quiet_after_changes, STREAM_SECONDS, "a keep-alive after the changes on every stream")
        for s in streams:
            label = f"GET events [live] as {s.caller or 'anonymous'}"
            if s.status != anyone(s.caller):
                problems.append(f"{label}: {s.status}, expected {anyone(s.caller)}")
                continue
            if found := leaks(w, s.caller, s.text, ""):
                problems.append(f"{label}: leaks {sorted(set(found))}: {s.text[-600:]}")
            for p in PROJECTS:
                if s.status == 200 and sees(s.caller, p) and '"status": "stopped"' not in s.text.split(marks[p])[-1]:
                    problems.append(f"{label}: {p}'s run {marks[p]} did not arrive stopped: {s.text[-600:]}")
    finally:
        for s in streams:
            s.close()
    return problems


async def test_a_run_behind_another_teams_head_learns_nothing_of_it(
    api: Any, jp_fetch: Any, jp_http_port: int, jp_base_url: str
) -> None:
    """In a shared strict FIFO queue, team-a's run waits behind team-b's head: its record, explanation,
    the runs list, the events and the queue view say so without naming that run or its user."""
    tag = uuid.uuid4().hex[:8]
    q = SHARED_STRICT["name"]
    hold_name, head_name = f"team-b-strict-hold-{tag}", f"team-b-strict-head-{tag}"
    hold = await api.submit(
        "erin", project="team-b", name=hold_name, queue=q, command=[sys.executable, "-c", hold_code(f"HOLD-{tag}")]
    )
    await api.wait_log(hold["id"], f"HOLD-{tag}", user="erin", timeout=30)
    head = await api.submit("erin", project="team-b", name=head_name, queue=q, command=["true"])  # her per-user limit
    behind = await api.submit("bob", project="team-a", name=f"team-a-behind-{tag}", queue=q, command=["true"])

    last: dict[str, Any] = {}

    async def behind_the_head() -> bool:
        last.update(await api.run(behind["id"], "bob"))
        return bool(last["status"] == "queued" and last["reason"] == "BehindQueueHead")

    try:
        await wait_for(behind_the_head, 20, "team-a's run waiting behind the head")
    except AssertionError as exc:
        raise AssertionError(f"{exc}: {last['status']} {last['reason']} {last['message']}") from None
    secrets = {hold["id"], head["id"], hold_name, head_name}
    reads = [
        Req("GET", f"runs/{behind['id']}"),
        Req("GET", f"runs/{behind['id']}/explain"),
        Req("GET", "runs", {"project": "team-a"}),
        Req("GET", "queues"),
        Req("GET", "events", {"since": "0"}, stream_until=b"event: ready"),
    ]
    problems = []
    for caller in ("alice", "bob", "carol"):
        for req in reads:
            code, body = await call(jp_fetch, jp_http_port, jp_base_url, caller, req)
            found = sorted(x for x in secrets if x in body) + (["user erin"] if re.search(r"\berin\b", body) else [])
            if code != 200 or found:
                problems.append(f"{req.method} {req.path} as {caller}: {code}, names {found}: {body[:800]}")
            if code == 200 and req.path == "queues":  # the head is counted, not named
                view = next(x for x in json.loads(body)["queues"] if x["name"] == q)
                mine = [p for p in view["pending_runs"] if p["id"] == behind["id"]]
                if view["pending_hidden"] < 1 or len(mine) != 1 or mine[0]["position"] < 2:
                    problems.append(f"GET queues as {caller}: {q} pending {view}")
            if code == 200 and req.path == "runs":  # the row says why it waits, as explain does
                row = next(r for r in json.loads(body)["runs"] if r["id"] == behind["id"])
                if (row["waiting"] or {}).get("reason") != "BehindQueueHead":
                    problems.append(f"GET runs as {caller}: waiting {row['waiting']}")
    assert not problems, "\n".join(problems)
