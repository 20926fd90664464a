"""Team mode end to end: a real JupyterHub (PyPI) behind configurable-http-proxy (npm), the control plane
as a Hub-managed service on a real PostgreSQL database, and alice's (group team-a) and bob's (group
team-b) servers spawned by the Hub in remote mode (tests/hubenv.py).

- Queues shared by everyone: alice's `%%gpu_submit` / `%gpu_submit` (a real kernel in her server) and
  bob's CLI submissions (`gpuplat --url <his server> --token <his Hub token>`) share `shared`
  (concurrency 1) and `shared-gpu` (quota 1 GPU; every run asks for 1): bob's run waits for alice's in
  one, hers for his in the other, each told why by that limit, and no queue's timelines overlap.
- Isolation: alice gets 404 for bob's run, its logs and outputs, and none of his events, through her
  server and directly at the control plane (through the proxy and on its own port).
- A Hub token without `access:services!service=gpuplat` gets 403, directly and through her server.
- The sidebar in alice's JupyterLab, logged in through the Hub (Playwright + Debian's Chromium), shows her
  run appear and go queued/running -> succeeded live, and not bob's.

Runs wait on gate files the test creates, so every state is seen without sleeping.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from .. import hubenv
from ..hubenv import ACCESS_SCOPE, HubEnv
from ..kernel_ws import HubKernelSocket, KernelSocket
from ..waiting import until

hub = hubenv.hub  # the module-scoped Hub (tests/hubenv.py)

TEAM_QUEUE_CONFIG = """\
admins: [service:admin-bot]
queues:
  - {name: shared, concurrency: 1}
  - {name: shared-gpu, concurrency: 4, quota: {gpu: 1}}
presets:
  - {name: one-gpu, resources: {gpu: 1}}
projects:
  - {name: team-a, groups: {team-a: member}, default_queue: shared, default_presets: [one-gpu]}
  - {name: team-b, groups: {team-b: member}, default_queue: shared, default_presets: [one-gpu]}
"""

FINAL = {"succeeded", "failed", "stopped", "cancelled", "lost"}


def gated(name: str, gate: Path, secret: str = "") -> str:
    """A run's code: says it runs, optionally leaves a secret in its log and outputs, waits for its gate."""
    lines = ["import pathlib, time", f"print({name + ' running'!r}, flush=True)"]
    if secret:
        lines += [
            "from jupyter_gpuplat import tracking",
            f"print({secret!r}, flush=True)",
            f"pathlib.Path(tracking.artifacts_dir(), 'secret.txt').write_text({secret!r})",
        ]
    lines += [f"while not pathlib.Path({str(gate)!r}).exists():", "    time.sleep(0.02)", f"print({name + ' done'!r})"]
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def hub_platform_config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("team-e2e") / "platform.yaml"
    path.write_text(TEAM_QUEUE_CONFIG)
    return path


class User:
    """A Hub user with a running server: a token for their server and the service, and their server's URL."""

    def __init__(self, hub: HubEnv, name: str) -> None:
        self.hub, self.name = hub, name
        self.server = f"{hub.url}user/{name}/"
        self.home = hub.workdir / "home" / name
        self.token = hub.token(name, [f"access:servers!user={name}", ACCESS_SCOPE])

    def via_server(self, method: str, path: str, body: Any = None, token: str | None = None) -> tuple[int, Any]:
        r = self.hub.http.request(
            method,
            f"{self.server}gpuplat/api/{path}",
            headers={"Authorization": f"token {token or self.token}"},
            content=None if body is None else json.dumps(body),
        )
        return r.status_code, (r.json() if "json" in r.headers.get("Content-Type", "") and r.content else r.text)

    def run(self, run_id: str) -> dict[str, Any]:
        code, body = self.via_server("GET", f"runs/{run_id}")
        assert code == 200, (code, body)
        return dict(body)

    def wait(self, run_id: str, *statuses: str, timeout: float = 30) -> dict[str, Any]:
        return until(lambda: (r := self.run(run_id))["status"] in statuses and r, f"{run_id} {statuses}", timeout)


def backlog(url: str, token: str) -> list[dict[str, Any]]:
    """Every event the events stream replays from the start (`since=0`), up to its `ready` marker."""
    events: list[dict[str, Any]] = []
    headers = {"Authorization": f"token {token}"}
    with httpx.stream("GET", f"{url}gpuplat/api/events", params={"since": "0"}, headers=headers, timeout=30) as r:
        assert r.status_code == 200, r.read()
        kind = "message"
        for line in r.iter_lines():
            if line.startswith("event:"):
                kind = line.split(":", 1)[1].strip()
            elif line.startswith("data:"):
                if kind == "ready":
                    return events
                events.append(json.loads(line.split(":", 1)[1]))
    raise AssertionError(f"the events stream at {url} ended before its ready marker")


@pytest.fixture(scope="module")
def team(hub: HubEnv) -> dict[str, User]:
    # No "fetch Jupyter news?" toast over the sidebar's screenshot (JupyterLab's settings in alice's home).
    news = hub.workdir / "home" / "alice" / ".jupyter/lab/user-settings/@jupyterlab/apputils-extension"
    news.mkdir(parents=True, exist_ok=True)
    (news / "notification.jupyterlab-settings").write_text(json.dumps({"fetchNews": "false"}))
    with ThreadPoolExecutor(2) as pool:  # both spawns at once (the Hub's POST waits up to 10 s for each)
        list(pool.map(hub.spawn, ("alice", "bob")))
    return {name: User(hub, name) for name in ("alice", "bob")}


@pytest.fixture(scope="module")
def gates(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("gates")


@pytest.fixture(scope="module")
def kernel(team: dict[str, User]) -> Iterator[KernelSocket]:
    """A kernel in alice's server, driven over its websocket through the Hub's proxy."""
    alice = team["alice"]
    r = alice.hub.http.post(f"{alice.server}api/kernels", headers={"Authorization": f"token {alice.token}"}, json={})
    assert r.status_code == 201, r.text
    kernel_id = r.json()["id"]
    ks = HubKernelSocket(alice.server, alice.token, kernel_id)
    out, status = ks.execute("%load_ext jupyter_gpuplat")
    assert status == "ok", out
    yield ks
    ks.close()
    # Shut it down now: a server stopping with a live kernel waits for it.
    alice.hub.http.delete(f"{alice.server}api/kernels/{kernel_id}", headers={"Authorization": f"token {alice.token}"})


def cli_submit(user: User, queue: str, name: str, code: str) -> str:
    """`gpuplat submit` against the user's server, with his Hub token, from his home (the server's root)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GPUPLAT_", "JUPYTER"))}
    cli = [sys.executable, "-m", "jupyter_gpuplat.cli", "--url", user.server, "--token", user.token, "--json"]
    args = ["submit", "-p", "team-b", "-q", queue, "--preset", "one-gpu", "-n", name, "--", sys.executable, "-c", code]
    proc = subprocess.run([*cli, *args], cwd=user.home, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    return str(json.loads(proc.stdout)["id"])


@pytest.fixture(scope="module")
def shared_queues(team: dict[str, User], kernel: KernelSocket, gates: Path) -> dict[str, str]:
    """Each user's run holds a queue the other's waits on: `shared` by concurrency, `shared-gpu` by quota.

    alice's cell a1 runs in `shared`, bob's CLI command b1 (with a secret) waits behind it; bob's b2 runs
    in `shared-gpu`, alice's script a2 waits for its one GPU. Every run asks for 1 GPU.
    """
    alice, bob = team["alice"], team["bob"]
    out, status = kernel.execute(
        f"%%gpu_submit -p team-a -q shared --preset one-gpu -n a1\n{gated('a1', gates / 'a1')}"
    )
    assert status == "ok" and "refused" not in out, out
    out, status = kernel.execute("print(gpu_last_run['id'])")
    assert status == "ok", out
    a1 = out.strip()
    alice.wait(a1, "running")
    b1 = cli_submit(bob, "shared", "b1", gated("b1", gates / "b1", secret="bob-secret-7f3"))
    b2 = cli_submit(bob, "shared-gpu", "b2", gated("b2", gates / "b2"))
    bob.wait(b2, "running")
    (alice.home / "train_a2.py").write_text(gated("a2", gates / "a2"))
    out, status = kernel.execute(
        "%gpu_submit -p team-a -q shared-gpu --preset one-gpu train_a2.py\nprint(gpu_last_run['id'])"
    )
    assert status == "ok" and "refused" not in out, out
    a2 = out.strip().splitlines()[-1]
    return {"a1": a1, "b1": b1, "b2": b2, "a2": a2}


def test_shared_queues_hold_their_limits_across_users(
    team: dict[str, User], shared_queues: dict[str, str], gates: Path
) -> None:
    alice, bob = team["alice"], team["bob"]
    a1, b1, b2, a2 = (shared_queues[k] for k in ("a1", "b1", "b2", "a2"))
    # Each waits on the other user's run, and is told so by the limit's own words.
    assert bob.run(b1)["status"] == "queued" and alice.run(a2)["status"] == "queued"
    said = json.dumps(bob.via_server("GET", f"runs/{b1}/explain")[1])
    assert "queue shared is at its concurrency limit: 1/1 runs dispatched" in said, said
    said = json.dumps(alice.via_server("GET", f"runs/{a2}/explain")[1])
    assert "queue shared-gpu quota is exhausted" in said, said

    (gates / "a1").touch()
    assert alice.wait(a1, *FINAL)["status"] == "succeeded"
    assert bob.wait(b1, "running", *FINAL)["status"] in ("running", "succeeded")
    assert alice.run(a2)["status"] == "queued"  # still: bob's b2 holds shared-gpu's GPU
    (gates / "b2").touch()
    assert bob.wait(b2, *FINAL)["status"] == "succeeded"
    (gates / "b1").touch()
    (gates / "a2").touch()
    runs = {r["id"]: r for r in (alice.run(a1), bob.wait(b1, *FINAL), bob.run(b2), alice.wait(a2, *FINAL))}
    assert {r["status"] for r in runs.values()} == {"succeeded"}
    assert [r["resources"]["gpu"] for r in runs.values()] == [1, 1, 1, 1]
    # From the timelines: one run at a time in each queue, first come first served across users.
    for queue, order in (("shared", [a1, b1]), ("shared-gpu", [b2, a2])):
        mine = [r for r in runs.values() if r["queue"] == queue]
        spans = sorted((r["dispatched_at"], r["finished_at"], r["id"]) for r in mine)
        assert [s[2] for s in spans] == order, (queue, spans)
        for (_, end, _), (start, _, _) in itertools.pairwise(spans):
            assert start >= end, (queue, spans)


def test_alice_cannot_see_bobs_project(hub: HubEnv, team: dict[str, User], shared_queues: dict[str, str]) -> None:
    alice, bob = team["alice"], team["bob"]
    b1, mine = shared_queues["b1"], {shared_queues["a1"], shared_queues["a2"]}
    bob.wait(b1, *FINAL)
    assert "bob-secret-7f3" in bob.via_server("GET", f"runs/{b1}/logs?format=text")[1]  # bob sees his own
    paths = [
        f"runs/{b1}",
        f"runs/{b1}/logs",
        f"runs/{b1}/outputs",
        f"runs/{b1}/outputs/secret.txt",
        f"runs/{b1}/explain",
    ]
    for path in paths:
        through = alice.via_server("GET", path)
        assert through[0] == 404, (path, through)
        for direct in (False, True):  # the service's public route (the proxy), and its own port
            code, body = hub.call("GET", f"gpuplat/api/{path}", alice.token, direct=direct)
            assert code == 404, (path, direct, code, body)
            assert "bob-secret" not in json.dumps(body)
        assert "bob-secret" not in json.dumps(through[1])
    code, listed = alice.via_server("GET", "runs")
    assert code == 200 and {r["id"] for r in listed["runs"]} == mine
    for url in (alice.server, hub.service_url, hub.control_plane_url):
        events = backlog(url, alice.token)
        assert {e["run_id"] for e in events} == mine, url
        assert {e["project"] for e in events} == {"team-a"}
    assert {b1, shared_queues["b2"]} <= {e["run_id"] for e in backlog(bob.server, bob.token)}


def test_a_token_without_the_service_scope_is_refused(hub: HubEnv, team: dict[str, User]) -> None:
    alice = team["alice"]
    server_only = hub.token("alice", ["access:servers!user=alice"])
    for direct in (False, True):
        code, body = hub.call("GET", "gpuplat/api/whoami", server_only, direct=direct)
        assert code == 403, (direct, code, body)
        assert ACCESS_SCOPE in json.dumps(body)
    code, body = alice.via_server("GET", "whoami", token=server_only)  # forwarded as alice's, refused upstream
    assert code == 403 and ACCESS_SCOPE in json.dumps(body), (code, body)
    code, body = hub.call("GET", "gpuplat/api/whoami", None, direct=True)
    assert code == 403, (code, body)
    code, body = alice.via_server("GET", "whoami")
    assert code == 200 and body["user"] == "alice" and body["groups"] == ["team-a"], body


@pytest.mark.browser  # Chromium through Playwright
def test_the_sidebar_through_the_hub_shows_her_runs_live(
    hub: HubEnv,
    team: dict[str, User],
    shared_queues: dict[str, str],
    gates: Path,
    tmp_path: Path,
) -> None:
    from playwright.sync_api import expect, sync_playwright

    from ..ui.conftest import CHROMIUM_FLAGS, widen_left_sidebar

    alice, b1 = team["alice"], shared_queues["b1"]
    sidebar = "#jupyter-gpuplat-sidebar"
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=shutil.which("chromium") or "/usr/bin/chromium", headless=True, args=CHROMIUM_FLAGS
        )
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.set_default_timeout(30_000)
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(f"{hub.url}hub/login?next=/user/alice/lab")
            page.fill("input[name=username]", "alice")
            page.fill("input[name=password]", "any")  # the dummy authenticator takes any password
            page.click("input[type=submit], button[type=submit]")
            tab = page.locator('li[data-id="jupyter-gpuplat-sidebar"]')
            expect(tab).to_be_visible(timeout=60_000)
            assert page.url.startswith(alice.server + "lab"), page.url  # her server, through the proxy
            if not page.locator(sidebar).is_visible():
                tab.click()
            widen_left_sidebar(page, 460)
            rows = page.locator(f"{sidebar} .jp-GpuPlat-runRow")
            for run_id in (shared_queues["a1"], shared_queues["a2"]):
                expect(rows.and_(page.locator(f'[data-run-id="{run_id}"]'))).to_have_attribute(
                    "data-status", "succeeded"
                )
            for run_id in (b1, shared_queues["b2"]):
                expect(page.locator(f'{sidebar} .jp-GpuPlat-runRow[data-run-id="{run_id}"]')).to_have_count(0)

            # A new run of hers appears and changes status while she watches (no reload).
            code, run = alice.via_server(
                "POST", "runs", {"project": "team-a", "name": "live", "code": gated("live", gates / "live")}
            )
            assert code in (200, 201), run
            row = page.locator(f'{sidebar} .jp-GpuPlat-runRow[data-run-id="{run["id"]}"]')
            expect(row).to_have_attribute("data-status", "running")
            expect(row).to_contain_text("shared · ")
            expect(row).to_contain_text("1 GPU")
            (gates / "live").touch()
            expect(row).to_have_attribute("data-status", "succeeded")
            shots = Path(os.environ.get("GPUPLAT_SCREENSHOT_DIR") or tmp_path)  # docs/screenshots/ to refresh
            shots.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=shots / "team-mode-sidebar.png")
            assert not errors, errors
        finally:
            browser.close()
