"""v8 (team mode): the leader row for fencing; 64-bit ids on PostgreSQL.

gpuplat_leader gets its one row (id 1, epoch 0): the leader bumps the epoch, it never inserts.
Events, runs and config versions were SERIAL (int4, 2^31 ids) on PostgreSQL: widen the columns
and their sequences. SQLite's INTEGER PRIMARY KEY is already 64-bit: nothing to do there.
"""

from __future__ import annotations

from alembic import op
from sqlalchemy import text

from jupyter_gpuplat.store import schema

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

_IDS = [("gpuplat_events", "id"), ("gpuplat_runs", "seq"), ("gpuplat_config", "version")]


def upgrade() -> None:
    conn = op.get_bind()
    schema.metadata.create_all(conn, tables=[schema.leader])
    if conn.execute(schema.leader.select().where(schema.leader.c.id == 1)).first() is None:
        conn.execute(schema.leader.insert().values(id=1, epoch=0, holder="", acquired_at=None))
    if conn.dialect.name != "postgresql":
        return
    for table, column in _IDS:
        conn.execute(text(f"ALTER TABLE {table} ALTER COLUMN {column} TYPE BIGINT"))
        seq = conn.execute(text("SELECT pg_get_serial_sequence(:t, :c)"), {"t": table, "c": column}).scalar()
        if seq:  # already quoted and schema-qualified by PostgreSQL
            conn.execute(text(f"ALTER SEQUENCE {seq} AS BIGINT"))
