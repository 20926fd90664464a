"""GET insights: one engine call; the query's bounds are checked in engine/insights.py."""

from __future__ import annotations

from tornado import web

from .handlers import BaseHandler
from .schemas import insights as im


class InsightsHandler(BaseHandler):
    @web.authenticated
    async def get(self) -> None:
        args = {k: self.get_argument(k, None) for k in ("queue", "project", "since", "until", "bucket")}
        self.send_model(im.Insights, self.engine.insights(self.user_name, **args))
