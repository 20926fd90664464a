"""The leader lock of team mode: one PostgreSQL session advisory lock, held by one control plane.

The lock lives on one dedicated, non-pooled autocommit connection: a session lock is released
only when it is unlocked or its session ends, so a pool (or PgBouncer in transaction mode) that
hands the session to someone else would break it. The server frees the lock when it sees the
session end: at once when the holder's process dies or its backend is terminated, and after
`idle_session_timeout` (PostgreSQL 14+) when the holder is frozen or cut off and sends nothing.

On acquiring, the holder bumps the fencing epoch in `gpuplat_leader` and keeps it: its Store is
then fenced (`Store.fence`) so a write made after someone else took over is refused.
"""

from __future__ import annotations

import logging
import threading
import time

import psycopg
from sqlalchemy.engine import make_url

log = logging.getLogger("jupyter_gpuplat.leader")

# The advisory lock key: "gpuplat" as 7 bytes, one bigint shared by every control plane of a database.
LEADER_KEY = int.from_bytes(b"gpuplat", "big")
CONNECT_TIMEOUT_SECONDS = 5

_BUMP = (
    "INSERT INTO gpuplat_leader (id, epoch, holder, acquired_at) VALUES (1, 1, %(holder)s, %(at)s) "
    "ON CONFLICT (id) DO UPDATE SET epoch = gpuplat_leader.epoch + 1, holder = EXCLUDED.holder, "
    "acquired_at = EXCLUDED.acquired_at RETURNING epoch"
)


def psycopg_conninfo(url: str) -> str:
    """A SQLAlchemy URL as a libpq URI; anything but PostgreSQL is refused with the reason."""
    u = make_url(url)
    if u.get_backend_name() != "postgresql":
        raise ValueError(
            f"the leader lock needs PostgreSQL, not {u.get_backend_name()} ({u.render_as_string()}): "
            "team mode runs several control planes on one shared database; use postgresql+psycopg://..."
        )
    return u.set(drivername="postgresql").render_as_string(hide_password=False)


class LeaderLock:
    """`try_acquire` → the new epoch or None; `heartbeat` keeps the session (and the lock) alive."""

    def __init__(self, url: str, *, holder: str, key: int = LEADER_KEY, idle_timeout_seconds: float = 12.0) -> None:
        self.conninfo = psycopg_conninfo(url)
        self.holder = holder
        self.key = key
        self.idle_timeout_seconds = idle_timeout_seconds
        self.epoch: int | None = None
        # True when the server enforces idle_session_timeout (PostgreSQL 14+); False: a frozen
        # holder keeps the lock until its TCP connection dies.
        self.server_frees_idle = False
        self._conn: psycopg.Connection[tuple[object, ...]] | None = None
        self._mutex = threading.Lock()  # one statement at a time on the connection
        self._beat: threading.Thread | None = None
        self._beat_ok = False
        self.superseded: int | None = None  # a newer epoch a heartbeat saw (someone else bumped it)

    @property
    def held(self) -> bool:
        return self.epoch is not None and not self.lost

    @property
    def lost(self) -> bool:
        """We held the lock and its session is gone: someone else may hold it now."""
        return self.epoch is not None and (self._conn is None or self._conn.closed or self._conn.broken)

    def _connect(self) -> psycopg.Connection[tuple[object, ...]]:
        conn = psycopg.connect(
            self.conninfo,
            autocommit=True,
            connect_timeout=CONNECT_TIMEOUT_SECONDS,
            application_name=f"gpuplat-leader {self.holder}"[:63],
            # A dead peer is noticed by the kernel too (tcp_user_timeout: unacknowledged data).
            keepalives=1,
            keepalives_idle=5,
            keepalives_interval=2,
            keepalives_count=3,
            tcp_user_timeout=int(self.idle_timeout_seconds * 1000),
        )
        if conn.info.server_version >= 140000:
            conn.execute(f"SET idle_session_timeout = {int(self.idle_timeout_seconds * 1000)}")
            self.server_frees_idle = True
        else:
            log.warning(
                "PostgreSQL %s has no idle_session_timeout (14+): a frozen leader keeps the lock until its "
                "connection dies; upgrade the server for a bounded failover",
                conn.info.server_version,
            )
        # No statement of ours may hang past the lease (a bump waiting on a stuck fenced write).
        conn.execute(f"SET statement_timeout = {int(self.idle_timeout_seconds * 1000)}")
        return conn

    def try_acquire(self) -> int | None:
        """Take the lock if it is free: bump and return the fencing epoch; None while another holds it."""
        with self._mutex:
            if self.epoch is not None:
                if self.lost:
                    raise RuntimeError("this leader lock was lost; a new LeaderLock must campaign again")
                return self.epoch  # already ours: advisory locks count, never take it twice
            if self._conn is None or self._conn.closed or self._conn.broken:
                self._conn = self._connect()
            conn = self._conn
            row = conn.execute("SELECT pg_try_advisory_lock(%s)", (self.key,)).fetchone()
            if not (row and row[0]):
                return None
            try:
                bumped = conn.execute(_BUMP, {"holder": self.holder, "at": time.time()}).fetchone()
            except psycopg.errors.UndefinedTable:
                conn.execute("SELECT pg_advisory_unlock(%s)", (self.key,))
                raise RuntimeError(
                    "the database has no gpuplat_leader table: run `gpuplat db upgrade` on it first"
                ) from None
            except BaseException:
                self._close()  # never keep the lock without an epoch
                raise
            assert bumped is not None
            self.epoch = int(bumped[0])  # type: ignore[call-overload]
            log.info("leader lock acquired by %s: epoch %d", self.holder, self.epoch)
            return self.epoch

    def heartbeat(self, timeout_seconds: float) -> bool:
        """One round trip on the lock's session within `timeout_seconds`: True if it is alive and still ours.

        The statement runs in a thread of its own: a cut network may block it far longer than the
        timeout. A beat still in flight is waited for again, never doubled.
        """
        if self.epoch is None or self.lost:
            return False
        if self._beat is None:
            self._beat = threading.Thread(target=self._beat_once, name="gpuplat-leader-heartbeat", daemon=True)
            self._beat.start()
        self._beat.join(timeout_seconds)
        if self._beat.is_alive():
            return False
        self._beat = None
        return self._beat_ok

    def _beat_once(self) -> None:
        ok = False
        try:
            with self._mutex:
                conn = self._conn
                if conn is not None:
                    row = conn.execute("SELECT epoch FROM gpuplat_leader WHERE id = 1").fetchone()
                    # Still our epoch: nobody took over (they would have bumped it).
                    ok = row is not None and row[0] == self.epoch
                    if row is not None and not ok:
                        self.superseded = int(row[0])  # type: ignore[call-overload]
        except psycopg.Error as exc:
            log.warning("leader heartbeat failed: %s", str(exc).strip().splitlines()[0] if str(exc) else exc)
        self._beat_ok = ok

    def release(self) -> None:
        """Unlock and close the session (closing alone frees the lock: the unlock only makes it prompt)."""
        # A heartbeat stuck on a cut network holds the mutex: then close without the unlock.
        stuck = self._beat is not None and self._beat.is_alive()
        locked = not stuck and self._mutex.acquire(timeout=CONNECT_TIMEOUT_SECONDS)
        try:
            conn = self._conn
            if locked and conn is not None and not conn.closed and not conn.broken and self.epoch is not None:
                try:
                    conn.execute("SELECT pg_advisory_unlock(%s)", (self.key,))
                except psycopg.Error:
                    pass
            self._close()
            self.epoch = None
        finally:
            if locked:
                self._mutex.release()

    def _close(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            except psycopg.Error:
                pass
            self._conn = None
