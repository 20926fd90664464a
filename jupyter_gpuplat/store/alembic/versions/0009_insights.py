"""v9 (insights): refusals at submit are recorded; runs are found by queue and creation or end time."""

from __future__ import annotations

from alembic import op
from sqlalchemy import inspect, text

from jupyter_gpuplat.store.insights import refusals

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    conn = op.get_bind()
    refusals.create(conn, checkfirst=True)
    indexes = {ix["name"] for ix in inspect(conn).get_indexes("gpuplat_runs")}
    if "ix_runs_queue_created" not in indexes:
        conn.execute(text("CREATE INDEX ix_runs_queue_created ON gpuplat_runs (queue, created_at)"))
    if "ix_runs_queue_finished" not in indexes:  # runs created before a range and still alive in it
        conn.execute(text("CREATE INDEX ix_runs_queue_finished ON gpuplat_runs (queue, finished_at)"))
