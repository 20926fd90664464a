"""A GPU session's kernel on Kubernetes: its key's Secret, and where to connect.

The Secret is created before the Job (so the pod never waits for it), then given the Job
as owner (so Kubernetes deletes it with the Job, whoever deletes the Job, TTL included).
A Secret left by a submission that crashed before its Job existed is adopted when it
carries the same run id. The key is read back from the Secret after a server restart.
Calls are blocking: the executor runs them in a thread.

Which start of the kernel runs now (its generation) is known from the agent's own line,
"gpuplat: kernel N started", in the pod's log as the executor archives it: the provisioner
waits for a higher one after a restart. The kernel's pid is not given: the pod's pids are
not this machine's.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ...core.artifacts import LOG
from ..base import ExecutorError
from . import rundir
from .apierror import api_error
from .manifests import CONTAINER, KERNEL_SECRET_KEY, LABEL_RUN, owner_reference

PORT_FIELDS = ("shell_port", "iopub_port", "stdin_port", "control_port", "hb_port")
_STARTED = re.compile(rb"^gpuplat: kernel (\d+) started", re.MULTILINE)
LOG_TAIL_BYTES = 64 * 1024


def decode_key(secret: Mapping[str, Any], name: str) -> str:
    raw = (secret.get("data") or {}).get(KERNEL_SECRET_KEY)
    if not raw:
        raise ExecutorError(f"Secret {name} holds no kernel key (data.{KERNEL_SECRET_KEY})")
    try:
        return base64.b64decode(raw, validate=True).decode()
    except (binascii.Error, UnicodeDecodeError) as exc:
        raise ExecutorError(f"Secret {name}: data.{KERNEL_SECRET_KEY} is not base64 text") from exc


class KernelSecrets:
    """Create, own, read and delete sessions' key Secrets in one namespace."""

    def __init__(self, core: Any, namespace: str, timeout: tuple[float, float], on_call: Callable[[], None]) -> None:
        self.core = core
        self.namespace = namespace
        self.timeout = timeout
        self.on_call = on_call

    def create(self, run_id: str, manifest: Mapping[str, Any], key: str) -> str:
        """Create the Secret; the key it holds (an earlier attempt's, when that Secret is this run's)."""
        from kubernetes.client.exceptions import ApiException

        name = manifest["metadata"]["name"]
        try:
            self.on_call()
            self.core.create_namespaced_secret(
                self.namespace, manifest, _preload_content=False, _request_timeout=self.timeout
            )
            return key
        except ApiException as exc:
            if exc.status != 409:
                raise ExecutorError(
                    f"Kubernetes refused the kernel Secret {name} of run {run_id}: {api_error(exc)}"
                ) from exc
        except Exception as exc:
            raise ExecutorError(f"cannot reach the Kubernetes API to create the Secret of run {run_id}: {exc}") from exc
        existing = self.read(name)
        owner = (existing["metadata"].get("labels") or {}).get(LABEL_RUN)
        if owner != run_id:
            raise ExecutorError(
                f"Secret {name} in namespace {self.namespace} already exists and carries run id {owner!r} "
                f"(label {LABEL_RUN}), not {run_id}: not adopted; delete it if nobody needs it"
            )
        return decode_key(existing, name)

    def own(self, name: str, job: str, uid: str) -> None:
        """Make the Job the Secret's owner (garbage-collected with it)."""
        from kubernetes.client.exceptions import ApiException

        body = {"metadata": {"ownerReferences": [owner_reference(job, uid)]}}
        try:
            self.on_call()
            self.core.patch_namespaced_secret(
                name, self.namespace, body, _preload_content=False, _request_timeout=self.timeout
            )
        except ApiException as exc:
            raise ExecutorError(f"cannot give Secret {name} its Job {job} as owner: {api_error(exc)}") from exc
        except Exception as exc:
            raise ExecutorError(f"cannot reach the Kubernetes API to own Secret {name}: {exc}") from exc

    def read(self, name: str) -> dict[str, Any]:
        from kubernetes.client.exceptions import ApiException

        try:
            self.on_call()
            resp = self.core.read_namespaced_secret(
                name, self.namespace, _preload_content=False, _request_timeout=self.timeout
            )
        except ApiException as exc:
            raise ExecutorError(f"cannot read the kernel Secret {name}: {api_error(exc)}") from exc
        except Exception as exc:
            raise ExecutorError(f"cannot reach the Kubernetes API to read Secret {name}: {exc}") from exc
        data: dict[str, Any] = json.loads(resp.data)
        return data

    def key(self, name: str) -> str:
        return decode_key(self.read(name), name)

    def delete(self, name: str) -> None:
        """Best effort: a Secret whose Job was never created."""
        try:
            self.on_call()
            self.core.delete_namespaced_secret(
                name, self.namespace, _preload_content=False, _request_timeout=self.timeout
            )
        except Exception:
            pass  # a Secret left behind holds a key no kernel uses; it carries the run id to find it


def kernel_pod(pods: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The session's pod once its container runs and it has an IP; None before (and once it ends)."""
    for pod in pods:
        status = pod.get("status") or {}
        if (pod.get("metadata") or {}).get("deletionTimestamp") or status.get("phase") != "Running":
            continue
        running = any(
            cs.get("name") == CONTAINER and "running" in (cs.get("state") or {})
            for cs in status.get("containerStatuses") or ()
        )
        if running and status.get("podIP"):
            return pod
    return None


def connection_info(ip: str, ports: Sequence[int], key: str) -> dict[str, Any]:
    """Jupyter connection info for the kernel on `ip` (as the agent in the pod writes it)."""
    info: dict[str, Any] = dict(zip(PORT_FIELDS, ports, strict=True))
    info.update(ip=ip, key=key, transport="tcp", signature_scheme="hmac-sha256", kernel_name="")
    return info


def kernel_generation(workdir: str) -> int | None:
    """The latest kernel start the agent logged ("gpuplat: kernel N started"), None before the first.

    Read from the run's archived log through rundir (the pod may have made `output.log` a link).
    """
    tail = rundir.read_tail(workdir, LOG, LOG_TAIL_BYTES)
    if tail is None:
        return None
    found = _STARTED.findall(tail)
    return int(found[-1]) if found else None
