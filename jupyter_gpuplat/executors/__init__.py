"""Executors: adapters that start, observe and stop workloads and report Observations.

Executors never write run state; the engine records what they report. Names are
loaded lazily so that importing this package stays cheap.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .base import Device, Executor, ExecutorError, LaunchRequest, Observation
    from .kubernetes import KubernetesExecutor
    from .local.executor import LocalExecutor
    from .local.gpus import detect_gpus, parse_nvidia_smi

__all__ = [
    "Device",
    "Executor",
    "ExecutorError",
    "KubernetesExecutor",
    "LaunchRequest",
    "LocalExecutor",
    "Observation",
    "detect_gpus",
    "parse_nvidia_smi",
]

_HOMES = {
    "Device": "base",
    "Executor": "base",
    "ExecutorError": "base",
    "LaunchRequest": "base",
    "Observation": "base",
    "KubernetesExecutor": "kubernetes",
    "LocalExecutor": "local",
    "detect_gpus": "local.gpus",
    "parse_nvidia_smi": "local.gpus",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f"{__name__}.{home}"), name)
