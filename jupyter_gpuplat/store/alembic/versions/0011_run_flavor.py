"""v11: flavors: the flavor (kind of GPU) a run was admitted on; null where its queue has none."""

from __future__ import annotations

from alembic import op
from sqlalchemy import inspect, text

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    conn = op.get_bind()
    cols = {c["name"] for c in inspect(conn).get_columns("gpuplat_runs")}
    if "flavor" not in cols:  # databases created after this column was added already have it
        conn.execute(text("ALTER TABLE gpuplat_runs ADD COLUMN flavor VARCHAR(63)"))
