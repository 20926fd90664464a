"""v3: executor details (raw Kubernetes text, counts, who can act) on timeline events."""

from __future__ import annotations

from alembic import op
from sqlalchemy import inspect, text

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    conn = op.get_bind()
    cols = {c["name"] for c in inspect(conn).get_columns("gpuplat_events")}
    if "details" not in cols:  # v1 databases created after this column was added already have it
        conn.execute(text("ALTER TABLE gpuplat_events ADD COLUMN details JSON"))
