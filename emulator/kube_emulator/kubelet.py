"""A kubelet model: pulls images, checks config, "runs" containers, keeps their logs.

A container's command is read as a tiny script (script.py), not run: `sh -c "echo epoch 1; sleep
0.2; gate g1; echo done; exit 3"`. Statements: `echo WORDS` (a log line), `sleep S`,
`gate NAME` (wait until the test opens the gate), `exit N`, `oom` (killed with
OOMKilled, 137), `true`, `false`, `:`. `$VAR` and `${VAR}` expand from the container's
env. Any other command ends the container with 127 and `sh: 1: CMD: not found`, as a
shell in an image without the program would. Images in `missing_images` fail to pull
(ErrImagePull, then ImagePullBackOff); a missing Secret or ConfigMap referenced from
env gives CreateContainerConfigError, one referenced from a volume leaves the pod in
ContainerCreating with FailedMount events (podconfig.py). Under restartPolicy OnFailure/Always a
failed container restarts with CrashLoopBackOff in between.

With local processes on (`EmulatedCluster(local_processes=True)`, processes.py) the command
is not read but run: a real process per container, its own loopback pod IP, env resolved
from values, the downward API and Secrets, phases and exit codes from the process, its
output as the log, and its process group ended (SIGTERM, then SIGKILL) when the pod is deleted.
"""

from __future__ import annotations

import copy
import functools
import signal
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from .clock import Clock
from .conditions import set_condition, set_container_status
from .containerlogs import ContainerLog, ContainerLogs
from .events import EventRecorder
from .podconfig import IMAGE, missing_config, pull_error
from .processes import LocalProcess, LocalRuntime, resolve_env
from .script import parse_script
from .store import POD, ResourceType, Store, now_rfc3339


@dataclass
class _Proc:
    pod_uid: str
    namespace: str
    name: str
    statements: list[list[str]]
    pc: int = 0
    status: int = 0
    waiting_gate: str | None = None
    generation: int = 0  # bumped when the run is abandoned (deleted, evicted): stale timers do nothing


class Kubelet:
    """Runs the pods bound to nodes; reads and writes through `store`, reports through `recorder`."""

    def __init__(self, store: Store, recorder: EventRecorder, clock: Clock) -> None:
        self.store = store
        self.recorder = recorder
        self.clock = clock
        self.missing_images: set[str] = set()
        self.pull_seconds = 0.0
        self.image_retry_seconds = 1.0
        self.crash_backoff_seconds = 0.3
        self.termination_seconds = 0.0
        # Local pods (opt in, see processes.py): commands run as real processes.
        self.local: LocalRuntime | None = None
        self.local_grace_seconds = 10.0  # at most this long from SIGTERM to SIGKILL on delete
        self.logs = ContainerLogs(self.store.lock, clock)
        self.procs: dict[str, _Proc] = {}
        self.gates: set[str] = set()
        self.store.graceful = self.graceful

    # -- helpers ---------------------------------------------------------------------------
    def _pod(self, uid: str) -> dict[str, Any] | None:
        proc = self.procs.get(uid)
        if proc is None:
            return None
        pod = self.store.find(POD, proc.namespace, proc.name)
        return pod if pod is not None and pod["metadata"]["uid"] == uid else None

    def _set_status(self, pod: dict[str, Any], change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
        meta = pod["metadata"]
        return self.store.update(POD, meta["namespace"], meta["name"], lambda p: change(p.setdefault("status", {})))

    @staticmethod
    def _container(pod: dict[str, Any]) -> dict[str, Any]:
        return pod["spec"]["containers"][0]

    # -- lifecycle -------------------------------------------------------------------------
    def start(self, pod: dict[str, Any]) -> None:
        """A pod was bound to a node: pull, check config, run."""
        uid = pod["metadata"]["uid"]
        if uid in self.procs:
            return
        c = self._container(pod)
        env = {e["name"]: e.get("value", "") for e in c.get("env") or [] if "value" in e}
        self.procs[uid] = _Proc(
            uid,
            pod["metadata"]["namespace"],
            pod["metadata"]["name"],
            parse_script(list(c.get("command") or []) + list(c.get("args") or []), env),
        )

        def creating(s: dict[str, Any]) -> None:
            s["phase"] = "Pending"
            s["hostIP"] = "10.0.0.1"
            s["startTime"] = now_rfc3339()
            s["qosClass"] = "Burstable"
            set_condition(s, "PodReadyToStartContainers", "True")
            set_condition(s, "Initialized", "True")
            set_condition(s, "Ready", "False", "ContainersNotReady", f"containers with unready status: [{c['name']}]")
            set_condition(
                s, "ContainersReady", "False", "ContainersNotReady", f"containers with unready status: [{c['name']}]"
            )
            set_container_status(s, pod, {"waiting": {"reason": "ContainerCreating"}})

        pod = self._set_status(pod, creating)
        image = c.get("image", "")
        if not IMAGE.match(image):
            self._invalid_image(pod, image)
            return
        self.recorder.event(pod, "Normal", "Pulling", f'Pulling image "{image}"', "kubelet")
        self.clock.after(self.pull_seconds, lambda: self._pulled(uid))

    def _invalid_image(self, pod: dict[str, Any], image: str) -> None:
        msg = (
            f'Failed to apply default image tag "{image}": couldn\'t parse image name "{image}": '
            "invalid reference format: repository name must be lowercase"
        )
        self._set_status(
            pod, lambda s: set_container_status(s, pod, {"waiting": {"reason": "InvalidImageName", "message": msg}})
        )
        self.recorder.event(pod, "Warning", "InspectFailed", msg, "kubelet")
        self.recorder.event(pod, "Warning", "Failed", "Error: InvalidImageName", "kubelet")

    def _pulled(self, uid: str, attempt: int = 1) -> None:
        pod = self._pod(uid)
        if pod is None or pod["metadata"].get("deletionTimestamp"):
            return
        c = self._container(pod)
        image = c.get("image", "")
        if image in self.missing_images:
            err = pull_error(image)
            self._set_status(
                pod, lambda s: set_container_status(s, pod, {"waiting": {"reason": "ErrImagePull", "message": err}})
            )
            self.recorder.event(pod, "Warning", "Failed", f'Failed to pull image "{image}": {err}', "kubelet")
            self.recorder.event(pod, "Warning", "Failed", "Error: ErrImagePull", "kubelet")

            def backoff() -> None:
                p = self._pod(uid)
                if p is None or p["metadata"].get("deletionTimestamp"):
                    return
                msg = f'Back-off pulling image "{image}"'
                self._set_status(
                    p, lambda s: set_container_status(s, p, {"waiting": {"reason": "ImagePullBackOff", "message": msg}})
                )
                self.recorder.event(p, "Normal", "BackOff", msg, "kubelet")
                self.recorder.event(p, "Warning", "Failed", "Error: ImagePullBackOff", "kubelet")
                self.clock.after(self.image_retry_seconds * attempt, lambda: self._pulled(uid, attempt + 1))

            self.clock.after(min(0.05, self.image_retry_seconds), backoff)
            return
        self.recorder.event(
            pod, "Normal", "Pulled", f'Successfully pulled image "{image}" in 1.2s (1.2s including waiting)', "kubelet"
        )
        missing = missing_config(self.store, pod)
        if missing is not None:
            where, msg = missing
            if where == "env":
                self._set_status(
                    pod,
                    lambda s: set_container_status(
                        s, pod, {"waiting": {"reason": "CreateContainerConfigError", "message": msg}}
                    ),
                )
                self.recorder.event(pod, "Warning", "Failed", f"Error: {msg}", "kubelet")
            else:
                self.recorder.event(pod, "Warning", "FailedMount", msg, "kubelet")
            # The kubelet keeps retrying; a test that creates the object later sees the pod start.
            self.clock.after(self.image_retry_seconds, lambda: self._pulled(uid, attempt))
            return
        self._run(uid)

    def _run(self, uid: str) -> None:
        found = self._pod(uid)
        proc = self.procs.get(uid)
        if found is None or proc is None:
            return
        pod: dict[str, Any] = found
        c = self._container(pod)
        runs = self.logs.start_run(uid, c["name"])
        log = runs[-1]
        proc.pc, proc.status = 0, 0
        started = now_rfc3339()
        ip = self.local.ip_for(uid) if self.local is not None else "10.244.0.10"
        if self.local is not None and not self._start_local(uid, pod, ip, log):
            return

        def running(s: dict[str, Any]) -> None:
            s["phase"] = "Running"
            s["podIP"] = ip
            s["podIPs"] = [{"ip": ip}]
            set_condition(s, "Ready", "True")
            set_condition(s, "ContainersReady", "True")
            set_container_status(
                s,
                pod,
                {"running": {"startedAt": started}},
                containerID=f"containerd://{uid.replace('-', '')}{len(runs)}",
                imageID=f"{c.get('image', '')}@sha256:{'0' * 64}",
            )

        pod = self._set_status(pod, running)
        if len(runs) == 1:
            self.recorder.event(pod, "Normal", "Created", f"Created container: {c['name']}", "kubelet")
        self.recorder.event(pod, "Normal", "Started", f"Started container {c['name']}", "kubelet")
        self.logs.changed.notify_all()
        if self.local is None:
            self._step(uid, proc.generation)

    # -- local pods ------------------------------------------------------------------------
    def _start_local(self, uid: str, pod: dict[str, Any], ip: str, log: ContainerLog) -> bool:
        """Start the container as a process; False (the container ended with StartError) when it cannot be."""
        assert self.local is not None
        c = self._container(pod)
        view = copy.deepcopy(pod)  # the env sees the pod as it will be: with its IP
        view.setdefault("status", {}).update(podIP=ip, podIPs=[{"ip": ip}])
        env = resolve_env(self.store, view, c)
        holder: list[LocalProcess] = []

        def line(text: str) -> None:
            with self.store.lock:
                self.logs.append(log, text)

        def exited(code: int) -> None:
            self.clock.after(0, lambda: self._local_exited(uid, holder[0], code))

        try:
            holder.append(self.local.start(view, c, env, line, exited))
        except OSError as exc:
            argv0 = ([*(c.get("command") or ()), *(c.get("args") or ())] or [""])[0]
            msg = (
                "failed to create containerd task: failed to create shim task: OCI runtime create failed: "
                f'runc create failed: unable to start container process: exec: "{argv0}": {exc.strerror or exc}'
            )
            self._set_status(pod, lambda s: s.update(podIP=ip, podIPs=[{"ip": ip}]))
            self._terminate(uid, 128, reason="StartError", message=msg)
            self.recorder.event(pod, "Warning", "Failed", f"Error: {msg}", "kubelet")
            return False
        return True

    def _local_exited(self, uid: str, proc: LocalProcess, code: int) -> None:
        assert self.local is not None
        if self.local.processes.get(uid) is not proc or proc.killed:
            return  # the pod is gone, or evicted: its end is already recorded
        pod = self._pod(uid)
        state = ((pod or {}).get("status", {}).get("containerStatuses") or [{}])[0].get("state", {})
        if pod is not None and "running" in state:
            self._terminate(uid, code)
        if proc.deleting and pod is not None:
            meta = pod["metadata"]
            self._remove(uid, meta["namespace"], meta["name"])

    def forget(self, uid: str) -> None:
        """The pod is gone from the store: nothing of it may keep running."""
        self.procs.pop(uid, None)
        if self.local is not None:
            self.local.release(uid)

    def _step(self, uid: str, generation: int) -> None:
        proc = self.procs.get(uid)
        if proc is None or proc.generation != generation:
            return
        pod = self._pod(uid)
        if pod is None or pod["metadata"].get("deletionTimestamp"):
            return
        cname = self._container(pod)["name"]
        while proc.pc < len(proc.statements):
            words = proc.statements[proc.pc]
            proc.pc += 1
            cmd, args = words[0], words[1:]
            if cmd == "echo":
                self.logs.emit(uid, cname, " ".join(args))
                proc.status = 0
            elif cmd in ("true", ":"):
                proc.status = 0
            elif cmd == "false":
                proc.status = 1
            elif cmd == "sleep":
                try:
                    secs = float(args[0]) if args else 0.0
                except ValueError:
                    secs = 0.0
                self.clock.after(secs, lambda: self._step(uid, generation))
                return
            elif cmd == "gate":
                name = args[0] if args else ""
                if name not in self.gates:
                    proc.waiting_gate = name
                    proc.pc -= 1
                    return
                proc.waiting_gate = None
            elif cmd == "exit":
                try:
                    code = int(args[0]) if args else proc.status
                except ValueError:
                    code = 2
                self._terminate(uid, code)
                return
            elif cmd == "oom":
                self._terminate(uid, 137, reason="OOMKilled")
                return
            else:
                self.logs.emit(uid, cname, f"sh: 1: {cmd}: not found")
                proc.status = 127
        self._terminate(uid, proc.status)

    def open_gate(self, name: str) -> None:
        self.gates.add(name)
        for proc in list(self.procs.values()):
            if proc.waiting_gate == name:
                self.clock.after(0, functools.partial(self._step, proc.pod_uid, proc.generation))

    def _terminate(self, uid: str, code: int, reason: str | None = None, message: str | None = None) -> None:
        found = self._pod(uid)
        proc = self.procs.get(uid)
        if found is None or proc is None:
            return
        pod: dict[str, Any] = found
        proc.generation += 1
        c = self._container(pod)
        self.logs.end_last(uid, c["name"])
        reason = reason or ("Completed" if code == 0 else "Error")
        prev = (pod.get("status", {}).get("containerStatuses") or [{}])[0]
        started = (prev.get("state", {}).get("running") or {}).get("startedAt") or now_rfc3339()
        terminated = {
            "exitCode": code,
            "reason": reason,
            "startedAt": started,
            "finishedAt": now_rfc3339(),
            "containerID": prev.get("containerID", ""),
        }
        if message:
            terminated["message"] = message
        policy = pod["spec"].get("restartPolicy", "Always")
        restart = policy == "Always" or (policy == "OnFailure" and code != 0)
        if restart and not pod["metadata"].get("deletionTimestamp"):
            count = int(prev.get("restartCount", 0)) + 1
            pod_ref = f"{pod['metadata']['name']}_{pod['metadata']['namespace']}({uid})"
            wait = f"back-off {10 * 2 ** (count - 1)}s restarting failed container={c['name']} pod={pod_ref}"

            def crashloop(s: dict[str, Any]) -> None:
                set_condition(
                    s, "Ready", "False", "ContainersNotReady", f"containers with unready status: [{c['name']}]"
                )
                set_condition(
                    s,
                    "ContainersReady",
                    "False",
                    "ContainersNotReady",
                    f"containers with unready status: [{c['name']}]",
                )
                set_container_status(
                    s,
                    pod,
                    {"waiting": {"reason": "CrashLoopBackOff", "message": wait}},
                    restartCount=count,
                    lastState={"terminated": terminated},
                )

            pod = self._set_status(pod, crashloop)
            self.recorder.event(
                pod,
                "Warning",
                "BackOff",
                "Back-off restarting failed container "
                + c["name"]
                + " in pod "
                + pod["metadata"]["name"]
                + f"_{pod['metadata']['namespace']}({uid})",
                "kubelet",
            )
            self.clock.after(self.crash_backoff_seconds, lambda: self._run(uid))
            return

        def ended(s: dict[str, Any]) -> None:
            s["phase"] = "Succeeded" if code == 0 else "Failed"
            set_condition(s, "Ready", "False", "PodCompleted" if code == 0 else "PodFailed")
            set_condition(s, "ContainersReady", "False", "PodCompleted" if code == 0 else "PodFailed")
            set_condition(s, "PodReadyToStartContainers", "False")
            set_container_status(s, pod, {"terminated": terminated})

        self._set_status(pod, ended)

    # -- deletion and eviction -------------------------------------------------------------
    def graceful(self, rt: ResourceType, obj: dict[str, Any]) -> bool:
        """A bound pod ends gracefully: its container gets SIGTERM (exit 143), then it is removed."""
        if rt is not POD or not obj.get("spec", {}).get("nodeName"):
            return False
        uid = obj["metadata"]["uid"]
        ns, name = obj["metadata"]["namespace"], obj["metadata"]["name"]
        proc = self.procs.get(uid)
        phase = (obj.get("status") or {}).get("phase")
        local = self.local.processes.get(uid) if self.local is not None else None
        if local is not None and local.alive and not local.deleting:
            # A real process: SIGTERM its group; the pod goes when it has exited (SIGKILL after the grace).
            self.recorder.event(
                obj, "Normal", "Killing", f"Stopping container {self._container(obj)['name']}", "kubelet"
            )
            local.deleting = True
            local.terminate()
            grace = float(obj["spec"].get("terminationGracePeriodSeconds", 30))
            self.clock.after(min(grace, self.local_grace_seconds), local.kill_if_alive)
            return True
        if proc is not None and phase not in ("Succeeded", "Failed"):
            state = ((obj.get("status") or {}).get("containerStatuses") or [{}])[0].get("state", {})
            self.recorder.event(
                obj, "Normal", "Killing", f"Stopping container {self._container(obj)['name']}", "kubelet"
            )
            if "running" in state:
                self.clock.after(0, lambda: self._terminate(uid, 143))
            else:
                proc.generation += 1

        self.clock.after(self.termination_seconds, lambda: self._remove(uid, ns, name))
        return True

    def _remove(self, uid: str, ns: str, name: str) -> None:
        """The end of a graceful deletion: logs end, the pod leaves the store."""
        self.procs.pop(uid, None)
        self.logs.end_pod(uid)
        self.store.remove_now(POD, ns, name)
        self.logs.forget_pod(uid)

    def evicted_by_kubelet(self, pod: dict[str, Any], message: str) -> None:
        """Node-pressure eviction: the pod fails in place with reason Evicted."""
        uid = pod["metadata"]["uid"]
        proc = self.procs.get(uid)
        if proc is not None:
            proc.generation += 1
        local = self.local.processes.get(uid) if self.local is not None else None
        if local is not None and local.alive:
            local.killed = True
            local.signal_group(signal.SIGKILL)
        self.logs.end_container(uid, self._container(pod)["name"])

        def evicted(s: dict[str, Any]) -> None:
            s["phase"] = "Failed"
            s["reason"] = "Evicted"
            s["message"] = message
            set_condition(s, "DisruptionTarget", "True", "TerminationByKubelet", message)
            set_condition(s, "Ready", "False", "PodFailed")
            prev = (s.get("containerStatuses") or [{}])[0]
            started = (prev.get("state", {}).get("running") or {}).get("startedAt") or now_rfc3339()
            set_container_status(
                s,
                pod,
                {
                    "terminated": {
                        "exitCode": 137,
                        "reason": "ContainerStatusUnknown",
                        "startedAt": started,
                        "finishedAt": now_rfc3339(),
                        "message": "The container could not be located when the pod was terminated",
                    }
                },
            )

        self._set_status(pod, evicted)
        self.recorder.event(pod, "Warning", "Evicted", message, "kubelet")

    # -- logs ------------------------------------------------------------------------------
    def log_runs(self, pod: dict[str, Any], container: str) -> list[ContainerLog]:
        return self.logs.of(pod["metadata"]["uid"], container)

    def read_log(
        self,
        pod: dict[str, Any],
        container: str,
        *,
        follow: bool,
        timestamps: bool,
        previous: bool,
        since_seconds: int | None,
        tail_lines: int | None,
        stop: Callable[[], bool],
    ) -> Iterator[bytes]:
        """The container's log as the API streams it; with follow, until the container stops."""
        return self.logs.read(
            pod["metadata"]["uid"],
            container,
            follow=follow,
            timestamps=timestamps,
            previous=previous,
            since_seconds=since_seconds,
            tail_lines=tail_lines,
            stop=stop,
        )
