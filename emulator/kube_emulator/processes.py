"""Local pods: a container's command run as a real process on this machine (opt in).

With `EmulatedCluster(local_processes=True)` a bound pod's container is not read as the
kubelet's tiny script but started as a subprocess, in its own process group, once the pod
is scheduled and its image "pulled". What a container would give it, it gets here:

- its own IP: one loopback address per pod (Linux routes all of 127/8 to `lo`), from a
  block of 127/8 picked at random per cluster so that concurrent clusters (parallel test
  runs) do not hand out the same addresses; the address is the pod's `status.podIP`;
- its env, resolved as the kubelet does: `value`, `valueFrom.fieldRef` (metadata.name,
  metadata.namespace, metadata.uid, spec.nodeName, status.podIP, status.hostIP) and
  `valueFrom.secretKeyRef` / `configMapKeyRef` read from the store; `$(VAR)` references in
  command, args and env values expanded from the env defined before them (`$$` escapes);
- its own `/tmp`, `HOME` and `HOSTNAME`: arguments that name `/tmp` or a path under it are
  rewritten into a private directory of the pod, which is also its `TMPDIR` and `HOME`;
- `python` / `python3` as the command resolve to this interpreter (`sys.executable`), whose
  directory also comes first on PATH: the "image" is this machine's environment.

Its stdout and stderr, line by line, are the pod's log. Exit code N ends the container with
N; a signal S with 128+S (143 for SIGTERM, 137 for SIGKILL), as container runtimes report.
As in a container, the command is the group's first process (PID 1 there): deleting the pod
sends it SIGTERM, and SIGKILL to the whole group after the grace period; when it exits,
whatever it started is killed with it (a container's PID namespace ends with its PID 1).
"""

from __future__ import annotations

import base64
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .store import RESOURCES, Store

SECRET = RESOURCES[("", "secrets")]
CONFIGMAP = RESOURCES[("", "configmaps")]
_REF = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")
_PYTHONS = ("python", "python3", f"python{sys.version_info.major}.{sys.version_info.minor}")


def expand(text: str, env: Mapping[str, str]) -> str:
    """Kubernetes' `$(VAR)` expansion: a defined VAR is replaced, an unknown one kept, `$$` is `$`."""

    def one(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        name = m.group(1)
        return env[name] if name in env else m.group(0)

    return _REF.sub(one, text)


def field_value(pod: Mapping[str, Any], path: str) -> str:
    meta = pod.get("metadata") or {}
    status = pod.get("status") or {}
    simple = {
        "metadata.name": meta.get("name"),
        "metadata.namespace": meta.get("namespace"),
        "metadata.uid": meta.get("uid"),
        "spec.nodeName": (pod.get("spec") or {}).get("nodeName"),
        "spec.serviceAccountName": (pod.get("spec") or {}).get("serviceAccountName") or "default",
        "status.podIP": status.get("podIP"),
        "status.hostIP": status.get("hostIP"),
    }
    if path in simple:
        return str(simple[path] or "")
    m = re.fullmatch(r"metadata\.(labels|annotations)\['([^']+)'\]", path)
    if m:
        return str((meta.get(m.group(1)) or {}).get(m.group(2), ""))
    return ""


def secret_value(obj: Mapping[str, Any], key: str) -> str | None:
    """A Secret's value: `data` is base64, as the API keeps it."""
    raw = (obj.get("data") or {}).get(key)
    if raw is None:
        return None
    try:
        return base64.b64decode(raw, validate=True).decode()
    except ValueError:
        return str(raw)  # written by hand into the store, not through the API


def resolve_env(store: Store, pod: Mapping[str, Any], container: Mapping[str, Any]) -> dict[str, str]:
    """The container's env as the kubelet builds it (envFrom first, then env in order)."""
    ns = pod["metadata"]["namespace"]
    env: dict[str, str] = {}
    for src in container.get("envFrom") or ():
        prefix = src.get("prefix") or ""
        for ref_key, rt in (("secretRef", SECRET), ("configMapRef", CONFIGMAP)):
            ref = src.get(ref_key)
            obj = store.find(rt, ns, ref["name"]) if ref else None
            if obj is None:
                continue
            for k in obj.get("data") or {}:
                got = secret_value(obj, k) if rt is SECRET else str(obj["data"][k])
                env[prefix + k] = got or ""
    for e in container.get("env") or ():
        if "value" in e:
            env[e["name"]] = expand(str(e["value"]), env)
            continue
        src = e.get("valueFrom") or {}
        value: str | None = None
        if "fieldRef" in src:
            value = field_value(pod, src["fieldRef"].get("fieldPath", ""))
        elif "secretKeyRef" in src:
            ref = src["secretKeyRef"]
            obj = store.find(SECRET, ns, ref["name"])
            value = secret_value(obj, ref["key"]) if obj is not None else None
        elif "configMapKeyRef" in src:
            ref = src["configMapKeyRef"]
            obj = store.find(CONFIGMAP, ns, ref["name"])
            value = (obj.get("data") or {}).get(ref["key"]) if obj is not None else None
        if value is not None:
            env[e["name"]] = value
        elif "value" not in e and not src:
            env[e["name"]] = ""
    return env


@dataclass(eq=False)
class LocalProcess:
    """One container run as a process; `exited` is called once, from its reader thread."""

    uid: str
    popen: subprocess.Popen[bytes]
    reader: threading.Thread | None = None
    deleting: bool = False
    killed: bool = False

    @property
    def alive(self) -> bool:
        return self.popen.poll() is None

    def kill_if_alive(self) -> None:
        if self.alive:
            self.signal_group(signal.SIGKILL)

    def terminate(self) -> None:
        """What the kubelet does first: SIGTERM to the container's main process only."""
        try:
            self.popen.send_signal(signal.SIGTERM)
        except ProcessLookupError:
            pass

    def signal_group(self, sig: int) -> None:
        try:
            os.killpg(self.popen.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


class LocalRuntime:
    """Starts pods' containers as processes, hands out loopback pod IPs, kills them on delete."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.root = tempfile.mkdtemp(prefix="kube-emulator-pods-")
        self._block = (random.randint(1, 254), random.randint(0, 255))  # 127.A.B.0/24
        self._ips: dict[str, str] = {}  # pod uid → IP
        self.processes: dict[str, LocalProcess] = {}

    # -- addresses ---------------------------------------------------------------------------
    def ip_for(self, uid: str) -> str:
        """The pod's own loopback address (kept for the pod's life, reused after it is gone)."""
        known = self._ips.get(uid)
        if known is not None:
            return known
        taken = set(self._ips.values())
        a, b = self._block
        for n in range(2, 255):
            ip = f"127.{a}.{b}.{n}"
            if ip not in taken:
                self._ips[uid] = ip
                return ip
        raise RuntimeError("kube-emulator: more than 253 local pods at once")

    def release(self, uid: str) -> None:
        """The pod is gone: kill what is left of its process, free its address and directory."""
        proc = self.processes.pop(uid, None)
        if proc is not None and proc.alive:
            proc.killed = True
            proc.signal_group(signal.SIGKILL)
        self._ips.pop(uid, None)
        shutil.rmtree(os.path.join(self.root, uid), ignore_errors=True)

    # -- starting ----------------------------------------------------------------------------
    def pod_dir(self, uid: str) -> str:
        path = os.path.join(self.root, uid)
        os.makedirs(os.path.join(path, "tmp"), exist_ok=True)
        return path

    def argv(self, pod: Mapping[str, Any], container: Mapping[str, Any], env: Mapping[str, str]) -> list[str]:
        tmp = os.path.join(self.pod_dir(pod["metadata"]["uid"]), "tmp")
        words = [expand(str(w), env) for w in [*(container.get("command") or ()), *(container.get("args") or ())]]
        words = [tmp + w[4:] if w == "/tmp" or w.startswith("/tmp/") else w for w in words]
        if words and words[0] in _PYTHONS:
            words[0] = sys.executable
        return words

    def process_env(self, pod: Mapping[str, Any], env: Mapping[str, str]) -> dict[str, str]:
        home = self.pod_dir(pod["metadata"]["uid"])
        bin_dir = os.path.dirname(sys.executable)
        base = {
            "PATH": os.pathsep.join([bin_dir, os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin")]),
            "HOME": home,
            "TMPDIR": os.path.join(home, "tmp"),
            "HOSTNAME": str(pod["metadata"]["name"]),
            "LANG": "C.UTF-8",
        }
        return {**base, **env}

    def start(
        self,
        pod: Mapping[str, Any],
        container: Mapping[str, Any],
        env: Mapping[str, str],
        on_line: Callable[[str], None],
        on_exit: Callable[[int], None],
    ) -> LocalProcess:
        """Start the container's command; raises OSError when it cannot be executed."""
        uid = pod["metadata"]["uid"]
        argv = self.argv(pod, container, env)
        if not argv:
            raise FileNotFoundError("no command")
        workdir = str(container.get("workingDir") or "")
        cwd = workdir if workdir and os.path.isdir(workdir) else self.pod_dir(uid)
        popen = subprocess.Popen(
            argv,
            env=self.process_env(pod, env),
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own group: a delete ends everything it started
        )
        proc = LocalProcess(uid, popen)
        self.processes[uid] = proc

        def teardown() -> None:
            popen.wait()
            proc.signal_group(signal.SIGKILL)  # the main process ended: so does everything it started

        def read() -> None:
            assert popen.stdout is not None
            for raw in iter(popen.stdout.readline, b""):
                on_line(raw.decode(errors="replace").rstrip("\r\n"))
            popen.stdout.close()
            code = popen.wait()
            on_exit(128 - code if code < 0 else code)

        threading.Thread(target=teardown, name=f"k8s-emulator-pid1-{uid[:8]}", daemon=True).start()
        proc.reader = threading.Thread(target=read, name=f"k8s-emulator-pod-{uid[:8]}", daemon=True)
        proc.reader.start()
        return proc

    # -- stopping ----------------------------------------------------------------------------
    def stop_all(self) -> None:
        """The cluster stops: nothing it started outlives it."""
        for uid in list(self.processes):
            proc = self.processes.pop(uid)
            proc.killed = True
            proc.signal_group(signal.SIGKILL)
            if proc.reader is not None:
                proc.reader.join(5)
        shutil.rmtree(self.root, ignore_errors=True)
