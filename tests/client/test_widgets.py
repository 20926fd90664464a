"""Widgets against a real server and real runs; state is asserted directly, no browser.

RunMonitor follows runs from the shared event feed, Compare renders a real
comparison, Launcher previews and submits through the real policy.
"""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jupyter_gpuplat.client import Client
from jupyter_gpuplat.notebook.widgets import Compare, EventFeed, Launcher, RunMonitor

from ..server import ServerProcess
from ..waiting import until
from ..widget_env import served, threads_ended

PY = sys.executable
LIFECYCLE = ["created", "queued", "dispatched", "starting", "running", "stopping", "succeeded", "failed", "stopped"]

# Logs params and 20 metric steps, prints three lines, then waits for the gate file.
GATED = """
import pathlib, sys, time
from jupyter_gpuplat import tracking
p = tracking.params()
tracking.log_params(lr=p.get("lr", 0.1), arch="resnet")
for step in range(20):
    tracking.log_metrics(step=step, loss=p.get("scale", 1) / (step + 1), acc=step / 20)
for i in range(3):
    print(f"step {i}", flush=True)
gate = pathlib.Path(sys.argv[1])
while not gate.exists():
    time.sleep(0.02)
print("done", flush=True)
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    yield from served(tmp_path_factory, "widgets")


@pytest.fixture(autouse=True)
def no_thread_left() -> Iterator[None]:
    yield
    threads_ended()


@pytest.fixture
def gate(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "gate"
    yield path
    path.touch()  # release whatever a failed test left waiting


@pytest.fixture
def paused(server: ServerProcess) -> Iterator[str]:
    server.ok("POST", "queues/team-a-train/pause", "ops")
    yield "team-a-train"
    server.ok("POST", "queues/team-a-train/resume", "ops")


def gated_run(client: Client, gate: Path, name: str, **kw: Any) -> dict[str, Any]:
    return client.submit("team-a", command=[PY, "-c", GATED, str(gate)], name=name, **kw)


def rows(html: str, label: str) -> list[str]:
    """The table rows whose first cell is `label`."""
    return [
        r for r in re.findall(r"<tr[^>]*>.*?</tr>", html, re.S) if re.search(rf"<td[^>]*>{re.escape(label)}</td>", r)
    ]


def in_lifecycle_order(statuses: list[str]) -> bool:
    ranks = [LIFECYCLE.index(s) for s in statuses]
    return ranks == sorted(ranks) and len(set(ranks)) == len(ranks)


# ---- RunMonitor ------------------------------------------------------------------------------------
def test_monitor_follows_a_run_from_queued_to_succeeded(
    server: ServerProcess, client: Client, gate: Path, paused: str
) -> None:
    ahead = client.submit("team-a", command=[PY, "-c", "pass"], name="ahead")
    run = gated_run(client, gate, "follow-me")
    mon = RunMonitor(run["id"], client)
    seen: list[str] = []
    mon.observe(lambda change: seen.append(change["new"]), "status")
    try:
        assert mon.status == "queued" and mon.run["id"] == run["id"]
        # While it waits: the explain answer with where, why, the numbers, position and who can act.
        text = until(lambda: "who can act" in mon.explain_text and mon.explain_text, "the explain answer")
        assert "where: held by our queue (dispatch)" in text
        assert "why: queue team-a-train is paused [QueuePaused]" in text
        assert "position: 2 of 2 waiting in queue team-a-train" in text
        assert "queue: 0/2 runs, 0/2 GPUs in use, 2 pending" in text
        assert "who can act: ops: resume queue team-a-train" in text
        # The run ahead leaves: no event of this run, yet its place in line is updated from the feed.
        client.stop(ahead["id"])
        text = until(lambda: "position: 1 of 1" in mon.explain_text and mon.explain_text, "the new position")
        assert "queue: 0/2 runs, 0/2 GPUs in use, 1 pending" in text and mon.status == "queued"
        assert "resume queue team-a-train" in mon.explain_html.value
        assert 'class="gpuplat-status gpuplat-status-queued"' in mon.header.value
        assert not mon.stop_button.disabled
        assert list(mon.children) == [
            mon.header,
            mon.timeline,
            mon.explain_html,
            mon.gpu_html,
            mon.metrics_box,
            mon.log_html,
            mon.children[-1],
        ]
        assert mon.stop_button in mon.children[-1].children

        server.ok("POST", "queues/team-a-train/resume", "ops")
        until(lambda: mon.status == "running", "running")
        # Log lines arrive while the process still runs (it waits for the gate).
        until(lambda: mon.log_lines == ["step 0", "step 1", "step 2"], "three log lines")
        until(lambda: "step 2" in mon.log_html.value, "the log tail to render")
        assert "where: running" in until(lambda: "where: running" in mon.explain_text and mon.explain_text, "explain")
        # The live sparkline of a running run (its slow refresh, every few seconds).
        until(lambda: mon.figure.data[0].y == tuple(1 / (s + 1) for s in range(20)), "the sparkline", timeout=15)
        assert mon.metric_selector.options == ("acc", "loss") and mon.metric_selector.value == "loss"
        assert mon.metrics_box.layout.display == ""
        assert client.get(run["id"])["status"] == "running"

        gate.touch()
        until(lambda: mon.status == "succeeded", "succeeded")
        until(lambda: mon.log_lines[-1:] == ["done"], "the last log line")
        assert mon.stop_button.disabled
        assert seen[-1] == "succeeded" and "running" in seen and in_lifecycle_order(["queued", *seen])
        for t in mon.threads:  # a finished run holds no thread
            t.join(10)
            assert not t.is_alive()
        # Timeline: dispatch and execution phases told apart, with the three clocks.
        final = mon.run
        assert final["status"] == "succeeded" and final["clocks"]["queue_wait_seconds"] > 0
        html = mon.timeline.value
        table = html.split('class="gpuplat-timeline"')[1]
        assert table.index("Dispatch — our queue") < table.index("QueuePaused")
        assert table.index("QueuePaused") < table.index("Execution — the executor") < table.index("Admitted")
        assert table.index("Admitted") < table.index("End") < table.index("exited with code 0")
        assert "queue wait <b>" in html and "start wait <b>" in html and "run time <b>" in html
        assert mon.explain_text == "ended: succeeded: exited with code 0"
    finally:
        mon.close()


def test_monitor_explains_a_concurrency_wait_and_its_stop_button_stops_a_running_run(
    client: Client, gate: Path
) -> None:
    holders = [gated_run(client, gate, f"holder-{i}") for i in range(2)]  # team-a-train: concurrency 2
    for h in holders:
        client.wait(h["id"], timeout=20, statuses=["running"])
    waiting = client.submit("team-a", command=[PY, "-c", "print('third')"], name="third")
    mons = [RunMonitor(h["id"], client) for h in holders]
    third = RunMonitor(waiting, client)  # from the submit answer, as the magic does
    try:
        text = until(lambda: "who can act" in third.explain_text and third.explain_text, "the explain answer")
        assert "queue team-a-train is at its concurrency limit: 2/2 runs dispatched [QueueConcurrency]" in text
        assert "numbers: 2/2 in use" in text
        assert "position: 1 of 1" in text
        for h in holders:
            assert f"{h['id']} ({h['name']}, alice, running, 0 GPU)" in text
        assert "who can act: ops: raise the concurrency of queue team-a-train" in text
        assert "who can act: alice: stop their runs that hold the queue" in text

        stopper = mons[0]
        until(lambda: stopper.status == "running" and not stopper.stop_button.disabled, "a running monitor")
        stopper.stop_button.click()
        until(lambda: stopper.status == "stopped", "the run to stop")
        assert stopper.stop_button.disabled and client.get(holders[0]["id"])["status"] == "stopped"
        assert stopper.message.value == ""
        # The freed slot goes to the waiting run, seen live by its monitor.
        until(lambda: third.status == "succeeded", "the third run to run")
        until(lambda: third.log_lines == ["third"], "its log")
        assert mons[1].status == "running"
    finally:
        gate.touch()
        until(lambda: mons[1].status == "succeeded", "the other holder to finish")
        for m in (*mons, third):
            m.close()


def test_close_stops_threads_and_updates(client: Client, server: ServerProcess, paused: str) -> None:
    run = client.submit("team-a", command=[PY, "-c", "print('later')"], name="closed-early")
    closed = RunMonitor(run["id"], client)
    watcher = RunMonitor(run["id"], client)  # proves events did flow after the close
    feed = EventFeed.of(client)
    until(lambda: "paused" in closed.explain_text, "the closed monitor's explain")
    feed_thread = feed.thread
    assert feed_thread is not None and feed.subscribers == 2

    closed.close()
    for t in closed.threads:
        t.join(10)
        assert not t.is_alive()
    assert closed.closed and feed.subscribers == 1

    server.ok("POST", "queues/team-a-train/resume", "ops")
    until(lambda: watcher.status == "succeeded", "the open monitor to see the run end")
    assert client.wait(run["id"], timeout=20)["status"] == "succeeded"
    assert closed.status == "queued" and closed.run["status"] == "queued"
    assert closed.log_lines == [] and "paused" in closed.explain_text
    # The last subscriber left (the watcher unsubscribes when its run ends): the feed's thread ends.
    feed_thread.join(10)
    assert not feed_thread.is_alive() and feed.thread is None and feed.subscribers == 0
    watcher.close()


def test_event_feed_resumes_after_the_stream_drops(server: ServerProcess, client: Client, paused: str) -> None:
    feed = EventFeed.of(client)
    got: list[dict[str, Any]] = []
    connects: list[float] = []
    sub = feed.subscribe(got.append, on_connect=lambda: connects.append(time.monotonic()))
    try:
        until(lambda: connects, "the stream to open")
        run = client.submit("team-a", command=[PY, "-c", "print('across a restart')"], name="resumed")
        until(lambda: [e["status"] for e in got if e["run_id"] == run["id"]][-1:] == ["queued"], "queued events")
        server.stop()  # the stream drops
        until(lambda: not feed.connected.is_set(), "the feed to notice")
        server.start()
        fresh = Client(url=server.url, token="tok-ops")  # the old keep-alive connections are gone too
        fresh.request("POST", "queues/team-a-train/resume")
        fresh.session.close()
        until(lambda: any(e["run_id"] == run["id"] and e["status"] == "succeeded" for e in got), "the run's end")
        assert feed.reconnects >= 1 and len(connects) >= 2
        ids = [e["id"] for e in got]
        assert ids == sorted(set(ids)), "no event twice, none out of order"
        mine = [e["status"] for e in got if e["run_id"] == run["id"]]
        assert mine[:2] == ["created", "queued"] and mine[-1] == "succeeded" and "running" in mine
        assert in_lifecycle_order(list(dict.fromkeys(mine)))
    finally:
        sub.close()


# ---- Compare ---------------------------------------------------------------------------------------
def test_compare_table_differences_baseline_curves_and_open_record(client: Client, gate: Path) -> None:
    a = gated_run(client, gate, "a", params={"lr": 0.1, "scale": 1})
    b = gated_run(client, gate, "b", params={"lr": 0.01, "scale": 2}, env={"SEED": "7"})
    c = gated_run(client, gate, "c", params={"lr": 0.1, "scale": 4}, queue="interactive")  # team-a-train runs 2
    ids = [a["id"], b["id"], c["id"]]
    for r in ids:  # every metric written (they come before the wait for the gate)
        until(lambda r=r: client.metrics(r).get("loss", {}).get("count") == 20, "the metrics")
    # Built while the runs still run: it follows them to the end from the event feed.
    cmp = Compare(",".join(ids), client, metrics=["loss"])
    try:
        assert cmp.thread is not None and cmp.thread.is_alive()
        gate.touch()
        until(lambda: [r["status"] for r in cmp.data["runs"]] == ["succeeded"] * 3, "the comparison to refresh")
        until(lambda: cmp.data["runs"][1]["metrics"].get("loss", {}).get("count") == 20, "the final metrics")
        assert cmp.thread is not None
        cmp.thread.join(10)
        assert not cmp.thread.is_alive()

        assert [r["id"] for r in cmp.data["runs"]] == ids and cmp.data["metrics"] == ["loss"]
        assert cmp.baseline == a["id"] == cmp.baseline_selector.value
        html = cmp.table_html
        assert html == cmp.table.value
        # params: differing rows highlighted, equal ones not; deltas against the baseline
        (lr,) = rows(html, "lr")
        (arch,) = rows(html, "arch")
        (scale,) = rows(html, "scale")
        assert 'class="gpuplat-differ"' in lr and 'class="gpuplat-differ"' not in arch
        assert "(Δ -0.09, -90.0%)" in lr and lr.count("Δ") == 1  # b against a; c equals a
        assert "(Δ +1, +100.0%)" in scale and "(Δ +3, +300.0%)" in scale
        # resolved-config differences: the name and b's env
        diffs = {d["path"] for d in cmp.data["config"]["differ"]}
        assert {"name", "env", "queue"} <= diffs
        (env,) = rows(html, "env")
        assert "SEED" in env and 'class="gpuplat-differ"' in env
        # metrics: last and best (min for a loss), deltas coloured by direction
        (last,) = rows(html, "loss (last)")
        (best,) = rows(html, "loss (best)")
        assert "0.05" in last and "0.1" in last and "0.2" in last  # scale / 20
        assert "0.05" in best  # min of a's loss is its last value
        assert "(Δ +0.05, +100.0%)" in last and "var(--jp-error-color1)" in last  # worse than the baseline
        # figure: one trace per run for the chosen metric, the baseline drawn heavier
        fig = cmp.figure
        # labelled by name and the params that differ between the runs shown (arch is common)
        assert [t.name for t in fig.data] == ["a · lr=0.1, scale=1", "b · lr=0.01, scale=2", "c · lr=0.1, scale=4"]
        assert fig.data[1].y == tuple(2 / (s + 1) for s in range(20)) and fig.data[1].x == tuple(range(20))
        assert [t.line.width for t in fig.data] == [3, 1.5, 1.5]

        cmp.baseline_selector.value = c["id"]  # pin another baseline
        assert cmp.baseline == c["id"]
        (lr,) = rows(cmp.table_html, "lr")
        (last,) = rows(cmp.table_html, "loss (last)")
        assert "(Δ -0.09, -90.0%)" in lr and "★ baseline" in cmp.table_html
        assert "(Δ -0.15, -75.0%)" in last and "var(--jp-success-color1)" in last  # better than c
        assert [t.line.width for t in fig.data] == [1.5, 1.5, 3]

        # open one run's record
        cmp.open_selector.value = b["id"]
        cmp.open_button.click()
        opened = cmp.opened
        assert isinstance(opened, RunMonitor) and cmp.record.children == (opened,)
        until(lambda: opened.log_lines[-1:] == ["done"] and opened.metrics, "b's record")
        assert opened.run["id"] == b["id"] and opened.status == "succeeded"
    finally:
        cmp.close()
    assert cmp.opened.closed


def test_compare_metric_selector_overlays_chosen_metrics(client: Client, gate: Path) -> None:
    gate.touch()
    runs = [gated_run(client, gate, f"m{i}", params={"scale": i + 1}) for i in range(2)]
    for r in runs:
        client.wait(r["id"], timeout=20)
    cmp = Compare([r["id"] for r in runs], client)
    try:
        assert cmp.thread is None  # every run had ended: nothing to follow
        assert cmp.metric_selector.options == ("acc", "loss") and cmp.metric_selector.value == ("acc",)
        assert [t.name for t in cmp.figure.data] == ["m0 · scale=1", "m1 · scale=2"]
        cmp.metric_selector.value = ("acc", "loss")
        names = [t.name for t in cmp.figure.data]
        assert names == ["m0 · scale=1 · acc", "m1 · scale=2 · acc", "m0 · scale=1 · loss", "m1 · scale=2 · loss"]
        assert cmp.figure.data[3].y[0] == 2.0 and cmp.figure.data[3].line.dash == "dash"
        assert rows(cmp.table_html, "acc (best)") and rows(cmp.table_html, "loss (last)")
    finally:
        cmp.close()


# ---- Launcher --------------------------------------------------------------------------------------
def test_launcher_previews_provenance_refuses_inline_and_submits(server: ServerProcess, client: Client) -> None:
    launcher = Launcher(client, project="team-a")
    try:
        assert launcher.project_picker.options == ("team-a",)
        assert [v for _, v in launcher.queue_picker.options] == ["", "team-a-train", "interactive"]
        assert launcher.preset_picker.allowed_tags == ["single-gpu", "multi-gpu", "notebook"]
        assert [v for _, v in launcher.gpu_picker.options] == ["", 0, 1, 2]  # max_run_resources gpu 2
        first = until(lambda: launcher.preview, "the first preview")
        assert first["verdict"]["allowed"] and first["provenance"]["queue"] == "project:team-a"

        launcher.preset_picker.value = ["multi-gpu", "single-gpu"]  # ordered: the later one wins
        p = until(
            lambda: (
                launcher.shown_request
                and launcher.shown_request.get("presets") == ["multi-gpu", "single-gpu"]
                and launcher.preview
            ),
            "a preview with presets",
        )
        assert p["provenance"]["resources.gpu"] == "preset:single-gpu"
        assert p["provenance"]["env[NCCL_DEBUG]"] == "preset:multi-gpu"
        (gpu,) = rows(launcher.preview_html, "resources.gpu")
        assert ">1<" in gpu and "preset:single-gpu" in gpu
        (nccl,) = rows(launcher.preview_html, "env[NCCL_DEBUG]")
        assert "WARN" in nccl and "preset:multi-gpu" in nccl
        # No command yet: the settings resolve, but "allowed" waits for something to run.
        assert "Enter what to run" in launcher.preview_html and "✓ allowed" not in launcher.preview_html

        # A platform admin takes the interactive queue away while the form is open.
        project = next(x for x in server.ok("GET", "projects", "ops")["projects"] if x["name"] == "team-a")
        body = {k: v for k, v in project.items() if k not in ("role", "usable_queues", "usable_presets")}
        # (without the notebook preset, which locks the interactive queue: validation refuses keeping it)
        presets = [x for x in body.get("allowed_presets") or [] if x != "notebook"] or None
        narrowed = {**body, "allowed_queues": ["team-a-train"], "allowed_presets": presets}
        server.ok("PUT", "projects/team-a", "ops", narrowed)
        try:
            launcher.queue_picker.value = "interactive"
            p = until(
                lambda: (
                    launcher.shown_request and launcher.shown_request.get("queue") == "interactive" and launcher.preview
                ),
                "a preview of the disallowed queue",
            )
            (violation,) = p["verdict"]["violations"]
            assert violation["code"] == "QueueNotAllowed"
            assert "✗ refused by policy" in launcher.preview_html
            assert "queue &#x27;interactive&#x27; is not allowed in project team-a" in launcher.preview_html
            assert "allowed queues: team-a-train" in launcher.preview_html
            launcher.mode_picker.value = "code"
            launcher.command_field.value = "print('hello from launcher')"
            assert launcher.submit() is None and launcher.submitted is None
            assert "is not allowed in project team-a" in launcher.error_html
            assert "allowed queues: team-a-train" in launcher.error_html
            assert launcher.error_box.value == launcher.error_html and launcher.monitor_box.children == ()
        finally:
            server.ok("PUT", "projects/team-a", "ops", body)

        launcher.queue_picker.value = ""
        launcher.name_field.value = "from-the-launcher"
        launcher.submit_button.click()
        run = launcher.submitted
        assert run is not None and run["name"] == "from-the-launcher" and launcher.error_html == ""
        mon = launcher.monitor
        assert isinstance(mon, RunMonitor) and launcher.monitor_box.children == (mon,)
        until(lambda: mon.status == "succeeded" and mon.log_lines == ["hello from launcher"], "the run's monitor")
        record = client.get(run["id"])
        assert record["presets"] == ["multi-gpu", "single-gpu"] and record["resources"]["gpu"] == 1
    finally:
        launcher.close()


def test_launcher_shows_schema_errors_inline(client: Client) -> None:
    launcher = Launcher(client)
    try:
        assert launcher.submit() is None and "nothing to run" in launcher.error_html
        launcher.mode_picker.value = "script"
        launcher.command_field.value = "notes.txt"
        assert launcher.submit() is None
        assert "script must be a .py or .ipynb file" in launcher.error_html
        until(lambda: launcher.preview_error and "script must be" in launcher.preview_html, "the preview's error")
    finally:
        launcher.close()
