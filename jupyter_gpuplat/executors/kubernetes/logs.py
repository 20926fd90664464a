"""Log following: a pod's log stream appended to the run's `output.log` as it arrives.

Lines are read with timestamps so a resumed stream (after a dropped connection, an
idle timeout or a server restart) skips what is already in the file; the last
timestamp written per pod is kept in `.gpuplat/k8s-logs.json` beside the log. The
file stays after the pod is gone: it is the run's archived log.

Both files lie in the run's directory, which its pod may write: they are opened through
rundir.py (safefs), never by name, so a link the run planted at `output.log` or `.gpuplat`
is refused (the lines are then not archived, and the control plane says so once) instead
of being written through.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import math
import threading
import time
from collections.abc import Callable
from typing import Any

from kubernetes.client.exceptions import ApiException

from ...core import artifacts as layout
from . import rundir
from .manifests import CONTAINER
from .streaming import StreamThread

STATE_FILE = layout.K8S_LOGS


def parse_timestamp(text: str) -> int | None:
    """RFC3339(Nano) → Unix nanoseconds; None when it is not a timestamp."""
    if not text.endswith("Z") or "T" not in text:
        return None
    body = text[:-1]
    frac = ""
    if "." in body:
        body, frac = body.split(".", 1)
    try:
        secs = int(dt.datetime.strptime(body, "%Y-%m-%dT%H:%M:%S").replace(tzinfo=dt.UTC).timestamp())
    except ValueError:
        return None
    return secs * 1_000_000_000 + int((frac + "000000000")[:9] or 0)


class LogState:
    """Per run: for each pod, the last timestamp written and how many lines carried it."""

    def __init__(self, workdir: str, log: Any = None) -> None:
        self.workdir = workdir
        self.log = log
        self.lock = threading.Lock()
        self.refused: set[str] = set()  # files of the run the control plane would not open (said once each)
        text = rundir.read_text(workdir, STATE_FILE)
        try:
            data = json.loads(text) if text else {}
        except ValueError:
            data = {}
        self.pods: dict[str, dict[str, Any]] = data.get("pods", {}) if isinstance(data, dict) else {}

    def save(self) -> None:
        body = json.dumps({"pods": self.pods}).encode()
        self._safely(STATE_FILE, lambda: rundir.write(self.workdir, STATE_FILE, body))

    def append(self, data: bytes) -> None:
        """Lines for the run's log (`output.log`)."""
        self._safely(layout.LOG, lambda: rundir.append(self.workdir, layout.LOG, data))

    def _safely(self, rel: str, op: Callable[[], None]) -> None:
        try:
            op()
        except OSError as exc:
            if rel not in self.refused and self.log is not None:
                self.log.warning(
                    "gpuplat: not writing %s of the run in %s: %s (its pod may have replaced it with a link or a "
                    "FIFO; nothing is written outside the run's directory)",
                    rel,
                    self.workdir,
                    exc,
                )
            self.refused.add(rel)


class LogFollower(StreamThread):
    """Follows one pod's container log into the run's log file, on its own thread."""

    def __init__(
        self,
        core: Any,
        namespace: str,
        pod: str,
        state: LogState,
        *,
        container_ended: Callable[[], bool],
        pod_exists: Callable[[], bool],
        slots: threading.Semaphore,
        connect_seconds: float,
        idle_seconds: float,
        on_call: Callable[[], None],
        log: Any,
    ) -> None:
        self.core = core
        self.namespace = namespace
        self.pod = pod
        self.state = state
        self.container_ended = container_ended
        self.pod_exists = pod_exists
        self.slots = slots
        self.connect_seconds = connect_seconds
        self.idle_seconds = idle_seconds
        self.on_call = on_call
        self.log = log
        self.done = threading.Event()
        # Set by the executor when the cache shows the container ended (the pod watch is a
        # separate stream: it may tell after this log stream has ended).
        self.container_done = threading.Event()
        self.settle_seconds = 2.0
        super().__init__(f"gpuplat-k8s-log-{pod}")

    def _run(self) -> None:
        try:
            with self.slots:
                self._follow()
        except Exception:
            self.log.exception("gpuplat: following the log of pod %s failed", self.pod)
        finally:
            self.done.set()

    def _follow(self) -> None:
        with self.state.lock:
            first = self.pod not in self.state.pods
            mine = self.state.pods.setdefault(self.pod, {"last_ns": 0, "at_last": 0})
            if first and len(self.state.pods) > 1:
                self._write(f"--- gpuplat: next attempt, pod {self.pod} ---\n".encode())
        backoff = 0.1
        while not self._stop.is_set():
            kwargs: dict[str, Any] = {
                "container": CONTAINER,
                "follow": True,
                "timestamps": True,
                "_preload_content": False,
                "_request_timeout": (self.connect_seconds, self.idle_seconds),
            }
            if mine["last_ns"]:
                ago = (time.time_ns() - mine["last_ns"]) / 1e9
                kwargs["since_seconds"] = max(1, math.ceil(ago) + 1)
            try:
                self.on_call()
                resp = self.core.read_namespaced_pod_log(self.pod, self.namespace, **kwargs)
            except ApiException as exc:
                if exc.status == 404 or not self.pod_exists():
                    return  # the pod is gone: what was written is what there is
                if exc.status == 400 and not self.container_ended():
                    # "waiting to start": the container has not run yet
                    if self._stop.wait(backoff):
                        return
                    backoff = min(backoff * 2, 2.0)
                    continue
                if exc.status == 400:
                    return
                self.log.warning("gpuplat: log of pod %s: %s %s; retrying", self.pod, exc.status, exc.reason)
                if self._stop.wait(backoff):
                    return
                backoff = min(backoff * 2, 5.0)
                continue
            except Exception as exc:
                self.log.debug("gpuplat: log of pod %s: %r; retrying", self.pod, exc)
                if self._stop.wait(backoff) or not self.pod_exists():
                    return
                backoff = min(backoff * 2, 5.0)
                continue
            self._resp = resp
            cut = False
            try:
                self._copy(resp, mine)
            except Exception as exc:  # dropped stream or idle timeout: resume from the last timestamp
                cut = True
                self.log.debug("gpuplat: log stream of pod %s ended: %r", self.pod, exc)
            finally:
                self._resp = None
                with contextlib.suppress(Exception):
                    resp.release_conn()
            if self._stop.is_set() or not self.pod_exists():
                return
            if cut:
                if self._stop.wait(backoff):
                    return
                backoff = min(backoff * 2, 5.0)
                continue
            backoff = 0.1
            # A follow stream that ends cleanly means the container ended (or the apiserver let
            # go): wait briefly for the pod watch to say which before reading again.
            if self.container_done.wait(self.settle_seconds) or self.container_ended():
                return

    def _copy(self, resp: Any, mine: dict[str, Any]) -> None:
        # A resumed stream repeats lines up to the last timestamp written: skip those.
        resume = [mine["last_ns"], mine["at_last"]]
        buf = b""
        for chunk in resp.stream(64 * 1024, decode_content=False):
            if self._stop.is_set():
                return
            buf += chunk
            cut = buf.rfind(b"\n")
            if cut < 0:
                continue
            lines, buf = buf[: cut + 1].splitlines(), buf[cut + 1 :]
            self._take(lines, mine, resume)
        if buf:
            self._take([buf], mine, resume)

    def _take(self, lines: list[bytes], mine: dict[str, Any], resume: list[int]) -> None:
        out = []
        with self.state.lock:
            for raw in lines:
                stamp, _, text = raw.partition(b" ")
                ns = parse_timestamp(stamp.decode("ascii", "replace"))
                if ns is None:  # no timestamp (should not happen): keep the line whole
                    out.append(raw + b"\n")
                    continue
                if ns < resume[0]:
                    continue
                if ns == resume[0] and resume[1] > 0:
                    resume[1] -= 1
                    continue
                if ns == mine["last_ns"]:
                    mine["at_last"] += 1
                else:
                    mine["last_ns"], mine["at_last"] = ns, 1
                out.append(text + b"\n")
            if out:
                self._write(b"".join(out))
                self.state.save()

    def _write(self, data: bytes) -> None:
        self.state.append(data)


def wait_all(events: list[threading.Event], timeout: float) -> bool:
    """Whether every event is set within `timeout` seconds in all (a run's log followers drained)."""
    deadline = time.monotonic() + timeout
    return all(e.wait(max(0.0, deadline - time.monotonic())) for e in events)
