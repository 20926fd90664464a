"""The dispatcher: submission, the admission cycle, dispatch recording and launch hand-off.

Decisions are made by the pure functions in core.admission over the `QueueState`s of
the snapshot (decide → assume → persist). A dispatch is recorded before the executor
starts the work. Wake-ups merge: many events before the loop turns cost one cycle.
"""

from __future__ import annotations

import asyncio
import errno
import functools
import json
import shutil
from collections.abc import Callable
from typing import Any, Protocol

from ..core.admission import (
    PendingRun,
    QueueState,
    decide,
    order_queues,
    pick_devices,
    probe_flavor,
    probe_wait,
    wait_reason,
)
from ..core.artifacts import run_dir
from ..core.errors import GpuPlatError, Unprocessable
from ..core.matrix import count, expand
from ..core.notes import run_notes
from ..core.refusal import check, judged
from ..core.request import Entrypoint, RunRequest
from ..core.resources import Resources, format_memory
from ..core.search import BayesSearch
from ..core.status import Reason, Status
from ..executors.base import LaunchRequest
from ..store import StoreUnavailable
from ..store.insights import record_refusal
from .state import ActiveRun, Change, EngineState, log
from .sweep_rows import child_events, child_rows, parent_row
from .sweeps import Sweep


class RunEnder(Protocol):
    """What the dispatcher needs of the reconciler: a failed launch is a finish; a stop waits for the hand-over."""

    def finish(self, a: ActiveRun, status: Status, reason: str, message: str, **fields: Any) -> None: ...

    async def stop_in_executor(self, a: ActiveRun) -> None: ...

    def record_running(self, a: ActiveRun, reason: str, message: str, **fields: Any) -> None: ...

    def sweep_dispatched(self, child: ActiveRun) -> None: ...

    def register_sweep(self, parent: ActiveRun, children: list[ActiveRun]) -> Sweep: ...


class Dispatcher:
    def __init__(
        self, state: EngineState, *, artifacts_root: str, new_id: Callable[[], str], min_free_artifacts_bytes: int = 0
    ) -> None:
        self.s = state
        self.artifacts_root = artifacts_root
        self.min_free_artifacts_bytes = min_free_artifacts_bytes
        self.new_id = new_id
        self.reconciler: RunEnder  # set by the Engine
        self.dirty: set[str] = set()
        self._capacity_waiters: set[str] = set()
        self._newly_queued: list[str] = []
        self.cycle_handle: asyncio.Handle | None = None
        self.cycles = 0
        state.deferred.on_retry(self._retry_cycle)

    # ---- submission ------------------------------------------------------
    @property
    def platform_gpus(self) -> int | None:
        """The platform's GPUs in all, for the capacity rule (None: the executor places work itself)."""
        return len(self.s.devices) if self.s.assigns_devices else None

    def working_dir_violation(self, req: RunRequest) -> Unprocessable | None:
        """The executor cannot start runs in this directory (Kubernetes: off the shared artifact volume)."""
        if req.working_dir is None:
            return None
        problem = self.s.executor.check_working_dir(req.working_dir, self.artifacts_root)
        if problem:
            return Unprocessable(
                problem, "leave working_dir out, or use a directory the executor can see", code="WorkingDirUnavailable"
            )
        return None

    def preview(self, user: str, req: RunRequest) -> dict[str, Any]:
        """What submit would do: the resolved spec, where each field came from, and the verdict
        (judged as submit judges it: the same rules, hints and alternatives)."""
        res, problems = check(self.s.cfg, user, req, self.platform_gpus)
        if not res.violations:  # with an unknown preset the kind is not known: the verdict says why
            req.check_entrypoint(res.resolved.get("kind", "job"))
        wd = self.working_dir_violation(req)
        verdict = judged(self.s.cfg, user, req, res, problems, self.platform_gpus).verdict(*([wd] if wd else []))
        return {
            "resolved": res.resolved,
            "provenance": res.provenance,
            "layers": list(res.layers),
            "locks": res.locks,
            "verdict": verdict,
            "working_dir": req.working_dir,
            "notes": run_notes(res.resources.gpu),
            "waits": self.preview_wait(user, req, res.queue, res.resources, res.resolved)
            if verdict["allowed"]
            else None,
            "flavor": self.preview_flavor(user, res.queue, res.resources, res.resolved) if verdict["allowed"] else None,
        }

    def preview_flavor(self, user: str, qname: str | None, r: Resources, resolved: dict[str, Any]) -> str | None:
        """The flavor the run would take if submitted now and it fits now (None: it waits, or no flavors)."""
        q = self.s.queues.get(qname or "")
        if q is None or not q.limits.flavors:
            return None
        probe = PendingRun("preview", 2**62, q.limits.name, user, r, None, self.s.asked_flavor(resolved))
        return probe_flavor(q, probe, self.s.free_gpus, self.s.free_by_flavor)

    def preview_wait(
        self, user: str, req: RunRequest, qname: str | None, r: Resources, resolved: dict[str, Any] | None = None
    ) -> dict[str, Any] | None:
        """What the run would wait for if submitted now (as `waiting` and explain would say), else None."""
        q = self.s.queues.get(qname or "")
        if q is None or req.matrix is not None:  # a sweep's children wait each on their own
            return None
        asked = self.s.asked_flavor(resolved or {})
        probe = PendingRun("preview", 2**62, q.limits.name, user, r, None, asked)
        w, position = probe_wait(q, probe, self.s.free_gpus, self.s.free_by_flavor)
        if w.reason == Reason.ADMISSIBLE:
            return None
        return {"reason": str(w.reason), "message": w.message, "position": position}

    def submit(self, user: str, req: RunRequest) -> dict[str, Any]:
        s = self.s
        # Judged once: a policy refusal is raised with every rule, its hints and alternatives.
        res, problems = check(s.cfg, user, req, self.platform_gpus)
        kind = res.resolved.get("kind", "job")
        try:
            if not res.violations:  # as the preview: with an unknown preset the kind is not known
                req.check_entrypoint(kind)
            if problems:
                raise judged(s.cfg, user, req, res, problems, self.platform_gpus).refusal()
            wd = self.working_dir_violation(req)
            if wd:
                raise wd
        except GpuPlatError as e:  # a refusal creates no run: the insights' record of it (v9)
            record_refusal(s.store.engine, s.clock(), req.project, user, res.queue or "", e)
            raise
        # What to run, kept with the spec: each executor builds its own argv from it at launch.
        res.resolved["entrypoint"] = req.entrypoint().to_json()
        if kind == "session":
            res.resolved["session"] = {"notebook": req.notebook}
            if res.resolved.get("name") is None and req.notebook:
                res.resolved["name"] = req.notebook
        if req.working_dir is not None:
            res.resolved["working_dir"] = req.working_dir
        qname = res.queue
        assert qname is not None
        now = s.clock()
        rid = self.new_id()
        r = res.resources
        q = s.queues[qname]
        row = {
            "id": rid,
            "project": req.project,
            "user": user,
            "name": res.resolved.get("name"),
            "kind": res.resolved.get("kind", "job"),
            "queue": qname,
            "status": Status.QUEUED.value,
            "reason": Reason.SUBMITTED.value,
            "message": f"waiting for dispatch in queue {qname}",
            "request": req.model_dump(mode="json", exclude_unset=True),
            "resolved": res.resolved,
            "provenance": res.provenance,
            "gpu": r.gpu,
            "cpu_milli": r.cpu_milli,
            "memory_bytes": r.memory_bytes,
            "created_at": now,
            "queued_at": now,
            "updated_at": now,
            "working_dir": req.working_dir,
            "code": None,
        }
        evs = [
            {"status": "created", "reason": Reason.SUBMITTED.value, "message": f"submitted by {user}", "at": now},
            {
                "status": "queued",
                "reason": Reason.SUBMITTED.value,
                "message": f"waiting for dispatch in queue {qname} (priority {q.limits.priority})",
                "at": now,
            },
        ]
        if req.matrix is not None:
            return self._submit_sweep(user, req, row, evs, q)
        seq, ev_ids = s.store.create_run(row, evs)
        a = ActiveRun(rid, seq, req.project, user, qname, Status.QUEUED, r, res.resolved, times={"created_at": now})
        a.provenance = dict(res.provenance)
        a.asked = s.asked_flavor(res.resolved)
        s.active[rid] = a
        q.add_pending(a.pending())
        for ev_id, ev in zip(ev_ids, evs, strict=True):
            s.publish(ev_id, a, ev)
        self._newly_queued.append(rid)
        self.dirty.add(qname)
        self.schedule()
        # The full row, as the store now holds it, without reading it back.
        row.update(seq=seq, devices=None, handle=None, exit_code=None, stop_requested_by=None, flavor=None)
        row.update(dispatched_at=None, started_at=None, finished_at=None)
        return row

    def _submit_sweep(
        self, user: str, req: RunRequest, template: dict[str, Any], evs: list[dict[str, Any]], q: QueueState
    ) -> dict[str, Any]:
        """The parent (a record and a gate, no slot) and its children, in one transaction.

        grid, random and mapping make every child now; bayes makes `concurrency` of them, and one
        more each time one ends (asked of its search, told the child's objective).
        """
        s = self.s
        assert req.matrix is not None
        search = BayesSearch(req.matrix) if req.matrix.kind == "bayes" else None
        total = count(req.matrix)
        asked = [search.ask() for _ in range(min(req.matrix.concurrency, total))] if search else []
        points = [p for _, p in asked] if search else expand(req.matrix)
        parent = parent_row(template, req.matrix, dict(req.params or {}))
        child = parent["resolved"]["sweep"]["child"]
        rows = child_rows(self.new_id, template["id"], child, points, 0, template["created_at"])
        seqs = s.store.create_runs([parent, *rows], [evs, *child_events(rows, template["id"])])
        pa = ActiveRun(
            parent["id"], seqs[0], req.project, user, q.limits.name, Status.QUEUED, Resources(), parent["resolved"]
        )
        pa.times["created_at"] = template["created_at"]
        s.active[pa.id] = pa
        actives = self._activate(pa, rows, seqs[1:])
        sweep = self.reconciler.register_sweep(pa, actives)
        if search is not None:
            sweep.search = search
            sweep.trials = {a.id: trial for a, (trial, _) in zip(actives, asked, strict=True)}
        parent.update(seq=seqs[0], devices=None, handle=None, exit_code=None, stop_requested_by=None, parent=None)
        parent.update(dispatched_at=None, started_at=None, finished_at=None)
        return parent

    def add_children(self, pa: ActiveRun, points: list[dict[str, Any]], start: int) -> list[ActiveRun]:
        """More children of a running sweep (bayes: as its search asks), from the template it keeps."""
        rows = child_rows(self.new_id, pa.id, pa.resolved["sweep"]["child"], points, start, self.s.clock())
        seqs = self.s.store.create_runs(rows, child_events(rows, pa.id))
        return self._activate(pa, rows, seqs)

    def _activate(self, pa: ActiveRun, rows: list[dict[str, Any]], seqs: list[int]) -> list[ActiveRun]:
        """The new children in the snapshot and their queue's pending runs; a cycle comes."""
        q = self.s.queues[pa.queue]
        actives = []
        for row, seq in zip(rows, seqs, strict=True):
            r = Resources(row["gpu"], row["cpu_milli"], row["memory_bytes"])
            a = ActiveRun(row["id"], seq, row["project"], row["user"], pa.queue, Status.QUEUED, r, row["resolved"])
            a.times["created_at"], a.parent, a.provenance = row["created_at"], pa.id, dict(row["provenance"])
            a.asked = self.s.asked_flavor(row["resolved"])
            self.s.active[a.id] = a
            q.add_pending(a.pending())
            actives.append(a)
        self._newly_queued.extend(a.id for a in actives)
        self.dirty.add(pa.queue)
        self.schedule()
        return actives

    # ---- the admission cycle --------------------------------------------
    def wake(self, queue: str | None = None) -> None:
        self.dirty |= {queue} if queue else set(self.s.queues)
        self.schedule()

    def freed_devices(self) -> None:
        """Freed GPUs may unblock any queue that waited on local capacity."""
        self.dirty |= self._capacity_waiters

    def schedule(self) -> None:
        if self.cycle_handle is None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                return
            self.cycle_handle = loop.call_soon(self.run_cycle)

    def run_cycle(self) -> list[str]:
        """Decide over the snapshot, assume, persist, hand to the executor. Returns admitted ids.

        Every queue drains in the one cycle: it admits until nothing more fits, however deep.
        Its writes (each `dispatched`, then the first wait of each new run that still waits)
        are one transaction; only after it commits are the launches handed to the loop.
        """
        s = self.s
        self.cycle_handle = None
        self.cycles += 1
        dirty = [s.queues[n] for n in self.dirty if n in s.queues]
        self.dirty.clear()
        admitted: list[ActiveRun] = []
        changes: list[Change] = []
        for q in order_queues(dirty):
            self._capacity_waiters.discard(q.limits.name)
            while True:
                d = decide(q, s.free_gpus, s.free_by_flavor)
                run = d.run
                if run is None:
                    if d.capacity_blocked:
                        self._capacity_waiters.add(q.limits.name)
                    break
                devices = (
                    pick_devices(s.free_devices, run.request.gpu, d.flavor, s.device_flavor)
                    if s.assigns_devices
                    else ()
                )
                s.take_devices(devices)
                q.assume(run, devices, d.flavor)
                a = s.active[run.id]
                a.devices, a.flavor = devices, d.flavor
                admitted.append(a)
                changes.append(self._dispatch_change(a, q))
        fresh = list(self._newly_queued)
        if self._newly_queued:
            changes += self._first_waits()
        try:
            s.record_many(changes)
        except StoreUnavailable as exc:
            # Nothing was saved: take every assumption back, so memory matches the record,
            # and decide again once the store answers (the retry wakes every queue).
            self._undo(admitted, fresh)
            s.deferred.failed(exc)
            return []
        s.deferred.ok()
        self._load_provenance(admitted)
        for a in admitted:
            if a.parent is not None:  # its sweep runs from its first child's dispatch
                s.deferred.apply(
                    f"start of the sweep of {a.id}", functools.partial(self.reconciler.sweep_dispatched, a)
                )
            s.spawn(self.launch(a))
        return [a.id for a in admitted]

    def _undo(self, admitted: list[ActiveRun], fresh: list[str]) -> None:
        s = self.s
        for a in reversed(admitted):
            q = s.queues[a.queue]
            q.release(a.id)
            q.add_pending(a.pending())
            s.give_devices(a.devices)
            a.devices, a.flavor = (), None
            self.dirty.add(a.queue)
        self._newly_queued = fresh + self._newly_queued

    def _retry_cycle(self) -> None:
        """After a store fault: every queue may have admissions that were not saved."""
        self.wake()

    def _dispatch_change(self, a: ActiveRun, q: QueueState) -> Change:
        """`dispatched`, with the queue's use including this run (as it stands when it is admitted)."""
        lim = q.limits
        conc = f"{len(q.held)}/{lim.concurrency}" if lim.concurrency is not None else f"{len(q.held)}"
        gpus = f"{q.used.gpu}/{lim.quota.gpu}" if lim.quota.gpu is not None else f"{q.used.gpu}"
        dev = ",".join(map(str, a.devices)) or "none"
        fields: dict[str, Any] = {"devices": list(a.devices), "dispatched_at": self.s.clock()}
        on = ""
        if a.flavor is not None:
            fl = lim.flavor(a.flavor)
            used = q.used_by_flavor.get(a.flavor)
            on = f" on flavor {a.flavor} ({used.gpu if used else 0}/{fl.quota.gpu if fl else '?'} {a.flavor} GPUs)"
            fields["flavor"] = a.flavor
        return Change(
            a,
            Status.DISPATCHED,
            Reason.ADMITTED,
            f"admitted by queue {lim.name}{on} ({conc} runs, {gpus} GPUs in use); devices {dev}",
            fields=fields,
        )

    def _first_waits(self) -> list[Change]:
        """A run that was not dispatched in the cycle after its submission says why it waits."""
        s = self.s
        fresh, self._newly_queued = self._newly_queued, []
        out = []
        for rid in fresh:
            waiting = s.active.get(rid)
            if waiting is None or waiting.status != Status.QUEUED:
                continue
            q = s.queues[waiting.queue]
            p = q.pending(rid)
            if p is not None:
                w = wait_reason(q, p, s.free_gpus, s.free_by_flavor)
                out.append(Change(waiting, Status.QUEUED, w.reason, w.message))
        return out

    def _load_provenance(self, admitted: list[ActiveRun]) -> None:
        """Runs reloaded at start-up carry no provenance in memory: one read for the whole cycle."""
        missing = [a.id for a in admitted if a.provenance is None]
        if missing:
            found = self.s.store.provenance_of(missing)
            for a in admitted:
                if a.provenance is None:
                    a.provenance = found.get(a.id, {})

    # ---- launch hand-off ---------------------------------------------------
    async def launch(self, a: ActiveRun) -> None:
        s = self.s
        spec = a.resolved
        env = {e["name"]: e["value"] for e in spec.get("env") or [] if e.get("value") is not None}
        if spec.get("params"):
            env["GPUPLAT_PARAMS"] = json.dumps(spec["params"])
        term = spec.get("termination") or {}
        if a.provenance is None:
            a.provenance = dict((s.store.get_run(a.id) or {}).get("provenance") or {})
        req = LaunchRequest(
            run_id=a.id,
            entrypoint=Entrypoint.from_spec(spec),
            env=env,
            devices=a.devices,
            workdir=run_dir(self.artifacts_root, a.id),
            timeout_seconds=term.get("timeout_seconds"),
            spec=spec,
            project=a.project,
            user=a.user,
            provenance=a.provenance,
            working_dir=spec.get("working_dir"),
            flavor=self._flavor_of(a),
        )
        a.launching = True
        try:
            # A command without a working directory runs in the (empty) artifact directory: no file
            # to keep, and no thread hop on the dispatch path.
            if req.working_dir is not None or req.entrypoint.kind in ("cell", "script", "notebook"):
                # What code ran: a snapshot (and git state) kept before it starts; git runs in a thread.
                code = await asyncio.to_thread(s.executor.capture_code, req)
                if code is not None:
                    fields = {"code": code}
                    s.deferred.apply(f"code of {a.id}", lambda: s.store.transition(a.id, a.project, fields, None))
            full = self._disk_full_message()
            if full:
                s.deferred.apply(f"disk full for {a.id}", lambda: self._failed_start(a, Reason.DISK_FULL, full))
                a.launching = False
                return
            handle = await s.executor.submit(req)
        except Exception as exc:  # the executor's message is what the user needs
            a.launching = False
            log.warning("run %s failed to start: %s", a.id, exc)
            reason = Reason.DISK_FULL if _disk_full(exc) else Reason.START_FAILED
            message = f"could not start: {exc}"
            s.deferred.apply(f"start failure of {a.id}", lambda: self._failed_start(a, reason, message))
            return
        a.launching = False
        a.handle = handle
        s.deferred.apply(f"hand-over of {a.id}", lambda: self._handed_over(a, handle))

    def _flavor_of(self, a: ActiveRun) -> dict[str, Any] | None:
        """The chosen flavor's placement as the config declares it now (the name alone if it was removed since)."""
        if a.flavor is None:
            return None
        f = self.s.cfg.flavor(a.flavor)
        return f.model_dump(mode="json") if f is not None else {"name": a.flavor}

    def _disk_full_message(self) -> str | None:
        """A run started on a full artifacts disk could write no log and no exit record: refuse it clearly."""
        if not self.min_free_artifacts_bytes:
            return None
        try:
            free = shutil.disk_usage(self.artifacts_root).free
        except OSError:
            return None  # not there yet: the executor creates it, or says why it cannot
        if free >= self.min_free_artifacts_bytes:
            return None
        return (
            f"could not start: the artifacts disk is full ({format_memory(free)} free in {self.artifacts_root}; "
            f"a run needs at least {format_memory(self.min_free_artifacts_bytes)}); "
            "a platform admin must free space, then submit it again"
        )

    def _failed_start(self, a: ActiveRun, reason: Reason, message: str) -> None:
        if a.id in self.s.active:
            self.reconciler.finish(a, Status.FAILED, reason, message)

    def _handed_over(self, a: ActiveRun, handle: dict[str, Any]) -> None:
        s = self.s
        if a.id not in s.active:  # ended while it was being started (or while this write waited)
            return
        pid = handle.get("pid")
        where = f"pid {pid}" if pid else str(handle.get("summary") or "executor")
        started = f"started as {where} on devices {','.join(map(str, a.devices)) or 'none'}"
        if s.executor.reports_start:
            # Handed over, not running yet: the executor reports "running" when it is.
            started = f"submitted as {where}; waiting for the executor to start it"
        if a.stop_requested_by:
            # Stopped while it was being started: keep it `stopping`, then stop it.
            s.record(a, Status.STOPPING, Reason.STARTED, f"{started}; stopping as requested", handle=handle)
            s.spawn(self.reconciler.stop_in_executor(a))
            return
        if a.status == Status.RUNNING:
            # It reported running before its submit returned (or before a restart re-submitted it):
            # record the hand-over, never a step back to "starting".
            s.record(a, Status.RUNNING, Reason.SUBMITTED, f"submitted as {where}; already running", handle=handle)
            return
        if s.executor.reports_start:
            s.record(a, Status.STARTING, Reason.SUBMITTED, started, handle=handle)
            return
        self.reconciler.record_running(a, Reason.STARTED, started, handle=handle, started_at=s.clock())


def _disk_full(exc: BaseException) -> bool:
    """The executor could not write the run's files because the disk is full."""
    while exc is not None:
        if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
            return True
        exc = exc.__cause__ or exc.__context__  # type: ignore[assignment]
    return "No space left on device" in str(exc)
