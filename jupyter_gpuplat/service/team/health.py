"""Liveness and readiness of the control plane, outside the API and unauthenticated.

- `<base>health/live`: 200 while the process serves HTTP (a liveness probe restarts it otherwise).
- `<base>health/ready`: 200 when this control plane leads and its store and executor answer,
  else 503 — a standby is alive but not ready, so a Service sends traffic to the leader only.
  The body says why either way:
  `{"ready", "role": "leader"|"standby", "epoch", "holder", "store": {"ok", "error"}, "executor": {"ok", "error"}}`.

They reveal no user data: role, epoch, this process's holder name and error messages of its parts.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from tornado import web

STORE_CHECK_TIMEOUT_SECONDS = 5.0


def _part(ok: bool, error: str | None = None) -> dict[str, Any]:
    return {"ok": ok, "error": error}


async def check_store(platform: Any) -> dict[str, Any]:
    """`SELECT 1` on the store's pool, in a thread with a deadline (a hung database must not hang the probe)."""

    try:
        await asyncio.wait_for(asyncio.to_thread(platform.store.ping), STORE_CHECK_TIMEOUT_SECONDS)
    except TimeoutError:
        return _part(False, f"no answer within {STORE_CHECK_TIMEOUT_SECONDS:g}s")
    except Exception as e:  # any failure of the database is the answer here, not a 500
        return _part(False, f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
    return _part(True)


def check_executor(platform: Any) -> dict[str, Any]:
    if not platform.is_leader:
        return _part(False, "standby: the executor is used by the leader only")
    if not platform.started:
        return _part(False, "the engine has not started yet")
    try:
        platform.executor.devices()
    except Exception as e:  # an executor that cannot list its devices cannot place runs
        return _part(False, f"{type(e).__name__}: {e}")
    return _part(True)


async def readiness(platform: Any) -> dict[str, Any]:
    store = await check_store(platform)
    executor = check_executor(platform)
    role = "leader" if platform.is_leader else "standby"
    return {
        "ready": role == "leader" and store["ok"] and executor["ok"],
        "role": role,
        "epoch": platform.epoch,
        "holder": platform.holder,
        "store": store,
        "executor": executor,
    }


class LiveHandler(web.RequestHandler):
    def get(self) -> None:
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps({"live": True}))


class ReadyHandler(web.RequestHandler):
    def initialize(self, platform: Any) -> None:
        self.platform = platform

    async def get(self) -> None:
        body = await readiness(self.platform)
        self.set_status(200 if body["ready"] else 503)
        self.set_header("Content-Type", "application/json")
        self.set_header("Cache-Control", "no-store")
        self.finish(json.dumps(body))
