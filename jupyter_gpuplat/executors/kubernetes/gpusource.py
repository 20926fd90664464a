"""Where the Kubernetes executor reads its runs' GPUs: the DCGM exporters, listed or found (blocking; issue 27).

`dcgm_exporter_urls` names the scrapes (one per node, or a Prometheus federation endpoint);
`dcgm_exporter_selector` finds the exporter pods through the Kubernetes API instead (their
namespace, label selector and port), listed again at every reading so a new node's exporter
is read from its first sample. Every scrape is fetched in a thread of its own with a short
timeout, never through an HTTP proxy (pod IPs are the cluster's own); one that fails is named
with its error, and only when none could be read is the whole reading "not measured".
"""

from __future__ import annotations

import urllib.request
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from ...core.gpu_usage import NotMeasured
from ..base import ExecutorError, GpuReading
from .apierror import api_error
from .dcgm import GpuSeries, PodRef, parse, run_samples

NOT_CONFIGURED = "no DCGM exporter is configured (KubernetesExecutor.dcgm_exporter_urls)"
MAX_SCRAPE_BYTES = 64 << 20  # a node's exporter writes tens of KiB; a federation endpoint may write more
# Pod IPs and in-cluster services are never reached through the server's HTTP proxy.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


@dataclass(frozen=True)
class Discovery:
    """The exporter pods to find: `namespace`, `selector` (labels), `port` of their /metrics."""

    namespace: str
    selector: str
    port: int


class DcgmSource:
    """Reads the exporters and matches their series to the runs' pods.

    `urls` or `discovery` (not both); `list_pods(namespace, selector, timeout)` lists pods through
    the API; `pods_of(run_id)` gives a run's pods (from the cluster cache).
    """

    def __init__(
        self,
        urls: Sequence[str],
        discovery: Discovery | None,
        timeout_seconds: float,
        list_pods: Callable[[str, str, float], list[Any]],
        pods_of: Callable[[str], Sequence[PodRef]],
    ) -> None:
        if urls and discovery is not None:
            raise ExecutorError(
                "KubernetesExecutor: set dcgm_exporter_urls or dcgm_exporter_selector, not both",
                "list the exporters' URLs, or let the executor find the exporter pods by their labels",
            )
        self.urls = tuple(urls)
        self.discovery = discovery
        self.timeout_seconds = timeout_seconds
        self._list_pods = list_pods
        self._pods_of = pods_of

    @classmethod
    def of(
        cls,
        settings: Any,
        core: Callable[[], Any],
        run_pods: Callable[[str], Iterable[Mapping[str, Any]]],
        on_call: Callable[[], None],
    ) -> DcgmSource:
        """The Kubernetes executor's: its settings, its CoreV1Api once started (`core()`), its cache's pods of a run."""

        def list_pods(namespace: str, selector: str, timeout_seconds: float) -> list[Any]:
            api = core()
            if api is None:
                raise ExecutorError("the Kubernetes executor has not started")
            on_call()
            t = (settings.connect_timeout_seconds, timeout_seconds)
            return list(api.list_namespaced_pod(namespace, label_selector=selector, _request_timeout=t).items)

        found = None
        if settings.dcgm_exporter_selector:
            found = Discovery(
                settings.dcgm_exporter_namespace, settings.dcgm_exporter_selector, settings.dcgm_exporter_port
            )
        pods_of = lambda run_id: pod_refs(run_pods(run_id))  # noqa: E731
        return cls(settings.dcgm_exporter_urls, found, settings.dcgm_timeout_seconds, list_pods, pods_of)

    def read(self, held: Mapping[str, tuple[int, ...]], at: float) -> GpuReading:
        """Each held run's samples, or why none; NotMeasured when no exporter could be read."""
        urls = self.exporter_urls()
        if isinstance(urls, NotMeasured):
            return urls
        scrapes = self._scrape_all(urls)
        series: list[GpuSeries] = []
        unread: list[str] = []
        for url, got in scrapes.items():
            if isinstance(got, str):
                unread.append(f"{url}: {got}")
            else:
                series += got
        if len(unread) == len(urls):
            return NotMeasured(f"the DCGM exporter could not be read: {'; '.join(unread)}")
        pods = {run_id: self._pods_of(run_id) for run_id in held}
        return run_samples(series, pods, held, at, unread)

    def exporter_urls(self) -> list[str] | NotMeasured:
        """The scrapes to read now: as configured, or one per running exporter pod found."""
        if self.discovery is None:
            return list(self.urls) if self.urls else NotMeasured(NOT_CONFIGURED)
        d = self.discovery
        where = f"pods {d.selector!r} in namespace {d.namespace}"
        try:
            pods = self._list_pods(d.namespace, d.selector, self.timeout_seconds)
        except Exception as exc:  # the API's refusal or an unreachable server: said, not raised
            why = exc.message if isinstance(exc, ExecutorError) else api_error(exc)
            return NotMeasured(f"the DCGM exporter {where} could not be listed: {why}")
        urls = sorted(
            exporter_url(pod.status.pod_ip, d.port)
            for pod in pods
            if pod.status is not None and pod.status.phase == "Running" and pod.status.pod_ip
        )
        return urls or NotMeasured(f"no DCGM exporter is running: no running {where}")

    def _scrape_all(self, urls: Sequence[str]) -> dict[str, list[GpuSeries] | str]:
        if len(urls) == 1:
            return {urls[0]: self._scrape(urls[0])}
        with ThreadPoolExecutor(max_workers=min(16, len(urls)), thread_name_prefix="gpuplat-dcgm") as pool:
            return dict(zip(urls, pool.map(self._scrape, urls), strict=True))

    def _scrape(self, url: str) -> list[GpuSeries] | str:
        """The scrape's GPU series, or the error in words."""
        try:
            with _OPENER.open(url, timeout=self.timeout_seconds) as resp:
                body = resp.read(MAX_SCRAPE_BYTES + 1)
        except OSError as exc:  # URLError, HTTPError, timeouts, refused connections
            return str(getattr(exc, "reason", None) or exc)
        if len(body) > MAX_SCRAPE_BYTES:
            return f"the answer is over {MAX_SCRAPE_BYTES >> 20} MiB"
        try:
            return parse(body.decode("utf-8", errors="replace"))
        except ValueError as exc:
            return f"not Prometheus text: {exc}"


def pod_refs(pods: Iterable[Mapping[str, Any]]) -> list[PodRef]:
    """The cluster cache's pods of a run, as the series are matched to them."""
    refs = []
    for p in pods:
        meta = p.get("metadata") or {}
        refs.append(PodRef(str(meta.get("namespace")), str(meta.get("name")), str(meta.get("creationTimestamp") or "")))
    return refs


def exporter_url(ip: str, port: int) -> str:
    host = f"[{ip}]" if ":" in ip else ip
    return f"http://{host}:{port}/metrics"
