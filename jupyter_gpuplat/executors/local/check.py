"""`gpuplat cluster check --local`: what this machine enforces between local runs, before a server runs.

The same report `GET capacity` gives as `isolation` (LocalExecutor.isolation), made here without
a server: the cgroup hierarchies the server could use, and, for `run_as = user`, every reason
the server would refuse to start (not root, an interpreter or launcher file the run accounts
cannot reach). Fit means a server with these settings starts, and `user` mode holds.
"""

from __future__ import annotations

from typing import Any

from ..base import ExecutorError
from .executor import LocalExecutor


def check_local(run_as: str, python: str | None = None, gpus: int | None = None) -> dict[str, Any]:
    """{"fit", "run_as", "problems", "controls"}: what a LocalExecutor with these settings would enforce."""
    settings: dict[str, Any] = {"run_as": run_as, "gpus": gpus}
    if python:
        settings["python"] = python
    try:
        executor = LocalExecutor(**settings)
    except ExecutorError as exc:
        problems = [exc.message.split(": ", 1)[-1]]
        executor = LocalExecutor(**{**settings, "run_as": "server"})
        report = executor.isolation()
        return {"fit": False, "run_as": run_as, "problems": problems, "controls": report["controls"]}
    report = executor.isolation()
    return {"fit": True, "run_as": run_as, "problems": [], "controls": report["controls"]}


def to_text(report: dict[str, Any]) -> str:
    if report["fit"]:
        lines = [f"local executor, run_as = {report['run_as']}: fit; what this machine enforces between runs:"]
    else:
        lines = [f"local executor, run_as = {report['run_as']}: NOT FIT, a server with it refuses to start:"]
        lines += [f"  fail  {p}" for p in report["problems"]]
        lines.append("what run_as = server would enforce instead:")
    for c in report["controls"]:
        lines.append(f"  {'ok  ' if c['enforced'] else 'warn'}  {c['name']}: {c['detail']}")
    return "\n".join(lines)
