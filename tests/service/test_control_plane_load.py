"""200 concurrent submits from 20 Hub users across 5 queues: from the runs' timelines, at no instant
does a queue hold more runs, GPUs or runs of one user than its limits allow; ids are unique and
nothing is dispatched twice. Real Hub, proxy, PostgreSQL, control plane and local processes."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import pytest

from .. import hubenv
from ..hubenv import HubEnv
from ..waiting import until

hub = hubenv.hub  # module-scoped; this module gives its own hub_platform_config
USERS = [f"u{i:02d}" for i in range(20)]
GROUP_OF = {u: f"g{i % 5}" for i, u in enumerate(USERS)}
QUEUES: dict[str, dict[str, Any]] = {
    "q0": {"concurrency": 2},
    "q1": {"concurrency": 3, "max_per_user": 1},
    "q2": {"quota": {"gpu": 2}},
    "q3": {"concurrency": 2, "ordering": "strict_fifo"},
    "q4": {"concurrency": 4, "quota": {"gpu": 2}, "max_per_user": 2},
}
PER_USER = 10  # 20 users x 10 = 200 runs, 40 per queue
RUN_SECONDS = "0.1"


@pytest.fixture(scope="module")
def hub_platform_config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    lines = ["admins: [service:admin-bot]", "queues:"]
    for name, limits in QUEUES.items():
        extra = ", ".join(f"{k}: {v}" for k, v in limits.items()).replace("'", "")
        lines.append(f"  - {{name: {name}, {extra}}}")
    lines.append("projects:")
    for g in sorted(set(GROUP_OF.values())):
        lines.append(f"  - {{name: p-{g}, groups: {{{g}: member}}}}")
    path = tmp_path_factory.mktemp("load") / "platform.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


def _request(user: str, k: int) -> dict[str, Any]:
    queue = f"q{(USERS.index(user) + k) % 5}"
    gpu = 1 if queue == "q2" or (queue == "q4" and k % 2) else 0
    return {
        "project": f"p-{GROUP_OF[user]}",
        "queue": queue,
        "name": f"{user}-{k}",
        "command": ["sleep", RUN_SECONDS],
        "resources": {"gpu": gpu},
    }


async def _submit_all(base: str, tokens: dict[str, str]) -> list[tuple[int, Any]]:
    limits = httpx.Limits(max_connections=250, max_keepalive_connections=250)
    async with httpx.AsyncClient(base_url=base, timeout=120, limits=limits) as client:

        async def one(user: str, k: int) -> tuple[int, Any]:
            r = await client.post(
                "gpuplat/api/runs", json=_request(user, k), headers={"Authorization": f"token {tokens[user]}"}
            )
            return r.status_code, r.json()

        return await asyncio.gather(*(one(u, k) for u in USERS for k in range(PER_USER)))


def _check_limits(details: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """Replay every queue's dispatch/final events in commit order; fail at the first excess. Returns the peaks."""
    events: list[tuple[int, str, dict[str, Any]]] = []
    for run in details:
        for ev in run["timeline"]:
            if ev["status"] in ("dispatched", "succeeded", "failed", "stopped"):
                events.append((ev["id"], ev["status"], run))
    events.sort(key=lambda e: e[0])
    held: dict[str, set[str]] = {q: set() for q in QUEUES}
    gpus: Counter[str] = Counter()
    per_user: Counter[tuple[str, str]] = Counter()
    peaks: dict[str, dict[str, int]] = {q: {"runs": 0, "gpu": 0, "per_user": 0} for q in QUEUES}
    for ev_id, status, run in events:
        q, rid, gpu, user = run["queue"], run["id"], run["resources"]["gpu"], run["user"]
        if status == "dispatched":
            assert rid not in held[q], f"{rid} dispatched twice (event {ev_id})"
            held[q].add(rid)
            gpus[q] += gpu
            per_user[(q, user)] += 1
        elif rid in held[q]:
            held[q].discard(rid)
            gpus[q] -= gpu
            per_user[(q, user)] -= 1
        lim = QUEUES[q]
        peak = peaks[q]
        peak["runs"] = max(peak["runs"], len(held[q]))
        peak["gpu"] = max(peak["gpu"], gpus[q])
        peak["per_user"] = max(peak["per_user"], per_user[(q, user)])
        at = f"queue {q} after event {ev_id} ({status} {rid})"
        assert len(held[q]) <= lim.get("concurrency", 10**9), f"{at}: {len(held[q])} running"
        assert gpus[q] <= lim.get("quota", {}).get("gpu", 10**9), f"{at}: {gpus[q]} GPUs"
        assert per_user[(q, user)] <= lim.get("max_per_user", 10**9), f"{at}: {user} holds {per_user[(q, user)]}"
    assert all(not h for h in held.values()), held
    return peaks


def test_200_concurrent_submits_from_20_users_never_exceed_a_queue_limit(hub: HubEnv) -> None:
    for u in USERS:
        hub.add_user(u, [GROUP_OF[u]])
    tokens = {u: hub.token(u) for u in USERS}
    answers = asyncio.run(_submit_all(hub.service_url, tokens))
    assert [code for code, _ in answers] == [201] * 200, [a for a in answers if a[0] != 201][:3]
    ids = [body["id"] for _, body in answers]
    assert len(set(ids)) == 200
    owner = {body["id"]: body["user"] for _, body in answers}

    def all_ended() -> list[dict[str, Any]] | None:
        code, page = hub.call("GET", "gpuplat/api/runs?limit=1000", hub.admin_token)
        assert code == 200, page
        mine = [r for r in page["runs"] if r["id"] in owner]
        return mine if len(mine) == 200 and all(r["status"] == "succeeded" for r in mine) else None

    until(all_ended, "the 200 runs to succeed", timeout=240)
    details = []
    for rid in ids:  # each read as its owner: the timeline a user sees
        code, run = hub.call("GET", f"gpuplat/api/runs/{rid}", tokens[owner[rid]])
        assert code == 200, run
        details.append(run)
    for run in details:
        statuses = Counter(ev["status"] for ev in run["timeline"])
        assert statuses["dispatched"] == 1 and statuses["running"] == 1, (run["id"], run["timeline"])
        assert run["user"] == run["name"].split("-")[0]  # each run is its submitter's
    peaks = _check_limits(details)
    # The limits were reached, not just respected: the load was real.
    assert peaks["q0"]["runs"] == 2 and peaks["q3"]["runs"] == 2, peaks
    assert peaks["q2"]["gpu"] == 2 and peaks["q1"]["per_user"] == 1, peaks
    # Bob-style isolation across groups: a user sees only her project's runs.
    code, page = hub.call("GET", "gpuplat/api/runs?limit=1000", tokens["u00"])
    assert code == 200 and {r["project"] for r in page["runs"]} == {"p-g0"}
    _, metrics = hub.call("GET", "metrics", None)
    assert 'gpuplat_admissions_total{queue="q0"} 40.0' in metrics
