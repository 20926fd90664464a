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
in a thread at start and again after `isolation_refresh_seconds`.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from traitlets import Bool, Dict, Float, Integer, List, Unicode

from ...core import artifacts as layout
from ...core.reasons import Reason
from ..artifacts import FilesystemArtifacts
from ..base import FAILED, RUNNING, STOPPED, SUCCEEDED, Device, Executor, ExecutorError, LaunchRequest, Observation
from .apierror import api_error
from .cache import ClusterCache, Snapshot, Timeouts
from .explain import DISRUPTIONS, condition, episode, explain_pod, explain_run
from .isolation import NamespaceFacts, isolation_controls
from .logs import LogFollower, LogState
from .manifests import (
    CONTAINER,
    KERNEL_PORTS,
    JobSettings,
    is_session,
    make_job,
    make_kernel_policy,
    make_kernel_secret,
    selector,
    working_dir_problem,
)
from .rundir import prepare
from .sessions import KernelSecrets, connection_info, kernel_generation, kernel_pod

LOG_NAME = layout.LOG


def api_client(kubeconfig: str = "", context: str = "", pool_size: int = 64) -> Any:
    """An ApiClient: from `kubeconfig`, else in-cluster, else the default kubeconfig."""
    from kubernetes import client, config

    cfg = client.Configuration()
    try:
        if kubeconfig:
            config.load_kube_config(config_file=kubeconfig, context=context or None, client_configuration=cfg)
        elif os.environ.get("KUBERNETES_SERVICE_HOST"):
            config.load_incluster_config(client_configuration=cfg)
        else:
            config.load_kube_config(context=context or None, client_configuration=cfg)
    except (config.ConfigException, OSError, TypeError) as exc:
        raise ExecutorError(f"cannot load the Kubernetes configuration: {exc}") from exc
    cfg.connection_pool_maxsize = pool_size
    return client.ApiClient(cfg)


@dataclass(eq=False)
class _Run:
    run_id: str
    job: str
    workdir: str
    log_path: str
    reattached: bool
    seen_job: bool = False
    reported: tuple[str, ...] | None = None
    running_reported: bool = False
    stopping: bool = False
    finishing: bool = False
    done: asyncio.Event = field(default_factory=asyncio.Event)
    followers: dict[str, LogFollower] = field(default_factory=dict)
    log_state: LogState | None = None
    disrupted: set[str] = field(default_factory=set)  # pod uids whose preemption/eviction is recorded
    settle: asyncio.TimerHandle | None = None  # set while waiting for a failed pod's final state
    secret: str | None = None  # a session's kernel key Secret (None: a job)
    kernel_ports: tuple[int, ...] = ()
    kernel_key: str | None = None  # read from the Secret once, when not made here
    disruption: str | None = None  # what the last preemption or eviction of its pod said
    pod_deleted: bool = False  # a pod of the run was deleted (by anyone: this executor deletes only Jobs)


class KubernetesExecutor(FilesystemArtifacts, Executor):
    """Runs each submission as a Kubernetes Job requesting `nvidia.com/gpu`."""

    name = "kubernetes"
    assigns_devices = False
    reports_start = True

    namespace = Unicode(
        "gpuplat-runs",
        help="Namespace of the runs' Jobs: one the platform owns, holding nothing but runs (no control plane, no "
        "Secret of the platform, no database: whoever may create a pod there may mount its Secrets), with Pod "
        "Security restricted enforced and a default-deny NetworkPolicy (deploy/kubernetes/).",
    ).tag(config=True)
    kubeconfig = Unicode(
        "", help="Kubeconfig file; empty: in-cluster config when running in a pod, else the default kubeconfig."
    ).tag(config=True)
    context = Unicode("", help="Kubeconfig context; empty: the current context.").tag(config=True)
    instance = Unicode(
        "default", help="Label value telling this platform's Jobs apart when several share a namespace."
    ).tag(config=True)
    image = Unicode("python:3.11-slim", help="Image of runs whose spec names none.").tag(config=True)
    python = Unicode(
        "python", help="Interpreter in the image, used where the server built a command for a script."
    ).tag(config=True)
    service_account = Unicode("", help="Service account of the runs' pods; empty: the namespace's default.").tag(
        config=True
    )
    artifacts_claim = Unicode(
        "",
        help="PersistentVolumeClaim mounted into every run at artifacts_mount_path (the artifact volume, shared with "
        "the control plane at its artifacts_root). Empty: an emptyDir, so outputs end with the pod (logs are kept).",
    ).tag(config=True)
    artifacts_mount_path = Unicode("/gpuplat/artifacts", help="Where runs see the artifact volume.").tag(config=True)
    priority_classes = Dict(
        {"interactive": "gpuplat-interactive", "*": "gpuplat-batch"},
        help="Queue name → PriorityClass of its pods ('*': every other queue). They must exist in the cluster "
        "(deploy/kubernetes/priorityclasses.yaml); an empty dict sets none.",
    ).tag(config=True)
    gpu_resource = Unicode("nvidia.com/gpu", help="The extended resource GPUs are requested as.").tag(config=True)
    gpu_type_label = Unicode(
        "nvidia.com/gpu.product", help="Node label that placement.gpu_type selects on (GPU feature discovery's)."
    ).tag(config=True)
    backoff_limit = Integer(0, min=0, help="Failed pods Kubernetes retries per run before the Job fails.").tag(
        config=True
    )
    ttl_seconds_after_finished = Integer(
        86400,
        allow_none=True,
        min=0,
        help="Kubernetes deletes a finished Job after this many seconds (a backstop; the executor deletes it once its "
        "logs are archived when delete_finished_jobs is on). None: never.",
    ).tag(config=True)
    image_pull_secrets = List(Unicode(), help="Secrets the runs' pods pull images with.").tag(config=True)
    delete_finished_jobs = Bool(True, help="Delete a run's Job once it ended and its logs are archived.").tag(
        config=True
    )
    watch_nodes = Bool(
        True, help="Watch nodes (read-only) to name taints and tell fragmented GPUs from missing ones."
    ).tag(config=True)
    connect_timeout_seconds = Float(5.0, min=0.1, help="Seconds to connect to the API server, every call.").tag(
        config=True
    )
    request_timeout_seconds = Float(30.0, min=0.1, help="Seconds an API call (not a stream) may take.").tag(config=True)
    watch_timeout_seconds = Integer(
        300, min=1, help="Server-side timeout of each watch; the watch then resumes from its resourceVersion."
    ).tag(config=True)
    log_idle_timeout_seconds = Float(
        300.0, min=0.1, help="A log stream silent this long is reconnected (it resumes after the last line)."
    ).tag(config=True)
    log_drain_seconds = Float(
        10.0, min=0.0, help="After a run ends, how long to wait for the rest of its log before recording the end."
    ).tag(config=True)
    stop_wait_seconds = Float(
        60.0, min=0.0, help="After deleting a stopped run's Job, how long to wait for it to go."
    ).tag(config=True)
    pod_settle_seconds = Float(
        2.0, min=0.0, help="When a Job fails before its pod's final state arrives, how long to wait for it."
    ).tag(config=True)
    max_log_streams = Integer(256, min=1, help="Log streams followed at once; more runs wait for a free one.").tag(
        config=True
    )
    kernel_ports = List(
        Integer(min=1, max=65535),
        list(KERNEL_PORTS),
        minlen=5,
        maxlen=5,
        help="A GPU session's kernel ports in its pod (shell, iopub, stdin, control, hb): fixed, as each pod has "
        "its own IP. The control plane must reach them (NetworkPolicy).",
    ).tag(config=True)

    run_as_user = Integer(
        1000,
        min=1,
        help="The uid every run's pod runs as (runAsNonRoot; only a platform preset's security.run_as_user or "
        "run_as_root changes it). The control plane writes the runs' directories as this uid too (deploy/ runs both "
        "as 1000); a control plane running as root gives them to it.",
    ).tag(config=True)
    run_as_group = Integer(1000, min=0, help="The gid of every run's pod (runAsGroup).").tag(config=True)
    kernel_network_policy = Bool(
        True,
        help="Create a NetworkPolicy with each GPU session admitting only its owner's Jupyter server (KubeSpawner's "
        "pods in hub_namespace) to the kernel's ports. Needs networkpolicies create/delete (deploy/kubernetes/"
        "rbac.yaml) and a default-deny ingress policy in the namespace to mean anything.",
    ).tag(config=True)
    hub_namespace = Unicode(
        "jhub", help="Namespace of JupyterHub's user servers (Zero to JupyterHub's release namespace)."
    ).tag(config=True)
    nvidia_toolkit_hardened = Bool(
        False,
        help="Set True once every GPU node's NVIDIA container toolkit ignores NVIDIA_VISIBLE_DEVICES in unprivileged "
        "containers (accept-nvidia-visible-devices-envvar-when-unprivileged = false, "
        "accept-nvidia-visible-devices-as-volume-mounts = true, device plugin DEVICE_LIST_STRATEGY=volume-mounts). "
        "The API cannot tell; capacity.isolation reports gpu_devices enforced only when this says so.",
    ).tag(config=True)
    isolation_refresh_seconds = Float(
        300.0, min=1.0, help="How old the namespace's labels and NetworkPolicies may be before they are read again."
    ).tag(config=True)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._net: Any = None
        self._facts: NamespaceFacts | None = None
        self._facts_at = 0.0
        self._facts_reading = threading.Lock()
        self._runs: dict[str, _Run] = {}
        self._api: Any = None
        self._core: Any = None
        self._batch: Any = None
        self._cache: ClusterCache | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._slots = threading.Semaphore(1)
        self._secrets: KernelSecrets | None = None
        self._synced_once = False
        self._closed = False
        self.orphans: dict[str, str] = {}  # run id → Job name: Jobs with no run record here
        self.api_calls = 0  # calls made outside the informers (create, delete, log)

    # -- setup -------------------------------------------------------------------------------
    def settings(self) -> JobSettings:
        return JobSettings(
            namespace=self.namespace,
            instance=self.instance,
            default_image=self.image,
            python=self.python,
            service_account=self.service_account,
            artifacts_claim=self.artifacts_claim,
            artifacts_mount_path=self.artifacts_mount_path,
            priority_classes=dict(self.priority_classes),
            gpu_resource=self.gpu_resource,
            gpu_type_label=self.gpu_type_label,
            backoff_limit=self.backoff_limit,
            ttl_seconds_after_finished=self.ttl_seconds_after_finished,
            image_pull_secrets=tuple(self.image_pull_secrets),
            kernel_ports=tuple(self.kernel_ports),
            run_as_user=self.run_as_user,
            run_as_group=self.run_as_group,
            hub_namespace=self.hub_namespace,
        )

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
        self._secrets = KernelSecrets(
            self._core, self.namespace, (self.connect_timeout_seconds, self.request_timeout_seconds), self._count_call
        )
        self._slots = threading.Semaphore(self.max_log_streams)
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
        self._cache = cache
        cache.start()
        self._refresh_facts()

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

    def check_working_dir(self, working_dir: str, artifacts_root: str) -> str | None:
        """A pod sees only its own run's directory: any working_dir is refused at submission."""
        return working_dir_problem(working_dir, artifacts_root, self.settings())

    # -- isolation ---------------------------------------------------------------------------
    def isolation(self) -> dict[str, Any]:
        """What keeps runs apart on this cluster (never blocks: the namespace's facts are read in a thread)."""
        if self._cache is not None and time.monotonic() - self._facts_at > self.isolation_refresh_seconds:
            self._refresh_facts()
        controls = isolation_controls(
            self._facts,
            artifacts_claim=self.artifacts_claim,
            run_as_user=self.run_as_user,
            kernel_policies=self.kernel_network_policy,
            hub_namespace=self.hub_namespace,
            toolkit_hardened=self.nvidia_toolkit_hardened,
        )
        return {"mode": "pod", "controls": controls}

    def _refresh_facts(self) -> None:
        """Read the namespace's labels and NetworkPolicies again, in a thread (one at a time)."""
        if not self._facts_reading.acquire(blocking=False):
            return
        self._facts_at = time.monotonic()
        threading.Thread(target=self._read_facts, name="gpuplat-k8s-isolation", daemon=True).start()

    def _read_facts(self) -> None:
        try:
            self._facts = self.namespace_facts()
        except Exception:  # never let a bad answer kill the thread's lock
            self.log.exception("gpuplat: reading namespace %s for capacity.isolation failed", self.namespace)
        finally:
            self._facts_reading.release()

    def namespace_facts(self) -> NamespaceFacts:
        """The namespace's labels and NetworkPolicies (blocking); what could not be read is None, with why."""
        from kubernetes.client.exceptions import ApiException

        t = (self.connect_timeout_seconds, self.request_timeout_seconds)
        labels: dict[str, str] | None = None
        policies: list[dict[str, Any]] | None = None
        errors: list[str] = []
        try:
            self.api_calls += 1
            ns = json.loads(self._core.read_namespace(self.namespace, _preload_content=False, _request_timeout=t).data)
            labels = dict((ns.get("metadata") or {}).get("labels") or {})
        except ApiException as exc:
            errors.append(f"namespace: {api_error(exc)}")
        except Exception as exc:
            errors.append(f"namespace: {exc}")
        try:
            self.api_calls += 1
            resp = self._net.list_namespaced_network_policy(self.namespace, _preload_content=False, _request_timeout=t)
            policies = list(json.loads(resp.data).get("items") or [])
        except ApiException as exc:
            errors.append(f"networkpolicies: {api_error(exc)}")
        except Exception as exc:
            errors.append(f"networkpolicies: {exc}")
        return NamespaceFacts(self.namespace, labels, policies, tuple(errors))

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
        run = _Run(req.run_id, name, req.workdir, log_path, reattached=False)
        if is_session(req):
            uid = await asyncio.to_thread(self._create_session, req, run, manifest)
        else:
            uid = await asyncio.to_thread(self._create_job, req.run_id, manifest)
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

    def _create_session(self, req: LaunchRequest, run: _Run, manifest: dict[str, Any]) -> str:
        """The key's Secret first (the pod never waits for it), then the Job, then the Job owns the Secret."""
        assert self._secrets is not None
        settings = self.settings()
        secret = make_kernel_secret(req, settings, secrets.token_hex(32))
        name = secret["metadata"]["name"]
        run.kernel_key = self._secrets.create(req.run_id, secret, secret["stringData"]["key"])
        run.secret, run.kernel_ports = name, settings.kernel_ports
        try:
            uid = self._create_job(req.run_id, manifest)
        except ExecutorError:
            self._secrets.delete(name)
            raise
        try:
            self._secrets.own(name, run.job, uid)
            if self.kernel_network_policy and self.hub_namespace:
                self._create_kernel_policy(req, uid)
        except ExecutorError:  # a Job whose submission failed must not keep a GPU
            self._delete_job(run.job, 0, "Background")
            self._secrets.delete(name)
            raise
        return uid

    def _create_kernel_policy(self, req: LaunchRequest, job_uid: str) -> None:
        """Only the owner's Jupyter server may reach the kernel; the policy goes with the Job (its owner)."""
        from kubernetes.client.exceptions import ApiException

        policy = make_kernel_policy(req, self.settings(), job_uid)
        t = (self.connect_timeout_seconds, self.request_timeout_seconds)
        try:
            self.api_calls += 1
            self._net.create_namespaced_network_policy(
                self.namespace, policy, _preload_content=False, _request_timeout=t
            )
        except ApiException as exc:
            if exc.status == 409:
                return  # an earlier attempt of this submission made it (only the platform writes them here)
            raise ExecutorError(
                f"Kubernetes refused the NetworkPolicy of session {req.run_id} (its owner's server could not reach "
                f"the kernel): {api_error(exc)}"
            ) from exc
        except Exception as exc:
            raise ExecutorError(
                f"cannot reach the Kubernetes API to create the NetworkPolicy of {req.run_id}: {exc}"
            ) from exc

    def _create_job(self, run_id: str, manifest: dict[str, Any]) -> str:
        from kubernetes.client.exceptions import ApiException

        t = (self.connect_timeout_seconds, self.request_timeout_seconds)
        try:
            self.api_calls += 1
            resp = self._batch.create_namespaced_job(
                self.namespace, manifest, _preload_content=False, _request_timeout=t
            )
            return str(json.loads(resp.data)["metadata"]["uid"])
        except ApiException as exc:
            if exc.status == 409:
                return self._adopt_job(run_id, manifest["metadata"]["name"])
            raise ExecutorError(f"Kubernetes refused the Job of run {run_id}: {api_error(exc)}") from exc
        except ExecutorError:
            raise
        except Exception as exc:
            raise ExecutorError(f"cannot reach the Kubernetes API to create the Job of run {run_id}: {exc}") from exc

    def _adopt_job(self, run_id: str, name: str) -> str:
        """The Job exists: created before a crash that lost the handle. Adopt it only if it is this run's."""
        from kubernetes.client.exceptions import ApiException

        t = (self.connect_timeout_seconds, self.request_timeout_seconds)
        try:
            self.api_calls += 1
            resp = self._batch.read_namespaced_job(name, self.namespace, _preload_content=False, _request_timeout=t)
        except ApiException as exc:  # deleted in between, or not ours to read
            raise ExecutorError(f"Job {name} of run {run_id} exists but cannot be read: {api_error(exc)}") from exc
        existing = json.loads(resp.data)
        owner = (existing["metadata"].get("labels") or {}).get("gpuplat.io/run-id")
        if owner == run_id:
            return str(existing["metadata"]["uid"])
        raise ExecutorError(
            f"Job {name} in namespace {self.namespace} already exists and carries run id {owner!r} "
            f"(label gpuplat.io/run-id), not {run_id}: not adopted; delete it if nobody needs it"
        )

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
        run = _Run(run_id, job, workdir, log_path, reattached=True)
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
        await asyncio.to_thread(self._delete_job, run.job, grace_seconds, "Foreground")
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

    def _delete_job(self, name: str, grace_seconds: float | None, policy: str) -> None:
        from kubernetes.client.exceptions import ApiException

        kwargs: dict[str, Any] = {
            "propagation_policy": policy,
            "_preload_content": False,
            "_request_timeout": (self.connect_timeout_seconds, self.request_timeout_seconds),
        }
        if grace_seconds is not None:
            kwargs["grace_period_seconds"] = max(0, int(grace_seconds))
        try:
            self.api_calls += 1
            self._batch.delete_namespaced_job(name, self.namespace, **kwargs)
        except ApiException as exc:
            if exc.status != 404:
                self.log.warning("gpuplat: deleting Job %s failed: %s", name, api_error(exc))
        except Exception as exc:
            self.log.warning("gpuplat: deleting Job %s failed: %s", name, exc)

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

    def _evaluate(self, run: _Run, settle: bool = False) -> None:
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
        self._follow_logs(run, snap)
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
            if not run.running_reported and _container_started(snap):
                self._emit(Observation(run.run_id, RUNNING, Reason.RUNNING, _running_message(snap)))
                run.running_reported = True
            final = Observation(run.run_id, ex.status, ex.reason, ex.message, ex.exit_code, details=ex.details())
            if run.secret is not None and _ended_outside(run, ex.status, ex.reason):
                final = _session_ended_outside(run, final)
            self._finish(run, final, snap)
            return
        status = RUNNING if ex.status == RUNNING or run.running_reported else "starting"
        key = episode(status, ex)
        if key == run.reported or (ex.reason in DISRUPTIONS and ex.pod_uid in run.disrupted):
            return  # not new: the same explanation, or a disruption already recorded for that pod
        run.reported = key
        if status == RUNNING:
            run.running_reported = True
        self._emit(Observation(run.run_id, status, ex.reason, ex.message, ex.exit_code, details=ex.details()))

    def _report_disruptions(self, run: _Run, snap: Snapshot) -> None:
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
            run.disruption = _disruption_text(ex.reason, ex.raw)
            if run.secret is not None:
                continue  # a session's pod is not replaced: its end says what happened
            state = RUNNING if run.running_reported else "starting"
            run.reported = episode(state, ex)
            self._emit(Observation(run.run_id, state, ex.reason, ex.message, details=ex.details()))

    # -- logs --------------------------------------------------------------------------------
    def _follow_logs(self, run: _Run, snap: Snapshot) -> None:
        for pod in snap.gone:
            known = run.followers.get(pod["metadata"]["name"])
            if known is not None:
                known.container_done.set()
        for pod in snap.pods:
            name = pod["metadata"]["name"]
            known = run.followers.get(name)
            if known is not None and _pod_container_ended(pod):
                known.container_done.set()
            if name in run.followers or not _pod_container_started(pod):
                continue
            if run.log_state is None:
                run.log_state = LogState(run.workdir, self.log)
            assert self._cache is not None
            pods = self._cache.pods  # read from follower threads: a dict lookup is atomic

            def ended(pod_name: str = name, pods: dict[str, Any] = pods) -> bool:
                p = pods.get(pod_name)
                return p is None or _pod_container_ended(p)

            def exists(pod_name: str = name, pods: dict[str, Any] = pods) -> bool:
                return pod_name in pods

            follower = LogFollower(
                self._core,
                self.namespace,
                name,
                run.log_state,
                container_ended=ended,
                pod_exists=exists,
                slots=self._slots,
                connect_seconds=self.connect_timeout_seconds,
                idle_seconds=self.log_idle_timeout_seconds,
                on_call=self._count_call,
                log=self.log,
            )
            follower.settle_seconds = self.pod_settle_seconds
            if _pod_container_ended(pod):
                follower.container_done.set()
            run.followers[name] = follower
            follower.start()

    def _count_call(self) -> None:
        self.api_calls += 1

    # -- the end -----------------------------------------------------------------------------
    def _finish(self, run: _Run, obs: Observation, snap: Snapshot) -> None:
        run.finishing = True
        if run.settle is not None:
            run.settle.cancel()
        self._spawn(self._finish_after_logs(run, obs, snap.job is not None))

    async def _finish_after_logs(self, run: _Run, obs: Observation, job_exists: bool) -> None:
        followers = list(run.followers.values())
        if followers:
            drained = await asyncio.to_thread(_wait_all, [f.done for f in followers], self.log_drain_seconds)
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
        if job_exists and self.delete_finished_jobs and not run.stopping:
            await asyncio.to_thread(self._delete_job, run.job, None, "Background")

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


def _ended_outside(run: _Run, status: str, reason: str) -> bool:
    """A session's Job ended because its pod was ended from outside (not by its kernel agent)?

    The agent exits 0 only when told to stop, so a "completed" session was; a pod deleted or
    disrupted ends the session whatever its exit code (unless the Job's time limit did it).
    """
    if reason == Reason.TIMED_OUT:
        return False
    return status == SUCCEEDED or run.disruption is not None or run.pod_deleted


def _disruption_text(reason: str, raw: str) -> str:
    what: dict[str, str] = {
        Reason.PREEMPTED: "preempted by a higher-priority pod",
        Reason.EVICTED: "evicted from its node",
    }
    return f"its pod was {what.get(reason, reason)}" + (f" ({raw.rstrip('.')})." if raw else ".")


def _session_ended_outside(run: _Run, obs: Observation) -> Observation:
    """The session's pod was ended from outside the platform (preempted, evicted, drained, deleted)."""
    why = run.disruption or "its pod was deleted outside the platform."
    return Observation(
        run.run_id,
        FAILED,
        Reason.LOST,
        f"The session ended from outside the platform: {why} A session's pod is not replaced "
        "(its kernel's state would be lost); start a new session.",
        obs.exit_code,
        details=obs.details,
    )


def _wait_all(events: list[threading.Event], timeout: float) -> bool:
    import time

    deadline = time.monotonic() + timeout
    return all(e.wait(max(0.0, deadline - time.monotonic())) for e in events)


def _state(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    for cs in (pod.get("status") or {}).get("containerStatuses") or ():
        if cs.get("name") == CONTAINER:
            return cs.get("state") or {}
    return {}


def _pod_container_started(pod: Mapping[str, Any]) -> bool:
    state = _state(pod)
    return "running" in state or "terminated" in state


def _pod_container_ended(pod: Mapping[str, Any]) -> bool:
    return "terminated" in _state(pod) or (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def _container_started(snap: Snapshot) -> bool:
    return any(_pod_container_started(p) for p in snap.pods)


def _running_message(snap: Snapshot) -> str:
    for p in snap.pods:
        if _pod_container_started(p):
            return f"Running on node {(p.get('spec') or {}).get('nodeName')} (pod {p['metadata']['name']})."
    return "Running."
