"""The binary metrics log: SIGKILL safety, growth, reads while a run writes, the old CSV, other writers."""

from __future__ import annotations

import os
import signal
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np

from jupyter_gpuplat.core import metric_format as fmt
from jupyter_gpuplat.engine.metric_log import parse_records
from jupyter_gpuplat.engine.metrics import MetricsIndexer
from jupyter_gpuplat.executors.artifacts import LocalArtifactReader
from jupyter_gpuplat.store import Store

from ..waiting import until, wait_for

PY = sys.executable

# Logs as fast as it can. After each call returns it stores the step in progress.bin (a
# mapped word: no system call), so after a kill the test knows the last call that returned.
TIGHT_LOOP = """
import itertools, mmap, os
from jupyter_gpuplat import tracking
fd = os.open("progress.bin", os.O_RDWR | os.O_CREAT)
os.ftruncate(fd, 8)
done = memoryview(mmap.mmap(fd, 8)).cast("q")
done[0] = -1
for step in itertools.count():
    tracking.log_metrics(step=step, loss=step * 0.5, acc=-step)
    done[0] = step
    if step == MARK:
        open("marker", "w").close()
"""


async def test_sigkill_mid_loop_keeps_every_returned_call(api: Any, platform: Any, tmp_path: Path) -> None:
    mark = 100_000  # 40-byte records: 4 MB, past the log's initial 1 MiB
    run = await api.submit(command=[PY, "-c", TIGHT_LOOP.replace("MARK", str(mark))])
    art = tmp_path / "artifacts" / run["id"]
    await wait_for(lambda: _exists(art / "marker"), 30, "the run to log past the marker")
    pid = (await api.run(run["id"]))["pid"]
    os.killpg(pid, signal.SIGKILL)  # mid-loop: it logs on after the marker
    final = await api.wait_status(run["id"], "failed", "stopped")
    assert "SIGKILL" in final["message"]
    (last,) = struct.unpack("<q", (art / "progress.bin").read_bytes())
    assert last >= mark

    m = await api.ok("GET", f"runs/{run['id']}/metrics", max_points="1000")
    n = m["loss"]["count"]
    # every call that returned (0..last) is served; the one in flight at the kill may be too
    assert n in (last + 1, last + 2) and m["acc"]["count"] == n
    assert m["loss"]["steps"][-1] == n - 1 and m["acc"]["values"][-1] == -(n - 1)
    series = platform.engine.store.metrics.series(run["id"])  # what GET metrics downsamples, point by point
    assert np.array_equal(series["loss"][0], np.arange(n)) and np.array_equal(series["acc"][0], np.arange(n))
    assert np.array_equal(series["loss"][1], np.arange(n) * 0.5) and np.array_equal(series["acc"][1], -np.arange(n))
    log = art / ".gpuplat" / "metrics.bin"
    assert log.stat().st_size > fmt.INITIAL_BYTES  # it grew while being written
    assert not (art / ".gpuplat" / "metrics.csv").exists()


async def _exists(path: Path) -> bool:
    return path.exists()


OLD_CSV = (
    b'#k ["loss","acc"]\n0,1700000000.000,1.0,0.0\n1,1700000000.100,0.5,0.25\n'
    b'#k ["loss"]\n2,1700000000.200,0.25\n3,1700000000.300,nan\n'
)


async def test_runs_recorded_as_csv_still_show_their_metrics(api: Any) -> None:
    # A run from before the log existed: its tracking wrote metrics.csv lines.
    code = f"import os\nos.makedirs('.gpuplat', exist_ok=True)\nopen('.gpuplat/metrics.csv', 'wb').write({OLD_CSV!r})\n"
    run = await api.submit(command=[PY, "-c", code])
    await api.wait_status(run["id"], "succeeded")
    m = await api.ok("GET", f"runs/{run['id']}/metrics")
    assert m["loss"]["steps"] == [0, 1, 2, 3] and m["loss"]["values"] == [1.0, 0.5, 0.25, None]
    assert m["acc"] == {"steps": [0, 1], "values": [0.0, 0.25], "count": 2}


# The parent has the log; a forked child and a second process of the run cannot, and write
# metrics.csv; threads share the parent's log. Every point of each is indexed.
MANY_WRITERS = """
import os, subprocess, sys, threading
from jupyter_gpuplat import tracking
sys.setswitchinterval(1e-6)  # threads take turns inside calls as often as they can
tracking.log_metrics(step=0, loss=0.0)
pid = os.fork()
if pid == 0:
    for s in range(100):
        tracking.log_metrics(step=s, child=s + 0.5)
    os._exit(0)
other = subprocess.Popen([sys.executable, "-c",
    "from jupyter_gpuplat import tracking\\nfor s in range(50): tracking.log_metrics(step=s, other=-s)\\n"
    "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
def worker(k):
    for s in range(2000):
        tracking.log_metrics(step=s, **{f"t{k}": k * 10000 + s})
threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
for t in threads: t.start()
for s in range(1, 2000):
    tracking.log_metrics(step=s, loss=s / 2)
for t in threads: t.join()
os.waitpid(pid, 0)
other.communicate(b"")
"""


async def test_forked_children_other_processes_and_threads_all_indexed(api: Any, tmp_path: Path) -> None:
    run = await api.submit(command=[PY, "-c", MANY_WRITERS])
    await api.wait_status(run["id"], "succeeded")
    m = await api.ok("GET", f"runs/{run['id']}/metrics", max_points="100000")
    assert m["loss"]["steps"] == list(range(2000)) and m["loss"]["values"] == [s / 2 for s in range(2000)]
    assert m["child"]["values"] == [s + 0.5 for s in range(100)]
    assert m["other"]["values"] == [-s for s in range(50)]
    for k in range(4):
        assert m[f"t{k}"]["steps"] == list(range(2000)), k
        assert m[f"t{k}"]["values"] == [k * 10000 + s for s in range(2000)]
    state = tmp_path / "artifacts" / run["id"] / ".gpuplat"
    assert (state / "metrics.bin").exists() and (state / "metrics.csv").exists()


# Logs `half` calls, says so, waits for the gate, logs the rest under other names, and after
# it exits a second process of the same run appends to the same log.
GATED = """
import os, sys, time
from jupyter_gpuplat import tracking
half = int(sys.argv[1])
for s in range(half):
    tracking.log_metrics(step=s, loss=s, acc=s / 2)
open(os.path.join(sys.argv[2], "half"), "w").close()
while not os.path.exists(os.path.join(sys.argv[2], "gate")):
    time.sleep(0.01)
for s in range(half, 2 * half):
    tracking.log_metrics(step=s, loss=s)
    if s % 7 == 0:
        tracking.log_metrics(step=s, val=s * 3.0)
"""


def test_indexer_reads_while_the_run_writes_and_resumes_after_a_restart(tmp_path: Path) -> None:
    half = 60_000
    rid = "r-gated"
    art = tmp_path / "art" / rid
    env = {**os.environ, "GPUPLAT_ARTIFACTS_DIR": str(art), "GPUPLAT_RUN_ID": rid}
    store = Store(f"sqlite:///{tmp_path / 'db.sqlite'}")
    reader = LocalArtifactReader(str(tmp_path / "art"))
    indexer = MetricsIndexer(store, reader)
    proc = subprocess.Popen([PY, "-c", GATED, str(half), str(tmp_path)], env=env)
    try:
        _wait_path(tmp_path / "half", proc)
        assert indexer.catch_up(rid) == 2 * half
        assert store.metrics.summaries([rid])[rid]["acc"]["count"] == half
        (tmp_path / "gate").touch()
        reads = []
        while proc.poll() is None:  # read as it writes (the first read above was of a live writer too)
            reads.append(indexer.catch_up(rid))
        assert proc.wait() == 0
    finally:
        proc.kill()
        proc.wait()
    reads.append(indexer.catch_up(rid))
    val_steps = [s for s in range(half, 2 * half) if s % 7 == 0]
    assert sum(reads) == half + len(val_steps)
    # a second process of the run appends after the first's last record
    subprocess.run([PY, "-c", "from jupyter_gpuplat import tracking\ntracking.log_metrics(step=-1, loss=-1.0)"],
                   env=env, check=True, timeout=60)  # fmt: skip
    # a restarted control plane (new indexer, names read back from the file) resumes, no duplicates
    again = MetricsIndexer(store, reader)
    assert again.catch_up(rid) == 1 and again.catch_up(rid) == 0
    series = store.metrics.series(rid)
    assert series["loss"][0].tolist() == [*range(2 * half), -1]
    assert series["loss"][1].tolist() == [*map(float, range(2 * half)), -1.0]
    assert series["acc"][1].tolist() == [s / 2 for s in range(half)]
    assert series["val"][0].tolist() == val_steps
    assert not (art / ".gpuplat" / "metrics.csv").exists()
    # a clean exit gives back the reserved tail: the file ends at its last record
    raw = (art / ".gpuplat" / "metrics.bin").read_bytes()
    assert fmt.committed(raw[:64]) == len(raw)
    store.close()


def _wait_path(path: Path, proc: subprocess.Popen[bytes], timeout: float = 30) -> None:
    def there() -> bool:
        assert path.exists() or proc.poll() is None, f"the writer exited with {proc.returncode}"
        return path.exists()

    until(there, str(path), timeout)


def _log(*records: bytes) -> bytes:
    body = b"".join(records)
    return fmt.MAGIC + struct.pack("<q", 64 + len(body)) + bytes(48) + body


def test_parse_records_stops_at_what_it_cannot_read_whole() -> None:
    names = fmt.names_record(["loss", "acc"])
    p = fmt.point_struct(2)
    at = 64
    pts = [p.pack(at, s, 1.0, s / 2, -s) for s in range(3)]
    data = _log(names, *pts)[64:]
    out: dict[str, Any] = {}
    end = parse_records(data, 64, lambda _: None, out)
    assert end == 64 + len(data)
    assert np.concatenate(out["loss"][0]).tolist() == [0, 1, 2]
    assert np.concatenate(out["acc"][1]).tolist() == [0.0, -1.0, -2.0]
    # a cut record, a zero (unwritten) word, a point naming no names record: stop before each
    for tail in (pts[0][:-8], bytes(40), p.pack(8, 9, 1.0, 0, 0)):
        out = {}
        assert parse_records(data + tail, 64, lambda _: None, out) == 64 + len(data)
    # a read that starts after the names record asks for it
    out = {}
    asked = []
    end = parse_records(pts[1], 64 + len(names) + 40, lambda a: asked.append(a) or ["loss", "acc"], out)
    assert asked == [64] and np.concatenate(out["loss"][1]).tolist() == [0.5]
    assert fmt.committed(b"not a log" + bytes(16)) is None and fmt.committed(_log()[:16]) == 64


def test_a_log_this_version_cannot_write_is_left_alone(tmp_path: Path) -> None:
    state = tmp_path / ".gpuplat"
    state.mkdir()
    other = b"GPMETR\x00\x02" + bytes(56) + b"records of a later format"
    (state / "metrics.bin").write_bytes(other)
    env = {**os.environ, "GPUPLAT_ARTIFACTS_DIR": str(tmp_path)}
    code = "from jupyter_gpuplat import tracking\ntracking.log_metrics(step=3, loss=0.5)\n"
    done = subprocess.run([PY, "-c", code], env=env, capture_output=True, text=True, timeout=60, check=True)
    assert "metrics go to metrics.csv" in done.stderr
    assert (state / "metrics.bin").read_bytes() == other
    assert (state / "metrics.csv").read_text().splitlines()[0] == '#k ["loss"]'
