"""A thread reading one API stream (a watch, a pod's log) that another thread can end at once.

`stop()` sets the flag the reader checks between reads and shuts the open response down, which
wakes a read blocked on the socket; the reader keeps the response it reads in `_resp`.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any


class StreamThread:
    def __init__(self, name: str) -> None:
        self._stop = threading.Event()
        self._resp: Any = None
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        resp = self._resp
        if resp is not None:
            with contextlib.suppress(Exception):  # already closed: nothing to unblock
                resp.shutdown()

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)

    def _run(self) -> None:
        raise NotImplementedError
