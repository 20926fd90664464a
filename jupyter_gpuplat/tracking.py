"""Tracking inside runs: metrics, params and outputs.

    from jupyter_gpuplat import tracking
    tracking.log_params(lr=3e-4, batch=64)
    for step in range(1000):
        tracking.log_metrics(step=step, loss=loss, acc=acc)
    tracking.log_output("model.pt")

Every call appends one line to a file in the run's artifact directory with a
single unbuffered write, so nothing logged is lost if the run is killed
(SIGKILL included) or the control plane is down; the control plane indexes the
files incrementally. Metrics go to `.gpuplat/metrics.csv` (`step,time,values...`
lines under `#k ["names",...]` lines), params and outputs to JSON lines.
Outside a run it writes to ./gpuplat-local/ and says so once.
Imports stay light: this runs inside training processes.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from .core.artifacts import METRICS_FILE, OUTPUTS_DIR, OUTPUTS_FILE, PARAMS_FILE, STATE_DIR

__all__ = ["artifacts_dir", "log_metrics", "log_output", "log_params", "params", "run_id"]


class _Tracker:
    def __init__(self) -> None:
        self._fds: dict[str, int] = {}
        self._step = -1
        self._root: Path | None = None
        self._names: tuple[str, ...] | None = None  # the names of the last metrics line
        self._metrics_fd: int | None = None

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

    def log_metrics(self, step: int | None, values: dict[str, Any]) -> None:
        if step is None:
            step = self._step + 1
        elif step.__class__ is not int:
            raise TypeError(f"step must be an int, got {type(step).__name__}")
        self._step = step
        # The hot path of a training loop: one CSV line `step,time,v1,v2,...`, preceded by a
        # `#k ["name1","name2",...]` line whenever the names change. repr() of a float
        # round-trips exactly; nan/inf are written as such.
        names = tuple(values)
        line = f"{step},{time.time():.3f},{','.join(map(repr, map(float, values.values())))}\n"
        if names != self._names:
            if any(not isinstance(k, str) for k in names):
                raise TypeError("metric names must be strings")
            line = "#k " + json.dumps(list(names)) + "\n" + line
            self._names = names
        fd = self._metrics_fd
        if fd is None:
            fd = self._metrics_fd = self._fd(METRICS_FILE)
        os.write(fd, line.encode())  # one write(): the OS has it even if the process is killed next

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
_log_metrics = _tracker.log_metrics


def log_metrics(step: int | None = None, **values: Any) -> None:
    """Record metric values at a step (default: the previous step + 1)."""
    _log_metrics(step, values)


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
