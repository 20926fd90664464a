"""A run the Kubernetes executor watches: its Job, what was reported of it, its log followers and kernel."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from .logs import LogFollower, LogState


@dataclass(eq=False)
class WatchedRun:
    run_id: str
    job: str
    workdir: str
    log_path: str
    reattached: bool
    seen_job: bool = False
    reported: tuple[str, ...] | None = None
    running_reported: bool = False
    stopping: bool = False
    finishing: bool = False
    done: asyncio.Event = field(default_factory=asyncio.Event)
    followers: dict[str, LogFollower] = field(default_factory=dict)
    log_state: LogState | None = None
    disrupted: set[str] = field(default_factory=set)  # pod uids whose preemption/eviction is recorded
    settle: asyncio.TimerHandle | None = None  # set while waiting for a failed pod's final state
    secret: str | None = None  # a session's kernel key Secret (None: a job)
    kernel_ports: tuple[int, ...] = ()
    kernel_key: str | None = None  # read from the Secret once, when not made here
    disruption: str | None = None  # what the last preemption or eviction of its pod said
    pod_deleted: bool = False  # a pod of the run was deleted (by anyone: this executor deletes only Jobs)
