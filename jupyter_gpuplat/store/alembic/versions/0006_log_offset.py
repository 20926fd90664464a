"""v6: the indexer's position in the binary metrics log, a column.

The code before v6 kept it in the params JSON (under "gpuplat:metrics_log_offset").
"""

from __future__ import annotations

from alembic import op
from sqlalchemy import inspect, select, text

from jupyter_gpuplat.store import schema

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    conn = op.get_bind()
    cols = {c["name"] for c in inspect(conn).get_columns("gpuplat_run_tracking")}
    if "log_offset" not in cols:  # v4 databases created after this column was added already have it
        conn.execute(text("ALTER TABLE gpuplat_run_tracking ADD COLUMN log_offset BIGINT NOT NULL DEFAULT 0"))
    rt = schema.run_tracking
    key = "gpuplat:metrics_log_offset"
    for run_id, params in conn.execute(select(rt.c.run_id, rt.c.params)).all():
        if isinstance(params, dict) and key in params:
            rest = {k: v for k, v in params.items() if k != key}
            conn.execute(rt.update().where(rt.c.run_id == run_id).values(params=rest, log_offset=int(params[key])))
