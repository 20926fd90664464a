"""A cgroup per local run: memory, CPU, pids and GPU device nodes, where this machine lets us.

`Cgroups.probe()` looks once at what the kernel offers the server: cgroup v1 hierarchies
(memory, cpu, pids, devices, freezer) and the v2 (unified) hierarchy, each below the server's
own cgroup in it, so a container's or a service's limits still bind the runs. Each run gets
`gpuplat-runs/<run id>` in every hierarchy the server may write; its command joins them itself
between fork and exec (launcher.py), before it drops to the run's account, so nothing of the
run ever runs outside them. A run's processes cannot leave: the files are root's.

What each controller enforces (as Slurm's task/cgroup does):
- memory: the run's `resources.memory` (v1 `memory.limit_in_bytes`, and memsw so swap does not
  widen it; v2 `memory.max`, `memory.swap.max = 0`); the OOM killer acts inside the run;
- cpu: `resources.cpu` as a CFS quota (v1 `cpu.cfs_quota_us`; v2 `cpu.max`);
- pids: `LocalExecutor.pids_max` processes and threads;
- devices (v1): every GPU device node the run was not given is denied (`c 195:N`), whatever its
  CUDA_VISIBLE_DEVICES says; the rest stays as the server's (Slurm's "deny what is not yours");
- membership: stopping a run kills every process of its cgroup (v2 `cgroup.kill`, else a v1
  freezer: freeze, kill each, thaw), including those that left its process group with setsid.

Joining costs the run's command one RCU grace period on its way to exec (cgroup v1's
threadgroup lock; the first join only, ~10 ms on a busy 2-core machine, benchmarks/README.md),
so a run joins only the hierarchies with something to do for it.

Where a hierarchy is missing or not writable, `problems` says why, and `capacity.isolation`
reports that control as not enforced. Files are written with os.write: an EACCES must raise,
not vanish at garbage collection.
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

MOUNTINFO = "/proc/self/mountinfo"
OWN_CGROUP = "/proc/self/cgroup"
V1_CONTROLLERS = ("memory", "cpu", "pids", "devices", "freezer")
V2_CONTROLLERS = ("memory", "cpu", "pids")
RUNS_DIR = "gpuplat-runs"
GPU_MAJOR = 195  # /dev/nvidiaN; nvidiactl is 195:255, left allowed as nvidia-smi needs it
CFS_PERIOD_US = 100_000
STALE_SECONDS = 600.0  # an empty run cgroup this old is left over (a start takes milliseconds)


def _write(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def _read(path: str) -> str:
    with open(path, encoding="ascii") as f:
        return f.read()


def _mounts() -> tuple[dict[str, str], str | None]:
    """v1 controller → mount point, and the v2 mount point (or None)."""
    v1: dict[str, str] = {}
    v2: str | None = None
    try:
        lines = _read(MOUNTINFO).splitlines()
    except OSError:
        return v1, v2
    for line in lines:
        left, _, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if len(fields) < 5 or len(tail) < 3:
            continue
        mount, fstype, options = fields[4], tail[0], tail[2].split(",")
        if fstype == "cgroup2" and v2 is None:
            v2 = mount
        elif fstype == "cgroup":
            for controller in V1_CONTROLLERS:
                if controller in options:
                    v1.setdefault(controller, mount)
    return v1, v2


def _own_paths() -> tuple[dict[str, str], str | None]:
    """The server's own cgroup per v1 controller, and in v2."""
    v1: dict[str, str] = {}
    v2: str | None = None
    try:
        lines = _read(OWN_CGROUP).splitlines()
    except OSError:
        return v1, v2
    for line in lines:
        number, controllers, path = line.split(":", 2)
        if number == "0" and controllers == "":
            v2 = path
        for controller in controllers.split(","):
            if controller in V1_CONTROLLERS:
                v1[controller] = path
    return v1, v2


@dataclass
class Cgroups:
    """Where run cgroups are made on this machine, and why a control is missing where it is."""

    v1: dict[str, str] = field(default_factory=dict)  # controller → the runs' parent directory
    v2: str | None = None  # the runs' parent directory in the unified hierarchy
    v2_controllers: frozenset[str] = frozenset()
    problems: dict[str, str] = field(default_factory=dict)  # control → why it is not enforced

    @classmethod
    def probe(cls) -> Cgroups:
        found = cls()
        mounts, v2_mount = _mounts()
        own, v2_own = _own_paths()
        for controller in V1_CONTROLLERS:
            if controller not in mounts or controller not in own:
                continue
            base = os.path.join(mounts[controller] + own[controller].rstrip("/"), RUNS_DIR)
            try:
                os.makedirs(base, exist_ok=True)
                if controller == "memory":
                    with contextlib.suppress(OSError):  # nests limits on old kernels; always on in new ones
                        _write(os.path.join(base, "memory.use_hierarchy"), "1")
            except OSError as exc:
                found.problems.setdefault(controller, f"cannot create {base}: {exc.strerror}")
                continue
            found.v1[controller] = base
        if v2_mount is not None and v2_own is not None:
            found._probe_v2(os.path.join(v2_mount + v2_own.rstrip("/"), RUNS_DIR))
        for control in ("memory", "cpu", "pids"):
            if not found.enforces(control):
                found.problems.setdefault(
                    control, f"this machine offers the server no writable {control} controller (cgroup v1 or v2)"
                )
        if "devices" not in found.v1:
            found.problems.setdefault(
                "devices",
                "no cgroup v1 devices controller here (cgroup v2 device filters need a BPF program, not done yet)",
            )
        if not found.tracks_processes:
            found.problems.setdefault(
                "membership", "no writable cgroup to hold a run's processes: a stop reaches its process group only"
            )
        return found

    def _probe_v2(self, base: str) -> None:
        parent = os.path.dirname(base)
        try:
            os.makedirs(base, exist_ok=True)
        except OSError as exc:
            self.problems.setdefault("membership", f"cannot create {base}: {exc.strerror}")
            return
        self.v2 = base
        try:
            offered = set(_read(os.path.join(parent, "cgroup.controllers")).split())
        except OSError:
            offered = set()
        wanted = [c for c in V2_CONTROLLERS if c in offered and c not in self.v1]
        enabled: set[str] = set()
        for directory in (parent, base):
            for controller in wanted:
                try:
                    _write(os.path.join(directory, "cgroup.subtree_control"), f"+{controller}")
                except OSError as exc:
                    # EBUSY: the server's own cgroup holds processes (v2's no-internal-process rule)
                    self.problems.setdefault(
                        controller, f"cannot delegate the v2 {controller} controller to {base}: {exc.strerror}"
                    )
            try:
                enabled = set(_read(os.path.join(directory, "cgroup.subtree_control")).split())
            except OSError:
                enabled = set()
        self.v2_controllers = frozenset(c for c in wanted if c in enabled)

    # -- what holds here -------------------------------------------------------------------

    def enforces(self, control: str) -> bool:
        if control == "devices":
            return "devices" in self.v1
        if control == "membership":
            return self.tracks_processes
        return control in self.v1 or control in self.v2_controllers

    @property
    def tracks_processes(self) -> bool:
        return self.v2 is not None or "freezer" in self.v1 or "pids" in self.v1

    @property
    def any(self) -> bool:
        return bool(self.v1) or self.v2 is not None

    # -- one run ---------------------------------------------------------------------------

    def _dirs(self, run_id: str) -> list[tuple[str, str]]:
        out = [(c, os.path.join(base, run_id)) for c, base in self.v1.items()]
        if self.v2 is not None:
            out.append(("v2", os.path.join(self.v2, run_id)))
        return out

    def create(
        self,
        run_id: str,
        *,
        memory_bytes: int | None,
        cpu_milli: int | None,
        pids_max: int | None,
        deny_gpu_minors: Iterable[int] = (),
    ) -> list[str]:
        """Make the run's cgroups with its limits; returns the `cgroup.procs` files its command joins.

        Only hierarchies with something to do for this run: memory and cpu where it has a limit,
        devices where a GPU is to be denied, pids (and v2) always: they hold its processes.
        """
        procs: list[str] = []
        deny_gpu_minors = list(deny_gpu_minors)
        needed = {"memory": bool(memory_bytes), "cpu": bool(cpu_milli), "devices": bool(deny_gpu_minors)}
        try:
            for controller, directory in self._dirs(run_id):
                if not needed.get(controller, True):
                    continue
                with contextlib.suppress(FileExistsError):
                    os.mkdir(directory, 0o755)
                self._limit(controller, directory, memory_bytes, cpu_milli, pids_max, deny_gpu_minors)
                procs.append(os.path.join(directory, "cgroup.procs"))
        except OSError:
            self.remove(run_id)
            raise
        return procs

    def _limit(
        self,
        controller: str,
        directory: str,
        memory_bytes: int | None,
        cpu_milli: int | None,
        pids_max: int | None,
        deny_gpu_minors: Iterable[int],
    ) -> None:
        join = os.path.join
        if controller == "memory" and memory_bytes:
            _write(join(directory, "memory.limit_in_bytes"), str(memory_bytes))
            with contextlib.suppress(FileNotFoundError):  # no swap accounting on this kernel
                _write(join(directory, "memory.memsw.limit_in_bytes"), str(memory_bytes))
        elif controller == "cpu" and cpu_milli:
            _write(join(directory, "cpu.cfs_period_us"), str(CFS_PERIOD_US))
            _write(join(directory, "cpu.cfs_quota_us"), str(max(1000, cpu_milli * CFS_PERIOD_US // 1000)))
        elif controller == "pids" and pids_max:
            _write(join(directory, "pids.max"), str(pids_max))
        elif controller == "devices":
            for minor in deny_gpu_minors:
                _write(join(directory, "devices.deny"), f"c {GPU_MAJOR}:{minor} rwm")
        elif controller == "v2":
            if memory_bytes and "memory" in self.v2_controllers:
                _write(join(directory, "memory.max"), str(memory_bytes))
                with contextlib.suppress(FileNotFoundError):
                    _write(join(directory, "memory.swap.max"), "0")
            if cpu_milli and "cpu" in self.v2_controllers:
                _write(join(directory, "cpu.max"), f"{max(1000, cpu_milli * CFS_PERIOD_US // 1000)} {CFS_PERIOD_US}")
            if pids_max and "pids" in self.v2_controllers:
                _write(join(directory, "pids.max"), str(pids_max))

    def procs(self, run_id: str) -> set[int]:
        """Every process in the run's cgroups (none once it has ended and been cleaned)."""
        pids: set[int] = set()
        for _, directory in self._dirs(run_id):
            with contextlib.suppress(OSError, ValueError):
                pids.update(int(p) for p in _read(os.path.join(directory, "cgroup.procs")).split())
        return pids

    def kill(self, run_id: str) -> None:
        """SIGKILL every process of the run, those that left its process group too (one pass, no wait).

        Killed processes leave their cgroup asynchronously: `remove` succeeds once they are gone.
        """
        if self.v2 is not None:
            with contextlib.suppress(OSError):
                _write(os.path.join(self.v2, run_id, "cgroup.kill"), "1")
                return
        freezer = os.path.join(self.v1["freezer"], run_id) if "freezer" in self.v1 else None
        if freezer is not None:  # frozen, nothing can fork between our reading and our killing
            with contextlib.suppress(OSError):
                _write(os.path.join(freezer, "freezer.state"), "FROZEN")
        for pid in self.procs(run_id):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if freezer is not None:  # killed tasks die once thawed
            with contextlib.suppress(OSError):
                _write(os.path.join(freezer, "freezer.state"), "THAWED")

    def remove_empty(self, min_age_seconds: float = STALE_SECONDS) -> None:
        """Remove every run cgroup that holds no process and is older than `min_age_seconds`.

        An ended run's, left by a server that was gone when it ended. A young empty one is a run
        being started (made, its command not yet in it), perhaps by another executor: left alone.
        """
        now = time.time()
        for base in [*self.v1.values(), *([self.v2] if self.v2 else [])]:
            try:
                old = [
                    e.name
                    for e in os.scandir(base)
                    if e.is_dir(follow_symlinks=False)
                    and now - e.stat(follow_symlinks=False).st_mtime > min_age_seconds
                ]
            except OSError:
                continue
            for name in old:
                with contextlib.suppress(OSError):  # EBUSY: a live run's
                    os.rmdir(os.path.join(base, name))

    def remove(self, run_id: str) -> bool:
        """Remove the run's cgroups; False while one still holds a (dying) process."""
        done = True
        for _, directory in self._dirs(run_id):
            try:
                os.rmdir(directory)
            except OSError as exc:
                if exc.errno == errno.EBUSY:
                    done = False
                elif exc.errno != errno.ENOENT:
                    raise
        return done
