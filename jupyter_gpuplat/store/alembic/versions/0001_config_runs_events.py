"""v1: the platform config, runs and their timeline.

Built from the current table definitions, so later revisions check before adding a column
that databases created after it was declared already have.
"""

from __future__ import annotations

from alembic import op

from jupyter_gpuplat.store import schema

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    schema.metadata.create_all(op.get_bind(), tables=[schema.config, schema.runs, schema.events])
