"""A hypothesis state machine over the engine: random steps, invariants after every one.

A real `Engine` over a real SQLite `Store` in a temp dir, the scripted `FakeExecutor` (or
`FakeClusterExecutor`) and a `FakeClock`; 12 queues (a 13th name is added and removed by config
changes) with concurrency limits, GPU/CPU/memory quotas, priorities, `max_per_user`, strict and
best-effort FIFO, a paused one and one whose GPU quota is split by flavor (h100 on devices 0-1,
then a100 on 2-5; runs ask for either, any, or one it does not offer); three projects, nine users.

Rules: submit (random user, project, queue, resources, script; some refused by policy, each
refusal predicted), finish a run, deliver observations / advance the clock, start a slow run,
stop (any run, any user: allowed or not), pause/resume, change or remove a queue, a late or
repeated observation, and restart (a new Engine over the same database and a fresh executor
that re-attaches its runs or reports some of them lost).

Invariants, checked at every dispatch as it is published (the store as committed, against the
limits the machine applied) and after every step (the store and the engine's snapshot):
concurrency, quota (gpu, cpu, memory, and per flavor) and max_per_user never exceeded by a dispatch,
devices of the run's flavor only, the snapshot's per-flavor use equal to the store's; a paused
queue dispatches nothing; strict FIFO kept; no device held by two runs; every waiting run has a
dispatch reason and a message; every timeline valid by `core.status.can_transition`; each run
dispatched at most once and handed to an executor once per dispatch (plus one re-submit per
restart that found it dispatched with no handle: `Reconciler.reload`), its work started at most
once (the re-submit adopts work that exists: the fakes share one `FakeWorkloads`, as runs outlive
a server); the store holds exactly the accepted submissions; the snapshot equals the store; nothing that
fits stays waiting; no engine task ends with an exception and the engine logs no error.

CI runs a bounded, derandomized number of examples and prints what ran (examples, steps,
dispatches, restarts, ...). A long, randomized (nightly-style) run:
`GPUPLAT_MACHINE_EXAMPLES=2000 GPUPLAT_MACHINE_STEPS=80 python -m pytest -q tests/engine/test_engine_machine.py`.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import tempfile
from collections import Counter
from collections.abc import Coroutine, Iterable
from pathlib import Path
from typing import Any, ClassVar

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule, run_state_machine_as_test

from jupyter_gpuplat.core.config import QueueConfig, parse_config
from jupyter_gpuplat.core.errors import ConfigErrors, Conflict, Forbidden, GpuPlatError, NotFound
from jupyter_gpuplat.core.reasons import DISPATCH_REASONS
from jupyter_gpuplat.core.request import RunRequest
from jupyter_gpuplat.core.resources import Quota, Resources
from jupyter_gpuplat.core.status import FINAL, HOLDING, WAITING, Status, can_transition
from jupyter_gpuplat.engine.engine import Engine
from jupyter_gpuplat.engine.state import queue_limits
from jupyter_gpuplat.executors.base import LaunchRequest
from jupyter_gpuplat.executors.fake import FakeClock, FakeClusterExecutor, FakeExecutor, FakeWorkloads, Script
from jupyter_gpuplat.store import Store

from ..flavored import FLAVORS

NIGHTLY_EXAMPLES = int(os.environ.get("GPUPLAT_MACHINE_EXAMPLES") or 0)
NIGHTLY_STEPS = int(os.environ.get("GPUPLAT_MACHINE_STEPS") or 0)

N_GPUS = 6
ADMINS = ["ops"]
QUEUES: list[dict[str, Any]] = [
    {"name": "a100", "priority": 10, "concurrency": 3, "quota": {"gpu": 4}, "ordering": "strict_fifo"},
    {"name": "batch", "quota": {"gpu": 6, "cpu": "8"}, "max_per_user": 2},
    {"name": "interactive", "priority": 50, "concurrency": 2, "max_per_user": 1},
    {"name": "fifo", "ordering": "strict_fifo", "concurrency": 2, "quota": {"cpu": "4", "memory": "16Gi"}},
    {"name": "cpu", "quota": {"gpu": 0, "cpu": "6", "memory": "24Gi"}},
    {"name": "held", "paused": True},
    {"name": "big", "quota": {"gpu": 6}, "concurrency": 1},
    {"name": "zero", "concurrency": 0},
    {"name": "low", "priority": -10, "max_per_user": 1, "ordering": "strict_fifo"},
    {"name": "shared"},
    {"name": "mem", "quota": {"memory": "8Gi"}, "ordering": "strict_fifo", "priority": 5},
    {
        "name": "typed",
        "concurrency": 4,
        "flavors": [{"name": "h100", "quota": {"gpu": 2}}, {"name": "a100", "quota": {"gpu": 3}}],
    },
]
FLAVOR_DEVICES = {f["name"]: set(f["devices"]) for f in FLAVORS}
# What a run may ask in placement.gpu_type: nothing, any, a flavor, one no queue offers.
ASKS = [*([None] * 8), "any", "h100", "a100", "l4"]
SPARE = "spare"  # in no config at first: config changes add it (and may remove it again)
QUEUE_NAMES = [q["name"] for q in QUEUES] + [SPARE]
# Members' traffic goes mostly to the queues with tight limits, so that runs wait there and free each other.
BUSY_QUEUES = [*(["big", "interactive", "a100", "fifo", "low", "mem", "batch", "typed"] * 3), *QUEUE_NAMES]
PROJECTS: list[dict[str, Any]] = [
    {"name": "vision", "members": {"alice": "admin", "bob": "member", "erin": "member", "carol": "viewer"}},
    {
        "name": "nlp",
        "members": {"dave": "admin", "frank": "member", "bob": "member"},
        "allowed_queues": ["batch", "interactive", "cpu", "low", "zero"],
        "default_queue": "batch",
        "max_run_resources": {"gpu": 2},
    },
    {"name": "infra", "members": {"erin": "admin", "grace": "member", "carol": "member"}, "default_queue": "cpu"},
]
PROJECT_NAMES = [p["name"] for p in PROJECTS]
USERS = ["ops", "alice", "bob", "carol", "dave", "erin", "frank", "grace", "mallory"]
# (user, project) pairs that may submit: members, project admins, a platform admin.
MEMBERSHIPS = [
    (u, p["name"]) for p in PROJECTS for u, r in sorted(p["members"].items()) if r in ("member", "admin")
] + [("ops", "vision")]
# What each run does once handed over, picked by its name (a restart may also lose runs by id).
SCRIPTS: dict[str, Script] = {
    "instant": Script.instant(),
    "later": Script.succeeds(after=10),
    "fails": Script.fails(3, after=5),
    "never": Script.never_ends(),
    "slow": Script.slow(),
    "slow-ok": Script.slow(Script.succeeds(after=5)),
    "broken": Script.cannot_start("no such image"),
    "lost": Script.lost(),
    "crash": Script.crashes_after_submit(),  # work started, handle never saved: only a restart ends the wait
}
HOLDING_VALUES = [s.value for s in HOLDING]
WAITING_VALUES = [s.value for s in WAITING]
FINAL_VALUES = {s.value for s in FINAL}

# What the machines ran, by variant: the figures the CI log shows.
RAN: dict[str, Counter[str]] = {}


def platform_body(queues: Iterable[dict[str, Any]]) -> dict[str, Any]:
    return {"admins": ADMINS, "flavors": FLAVORS, "queues": list(queues), "projects": PROJECTS}


def members(project: str) -> dict[str, str]:
    return next((p["members"] for p in PROJECTS if p["name"] == project), {})


def role(user: str, project: str) -> str | None:
    return "admin" if user in ADMINS else members(project).get(user)


def quota_of(q: QueueConfig) -> Quota:
    return q.quota.quota()


def resources_of(row: dict[str, Any]) -> Resources:
    return Resources(row["gpu"], row["cpu_milli"], row["memory_bytes"])


def asked_of(row: dict[str, Any]) -> str | None:
    """The flavor a run asked for (None: any)."""
    gpu_type = ((row.get("resolved") or {}).get("placement") or {}).get("gpu_type")
    return None if gpu_type in (None, "any") else str(gpu_type)


def over_limits(q: QueueConfig, holding: list[dict[str, Any]]) -> list[str]:
    """Every limit of `q` that the runs holding its resources exceed (each flavor's quota too)."""
    out = []
    for f in q.flavors:
        used_f = sum(r["gpu"] for r in holding if r.get("flavor") == f.name)
        if used_f > f.quota.gpu:
            out.append(f"{f.name} gpu quota {used_f}/{f.quota.gpu}")
    if q.concurrency is not None and len(holding) > q.concurrency:
        out.append(f"concurrency {len(holding)}/{q.concurrency}")
    quota = quota_of(q)
    used = sum((resources_of(r) for r in holding), Resources())
    for name, lim, u in (
        ("gpu", quota.gpu, used.gpu),
        ("cpu", quota.cpu_milli, used.cpu_milli),
        ("memory", quota.memory_bytes, used.memory_bytes),
    ):
        if lim is not None and u > lim:
            out.append(f"{name} quota {u}/{lim}")
    if q.max_per_user is not None:
        for user, n in Counter(r["user"] for r in holding).items():
            if n > q.max_per_user:
                out.append(f"max_per_user {user} {n}/{q.max_per_user}")
    return out


class GatedFake(FakeExecutor):
    """The fake, knowing which launches wait on a gate (a slow local start, or a crash after the
    work started: a submit that has not returned), so settling waits for every other task and not
    for those."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.gated: dict[str, asyncio.Task[Any]] = {}
        self.moved: asyncio.Future[None] | None = None

    async def submit(self, req: LaunchRequest) -> dict[str, Any]:
        script = self.script_of(req.run_id, req.spec.get("name"))
        task = asyncio.current_task()
        parks = script.crash_after_submit or (script.slow_start and not self.reports_start)
        if not parks or req.run_id in self.workloads.handles or task is None:
            return await super().submit(req)  # returns without waiting (adopting work that exists, too)
        self.gated[req.run_id] = task
        if self.moved is not None and not self.moved.done():
            self.moved.set_result(None)
        try:
            return await super().submit(req)
        finally:
            if self.gated.get(req.run_id) is task:
                del self.gated[req.run_id]

    def start(self, run_id: str) -> None:
        self.gated.pop(run_id, None)  # busy again from now: settling waits for it
        super().start(run_id)


class GatedFakeCluster(GatedFake, FakeClusterExecutor):
    """The cluster fake, tracked alike: its slow start returns at once (it reports `running`
    itself later); only a crash after submit parks."""


class MachineEngine(Engine):
    """Indexes metrics on the loop thread, not in a worker thread: the fake runs write none, and no
    thread's timing then reaches the order of the engine's tasks, so a derandomized run repeats exactly."""

    async def index_metrics(self, run_id: str) -> None:
        self.metrics.catch_up(run_id)


class CheckingQueue(asyncio.Queue[dict[str, Any]]):
    """A live-stream subscriber that checks each event the moment the engine publishes it."""

    def __init__(self, check: Any) -> None:
        super().__init__()
        self.check = check

    def put_nowait(self, item: dict[str, Any]) -> None:
        self.check(item)


class ErrorLog(logging.Handler):
    def __init__(self, sink: list[str]) -> None:
        super().__init__(logging.ERROR)
        self.sink = sink

    def emit(self, record: logging.LogRecord) -> None:
        self.sink.append(f"engine logged an error: {record.getMessage()}")


class EngineMachine(RuleBasedStateMachine):
    cluster: ClassVar[bool] = False
    variant: ClassVar[str] = "local"

    def __init__(self) -> None:
        super().__init__()
        self.ran = RAN.setdefault(self.variant, Counter())
        self.ran["examples"] += 1
        self.tmp = Path(tempfile.mkdtemp(prefix="gpuplat-machine-"))
        self.violations: list[str] = []
        self.loop = asyncio.new_event_loop()
        # An exception in a loop callback or an unretrieved task exception is an engine bug too.
        self.loop.set_exception_handler(
            lambda _loop, ctx: self.violations.append(f"loop: {ctx.get('message')} {ctx.get('exception')!r}")
        )
        self.clock = FakeClock()
        self.log_handler = ErrorLog(self.violations)
        logging.getLogger("jupyter_gpuplat").addHandler(self.log_handler)
        # The model: what the machine applied and what it expects.
        self.queues: dict[str, dict[str, Any]] = {q["name"]: dict(q) for q in QUEUES}
        self.accepted: set[str] = set()
        self.may_exceed: set[str] = set()  # queues whose limits a config change lowered below their use
        self.submits: Counter[str] = Counter()  # executor submits per run, across restarts
        self.relaunch_allowed: Counter[str] = Counter()
        self.dispatches: Counter[str] = Counter()  # `dispatched`/Admitted events per run (store)
        self.last_status: dict[str, str] = {}
        self.last_event: dict[str, dict[str, Any]] = {}
        self.after_event = 0
        self.lost_ids: set[str] = set()
        self.workloads = FakeWorkloads()  # the work the fakes started: it outlives a restart, as a machine's does
        self._n = 0
        self.store = Store(f"sqlite:///{self.tmp / 'gpuplat.db'}")
        self.ex = self._executor()
        self.engine = self._engine()
        self._do(self.engine.start(parse_config(platform_body(QUEUES)), source="test", by="test"))

    # ---- plumbing ---------------------------------------------------------------------
    def _new_id(self) -> str:
        self._n += 1
        return f"r-{self._n:03d}"

    def _executor(self) -> GatedFake:
        scripts = {**SCRIPTS, **{rid: Script.lost() for rid in self.lost_ids}}
        cls = GatedFakeCluster if self.cluster else GatedFake
        return cls(
            gpus=0 if self.cluster else N_GPUS,
            clock=self.clock,
            scripts=scripts,
            on_submit=self._on_submit,
            workloads=self.workloads,
        )

    def _engine(self) -> Engine:
        eng = MachineEngine(
            self.store,
            self.ex,
            artifacts_root=str(self.tmp / "artifacts"),
            clock=self.clock,
            new_id=self._new_id,
            safety_tick_seconds=3600,
            metrics_interval_seconds=3600,
        )
        eng.bus.subscribe().queue = CheckingQueue(self._on_event)
        return eng

    def _do(self, coro: Coroutine[Any, Any, Any]) -> Any:
        """Run one step's coroutine on the machine's loop, then settle the engine."""

        async def step() -> Any:
            out = await coro
            await self.settle()
            return out

        return self.loop.run_until_complete(step())

    async def settle(self) -> None:
        """`Engine.settle`, except that a launch parked on a slow start's gate is not waited for."""
        eng, d = self.engine, self.engine.dispatcher
        while True:
            if d.cycle_handle is not None:
                d.cycle_handle.cancel()
                d.run_cycle()
            for t in [t for t in eng.state.tasks if t.done()]:
                if not t.cancelled() and t.exception() is not None:
                    self.violations.append(f"engine task failed: {t.exception()!r}")
            parked = set(self.ex.gated.values())
            busy = [t for t in eng.state.tasks if not t.done() and t not in parked]
            if not busy:
                if d.cycle_handle is None:
                    return
                continue
            self.ex.moved = self.loop.create_future()
            await asyncio.wait([*busy, self.ex.moved], return_when=asyncio.FIRST_COMPLETED)
            self.ex.moved = None

    async def deliver_all(self) -> None:
        while self.ex.deliver():
            await self.settle()

    def rows(self, **filters: Any) -> list[dict[str, Any]]:
        return self.store.list_runs(PROJECT_NAMES, limit=1_000_000, **filters)

    def qcfg(self, name: str) -> QueueConfig:
        return QueueConfig.model_validate(self.queues[name])

    # ---- checks at the moment of each dispatch ----------------------------------------------
    def _on_event(self, ev: dict[str, Any]) -> None:
        if ev.get("type") == "eta":  # new start estimates: no run changed
            return
        if ev["status"] != "dispatched" or ev["reason"] != "Admitted":
            return
        self.ran["dispatches"] += 1
        rid, qname = ev["run_id"], ev["queue"]
        if qname not in self.queues:
            self.violations.append(f"{rid} dispatched by queue {qname}, which the config no longer has")
            return
        q = self.qcfg(qname)
        if q.paused:
            self.violations.append(f"{rid} dispatched by paused queue {qname}")
        holding = self.rows(status=HOLDING_VALUES, queue=qname)
        mine = next((r for r in holding if r["id"] == rid), None)
        if mine is not None and mine["flavor"] is not None:
            self.ran[f"dispatches:{mine['flavor']}"] += 1
        over = over_limits(q, holding)
        if over:
            self.violations.append(f"dispatch of {rid} in {qname} exceeds {over}")
        if q.ordering == "strict_fifo":
            me = next((r for r in holding if r["id"] == rid), None)
            if me is None:
                self.violations.append(f"{rid} published as dispatched but not holding in the store")
            else:
                earlier = [r["id"] for r in self.rows(status=WAITING_VALUES, queue=qname) if r["seq"] < me["seq"]]
                if earlier:
                    self.violations.append(f"strict FIFO {qname}: {rid} dispatched before waiting {earlier}")
        self._check_devices(self.rows(status=HOLDING_VALUES), f"at dispatch of {rid}")

    def _on_submit(self, req: LaunchRequest) -> None:
        """The executor is handed a run: it must be dispatched in the store, on the devices it holds there."""
        self.submits[req.run_id] += 1
        row = self.store.get_run(req.run_id)
        if row is None or row["status"] not in HOLDING_VALUES:
            self.violations.append(f"{req.run_id} handed to the executor while {row and row['status']}")
        elif tuple(row["devices"] or ()) != tuple(req.devices):
            self.violations.append(f"{req.run_id} launched on {req.devices}, store says {row['devices']}")

    def _check_devices(self, holding: list[dict[str, Any]], where: str) -> None:
        seen: dict[int, str] = {}
        for r in holding:
            devs = list(r["devices"] or [])
            if self.cluster:
                if devs:
                    self.violations.append(f"{r['id']} holds devices {devs} of a cluster executor {where}")
                continue
            if len(devs) != r["gpu"] or len(set(devs)) != len(devs) or not all(0 <= d < N_GPUS for d in devs):
                self.violations.append(f"{r['id']} asks {r['gpu']} GPU(s) but holds devices {devs} {where}")
            if r.get("flavor") and not set(devs) <= FLAVOR_DEVICES[r["flavor"]]:
                self.violations.append(f"{r['id']} holds devices {devs}, not all {r['flavor']}'s {where}")
            for d in devs:
                if d in seen:
                    self.violations.append(f"device {d} held by {seen[d]} and {r['id']} {where}")
                seen[d] = r["id"]

    # ---- rules ------------------------------------------------------------------------------
    @rule(
        user=st.sampled_from(USERS),
        project=st.sampled_from([*PROJECT_NAMES, "ghost"]),
        queue=st.sampled_from([None, *QUEUE_NAMES]),
        gpu=st.sampled_from([0, 1, 2, 3, 7]),
        cpu=st.sampled_from([None, "500m", "2", "5"]),
        memory=st.sampled_from([None, "1Gi", "10Gi"]),
        script=st.sampled_from(sorted(SCRIPTS)),
        ask=st.sampled_from(ASKS),
    )
    def submit_anything(
        self,
        user: str,
        project: str,
        queue: str | None,
        gpu: int,
        cpu: str | None,
        memory: str | None,
        script: str,
        ask: str | None,
    ) -> None:
        """Anyone submits anything: many are refused by policy, each refusal predicted."""
        self._submit(user, project, queue, gpu, cpu, memory, script, ask)

    @rule(
        queue=st.sampled_from(BUSY_QUEUES),
        batch=st.lists(
            st.tuples(
                st.sampled_from(MEMBERSHIPS),
                st.sampled_from([0, 1, 1, 2]),
                st.sampled_from([None, None, "500m", "2"]),
                st.sampled_from([None, None, "1Gi", "4Gi"]),
                st.sampled_from(sorted(SCRIPTS)),
                st.sampled_from([None, None, None, "any", "h100", "a100"]),
            ),
            min_size=1,
            max_size=6,
        ),
    )
    def submit(
        self, queue: str, batch: list[tuple[tuple[str, str], int, str | None, str | None, str, str | None]]
    ) -> None:
        """Members submit runs that mostly fit, several to one queue: the traffic that fills queues."""
        for who, gpu, cpu, memory, script, ask in batch:
            self._submit(*who, queue, gpu, cpu, memory, script, ask if queue == "typed" else None)

    def _submit(
        self,
        user: str,
        project: str,
        queue: str | None,
        gpu: int,
        cpu: str | None,
        memory: str | None,
        script: str,
        ask: str | None = None,
    ) -> None:
        self.ran["rule:submit"] += 1
        resources: dict[str, Any] = {"gpu": gpu}
        if cpu:
            resources["cpu"] = cpu
        if memory:
            resources["memory"] = memory
        body: dict[str, Any] = {"project": project, "command": ["true"], "name": script, "resources": resources}
        if queue:
            body["queue"] = queue
        if ask:
            body["placement"] = {"gpu_type": ask}
        expected = self._expected_refusal(user, project, queue, Resources.parse(resources), ask)
        before = self.store.count_runs()

        async def go() -> str | GpuPlatError:
            try:
                return str(self.engine.submit(user, RunRequest.model_validate(body))["id"])
            except GpuPlatError as exc:
                return exc

        out = self._do(go())
        if isinstance(out, GpuPlatError):
            assert 400 <= out.status < 500
            assert out.code == expected, (body, user, out.code, out.message)
            assert self.store.count_runs() == before, "a refused submission left a run behind"
            self.ran["refused"] += 1
        else:
            assert expected is None, (body, user, "accepted, expected", expected)
            self.accepted.add(out)
            self.ran["accepted"] += 1

    def _expected_refusal(
        self, user: str, project: str, queue: str | None, req: Resources, ask: str | None = None
    ) -> str | None:
        """The code of the first violation submit must raise (None: accepted), from the machine's own model."""
        r = role(user, project) if project in PROJECT_NAMES else None
        if r is None:
            return "UnknownProject"
        if r == "viewer":
            return "Forbidden"
        pr = next(p for p in PROJECTS if p["name"] == project)
        qname = queue or pr.get("default_queue")
        allowed = pr.get("allowed_queues") or list(self.queues)
        if not qname:
            return "NoQueue"
        if qname not in self.queues:
            return "UnknownQueue"
        if qname not in allowed:
            return "QueueNotAllowed"
        quota = quota_of(self.qcfg(qname))
        if (
            (quota.gpu is not None and req.gpu > quota.gpu)
            or (quota.cpu_milli is not None and req.cpu_milli > quota.cpu_milli)
            or (quota.memory_bytes is not None and req.memory_bytes > quota.memory_bytes)
        ):
            return "ExceedsQueueQuota"
        cap = (pr.get("max_run_resources") or {}).get("gpu")
        if cap is not None and req.gpu > cap:
            return "MaxRunResources"
        if not self.cluster and req.gpu > N_GPUS:
            return "NoCapacity"
        offered = {f.name: f.quota.gpu for f in self.qcfg(qname).flavors}
        asked = None if ask in (None, "any") else ask
        if asked is not None and asked not in offered:
            return "FlavorNotOffered"
        caps = [g for n, g in offered.items() if asked is None or n == asked]
        if caps and req.gpu > max(caps):
            return "ExceedsQueueQuota"
        return None

    def _finishable(self) -> list[str]:
        """Runs whose work exists: only those can end (also one whose submit has not returned)."""
        return sorted(
            rid for rid, a in self.engine.active.items() if a.status in HOLDING and rid in self.workloads.handles
        )

    @precondition(lambda self: self._finishable())
    @rule(data=st.data(), code=st.sampled_from([0, 0, 1, 137]))
    def finish(self, data: st.DataObject, code: int) -> None:
        """The executor reports the end of a run it was handed (also one being stopped)."""
        self.ran["rule:finish"] += 1
        rid = data.draw(st.sampled_from(self._finishable()), label="run")
        self.ex.finish(rid, code)
        self._do(self.deliver_all())
        row = self.store.get_run(rid)
        assert row is not None and row["status"] in FINAL_VALUES, (rid, row and row["status"])

    @rule(seconds=st.sampled_from([0, 0, 1, 5, 10, 60]))
    def advance(self, seconds: float) -> None:
        """Time passes; every observation due is delivered."""
        self.ran["rule:advance"] += 1
        self.ex.clock.advance(seconds)
        self._do(self.deliver_all())

    def _slow(self) -> list[str]:
        return sorted(
            rid
            for rid, req in self.ex.launched.items()
            if rid in self.engine.active and self._parks(self.ex.script_of(rid, req.spec.get("name")))
        )

    @staticmethod
    def _parks(script: Script) -> bool:
        return script.slow_start or script.crash_after_submit

    @precondition(lambda self: self._slow())
    @rule(data=st.data())
    def start_slow_run(self, data: st.DataObject) -> None:
        """A slow start completes (the local submit returns, the cluster reports `running`), or a
        submit that was to crash returns late after all."""
        self.ran["rule:start_slow"] += 1
        rid = data.draw(st.sampled_from(self._slow()), label="run")
        self.ex.start(rid)
        self._do(self.deliver_all())

    @precondition(lambda self: self.accepted)
    @rule(data=st.data(), user=st.sampled_from(USERS))
    def stop(self, data: st.DataObject, user: str) -> None:
        """Stop any run, in any state, as anyone: allowed, forbidden, invisible or already ended."""
        self.ran["rule:stop"] += 1
        rid = data.draw(st.sampled_from(sorted(self.accepted)), label="run")
        row = self.store.get_run(rid)
        assert row is not None
        r = role(user, row["project"])
        may = r is not None and (r in ("member", "admin") if user == row["user"] else r == "admin")
        expected: type[GpuPlatError] | None = None
        if r is None:
            expected = NotFound
        elif not may:
            expected = Forbidden
        elif row["status"] in FINAL_VALUES:
            expected = Conflict

        async def go() -> GpuPlatError | None:
            try:
                await self.engine.stop(user, rid)
            except GpuPlatError as exc:
                return exc
            return None

        err = self._do(go())
        if expected is None:
            assert err is None, (rid, user, err)
            after = self.store.get_run(rid)
            assert after is not None
            if row["status"] in WAITING_VALUES:
                assert after["status"] == "stopped"
            else:
                assert after["status"] == "stopping"
                assert after["stop_requested_by"] == (row["stop_requested_by"] or user)
            self.ran["stopped"] += 1
        else:
            assert type(err) is expected, (rid, user, row["status"], err)
            after = self.store.get_run(rid)
            assert after is not None and len(after["timeline"]) == len(row["timeline"])

    def pause_or_resume(self, user: str, name: str, paused: bool) -> None:
        self.ran["rule:pause"] += 1
        expected = Forbidden if user not in ADMINS else NotFound if name not in self.queues else None
        after = {**self.queues, name: {**self.queues[name], "paused": paused}} if name in self.queues else self.queues
        err = self._admin(lambda: self.engine.admin.set_paused_as(user, name, paused), after)
        assert type(err) is (expected or type(None)), (user, name, err)

    @rule(
        user=st.sampled_from(["ops", "ops", "ops", "ops", "dave"]),
        name=st.sampled_from(QUEUE_NAMES),
        concurrency=st.sampled_from([None, 0, 1, 2, 3, 5]),
        gpu=st.sampled_from([None, 0, 1, 2, 4, 6]),
        cpu=st.sampled_from([None, "1", "4", "8"]),
        memory=st.sampled_from([None, "4Gi", "16Gi"]),
        max_per_user=st.sampled_from([None, 1, 2]),
        ordering=st.sampled_from(["best_effort_fifo", "strict_fifo"]),
        priority=st.sampled_from([-10, 0, 10, 50]),
        action=st.sampled_from(["put", "put", "pause", "resume", "remove"]),
    )
    def change_queue(
        self,
        user: str,
        name: str,
        concurrency: int | None,
        gpu: int | None,
        cpu: str | None,
        memory: str | None,
        max_per_user: int | None,
        ordering: str,
        priority: int,
        action: str,
    ) -> None:
        """An admin write: replace (or create) a queue with new limits, its pause state kept;
        pause or resume it; or remove it. Sometimes by a user who may not."""
        if action == "remove":
            self.remove_queue(user, name)
            return
        if action in ("pause", "resume"):
            self.pause_or_resume(user, name, action == "pause")
            return
        self.ran["rule:change_queue"] += 1
        quota = {k: v for k, v in (("gpu", gpu), ("cpu", cpu), ("memory", memory)) if v is not None}
        item: dict[str, Any] = {"name": name, "priority": priority, "ordering": ordering, "quota": quota}
        if concurrency is not None:
            item["concurrency"] = concurrency
        if max_per_user is not None:
            item["max_per_user"] = max_per_user
        if self.queues.get(name, {}).get("paused"):
            item["paused"] = True
        put = lambda: self.engine.admin.put_queue_as(user, name, lambda: QueueConfig.model_validate(item))  # noqa: E731
        err = self._admin(put, {**self.queues, name: item})
        assert type(err) is (Forbidden if user not in ADMINS else type(None)), (user, name, err)

    def remove_queue(self, user: str, name: str) -> None:
        """Delete a queue: refused while a project names it or runs wait or hold in it."""
        self.ran["rule:remove_queue"] += 1
        referenced = any(name in (p.get("allowed_queues") or []) or name == p.get("default_queue") for p in PROJECTS)
        busy = bool(self.rows(status=[*WAITING_VALUES, *HOLDING_VALUES], queue=name))
        expected: type[GpuPlatError] | None
        if user not in ADMINS:
            expected = Forbidden
        elif name not in self.queues:
            expected = NotFound
        elif referenced:
            expected = ConfigErrors
        elif busy:
            expected = Conflict
        else:
            expected = None
        after = {k: v for k, v in self.queues.items() if k != name}
        err = self._admin(lambda: self.engine.admin.delete_as(user, "queues", name), after)
        assert type(err) is (expected or type(None)), (user, name, err)
        if err is None:
            self.may_exceed.discard(name)
            self.ran["removed"] += 1

    def _admin(self, write: Any, after: dict[str, dict[str, Any]]) -> GpuPlatError | None:
        """An admin write; the model takes `after` as the config first (the cycle it wakes checks
        its dispatches against it), and goes back if the write is refused."""
        before, self.queues = self.queues, after
        for name in after:
            if over_limits(self.qcfg(name), self.rows(status=HOLDING_VALUES, queue=name)):
                self.may_exceed.add(name)  # lowered below what its runs hold: they keep it, no more dispatch

        async def go() -> GpuPlatError | None:
            try:
                write()
            except GpuPlatError as exc:
                return exc
            return None

        err: GpuPlatError | None = self._do(go())
        if err is not None:
            self.queues = before
        return err

    @precondition(lambda self: self.accepted)
    @rule(data=st.data(), final=st.booleans())
    def late_observation(self, data: st.DataObject, final: bool) -> None:
        """A repeated final or a `running` after the end: an ended run's record does not change.
        Progress of a run whose work exists (also before its submit returned): it runs, or stays stopping."""
        self.ran["rule:late"] += 1
        rid = data.draw(st.sampled_from(sorted(self.accepted)), label="run")
        row = self.store.get_run(rid)
        assert row is not None
        if row["status"] not in FINAL_VALUES:
            if rid not in self._finishable():
                return
            self.ex.emit(rid, *(("starting", "ImagePullBackOff") if final else ("running", "Running")))
            self._do(self.deliver_all())
            after = self.store.get_run(rid)
            assert after is not None
            # Never a step back (an observation due before this one may also have ended it).
            if row["status"] == "stopping":
                allowed = {"stopping"}
            elif row["status"] == "running" or not final:
                allowed = {"running"}
            else:
                allowed = {"starting", "running"}  # a warning while it starts
            assert after["status"] in allowed | FINAL_VALUES, (rid, row["status"], after["status"])
            return
        if final:
            self.ex.finish(rid, 1)
        else:
            self.ex.emit(rid, "running", "Started")
        self._do(self.deliver_all())
        after = self.store.get_run(rid)
        assert after is not None and (after["status"], len(after["timeline"])) == (row["status"], len(row["timeline"]))

    @precondition(lambda self: self.engine.active)
    @rule(data=st.data())
    def restart(self, data: st.DataObject) -> None:
        """The server goes away (undelivered observations with it); a new engine over the same
        database and a fresh executor re-attaches each run, or finds some of them lost."""
        self.ran["rule:restart"] += 1
        holding = {r["id"]: r for r in self.rows(status=HOLDING_VALUES)}
        with_handle = sorted(rid for rid, r in holding.items() if r["handle"] is not None)
        lose = data.draw(st.sets(st.sampled_from(with_handle)), label="lost") if with_handle else set()
        self.lost_ids |= lose
        for rid, r in holding.items():
            if r["handle"] is None:
                self.relaunch_allowed[rid] += 1  # no handle saved: submitted again, adopting work that exists
        submits_before = Counter(self.submits)

        async def go() -> None:
            tasks = list(self.engine.state.tasks)
            await self.engine.close()
            await asyncio.gather(*tasks, return_exceptions=True)
            self.store.close()
            self.store = Store(f"sqlite:///{self.tmp / 'gpuplat.db'}")
            self.ex = self._executor()
            self.engine = self._engine()
            await self.engine.start()

        self._do(go())
        for rid, r in holding.items():
            after = self.store.get_run(rid)
            assert after is not None
            if r["handle"] is None:
                assert self.submits[rid] == submits_before[rid] + 1, (rid, "not launched again")
            elif rid in lose or r["name"] == "lost":
                assert (after["status"], after["reason"]) == ("failed", "Lost"), (rid, after["status"])
            else:
                assert rid in self.ex.attached
                assert after["status"] == r["status"], (rid, r["status"], after["status"])
                assert any(e["reason"] == "Reattached" for e in after["timeline"])
        self.ran["restarts"] += 1

    # ---- invariants after every step -----------------------------------------------------
    @invariant()
    def consistent(self) -> None:
        self.ran["checks"] += 1
        assert not self.violations, self.violations
        rows = {r["id"]: r for r in self.rows()}
        assert set(rows) == self.accepted, ("runs in the store", sorted(rows), "accepted", sorted(self.accepted))
        assert self.store.count_runs() == len(self.accepted)
        self._check_timelines(rows)
        self._check_snapshot(rows)
        holding = [r for r in rows.values() if r["status"] in HOLDING_VALUES]
        self._check_devices(holding, "after a step")
        self._check_limits(holding)
        self._check_nothing_fits_and_waits(rows, holding)
        self._check_launches(rows)
        assert not self.violations, self.violations

    def _check_timelines(self, rows: dict[str, dict[str, Any]]) -> None:
        for ev in self.store.events_since(self.after_event, None, limit=1_000_000):
            self.after_event = ev["id"]
            rid, status = ev["run_id"], ev["status"]
            prev = self.last_status.get(rid)
            if prev is None:
                assert status == "created", (rid, "timeline starts with", status)
            else:
                assert can_transition(Status(prev), Status(status)), (rid, prev, status, ev["reason"])
            if status == "dispatched" and ev["reason"] == "Admitted":
                self.dispatches[rid] += 1
                assert self.dispatches[rid] == 1, (rid, "dispatched twice")
            self.last_status[rid] = status
            self.last_event[rid] = ev
        for rid, r in rows.items():
            last = self.last_event[rid]
            assert (r["status"], r["reason"], r["message"]) == (last["status"], last["reason"], last["message"])
            if r["status"] in WAITING_VALUES:
                # Waiting: why, with the numbers, as the dispatcher decided it.
                assert r["reason"] in DISPATCH_REASONS and r["message"], (rid, r["reason"], r["message"])

    def _check_snapshot(self, rows: dict[str, dict[str, Any]]) -> None:
        eng = self.engine
        live = {rid: r for rid, r in rows.items() if r["status"] not in FINAL_VALUES}
        assert set(eng.active) == set(live)
        for rid, a in eng.active.items():
            r = live[rid]
            assert (a.status.value, a.queue, a.user) == (r["status"], r["queue"], r["user"])
            assert tuple(a.devices) == tuple(r["devices"] or ()) or a.status in WAITING
            assert (a.handle is None) == (r["handle"] is None), rid
        assert set(eng.queues) == set(self.queues)
        for name, q in eng.queues.items():
            assert q.limits == queue_limits(self.qcfg(name)), name
            mine = [r for r in live.values() if r["queue"] == name]
            held = [r for r in mine if r["status"] in HOLDING_VALUES]
            assert set(q.held) == {r["id"] for r in held}, name
            assert {p.id for p in q.ordered_pending()} == {r["id"] for r in mine if r["status"] in WAITING_VALUES}
            assert q.used == sum((resources_of(r) for r in held), Resources()), name
            by_flavor: dict[str, Resources] = {}
            for r in held:
                if r["flavor"] is not None:
                    by_flavor[r["flavor"]] = by_flavor.get(r["flavor"], Resources()) + resources_of(r)
            # A flavor in use by nothing but zero-GPU runs counts nothing: absent and zero are the same use.
            by_flavor = {f: used for f, used in by_flavor.items() if used != Resources()}
            assert q.used_by_flavor == by_flavor, (name, q.used_by_flavor, by_flavor)
            assert q.per_user == dict(Counter(r["user"] for r in held)), name
        assert {r["queue"] for r in live.values()} <= set(self.queues), "a run in a queue the config lost"
        if not self.cluster:
            used = {d for r in live.values() if r["status"] in HOLDING_VALUES for d in r["devices"] or ()}
            assert eng.state.free_devices == set(range(N_GPUS)) - used
            assert eng.free_gpus == N_GPUS - len(used)
        else:
            assert eng.free_gpus is None

    def _check_limits(self, holding: list[dict[str, Any]]) -> None:
        for name in self.queues:
            over = over_limits(self.qcfg(name), [r for r in holding if r["queue"] == name])
            if not over:
                self.may_exceed.discard(name)
            else:
                assert name in self.may_exceed, (name, over)

    def _check_nothing_fits_and_waits(self, rows: dict[str, dict[str, Any]], holding: list[dict[str, Any]]) -> None:
        """Settled: no waiting run fits every limit (a lost wake-up would leave one), by the model's rules."""
        free = None if self.cluster else N_GPUS - sum(r["gpu"] for r in holding)
        for name in self.queues:
            q = self.qcfg(name)
            waiting = sorted(
                (r for r in rows.values() if r["queue"] == name and r["status"] in WAITING_VALUES),
                key=lambda r: r["seq"],
            )
            if q.paused or not waiting:
                continue
            held = [r for r in holding if r["queue"] == name]
            candidates = waiting[:1] if q.ordering == "strict_fifo" else waiting
            for r in candidates:
                if q.max_per_user is not None and sum(h["user"] == r["user"] for h in held) >= q.max_per_user:
                    continue
                if free is not None and r["gpu"] > free:
                    continue
                for flavor in [f.name for f in q.flavors if asked_of(r) in (None, f.name)] or [None]:
                    if flavor is not None and not self.cluster:
                        taken = {d for h in holding for d in h["devices"] or ()}
                        if r["gpu"] > len(FLAVOR_DEVICES[flavor] - taken):
                            continue
                    if not over_limits(q, [*held, {**r, "flavor": flavor}]):
                        raise AssertionError(
                            f"{r['id']} fits queue {name} ({q}) on flavor {flavor} yet waits: "
                            f"{r['reason']} {r['message']}"
                        )

    def _check_launches(self, rows: dict[str, dict[str, Any]]) -> None:
        for rid, r in rows.items():
            # Idempotent launch: a second submit (after a restart) adopts the work, never starts it again.
            assert self.workloads.starts[rid] <= 1, (rid, "work started", self.workloads.starts[rid], "times")
            if r["handle"] is not None:
                assert rid in self.workloads.handles, (rid, "has a handle but no work was started")
            n, allowed = self.submits[rid], 1 + self.relaunch_allowed[rid]
            if self.dispatches[rid]:
                assert 1 <= n <= allowed, (rid, "handed to the executor", n, "times; allowed", allowed)
            else:
                assert n == 0, (rid, "handed to the executor but never dispatched")

    def teardown(self) -> None:
        async def close() -> None:
            tasks = list(self.engine.state.tasks)
            await self.engine.close()
            await asyncio.gather(*tasks, return_exceptions=True)

        try:
            self.loop.run_until_complete(close())
            self.loop.run_until_complete(self.loop.shutdown_default_executor())
        finally:
            self.loop.close()
            self.store.close()
            logging.getLogger("jupyter_gpuplat").removeHandler(self.log_handler)
            shutil.rmtree(self.tmp, ignore_errors=True)


class ClusterEngineMachine(EngineMachine):
    """The same rules over a cluster-like executor: no devices of ours, it reports `running` itself."""

    cluster = True
    variant = "cluster"


def _settings(examples: int, steps: int) -> settings:
    return settings(
        max_examples=NIGHTLY_EXAMPLES or examples,
        stateful_step_count=NIGHTLY_STEPS or steps,
        deadline=None,
        # Reproducible in CI; a nightly run explores new seeds.
        derandomize=not NIGHTLY_EXAMPLES,
        database=None,
        print_blob=True,
    )


@pytest.mark.parametrize(
    ("machine", "examples", "steps"),
    [(EngineMachine, 60, 40), (ClusterEngineMachine, 20, 40)],
    ids=["local", "cluster"],
)
def test_engine_state_machine(
    machine: type[EngineMachine], examples: int, steps: int, capsys: pytest.CaptureFixture[str]
) -> None:
    RAN.pop(machine.variant, None)
    run_state_machine_as_test(machine, settings=_settings(examples, steps))
    ran = RAN[machine.variant]
    ran["steps"] = ran["checks"] - ran["examples"]  # the invariants run after each step and once at the start
    with capsys.disabled():
        figures = ", ".join(f"{k} {v}" for k, v in sorted(ran.items()))
        print(f"\nengine state machine ({machine.variant}): {figures}; 0 violations")
    assert ran["examples"] > 0 and ran["steps"] > 0
    # The machine reached the states that matter, not only the easy ones.
    for what in ("dispatches", "restarts", "accepted", "refused", "stopped", "removed"):
        assert ran[what] > 0, (what, dict(ran))
    for name in ("submit", "finish", "advance", "start_slow", "stop", "pause", "change_queue", "remove_queue"):
        assert ran[f"rule:{name}"] > 0, (name, dict(ran))
