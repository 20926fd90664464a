"""The Kubernetes executor (the `kubernetes` extra): runs as batch/v1 Jobs.

`manifests` (pure builders), `explain` (pure explanations over Job, Pods, Events),
`cache` (the one shared list+watch cache), `logs` and `podlogs` (log following), `executor` (with
`settings`, `jobclient`, `runs`, `podstate`, `namespacefacts`, `apiclient`), and
`check` (`gpuplat cluster check`). Names load lazily: the pure modules need no client.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .check import CheckReport, check_cluster
    from .executor import KubernetesExecutor

__all__ = ["CheckReport", "KubernetesExecutor", "check_cluster"]
_HOMES = {"KubernetesExecutor": "executor", "CheckReport": "check", "check_cluster": "check"}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f"{__name__}.{home}"), name)
