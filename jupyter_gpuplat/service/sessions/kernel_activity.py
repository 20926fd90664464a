"""What a session kernel is doing, followed from its first message.

The provisioner subscribes to the kernel's IOPub before the kernel manager hands the kernel
to anyone (`launch_kernel` has not returned yet), so a cell sent at once ("Run All", a
headless client) is seen busy. It asks the kernel for its info itself; the reply says the
kernel is up. Nothing is flushed: `wait_for_ready` would drop the early cell's busy status.

A kernel that has not answered within PROBE_BUSY_SECONDS is running something (its shell
handles one request at a time), perhaps a cell whose busy status was published before the
subscription reached the kernel: it counts as busy until the answer comes. A kernel still
importing at start-up counts as busy too, which only postpones the idle clock.

The answer is the probe's reply *and* its own status on IOPub: a reply alone does not prove the
IOPub subscription is live (ZeroMQ's slow joiner), and a cell started after the probe whose busy
status was lost would count as idle for its whole run. A reply whose status has not come within
PROBE_ECHO_SECONDS is asked again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, Literal

from jupyter_client.asynchronous.client import AsyncKernelClient

# Requests that are not someone using the kernel: the frontend's pings and comm listings.
UNTRACKED_PARENTS = frozenset({"kernel_info_request", "comm_info_request", "usage_request", "debug_request"})
PROBE_BUSY_SECONDS = 2.0
PROBE_ECHO_SECONDS = 1.0

KernelReport = Literal["ready", "restarted", "busy", "idle"]


class Activity:
    """The facts seen on the kernel's channels → the reports to make, in order.

    The first report is `ready` (or `restarted`, for a kernel restarted inside its lease), made
    once the kernel has shown it is up; busy/idle only after it, since the platform's `ready`
    starts the idle clock afresh.
    """

    def __init__(self, first: Literal["ready", "restarted"]) -> None:
        self.first: KernelReport = first
        self.up = False  # `first` was reported
        self.replied = False  # the probe's reply came
        self.echoed = False  # the probe's status came on IOPub: the subscription is live
        self.overdue = False  # the probe has waited PROBE_BUSY_SECONDS
        self.requests: set[str] = set()  # users' requests between their busy and idle status
        self._reported_busy = False

    @property
    def answered(self) -> bool:
        return self.replied and self.echoed

    @property
    def busy(self) -> bool:
        return bool(self.requests) or (self.overdue and not self.answered)

    def status(self, parent_type: str | None, parent_id: str | None, state: str | None) -> list[KernelReport]:
        if parent_type in UNTRACKED_PARENTS or parent_id is None:
            return []
        if state == "busy":
            self.requests.add(parent_id)
        elif state == "idle":
            self.requests.discard(parent_id)
        return self._reports()

    def probe_replied(self) -> list[KernelReport]:
        self.replied = True
        return self._reports()

    def probe_echoed(self) -> list[KernelReport]:
        self.echoed = True
        return self._reports()

    def probe_again(self) -> None:
        """A new probe replaces one replied to but never echoed (overdue stays: still unanswered)."""
        self.replied = self.echoed = False

    def probe_overdue(self) -> list[KernelReport]:
        self.overdue = True
        return self._reports()

    def _reports(self) -> list[KernelReport]:
        out: list[KernelReport] = []
        if not self.up:
            if not (self.answered or self.overdue or self.requests):
                return out
            self.up, self._reported_busy = True, False
            out.append(self.first)
        if self.busy != self._reported_busy:
            self._reported_busy = self.busy
            out.append("busy" if self.busy else "idle")
        return out


def subscribe(info: dict[str, Any]) -> AsyncKernelClient:
    """A client on the kernel's shell and IOPub, connected now (before anyone can send it a cell)."""
    kc = AsyncKernelClient()
    kc.load_connection_info(info)  # type: ignore[arg-type]
    kc.start_channels(shell=True, iopub=True, stdin=False, hb=False, control=False)
    return kc


async def follow(kc: AsyncKernelClient, activity: Activity, report: Callable[[KernelReport], Awaitable[None]]) -> None:
    """Feed `activity` from the kernel's channels until cancelled, awaiting `report` for each change."""
    loop = asyncio.get_running_loop()
    probe = kc.kernel_info()
    overdue_at = loop.time() + PROBE_BUSY_SECONDS
    again_at: float | None = None  # replied but not echoed: probe again then
    iopub: asyncio.Future[dict[str, Any]] = asyncio.ensure_future(kc.get_iopub_msg())
    shell: asyncio.Future[dict[str, Any]] | None = asyncio.ensure_future(kc.get_shell_msg())
    try:
        while True:
            waiting = {iopub} if shell is None else {iopub, shell}
            deadlines = [t for t in (None if activity.overdue else overdue_at, again_at) if t is not None]
            timeout = None if activity.answered or not deadlines else max(0.0, min(deadlines) - loop.time())
            done, _ = await asyncio.wait(waiting, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
            now, reports = loop.time(), []
            if not (activity.answered or activity.overdue) and now >= overdue_at:
                reports += activity.probe_overdue()
            if again_at is not None and now >= again_at and not activity.answered:
                activity.probe_again()
                probe, again_at = kc.kernel_info(), None
                overdue_at = now + PROBE_BUSY_SECONDS
            if iopub in done:
                msg = iopub.result()
                iopub = asyncio.ensure_future(kc.get_iopub_msg())
                if msg["msg_type"] == "status":
                    parent = msg.get("parent_header") or {}
                    if parent.get("msg_id") == probe and not activity.answered:
                        reports += activity.probe_echoed()
                    state = msg["content"].get("execution_state")
                    reports += activity.status(parent.get("msg_type"), parent.get("msg_id"), state)
            if shell is not None and shell in done:
                msg = shell.result()
                shell = asyncio.ensure_future(kc.get_shell_msg())
                if (msg.get("parent_header") or {}).get("msg_id") == probe:
                    reports += activity.probe_replied()
                    again_at = None if activity.answered else now + PROBE_ECHO_SECONDS
            if activity.answered:
                again_at = None
                if shell is not None:
                    shell.cancel()
                    shell = None
            for event in reports:
                await report(event)
    finally:
        for pending in (iopub, shell):
            if pending is not None:
                pending.cancel()
