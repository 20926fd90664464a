"""Fixtures of the client room only (the widget and notebook-client modules paste no copy of them).

- `client`: alice's `Client` on the module's `server` (each module declares its own server).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from jupyter_gpuplat.client import Client

from ..server import ServerProcess
from ..widget_env import alice


@pytest.fixture
def client(server: ServerProcess) -> Iterator[Client]:
    yield from alice(server)
