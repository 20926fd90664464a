"""The Kubernetes executor: each run is a batch/v1 Job; observed through one shared cache.

`submit` prepares the run's directory (rundir.py: its code in `code/`, opened without
following links), creates the Job and returns its handle (plain JSON); from then on every
change the cache sees to the run's Job, pods or their events is explained by the
pure functions in `explain.py`, and a change of explanation becomes one
Observation (a repeated warning after something else is a new episode, never an
overwrite). Logs are followed from the pod into the run's `output.log` and drained
before the final Observation, so they survive the pod. The executor never writes
run state and never deletes a Job it does not have a run for.

What keeps runs apart (`isolation()`, isolation.py): each pod holds only its own run
(manifests.py, podsecurity.py), a session's kernel admits only its owner's server
(networkpolicy.py), and the namespace's Pod Security labels and NetworkPolicies are read
in a thread at start and again after `isolation_refresh_seconds` (namespacefacts.py).

This module keeps the contract (submit, attach, stop, the observing loop, the end); its parts
live beside it: settings.py (the traits), jobclient.py (the Job, a session's Secret and
NetworkPolicy: create, adopt, delete), runs.py (a watched run), podstate.py (how its pods
read), podlogs.py (following their logs), apiclient.py (the ApiClient's configuration),
gpusource.py with dcgm.py (GPU samples from the DCGM exporter).
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Mapping
from typing import Any

from ...core import artifacts as layout
from ...core.reasons import Reason
from ..artifacts import FilesystemArtifacts
from ..base import FAILED, RUNNING, STOPPED, Device, Executor, ExecutorError, GpuReading, LaunchRequest, Observation
from .apiclient import api_client
from .cache import ClusterCache, Snapshot, Timeouts
from .explain import DISRUPTIONS, condition, episode, explain_pod, explain_run
from .gpusource import DcgmSource
from .isolation import NamespaceFacts, isolation_controls
from .jobclient import JobClient
from .logs import wait_all
from .manifests import is_session, make_job, selector, working_dir_problem
from .namespacefacts import FactsReader, read_namespace_facts
from .podlogs import PodLogs
from .podstate import (
    container_started,
    disruption_text,
    ended_outside,
    placed_details,
    running_message,
    session_ended_outside,
)
from .rundir import prepare
from .runs import WatchedRun
from .sessions import KernelSecrets, connection_info, kernel_generation, kernel_pod
from .settings import KubernetesSettings

__all__ = ["LOG_NAME", "KubernetesExecutor", "api_client"]

LOG_NAME = layout.LOG


class KubernetesExecutor(KubernetesSettings, FilesystemArtifacts, Executor):
    """Runs each submission as a Kubernetes Job requesting `nvidia.com/gpu`."""

    name = "kubernetes"
    assigns_devices = False
    reports_start = True

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._net: Any = None
        self._facts = FactsReader(self.namespace_facts, self.namespace, self.log)
        self._runs: dict[str, WatchedRun] = {}
        self._api: Any = None
        self._core: Any = None
        self._batch: Any = None
        self._cache: ClusterCache | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._logs: PodLogs | None = None
        self._secrets: KernelSecrets | None = None
        self._jobs: JobClient | None = None
        self._synced_once = False
        self._closed = False
        self.orphans: dict[str, str] = {}  # run id → Job name: Jobs with no run record here
        self._gpu_source = DcgmSource.of(self, lambda: self._core, self._run_pods, self._count_call)
        self.api_calls = 0  # calls made outside the informers (create, delete, log)

    # -- setup -------------------------------------------------------------------------------
    def set_observer(self, callback: Any) -> None:
        # The engine calls this once at start-up, on the loop thread, before it re-attaches
        # runs: start watching now so that Jobs without a run record can be reported.
        super().set_observer(callback)
        try:
            self._start()
        except ExecutorError as exc:
            self.log.error("gpuplat: the Kubernetes executor cannot start yet: %s", exc)

    def _start(self) -> None:
        if self._cache is not None:
            return
        if self._closed:
            raise ExecutorError("the Kubernetes executor is closed")
        from kubernetes import client

        self._loop = asyncio.get_running_loop()
        self._api = api_client(self.kubeconfig, self.context, self.max_log_streams + 16)
        self._core = client.CoreV1Api(self._api)
        self._batch = client.BatchV1Api(self._api)
        self._net = client.NetworkingV1Api(self._api)
        timeout = (self.connect_timeout_seconds, self.request_timeout_seconds)
        self._secrets = KernelSecrets(self._core, self.namespace, timeout, self._count_call)
        self._jobs = JobClient(
            self._batch, self._net, self._secrets, self.namespace, timeout, self._count_call, self.log
        )
        timeouts = Timeouts(
            connect_seconds=self.connect_timeout_seconds,
            request_seconds=self.request_timeout_seconds,
            watch_seconds=self.watch_timeout_seconds,
        )
        cache = ClusterCache(
            self._core,
            self._batch,
            self.namespace,
            selector(self.instance),
            timeouts,
            self._wake,
            self.log,
            watch_nodes=self.watch_nodes,
            on_synced=self._wake_synced,
        )
        cache.gpu_resource = self.gpu_resource
        self._logs = PodLogs(
            self._core,
            self.namespace,
            cache,
            threading.Semaphore(self.max_log_streams),
            connect_seconds=self.connect_timeout_seconds,
            idle_seconds=self.log_idle_timeout_seconds,
            settle_seconds=self.pod_settle_seconds,
            on_call=self._count_call,
            log=self.log,
        )
        self._cache = cache
        cache.start()
        self._facts.refresh()

    def _wake(self) -> None:
        # Informer threads: hand the work to the loop (the cache merges wake-ups).
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._process)

    def _wake_synced(self) -> None:
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._after_list)

    def devices(self) -> list[Device]:
        return []  # the cluster's scheduler places GPUs; the engine counts them per queue

    # -- GPU samples (gpusource.py, dcgm.py) --------------------------------------------------
    def gpu_interval(self) -> float | None:
        return self.gpu_sample_seconds

    def gpu_samples(self, held: Mapping[str, tuple[int, ...]], at: float) -> GpuReading:
        """The DCGM exporter's reading of each run's pod; devices are the run's ordinals (CUDA's in the pod)."""
        return self._gpu_source.read(held, at)

    def _run_pods(self, run_id: str) -> tuple[dict[str, Any], ...]:
        return self._cache.run_pods(run_id) if self._cache is not None else ()

    def check_working_dir(self, working_dir: str, artifacts_root: str) -> str | None:
        """A pod sees only its own run's directory: any working_dir is refused at submission."""
        return working_dir_problem(working_dir, artifacts_root, self.settings())

    # -- isolation ---------------------------------------------------------------------------
    def isolation(self) -> dict[str, Any]:
        """What keeps runs apart on this cluster (never blocks: the namespace's facts are read in a thread)."""
        if self._cache is not None and self._facts.age() > self.isolation_refresh_seconds:
            self._facts.refresh()
        controls = isolation_controls(
            self._facts.facts,
            artifacts_claim=self.artifacts_claim,
            run_as_user=self.run_as_user,
            kernel_policies=self.kernel_network_policy,
            hub_namespace=self.hub_namespace,
            toolkit_hardened=self.nvidia_toolkit_hardened,
        )
        return {"mode": "pod", "controls": controls}

    def namespace_facts(self) -> NamespaceFacts:
        """The namespace's labels and NetworkPolicies (blocking); what could not be read is None, with why."""
        timeout = (self.connect_timeout_seconds, self.request_timeout_seconds)
        return read_namespace_facts(self._core, self._net, self.namespace, timeout, self._count_call)

    # -- submit ------------------------------------------------------------------------------
    async def submit(self, req: LaunchRequest) -> dict[str, Any]:
        self._start()
        if req.run_id in self._runs:
            raise ExecutorError(f"run {req.run_id} is already submitted (Job {self._runs[req.run_id].job})")
        manifest = make_job(req, self.settings())
        name = manifest["metadata"]["name"]
        log_path = layout.in_run(req.workdir, layout.LOG)
        # The run's directory and the code its pod runs (read-only there), before the Job exists.
        await asyncio.to_thread(prepare, req, (self.run_as_user, self.run_as_group))
        run = WatchedRun(req.run_id, name, req.workdir, log_path, reattached=False)
        assert self._jobs is not None
        if is_session(req):
            settings, policy = self.settings(), self.kernel_network_policy
            uid = await asyncio.to_thread(self._jobs.create_session, req, run, manifest, settings, policy)
        else:
            uid = await asyncio.to_thread(self._jobs.create_job, req.run_id, manifest)
        self._runs[req.run_id] = run
        # No await after this point: the first Observation cannot reach the engine before the handle.
        assert self._loop is not None
        self._loop.call_soon(self._evaluate_id, req.run_id)
        handle = {
            "executor": self.name,
            "namespace": self.namespace,
            "job": name,
            "uid": uid,
            "workdir": req.workdir,
            "log_path": log_path,
            "summary": f"Job {name} in namespace {self.namespace}",
        }
        if run.secret is not None:
            handle.update(secret=run.secret, kernel_ports=list(run.kernel_ports))
        return handle

    # -- attach ------------------------------------------------------------------------------
    def attach(self, run_id: str, handle: Mapping[str, Any]) -> Observation:
        """After a restart: watch the run's Job again; its state arrives through the observer."""
        known = self._runs.get(run_id)
        if known is not None:
            return Observation(run_id, RUNNING, Reason.REATTACHED, f"Job {known.job} is already watched")
        try:
            job = str(handle["job"])
            workdir = str(handle["workdir"])
            log_path = str(handle.get("log_path") or os.path.join(workdir, LOG_NAME))
        except (KeyError, TypeError) as exc:
            return Observation(
                run_id, FAILED, Reason.LOST, f"the run's handle is unusable ({exc!r}); nothing to re-attach to"
            )
        try:
            self._start()
        except ExecutorError as exc:
            return Observation(run_id, FAILED, Reason.LOST, f"cannot watch Job {job} again: {exc}")
        run = WatchedRun(run_id, job, workdir, log_path, reattached=True)
        if handle.get("secret"):
            run.secret = str(handle["secret"])
            run.kernel_ports = tuple(int(p) for p in handle.get("kernel_ports") or self.kernel_ports)
        self._runs[run_id] = run
        cache = self._cache
        if cache is not None and cache.synced and self._loop is not None:
            self._loop.call_soon(self._evaluate_id, run_id)
        return Observation(
            run_id, RUNNING, Reason.REATTACHED, f"watching Job {job} in namespace {self.namespace} again"
        )

    # -- stop --------------------------------------------------------------------------------
    async def stop(self, run_id: str, handle: Mapping[str, Any], grace_seconds: float | None = None) -> None:
        """Delete the Job with its pods (foreground); the final Observation follows its disappearance."""
        run = self._runs.get(run_id)
        if run is None:
            obs = self.attach(run_id, handle)
            if obs.final:
                self._emit(obs)
                return
            run = self._runs[run_id]
        if run.finishing:
            await run.done.wait()
            return
        run.stopping = True
        assert self._jobs is not None  # a watched run: the executor has started
        await asyncio.to_thread(self._jobs.delete_job, run.job, grace_seconds, "Foreground")
        self._evaluate(run)
        try:
            await asyncio.wait_for(run.done.wait(), self.stop_wait_seconds)
        except TimeoutError:
            self.log.warning(
                "gpuplat: Job %s of run %s still not gone %.0f s after deletion",
                run.job,
                run_id,
                self.stop_wait_seconds,
            )

    # -- sessions ----------------------------------------------------------------------------
    async def kernel_connection(self, run_id: str, handle: Mapping[str, Any]) -> dict[str, Any] | None:
        """The session's kernel once its pod runs: the pod's IP, the fixed ports, the key from its Secret."""
        if not handle.get("secret"):
            raise ExecutorError(f"run {run_id} is not a GPU session: its Job runs no kernel")
        run = self._runs.get(run_id)
        if run is None:
            obs = self.attach(run_id, handle)
            if obs.final:
                self._emit(obs)
                return None
            run = self._runs[run_id]
        cache = self._cache
        if cache is None or run.finishing or run.stopping or run.secret is None:
            return None
        pod = kernel_pod(cache.snapshot(run_id).pods)
        if pod is None:
            return None
        if run.kernel_key is None:
            assert self._secrets is not None
            run.kernel_key = await asyncio.to_thread(self._secrets.key, run.secret)
        info = connection_info(str(pod["status"]["podIP"]), run.kernel_ports, run.kernel_key)
        generation = await asyncio.to_thread(kernel_generation, run.workdir)
        if generation is not None:
            info["gpuplat_generation"] = generation
        return info

    # -- observing ---------------------------------------------------------------------------
    def _process(self) -> None:
        cache = self._cache
        if cache is None:
            return
        for run_id in cache.take_dirty():
            run = self._runs.get(run_id)
            if run is not None:
                self._evaluate(run)

    def _after_list(self) -> None:
        """A (re)list finished: runs whose Job vanished unseen are decided now; orphans reported once."""
        cache = self._cache
        if cache is None or not cache.synced:
            return
        for run in list(self._runs.values()):
            self._evaluate(run)
        if not self._synced_once:
            self._synced_once = True
            for run_id in sorted(cache.run_ids() - set(self._runs)):
                job = cache.job(run_id)
                name = str(((job or {}).get("metadata") or {}).get("name"))
                self.orphans[run_id] = name
                self.log.warning(
                    "gpuplat: Job %s in namespace %s carries run id %s, which has no unfinished run on this server; "
                    "left in place (delete it by hand if nobody needs it)",
                    name,
                    self.namespace,
                    run_id,
                )

    def _evaluate_id(self, run_id: str) -> None:
        run = self._runs.get(run_id)
        if run is not None:
            self._evaluate(run)

    def _evaluate(self, run: WatchedRun, settle: bool = False) -> None:
        cache = self._cache
        if cache is None or run.finishing:
            return
        snap = cache.snapshot(run.run_id)
        if snap.job is None:
            if not cache.synced:
                return
            if run.stopping:
                self._finish(
                    run,
                    Observation(
                        run.run_id,
                        STOPPED,
                        Reason.STOPPED,
                        f"stopped by request; Job {run.job} and its pods are deleted",
                    ),
                    snap,
                )
            elif run.seen_job or run.reattached:
                self._finish(
                    run,
                    Observation(
                        run.run_id,
                        FAILED,
                        Reason.LOST,
                        f"Job {run.job} disappeared from namespace {self.namespace} (deleted outside the platform, "
                        "or by its TTL while the server was down); its outcome is unknown",
                        details={
                            "layer": "executor",
                            "who_can_act": [{"who": "platform admins", "can": "check who deleted it"}],
                        },
                    ),
                    snap,
                )
            return  # just created: not in the cache yet
        run.seen_job = True
        if snap.gone or any((p.get("metadata") or {}).get("deletionTimestamp") for p in snap.pods):
            run.pod_deleted = True
        assert self._logs is not None  # made with the cache
        self._logs.follow(run, snap)
        if run.stopping:
            return  # deleting: the Job's disappearance ends it
        self._report_disruptions(run, snap)
        # Nodes matter only to say why a pod cannot be placed: build the view only then.
        nodes = cache.node_views() if any(not (p.get("spec") or {}).get("nodeName") for p in snap.pods) else None
        ex = explain_run(snap.job, snap.pods, snap.events, nodes, self.gpu_resource, settle)
        if ex.reason == Reason.FINISHING:
            if run.settle is None and self._loop is not None:
                run.settle = self._loop.call_later(self.pod_settle_seconds, self._evaluate, run, True)
            return
        if ex.final:
            if not run.running_reported and container_started(snap):
                where = placed_details(snap, cache.node_labels)
                self._emit(Observation(run.run_id, RUNNING, Reason.RUNNING, running_message(snap), details=where))
                run.running_reported = True
            final = Observation(run.run_id, ex.status, ex.reason, ex.message, ex.exit_code, details=ex.details())
            if run.secret is not None and ended_outside(run, ex.status, ex.reason):
                final = session_ended_outside(run, final)
            self._finish(run, final, snap)
            return
        status = RUNNING if ex.status == RUNNING or run.running_reported else "starting"
        key = episode(status, ex)
        if key == run.reported or (ex.reason in DISRUPTIONS and ex.pod_uid in run.disrupted):
            return  # not new: the same explanation, or a disruption already recorded for that pod
        run.reported = key
        details = ex.details()
        if status == RUNNING:
            run.running_reported = True
            details.update(placed_details(snap, cache.node_labels))
        self._emit(Observation(run.run_id, status, ex.reason, ex.message, ex.exit_code, details=details))

    def _report_disruptions(self, run: WatchedRun, snap: Snapshot) -> None:
        """Each preempted or evicted pod is its own episode, even when its replacement already exists."""
        for pod in (*snap.gone, *snap.pods):
            uid = str(pod["metadata"].get("uid"))
            status = pod.get("status") or {}
            if uid in run.disrupted:
                continue
            if condition(pod, "DisruptionTarget") is None and status.get("reason") != "Evicted":
                continue
            run.disrupted.add(uid)
            ex = explain_pod(pod, snap.events, snap.job, None, self.gpu_resource)
            run.disruption = disruption_text(ex.reason, ex.raw)
            if run.secret is not None:
                continue  # a session's pod is not replaced: its end says what happened
            state = RUNNING if run.running_reported else "starting"
            run.reported = episode(state, ex)
            self._emit(Observation(run.run_id, state, ex.reason, ex.message, details=ex.details()))

    def _count_call(self) -> None:
        self.api_calls += 1

    # -- the end -----------------------------------------------------------------------------
    def _finish(self, run: WatchedRun, obs: Observation, snap: Snapshot) -> None:
        run.finishing = True
        if run.settle is not None:
            run.settle.cancel()
        self._spawn(self._finish_after_logs(run, obs, snap.job is not None))

    async def _finish_after_logs(self, run: WatchedRun, obs: Observation, job_exists: bool) -> None:
        followers = list(run.followers.values())
        if followers:
            drained = await asyncio.to_thread(wait_all, [f.done for f in followers], self.log_drain_seconds)
            if not drained:
                self.log.warning(
                    "gpuplat: the log of run %s did not end within %.0f s of the run's end",
                    run.run_id,
                    self.log_drain_seconds,
                )
                for f in followers:
                    f.stop()
        if self._runs.get(run.run_id) is run:
            del self._runs[run.run_id]
        if self._cache is not None:
            self._cache.forget(run.run_id)
        self._emit(obs)
        run.done.set()
        if job_exists and self.delete_finished_jobs and not run.stopping and self._jobs is not None:
            await asyncio.to_thread(self._jobs.delete_job, run.job, None, "Background")

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            self.log.error("gpuplat: Kubernetes executor task failed", exc_info=task.exception())

    def log_path(self, handle: Mapping[str, Any]) -> str:
        return str(handle.get("log_path") or os.path.join(str(handle["workdir"]), LOG_NAME))

    async def close(self) -> None:
        """Stop watching and following logs; Jobs keep running (a restarted server re-attaches)."""
        self._closed = True
        for run in self._runs.values():
            for f in run.followers.values():
                f.stop()
        if self._cache is not None:
            await asyncio.to_thread(self._cache.stop)
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._runs.clear()
        if self._api is not None:
            await asyncio.to_thread(self._api.close)

    @property
    def stats(self) -> dict[str, int]:
        """Counters of the cache (lists, watches, events, relists) and of other API calls."""
        out = dict(self._cache.stats) if self._cache is not None else {}
        out["api_calls"] = self.api_calls
        return out
