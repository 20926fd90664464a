"""v5: runs from the user's directory: what code ran (snapshot, git) and where it started."""

from __future__ import annotations

from alembic import op
from sqlalchemy import inspect, text

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    conn = op.get_bind()
    cols = {c["name"] for c in inspect(conn).get_columns("gpuplat_runs")}
    if "code" not in cols:  # v1 databases created after these columns were added already have them
        conn.execute(text("ALTER TABLE gpuplat_runs ADD COLUMN code JSON"))
    if "working_dir" not in cols:
        conn.execute(text("ALTER TABLE gpuplat_runs ADD COLUMN working_dir TEXT"))
