"""v12: start estimates: each run's first estimate (gpuplat_run_etas), for calibration in insights."""

from __future__ import annotations

from alembic import op

from jupyter_gpuplat.store.estimates import run_etas

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    run_etas.create(op.get_bind(), checkfirst=True)
