"""A run's objects through the API: its Job (adopting one a lost handle left), a session's Secret and NetworkPolicy.

Every call counts through `on_call` (the executor's `api_calls`: calls made outside the informers).
"""

from __future__ import annotations

import json
import logging
import secrets
from collections.abc import Callable
from typing import Any

from ..base import ExecutorError, LaunchRequest
from .apierror import api_error
from .manifests import JobSettings, make_kernel_policy, make_kernel_secret
from .runs import WatchedRun
from .sessions import KernelSecrets


class JobClient:
    """Creates and deletes the Jobs (and a session's Secret and NetworkPolicy) of one namespace."""

    def __init__(
        self,
        batch: Any,
        net: Any,
        kernel_secrets: KernelSecrets,
        namespace: str,
        timeout: tuple[float, float],
        on_call: Callable[[], None],
        log: logging.Logger | logging.LoggerAdapter[Any],
    ) -> None:
        self._batch = batch
        self._net = net
        self._secrets = kernel_secrets
        self.namespace = namespace
        self.timeout = timeout
        self._count_call = on_call
        self.log = log

    def create_session(
        self, req: LaunchRequest, run: WatchedRun, manifest: dict[str, Any], settings: JobSettings, network_policy: bool
    ) -> str:
        """The key's Secret first (the pod never waits for it), then the Job, then the Job owns the Secret."""
        assert self._secrets is not None
        secret = make_kernel_secret(req, settings, secrets.token_hex(32))
        name = secret["metadata"]["name"]
        run.kernel_key = self._secrets.create(req.run_id, secret, secret["stringData"]["key"])
        run.secret, run.kernel_ports = name, settings.kernel_ports
        try:
            uid = self.create_job(req.run_id, manifest)
        except ExecutorError:
            self._secrets.delete(name)
            raise
        try:
            self._secrets.own(name, run.job, uid)
            if network_policy and settings.hub_namespace:
                self.create_kernel_policy(req, settings, uid)
        except ExecutorError:  # a Job whose submission failed must not keep a GPU
            self.delete_job(run.job, 0, "Background")
            self._secrets.delete(name)
            raise
        return uid

    def create_kernel_policy(self, req: LaunchRequest, settings: JobSettings, job_uid: str) -> None:
        """Only the owner's Jupyter server may reach the kernel; the policy goes with the Job (its owner)."""
        from kubernetes.client.exceptions import ApiException

        policy = make_kernel_policy(req, settings, job_uid)
        t = self.timeout
        try:
            self._count_call()
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

    def create_job(self, run_id: str, manifest: dict[str, Any]) -> str:
        from kubernetes.client.exceptions import ApiException

        t = self.timeout
        try:
            self._count_call()
            resp = self._batch.create_namespaced_job(
                self.namespace, manifest, _preload_content=False, _request_timeout=t
            )
            return str(json.loads(resp.data)["metadata"]["uid"])
        except ApiException as exc:
            if exc.status == 409:
                return self.adopt_job(run_id, manifest["metadata"]["name"])
            raise ExecutorError(f"Kubernetes refused the Job of run {run_id}: {api_error(exc)}") from exc
        except ExecutorError:
            raise
        except Exception as exc:
            raise ExecutorError(f"cannot reach the Kubernetes API to create the Job of run {run_id}: {exc}") from exc

    def adopt_job(self, run_id: str, name: str) -> str:
        """The Job exists: created before a crash that lost the handle. Adopt it only if it is this run's."""
        from kubernetes.client.exceptions import ApiException

        t = self.timeout
        try:
            self._count_call()
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

    def delete_job(self, name: str, grace_seconds: float | None, policy: str) -> None:
        from kubernetes.client.exceptions import ApiException

        kwargs: dict[str, Any] = {
            "propagation_policy": policy,
            "_preload_content": False,
            "_request_timeout": self.timeout,
        }
        if grace_seconds is not None:
            kwargs["grace_period_seconds"] = max(0, int(grace_seconds))
        try:
            self._count_call()
            self._batch.delete_namespaced_job(name, self.namespace, **kwargs)
        except ApiException as exc:
            if exc.status != 404:
                self.log.warning("gpuplat: deleting Job %s failed: %s", name, api_error(exc))
        except Exception as exc:
            self.log.warning("gpuplat: deleting Job %s failed: %s", name, exc)
