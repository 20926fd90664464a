"""Following a run's pods' logs into its `output.log`: one follower per pod once its container started."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from .cache import ClusterCache, Snapshot
from .logs import LogFollower, LogState
from .podstate import pod_container_ended, pod_container_started
from .runs import WatchedRun


class PodLogs:
    """Starts the log followers of runs' pods, at most `slots` streaming at once, and tells them when to stop."""

    def __init__(
        self,
        core: Any,
        namespace: str,
        cache: ClusterCache,
        slots: threading.Semaphore,
        *,
        connect_seconds: float,
        idle_seconds: float,
        settle_seconds: float,
        on_call: Callable[[], None],
        log: logging.Logger | logging.LoggerAdapter[Any],
    ) -> None:
        self._core = core
        self.namespace = namespace
        self._cache = cache
        self._slots = slots
        self._connect_seconds = connect_seconds
        self._idle_seconds = idle_seconds
        self._settle_seconds = settle_seconds
        self._on_call = on_call
        self.log = log

    def follow(self, run: WatchedRun, snap: Snapshot) -> None:
        """Start following each pod whose container started; mark those whose container ended."""
        for pod in snap.gone:
            known = run.followers.get(pod["metadata"]["name"])
            if known is not None:
                known.container_done.set()
        for pod in snap.pods:
            name = pod["metadata"]["name"]
            known = run.followers.get(name)
            if known is not None and pod_container_ended(pod):
                known.container_done.set()
            if name in run.followers or not pod_container_started(pod):
                continue
            if run.log_state is None:
                run.log_state = LogState(run.workdir, self.log)
            pods = self._cache.pods  # read from follower threads: a dict lookup is atomic

            def ended(pod_name: str = name, pods: dict[str, Any] = pods) -> bool:
                p = pods.get(pod_name)
                return p is None or pod_container_ended(p)

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
                connect_seconds=self._connect_seconds,
                idle_seconds=self._idle_seconds,
                on_call=self._on_call,
                log=self.log,
            )
            follower.settle_seconds = self._settle_seconds
            if pod_container_ended(pod):
                follower.container_done.set()
            run.followers[name] = follower
            follower.start()
