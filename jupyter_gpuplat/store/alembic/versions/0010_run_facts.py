"""v10: ended runs' insight figures (gpuplat_run_facts), filled for the runs already ended; runs found by
queue or end time alone (what-if reads a period across every queue)."""

from __future__ import annotations

from alembic import op
from sqlalchemy import inspect, text

from jupyter_gpuplat.store import facts

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    conn = op.get_bind()
    facts.run_facts_table.create(conn, checkfirst=True)
    facts.backfill(conn)
    indexes = {ix["name"] for ix in inspect(conn).get_indexes("gpuplat_runs")}
    if "ix_runs_queued" not in indexes:
        conn.execute(text("CREATE INDEX ix_runs_queued ON gpuplat_runs (queued_at)"))
    if "ix_runs_finished" not in indexes:
        conn.execute(text("CREATE INDEX ix_runs_finished ON gpuplat_runs (finished_at)"))
