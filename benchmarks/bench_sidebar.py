"""The JupyterLab sidebar, measured in a real browser (Debian's Chromium via Playwright).

Everything is real: `python -m jupyter server` in a subprocess (JupyterLab is its server
extension) with the platform extension, the example platform, SQLite in a temp dir and the
local executor (4 declared GPUs) starting real processes; the browser runs the built lab
extension. The store is first filled with finished runs (bench_api's `populate`: 80% in
team-a, which the browser's user alice sees). Timings come from the page's own clock
(`performance.now()` / `Date.now()`) and, for status and log latency, from the server's
records on the same machine (same clock).

1. First render with N runs (default 1,000): show the sidebar (as clicking its tab does)
   in a freshly loaded JupyterLab → the first rows are in the DOM, every run of the first
   page is listed, and the next frame has run.
   Split into the `GET runs` request (resource timing) and the rest (parse + model +
   render). Baseline: the same rows built as a plain, non-virtualised DOM list.
2. Scrolling 10,000 runs (all loaded): a scripted fling through the whole list, one scroll
   step per animation frame; frame intervals (p50/p95/max), frames over 33 ms, long tasks.
   Baseline: the plain list of 10,000 rows, scrolled the same way.
3. Status change → panel: runs submitted one at a time (`sleep 0.3`); a MutationObserver
   notes when a row shows each status; the engine's record time is the timeline event's
   `at`. "new run appears" (from its first event) includes fetching the new run;
   "succeeded" is a listed row changing in place.
4. Log line → panel: a run prints its own `time.time()` every 100 ms while its detail is
   open; a MutationObserver notes when each line appears in the log view.

Run: python benchmarks/bench_sidebar.py [--first 1000] [--scroll 10000] [--rounds 5]
(needs `playwright` from the test extra and `/usr/bin/chromium`; about a minute.)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import requests

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import machine, pct, table
from bench_api import EXAMPLE, free_port, populate

TOKEN = "bench-sidebar-token"  # the server's own token: user alice (team-a admin)
OPS_TOKEN = "bench-sidebar-ops"  # platform admin, for pausing queues through the API
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
TARGET_FIRST_MS = 300
TARGET_STATUS_MS = 100
TARGET_LOG_MS = 250
SIDEBAR = "#jupyter-gpuplat-sidebar"


class LabServer:
    def __init__(self, tmp: Path, db_url: str, labextensions: str | None = None) -> None:
        self.tmp = tmp
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}/"
        conf = tmp / "jupyter-config"
        settings = tmp / "lab-settings" / "@jupyterlab" / "apputils-extension"
        settings.mkdir(parents=True)
        (settings / "notification.jupyterlab-settings").write_text(json.dumps({"fetchNews": "false"}))
        (tmp / "work").mkdir()
        conf.mkdir()
        (conf / "jupyter_server_config.json").write_text(
            json.dumps(
                {
                    "ServerApp": {
                        "jpserver_extensions": {"jupyter_gpuplat": True},
                        "identity_provider_class": "jupyter_gpuplat.auth.TokenMapIdentityProvider",
                        "root_dir": str(tmp / "work"),
                        "open_browser": False,
                        "port_retries": 0,
                    },
                    "IdentityProvider": {"token": TOKEN},
                    "TokenMapIdentityProvider": {"tokens": {OPS_TOKEN: "ops"}, "token": TOKEN},
                    "GpuPlat": {
                        "config_file": str(EXAMPLE),
                        "db_url": db_url,
                        "artifacts_root": str(tmp / "art"),
                        "default_user": "alice",
                    },
                    "LocalExecutor": {"gpus": 4},
                    "LabApp": {
                        "user_settings_dir": str(tmp / "lab-settings"),
                        "workspaces_dir": str(tmp / "workspaces"),
                        "expose_app_in_browser": True,
                        # Another build of the sidebar (a folder holding `jupyter-gpuplat/`), over the installed one.
                        **({"extra_labextensions_path": [labextensions]} if labextensions else {}),
                    },
                }
            )
        )
        env = {
            **os.environ,
            "JUPYTER_CONFIG_DIR": str(conf),
            "JUPYTER_DATA_DIR": str(tmp / "data"),
            "JUPYTER_RUNTIME_DIR": str(tmp / "runtime"),
            "JUPYTER_PLATFORM_DIRS": "1",
        }
        self._log = (tmp / "server.log").open("wb")
        argv = [sys.executable, "-m", "jupyter_server", "--allow-root", "--ip=127.0.0.1", f"--port={self.port}"]
        self.proc = subprocess.Popen(argv, stdout=self._log, stderr=subprocess.STDOUT, env=env, cwd=tmp)
        self.session = requests.Session()

    def wait_ready(self, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError((self.tmp / "server.log").read_text()[-3000:])
            try:
                if self.call("GET", "whoami").get("user") == "alice":
                    return
            except requests.RequestException:
                pass
            time.sleep(0.1)
        raise RuntimeError("server not ready")

    def call(self, method: str, path: str, body: Any = None, token: str = TOKEN, **params: Any) -> Any:
        r = self.session.request(
            method,
            f"{self.base}gpuplat/api/{path}",
            json=body,
            params=params,
            headers={"Authorization": f"token {token}"},
            timeout=30,
        )
        r.raise_for_status()
        return r.json()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()
        self.session.close()


_workspaces = iter(range(1_000_000))


def open_lab(ctx: Any, server: LabServer, sidebar_open: bool) -> Any:
    """A fresh JupyterLab page in a new workspace (default layout: the file browser open)."""
    page = ctx.new_page()
    page.set_default_timeout(60_000)
    page.goto(f"{server.base}lab/workspaces/bench-{next(_workspaces)}?token={TOKEN}")
    page.wait_for_selector('li[data-id="jupyter-gpuplat-sidebar"]')
    page.wait_for_function("() => !!window.jupyterapp")
    if sidebar_open:
        page.evaluate("window.jupyterapp.commands.execute('gpuplat:open')")
        page.wait_for_selector(f"{SIDEBAR} .jp-GpuPlat-runRow >> visible=true")
    return page


# ---- 1. first render ----------------------------------------------------------------------------
FIRST_RENDER_JS = """async (expected) => {
  const t0 = performance.now();
  // what clicking the sidebar's tab does: the shell shows the panel
  window.jupyterapp.shell.activateById('jupyter-gpuplat-sidebar');
  return await new Promise(resolve => {
    const check = () => {
      const rows = document.querySelectorAll('#jupyter-gpuplat-sidebar .jp-GpuPlat-runRow');
      const counts = document.querySelector('#jupyter-gpuplat-sidebar .jp-GpuPlat-counts');
      if (rows.length >= 10 && counts && counts.textContent.replace('+', '').startsWith(expected)) {
        // the frame that shows them
        requestAnimationFrame(() => {
          const t1 = performance.now();
          const req = performance.getEntriesByType('resource').filter(e => e.name.includes('/gpuplat/api/runs?'));
          const r = req[req.length - 1];
          resolve({total: t1 - t0, request: r ? r.responseEnd - r.startTime : null,
                   afterResponse: r ? t1 - r.responseEnd : null, rows: rows.length});
        });
        return true;
      }
      return false;
    };
    if (!check()) {
      const obs = new MutationObserver(() => { if (check()) obs.disconnect(); });
      obs.observe(document.body, {childList: true, subtree: true, characterData: true});
    }
  });
}"""

# The same row markup, every row in the DOM: what a list without virtualisation does.
NAIVE_BUILD_JS = """async (n) => {
  const host = document.createElement('div');
  host.style.cssText = 'position:fixed;left:0;top:0;width:420px;height:700px;overflow-y:auto;' +
    'z-index:10000;background:#fff';
  host.className = 'jp-GpuPlat-panel';
  document.body.append(host);
  const t0 = performance.now();
  for (let i = 0; i < n; i++) {
    const row = document.createElement('div');
    row.className = 'jp-GpuPlat-runRow';
    row.style.position = 'static';
    row.innerHTML = '<div class="jp-GpuPlat-runLine"><span class="jp-GpuPlat-runName"></span>' +
      '<span class="jp-GpuPlat-status" data-group="succeeded">succeeded</span></div>' +
      '<div class="jp-GpuPlat-runLine jp-GpuPlat-runSub"><span class="jp-GpuPlat-runMeta"></span>' +
      '<span class="jp-GpuPlat-runPhase"></span></div>';
    row.querySelector('.jp-GpuPlat-runName').textContent = 'exp-' + i;
    row.querySelector('.jp-GpuPlat-runMeta').textContent = 'team-a-train · single-gpu · 1 GPU';
    row.querySelector('.jp-GpuPlat-runPhase').textContent = 'ran 1m 00s, 3d 2h ago';
    host.append(row);
  }
  await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
  window.__naive = host;
  return performance.now() - t0;
}"""

SCROLL_JS = """async ([selector, seconds]) => {
  const el = selector === 'naive' ? window.__naive : document.querySelector(selector);
  el.scrollTop = 0;
  await new Promise(r => requestAnimationFrame(r));
  const max = el.scrollHeight - el.clientHeight;
  const frames = [];
  let longTasks = 0;
  const po = new PerformanceObserver(list => { longTasks += list.getEntries().length; });
  try { po.observe({entryTypes: ['longtask']}); } catch (e) {}
  const step = max / (seconds * 60);
  let last = performance.now();
  await new Promise(resolve => {
    const tick = now => {
      frames.push(now - last);
      last = now;
      if (el.scrollTop >= max - 1) { resolve(); return; }
      el.scrollTop = Math.min(max, el.scrollTop + step);
      requestAnimationFrame(tick);
    };
    requestAnimationFrame(tick);
  });
  po.disconnect();
  return {frames: frames.slice(1), longTasks, pixels: max};
}"""


def first_render(ctx: Any, server: LabServer, n: int, rounds: int) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {"total": [], "request": [], "afterResponse": [], "naive": []}
    expected = f"{n:,} runs"
    for _ in range(rounds):
        page = open_lab(ctx, server, sidebar_open=False)
        r = page.evaluate(FIRST_RENDER_JS, expected)
        out["total"].append(r["total"])
        out["request"].append(r["request"])
        out["afterResponse"].append(r["afterResponse"])
        out["naive"].append(page.evaluate(NAIVE_BUILD_JS, n))
        page.close()
    return out


def load_all(page: Any, n: int) -> None:
    page.evaluate(
        """async (expected) => {
          const list = document.querySelector('#jupyter-gpuplat-sidebar .jp-GpuPlat-runList');
          const counts = document.querySelector('#jupyter-gpuplat-sidebar .jp-GpuPlat-counts');
          while (!counts.textContent.startsWith(expected)) {
            list.scrollTop = list.scrollHeight;
            await new Promise(r => setTimeout(r, 50));
          }
        }""",
        f"{n:,} runs",
    )


def scrolling(ctx: Any, server: LabServer, n: int, seconds: float) -> dict[str, Any]:
    page = open_lab(ctx, server, sidebar_open=True)
    load_all(page, n)
    virtual = page.evaluate(SCROLL_JS, [f"{SIDEBAR} .jp-GpuPlat-runList", seconds])
    in_dom = page.evaluate(f"document.querySelectorAll('{SIDEBAR} .jp-GpuPlat-runRow').length")
    build = page.evaluate(NAIVE_BUILD_JS, n)
    naive = page.evaluate(SCROLL_JS, ["naive", seconds])
    page.close()
    return {"virtual": virtual, "naive": naive, "rows_in_dom": in_dom, "naive_build_ms": build}


# ---- 3. status change → panel ---------------------------------------------------------------------
OBSERVE_ROWS_JS = """() => {
  window.__seen = [];
  const list = document.querySelector('#jupyter-gpuplat-sidebar .jp-GpuPlat-runList');
  const note = () => {
    const now = Date.now();
    for (const row of list.querySelectorAll('.jp-GpuPlat-runRow')) {
      if (row.style.display === 'none') continue;
      const key = row.dataset.runId + ' ' + row.dataset.status;
      if (!window.__seenKeys.has(key)) {
        window.__seenKeys.add(key);
        window.__seen.push([row.dataset.runId, row.dataset.status, now]);
      }
    }
  };
  window.__seenKeys = new Set();
  new MutationObserver(note).observe(list, {subtree: true, childList: true, characterData: true, attributes: true});
}"""


def status_latency(ctx: Any, server: LabServer, samples: int) -> dict[str, list[float]]:
    page = open_lab(ctx, server, sidebar_open=True)
    page.evaluate(OBSERVE_ROWS_JS)
    ids = []
    for i in range(samples):
        run = server.call("POST", "runs", {"project": "team-a", "name": f"lat-{i}", "command": "sleep 0.3"})
        ids.append(run["id"])
        deadline = time.monotonic() + 30
        while server.call("GET", f"runs/{run['id']}")["status"] != "succeeded":
            if time.monotonic() > deadline:
                raise RuntimeError(f"run {run['id']} did not finish")
            time.sleep(0.05)
    page.wait_for_function(
        "(n) => window.__seen.filter(s => s[1] === 'succeeded').length >= n", arg=samples, timeout=30_000
    )
    seen = {(rid, st): t for rid, st, t in page.evaluate("window.__seen")}
    page.close()
    out: dict[str, list[float]] = {"new run appears in the list": [], "listed run changes (succeeded)": []}
    for rid in ids:
        timeline = server.call("GET", f"runs/{rid}")["timeline"]
        at = {e["status"]: e["at"] for e in timeline}  # the last event of each status
        # A new row needs the run fetched (GET runs/{id}) after its first event; by then
        # it is often already running, so the row's first status varies.
        shown = sorted(t for (r, _), t in seen.items() if r == rid)
        if shown:
            out["new run appears in the list"].append(shown[0] - timeline[0]["at"] * 1000)
        if (rid, "succeeded") in seen:
            out["listed run changes (succeeded)"].append(seen[(rid, "succeeded")] - at["succeeded"] * 1000)
    return out


# ---- 4. log line → panel ---------------------------------------------------------------------------
LOG_SCRIPT = """\
import pathlib, sys, time
gate = pathlib.Path(sys.argv[1])
while not gate.exists():
    time.sleep(0.01)
for i in range(int(sys.argv[2])):
    print(f"{time.time():.6f}", flush=True)
    time.sleep(0.1)
"""

OBSERVE_LOG_JS = """() => {
  window.__lines = [];
  const body = document.querySelector('#jupyter-gpuplat-sidebar .jp-GpuPlat-logBody');
  new MutationObserver(muts => {
    const now = Date.now();
    for (const m of muts) for (const n of m.addedNodes) window.__lines.push([n.textContent, now]);
  }).observe(body, {childList: true});
}"""


def log_latency(ctx: Any, server: LabServer, lines: int) -> list[float]:
    work = server.tmp / "work"
    (work / "printer.py").write_text(LOG_SCRIPT)
    gate = work / "printer-go"
    page = open_lab(ctx, server, sidebar_open=True)
    body = {"project": "team-a", "name": "printer", "script": "printer.py", "args": [str(gate), str(lines)]}
    run = server.call("POST", "runs", body)
    page.evaluate(f"window.jupyterapp.commands.execute('gpuplat:open-run', {{id: '{run['id']}'}})")
    detail = f'{SIDEBAR} .jp-GpuPlat-detail[data-run-id="{run["id"]}"]'
    page.wait_for_selector(f'{detail} .jp-GpuPlat-logs[data-state="live"]')
    page.wait_for_selector(f'{detail}[data-status="running"]')
    page.evaluate(OBSERVE_LOG_JS)
    gate.touch()
    page.wait_for_function("(n) => window.__lines.length >= n", arg=lines, timeout=60_000)
    got = page.evaluate("window.__lines")
    page.close()
    return [seen - float(text) * 1000 for text, seen in got]


def fmt(v: float) -> str:
    return f"{v:.0f}" if v >= 10 else f"{v:.1f}"


def stats(samples: list[float]) -> tuple[str, str, str]:
    return fmt(statistics.median(samples)), fmt(pct(samples, 95)), fmt(max(samples))


def small_list(ctx: Any, server: LabServer, n: int, args: argparse.Namespace) -> list[list[Any]]:
    """First render, status latency and log latency with `n` runs listed."""
    fr = first_render(ctx, server, n, args.rounds)
    rows: list[list[Any]] = [
        [
            "first render: show sidebar → rows shown",
            *stats(fr["total"]),
            f"≤ {TARGET_FIRST_MS}",
            f"{args.rounds} loads",
        ],
        ["  of which GET runs (request → response end)", *stats(fr["request"]), "", ""],
        ["  of which parse + model + render + frame", *stats(fr["afterResponse"]), "", ""],
        [f"  baseline: plain DOM list of {n:,} rows, built + painted", *stats(fr["naive"]), "", ""],
    ]
    print("measured first render", flush=True)
    for label, s in status_latency(ctx, server, args.status_samples).items():
        rows.append([f"status → panel: {label}", *stats(s), f"≤ {TARGET_STATUS_MS}", f"{len(s)} runs"])
    print("measured status latency", flush=True)
    lg = log_latency(ctx, server, args.log_lines)
    rows.append(["log line printed → shown in the panel", *stats(lg), f"≤ {TARGET_LOG_MS}", f"{len(lg)} lines"])
    print("measured log latency", flush=True)
    return rows


def big_list(ctx: Any, server: LabServer, n: int, args: argparse.Namespace) -> list[list[Any]]:
    """Scrolling through `n` listed runs, against a plain DOM list of the same rows."""
    sc = scrolling(ctx, server, n, args.scroll_seconds)
    rows: list[list[Any]] = []
    for label, r in (("virtualised list", sc["virtual"]), ("baseline: plain DOM list", sc["naive"])):
        f = r["frames"]
        slow = sum(1 for x in f if x > 33.4)
        note = f"{len(f)} frames, {r['pixels']:,} px; {slow} > 33 ms; {r['longTasks']} long tasks"
        rows.append([f"scroll {n:,} runs, frame interval: {label}", *stats(f), "≈ 16.7", note])
    rows.append(["  rows in the DOM: virtualised", str(sc["rows_in_dom"]), "", "", "", ""])
    rows.append([f"  baseline: building the plain list of {n:,} rows", fmt(sc["naive_build_ms"]), "", "", "", ""])
    print("measured scrolling", flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--first", type=int, default=1000, help="runs listed for first render, status and log latency")
    ap.add_argument("--scroll", type=int, default=10_000, help="runs listed for the scrolling measurement")
    ap.add_argument("--rounds", type=int, default=5, help="page loads for the first-render measurement")
    ap.add_argument("--scroll-seconds", type=float, default=4.0, help="how long the fling through the list lasts")
    ap.add_argument("--status-samples", type=int, default=15, help="runs for the status latency")
    ap.add_argument("--log-lines", type=int, default=30, help="lines for the log latency")
    ap.add_argument("--keep", action="store_true", help="keep the temp dirs")
    ap.add_argument(
        "--labextensions",
        metavar="DIR",
        help="load the sidebar from DIR/jupyter-gpuplat (another build, e.g. an older commit's), not the installed one",
    )
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright

    # SIGTERM (timeout, kill) unwinds like Ctrl-C: the servers' finally blocks stop them.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    print(f"bench_sidebar — {machine()}")
    rows: list[list[Any]] = []
    tmps: list[Path] = []
    with sync_playwright() as p:
        ctx = p.chromium.launch_persistent_context(
            tempfile.mkdtemp(prefix="gpuplat-bench-chromium-"),
            executable_path=shutil.which("chromium") or "/usr/bin/chromium",
            headless=True,
            args=CHROMIUM_FLAGS,
            viewport={"width": 1400, "height": 900},
        )
        for n, measure in ((args.first, small_list), (args.scroll, big_list)):
            tmp = Path(tempfile.mkdtemp(prefix="gpuplat-bench-sidebar-"))
            tmps.append(tmp)
            db_url = f"sqlite:///{tmp}/gpuplat.db"
            # populate() puts every 5th run in team-b: alice (team-a) then sees exactly n.
            populate(db_url, n * 5 // 4, 1, True)
            server = LabServer(tmp, db_url, args.labextensions)
            try:
                server.wait_ready()
                print(f"{n:,} runs listed for alice ({n * 5 // 4:,} in the store)", flush=True)
                rows += measure(ctx, server, n, args)
            finally:
                server.stop()
        ctx.close()
    print()
    print(table(["measurement", "p50 ms", "p95 ms", "max ms", "target ms", "samples"], rows))
    if args.keep:
        print("kept:", *tmps)
    else:
        for t in tmps:
            shutil.rmtree(t, ignore_errors=True)


if __name__ == "__main__":
    main()
