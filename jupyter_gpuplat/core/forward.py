"""The dispatcher's admission cycle, run forward over private queue states: what-if and estimates.

Both `whatif.replay` (recorded arrivals under other limits) and `eta.estimate` (when will each
waiting run start) advance a discrete-event simulation whose every instant runs this cycle:
`order_queues`, then for each woken queue `decide` → `pick_devices` → `assume` until nothing
more fits, as `engine.dispatcher.Dispatcher.run_cycle` does. A finish wakes its queue and,
when it frees devices, the queues that waited on local capacity; so does the dispatcher.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from .admission import HeldRun, PendingRun, QueueState, decide, order_queues, pick_devices


class DevicePool:
    """The free GPUs as the dispatcher counts them: in all and, where devices are typed, per flavor.

    `free` None: the executor places work itself (a cluster), so no free count limits admission.
    """

    __slots__ = ("by_flavor", "free", "typed")

    def __init__(self, free: Iterable[int] | None, typed: Mapping[int, str] | None = None) -> None:
        self.free: set[int] | None = set(free) if free is not None else None
        self.typed = typed if self.free is not None else None
        self.by_flavor: dict[str, int] | None = None
        if self.free is not None and typed is not None:
            self.by_flavor = {}
            for i in self.free:
                if (f := typed.get(i)) is not None:
                    self.by_flavor[f] = self.by_flavor.get(f, 0) + 1

    def copy(self) -> DevicePool:
        pool = DevicePool.__new__(DevicePool)
        pool.free = set(self.free) if self.free is not None else None
        pool.typed = self.typed
        pool.by_flavor = dict(self.by_flavor) if self.by_flavor is not None else None
        return pool

    @property
    def counted(self) -> bool:
        return self.free is not None

    @property
    def gpus(self) -> int | None:
        return len(self.free) if self.free is not None else None

    def pick(self, n: int, flavor: str | None) -> tuple[int, ...]:
        return pick_devices(self.free, n, flavor, self.typed) if self.free is not None else ()

    def take(self, devices: tuple[int, ...]) -> None:
        self._move(devices, -1)

    def give(self, devices: tuple[int, ...]) -> None:
        self._move(devices, 1)

    def _move(self, devices: tuple[int, ...], step: int) -> None:
        if self.free is None or not devices:
            return
        if step < 0:
            self.free.difference_update(devices)
        else:
            self.free.update(devices)
        if self.by_flavor is not None and self.typed is not None:
            for i in devices:
                if (f := self.typed.get(i)) is not None:
                    self.by_flavor[f] = self.by_flavor.get(f, 0) + step


# Called for each admission: the queue, the run, the flavor it went on and the devices it took.
OnAdmit = Callable[[QueueState, PendingRun, str | None, tuple[int, ...]], None]


class Cycles:
    """Queue states, the device pool and which queues the next cycle looks at (the dispatcher's `dirty`)."""

    __slots__ = ("capacity_waiters", "dirty", "pool", "queues")

    def __init__(self, queues: Mapping[str, QueueState], pool: DevicePool) -> None:
        self.queues = queues
        self.pool = pool
        self.dirty: set[str] = set()
        self.capacity_waiters: set[str] = set()

    def hold(self, queue: str, held: HeldRun) -> None:
        """A run holding from before the simulation starts: its slot, quota and devices."""
        self.pool.take(held.devices)
        self.queues[queue].hold(held)

    def release(self, queue: str, run_id: str) -> bool:
        """A held run ends: its queue wakes, and with its devices those that waited on capacity."""
        held = self.queues[queue].release(run_id)
        if held is None:
            return False
        self.dirty.add(queue)
        if held.devices:
            self.pool.give(held.devices)
            self.dirty |= self.capacity_waiters
        return True

    def arrive(self, run: PendingRun) -> None:
        self.queues[run.queue].add_pending(run)
        self.dirty.add(run.queue)

    def cycle(self, on_admit: OnAdmit, after: Callable[[QueueState], None] | None = None) -> None:
        """One admission cycle over the woken queues; `after` sees each queue once it admits no more."""
        pool = self.pool
        for q in order_queues([self.queues[n] for n in self.dirty]):
            self.capacity_waiters.discard(q.limits.name)
            while True:
                dec = decide(q, pool.gpus, pool.by_flavor)
                run = dec.run
                if run is None:
                    if dec.capacity_blocked:
                        self.capacity_waiters.add(q.limits.name)
                    break
                d = pool.pick(run.request.gpu, dec.flavor)
                pool.take(d)
                q.assume(run, d, dec.flavor)
                on_admit(q, run, dec.flavor, d)
            if after is not None:
                after(q)
        self.dirty.clear()
