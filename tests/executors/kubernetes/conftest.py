"""Fixtures of the Kubernetes executor's tests only (each module declares its own `cluster`).

- `executors`: `Executors`, new `KubernetesExecutor`s on the module's emulated cluster, each with its
  own observations, all closed at the end; `executor_settings` (a module may override it) adds to
  the deployed settings of k8s.py `executor_config`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kube_emulator import EmulatedCluster

from jupyter_gpuplat.core.request import Entrypoint
from jupyter_gpuplat.executors.base import LaunchRequest, Observation
from jupyter_gpuplat.executors.kubernetes.executor import KubernetesExecutor

from ...k8s import executor_config


class Executors:
    """New KubernetesExecutors on the emulator, each with its own list of observations; all closed at the end."""

    def __init__(self, cluster: EmulatedCluster, tmp_path: Path, **settings: Any) -> None:
        self.artifacts = tmp_path / "artifacts"
        self.settings = {**executor_config(cluster, tmp_path, self.artifacts), **settings}
        self.made: list[KubernetesExecutor] = []

    def new(self) -> tuple[KubernetesExecutor, list[Observation]]:
        seen: list[Observation] = []
        ex = KubernetesExecutor(**self.settings)
        ex.set_observer(seen.append)  # starts the shared list+watch cache, as the engine's start does
        self.made.append(ex)
        return ex, seen

    def request(self, run_id: str, shell: str) -> LaunchRequest:
        """A shell run of team-a on one GPU, its workdir under the artifacts."""
        return LaunchRequest(
            run_id=run_id,
            entrypoint=Entrypoint(kind="shell", shell=shell),
            env={},
            devices=(),
            workdir=str(self.artifacts / run_id),
            spec={"queue": "team-a-train", "resources": {"gpu": 1, "cpu": "1", "memory": "1Gi"}},
            project="team-a",
            user="alice",
        )

    async def close(self) -> None:
        for ex in self.made:
            await ex.close()


@pytest.fixture
def executor_settings() -> dict[str, Any]:
    return {}


@pytest.fixture
def executors(
    cluster: EmulatedCluster,
    tmp_path: Path,
    jp_asyncio_loop: asyncio.AbstractEventLoop,
    executor_settings: dict[str, Any],
) -> Iterator[Executors]:
    made = Executors(cluster, tmp_path, **executor_settings)
    yield made
    jp_asyncio_loop.run_until_complete(made.close())
