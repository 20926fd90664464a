"""Reading the runs' namespace for the isolation report: its labels and NetworkPolicies, read again in a thread."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from .apierror import api_error
from .isolation import NamespaceFacts


class FactsReader:
    """The namespace's facts as last read; `refresh` reads them again in a thread, one read at a time."""

    def __init__(
        self, read: Callable[[], NamespaceFacts], namespace: str, log: logging.Logger | logging.LoggerAdapter[Any]
    ) -> None:
        self._read_facts = read
        self.namespace = namespace
        self.log = log
        self.facts: NamespaceFacts | None = None
        self.read_at = 0.0
        self._reading = threading.Lock()

    def age(self) -> float:
        """Seconds since the last read began."""
        return time.monotonic() - self.read_at

    def refresh(self) -> None:
        """Read the namespace's labels and NetworkPolicies again, in a thread (one at a time)."""
        if not self._reading.acquire(blocking=False):
            return
        self.read_at = time.monotonic()
        threading.Thread(target=self._read, name="gpuplat-k8s-isolation", daemon=True).start()

    def _read(self) -> None:
        try:
            self.facts = self._read_facts()
        except Exception:  # never let a bad answer kill the thread's lock
            self.log.exception("gpuplat: reading namespace %s for capacity.isolation failed", self.namespace)
        finally:
            self._reading.release()


def read_namespace_facts(
    core: Any, net: Any, namespace: str, timeout: tuple[float, float], on_call: Callable[[], None]
) -> NamespaceFacts:
    """The namespace's labels and NetworkPolicies (blocking); what could not be read is None, with why."""
    from kubernetes.client.exceptions import ApiException

    t = timeout
    labels: dict[str, str] | None = None
    policies: list[dict[str, Any]] | None = None
    errors: list[str] = []
    try:
        on_call()
        ns = json.loads(core.read_namespace(namespace, _preload_content=False, _request_timeout=t).data)
        labels = dict((ns.get("metadata") or {}).get("labels") or {})
    except ApiException as exc:
        errors.append(f"namespace: {api_error(exc)}")
    except Exception as exc:
        errors.append(f"namespace: {exc}")
    try:
        on_call()
        resp = net.list_namespaced_network_policy(namespace, _preload_content=False, _request_timeout=t)
        policies = list(json.loads(resp.data).get("items") or [])
    except ApiException as exc:
        errors.append(f"networkpolicies: {api_error(exc)}")
    except Exception as exc:
        errors.append(f"networkpolicies: {exc}")
    return NamespaceFacts(namespace, labels, policies, tuple(errors))
