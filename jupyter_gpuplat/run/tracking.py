"""Tracking inside runs: metrics, params and outputs.

    from jupyter_gpuplat import tracking
    tracking.log_params(lr=3e-4, batch=64)
    for step in range(1000):
        tracking.log_metrics(step=step, loss=loss, acc=acc)
    tracking.log_output("model.pt")

Nothing a call recorded is lost if the run is killed right after it returns (SIGKILL
included) or the control plane is down; the control plane indexes the files incrementally.
Metrics go to `.gpuplat/metrics.bin`, a log the run maps into memory and copies records
into, with no system call per point (format: core.metric_format). A process that cannot
have that log (another process of the run writes it, or `GPUPLAT_METRICS_FORMAT=csv`)
appends one line per call to `.gpuplat/metrics.csv` with one unbuffered write. Params and
outputs go to JSON lines, one write() per record.
Outside a run it writes to ./gpuplat-local/ and says so once.
Imports stay light: this runs inside training processes.
"""

from __future__ import annotations

import _thread
import atexit
import errno
import json
import os
import shutil
import struct
import sys
import time
from pathlib import Path
from typing import Any

from ..core import metric_format as fmt
from ..core.artifacts import METRICS_FILE, METRICS_LOG_FILE, OUTPUTS_DIR, OUTPUTS_FILE, PARAMS_FILE, STATE_DIR

try:  # the log needs both; without them (not POSIX) metrics go to metrics.csv
    import fcntl
    import mmap
except ImportError:  # pragma: no cover - Windows
    fcntl = mmap = None  # type: ignore[assignment]

# The indexer may read the log while the run writes it: it trusts a record once the committed
# length covers it, which needs stores to become visible in program order. x86-64 keeps that
# order; weakly ordered CPUs (ARM, POWER) may not, and big-endian ones read the format wrongly:
# there the text metrics.csv is used.
_STORES_IN_ORDER = sys.byteorder == "little" and os.uname().machine in ("x86_64", "AMD64", "i686", "i386")

__all__ = ["artifacts_dir", "log_metrics", "log_output", "log_params", "params", "run_id"]

_time = time.time
LOCK_WAIT_SECONDS = 1.0  # a call holds the lock for microseconds (a growth: one fallocate)


class _Busy(Exception):
    """The run's metrics log is another process's: this one writes metrics.csv."""


def _reserve(fd: int, size: int) -> None:
    # Real blocks, not a sparse hole: a full disk fails here (OSError), not later as a SIGBUS.
    allocate = getattr(os, "posix_fallocate", None)
    if allocate is not None:
        try:
            allocate(fd, 0, size)
            return
        except OSError as exc:
            if exc.errno not in (errno.EOPNOTSUPP, errno.EINVAL):  # this filesystem cannot: fill instead
                raise
    have = os.fstat(fd).st_size
    block = bytes(1 << 20)
    while have < size:
        have += os.pwrite(fd, block[: size - have], have)


class _MetricLog:
    """This process's mapping of the run's metrics log (format: core.metric_format)."""

    def __init__(self, path: Path) -> None:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # one writer per log
            except BlockingIOError:
                raise _Busy(str(path)) from None
            size = os.fstat(fd).st_size
            head = os.pread(fd, fmt.HEADER_BYTES, 0)
            end = fmt.committed(head, size)
            if end is None:
                if head.strip(b"\0"):  # another version's log, or damage: leave it, write text
                    raise ValueError(f"{path.name} is not a metrics log this version writes")
                os.ftruncate(fd, 0)  # new, or its creator died before the header (and any record)
                _reserve(fd, fmt.INITIAL_BYTES)
                os.pwrite(fd, fmt.header(), 0)
                size, end = fmt.INITIAL_BYTES, fmt.HEADER_BYTES
            elif size < end + fmt.INITIAL_BYTES:
                size = fmt.next_capacity(size, end + fmt.INITIAL_BYTES)
                _reserve(fd, size)
            self.fd, self.capacity, self.end = fd, size, end
            self.mm = mmap.mmap(fd, size)
            self.words = memoryview(self.mm).cast("q")
        except BaseException:
            os.close(fd)
            raise
        self.names_at: dict[tuple[str, ...], int] = {}  # names records this process wrote

    def grow(self, needed: int) -> None:
        size = fmt.next_capacity(self.capacity, needed)
        _reserve(self.fd, size)
        mm = mmap.mmap(self.fd, size)  # the same pages: what the old mapping holds is in the file
        self.words.release()
        self.mm.close()
        self.mm, self.words, self.capacity = mm, memoryview(mm).cast("q"), size

    def append(self, record: bytes) -> int:
        """Add a record; returns its offset."""
        at = self.end
        if at + len(record) > self.capacity:
            self.grow(at + len(record))
        self.mm[at : at + len(record)] = record
        self.commit(at + len(record))
        return at

    def commit(self, end: int) -> None:
        self.words[fmt.COMMITTED_WORD] = end  # one aligned 8-byte store: readers see it whole
        self.end = end

    def close(self, *, truncate: bool) -> None:
        self.words.release()
        self.mm.close()
        if truncate:
            os.ftruncate(self.fd, self.end)  # give back the reserved tail; a later writer grows it again
        os.close(self.fd)  # releases the flock


class _Tracker:
    def __init__(self) -> None:
        self._fds: dict[str, int] = {}
        self._step = -1
        self._root: Path | None = None
        self._names: tuple[str, ...] | None = None  # the names of the last metrics call
        self._metrics_fd: int | None = None
        self._log: _MetricLog | None = None
        self._log_tried = False
        self._pack: Any = None  # the point layout of the current names (struct.Struct.pack_into)
        self._size = 0
        self._names_at = 0
        self._lock = _thread.allocate_lock()  # threads of one run log into one mapping

    @property
    def root(self) -> Path:
        if self._root is None:
            env = os.environ.get("GPUPLAT_ARTIFACTS_DIR")
            if env:
                self._root = Path(env)
            else:
                self._root = Path.cwd() / "gpuplat-local" / time.strftime("%Y%m%d-%H%M%S")
                print(f"jupyter_gpuplat.tracking: not inside a run; writing to {self._root}", file=sys.stderr)
            (self._root / STATE_DIR).mkdir(parents=True, exist_ok=True)
        return self._root

    def _append(self, name: str, record: dict[str, Any]) -> None:
        self._write(name, (json.dumps(record, separators=(",", ":"), default=str) + "\n").encode())

    def _fd(self, name: str) -> int:
        fd = self._fds.get(name)
        if fd is None:
            fd = self._fds[name] = os.open(self.root / STATE_DIR / name, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        return fd

    def _write(self, name: str, data: bytes) -> None:
        os.write(self._fd(name), data)  # one write() per record: the OS has it even if the process is killed next

    def _open_log(self) -> _MetricLog | None:
        self._log_tried = True
        if mmap is None or not _STORES_IN_ORDER or os.environ.get("GPUPLAT_METRICS_FORMAT") == "csv":
            return None
        try:
            self._log = _MetricLog(self.root / STATE_DIR / METRICS_LOG_FILE)
        except _Busy:
            return None  # another process of this run has the log
        except (OSError, ValueError) as exc:
            print(f"jupyter_gpuplat.tracking: metrics go to {METRICS_FILE} ({exc})", file=sys.stderr)
            return None
        return self._log

    def _use_names(self, names: tuple[str, ...]) -> None:
        if any(not isinstance(k, str) for k in names):
            raise TypeError("metric names must be strings")
        log = self._log if self._log_tried else self._open_log()
        if log is not None:
            at = log.names_at.get(names)
            if at is None:
                at = log.names_at[names] = log.append(fmt.names_record(names))
            self._names_at, self._pack, self._size = (
                at,
                fmt.point_struct(len(names)).pack_into,
                fmt.point_bytes(len(names)),
            )
        self._names = names

    def log_metrics(self, step: int | None = None, **values: Any) -> None:
        """Record metric values at a step (default: the previous step + 1)."""
        if step is None:
            step = self._step + 1
        elif step.__class__ is not int:
            raise TypeError(f"step must be an int, got {type(step).__name__}")
        names = tuple(values)
        lock = self._lock
        if not (lock.acquire(False) or lock.acquire(timeout=LOCK_WAIT_SECONDS)):
            # Only a signal handler interrupting this thread's own call waits that long:
            # a text line never blocks, and is indexed like the rest.
            self._log_line(step, values, names)
            return
        try:
            if names != self._names:
                self._use_names(names)
            log = self._log
            if log is None:
                self._log_line(step, values, names)
            else:
                # The hot path of a training loop: copy one record into the mapping, then commit it.
                at = log.end
                end = at + self._size
                if end > log.capacity:
                    log.grow(end)
                try:
                    self._pack(log.mm, at, self._names_at, step, _time(), *values.values())
                except struct.error:
                    self._pack_slow(log, at, step, values)
                log.words[1] = end  # commit (fmt.COMMITTED_WORD): one aligned 8-byte store
                log.end = end
            self._step = step
        finally:
            lock.release()

    def _pack_slow(self, log: _MetricLog, at: int, step: int, values: dict[str, Any]) -> None:
        floats = [float(v) for v in values.values()]  # what float() takes ("0.5", Decimal) as before
        if not -(1 << 63) <= step < 1 << 63:
            raise ValueError(f"step {step} does not fit in 64 bits")
        self._pack(log.mm, at, self._names_at, step, _time(), *floats)

    def _log_line(self, step: int, values: dict[str, Any], names: tuple[str, ...]) -> None:
        # One CSV line `step,time,v1,v2,...`, preceded by a `#k ["name1","name2",...]` line
        # whenever the names change. repr() of a float round-trips exactly; nan/inf as such.
        line = f"{step},{_time():.3f},{','.join(map(repr, map(float, values.values())))}\n"
        if names != self._line_names:
            line = "#k " + json.dumps(list(names)) + "\n" + line
            self._line_names = names
        fd = self._metrics_fd
        if fd is None:
            fd = self._metrics_fd = self._fd(METRICS_FILE)
        os.write(fd, line.encode())  # one write(): the OS has it even if the process is killed next

    _line_names: tuple[str, ...] | None = None

    def close_log(self) -> None:
        """At exit: unmap the log and give back its reserved tail (a kill skips this, losing nothing)."""
        with self._lock:  # a thread still logging waits, then opens the log again
            if self._log is not None:
                self._log.close(truncate=True)
            self._log, self._log_tried, self._names = None, False, None

    def after_fork(self) -> None:
        # The child shares the parent's mapping and offsets: it must not write through them.
        # Its own open of the log finds the parent's lock and falls back to metrics.csv.
        self._lock = _thread.allocate_lock()
        if self._log is not None:
            self._log.close(truncate=False)
        self._log, self._log_tried, self._names, self._line_names = None, False, None, None

    def log_params(self, values: dict[str, Any]) -> None:
        self._append(PARAMS_FILE, values)

    def log_output(self, path: str | os.PathLike[str], name: str | None) -> Path:
        src = Path(path)
        if not src.exists():
            raise FileNotFoundError(f"log_output: {src} does not exist")
        dest = self.root / OUTPUTS_DIR / (name or src.name)
        if src.resolve() != dest.resolve():
            dest.parent.mkdir(parents=True, exist_ok=True)
            tmp = dest.with_name(f".{dest.name}.tmp-{os.getpid()}")
            if src.is_dir():
                shutil.copytree(src, tmp)
            else:
                shutil.copy2(src, tmp)
            if dest.is_dir():
                shutil.rmtree(dest)
            os.replace(tmp, dest)  # readers see the old output or the whole new one
        self._append(OUTPUTS_FILE, {"name": str(dest.relative_to(self.root)), "t": round(time.time(), 3)})
        return dest


_tracker = _Tracker()
log_metrics = _tracker.log_metrics  # the method itself: one call frame on a training loop's hot path
atexit.register(_tracker.close_log)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_tracker.after_fork)


def log_params(**values: Any) -> None:
    """Record params of this run (hyper-parameters, data versions); later calls override keys."""
    _tracker.log_params(values)


def log_output(path: str | os.PathLike[str], name: str | None = None) -> Path:
    """Keep a file or directory as an output of this run (copied atomically into outputs/)."""
    return _tracker.log_output(path, name)


def params() -> dict[str, Any]:
    """The params this run was submitted with (`%%gpu_submit --param k=v`, `params={...}`)."""
    raw = os.environ.get("GPUPLAT_PARAMS")
    return dict(json.loads(raw)) if raw else {}


def run_id() -> str | None:
    return os.environ.get("GPUPLAT_RUN_ID")


def artifacts_dir() -> Path:
    return _tracker.root
