"""v4: metrics and params recorded by runs through jupyter_gpuplat.tracking."""

from __future__ import annotations

from alembic import op

from jupyter_gpuplat.store import schema

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    schema.metadata.create_all(op.get_bind(), tables=[schema.metric_chunks, schema.run_tracking])
