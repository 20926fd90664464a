"""The run's directory on the artifact volume, as the control plane prepares, reads and writes it.

A run's pod mounts that directory read-write, so whatever is in it may be the run's doing:
a link where `output.log` was (to `/etc/...`, to another run's directory), `.gpuplat` made a
link to `/`, a FIFO that would hang a reader. Every open here goes through
`executors/safefs.py`: the artifacts root is the platform's (opened as configured), the run's
directory is entered without following a link, and everything below it is opened beneath
that descriptor, links refused, FIFOs and devices refused, never waited on. Blocking I/O:
the executor calls these from threads.

`prepare` makes the layout before the Job exists: `.gpuplat/` and `outputs/` (given to the
runs' uid when the control plane is root; otherwise both run as the same uid, as
deploy/kubernetes has it), and `code/`, the control plane's, with the code the pod executes
in it: a cell's `cell.py`, a script's or notebook's snapshot (mounted read-only in the pod).
"""

from __future__ import annotations

import contextlib
import os
import posixpath
from collections.abc import Iterator

from ...core import artifacts as layout
from .. import safefs
from ..base import ExecutorError, LaunchRequest
from .manifests import code_path

ROOT_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
MAX_CODE_BYTES = 16 * 1024 * 1024  # as executors/artifacts.py snapshots


@contextlib.contextmanager
def run_dir(workdir: str) -> Iterator[int]:
    """A descriptor of the run's directory `<artifacts_root>/<run id>`, refusing a link at `<run id>`."""
    root, name = posixpath.split(posixpath.normpath(workdir))
    root_fd = os.open(root or "/", ROOT_FLAGS)  # the platform's own directory, as configured
    try:
        fd = safefs.walk(root_fd, safefs.parts(name))
    finally:
        os.close(root_fd)
    try:
        yield fd
    finally:
        os.close(fd)


def _owned(fd: int, owner: tuple[int, int] | None) -> None:
    if owner is not None and os.geteuid() == 0:
        os.fchown(fd, *owner)


def prepare(req: LaunchRequest, owner: tuple[int, int] | None = None) -> None:
    """The run's directory with `.gpuplat/`, `outputs/` and `code/` (the code it runs in it); ExecutorError if not."""
    root, name = posixpath.split(posixpath.normpath(req.workdir))
    try:
        os.makedirs(root or "/", exist_ok=True)  # the artifacts root: the platform's (the server makes it too)
        root_fd = os.open(root or "/", ROOT_FLAGS)
        try:
            run_fd = safefs.makedirs(root_fd, name)
        finally:
            os.close(root_fd)
        try:
            _owned(run_fd, owner)
            for sub, theirs in ((layout.STATE_DIR, True), (layout.OUTPUTS_DIR, True), (layout.CODE_DIR, False)):
                fd = safefs.makedirs(run_fd, sub)
                try:
                    _owned(fd, owner if theirs else None)
                finally:
                    os.close(fd)
            _deliver_code(req, run_fd)
        finally:
            os.close(run_fd)
    except ExecutorError:
        raise
    except OSError as exc:
        raise ExecutorError(f"run {req.run_id}: cannot prepare {req.workdir}: {exc.strerror or exc}") from exc


def _deliver_code(req: LaunchRequest, run_fd: int) -> None:
    """The file the pod executes, in `code/`: a cell's source, or the script's snapshot (copied here if missing)."""
    entry = req.entrypoint
    rel = code_path(req)
    if rel is None:
        return
    if entry.kind == "cell":
        safefs.write_atomic(run_fd, rel, (entry.code or "").encode())
        return
    try:
        os.close(safefs.open_read(run_fd, rel))
        return  # the snapshot capture_code made
    except FileNotFoundError:
        pass
    source = str(entry.path)
    try:
        with open(source, "rb") as f:
            data = f.read(MAX_CODE_BYTES + 1)
    except OSError as exc:
        raise ExecutorError(
            f"run {req.run_id}: {source} cannot be read to copy it into the run ({exc.strerror or exc}); a pod sees "
            "only its run's directory"
        ) from exc
    if len(data) > MAX_CODE_BYTES:
        raise ExecutorError(
            f"run {req.run_id}: {source} is larger than {MAX_CODE_BYTES // (1024 * 1024)} MiB: too large to copy into "
            "the run's code/, the only place its pod can see it; put it in the image or on a connection's volume"
        )
    safefs.write_atomic(run_fd, rel, data)


def append(workdir: str, rel: str, data: bytes) -> None:
    """Append to a file of the run's directory (created if missing), refusing links, FIFOs and hard links."""
    with run_dir(workdir) as fd:
        safefs.append(fd, rel, data)


def write(workdir: str, rel: str, data: bytes) -> None:
    """Replace a file of the run's directory (a fresh file renamed over whatever was there)."""
    with run_dir(workdir) as fd:
        safefs.write_atomic(fd, rel, data, durable=False)


def read_text(workdir: str, rel: str) -> str | None:
    """A small text file of the run's directory, None when missing, refused or too large."""
    try:
        with run_dir(workdir) as fd:
            return safefs.read_text(fd, rel)
    except OSError:
        return None


def read_tail(workdir: str, rel: str, limit: int) -> bytes | None:
    """The last `limit` bytes of a regular file of the run's directory, None when missing or refused."""
    try:
        with run_dir(workdir) as fd:
            f = safefs.open_read(fd, rel)
            try:
                size = os.fstat(f).st_size
                start = max(0, size - limit)
                return os.pread(f, size - start, start)
            finally:
                os.close(f)
    except OSError:
        return None
