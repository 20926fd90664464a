"""Live updates for widgets: one status-event feed per Client, and streams that can be cut.

Every widget on a Client shares one `EventFeed`: a daemon thread that reads the
service's `events` stream and fans status events out to subscribers (one run, or
all), and, to those that ask (`on_eta`), each start estimate that moved. A dropped
stream is reopened with `since=<last id seen>`, so no status event is lost across the
gap; subscribers are also told each time the stream (re)opens, so they can re-read
state they may have missed before it was open (estimates, which are not replayed,
included). The thread ends when the last subscriber leaves.

Blocking streams (events, a log that follows) are read on a private copy of the
Client on its own cuttable HTTP face (`client/http/sync.py`, `CuttableHTTP`), so
`Streams.cut()` can end them from another thread at once instead of waiting for
the next line (or, for a log that has no line yet, for the response headers).
"""

from __future__ import annotations

import copy
import logging
import queue
import threading
import weakref
from collections.abc import Callable
from typing import Any, ClassVar

from ...client.rest import Client, GpuPlatAPIError
from ...core.status import FINAL
from ._html import error_block

__all__ = ["EventFeed", "Streams", "Subscription", "default_client"]

log = logging.getLogger(__name__)

_default: Client | None = None
_default_lock = threading.Lock()


def default_client() -> Client:
    """One Client shared by widgets created without one (so they share one event feed)."""
    global _default
    with _default_lock:
        if _default is None:
            _default = Client()
        return _default


class Streams:
    """A copy of `client` on its own HTTP face whose connections another thread can cut.

    `cut()` shuts down every socket the face opened, so a thread blocked in a
    request (waiting for headers, or reading a stream) returns at once; later
    requests through it fail fast. `on_open()` runs when a response arrives.
    """

    def __init__(self, client: Client, on_open: Callable[[], None] | None = None) -> None:
        self.http = client.http.cuttable(on_open)
        self.client = copy.copy(client)
        self.client.http = self.http

    @property
    def on_open(self) -> Callable[[], None] | None:
        return self.http.on_open

    @property
    def is_cut(self) -> bool:
        return self.http.is_cut

    def cut(self) -> None:
        """End every open request and stream now, and make later ones fail fast."""
        self.http.cut()

    def close(self) -> None:
        self.http.close()


class Subscription:
    """A subscriber of an EventFeed; `close()` unsubscribes."""

    def __init__(
        self,
        feed: EventFeed,
        on_event: Callable[[dict[str, Any]], None],
        run_id: str | None,
        on_connect: Callable[[], None] | None,
        on_eta: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        self.feed = feed
        self.on_event = on_event
        self.run_id = run_id
        self.on_connect = on_connect
        self.on_eta = on_eta
        self.closed = False

    def close(self) -> None:
        self.feed.unsubscribe(self)


class EventFeed:
    """The one background reader of `Client.events()` for a Client."""

    _feeds: ClassVar[weakref.WeakKeyDictionary[Client, EventFeed]] = weakref.WeakKeyDictionary()
    _feeds_lock: ClassVar[threading.Lock] = threading.Lock()

    max_backoff_seconds = 5.0

    def __init__(self, client: Client) -> None:
        self.client = client
        self.last_id: int | None = None  # the newest event delivered; a reconnect resumes after it
        self.reconnects = 0
        self.error: str | None = None  # why the stream last dropped
        self.connected = threading.Event()
        self.thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._subs: list[Subscription] = []
        self._stop: threading.Event | None = None
        self._streams: Streams | None = None

    @classmethod
    def of(cls, client: Client) -> EventFeed:
        with cls._feeds_lock:
            feed = cls._feeds.get(client)
            if feed is None:
                feed = cls._feeds[client] = cls(client)
            return feed

    @property
    def subscribers(self) -> int:
        return len(self._subs)

    def subscribe(
        self,
        on_event: Callable[[dict[str, Any]], None],
        run_id: str | None = None,
        on_connect: Callable[[], None] | None = None,
        on_eta: Callable[[dict[str, Any]], None] | None = None,
    ) -> Subscription:
        """Call `on_event(event)` for status events of `run_id` (or of every visible run).

        `on_eta(estimate)`, if given, is called for each start estimate of those runs that moved
        (`{"event": "eta", "run_id", "project", "eta", "eta_unknown"}`, as `Client.events(eta=True)`
        gives it); estimates are not replayed after a drop, so re-read them in `on_connect`.
        `on_connect()` is called each time the stream opens or reopens, on the feed's thread;
        the callbacks must return quickly (hand work to your own thread).
        """
        sub = Subscription(self, on_event, run_id, on_connect, on_eta)
        with self._lock:
            self._subs.append(sub)
            if self.thread is None:
                self._start()
            already_open = self.connected.is_set()
        if already_open and on_connect is not None:
            self._call(on_connect)  # nothing from before this moment will be replayed to it
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        with self._lock:
            sub.closed = True
            if sub in self._subs:
                self._subs.remove(sub)
            if not self._subs and self.thread is not None:
                self._halt()

    def _start(self) -> None:
        stop = threading.Event()
        streams = Streams(self.client, on_open=lambda: self._opened(stop))
        self._stop, self._streams = stop, streams
        self.thread = threading.Thread(target=self._feed_loop, args=(stop, streams), name="gpuplat-events", daemon=True)
        self.thread.start()

    def _halt(self) -> None:
        assert self._stop is not None and self._streams is not None
        self.thread = None  # first: once cut, the thread may end at any moment
        self.connected.clear()
        self._stop.set()
        self._streams.cut()

    def _opened(self, stop: threading.Event) -> None:
        if stop.is_set():
            return
        self.connected.set()
        for sub in self._snapshot():
            if sub.on_connect is not None:
                self._call(sub.on_connect)

    def _snapshot(self) -> list[Subscription]:
        with self._lock:
            return list(self._subs)

    @staticmethod
    def _call(fn: Callable[..., None], *args: Any) -> None:
        try:
            fn(*args)
        except Exception:  # one broken subscriber must not end the feed for the others
            log.exception("gpuplat event subscriber failed")

    def _feed_loop(self, stop: threading.Event, streams: Streams) -> None:
        backoff = 0.1
        try:
            while not stop.is_set():
                try:
                    for ev in streams.client.events(since=self.last_id, eta=True):
                        if stop.is_set():
                            break
                        estimate = ev.get("event") == "eta"
                        if not estimate:
                            self.last_id = ev["id"]  # estimates have no id: only status events are resumed from
                        for sub in self._snapshot():
                            if sub.closed or (sub.run_id is not None and sub.run_id != ev["run_id"]):
                                continue
                            if not estimate:
                                self._call(sub.on_event, ev)
                            elif sub.on_eta is not None:
                                self._call(sub.on_eta, ev)
                    self.error = "the server ended the stream"
                except (GpuPlatAPIError, ValueError) as exc:
                    self.error = str(exc)
                finally:
                    if self._stop is stop:  # a newer thread may own the flag by now
                        if self.connected.is_set():
                            backoff = 0.1  # it was open: a fresh drop, retry soon
                        self.connected.clear()
                if stop.is_set():
                    break
                self.reconnects += 1
                log.debug("gpuplat event stream dropped (%s); reconnecting after %s", self.error, self.last_id)
                stop.wait(backoff)
                backoff = min(backoff * 2, self.max_backoff_seconds)
        finally:
            streams.close()


FOLLOW_STOP = object()  # what close() puts in a follower's inbox


class Follower:
    """What a live view of one run (a session, a sweep) shares: its event subscription, HTTP
    streams and worker thread, a burst of wake-ups coalesced into one re-read, and close().

    The view sets `_closed`, `_inbox`, `_sub` (None), `_parts` and `message` (an HTML widget for
    errors) first, then calls `_follow`; it defines `_on_event` (which wakes the worker with
    "refresh"), `_refresh` (one re-read; a failed one is shown in `message`, and following goes on)
    and `_done` (stop following after this re-read).
    """

    _closed: threading.Event
    _inbox: queue.Queue[Any]
    _sub: Subscription | None
    _parts: list[Any]
    _streams: Streams
    _worker: threading.Thread
    message: Any
    client: Client
    run: dict[str, Any]
    run_id: str

    def _own(self, run: dict[str, Any] | str, client: Client | None) -> None:
        """The view's first step: its state (`_closed` first: close() runs from __del__ even if
        __init__ failed), its client (the shared default one if none) and the run's record."""
        self._closed = threading.Event()
        self._inbox = queue.Queue()
        self._sub = None
        self._parts = []
        self.client = client or default_client()
        self.run = self.client.get(run) if isinstance(run, str) else dict(run)
        self.run_id = str(self.run["id"])

    def _follow(self, client: Client, record: dict[str, Any], thread_name: str) -> None:
        self._streams = Streams(client)  # close() cuts its in-flight reads at once
        if record["status"] not in FINAL:
            self._sub = EventFeed.of(client).subscribe(self._on_event, on_connect=lambda: self._inbox.put("refresh"))
        self._inbox.put("refresh")
        self._worker = threading.Thread(target=self._work_loop, name=thread_name, daemon=True)
        self._worker.start()

    def _on_event(self, ev: dict[str, Any]) -> None:
        raise NotImplementedError

    def _refresh(self) -> None:
        raise NotImplementedError

    def _done(self) -> bool:
        raise NotImplementedError

    def _refresh_shown(self) -> None:
        try:
            self._refresh()
        except GpuPlatAPIError as exc:
            self._show_error(str(exc))
        except Exception as exc:  # keep following: one bad answer must not end the view
            log.exception("%s %s update failed", type(self).__name__, self.run_id)
            self._show_error(f"update failed: {exc!r}")

    def _show_error(self, text: str) -> None:
        if not self._closed.is_set():
            self.message.value = error_block(text)

    @property
    def thread(self) -> threading.Thread:
        return self._worker

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    def close(self) -> None:
        """Stop following the run (the run itself goes on)."""
        if not self._closed.is_set():
            stop_following(self, FOLLOW_STOP)
        super().close()  # type: ignore[misc]

    def _work_loop(self) -> None:
        try:
            while not self._closed.is_set():
                items = [self._inbox.get()]
                while True:  # a burst of events is one re-read
                    try:
                        items.append(self._inbox.get_nowait())
                    except queue.Empty:
                        break
                if FOLLOW_STOP in items or self._closed.is_set():
                    return
                self._refresh_shown()
                if self._done():
                    if self._sub is not None:
                        self._sub.close()
                    return
        finally:
            self._streams.close()


def stop_following(widget: Any, stop: object) -> None:
    """Close what a live widget (a run monitor, a session view) follows: its event subscription,
    its HTTP streams, its worker (sent `stop`) and its parts. Once: it sets `_closed` first."""
    widget._closed.set()
    if widget._sub is not None:
        widget._sub.close()
    streams = getattr(widget, "_streams", None)  # absent when __init__ failed early
    if streams is not None:
        streams.cut()
        streams.close()
    widget._inbox.put(stop)
    for w in widget._parts:
        w.close()
