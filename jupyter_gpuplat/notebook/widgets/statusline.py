"""The magics' one-line run status, followed until the run is final.

`%gpu_submit` shows one line (HTML that any frontend shows, plain text too) and hands it to
a `StatusLine`, which re-publishes it (`publish(text)`, the magic's display-handle update)
whenever it changes: on the run's status events from the shared feed (live.EventFeed), on
events of its queue while it waits (its place in line), on each new start estimate of the run
(the feed's `eta` events: the server's words, shown as given), and once a second for the clock
of the phase it is in (clocks.LiveClocks). The last line published is the final state; then the
thread ends. No ipywidgets: a plain-text frontend gets the same line.
"""

from __future__ import annotations

import contextvars
import logging
import queue
import threading
from collections.abc import Callable, Mapping
from typing import Any

from ...client.explaining import waiting_summary
from ...client.rest import Client, GpuPlatAPIError
from ...core.explain_text import eta_words
from ...core.status import FINAL, WAITING
from .clocks import QUEUE_WAIT, RUN, START_WAIT, LiveClocks, duration
from .live import EventFeed, Streams, Subscription

__all__ = ["StatusLine", "status_text"]

log = logging.getLogger(__name__)

_BEFORE_START = frozenset({"dispatched", "starting"})


def status_text(run: Mapping[str, Any], explain: Mapping[str, Any] | None, clocks: Mapping[str, float | None]) -> str:
    """`r-1 queued in queue q — QueueConcurrency: … (position 1 of 1) · waiting 4s · starts in ~6 min (p90 25 min)`,
    `… running for 12s`, `… succeeded in queue q — exited with code 0 · ran 1m 02s`."""
    status = str(run["status"])
    head = f"{run['id']} {status} in queue {run['queue']}"
    if status in WAITING or status in _BEFORE_START:
        why = f" — {waiting_summary(explain)}" if explain and explain.get("reason") else ""
        waited = clocks.get(QUEUE_WAIT) if status in WAITING else clocks.get(START_WAIT)
        start = eta_words(explain if explain and ("eta" in explain or "eta_unknown" in explain) else run)
        return f"{head}{why} · waiting {duration(waited)}" + (f" · {start}" if start else "")
    if status in FINAL:
        ran = clocks.get(RUN)
        tail = f"ran {duration(ran)}" if ran is not None else f"waited {duration(clocks.get(QUEUE_WAIT))}"
        message = str(run.get("message") or "")
        return f"{head} — {message + ' · ' if message else ''}{tail}"
    devices = run.get("devices") or []
    on = f" on GPU {','.join(map(str, devices))}" if devices else ""
    verb = "stopping after" if status == "stopping" else "running for"
    return f"{head}{on} — {verb} {duration(clocks.get(RUN))}"


class StatusLine:
    """Keeps one run's status line current: `StatusLine(run, client, publish).start()`."""

    tick_seconds = 1.0

    def __init__(
        self,
        run: Mapping[str, Any],
        client: Client,
        publish: Callable[[str], None],
        explain: Mapping[str, Any] | None = None,
        text: Callable[[Mapping[str, Any], Mapping[str, Any] | None, Mapping[str, float | None]], str] = status_text,
    ) -> None:
        """`text(run, explain, clocks)` makes the line (a sweep's says its children instead)."""
        self.client = client
        self._text = text
        self.run: dict[str, Any] = dict(run)
        self.explain = dict(explain) if explain else None
        self.clocks = LiveClocks.of(self.run)
        self.text = self.render()
        self.published: list[str] = []  # every line published, in order (the last is what shows)
        self._publish = publish
        self._inbox: queue.Queue[Any] = queue.Queue()
        self._closed = threading.Event()
        self._sub: Subscription | None = None
        self._streams: Streams | None = None
        self._thread: threading.Thread | None = None

    @property
    def thread(self) -> threading.Thread | None:
        return self._thread

    @property
    def final(self) -> bool:
        return self.run["status"] in FINAL

    def render(self) -> str:
        return self._text(self.run, self.explain, self.clocks.at())

    def start(self) -> StatusLine:
        """Follow the run in a daemon thread (nothing to follow once it is final)."""
        if self.final or self._thread is not None:
            return self
        self._streams = Streams(self.client)  # close() cuts its in-flight reads at once
        self._sub = EventFeed.of(self.client).subscribe(
            self._on_event, on_connect=lambda: self._inbox.put("refresh"), on_eta=self._on_eta
        )
        # The kernel's parent message lives in a context variable: updates belong to the submitting cell.
        ctx = contextvars.copy_context()
        self._thread = threading.Thread(
            target=ctx.run, args=(self._loop,), name=f"gpuplat-status-{self.run['id']}", daemon=True
        )
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop following (the line keeps what it showed last)."""
        self._closed.set()
        self._inbox.put("stop")
        if self._sub is not None:
            self._sub.close()
        if self._streams is not None:
            self._streams.cut()

    # ---- following -----------------------------------------------------------------------------
    def _on_event(self, ev: dict[str, Any]) -> None:
        if ev["run_id"] == self.run["id"] or ev.get("parent") == self.run["id"]:  # a sweep's children count too
            self._inbox.put("refresh")
        elif self.run["status"] in WAITING and (ev["queue"] == self.run.get("queue") or ev["status"] in FINAL):
            self._inbox.put("explain")  # its place in line may have changed

    def _on_eta(self, ev: dict[str, Any]) -> None:
        if ev["run_id"] == self.run["id"]:
            self._inbox.put(("eta", ev))

    def _take_eta(self, ev: Mapping[str, Any]) -> None:
        """A new start estimate of the run, as the stream gave it (the run record and explain carry the same)."""
        fields = {"eta": ev.get("eta"), "eta_unknown": ev.get("eta_unknown")}
        self.run.update(fields)
        if self.explain is not None:
            self.explain.update(fields)

    def _loop(self) -> None:
        assert self._streams is not None
        try:
            while not self._closed.is_set():
                try:
                    items = [self._inbox.get(timeout=self.tick_seconds)]
                except queue.Empty:
                    items = ["tick"]
                while True:  # a burst of events is one re-read
                    try:
                        items.append(self._inbox.get_nowait())
                    except queue.Empty:
                        break
                if "stop" in items or self._closed.is_set():
                    return
                for item in items:  # first: a re-read below is newer than any of them
                    if isinstance(item, tuple) and item[0] == "eta":
                        self._take_eta(item[1])
                self._read(self._streams.client, refresh="refresh" in items, explain="explain" in items)
                self._show(self.render())
                if self.final:
                    return
        finally:
            if self._sub is not None:
                self._sub.close()
            if self._streams is not None:
                self._streams.close()

    def _read(self, c: Client, *, refresh: bool, explain: bool) -> None:
        try:
            if refresh:
                run = c.get(self.run["id"])
                self.run, self.clocks = run, LiveClocks.of(run)
            waiting = self.run["status"] in WAITING or self.run["status"] in _BEFORE_START
            if waiting and (refresh or explain) and self.run.get("kind") != "sweep":
                self.explain = c.explain(self.run["id"])
        except GpuPlatAPIError as exc:  # keep the last line; the next event retries
            log.debug("status line of %s: read failed: %s", self.run["id"], exc)

    def _show(self, text: str) -> None:
        if text == self.text or self._closed.is_set():
            return
        self.text = text
        self.published.append(text)
        try:
            self._publish(text)
        except Exception:  # the frontend went away: nothing more to show it
            log.exception("status line of %s: publish failed", self.run["id"])
