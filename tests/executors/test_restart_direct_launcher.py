"""The restart scenarios of test_restart.py with launcher.py spawned per run (`warm_launcher = False`).

test_restart.py runs them with the default, the warm launcher; the SIGKILL of the server must
lose nothing on either path.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from ..server import ServerProcess
from .test_restart import (
    test_sigkill_restart_reattaches_and_dispatches_in_order,
    test_stop_survives_restart_and_lost_process_is_reported,
)

__all__ = [
    "test_sigkill_restart_reattaches_and_dispatches_in_order",
    "test_stop_survives_restart_and_lost_process_is_reported",
]


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    srv = ServerProcess(tmp_path, extra_config={"LocalExecutor": {"warm_launcher": False}})
    srv.start()
    yield srv
    srv.stop()
    for run in srv.ok("GET", "runs", "ops")["runs"] if srv.proc and srv.proc.poll() is None else []:
        if run.get("pid"):
            try:
                os.killpg(run["pid"], signal.SIGKILL)
            except ProcessLookupError:
                pass
