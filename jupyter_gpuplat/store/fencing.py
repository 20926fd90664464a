"""Fencing: a fenced store commits only while the leader epoch it was given is still current.

Every transaction that commits on a fenced engine first runs, inside that transaction,
`SELECT epoch FROM gpuplat_leader WHERE id = 1 FOR SHARE`. A newer epoch means another control
plane took over: `LostLeadership` is raised and the transaction is never committed (the pool
rolls it back). The share lock makes a new leader's epoch bump wait until our commit is done,
so a write is either committed before the takeover (and the new leader reloads it) or refused.

Reads (connections that never commit) pay nothing; unfenced stores (embedded mode) pay nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from sqlalchemy import Engine, event

from ..core.errors import LostLeadership

log = logging.getLogger("jupyter_gpuplat.store")

_CHECK = "SELECT epoch FROM gpuplat_leader WHERE id = 1 FOR SHARE"
# A fenced leader's transactions take milliseconds. One left open by a frozen process would hold
# row locks (and the share lock above) that the next leader waits on: the server ends it.
IDLE_IN_TRANSACTION_SECONDS = 5


class Fence:
    def __init__(self, engine: Engine, epoch: int, on_lost: Callable[[LostLeadership], None] | None) -> None:
        self.engine = engine
        self.epoch = epoch
        self.on_lost = on_lost
        self.refused = 0  # transactions refused since fenced
        event.listen(engine, "connect", self._on_connect)
        event.listen(engine, "commit", self._check)
        # Pooled sessions opened before fencing lack the setting above.
        engine.dispose()

    def _on_connect(self, dbapi_conn: Any, _rec: Any) -> None:
        cur = dbapi_conn.cursor()
        cur.execute(f"SET idle_in_transaction_session_timeout = {IDLE_IN_TRANSACTION_SECONDS * 1000}")
        cur.close()
        dbapi_conn.commit()

    def _check(self, conn: Any) -> None:
        row = conn.exec_driver_sql(_CHECK).first()
        current = None if row is None else int(row[0])
        if current == self.epoch:
            return
        self.refused += 1
        exc = LostLeadership(
            f"this control plane is no longer the leader (fencing epoch {current}, ours {self.epoch}): "
            "nothing was written",
            "the current leader serves requests; retry in a few seconds",
        )
        if self.refused == 1:
            log.error("write refused: %s", exc.message)
        if self.on_lost is not None:
            try:
                self.on_lost(exc)
            except Exception:  # the refusal itself must still reach the writer
                log.exception("the lost-leadership callback failed")
        raise exc
