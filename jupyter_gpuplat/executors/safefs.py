"""Opening files inside a directory a run can write, without following anything the run planted.

A run is untrusted code, and its artifact directory is its own: at any moment it may replace a
file the platform reads or writes there with a symbolic link (to the store, a token file,
another team's run), a FIFO (a read that never returns), a hard link, or swap a directory for a
link. The platform (root, when runs run as their users) therefore never opens a path there by
name. Every open here starts from a directory descriptor and resolves the rest beneath it:

- no link followed: `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)` where
  the kernel has it (Linux >= 5.6), else a walk, one component at a time, each opened with
  `O_NOFOLLOW` relative to the last;
- links that stay inside (served outputs, where the caller asks): resolved here, component by
  component, with readlinkat, every open O_NOFOLLOW.

Reads are non-blocking opens of regular files only (a planted FIFO or device is refused, not
read); writes refuse a file with more than one link; atomic writes go through a fresh temporary
name (`O_EXCL`) and `renameat`, which replaces a planted link instead of writing through it.

Stdlib only, and `ctypes` only on first use of openat2: the local launcher (run by path,
never importing jupyter_gpuplat) imports this file beside it.
"""

from __future__ import annotations

import errno
import os
import stat

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
MAX_JSON_BYTES = 1 << 20

_RESOLVE_NO_MAGICLINKS = 0x02
_RESOLVE_NO_SYMLINKS = 0x04
_RESOLVE_BENEATH = 0x08
_SYS_OPENAT2 = {"x86_64": 437, "aarch64": 437}
_openat2: list[object] = []  # [callable] once probed, [None] where the kernel lacks it


class UnsafePath(OSError):
    """A path the platform refuses to open in a run's directory (absolute, '..', a link, not a file)."""


def parts(rel: str) -> list[str]:
    """The components of a relative path; refuses '', '.', '..', absolute paths and NUL."""
    names = rel.split("/")
    if not rel or rel.startswith("/") or "\0" in rel or any(p in ("", ".", "..") for p in names):
        raise UnsafePath(errno.EINVAL, f"refusing path {rel!r}: must be relative, without '.', '..' or '//'")
    return names


def open_dir(path: str) -> int:
    """A descriptor of the directory at `path`, refusing a link as its last component.

    For a run's own directory: its parent (the artifacts root) is the platform's, so only the
    last component can have been swapped by a run.
    """
    return os.open(path, DIR_FLAGS)


def _probe_openat2() -> object:
    if _openat2:
        return _openat2[0]
    found: object = None
    number = _SYS_OPENAT2.get(os.uname().machine)
    if number is not None:
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            syscall = libc.syscall
            syscall.restype = ctypes.c_long

            def call(dirfd: int, rel: str, flags: int, mode: int, resolve: int) -> int:
                how = (ctypes.c_uint64 * 3)(flags, mode, resolve)
                fd = syscall(number, dirfd, os.fsencode(rel), how, ctypes.sizeof(how))
                if fd < 0:
                    err = ctypes.get_errno()
                    raise OSError(err, os.strerror(err), rel)
                return int(fd)

            probe = call(os.open("/", DIR_FLAGS), ".", DIR_FLAGS, 0, _RESOLVE_BENEATH)
            os.close(probe)
            found = call
        except (OSError, AttributeError, ImportError):
            found = None  # ENOSYS (old kernel), seccomp, no ctypes: walk instead
    _openat2.append(found)
    return found


def open_beneath(
    dirfd: int, rel: str, flags: int, mode: int = 0o600, *, links_inside: bool = False, root: str | None = None
) -> int:
    """Open `rel` beneath `dirfd`, never leaving it and never following a link out.

    `links_inside=True` lets symbolic links resolve where they stay beneath `dirfd` (served
    outputs: `latest -> ckpt-100`); an absolute link counts as inside when it names a path under
    `root`, the directory `dirfd` is (as the run sees it). By default no link is followed.
    """
    names = parts(rel)
    flags |= os.O_CLOEXEC | os.O_NOFOLLOW
    if links_inside:
        return _resolve(dirfd, names, flags, mode, root)
    call = _probe_openat2()
    if call is not None:
        resolve = _RESOLVE_BENEATH | _RESOLVE_NO_MAGICLINKS | _RESOLVE_NO_SYMLINKS
        try:  # openat2 refuses a mode without O_CREAT
            return call(dirfd, rel, flags, mode if flags & os.O_CREAT else 0, resolve)  # type: ignore[operator]
        except OSError as exc:
            if exc.errno in (errno.EXDEV, errno.ELOOP):
                raise UnsafePath(exc.errno, f"refusing {rel!r}: it leads through a link", rel) from None
            raise
    fd = walk(dirfd, names[:-1])
    try:
        return os.open(names[-1], flags, mode, dir_fd=fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafePath(exc.errno, f"refusing {rel!r}: it is a link", rel) from None
        raise
    finally:
        os.close(fd)


MAX_LINKS = 40  # as the kernel's own limit


def _resolve(dirfd: int, names: list[str], flags: int, mode: int, root: str | None) -> int:
    """Resolve links ourselves, one component at a time, each read with readlinkat, never by the kernel.

    A component swapped for a link between our look and our open fails the O_NOFOLLOW open:
    refused, never followed.
    """
    stack = [os.dup(dirfd)]
    pending = list(names)
    hops = 0
    roots = {r.rstrip("/") for r in (root, os.path.realpath(root) if root else None) if r}
    try:
        while pending:
            name = pending.pop(0)
            if name in ("", "."):
                continue
            if name == "..":
                if len(stack) == 1:
                    raise UnsafePath(errno.EXDEV, "refusing a link that leads out of the directory")
                os.close(stack.pop())
                continue
            st = os.stat(name, dir_fd=stack[-1], follow_symlinks=False)
            if stat.S_ISLNK(st.st_mode):
                hops += 1
                if hops > MAX_LINKS:
                    raise UnsafePath(errno.ELOOP, "too many links")
                target = os.readlink(name, dir_fd=stack[-1])
                if target.startswith("/"):
                    inside = next((r for r in roots if target == r or target.startswith(r + "/")), None)
                    if inside is None:
                        raise UnsafePath(errno.EXDEV, f"refusing {name!r}: it links out of the directory")
                    target = target[len(inside) :]
                    while len(stack) > 1:
                        os.close(stack.pop())
                pending = target.split("/") + pending
                continue
            if pending and any(p not in ("", ".") for p in pending):
                stack.append(os.open(name, DIR_FLAGS, dir_fd=stack[-1]))
                continue
            return os.open(name, flags, mode, dir_fd=stack[-1])
        return os.open(".", flags & ~os.O_NOFOLLOW, mode, dir_fd=stack[-1])  # it named the directory itself
    except OSError as exc:
        if exc.errno == errno.ELOOP and not isinstance(exc, UnsafePath):
            raise UnsafePath(exc.errno, "refusing a component that became a link") from None
        raise
    finally:
        for fd in stack:
            os.close(fd)


def walk(dirfd: int, names: list[str], *, create: bool = False, mode: int = 0o755) -> int:
    """A new descriptor of the directory `names` beneath `dirfd` (mkdirat on the way with `create`)."""
    fd = os.dup(dirfd)
    try:
        for name in names:
            if create:
                try:
                    os.mkdir(name, mode, dir_fd=fd)  # mkdirat never follows a link at `name`
                except FileExistsError:
                    pass
            try:
                nfd = os.open(name, DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise UnsafePath(exc.errno, f"refusing {name!r}: not a directory of its own", name) from None
                raise
            os.close(fd)
            fd = nfd
        return fd
    except BaseException:
        os.close(fd)
        raise


def makedirs(dirfd: int, rel: str, mode: int = 0o755) -> int:
    """Create `rel` (each missing component) beneath `dirfd`; returns its descriptor."""
    return walk(dirfd, parts(rel), create=True, mode=mode)


def _regular(fd: int, rel: str, single_link: bool) -> os.stat_result:
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        raise UnsafePath(errno.EINVAL, f"refusing {rel!r}: not a regular file", rel)
    if single_link and st.st_nlink != 1:
        raise UnsafePath(errno.EMLINK, f"refusing {rel!r}: it has {st.st_nlink} links", rel)
    return st


def open_read(dirfd: int, rel: str, *, links_inside: bool = False, root: str | None = None) -> int:
    """A (blocking) read descriptor of the regular file `rel`; a FIFO or device is refused, never waited on."""
    fd = open_beneath(dirfd, rel, READ_FLAGS, links_inside=links_inside, root=root)
    try:
        _regular(fd, rel, single_link=False)
        os.set_blocking(fd, True)
        return fd
    except BaseException:
        os.close(fd)
        raise


def read_bytes(dirfd: int, rel: str, offset: int = 0, limit: int = -1) -> bytes | None:
    """Up to `limit` bytes of `rel` from `offset`; None when it is missing or refused."""
    try:
        fd = open_read(dirfd, rel)
    except OSError:
        return None
    try:
        size = os.fstat(fd).st_size
        if offset >= size:
            return b""
        want = size - offset if limit < 0 else min(limit, size - offset)
        return os.pread(fd, want, offset)
    finally:
        os.close(fd)


def read_text(dirfd: int, rel: str, max_bytes: int = MAX_JSON_BYTES) -> str | None:
    data = read_bytes(dirfd, rel, 0, max_bytes + 1)
    if data is None or len(data) > max_bytes:
        return None
    return data.decode("utf-8", "replace")


def read_path(path: str, max_bytes: int = MAX_JSON_BYTES) -> bytes | None:
    """The file at `path`, whose directory the run may write (its parent's parents are the platform's).

    None when missing, refused (a link, a FIFO, a directory swapped for a link) or over `max_bytes`.
    """
    try:
        dirfd = open_dir(os.path.dirname(path))
    except OSError:
        return None
    try:
        data = read_bytes(dirfd, os.path.basename(path), 0, max_bytes + 1)
    finally:
        os.close(dirfd)
    return None if data is None or len(data) > max_bytes else data


def append(dirfd: int, rel: str, data: bytes, mode: int = 0o644) -> None:
    """Append to `rel` (created if missing, its directories too) without following links."""
    fd = open_append(dirfd, rel, mode)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)


def open_append(dirfd: int, rel: str, mode: int = 0o644) -> int:
    """An append descriptor of `rel` (created if missing), refusing links, FIFOs and hard links."""
    *dirs, name = parts(rel)
    dfd = walk(dirfd, dirs, create=True)
    try:
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        fd = os.open(name, flags, mode, dir_fd=dfd)
        try:
            _regular(fd, rel, single_link=True)
            os.set_blocking(fd, True)
            return fd
        except BaseException:
            os.close(fd)
            raise
    finally:
        os.close(dfd)


def write_atomic(dirfd: int, rel: str, data: bytes, mode: int = 0o644, *, durable: bool = True) -> None:
    """Replace `rel` with `data`: a fresh temporary file, then renameat over whatever was there."""
    *dirs, name = parts(rel)
    dfd = walk(dirfd, dirs, create=True)
    try:
        tmp = f".{name}.{os.getpid()}.tmp"
        try:
            os.unlink(tmp, dir_fd=dfd)  # our own leftover from a crash (unlinkat: a link itself goes)
        except FileNotFoundError:
            pass
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=dfd)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
    finally:
        os.close(dfd)


def unlink(dirfd: int, rel: str) -> bool:
    """Remove `rel` (a link itself, never its target); False when it was not there."""
    *dirs, name = parts(rel)
    try:
        dfd = walk(dirfd, dirs)
    except FileNotFoundError:
        return False
    try:
        os.unlink(name, dir_fd=dfd)
        return True
    except FileNotFoundError:
        return False
    finally:
        os.close(dfd)
