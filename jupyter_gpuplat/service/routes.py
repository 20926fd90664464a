"""The route table of the REST API, its OpenAPI handler, and a catch-all for unknown paths.

`python -m jupyter_gpuplat.service.routes > labextension/openapi.json` writes the
OpenAPI document (base URL `/`) from which the sidebar's TypeScript types are generated.
"""

from __future__ import annotations

import json
import sys

from tornado import web

from ..core.errors import NotFound
from . import openapi
from .handlers import (
    ID,
    NAME,
    BaseHandler,
    CapacityHandler,
    CompareHandler,
    ConfigHandler,
    ExplainHandler,
    KeepAliveHandler,
    KernelHandler,
    MetricsHandler,
    OutputsHandler,
    PresetHandler,
    PresetsHandler,
    PreviewHandler,
    ProjectHandler,
    ProjectsHandler,
    QueueHandler,
    QueuePauseHandler,
    QueuesHandler,
    RunHandler,
    RunsHandler,
    SessionsHandler,
    StopHandler,
    SweepCompareHandler,
    WhoAmIHandler,
)
from .insights_handlers import InsightsHandler
from .openapi import API, openapi_document
from .schemas import insights as im
from .schemas import models as m
from .streams import EventsHandler, LogsHandler
from .whatif_handler import WhatIfHandler, WhatIfRequest, WhatIfResponse


class OpenAPIHandler(BaseHandler):
    @web.authenticated
    async def get(self) -> None:
        self.send_model(m.OpenAPIDocument, openapi_document(self.base_url, ROUTES))


class UnknownPathHandler(BaseHandler):
    """Any other path under the API: our JSON 404, not Jupyter's HTML page."""

    def _refuse(self, *args: str) -> None:
        raise NotFound(
            f"no endpoint {self.request.method} {self.request.path}",
            f"the endpoints are listed in GET {self.base_url}{API}/openapi.json",
        )

    get = post = put = delete = patch = web.authenticated(_refuse)


ROUTES: list[tuple[str, type[BaseHandler], str]] = [
    ("whoami", WhoAmIHandler, "The caller's platform identity and project roles"),
    ("capacity", CapacityHandler, "The executor's GPUs, declared or detected, and which are in use"),
    ("queues", QueuesHandler, "Queues the caller may use, with live usage and pending counts"),
    (rf"queues/{NAME}/(?P<action>pause|resume)", QueuePauseHandler, "Pause or resume a queue (platform admins)"),
    (rf"queues/{NAME}", QueueHandler, "Create/replace (PUT) or delete a queue (platform admins)"),
    ("projects", ProjectsHandler, "Projects the caller belongs to"),
    (rf"projects/{NAME}", ProjectHandler, "Create/replace or delete a project"),
    ("presets", PresetsHandler, "Presets usable in a project (?project=)"),
    (rf"presets/{NAME}", PresetHandler, "Create/replace or delete a preset (platform admins)"),
    ("config", ConfigHandler, "The whole platform config (platform admins); PUT applies it declaratively"),
    ("runs/preview", PreviewHandler, "Resolve a run request: spec, provenance, policy verdict"),
    ("runs", RunsHandler, "Submit (POST) or list (GET) runs"),
    (rf"runs/{ID}", RunHandler, "One run's full record (GET); a sweep's concurrency or pause (PATCH)"),
    (rf"runs/{ID}/explain", ExplainHandler, "Why the run is where it is"),
    (rf"runs/{ID}/stop", StopHandler, "Stop a queued or running run"),
    (rf"runs/{ID}/compare", SweepCompareHandler, "A sweep's children against its objective, best first (?top=N)"),
    (rf"runs/{ID}/keepalive", KeepAliveHandler, "Keep a GPU session: its idle clock starts again"),
    (rf"runs/{ID}/kernel", KernelHandler, "A session's kernel: connection info (GET), kernel events (POST)"),
    ("sessions", SessionsHandler, "The caller's unfinished GPU sessions (?notebook=path)"),
    (rf"runs/{ID}/logs", LogsHandler, "The run's log as Server-Sent Events (follow)"),
    (rf"runs/{ID}/outputs", OutputsHandler, "List the run's output files"),
    (rf"runs/{ID}/outputs/(?P<path>.+)", OutputsHandler, "Download one output file"),
    (rf"runs/{ID}/metrics", MetricsHandler, "Metric curves (?names=a,b&max_points=N), downsampled keeping extremes"),
    ("compare", CompareHandler, "Compare runs (?runs=a,b&metrics=m): params, config differences, summaries, curves"),
    ("events", EventsHandler, "Status changes of visible runs as Server-Sent Events"),
    ("insights", InsightsHandler, "Observed waits, GPU-hours against quota, goodput, refusals, failures (?since=7d)"),
    ("whatif", WhatIfHandler, "Replay a period under changed queue limits: predicted beside observed waits"),
    ("openapi.json", OpenAPIHandler, "This API's OpenAPI document"),
]

# Issue 13's endpoints declare their answers and query parameters here, beside their routes.
_TIME = {"type": "string", "pattern": "^([0-9]{1,12}(\\.[0-9]{1,6})?|[0-9]{1,6}[smhdw])$"}
openapi._RESPONSES[("insights", "get")] = (200, im.Insights)
openapi._RESPONSES[("whatif", "post")] = (200, WhatIfResponse)
openapi._BODIES[("whatif", "post")] = WhatIfRequest
openapi._QUERY[("insights", "get")] = [
    openapi._q("queue", openapi._STR, "Only this queue (one you may use)"),
    openapi._q("project", openapi._STR, "Only this project's runs (one of yours)"),
    openapi._q("since", _TIME, "Start: epoch seconds or a duration before now (7d); default: until - 7d"),
    openapi._q("until", _TIME, "End: epoch seconds or a duration before now; default: now"),
    openapi._q("bucket", {"type": "string", "pattern": "^[0-9]{1,6}[smhdw]$"}, "Series bucket width (1m..400d)"),
]


def make_handlers() -> list[tuple[str, type[BaseHandler]]]:
    """The routes for tornado, the catch-all last."""
    return [(f"{API}/{pattern}", handler) for pattern, handler, _ in ROUTES] + [(f"{API}(?:/.*)?", UnknownPathHandler)]


def main() -> None:
    json.dump(openapi_document("/", ROUTES), sys.stdout, indent=2)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
