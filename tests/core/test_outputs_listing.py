"""One listing entry per output file: a file kept with tracking.log_output from inside the run's
directory is listed once (as its copy under outputs/), not again as its source."""

from __future__ import annotations

import sys
from typing import Any

from jupyter_gpuplat.core.outputs import logged_names, one_per_file

CODE = """
import os, pathlib
from jupyter_gpuplat import tracking
out = pathlib.Path('out'); out.mkdir()
(out / 'summary.txt').write_text('loss 0.1')
tracking.log_output(out / 'summary.txt')
model = pathlib.Path('ckpt/model'); model.mkdir(parents=True)
(model / 'final.txt').write_text('weights')
tracking.log_output(model)
pathlib.Path('notes').mkdir()
pathlib.Path('notes/summary.txt').write_text('something else')  # same name, other bytes: its own file
pathlib.Path('other.txt').write_text('not logged')
tracking.log_output(pathlib.Path('other.txt'), name='renamed.txt')
"""


async def test_a_logged_file_from_the_run_directory_is_listed_once(api: Any) -> None:
    run = await api.submit(name="outs", command=[sys.executable, "-c", CODE])
    await api.wait_status(run["id"], "succeeded", "failed")
    done = await api.run(run["id"])
    assert done["status"] == "succeeded", done["message"]
    paths = [o["path"] for o in (await api.ok("GET", f"runs/{run['id']}/outputs"))["outputs"]]
    assert "outputs/summary.txt" in paths and "out/summary.txt" not in paths
    assert "outputs/model/final.txt" in paths and "ckpt/model/final.txt" not in paths
    assert "notes/summary.txt" in paths  # another file of the same name stays
    # renamed when logged: not a twin by name, so both stay (nothing is hidden on a guess)
    assert "other.txt" in paths and "outputs/renamed.txt" in paths
    assert len(paths) == len(set(paths))
    # listing the source's folder itself still shows it (and it still downloads)
    sub = [o["path"] for o in (await api.ok("GET", f"runs/{run['id']}/outputs/out"))["outputs"]]
    assert sub == ["out/summary.txt"]
    body = await api.ok("GET", f"runs/{run['id']}/outputs/out/summary.txt")
    assert body == b"loss 0.1"


def f(path: str, size: int = 3, modified: float = 1.5) -> dict[str, Any]:
    return {"path": path, "size": size, "modified": modified}


def test_one_per_file_drops_only_exact_twins_of_logged_outputs() -> None:
    logged = logged_names(
        b'{"name": "outputs/a.txt", "t": 1}\nnot json\n{"name": "outputs/dir", "t": 2}\n{"name": "elsewhere/x"}\n'
    )
    assert logged == {"outputs/a.txt", "outputs/dir"}
    files = [
        f("a.txt"),  # twin of outputs/a.txt: dropped
        f("out/a.txt"),  # twin: dropped
        f("b/a.txt", size=4),  # other size: kept
        f("c/a.txt", modified=2.0),  # other time: kept
        f("outputs/a.txt"),
        f("src/dir/k.bin"),  # twin of outputs/dir/k.bin (a logged directory): dropped
        f("src/k.bin"),  # not the same tail (dir/k.bin): kept
        f("outputs/dir/k.bin"),
        f("outputs/unlogged.txt"),
        f("unlogged.txt"),  # its outputs/ twin was not logged: kept
    ]
    kept = [x["path"] for x in one_per_file(files, logged)]
    assert kept == [
        "b/a.txt",
        "c/a.txt",
        "outputs/a.txt",
        "src/k.bin",
        "outputs/dir/k.bin",
        "outputs/unlogged.txt",
        "unlogged.txt",
    ]
    assert one_per_file(files, set()) == files
