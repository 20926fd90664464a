"""Prometheus metrics of the control plane (`<base>metrics`, text exposition format).

Unauthenticated, like `health/*`: the numbers name queues, never users, projects or runs, and a
scraper in the cluster holds no Hub token. Restrict who reaches the port (NetworkPolicy) when queue
names are confidential.

- `gpuplat_queue_pending{queue}`, `gpuplat_queue_running{queue}`, `gpuplat_queue_gpus_used{queue}`:
  read from the engine's queues at scrape time (the leader's view; a standby has none).
- `gpuplat_admissions_total{queue}`: runs dispatched, counted from the engine's status events.
- `gpuplat_queue_wait_seconds{queue}`: Queued → Running, from the same events' times.
- `gpuplat_api_request_duration_seconds{method,route,code}`: every HTTP request (tornado's
  `log_function`; SSE streams count their whole life).
- `gpuplat_leader` (1 leader, 0 standby) and `gpuplat_leader_epoch`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from tornado import web
from tornado.log import access_log

from ...core.status import FINAL

log = logging.getLogger(__name__)

WAIT_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600, 4 * 3600, 24 * 3600)
API_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10, 60)
MAX_TRACKED = 1_000_000  # queued times kept for runs not yet running (bounded: a leak would be silent)


class _QueueCollector(Collector):
    def __init__(self, metrics: ControlPlaneMetrics) -> None:
        self.metrics = metrics

    def collect(self) -> Iterator[Metric]:
        pending = GaugeMetricFamily("gpuplat_queue_pending", "Runs waiting in the queue", labels=["queue"])
        running = GaugeMetricFamily("gpuplat_queue_running", "Runs holding a slot of the queue", labels=["queue"])
        gpus = GaugeMetricFamily("gpuplat_queue_gpus_used", "GPUs held by the queue's runs", labels=["queue"])
        for name, q in self.metrics.queues().items():
            pending.add_metric([name], q.pending_count)
            running.add_metric([name], len(q.held))
            gpus.add_metric([name], q.used.gpu)
        leader = GaugeMetricFamily("gpuplat_leader", "1 when this control plane is the leader, else 0")
        leader.add_metric([], 1 if self.metrics.role() == "leader" else 0)
        epoch = GaugeMetricFamily("gpuplat_leader_epoch", "Fencing epoch this control plane leads with (0: none)")
        epoch.add_metric([], self.metrics.epoch() or 0)
        yield from (pending, running, gpus, leader, epoch)


class ControlPlaneMetrics:
    """One registry per control plane (not the process-global one: tests run several)."""

    def __init__(self, platform: Any) -> None:
        self.platform = platform
        self.registry = CollectorRegistry()
        self.admissions = Counter(
            "gpuplat_admissions", "Runs admitted (dispatched) by queue", ["queue"], registry=self.registry
        )
        self.wait = Histogram(
            "gpuplat_queue_wait_seconds",
            "Seconds from Queued to Running, by queue",
            ["queue"],
            buckets=WAIT_BUCKETS,
            registry=self.registry,
        )
        self.api = Histogram(
            "gpuplat_api_request_duration_seconds",
            "Seconds to answer an HTTP request, by method, route and status code",
            ["method", "route", "code"],
            buckets=API_BUCKETS,
            registry=self.registry,
        )
        self.registry.register(_QueueCollector(self))
        self._queued_at: dict[str, float] = {}
        self._task: asyncio.Task[None] | None = None

    # ---- what the collector reads ---------------------------------------------
    def queues(self) -> dict[str, Any]:
        return self.platform.engine.reads.queue_states() if self.platform.is_leader else {}

    def role(self) -> str:
        return "leader" if self.platform.is_leader else "standby"

    def epoch(self) -> int | None:
        return self.platform.epoch

    # ---- status events ------------------------------------------------------------
    def observe_event(self, ev: dict[str, Any]) -> None:
        status, run_id, queue = ev.get("status"), ev.get("run_id"), ev.get("queue") or ""
        if not isinstance(run_id, str):
            return
        if status == "queued":
            if len(self._queued_at) < MAX_TRACKED:
                self._queued_at.setdefault(run_id, float(ev["at"]))
        elif status == "dispatched":
            self.admissions.labels(queue).inc()
        elif status == "running":
            queued = self._queued_at.pop(run_id, None)
            if queued is not None:
                self.wait.labels(queue).observe(max(0.0, float(ev["at"]) - queued))
        elif status in FINAL:
            self._queued_at.pop(run_id, None)

    def follow(self, bus: Any) -> None:
        """Count the engine's status events from now on (the leader calls it once elected)."""
        if self._task is None:
            self._task = asyncio.ensure_future(self._follow(bus))

    async def _follow(self, bus: Any) -> None:
        while True:
            sub = bus.subscribe()
            try:
                while not sub.overflowed or not sub.queue.empty():
                    self.observe_event(await sub.queue.get())
            finally:
                bus.unsubscribe(sub)
            log.warning("metrics fell behind the engine's events; some admissions were not counted")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None

    # ---- HTTP ---------------------------------------------------------------------
    def observe_request(self, handler: web.RequestHandler) -> None:
        """tornado's `log_function`: time every request; the access log stays as tornado writes it."""
        _access_log(handler)
        route = type(handler).__name__
        code = str(handler.get_status())
        self.api.labels(handler.request.method or "", route, code).observe(handler.request.request_time())

    def render(self) -> bytes:
        return generate_latest(self.registry)


def _access_log(handler: web.RequestHandler) -> None:
    # What tornado's default log_request writes (a log_function replaces it).
    status = handler.get_status()
    write = access_log.info if status < 400 else access_log.warning if status < 500 else access_log.error
    write("%d %s %.2fms", status, handler._request_summary(), 1000.0 * handler.request.request_time())


class PrometheusHandler(web.RequestHandler):
    """`<base>metrics`: the control plane's metrics, unauthenticated (see the module docstring)."""

    def initialize(self, metrics: ControlPlaneMetrics) -> None:
        self.metrics = metrics

    def get(self) -> None:
        self.set_header("Content-Type", CONTENT_TYPE_LATEST)
        self.finish(self.metrics.render())
