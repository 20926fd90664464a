"""Run artifacts on the local filesystem: the reader the service uses, and what code ran.

`LocalArtifactReader` serves files of `<artifacts_root>/<run_id>` (layout: core.artifacts).
Every path is resolved beneath a descriptor of the run's directory, links included, and must
stay inside it: a log or output that is a link to elsewhere is refused, never read, and
listings skip links out.

`capture_code` records what a run executes when it starts: a copy of its script, notebook or
cell under `code/`, and, when the directory is in a git repository, the commit, whether the
tree is dirty and the uncommitted diff (`code/git.diff`).
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import re
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, Protocol

from ..core import artifacts as layout
from ..core.request import Entrypoint
from . import safefs
from .base import ArtifactError, ArtifactReader, LaunchRequest, OutputFile

log = logging.getLogger(__name__)

GIT_TIMEOUT_SECONDS = 5.0
MAX_SNAPSHOT_BYTES = 16 * 1024 * 1024
MAX_DIFF_BYTES = 16 * 1024 * 1024
RUN_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")  # as the API's routes accept them
MAX_NAME_BYTES = 255  # NAME_MAX
MAX_PATH_BYTES = 4096  # PATH_MAX


class Account(Protocol):
    """Whom a run's code is read as: the local executor's `local.users.Account`.

    A protocol because the Kubernetes executor shares this module and must not import the local one.
    """

    @property
    def uid(self) -> int: ...
    @property
    def gid(self) -> int: ...
    @property
    def groups(self) -> tuple[int, ...]: ...
    @property
    def home(self) -> str: ...


class LocalArtifactReader(ArtifactReader):
    """Artifacts in directories on this machine (or a volume mounted here).

    Every open starts from a descriptor of the run's directory and resolves the path beneath
    it (executors/safefs.py): a link is followed only where it stays inside the run, a FIFO
    or device is never read, and nothing a run swaps in while we read leads us out.
    """

    def __init__(self, artifacts_root: str) -> None:
        self.root = artifacts_root

    def run_root(self, run_id: str) -> Path:
        if not RUN_ID.fullmatch(run_id):
            raise ArtifactError(f"invalid run id {run_id[:80]!r}", "run ids are 1-64 letters, digits, - and _")
        return Path(self.root).resolve() / run_id

    def _check(self, rel: str) -> None:
        if "\0" in rel:
            raise ArtifactError(f"path {rel!r} contains a NUL byte", "use a path listed by outputs")
        # Longer names are refused by the OS itself (ENAMETOOLONG), which would surface as a 500.
        if len(rel.encode()) > MAX_PATH_BYTES or any(len(p.encode()) > MAX_NAME_BYTES for p in rel.split("/")):
            raise ArtifactError(
                f"path {rel[:80]!r}{'...' if len(rel) > 80 else ''} is too long",
                f"at most {MAX_NAME_BYTES} bytes a name and {MAX_PATH_BYTES} in all; use a path listed by outputs",
            )

    @contextlib.contextmanager
    def _run_dir(self, run_id: str) -> Iterator[int | None]:
        """A descriptor of the run's directory (None when it does not exist); never a link."""
        root = self.run_root(run_id)
        try:
            fd: int | None = safefs.open_dir(str(root))
        except FileNotFoundError:
            fd = None
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                raise ArtifactError(f"the directory of run {run_id} is not a directory", "") from None
            raise
        try:
            yield fd
        finally:
            if fd is not None:
                os.close(fd)

    def _open(self, run_id: str, rel: str, flags: int) -> int:
        """`rel` opened beneath the run's directory; FileNotFoundError, or ArtifactError for a way out."""
        self._check(rel)
        rel = rel.strip("/") if not rel.startswith("/") else rel
        with self._run_dir(run_id) as dirfd:
            if dirfd is None:
                raise FileNotFoundError(rel)
            if not rel:
                return os.dup(dirfd)
            try:
                fd = safefs.open_beneath(dirfd, rel, flags, links_inside=True, root=os.path.join(self.root, run_id))
            except safefs.UnsafePath as exc:
                raise ArtifactError(
                    f"path {rel!r} leaves the directory of run {run_id}", "use a path listed by outputs"
                ) from exc
            except NotADirectoryError:
                raise FileNotFoundError(rel) from None
        return fd

    def _open_file(self, run_id: str, rel: str) -> int | None:
        """A read descriptor of the regular file `rel`, or None (missing, or a FIFO, device or directory)."""
        try:
            fd = self._open(run_id, rel, safefs.READ_FLAGS)
        except FileNotFoundError:
            return None
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            return None
        os.set_blocking(fd, True)
        return fd

    def size(self, run_id: str, rel: str) -> int:
        fd = self._open_file(run_id, rel)
        if fd is None:
            return -1
        try:
            return os.fstat(fd).st_size
        finally:
            os.close(fd)

    def read(self, run_id: str, rel: str, offset: int = 0, limit: int = -1) -> bytes:
        fd = self._open_file(run_id, rel)
        if fd is None:
            return b""
        try:
            size = os.fstat(fd).st_size
            if offset >= size:
                return b""  # past the end: nothing (seeking that far can fail: EINVAL beyond the fs's max size)
            return os.pread(fd, size - offset if limit < 0 else min(limit, size - offset), offset)
        finally:
            os.close(fd)

    def is_dir(self, run_id: str, rel: str) -> bool:
        try:
            fd = self._open(run_id, rel, os.O_RDONLY | os.O_DIRECTORY)
        except FileNotFoundError:
            return False
        os.close(fd)
        return True

    def list_outputs(self, run_id: str, rel: str = "") -> list[OutputFile]:
        try:
            start = self._open(run_id, rel, os.O_RDONLY | os.O_DIRECTORY)
        except FileNotFoundError:
            return []
        prefix = rel.strip("/")
        out: list[OutputFile] = []
        try:
            for dirpath, dirnames, filenames, dirfd in os.fwalk(".", dir_fd=start):
                here = dirpath[2:] if dirpath.startswith("./") else ""
                base = "/".join(p for p in (prefix, here) if p)
                dirnames[:] = sorted(d for d in dirnames if not layout.is_internal(f"{base}/{d}".lstrip("/")))
                for name in sorted(filenames):
                    relpath = f"{base}/{name}".lstrip("/")
                    if layout.is_internal(relpath):
                        continue
                    st = self._stat_output(run_id, dirfd, name, relpath)
                    if st is not None:
                        out.append(OutputFile(relpath, st.st_size, st.st_mtime))
        finally:
            os.close(start)
        out.sort(key=lambda f: f.path)
        return out

    def _stat_output(self, run_id: str, dirfd: int, name: str, relpath: str) -> os.stat_result | None:
        try:
            st = os.stat(name, dir_fd=dirfd, follow_symlinks=False)
            if stat.S_ISLNK(st.st_mode):  # listed only when it resolves to a file inside the run
                fd = self._open_file(run_id, relpath)
                if fd is None:
                    return None
                try:
                    st = os.fstat(fd)
                finally:
                    os.close(fd)
        except (OSError, ArtifactError):
            return None  # a link out of the run: neither followed nor sized
        return st if stat.S_ISREG(st.st_mode) else None

    def open_output(self, run_id: str, rel: str) -> IO[bytes]:
        fd = self._open_file(run_id, rel)
        if fd is None:
            raise FileNotFoundError(rel)
        return os.fdopen(fd, "rb")


# -- what code ran --------------------------------------------------------------------------


def _write_in_run(run_directory: str, rel: str, data: bytes) -> None:
    """Write a file of the run's record beneath its directory (the run may have put links there)."""
    os.makedirs(run_directory, exist_ok=True)
    dirfd = safefs.open_dir(run_directory)
    try:
        safefs.write_atomic(dirfd, rel, data, durable=False)
    finally:
        os.close(dirfd)


def write_cell(entrypoint: Entrypoint, run_directory: str) -> str:
    """Write a cell's code to the run's `code/cell.py`; returns its absolute path."""
    _write_in_run(run_directory, layout.CELL, (entrypoint.code or "").encode())
    return layout.in_run(run_directory, layout.CELL)


def _as(account: Account | None) -> dict[str, Any]:
    """subprocess arguments that run a reader as the run's account (run_as = user): it sees what they may."""
    if account is None:
        return {"env": {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_OPTIONAL_LOCKS": "0"}}
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": account.home, "LANG": "C.UTF-8"}
    env.update(GIT_TERMINAL_PROMPT="0", GIT_OPTIONAL_LOCKS="0")
    return {"user": account.uid, "group": account.gid, "extra_groups": list(account.groups), "env": env}


def _git(cwd: str, *args: str, account: Account | None = None) -> str | None:
    try:
        done = subprocess.run(
            ["git", "-C", cwd, *args],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=GIT_TIMEOUT_SECONDS,
            check=False,
            **_as(account),
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        log.info("gpuplat: git %s in %s: %s", args[0], cwd, exc)
        return None
    if done.returncode != 0:
        return None
    return done.stdout.decode("utf-8", "replace")


def capture_git(directory: str, run_directory: str, account: Account | None = None) -> dict[str, Any] | None:
    """The commit of the repository holding `directory`, whether it is dirty, and the diff saved in the run."""
    commit = _git(directory, "rev-parse", "--verify", "HEAD", account=account)
    if commit is None:
        return None
    status = _git(directory, "status", "--porcelain", "--untracked-files=no", account=account)
    dirty = bool(status and status.strip())
    diff_path = None
    if dirty:
        diff = _git(directory, "diff", "HEAD", "--no-color", "--no-ext-diff", account=account)
        if diff:
            _write_in_run(run_directory, layout.GIT_DIFF, diff[:MAX_DIFF_BYTES].encode())
            diff_path = layout.GIT_DIFF
    return {"commit": commit.strip(), "dirty": dirty, "diff_path": diff_path}


def _read_source(source: str, account: Account | None) -> bytes | None:
    """The submitted file, read as whoever runs it: a run account gets no file it could not read itself."""
    if account is None:
        try:
            with open(source, "rb") as f:
                return f.read(MAX_SNAPSHOT_BYTES + 1)
        except OSError:
            return None
    try:
        done = subprocess.run(
            ["head", "-c", str(MAX_SNAPSHOT_BYTES + 1), "--", source],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=GIT_TIMEOUT_SECONDS,
            check=False,
            **_as(account),
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def _snapshot(source: str, run_directory: str, account: Account | None) -> str | None:
    try:
        st = os.stat(source)
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_SNAPSHOT_BYTES:
        return None
    data = _read_source(source, account)
    if data is None or len(data) > MAX_SNAPSHOT_BYTES:
        return None
    rel = layout.snapshot_path(source)
    try:
        _write_in_run(run_directory, rel, data)
    except OSError as exc:
        log.warning("gpuplat: cannot snapshot %s: %s", source, exc)
        return None
    return rel


def capture_code(
    entrypoint: Entrypoint, working_dir: str | None, run_directory: str, account: Account | None = None
) -> dict[str, Any] | None:
    """What the run executes, kept in its directory: `{snapshot, git}`, or None when nothing is known.

    `snapshot` is the layout path of the copied script, notebook or cell (a cell's `code/cell.py`
    is written by the executor); `git` is `{commit, dirty, diff_path}` when the run's directory
    (or the script's, without one) is in a git repository, else None. With an `account` the
    files and git are read as that account.
    """
    snapshot = None
    if entrypoint.kind == "cell":
        snapshot = layout.CELL
    else:
        for name in entrypoint.files():
            source = name if os.path.isabs(name) else os.path.join(working_dir or run_directory, name)
            snapshot = _snapshot(source, run_directory, account)
            if snapshot:
                break
    where = working_dir
    if where is None and entrypoint.path:
        where = os.path.dirname(entrypoint.path)
    git = capture_git(where, run_directory, account) if where and os.path.isdir(where) else None
    if snapshot is None and git is None:
        return None
    return {"snapshot": snapshot, "git": git}


class FilesystemArtifacts:
    """Executor mix-in: runs write artifacts where this process reads them (local disk, or a volume mounted here)."""

    def artifact_reader(self, artifacts_root: str) -> ArtifactReader:
        return LocalArtifactReader(artifacts_root)

    def capture_code(self, req: LaunchRequest) -> dict[str, Any] | None:
        return capture_code(req.entrypoint, req.working_dir, req.workdir)
