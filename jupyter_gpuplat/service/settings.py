"""The platform's settings: one class read by both server apps.

`GpuPlat` (the Jupyter server extension) and `GpuPlatServer` (`gpuplat server`, team mode's
control plane) build the same `Platform` from the same eight settings, so they are declared
once here. A plain `HasTraits`, not a `Configurable`: each app keeps its own config section
(`c.GpuPlat.db_url`, `c.GpuPlatServer.db_url`) and adds none; where the two differ in a
default, each app says so with its own `@default`.
"""

from __future__ import annotations

from traitlets import Float, HasTraits, Int, Type, Unicode

from ..executors.base import Executor
from ..executors.local.executor import LocalExecutor
from ..store.store import DEFAULT_BUSY_TIMEOUT_SECONDS


class PlatformSettings(HasTraits):
    """Where the platform keeps its state and how it runs work: the traits both server apps read."""

    config_file = Unicode(
        "",
        config=True,
        help="Platform config (YAML) applied declaratively when the platform starts (in team mode: when this "
        "control plane is elected leader); empty keeps what the store has.",
    )
    db_url = Unicode(
        config=True,
        help="SQLAlchemy URL of the store: SQLite (the embedded default, in Jupyter's data directory) or "
        "postgresql+psycopg://user:pw@host/db. `gpuplat server` takes PostgreSQL only (default: $GPUPLAT_DB_URL) "
        "and refuses a SQLite URL at start.",
    )
    artifacts_root = Unicode(
        config=True,
        help="Directory holding each run's working directory, logs and outputs (in team mode a volume every "
        "control plane mounts).",
    )
    default_user = Unicode(
        config=True,
        help="Platform username of requests whose identity names no user: the holder of a single-user server's own "
        "token (default: the server's account); in team mode none with the Hub provider (default: gpuplat).",
    )
    executor_class = Type(
        default_value=LocalExecutor,
        klass=Executor,
        config=True,
        help="Executor that starts and observes runs.",
    )
    safety_tick_seconds = Float(
        30.0, config=True, help="Seconds between safety wake-ups of the dispatcher (it is event-driven besides)."
    )
    min_free_artifacts_bytes = Int(
        64 * 2**20,
        config=True,
        help="Free bytes the artifacts disk must have for a run to start; below it a run fails at once with "
        "reason DiskFull (a run started on a full disk could write no log and no exit record). 0 turns the check off.",
    )
    db_busy_timeout_seconds = Float(
        DEFAULT_BUSY_TIMEOUT_SECONDS,
        config=True,
        help="Seconds a write waits for another writer of a locked SQLite file before the request gets a 503 "
        "(StoreUnavailable) and the engine keeps the write to retry. The store runs on the server's loop, so a "
        "locked database stalls the server at most this long per write.",
    )
