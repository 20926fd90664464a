"""executors/safefs.py against what a run can plant in its own directory: real files, links, FIFOs."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from jupyter_gpuplat.executors import safefs


@pytest.fixture(params=["openat2", "walk"])
def run(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[int, Path, Path]]:
    """(a descriptor of the run's directory, the directory, a victim file outside it)."""
    saved = list(safefs._openat2)
    if request.param == "walk":
        safefs._openat2[:] = [None]  # as on a kernel without openat2
    d = tmp_path / "run"
    (d / ".gpuplat").mkdir(parents=True)
    victim = tmp_path / "victim"
    victim.write_text("server-owned")
    (d / "ok.txt").write_text("fine")
    os.symlink(victim, d / "link")
    os.symlink(tmp_path, d / "dirlink")
    os.mkfifo(d / "fifo")
    os.symlink("ok.txt", d / "inside")
    os.symlink(str(d / "ok.txt"), d / "inside-absolute")
    fd = safefs.open_dir(str(d))
    yield fd, d, victim
    os.close(fd)
    safefs._openat2[:] = saved


def test_reads_follow_no_link_and_never_wait_on_a_fifo(run: tuple[int, Path, Path]) -> None:
    fd, d, _ = run
    assert safefs.read_bytes(fd, "ok.txt") == b"fine"
    for rel in ("link", "dirlink/victim", "fifo", "inside", "../victim", "/etc/passwd", "a//b", "."):
        assert safefs.read_bytes(fd, rel) is None, rel
    assert safefs.read_path(str(d / "link")) is None and safefs.read_path(str(d / "ok.txt")) == b"fine"


def test_links_inside_resolve_only_where_asked_and_only_inside(run: tuple[int, Path, Path]) -> None:
    fd, d, _ = run
    for rel in ("inside", "inside-absolute"):
        opened = safefs.open_read(fd, rel, links_inside=True, root=str(d))
        assert os.read(opened, 10) == b"fine"
        os.close(opened)
    for rel in ("link", "dirlink/victim"):
        with pytest.raises(safefs.UnsafePath):
            safefs.open_read(fd, rel, links_inside=True, root=str(d))


def test_writes_never_go_through_a_planted_link_or_hard_link(run: tuple[int, Path, Path]) -> None:
    fd, d, victim = run
    with pytest.raises(OSError):
        safefs.append(fd, "link", b"pwned")
    with pytest.raises(OSError):
        safefs.append(fd, "dirlink/victim", b"pwned")
    os.link(d / "ok.txt", d / "hard")  # a run's own file with a second name
    with pytest.raises(safefs.UnsafePath):
        safefs.append(fd, "hard", b"x")
    safefs.write_atomic(fd, "link", b"replaced")  # renameat replaces the link itself
    assert not (d / "link").is_symlink() and (d / "link").read_bytes() == b"replaced"
    assert victim.read_text() == "server-owned"
    safefs.append(fd, ".gpuplat/log", b"a")
    safefs.append(fd, ".gpuplat/log", b"b")
    assert (d / ".gpuplat" / "log").read_bytes() == b"ab"
    os.rename(d / ".gpuplat", d / "old")
    os.symlink(victim.parent, d / ".gpuplat")  # the state directory swapped for a link
    with pytest.raises(safefs.UnsafePath):
        safefs.write_atomic(fd, ".gpuplat/exit.json", b"{}")
    assert not (victim.parent / "exit.json").exists()
    assert safefs.unlink(fd, "inside") and (d / "ok.txt").exists()
