"""Two kernel starts of one notebook at once lease once (remote mode's attach-or-lease is two calls)."""

from __future__ import annotations

import asyncio
from typing import Any

from jupyter_gpuplat.service.sessions.http_client import HttpSessionClient


class FakePlane:
    """A control plane whose calls yield to the loop, as a network call does."""

    def __init__(self) -> None:
        self.leases: list[dict[str, Any]] = []

    async def call(self, method: str, path: str, body: Any = None, **params: Any) -> Any:
        await asyncio.sleep(0)  # the other start runs here
        if (method, path) == ("GET", "sessions"):
            return {"sessions": [r for r in self.leases if r["session"]["notebook"] == params["notebook"]]}
        assert (method, path) == ("POST", "runs"), (method, path)
        row = {"id": f"r-{len(self.leases)}", "project": body["project"], "presets": body["presets"]}
        row.update(status="queued", session={"notebook": body.get("notebook")})
        self.leases.append(row)
        return row


def test_two_starts_of_one_notebook_at_once_make_one_lease() -> None:
    async def main() -> None:
        plane = FakePlane()
        client = HttpSessionClient(plane, "alice")  # type: ignore[arg-type]
        a, b = await asyncio.gather(*(client.start("team-a", "notebook", "x.ipynb", None) for _ in range(2)))
        assert a["id"] == b["id"] == "r-0" and len(plane.leases) == 1
        # another notebook is not held up by it, and gets its own lease
        c = await client.start("team-a", "notebook", "y.ipynb", None)
        assert c["id"] == "r-1"

    asyncio.run(main())
