"""v7: sweeps: a child names its parent; a sweep's children are listed by it."""

from __future__ import annotations

from alembic import op
from sqlalchemy import inspect, text

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    conn = op.get_bind()
    cols = {c["name"] for c in inspect(conn).get_columns("gpuplat_runs")}
    if "parent" not in cols:  # v1 databases created after this column was added already have it
        conn.execute(text("ALTER TABLE gpuplat_runs ADD COLUMN parent VARCHAR(32)"))
    indexes = {ix["name"] for ix in inspect(conn).get_indexes("gpuplat_runs")}
    if "ix_runs_parent_seq" not in indexes:
        conn.execute(text("CREATE INDEX ix_runs_parent_seq ON gpuplat_runs (parent, seq)"))
