"""v13: GPU truth: each run's `gpu_usage` (its GPU samples summarised), kept on the record when it ends."""

from __future__ import annotations

from alembic import op
from sqlalchemy import JSON, Column, inspect

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    cols = {c["name"] for c in inspect(op.get_bind()).get_columns("gpuplat_runs")}
    if "gpu_usage" not in cols:  # databases created after this column was added already have it
        # Runs ended before it keep null: their summary is computed from their samples when read.
        op.add_column("gpuplat_runs", Column("gpu_usage", JSON, nullable=True))
